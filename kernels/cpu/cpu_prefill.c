/* cpu_prefill.c: the CPU backend's PREFILL, one work item per (sequence, row tile, KV head). */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "kernels/cpu/check.h"
#include "kernels/cpu/cpu_attn.h"
#include "kernels/cpu/cpu_rows.h"

/*
 * Returns how many query rows one item takes: as many as fill PK_CPU_QVECS query vectors
 * with the whole GQA group, at least one.
 */
static int32_t rows_per_item(const pk_prefill_args *a)
{
    int32_t group = a->num_q_heads / a->cache.num_kv_heads;
    return group >= PK_CPU_QVECS ? 1 : PK_CPU_QVECS / group;
}

/* Returns the number of row tiles of sequence s. */
static size_t seq_tiles(const pk_prefill_args *a, int32_t s, int32_t rows)
{
    int32_t qo_len = a->qo_indptr[s + 1] - a->qo_indptr[s];
    return ((size_t) qo_len + (size_t) rows - 1) / (size_t) rows;
}

/* Returns 0 if the CPU backend can run a, else a negative paged_error. */
int pk_cpu_prefill_check(const pk_prefill_args *a)
{
    return pk_check_prefill(a);
}

/* Returns the number of work items, 0 if a does not pass the check. */
size_t pk_cpu_prefill_items(const pk_prefill_args *a)
{
    if (pk_check_prefill(a) != 0)
        return 0;
    int32_t rows = rows_per_item(a);
    size_t tiles = 0;
    for (int32_t s = 0; s < a->num_seqs; s++)
        tiles += seq_tiles(a, s, rows);
    return tiles * (size_t) a->cache.num_kv_heads;
}

/*
 * Runs items [begin, end) of a checked PREFILL. Items are numbered sequence by sequence,
 * then row tile, then KV head; the sequence of begin is found by a walk over qo_indptr.
 */
void pk_cpu_prefill_run(const pk_prefill_args *a, size_t begin, size_t end)
{
    size_t heads = (size_t) a->cache.num_kv_heads;
    int32_t rows = rows_per_item(a);
    float k_table[256], v_table[256];
    if (a->cache.dtype == PAGED_DTYPE_FP8_E4M3) {
        pk_cpu_fp8_table(k_table, a->cache.k_scale);
        pk_cpu_fp8_table(v_table, a->cache.v_scale);
    }
    size_t qrow = (size_t) a->num_q_heads * (size_t) a->cache.head_dim * pk_dtype_size(a->q_dtype);

    int32_t s = 0;
    size_t first = 0;                   /* number of the first item of sequence s */
    for (size_t i = begin; i < end; i++) {
        while (s < a->num_seqs && i >= first + seq_tiles(a, s, rows) * heads) {
            first += seq_tiles(a, s, rows) * heads;
            s++;
        }
        if (s >= a->num_seqs)
            return;
        size_t tile = (i - first) / heads;
        int32_t qo_len = a->qo_indptr[s + 1] - a->qo_indptr[s];
        int32_t r0 = (int32_t) tile * rows;
        int32_t seq_len = a->seq_lens[s];
        size_t row = (size_t) a->qo_indptr[s] + (size_t) r0;
        pk_cpu_rows w = {
            .cache = &a->cache,
            .layer = a->layer,
            .table = a->block_tables + (size_t) s * (size_t) a->bt_stride,
            .seq_len = seq_len,
            .kv_head = (int32_t) ((i - first) % heads),
            .num_q_heads = a->num_q_heads,
            .q_dtype = a->q_dtype,
            .q = (const char *) a->q + row * qrow,
            .out = (char *) a->out + row * qrow,
            .rows = qo_len - r0 < rows ? qo_len - r0 : rows,
            /* Causal rows sit at the end of the context; without the mask every row
             * stands at the last position, which is where the window is measured from. */
            .pos0 = a->causal ? seq_len - qo_len + r0 : seq_len - 1,
            .pos_step = a->causal ? 1 : 0,
            .opts = &a->opts,
            .k_table = k_table,
            .v_table = v_table,
        };
        pk_cpu_attend_rows(&w);
    }
}
