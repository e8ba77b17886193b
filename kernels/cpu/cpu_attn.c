/* cpu_attn.c: the CPU backend's attention work item, shared by decode and prefill. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "kernels/cpu/cpu_attn.h"

#include <math.h>

#include "kernels/cpu/check.h"
#include "kernels/cpu/cpu_rows.h"

/*
 * Keys converted per step. A step never crosses a block, so its rows are contiguous in
 * the pool and convert in one loop; the online softmax rescales once per step.
 */
#define KTILE 16

/* Up to PK_CPU_QVECS query vectors of one KV head, as floats, with their visible keys. */
typedef struct qset {
    int n;
    float q[PK_CPU_QVECS][PK_CPU_MAX_HEAD_DIM];
    float acc[PK_CPU_QVECS][PK_CPU_MAX_HEAD_DIM];  /* unnormalized outputs, then outputs */
    float max[PK_CPU_QVECS];                       /* running maximum logit */
    float sum[PK_CPU_QVECS];                       /* running sum of exp(logit - max) */
    int64_t lo[PK_CPU_QVECS], hi[PK_CPU_QVECS];    /* visible keys: lo <= j < hi */
    int32_t pos[PK_CPU_QVECS];
    float slope[PK_CPU_QVECS];                     /* ALiBi slope, 0 without ALiBi */
} qset;

/*
 * Turns the dot products of one query with the step's visible keys [a, b) (weights[t]
 * for key j0 + t) into logits, folds them into the query's running maximum and sum
 * (rescaling its accumulator when the maximum grows), and leaves exp(logit - max) in
 * weights[t] for the values.
 */
static void softmax_step(qset *qs, int v, const pk_attn_opts *o, int32_t head_dim, int64_t j0,
                         int64_t a, int64_t b, float *weights)
{
    float step_max = -INFINITY;
    for (int64_t j = a; j < b; j++) {
        float s = weights[j - j0] * o->sm_scale;
        if (o->soft_cap > 0.0f)
            s = o->soft_cap * tanhf(s / o->soft_cap);
        s += qs->slope[v] * (float) (j - qs->pos[v]);
        weights[j - j0] = s;
        if (s > step_max)
            step_max = s;
    }
    if (step_max > qs->max[v]) {
        /* The first step with keys leaves the accumulator at zero whatever the factor. */
        float factor = expf(qs->max[v] - step_max);
        qs->sum[v] *= factor;
        pk_cpu_scale(qs->acc[v], factor, head_dim);
        qs->max[v] = step_max;
    }
    for (int64_t j = a; j < b; j++) {
        float p = expf(weights[j - j0] - qs->max[v]);
        weights[j - j0] = p;
        qs->sum[v] += p;
    }
}

/*
 * Runs the online softmax of every query of qs over the union of their visible keys,
 * step by step, each step's K and V rows converted once for all the queries; leaves the
 * normalized outputs in qs->acc. Only rows below the sequence length are ever read.
 */
static void attend(const pk_cpu_rows *w, qset *qs)
{
    const pk_cache *c = w->cache;
    int32_t head_dim = c->head_dim;
    float ktile[KTILE * PK_CPU_MAX_HEAD_DIM], vtile[KTILE * PK_CPU_MAX_HEAD_DIM];
    float weights[PK_CPU_QVECS][KTILE];

    int64_t lo = INT64_MAX, hi = 0;
    for (int v = 0; v < qs->n; v++) {
        qs->max[v] = -INFINITY;
        qs->sum[v] = 0.0f;
        for (int32_t d = 0; d < head_dim; d++)
            qs->acc[v][d] = 0.0f;
        if (qs->lo[v] < qs->hi[v]) {
            lo = qs->lo[v] < lo ? qs->lo[v] : lo;
            hi = qs->hi[v] > hi ? qs->hi[v] : hi;
        }
    }

    for (int64_t j0 = lo; j0 < hi;) {
        int32_t off = (int32_t) (j0 % c->block_size);
        int64_t nk = c->block_size - off;
        nk = nk < KTILE ? nk : KTILE;
        nk = nk < hi - j0 ? nk : hi - j0;
        int32_t block = w->table[j0 / c->block_size];
        size_t count = (size_t) nk * (size_t) head_dim;
        size_t krow = pk_cache_index(c, w->layer, 0, block, w->kv_head, off);
        size_t vrow = pk_cache_index(c, w->layer, 1, block, w->kv_head, off);
        const float *k = pk_cpu_load(ktile, c->base, krow, count, c->dtype, w->k_table);
        int64_t a[PK_CPU_QVECS], b[PK_CPU_QVECS];
        for (int v = 0; v < qs->n; v++) {
            a[v] = qs->lo[v] > j0 ? qs->lo[v] : j0;
            b[v] = qs->hi[v] < j0 + nk ? qs->hi[v] : j0 + nk;
            for (int64_t j = a[v]; j < b[v]; j++)
                weights[v][j - j0] = pk_cpu_dot(qs->q[v], k + (j - j0) * head_dim, head_dim);
            if (a[v] < b[v])
                softmax_step(qs, v, w->opts, head_dim, j0, a[v], b[v], weights[v]);
        }
        const float *val = pk_cpu_load(vtile, c->base, vrow, count, c->dtype, w->v_table);
        for (int v = 0; v < qs->n; v++)
            for (int64_t j = a[v]; j < b[v]; j++)
                pk_cpu_axpy(qs->acc[v], weights[v][j - j0], val + (j - j0) * head_dim, head_dim);
        j0 += nk;
    }

    for (int v = 0; v < qs->n; v++)
        pk_cpu_scale(qs->acc[v], qs->sum[v] > 0.0f ? 1.0f / qs->sum[v] : 0.0f, head_dim);
}

/*
 * Walks the item's (row, query head) pairs in batches of PK_CPU_QVECS: loads each
 * batch's queries and visible key ranges, attends, and stores the outputs in q_dtype.
 */
void pk_cpu_attend_rows(const pk_cpu_rows *w)
{
    const pk_cache *c = w->cache;
    const pk_attn_opts *o = w->opts;
    int32_t head_dim = c->head_dim;
    int32_t group = w->num_q_heads / c->num_kv_heads;
    int32_t pairs = w->rows * group;
    qset qs;

    for (int32_t first = 0; first < pairs; first += PK_CPU_QVECS) {
        qs.n = pairs - first < PK_CPU_QVECS ? pairs - first : PK_CPU_QVECS;
        for (int v = 0; v < qs.n; v++) {
            int32_t row = (first + v) / group;
            int32_t q_head = w->kv_head * group + (first + v) % group;
            size_t at = ((size_t) row * (size_t) w->num_q_heads + (size_t) q_head) * (size_t) head_dim;
            const float *q = pk_cpu_load(qs.q[v], w->q, at, (size_t) head_dim, w->q_dtype, NULL);
            if (q != qs.q[v])
                for (int32_t d = 0; d < head_dim; d++)
                    qs.q[v][d] = q[d];
            int32_t pos = w->pos0 + row * w->pos_step;
            qs.pos[v] = pos;
            qs.hi[v] = (int64_t) pos + 1 < w->seq_len ? (int64_t) pos + 1 : w->seq_len;
            qs.lo[v] = 0;
            if (o->window > 0 && (int64_t) pos - o->window + 1 > 0)
                qs.lo[v] = (int64_t) pos - o->window + 1;
            qs.slope[v] = o->alibi_slopes != NULL ? o->alibi_slopes[q_head] : 0.0f;
        }
        attend(w, &qs);
        for (int v = 0; v < qs.n; v++) {
            int32_t row = (first + v) / group;
            int32_t q_head = w->kv_head * group + (first + v) % group;
            size_t at = ((size_t) row * (size_t) w->num_q_heads + (size_t) q_head) * (size_t) head_dim;
            for (int32_t d = 0; d < head_dim; d++)
                pk_store(w->out, at + (size_t) d, w->q_dtype, qs.acc[v][d]);
        }
    }
}
