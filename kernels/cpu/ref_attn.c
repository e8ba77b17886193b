/* ref_attn.c: the reference attention of one query over one sequence's paged context. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "kernels/cpu/ref_attn.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/cpu/dtype.h"

/*
 * Returns the element index of context token j's key (kv 0) or value (kv 1) row, and
 * sets *scale to what its stored elements are multiplied by (the fp8 scale, else 1).
 */
static size_t ref_row(const pk_ref_seq *seq, int32_t kv, int32_t kv_head, int64_t j, float *scale)
{
    const pk_cache *c = seq->cache;
    int32_t block = seq->table[j / c->block_size];
    *scale = 1.0f;
    if (c->dtype == PAGED_DTYPE_FP8_E4M3)
        *scale = kv == 0 ? c->k_scale : c->v_scale;
    return pk_cache_index(c, seq->layer, kv, block, kv_head, (int32_t) (j % c->block_size));
}

/*
 * Two passes over the visible keys: the logits and their maximum first, then the
 * normalized weights applied to the values. Plain on purpose: it is the oracle.
 */
void pk_ref_attend(const pk_ref_seq *seq, const pk_ref_query *q, const pk_attn_opts *opts,
                   double *logits, double *out)
{
    const pk_cache *c = seq->cache;
    int32_t head_dim = c->head_dim;
    int64_t hi = (int64_t) q->pos + 1 < seq->seq_len ? (int64_t) q->pos + 1 : seq->seq_len;
    int64_t lo = 0;
    if (opts->window > 0 && (int64_t) q->pos - opts->window + 1 > 0)
        lo = (int64_t) q->pos - opts->window + 1;

    for (int32_t d = 0; d < head_dim; d++)
        out[d] = 0.0;
    if (lo >= hi)
        return;

    double max = -INFINITY;
    for (int64_t j = lo; j < hi; j++) {
        float scale;
        size_t row = ref_row(seq, 0, q->kv_head, j, &scale);
        double dot = 0.0;
        for (int32_t d = 0; d < head_dim; d++)
            dot += q->q[d] * (double) (pk_load(c->base, row + (size_t) d, c->dtype) * scale);
        double logit = (double) opts->sm_scale * dot;
        if (opts->soft_cap > 0.0f)
            logit = opts->soft_cap * tanh(logit / opts->soft_cap);
        if (opts->alibi_slopes != NULL)
            logit += (double) opts->alibi_slopes[q->q_head] * (double) (j - q->pos);
        logits[j] = logit;
        if (logit > max)
            max = logit;
    }

    double sum = 0.0;
    for (int64_t j = lo; j < hi; j++) {
        double p = exp(logits[j] - max);
        float scale;
        size_t row = ref_row(seq, 1, q->kv_head, j, &scale);
        sum += p;
        for (int32_t d = 0; d < head_dim; d++)
            out[d] += p * (double) (pk_load(c->base, row + (size_t) d, c->dtype) * scale);
    }
    for (int32_t d = 0; d < head_dim; d++)
        out[d] /= sum;
}

/* Loads one row of a query tensor as doubles. */
void pk_ref_load_row(double *dst, const void *src, size_t row, int32_t head_dim, int32_t dtype)
{
    for (int32_t d = 0; d < head_dim; d++)
        dst[d] = pk_load(src, row * (size_t) head_dim + (size_t) d, dtype);
}

/* Stores one row of an output tensor from doubles. */
void pk_ref_store_row(void *dst, size_t row, int32_t head_dim, int32_t dtype, const double *src)
{
    for (int32_t d = 0; d < head_dim; d++)
        pk_store(dst, row * (size_t) head_dim + (size_t) d, dtype, (float) src[d]);
}

/* Frees what rows_init allocated; returns nothing. */
static void rows_free(pk_ref_rows *r)
{
    free(r->logits);
    free(r->q);
    free(r->o);
    r->logits = r->q = r->o = NULL;
}

/* Allocates r for head_dim and contexts up to the longest of seq_lens[0, n) tokens; returns 0
 * or PAGED_E_NOMEM (with nothing left allocated). */
static int rows_init(pk_ref_rows *r, const int32_t *seq_lens, int32_t n, int32_t head_dim)
{
    int32_t max_len = 1;
    for (int32_t s = 0; s < n; s++)
        if (seq_lens[s] > max_len)
            max_len = seq_lens[s];
    r->head_dim = head_dim;
    r->logits = malloc((size_t) max_len * sizeof *r->logits);
    r->q = malloc((size_t) head_dim * sizeof *r->q);
    r->o = malloc((size_t) head_dim * sizeof *r->o);
    if (r->logits == NULL || r->q == NULL || r->o == NULL) {
        rows_free(r);
        return PAGED_E_NOMEM;
    }
    return 0;
}

/* Attends one token's query heads; see ref_attn.h. */
void pk_ref_attend_heads(pk_ref_rows *r, const pk_ref_seq *seq, const void *q, void *out, size_t row0,
                         int32_t num_q_heads, int32_t group, int32_t pos, int32_t dtype, const pk_attn_opts *opts)
{
    for (int32_t h = 0; h < num_q_heads; h++) {
        pk_ref_load_row(r->q, q, row0 + (size_t) h, r->head_dim, dtype);
        pk_ref_query query = { .q_head = h, .kv_head = h / group, .pos = pos, .q = r->q };
        pk_ref_attend(seq, &query, opts, r->logits, r->o);
        pk_ref_store_row(out, row0 + (size_t) h, r->head_dim, dtype, r->o);
    }
}

/* Runs fn over every sequence of a checked call; see ref_attn.h. */
int pk_ref_each_seq(const pk_cache *cache, int32_t num_q_heads, const int32_t *seq_lens, int32_t num_seqs,
                    pk_ref_seq_fn *fn, const void *args)
{
    if (num_seqs == 0)
        return 0;
    int32_t group = num_q_heads / cache->num_kv_heads;
    pk_ref_rows rows;
    if (rows_init(&rows, seq_lens, num_seqs, cache->head_dim) != 0)
        return PAGED_E_NOMEM;
    for (int32_t s = 0; s < num_seqs; s++)
        fn(args, s, &rows, group);
    rows_free(&rows);
    return 0;
}
