/* cuda-prefill-t.c: pk_cuda_prefill against pk_ref_prefill over head dims, block sizes, groups, dtypes and masks. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/dtype.h"
#include "kernels/kernels.h"
#include "tests/kernels/gpu_util.h"
#include "tests/tap/basic.h"

/*
 * The sweep crosses every (cache, query) dtype pair with every head dim and block size; the
 * group, KV heads, masks and options rotate with the case index. Each case has a sequence
 * with query rows and some earlier context, one whose context is all query rows (or no rows
 * at all), and a short chunk at the end of a longer context. The large set gives each dtype
 * pair several row tiles and key tiles; the edge set pins the rest. The reference costs
 * (query rows x context x query heads x head dim), so every case is trimmed to a budget. The
 * wide-group set crosses group sizes up to 71 (1 and 2 KV heads) with every dtype pair and
 * head dims 64, 128 and 256, then runs long 16-bit cases of those groups (the wgmma kernel's
 * on Hopper; PAGED_NO_WGMMA=1 for the mma.sync one).
 */
#define MAXSEQS 4
#define BUDGET 1500000
#define LARGE_BUDGET 8000000

static const int32_t dims[] = { 64, 80, 96, 128, 256 };
static const int32_t block_sizes[] = { 8, 16, 32 };
static const int32_t groups[] = { 1, 2, 4, 8 };
/* Group sizes of the wide-group set: up to 71 query heads per KV head, 8 and under included. */
static const int32_t wide_groups[] = { 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32, 48, 64, 71 };
static const int32_t wide_dims[] = { 0, 3, 4 };          /* indexes into dims: 64, 128, 256 */
static const int32_t pairs[][2] = {
    { PAGED_DTYPE_F16, PAGED_DTYPE_F16 },      { PAGED_DTYPE_BF16, PAGED_DTYPE_BF16 },
    { PAGED_DTYPE_F32, PAGED_DTYPE_F32 },      { PAGED_DTYPE_FP8_E4M3, PAGED_DTYPE_F16 },
    { PAGED_DTYPE_FP8_E4M3, PAGED_DTYPE_BF16 }, { PAGED_DTYPE_FP8_E4M3, PAGED_DTYPE_F32 },
};

/* One prefill case: sequence s has qo[s] query rows at the end of a context of qo[s] + prefix[s] tokens. */
typedef struct pcase {
    int32_t D, B, G, H, L;
    int32_t kv_dtype, q_dtype;
    int nseqs;
    int32_t qo[MAXSEQS], prefix[MAXSEQS];
    int causal, alibi, cap, misalign;
    int32_t window;
} pcase;

/* Fills every plane of a host pool with random values (fp8: K planes by k_scale, V by v_scale). */
static void fill_pool(tap_rng *rng, const pk_cache *c, void *pool)
{
    size_t plane = (size_t) c->num_blocks * (size_t) c->num_kv_heads * (size_t) c->block_size * (size_t) c->head_dim;
    size_t esize = pk_dtype_size(c->dtype);
    for (int32_t l = 0; l < c->num_layers; l++)
        for (int32_t kv = 0; kv < 2; kv++)
            gu_fill(rng, (char *) pool + ((size_t) l * 2 + (size_t) kv) * plane * esize, plane, c->dtype, 1.0f,
                    kv == 0 ? c->k_scale : c->v_scale);
}

/*
 * Writes NaN into every slot of the pool that no sequence uses (blocks no table holds, and the
 * slots of each sequence's last block past its length), in every layer, plane and head. A
 * kernel must never let such slots reach an output (they hold anything in a live pool): one
 * that multiplies them by a zero probability instead of zero-filling them gets NaN and fails.
 */
static void poison_unused(const pk_cache *c, void *pool, const int32_t *bt, int32_t bt_stride, int nseqs,
                          const int32_t *lens)
{
    size_t slots = (size_t) c->num_blocks * (size_t) c->block_size;
    unsigned char *used = calloc(slots, 1);
    if (used == NULL)
        bail("poison_unused: out of memory");
    for (int s = 0; s < nseqs; s++)
        for (int32_t j = 0; j < lens[s]; j++)
            used[(size_t) bt[(size_t) s * (size_t) bt_stride + (size_t) (j / c->block_size)] * (size_t) c->block_size
                 + (size_t) (j % c->block_size)] = 1;
    static const uint16_t nan16[] = { [PAGED_DTYPE_F16] = 0x7e00, [PAGED_DTYPE_BF16] = 0x7fc0 };
    const uint32_t nan32 = 0x7fc00000u;
    const uint8_t nan8 = 0x7f;
    size_t esize = pk_dtype_size(c->dtype);
    for (int32_t l = 0; l < c->num_layers; l++)
        for (int32_t kv = 0; kv < 2; kv++)
            for (int32_t b = 0; b < c->num_blocks; b++)
                for (int32_t h = 0; h < c->num_kv_heads; h++)
                    for (int32_t t = 0; t < c->block_size; t++) {
                        if (used[(size_t) b * (size_t) c->block_size + (size_t) t])
                            continue;
                        char *row = (char *) pool + pk_cache_index(c, l, kv, b, h, t) * esize;
                        for (int32_t d = 0; d < c->head_dim; d++) {
                            if (esize == 4)
                                memcpy(row + (size_t) d * 4, &nan32, 4);
                            else if (esize == 2)
                                memcpy(row + (size_t) d * 2, &nan16[c->dtype], 2);
                            else
                                memcpy(row + (size_t) d, &nan8, 1);
                        }
                    }
    free(used);
}

/* Shrinks a case's prefixes, then its query rows, until the reference's work fits budget. */
static void trim(pcase *c, double budget)
{
    for (int guard = 0; guard < 64; guard++) {
        double work = 0.0;
        int big_prefix = 0, big_qo = 0;
        for (int s = 0; s < c->nseqs; s++) {
            work += (double) c->qo[s] * (c->qo[s] + c->prefix[s]) * c->H * c->G * c->D;
            if (c->prefix[s] > c->prefix[big_prefix])
                big_prefix = s;
            if (c->qo[s] > c->qo[big_qo])
                big_qo = s;
        }
        if (work <= budget)
            return;
        if (c->prefix[big_prefix] > 2 * c->qo[big_qo])
            c->prefix[big_prefix] /= 2;
        else
            c->qo[big_qo] = (c->qo[big_qo] + 1) / 2;
    }
}

/* Runs one case on the GPU and through the reference, and reports whether they agree. */
static void run_case(tap_rng *rng, const pcase *c)
{
    int32_t Hq = c->H * c->G;
    int32_t lens[MAXSEQS], indptr[MAXSEQS + 1];
    int32_t max_blocks = 0, total_blocks = 0, max_qo = 0;
    indptr[0] = 0;
    for (int s = 0; s < c->nseqs; s++) {
        lens[s] = c->qo[s] + c->prefix[s];
        indptr[s + 1] = indptr[s] + c->qo[s];
        if (c->qo[s] > max_qo)
            max_qo = c->qo[s];
        int32_t nb = (lens[s] + c->B - 1) / c->B;
        total_blocks += nb;
        if (nb > max_blocks)
            max_blocks = nb;
    }
    int32_t total_q = indptr[c->nseqs];
    pk_cache cache = {
        .num_layers = c->L,
        .num_blocks = total_blocks + gu_range(rng, 1, 4),
        .num_kv_heads = c->H,
        .head_dim = c->D,
        .block_size = c->B,
        .dtype = c->kv_dtype,
        .k_scale = c->kv_dtype == PAGED_DTYPE_FP8_E4M3 ? (float) tap_rng_uniform(rng, 0.01, 0.05) : 1.0f,
        .v_scale = c->kv_dtype == PAGED_DTYPE_FP8_E4M3 ? (float) tap_rng_uniform(rng, 0.01, 0.05) : 1.0f,
    };
    size_t pool_bytes = pk_cache_bytes(&cache);
    void *pool = bmalloc(pool_bytes);
    cache.base = pool;
    fill_pool(rng, &cache, pool);
    int32_t bt_stride = max_blocks + gu_range(rng, 0, 2);
    int32_t *bt = nv_block_tables(rng, c->nseqs, lens, c->B, cache.num_blocks, bt_stride);
    poison_unused(&cache, pool, bt, bt_stride, c->nseqs, lens);

    size_t qsize = pk_dtype_size(c->q_dtype);
    size_t elems = (size_t) total_q * (size_t) Hq * (size_t) c->D;
    size_t qbytes = elems * qsize;
    void *q = bmalloc(qbytes + 1), *want = bmalloc(qbytes + 1), *got = bmalloc(qbytes + 1);
    gu_fill(rng, q, elems, c->q_dtype, 2.0f, 1.0f);
    float *slopes = bmalloc((size_t) Hq * sizeof *slopes);
    for (int32_t h = 0; h < Hq; h++)
        slopes[h] = (float) tap_rng_uniform(rng, 0.01, 0.3);

    pk_prefill_args ha = {
        .cache = cache,
        .layer = gu_range(rng, 0, c->L - 1),
        .num_seqs = c->nseqs,
        .num_q_heads = Hq,
        .q_dtype = c->q_dtype,
        .causal = c->causal,
        .total_q = total_q,
        .max_qo_len = max_qo,
        .q = q,
        .out = want,
        .qo_indptr = indptr,
        .block_tables = bt,
        .bt_stride = bt_stride,
        .seq_lens = lens,
        .opts = {
            .sm_scale = (float) (tap_rng_uniform(rng, 0.5, 2.5) / sqrt((double) c->D)),
            .soft_cap = c->cap ? (float) tap_rng_uniform(rng, 2.0, 10.0) : 0.0f,
            .window = c->window,
            .alibi_slopes = c->alibi ? slopes : NULL,
        },
    };
    int rc = pk_ref_prefill(&ha);
    if (rc != 0)
        bail("pk_ref_prefill: %s", paged_strerror(rc));

    /* The same op on the device; misaligned cases shift q and out by one element. */
    pk_prefill_args da = ha;
    size_t shift = c->misalign ? qsize : 0;
    char *q_buf = gu_alloc(qbytes + 16), *out_buf = gu_alloc(qbytes + 16);
    gu_upload(q_buf + shift, q, qbytes);
    gu_poison(out_buf, qbytes + 16);
    da.q = q_buf + shift;
    da.out = out_buf + shift;
    da.cache.base = gu_clone(pool, pool_bytes);
    da.qo_indptr = gu_clone(indptr, (size_t) (c->nseqs + 1) * sizeof(int32_t));
    da.block_tables = gu_clone(bt, (size_t) c->nseqs * (size_t) bt_stride * sizeof *bt);
    da.seq_lens = gu_clone(lens, (size_t) c->nseqs * sizeof(int32_t));
    da.opts.alibi_slopes = c->alibi ? gu_clone(slopes, (size_t) Hq * sizeof *slopes) : NULL;
    size_t ws = pk_cuda_prefill_workspace(&da);
    da.workspace = ws > 0 ? gu_alloc(ws) : NULL;
    da.workspace_size = ws;
    rc = pk_cuda_prefill(&da, NULL);
    gu_sync("prefill");
    gu_download(got, out_buf + shift, qbytes);

    double worst = 0.0;
    int same = rc == 0 && gu_compare(got, want, (size_t) total_q * (size_t) Hq, c->D, c->q_dtype,
                                     gu_tolerance(c->q_dtype), &worst);
    char shape[160], window[32] = "";
    size_t n = 0;
    for (int s = 0; s < c->nseqs && n < sizeof shape - 24; s++)
        n += (size_t) snprintf(shape + n, sizeof shape - n, "%s%d+%d", s ? "," : "", (int) c->qo[s],
                               (int) c->prefix[s]);
    if (c->window > 0)
        snprintf(window, sizeof window, " window=%d", (int) c->window);
    ok(same, "prefill %s/%s D=%d B=%d G=%d H=%d L=%d rows+prefix %s%s%s%s%s%s: matches reference (%s, worst row %.2g)",
       gu_dtype_name(c->kv_dtype), gu_dtype_name(c->q_dtype), (int) c->D, (int) c->B, (int) c->G, (int) c->H,
       (int) c->L, shape, c->causal ? " causal" : " full", c->alibi ? " alibi" : "", c->cap ? " cap" : "", window,
       c->misalign ? " misaligned" : "", rc == 0 ? "ok" : paged_strerror(rc), worst);

    gu_free(q_buf);
    gu_free(out_buf);
    gu_free(da.cache.base);
    gu_free((void *) da.qo_indptr);
    gu_free((void *) da.block_tables);
    gu_free((void *) da.seq_lens);
    gu_free((void *) da.opts.alibi_slopes);
    gu_free(da.workspace);
    free(pool);
    free(bt);
    free(q);
    free(want);
    free(got);
    free(slopes);
}

/* Returns a sweep case for dtype pair pi, head dim di and block size bi, the rest chosen by idx and rng. */
static pcase base_case(tap_rng *rng, int pi, int di, int bi, int idx)
{
    pcase c;
    memset(&c, 0, sizeof c);
    c.D = dims[di];
    c.B = block_sizes[bi];
    c.kv_dtype = pairs[pi][0];
    c.q_dtype = pairs[pi][1];
    c.G = groups[idx % 4];
    c.H = 1 + idx % 2;
    c.L = 1 + idx % 3;
    c.causal = idx % 4 != 3;
    c.alibi = idx % 3 == 0;
    c.cap = idx % 4 == 2;
    c.misalign = idx % 7 == 5;
    c.window = idx % 6 == 1 ? gu_range(rng, 1, 64) : 0;
    c.nseqs = 3;
    c.qo[0] = gu_range(rng, 1, 40);
    c.prefix[0] = gu_range(rng, 0, 100);
    c.qo[1] = idx % 5 == 0 ? 0 : gu_range(rng, 1, 70);  /* a sequence with no rows, sometimes */
    c.prefix[1] = 0;
    c.qo[2] = gu_range(rng, 1, 8);
    c.prefix[2] = gu_range(rng, 50, 200);
    trim(&c, BUDGET);
    return c;
}

/*
 * The wide-group set: every group size of wide_groups on 1 and 2 KV heads with every dtype
 * pair and head dims 64, 128 and 256 (rotating), options rotating with the case index; then,
 * per group size, a long 16-bit case at D 64 or 128 without cap or ALiBi (several row tiles,
 * several key tiles). Quick keeps a third of the first part and half of the second.
 */
static void wide_group_cases(tap_rng *rng, int quick)
{
    const int ngroups = (int) (sizeof wide_groups / sizeof wide_groups[0]);
    for (int gi = 0; gi < ngroups; gi++)
        for (int pi = 0; pi < 6; pi++) {
            if (quick && (gi + pi) % 3 != 0)
                continue;
            const int k = gi * 6 + pi;
            pcase c = base_case(rng, pi, wide_dims[k % 3], k % 3, 100 + k);
            c.G = wide_groups[gi];
            c.H = 1 + (gi + pi) % 2;
            trim(&c, BUDGET);
            run_case(rng, &c);
        }
    for (int gi = 0; gi < ngroups; gi++) {
        if (quick && gi % 2)
            continue;
        pcase c = base_case(rng, gi & 1, (gi & 2) ? 3 : 0, gi % 3, 300 + gi);
        c.alibi = c.cap = 0;
        c.causal = gi % 5 != 3;
        c.window = gi % 6 == 1 ? gu_range(rng, 130, 300) : 0;
        c.G = wide_groups[gi];
        c.H = 1 + gi % 2;
        c.nseqs = 2;
        c.qo[0] = gu_range(rng, 100, 200);
        c.prefix[0] = gu_range(rng, 260, 500);
        c.qo[1] = gu_range(rng, 1, 20);
        c.prefix[1] = gu_range(rng, 200, 300);
        trim(&c, 2 * LARGE_BUDGET);
        run_case(rng, &c);
    }
}

/* Checks the errors returned for shapes the kernels do not support. */
static void error_cases(void)
{
    void *dummy = gu_alloc(4096);
    int32_t *ints = gu_alloc(64);
    pk_prefill_args a = {
        .cache = { .base = dummy, .num_layers = 1, .num_blocks = 1, .num_kv_heads = 2, .head_dim = 128,
                   .block_size = 16, .dtype = PAGED_DTYPE_F16, .k_scale = 1, .v_scale = 1 },
        .num_seqs = 1, .num_q_heads = 4, .q_dtype = PAGED_DTYPE_F16, .causal = 1, .total_q = 1, .max_qo_len = 1,
        .q = dummy, .out = dummy, .qo_indptr = ints, .block_tables = ints, .bt_stride = 1, .seq_lens = ints,
        .opts = { .sm_scale = 1 },
    };
    pk_prefill_args b = a;
    b.cache.head_dim = 112;
    is_int(PAGED_E_GEOMETRY, pk_cuda_prefill(&b, NULL), "prefill: head dim 112 is PAGED_E_GEOMETRY");
    b = a;
    b.cache.dtype = PAGED_DTYPE_BF16;
    is_int(PAGED_E_DTYPE, pk_cuda_prefill(&b, NULL), "prefill: f16 queries on a bf16 cache is PAGED_E_DTYPE");
    b = a;
    b.layer = 1;
    is_int(PAGED_E_LAYER, pk_cuda_prefill(&b, NULL), "prefill: layer 1 of a 1-layer pool is PAGED_E_LAYER");
    b = a;
    b.num_q_heads = 5;
    is_int(PAGED_E_HEADS, pk_cuda_prefill(&b, NULL), "prefill: 5 query heads over 2 KV heads is PAGED_E_HEADS");
    is_int(0, (long long) pk_cuda_prefill_workspace(&a), "prefill: needs no workspace");
    gu_sync("error cases");
    gu_free(dummy);
    gu_free(ints);
}

/* Runs the error checks, the sweep, the large cases and the edge cases. */
int main(void)
{
    gu_require_device();
    plan_lazy();
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    const int quick = gu_quick();

    error_cases();

    int idx = 0;
    for (int pi = 0; pi < 6; pi++)
        for (int di = 0; di < 5; di++)
            for (int bi = 0; bi < 3; bi++, idx++) {
                if (quick && bi != (pi + di) % 3)
                    continue;
                pcase c = base_case(&rng, pi, di, bi, idx);
                run_case(&rng, &c);
            }

    /* Large: several row tiles (with GQA packing) and many key tiles per CTA. */
    for (int pi = 0; pi < 6; pi++, idx++) {
        pcase c = base_case(&rng, pi, idx % 5, idx % 3, idx);
        c.H = 1;
        c.nseqs = 2;
        c.qo[0] = gu_range(&rng, 150, 260);
        c.prefix[0] = gu_range(&rng, 100, 400);
        c.qo[1] = gu_range(&rng, 60, 130);
        c.prefix[1] = gu_range(&rng, 0, 30);
        trim(&c, LARGE_BUDGET);
        run_case(&rng, &c);
        if (quick)
            break;
    }

    /* Long 16-bit cases without cap or ALiBi: what the wgmma kernel takes on Hopper. Several
     * 128-row tiles and at least three 128-key tiles, so its pipeline (K one tile ahead of V,
     * both double-buffered) reuses every buffer; run again with PAGED_NO_WGMMA=1 for the
     * mma.sync kernel. */
    for (int k = 0; k < 8; k++, idx++) {
        pcase c = base_case(&rng, k & 1, (k & 2) ? 3 : 0, idx % 3, idx);
        c.alibi = c.cap = 0;
        c.misalign = k == 5;
        c.causal = k != 3;
        c.window = k == 6 ? gu_range(&rng, 130, 300) : 0;
        c.H = 1 + k % 2;
        c.G = k % 3 == 0 ? 1 : 4;
        c.nseqs = 2;
        c.qo[0] = gu_range(&rng, 140, 200);
        c.prefix[0] = gu_range(&rng, 260, 500);
        c.qo[1] = gu_range(&rng, 1, 20);
        c.prefix[1] = gu_range(&rng, 200, 300);
        trim(&c, 4 * LARGE_BUDGET);
        run_case(&rng, &c);
        if (quick && k == 1)
            break;
    }

    /* Grids of several waves: more (row tile, KV head, sequence) CTAs than a device runs at
     * once, on 64 and 32 KV heads, with sequences of fewer rows than the longest or none.
     * Short rows keep the reference cheap. */
    for (int k = 0; k < 2; k++, idx++) {
        pcase c = base_case(&rng, k, k ? 3 : 0, k + 1, idx);
        c.alibi = c.cap = c.misalign = 0;
        c.causal = 1;
        c.window = 0;
        c.nseqs = 4;
        c.G = k ? 4 : 1;
        c.H = k ? 32 : 64;
        c.L = 2;
        const int32_t qo[2][4] = { { 150, 10, 0, 40 }, { 48, 33, 5, 0 } };
        const int32_t prefix[2][4] = { { 200, 0, 5, 100 }, { 300, 40, 9, 0 } };
        for (int s = 0; s < 4; s++) {
            c.qo[s] = qo[k][s] - (int32_t) gu_range(&rng, 0, 3) * (qo[k][s] > 3);
            c.prefix[s] = prefix[k][s];
        }
        if (!quick || k == 1)
            run_case(&rng, &c);
    }

    wide_group_cases(&rng, quick);

    /* Edge cases. */
    pcase c = base_case(&rng, 1, 3, 1, 0);
    c.nseqs = 1;                            /* one row against a long context: a decode step */
    c.qo[0] = 1;
    c.prefix[0] = 1500;
    run_case(&rng, &c);

    c = base_case(&rng, 0, 3, 1, 1);
    c.G = 8;                                /* 33 rows x 8 heads: 5 row tiles, the last partial */
    c.H = 2;
    c.nseqs = 1;
    c.qo[0] = 33;
    c.prefix[0] = 40;
    c.window = 1;                           /* each row sees only itself */
    trim(&c, BUDGET);
    run_case(&rng, &c);

    c = base_case(&rng, 4, 0, 2, 2);
    c.causal = 0;                           /* no causal mask, a window from the last position */
    c.window = 50;
    c.prefix[0] = 200;
    trim(&c, BUDGET);
    run_case(&rng, &c);

    c = base_case(&rng, 3, 4, 0, 3);
    c.window = 20;                          /* a short window deep in the context: early key tiles skipped */
    c.causal = 1;
    c.nseqs = 1;
    c.qo[0] = 70;
    c.prefix[0] = 300;
    trim(&c, BUDGET);
    run_case(&rng, &c);

    c = base_case(&rng, 2, 1, 1, 4);
    c.misalign = 1;                         /* f32 with every option on */
    c.alibi = c.cap = 1;
    c.window = 30;
    run_case(&rng, &c);

    c = base_case(&rng, 0, 4, 2, 5);
    c.misalign = 1;                         /* q and out off 16-byte alignment: the element-wise paths */
    c.causal = 0;
    run_case(&rng, &c);
    return 0;
}
