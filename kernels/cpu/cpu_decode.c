/* cpu_decode.c: the CPU backend's DECODE, one work item per (sequence, KV head). */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "kernels/cpu/check.h"
#include "kernels/cpu/cpu_attn.h"
#include "kernels/cpu/cpu_rows.h"

/* Returns 0 if the CPU backend can run a, else a negative paged_error. */
int pk_cpu_decode_check(const pk_decode_args *a)
{
    return pk_check_decode(a);
}

/*
 * Returns the number of work items: one per (sequence, KV head), each serving the whole
 * GQA group so every K/V row is converted once. 0 if a does not pass the check.
 */
size_t pk_cpu_decode_items(const pk_decode_args *a)
{
    if (pk_check_decode(a) != 0)
        return 0;
    return (size_t) a->num_seqs * (size_t) a->cache.num_kv_heads;
}

/* Runs items [begin, end) of a checked DECODE; item i is sequence i / H, KV head i % H, on
 * the sequence's layer (seq_layer) or a->layer. */
void pk_cpu_decode_run(const pk_decode_args *a, size_t begin, size_t end)
{
    size_t heads = (size_t) a->cache.num_kv_heads;
    size_t items = (size_t) a->num_seqs * heads;
    float k_table[256], v_table[256];
    if (a->cache.dtype == PAGED_DTYPE_FP8_E4M3) {
        pk_cpu_fp8_table(k_table, a->cache.k_scale);
        pk_cpu_fp8_table(v_table, a->cache.v_scale);
    }
    size_t qrow = (size_t) a->num_q_heads * (size_t) a->cache.head_dim * pk_dtype_size(a->q_dtype);
    for (size_t i = begin; i < end && i < items; i++) {
        size_t s = i / heads;
        pk_cpu_rows w = {
            .cache = &a->cache,
            .layer = pk_decode_seq_layer(a, s),
            .table = a->block_tables + s * (size_t) a->bt_stride,
            .seq_len = a->seq_lens[s],
            .kv_head = (int32_t) (i % heads),
            .num_q_heads = a->num_q_heads,
            .q_dtype = a->q_dtype,
            .q = a->q_seq != NULL ? a->q_seq[s] : (const char *) a->q + s * qrow,
            .out = a->q_seq != NULL ? a->out_seq[s] : (char *) a->out + s * qrow,
            .rows = 1,
            .pos0 = a->seq_lens[s] - 1,
            .pos_step = 0,
            .opts = &a->opts,
            .k_table = k_table,
            .v_table = v_table,
        };
        pk_cpu_attend_rows(&w);
    }
}
