/* cuda-append-t.c: pk_cuda_append (contiguous and segmented) and pk_cuda_copy, bit for bit against the reference. */
/* SPDX-License-Identifier: MIT */
/* The reference is pk_ref_append and pk_ref_copy; every check covers the whole pool. */
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
 * Both ops write only part of a pool, so each case fills a random pool, runs the op on a
 * device copy and on a host copy through the reference, and compares the two whole pools:
 * a write to a wrong place shows as surely as a wrong value. fp8 sources span subnormals
 * to past the saturation point, and some cases use a power-of-two scale with values that
 * sit exactly halfway between two fp8 numbers, where rounding to even decides.
 */
static const int32_t dims[] = { 64, 80, 96, 128, 256, 8, 24 };
static const int32_t block_sizes[] = { 8, 16, 32, 1, 3 };
/* (cache dtype, source dtype) */
static const int32_t pairs[][2] = {
    { PAGED_DTYPE_F16, PAGED_DTYPE_F16 },      { PAGED_DTYPE_BF16, PAGED_DTYPE_BF16 },
    { PAGED_DTYPE_F32, PAGED_DTYPE_F32 },      { PAGED_DTYPE_FP8_E4M3, PAGED_DTYPE_F16 },
    { PAGED_DTYPE_FP8_E4M3, PAGED_DTYPE_BF16 }, { PAGED_DTYPE_FP8_E4M3, PAGED_DTYPE_F32 },
    { PAGED_DTYPE_FP8_E4M3, PAGED_DTYPE_FP8_E4M3 },
};
#define NPAIRS ((int) (sizeof pairs / sizeof pairs[0]))

/* fp8 values (in units of the scale) exactly halfway between neighbours, or at the edges. */
static const float fp8_edges[] = {
    1.0625f, -1.1875f, 2.125f, -3.375f, 0.0029296875f, -0.0048828125f, 0.0009765625f, 17.0f,
    240.0f + 8.0f, 448.0f, -464.0f, 470.0f, 1000.0f, -0.0f, 0.0f, 0.017578125f,
};

/* Returns a random cache pool of c's geometry in host memory. */
static void *random_pool(tap_rng *rng, const pk_cache *c)
{
    size_t elems = pk_cache_bytes(c) / pk_dtype_size(c->dtype);
    void *pool = bmalloc(pk_cache_bytes(c));
    gu_fill(rng, pool, elems, c->dtype, 1.0f, 1.0f / 64.0f);
    return pool;
}

/*
 * Stores n random source values of src_dtype at k and v for a cache (fp8: spanning
 * subnormals to past saturation in units of the scales; with edges, every third value one of
 * fp8_edges in units of the scale, where rounding decides; fp8 sources hold those values
 * already divided by the scales, as an fp8 cache stores them). Returns nothing.
 */
static void random_sources(tap_rng *rng, const pk_cache *cache, int32_t src_dtype, void *k, void *v, size_t n,
                           int edges)
{
    for (size_t i = 0; i < n; i++) {
        float kx, vx;
        if (edges && i % 3 == 0) {
            kx = fp8_edges[(i / 3) % 16] * cache->k_scale;
            vx = fp8_edges[(i / 3 + 5) % 16] * cache->v_scale;
        } else if (cache->dtype == PAGED_DTYPE_FP8_E4M3) {
            /* magnitudes from fp8 subnormals (1e-4 of the scale) to twice the saturation point */
            kx = (float) (tap_rng_uniform(rng, -1.0, 1.0) * pow(10.0, tap_rng_uniform(rng, -4.0, 0.3)) * 448.0)
                 * cache->k_scale;
            vx = (float) (tap_rng_uniform(rng, -1.0, 1.0) * pow(10.0, tap_rng_uniform(rng, -4.0, 0.3)) * 448.0)
                 * cache->v_scale;
        } else {
            kx = (float) tap_rng_uniform(rng, -3.0, 3.0);
            vx = (float) tap_rng_uniform(rng, -3.0, 3.0);
        }
        if (src_dtype == PAGED_DTYPE_FP8_E4M3) {
            kx /= cache->k_scale;
            vx /= cache->v_scale;
        }
        pk_store(k, i, src_dtype, kx);
        pk_store(v, i, src_dtype, vx);
    }
}

/* Returns whether the pools got and want (bytes long, of dtype) are the same bit for bit;
 * if not, prints the first element that differs. */
static int pools_match(const void *got, const void *want, size_t bytes, int32_t dtype)
{
    if (memcmp(got, want, bytes) == 0)
        return 1;
    size_t esize = pk_dtype_size(dtype);
    for (size_t i = 0; i < bytes / esize; i++)
        if (memcmp((const char *) got + i * esize, (const char *) want + i * esize, esize) != 0) {
            diag("first difference at element %zu: got %g, want %g", i, pk_load(got, i, dtype),
                 pk_load(want, i, dtype));
            break;
        }
    return 0;
}

/* Runs one APPEND case: dtype pair pi, head dim D, block size B, chosen layers; reports whether the pools match. */
static void append_case(tap_rng *rng, int pi, int32_t D, int32_t B, int idx)
{
    int32_t cache_dtype = pairs[pi][0], src_dtype = pairs[pi][1];
    const int fp8 = cache_dtype == PAGED_DTYPE_FP8_E4M3;
    const int edges = fp8 && idx % 2 == 0;
    const int misalign = idx % 5 == 2;
    pk_cache cache = {
        .num_layers = 1 + idx % 3,
        .num_blocks = gu_range(rng, 2, 12),
        .num_kv_heads = 1 + idx % 3,
        .head_dim = D,
        .block_size = B,
        .dtype = cache_dtype,
        .k_scale = edges ? 0.5f : (float) tap_rng_uniform(rng, 0.001, 0.05),
        .v_scale = edges ? 2.0f : (float) tap_rng_uniform(rng, 0.001, 0.05),
    };
    if (!fp8)
        cache.k_scale = cache.v_scale = 1.0f;
    size_t pool_bytes = pk_cache_bytes(&cache);
    void *pool = random_pool(rng, &cache);
    cache.base = pool;

    /* Distinct slots in random order, some skipped (negative). */
    int32_t nslots = cache.num_blocks * B;
    int32_t ntok = gu_range(rng, 1, nslots < 120 ? nslots : 120);
    int32_t *slots = nv_permutation(rng, nslots);
    for (int32_t t = 0; t < ntok; t++)
        if (tap_rng_below(rng, 7) == 0)
            slots[t] = -1 - (int32_t) tap_rng_below(rng, 5);

    int32_t layer_begin = gu_range(rng, 0, cache.num_layers - 1);
    int32_t num_layers = gu_range(rng, 1, cache.num_layers - layer_begin);
    size_t n = (size_t) num_layers * (size_t) ntok * (size_t) cache.num_kv_heads * (size_t) D;
    size_t ssize = pk_dtype_size(src_dtype);
    void *k = bmalloc(n * ssize), *v = bmalloc(n * ssize);
    random_sources(rng, &cache, src_dtype, k, v, n, edges);

    void *want = bmalloc(pool_bytes);
    memcpy(want, pool, pool_bytes);
    pk_append_args ha = {
        .cache = cache,
        .layer_begin = layer_begin,
        .num_layers = num_layers,
        .num_tokens = ntok,
        .src_dtype = src_dtype,
        .k = k,
        .v = v,
        .slot_mapping = slots,
    };
    ha.cache.base = want;
    int rc = pk_ref_append(&ha);
    if (rc != 0)
        bail("pk_ref_append: %s", paged_strerror(rc));

    pk_append_args da = ha;
    size_t shift = misalign ? ssize : 0;
    char *k_buf = gu_alloc(n * ssize + 16), *v_buf = gu_alloc(n * ssize + 16);
    gu_upload(k_buf + shift, k, n * ssize);
    gu_upload(v_buf + shift, v, n * ssize);
    da.k = k_buf + shift;
    da.v = v_buf + shift;
    da.cache.base = gu_clone(pool, pool_bytes);
    da.slot_mapping = gu_clone(slots, (size_t) ntok * sizeof *slots);
    rc = pk_cuda_append(&da, NULL);
    gu_sync("append");
    void *got = bmalloc(pool_bytes);
    gu_download(got, da.cache.base, pool_bytes);
    ok(rc == 0 && pools_match(got, want, pool_bytes, cache_dtype),
       "append %s<-%s D=%d B=%d H=%d layers %d+%d of %d, %d tokens%s%s: whole pool bit-identical to reference",
       gu_dtype_name(cache_dtype), gu_dtype_name(src_dtype), (int) D, (int) B, (int) cache.num_kv_heads,
       (int) layer_begin, (int) num_layers, (int) cache.num_layers, (int) ntok, edges ? " rounding edges" : "",
       misalign ? " misaligned source" : "");

    gu_free(k_buf);
    gu_free(v_buf);
    gu_free(da.cache.base);
    gu_free((void *) da.slot_mapping);
    free(pool);
    free(want);
    free(got);
    free(slots);
    free(k);
    free(v);
}

/*
 * Runs one segmented APPEND case (what the daemon launches for merged APPENDs): dtype pair
 * pi, head dim D, block size B; up to 9 segments, some empty, each source in its own device
 * buffer, some of them misaligned (the vector path is chosen per segment); the segment
 * offsets and the pointer arrays in device memory. Every odd idx gives each segment its own
 * random first layer (seg_layer in device memory, as a merged launch of clients at different
 * layers has it; the first two different). Reports whether the whole pool matches the
 * reference's segmented APPEND (which cpu-append-t checks against segment by segment).
 */
static void segmented_case(tap_rng *rng, int pi, int32_t D, int32_t B, int idx)
{
    int32_t cache_dtype = pairs[pi][0], src_dtype = pairs[pi][1];
    const int fp8 = cache_dtype == PAGED_DTYPE_FP8_E4M3;
    const int mixed = idx % 2 == 1;
    pk_cache cache = {
        .num_layers = (mixed ? 2 : 1) + idx % 3,
        .num_blocks = gu_range(rng, 2, 12),
        .num_kv_heads = 1 + idx % 3,
        .head_dim = D,
        .block_size = B,
        .dtype = cache_dtype,
        .k_scale = fp8 ? (float) tap_rng_uniform(rng, 0.001, 0.05) : 1.0f,
        .v_scale = fp8 ? (float) tap_rng_uniform(rng, 0.001, 0.05) : 1.0f,
    };
    size_t pool_bytes = pk_cache_bytes(&cache);
    void *pool = random_pool(rng, &cache);

    int32_t nslots = cache.num_blocks * B;
    int32_t S = gu_range(rng, 1, 9);
    int32_t *indptr = bmalloc((size_t) (S + 1) * sizeof *indptr);
    indptr[0] = 0;
    for (int32_t s = 0; s < S; s++) {
        int32_t room = nslots - indptr[s], want = gu_range(rng, 0, 3) == 0 ? 0 : gu_range(rng, 1, 24);
        indptr[s + 1] = indptr[s] + (want < room ? want : room);
    }
    int32_t ntok = indptr[S];
    int32_t *slots = nv_permutation(rng, nslots);
    int skipped = 0;
    for (int32_t t = 0; t < ntok; t++)
        if (tap_rng_below(rng, 7) == 0) {
            slots[t] = -1;
            skipped++;
        }
    int32_t layer_begin = gu_range(rng, 0, cache.num_layers - 1);
    int32_t num_layers = gu_range(rng, 1, cache.num_layers - layer_begin);
    int32_t *seg_layer = NULL;
    char layers[96] = "";
    if (mixed) {
        num_layers = gu_range(rng, 1, cache.num_layers - 1);    /* fewer than all */
        layer_begin = gu_range(rng, 0, cache.num_layers - num_layers);
        seg_layer = nv_random_layers(rng, S, cache.num_layers - num_layers + 1);
        size_t m = (size_t) snprintf(layers, sizeof layers, ", per-segment first layers");
        for (int32_t s = 0; s < S && m < sizeof layers - 4; s++)
            m += (size_t) snprintf(layers + m, sizeof layers - m, "%s%d", s ? "," : " ", (int) seg_layer[s]);
    }

    size_t ssize = pk_dtype_size(src_dtype), row = (size_t) cache.num_kv_heads * (size_t) D;
    const void **hk = bmalloc((size_t) S * sizeof *hk), **hv = bmalloc((size_t) S * sizeof *hv);
    const void **dk = bmalloc((size_t) S * sizeof *dk), **dv = bmalloc((size_t) S * sizeof *dv);
    char **kbuf = bmalloc((size_t) S * sizeof *kbuf), **vbuf = bmalloc((size_t) S * sizeof *vbuf);
    int misaligned = 0;
    for (int32_t s = 0; s < S; s++) {
        size_t n = (size_t) num_layers * (size_t) (indptr[s + 1] - indptr[s]) * row;
        void *k = bmalloc(n * ssize + 1), *v = bmalloc(n * ssize + 1);
        random_sources(rng, &cache, src_dtype, k, v, n, 0);
        size_t shift = (idx + s) % 4 == 3 ? ssize : 0;
        misaligned += shift != 0;
        kbuf[s] = gu_alloc(n * ssize + 16);
        vbuf[s] = gu_alloc(n * ssize + 16);
        if (n != 0) {
            gu_upload(kbuf[s] + shift, k, n * ssize);
            gu_upload(vbuf[s] + shift, v, n * ssize);
        }
        hk[s] = k;
        hv[s] = v;
        dk[s] = kbuf[s] + shift;
        dv[s] = vbuf[s] + shift;
    }

    void *want = bmalloc(pool_bytes);
    memcpy(want, pool, pool_bytes);
    pk_append_args ha = {
        .cache = cache, .layer_begin = layer_begin, .num_layers = num_layers, .num_tokens = ntok,
        .src_dtype = src_dtype, .slot_mapping = slots, .num_segments = S, .seg_indptr = indptr,
        .k_seg = hk, .v_seg = hv, .seg_layer = seg_layer,
    };
    ha.cache.base = want;
    int rc = pk_ref_append(&ha);
    if (rc != 0)
        bail("pk_ref_append (segmented): %s", paged_strerror(rc));

    pk_append_args da = ha;
    da.cache.base = gu_clone(pool, pool_bytes);
    da.slot_mapping = gu_clone(slots, (size_t) (ntok > 0 ? ntok : 1) * sizeof *slots);
    da.seg_indptr = gu_clone(indptr, (size_t) (S + 1) * sizeof *indptr);
    da.k_seg = gu_clone(dk, (size_t) S * sizeof *dk);
    da.v_seg = gu_clone(dv, (size_t) S * sizeof *dv);
    da.seg_layer = mixed ? gu_clone(seg_layer, (size_t) S * sizeof *seg_layer) : NULL;
    rc = pk_cuda_append(&da, NULL);
    gu_sync("segmented append");
    void *got = bmalloc(pool_bytes);
    gu_download(got, da.cache.base, pool_bytes);
    ok(rc == 0 && pools_match(got, want, pool_bytes, cache_dtype),
       "segmented append %s<-%s D=%d B=%d H=%d layers %d+%d of %d, %d segments (%d misaligned), %d tokens "
       "(%d skipped)%s: whole pool bit-identical to reference", gu_dtype_name(cache_dtype),
       gu_dtype_name(src_dtype), (int) D, (int) B, (int) cache.num_kv_heads, (int) layer_begin,
       (int) num_layers, (int) cache.num_layers, (int) S, misaligned, (int) ntok, skipped, layers);

    for (int32_t s = 0; s < S; s++) {
        gu_free(kbuf[s]);
        gu_free(vbuf[s]);
        free((void *) hk[s]);
        free((void *) hv[s]);
    }
    gu_free(da.cache.base);
    gu_free((void *) da.slot_mapping);
    gu_free((void *) da.seg_indptr);
    gu_free((void *) da.k_seg);
    gu_free((void *) da.v_seg);
    gu_free((void *) da.seg_layer);
    free(seg_layer);
    free(kbuf);
    free(vbuf);
    free(hk);
    free(hv);
    free(dk);
    free(dv);
    free(pool);
    free(want);
    free(got);
    free(slots);
    free(indptr);
}

/* Runs one COPY case into another device pool of the same geometry but its number of blocks:
 * the destination bit-identical to the reference's, the source left as it was. */
static void copy_across_case(tap_rng *rng, int32_t dtype, int32_t D, int32_t B, int idx)
{
    pk_cache from = {
        .num_layers = 1 + idx % 3, .num_blocks = gu_range(rng, 4, 40), .num_kv_heads = 1 + idx % 4,
        .head_dim = D, .block_size = B, .dtype = dtype, .k_scale = 1.0f, .v_scale = 1.0f,
    };
    pk_cache to = from;
    to.num_blocks = gu_range(rng, 2, 40);
    const size_t fbytes = pk_cache_bytes(&from), tbytes = pk_cache_bytes(&to);
    void *fpool = random_pool(rng, &from), *tpool = random_pool(rng, &to);
    int32_t *sperm = nv_permutation(rng, from.num_blocks), *dperm = nv_permutation(rng, to.num_blocks);
    const int32_t npairs = gu_range(rng, 1, from.num_blocks < to.num_blocks ? from.num_blocks : to.num_blocks);

    void *want = bmalloc(tbytes);
    memcpy(want, tpool, tbytes);
    pk_copy_args ha = { .cache = from, .num_pairs = npairs, .src_blocks = sperm, .dst_blocks = dperm,
                        .dst_base = want, .dst_num_blocks = to.num_blocks };
    ha.cache.base = fpool;
    int rc = pk_ref_copy(&ha);
    if (rc != 0)
        bail("pk_ref_copy across pools: %s", paged_strerror(rc));

    pk_copy_args da = ha;
    da.cache.base = gu_clone(fpool, fbytes);
    da.dst_base = gu_clone(tpool, tbytes);
    da.src_blocks = gu_clone(sperm, (size_t) npairs * sizeof *sperm);
    da.dst_blocks = gu_clone(dperm, (size_t) npairs * sizeof *dperm);
    rc = pk_cuda_copy(&da, NULL);
    gu_sync("copy across pools");
    void *got = bmalloc(tbytes), *src_after = bmalloc(fbytes);
    gu_download(got, da.dst_base, tbytes);
    gu_download(src_after, da.cache.base, fbytes);
    ok(rc == 0 && memcmp(got, want, tbytes) == 0 && memcmp(src_after, fpool, fbytes) == 0,
       "copy across pools %s D=%d B=%d H=%d L=%d, %d pairs from %d into %d blocks: bit-identical to reference",
       gu_dtype_name(dtype), (int) D, (int) B, (int) from.num_kv_heads, (int) from.num_layers, (int) npairs,
       (int) from.num_blocks, (int) to.num_blocks);

    gu_free(da.cache.base);
    gu_free(da.dst_base);
    gu_free((void *) da.src_blocks);
    gu_free((void *) da.dst_blocks);
    free(fpool);
    free(tpool);
    free(want);
    free(got);
    free(src_after);
    free(sperm);
    free(dperm);
}

/* Runs one COPY case on a random pool of dtype, head dim D and block size B. */
static void copy_case(tap_rng *rng, int32_t dtype, int32_t D, int32_t B, int idx)
{
    pk_cache cache = {
        .num_layers = 1 + idx % 3,
        .num_blocks = gu_range(rng, 4, 40),
        .num_kv_heads = 1 + idx % 4,
        .head_dim = D,
        .block_size = B,
        .dtype = dtype,
        .k_scale = 1.0f,
        .v_scale = 1.0f,
    };
    size_t pool_bytes = pk_cache_bytes(&cache);
    void *pool = random_pool(rng, &cache);
    int32_t *perm = nv_permutation(rng, cache.num_blocks);
    int32_t npairs = gu_range(rng, 1, cache.num_blocks / 2);
    int32_t *src = bmalloc((size_t) (npairs + 1) * sizeof *src), *dst = bmalloc((size_t) (npairs + 1) * sizeof *dst);
    for (int32_t i = 0; i < npairs; i++) {
        src[i] = perm[i];
        dst[i] = perm[npairs + i];
    }
    src[npairs] = dst[npairs] = perm[0];    /* a block copied onto itself stays as it is */
    npairs++;

    void *want = bmalloc(pool_bytes);
    memcpy(want, pool, pool_bytes);
    pk_copy_args ha = { .cache = cache, .num_pairs = npairs, .src_blocks = src, .dst_blocks = dst };
    ha.cache.base = want;
    int rc = pk_ref_copy(&ha);
    if (rc != 0)
        bail("pk_ref_copy: %s", paged_strerror(rc));

    pk_copy_args da = ha;
    da.cache.base = gu_clone(pool, pool_bytes);
    da.src_blocks = gu_clone(src, (size_t) npairs * sizeof *src);
    da.dst_blocks = gu_clone(dst, (size_t) npairs * sizeof *dst);
    rc = pk_cuda_copy(&da, NULL);
    gu_sync("copy");
    void *got = bmalloc(pool_bytes);
    gu_download(got, da.cache.base, pool_bytes);
    ok(rc == 0 && memcmp(got, want, pool_bytes) == 0,
       "copy %s D=%d B=%d H=%d L=%d, %d pairs of %d blocks: whole pool bit-identical to reference",
       gu_dtype_name(dtype), (int) D, (int) B, (int) cache.num_kv_heads, (int) cache.num_layers, (int) npairs,
       (int) cache.num_blocks);

    gu_free(da.cache.base);
    gu_free((void *) da.src_blocks);
    gu_free((void *) da.dst_blocks);
    free(pool);
    free(want);
    free(got);
    free(perm);
    free(src);
    free(dst);
}

/* Checks the errors returned for arguments the kernels do not take. */
static void error_cases(void)
{
    void *dummy = gu_alloc(4096);
    pk_append_args a = {
        .cache = { .base = dummy, .num_layers = 2, .num_blocks = 1, .num_kv_heads = 1, .head_dim = 64,
                   .block_size = 16, .dtype = PAGED_DTYPE_F16, .k_scale = 1, .v_scale = 1 },
        .layer_begin = 0, .num_layers = 1, .num_tokens = 1, .src_dtype = PAGED_DTYPE_F16,
        .k = dummy, .v = dummy, .slot_mapping = dummy,
    };
    pk_append_args b = a;
    b.src_dtype = PAGED_DTYPE_BF16;
    is_int(PAGED_E_DTYPE, pk_cuda_append(&b, NULL), "append: bf16 into an f16 cache is PAGED_E_DTYPE");
    b.src_dtype = PAGED_DTYPE_FP8_E4M3;
    is_int(PAGED_E_DTYPE, pk_cuda_append(&b, NULL), "append: fp8 into an f16 cache is PAGED_E_DTYPE");
    b = a;
    b.layer_begin = 1;
    b.num_layers = 2;
    is_int(PAGED_E_LAYER, pk_cuda_append(&b, NULL), "append: layers 1..2 of a 2-layer pool is PAGED_E_LAYER");
    b = a;
    b.num_tokens = 0;
    is_int(0, pk_cuda_append(&b, NULL), "append: no tokens is a no-op");
    b = a;
    b.k = b.v = NULL;
    b.k_seg = (const void *const *) dummy;
    b.v_seg = (const void *const *) dummy;
    b.seg_indptr = (const int32_t *) dummy;
    b.num_segments = 0;
    is_int(PAGED_E_INVAL, pk_cuda_append(&b, NULL), "append: the segmented form with no segments is PAGED_E_INVAL");
    b.num_segments = 1;
    b.seg_indptr = NULL;
    is_int(PAGED_E_INVAL, pk_cuda_append(&b, NULL), "append: the segmented form without offsets is PAGED_E_INVAL");
    b.seg_indptr = (const int32_t *) dummy;
    b.v_seg = NULL;
    is_int(PAGED_E_INVAL, pk_cuda_append(&b, NULL), "append: the segmented form without values is PAGED_E_INVAL");
    b = a;
    b.seg_layer = (const int32_t *) dummy;
    is_int(PAGED_E_INVAL, pk_cuda_append(&b, NULL), "append: per-segment layers without segments are PAGED_E_INVAL");
    pk_copy_args c = { .cache = a.cache, .num_pairs = 0, .src_blocks = NULL, .dst_blocks = NULL };
    is_int(0, pk_cuda_copy(&c, NULL), "copy: no pairs is a no-op");
    gu_sync("error cases");
    gu_free(dummy);
}

/* Runs the error checks, then APPEND (contiguous, then segmented) and COPY over dtypes, head
 * dims and block sizes. */
int main(void)
{
    gu_require_device();
    plan_lazy();
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    const int quick = gu_quick();

    error_cases();
    int idx = 0;
    for (int pi = 0; pi < NPAIRS; pi++)
        for (int di = 0; di < 7; di++, idx++) {
            if (quick && di % 3 != pi % 3)
                continue;
            append_case(&rng, pi, dims[di], block_sizes[idx % 5], idx);
        }
    for (int pi = 0; pi < NPAIRS; pi++)
        for (int di = 0; di < 7; di++, idx++) {
            if (quick && di % 3 != pi % 3)
                continue;
            segmented_case(&rng, pi, dims[di], block_sizes[idx % 5], idx);
        }
    static const int32_t copy_dtypes[] = { PAGED_DTYPE_F16, PAGED_DTYPE_BF16, PAGED_DTYPE_F32, PAGED_DTYPE_FP8_E4M3 };
    for (int ti = 0; ti < 4; ti++)
        for (int di = 0; di < 7; di++, idx++) {
            if (quick && di % 3 != ti % 3)
                continue;
            copy_case(&rng, copy_dtypes[ti], dims[di], block_sizes[idx % 5], idx);
        }
    for (int ti = 0; ti < 4; ti++)
        for (int di = 0; di < 7; di++, idx++) {
            if (quick && di % 3 != ti % 3)
                continue;
            copy_across_case(&rng, copy_dtypes[ti], dims[di], block_sizes[idx % 5], idx);
        }
    return 0;
}
