/* kcase.c: one kernel case laid out for timing: input sets to rotate, block tables, slots, arguments. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/bench/kcase.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"

/* Returns the number of sets to rotate. */
int bk_sets(double set_bytes, size_t cache_bytes, double budget, int quick)
{
    double n = floor(4.0 * (double) cache_bytes / set_bytes) + 1.0;
    if (quick && n > 4.0)
        n = 4.0;
    if (n * set_bytes > budget)
        n = floor(budget / set_bytes);
    if (n < 1.0)
        n = 1.0;
    return (int) n;
}

/* Fills one set's block tables from its share of the permutation; unused columns get -1,
 * which no kernel may read. Returns nothing. */
static void fill_tables(int32_t *bt, int32_t seqs, int32_t len, int32_t B, int32_t stride,
                        const int32_t *blocks)
{
    int32_t used = bk_blocks(len, B);
    for (int32_t s = 0; s < seqs; s++)
        for (int32_t i = 0; i < stride; i++)
            bt[(size_t) s * (size_t) stride + (size_t) i] =
                i < used ? blocks[(size_t) s * (size_t) used + (size_t) i] : -1;
}

/* Lays out the case; dies on failure. */
void bk_case_build(struct bk_case *c, const struct bk_shape *s, int nsets, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->s = s;
    c->nsets = nsets;
    int32_t seqs = s->op == BK_APPEND ? 1 : s->seqs;
    int32_t len = s->op == BK_DECODE ? s->ctx : s->op == BK_PREFILL ? s->cached + s->qlen : s->tokens;
    int32_t per_seq = bk_blocks(len, s->B);
    double blocks = (double) nsets * seqs * per_seq;
    if (blocks > (double) INT32_MAX / s->B)
        bench_die("shape too large: %.0f blocks of %d tokens", blocks, (int) s->B);
    c->cache = (pk_cache) {
        .num_layers = s->op == BK_APPEND ? s->layers : 1,
        .num_blocks = (int32_t) blocks,
        .num_kv_heads = s->hkv,
        .head_dim = s->D,
        .block_size = s->B,
        .dtype = s->kv_dtype,
        .k_scale = s->kv_dtype == PAGED_DTYPE_FP8_E4M3 ? BK_FP8_SCALE : 1.0f,
        .v_scale = s->kv_dtype == PAGED_DTYPE_FP8_E4M3 ? BK_FP8_SCALE : 1.0f,
    };
    size_t qs = pk_dtype_size(s->q_dtype);
    int32_t *perm = bench_permutation(c->cache.num_blocks, seed);
    size_t per_set = (size_t) seqs * (size_t) per_seq;
    switch (s->op) {
    case BK_DECODE:
    case BK_PREFILL: {
        size_t rows = s->op == BK_DECODE ? (size_t) s->seqs : (size_t) s->seqs * (size_t) s->qlen;
        c->in_bytes = rows * (size_t) s->hq * (size_t) s->D * qs;
        c->out_bytes = c->in_bytes;
        c->bt_stride = per_seq;
        c->tables_per_set = (size_t) s->seqs * (size_t) per_seq;
        c->tables = bench_alloc((size_t) nsets * c->tables_per_set * sizeof *c->tables, "block tables");
        for (int i = 0; i < nsets; i++)
            fill_tables(c->tables + (size_t) i * c->tables_per_set, s->seqs, len, s->B, per_seq,
                        perm + (size_t) i * per_set);
        c->lens = bench_alloc((size_t) s->seqs * sizeof *c->lens, "sequence lengths");
        c->indptr = bench_alloc((size_t) (s->seqs + 1) * sizeof *c->indptr, "query offsets");
        for (int32_t q = 0; q < s->seqs; q++) {
            c->lens[q] = len;
            c->indptr[q] = q * (s->op == BK_PREFILL ? s->qlen : 1);
        }
        c->indptr[s->seqs] = s->seqs * (s->op == BK_PREFILL ? s->qlen : 1);
        break;
    }
    default: {
        /* The request's tokens fill consecutive slots of scattered blocks, as a sequence's do. */
        c->in_bytes = 2 * (size_t) s->layers * (size_t) s->tokens * (size_t) s->hkv * (size_t) s->D * qs;
        c->slots_per_set = (size_t) s->tokens;
        c->slots = bench_alloc((size_t) nsets * c->slots_per_set * sizeof *c->slots, "slots");
        for (int i = 0; i < nsets; i++)
            for (int32_t t = 0; t < s->tokens; t++)
                c->slots[(size_t) i * c->slots_per_set + (size_t) t] =
                    perm[(size_t) i * per_set + (size_t) (t / s->B)] * s->B + t % s->B;
        break;
    }
    }
    free(perm);
}

/* Frees the host arrays. */
void bk_case_free(struct bk_case *c)
{
    free(c->tables);
    free(c->lens);
    free(c->indptr);
    free(c->slots);
    memset(c, 0, sizeof *c);
}

/* Fills decode arguments of set i. */
void bk_case_decode_args(const struct bk_case *c, const struct bk_mem *m, int set, pk_decode_args *a)
{
    const struct bk_shape *s = c->s;
    *a = (pk_decode_args) {
        .cache = c->cache,
        .layer = 0,
        .num_seqs = s->seqs,
        .num_q_heads = s->hq,
        .q_dtype = s->q_dtype,
        .q = m->in + (size_t) set * c->in_bytes,
        .out = m->out + (size_t) set * c->out_bytes,
        .block_tables = m->tables + (size_t) set * c->tables_per_set,
        .bt_stride = c->bt_stride,
        .seq_lens = m->lens,
        .opts = { .sm_scale = 1.0f / sqrtf((float) s->D) },
        .workspace = m->workspace,
        .workspace_size = m->workspace_size,
    };
    a->cache.base = m->pool;
}

/* Fills prefill arguments of set i: the decode arguments of the set, its qlen query rows per
 * sequence causal at the end of the context. */
void bk_case_prefill_args(const struct bk_case *c, const struct bk_mem *m, int set, pk_prefill_args *a)
{
    const struct bk_shape *s = c->s;
    pk_decode_args d;
    bk_case_decode_args(c, m, set, &d);
    *a = (pk_prefill_args) {
        .cache = d.cache,
        .layer = d.layer,
        .num_seqs = d.num_seqs,
        .num_q_heads = d.num_q_heads,
        .q_dtype = d.q_dtype,
        .causal = 1,
        .total_q = s->seqs * s->qlen,
        .max_qo_len = s->qlen,
        .q = d.q,
        .out = d.out,
        .qo_indptr = m->indptr,
        .block_tables = d.block_tables,
        .bt_stride = d.bt_stride,
        .seq_lens = d.seq_lens,
        .opts = d.opts,
        .workspace = d.workspace,
        .workspace_size = d.workspace_size,
    };
}

/* Fills append arguments of set i: K is the first half of the set's input, V the second. */
void bk_case_append_args(const struct bk_case *c, const struct bk_mem *m, int set, pk_append_args *a)
{
    const struct bk_shape *s = c->s;
    const char *in = m->in + (size_t) set * c->in_bytes;
    *a = (pk_append_args) {
        .cache = c->cache,
        .layer_begin = 0,
        .num_layers = s->layers,
        .num_tokens = s->tokens,
        .src_dtype = s->q_dtype,
        .k = in,
        .v = in + c->in_bytes / 2,
        .slot_mapping = m->slots + (size_t) set * c->slots_per_set,
    };
    a->cache.base = m->pool;
}
