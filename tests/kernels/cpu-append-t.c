/* cpu-append-t.c: APPEND (contiguous, segmented) and COPY: reference and CPU backend agree bit for bit, whole pool. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/dtype.h"
#include "kernels/kernels.h"
#include "tests/kernels/naive.h"
#include "tests/tap/basic.h"

#define NAPPEND 60
#define NSEG 48
#define NCOPY 30
#define NSEGERR 5

static const int32_t dims[] = { 64, 80, 96, 128, 256 };
static const int32_t block_sizes[] = { 8, 16, 32 };
static const int32_t dtypes[] = { PAGED_DTYPE_F32, PAGED_DTYPE_F16, PAGED_DTYPE_BF16,
                                  PAGED_DTYPE_FP8_E4M3 };
/* What an fp8 cache takes: the wider types, quantized, and fp8, copied as it is. */
static const int32_t fp8_sources[] = { PAGED_DTYPE_F16, PAGED_DTYPE_BF16, PAGED_DTYPE_F32, PAGED_DTYPE_FP8_E4M3 };

/* Fills n bytes with random bits (NaN patterns included: they are only ever compared). */
static void random_bytes(tap_rng *rng, void *p, size_t n)
{
    unsigned char *b = p;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t x = tap_rng_u64(rng);
        memcpy(b + i, &x, n - i < 8 ? n - i : 8);
    }
}

/* Returns 1 if the pools are equal, else prints where they first differ and returns 0. */
static int same_pool(const void *want, const void *got, size_t n, const char *what)
{
    const unsigned char *w = want, *g = got;
    for (size_t i = 0; i < n; i++)
        if (w[i] != g[i]) {
            diag("%s: byte %zu is %#x, expected %#x", what, i, g[i], w[i]);
            return 0;
        }
    return 1;
}

/* Returns a random pool geometry of the given dtype with at least min_layers (1 to 3)
 * layers, its memory allocated and random. */
static pk_cache random_cache(tap_rng *rng, int c, int32_t dtype, int32_t min_layers)
{
    pk_cache cache = {
        .num_layers = min_layers + (int32_t) tap_rng_below(rng, (uint64_t) (4 - min_layers)),
        .num_blocks = 4 + (int32_t) tap_rng_below(rng, 24),
        .num_kv_heads = 1 + (int32_t) tap_rng_below(rng, 3),
        .head_dim = dims[c % 5],
        .block_size = block_sizes[c % 3],
        .dtype = dtype,
        .k_scale = dtype == PAGED_DTYPE_FP8_E4M3 ? (float) tap_rng_uniform(rng, 0.002, 0.02) : 1.0f,
        .v_scale = dtype == PAGED_DTYPE_FP8_E4M3 ? (float) tap_rng_uniform(rng, 0.002, 0.02) : 1.0f,
    };
    cache.base = bmalloc(pk_cache_bytes(&cache));
    random_bytes(rng, cache.base, pk_cache_bytes(&cache));
    return cache;
}

/*
 * Writes into want (a copy of the pool before the append) what an APPEND must leave:
 * each kept token's rows copied bit for bit, or for fp8 the input value divided by the
 * scale and rounded by pk_f32_to_e4m3.
 */
static void expect_append(const pk_append_args *a, void *want)
{
    pk_cache c = a->cache;
    c.base = want;
    size_t esize = pk_dtype_size(c.dtype);
    for (int32_t l = 0; l < a->num_layers; l++)
        for (int32_t t = 0; t < a->num_tokens; t++) {
            int32_t slot = a->slot_mapping[t];
            if (slot < 0)
                continue;
            for (int32_t h = 0; h < c.num_kv_heads; h++)
                for (int32_t kv = 0; kv < 2; kv++) {
                    const void *in = kv == 0 ? a->k : a->v;
                    float scale = kv == 0 ? c.k_scale : c.v_scale;
                    size_t dst = nv_offset(&c, a->layer_begin + l, kv, slot / c.block_size, h,
                                           slot % c.block_size);
                    size_t src = (((size_t) l * (size_t) a->num_tokens + (size_t) t) * (size_t) c.num_kv_heads
                                  + (size_t) h) * (size_t) c.head_dim;
                    for (int32_t d = 0; d < c.head_dim; d++) {
                        if (a->src_dtype == c.dtype)
                            memcpy((char *) want + (dst + (size_t) d) * esize,
                                   (const char *) in + (src + (size_t) d) * esize, esize);
                        else
                            ((uint8_t *) want)[dst + (size_t) d] =
                                pk_f32_to_e4m3((float) nv_value(in, src + (size_t) d, a->src_dtype) / scale);
                    }
                }
        }
}

/*
 * Returns T slots (room for T + 1) drawn without repetition from a random permutation of a
 * pool's nslots, about one in eight skipped (-1); stores the number skipped in *skipped.
 */
static int32_t *random_slots(tap_rng *rng, int32_t nslots, int32_t T, int *skipped)
{
    int32_t *perm = nv_permutation(rng, nslots);
    int32_t *mapping = bmalloc((size_t) (T + 1) * sizeof *mapping);
    *skipped = 0;
    for (int32_t t = 0; t < T; t++) {
        mapping[t] = tap_rng_below(rng, 8) == 0 ? -1 : perm[t];
        *skipped += mapping[t] < 0;
    }
    free(perm);
    return mapping;
}

/* Allocates n keys and n values of src_dtype in *k and *v, uniform in [-2, 2); returns nothing. */
static void random_kv(tap_rng *rng, size_t n, int32_t src_dtype, void **k, void **v)
{
    *k = bmalloc(n * pk_dtype_size(src_dtype) + 1);
    *v = bmalloc(n * pk_dtype_size(src_dtype) + 1);
    for (size_t i = 0; i < n; i++) {
        /* Up to +-2: with the small fp8 scales some values saturate. */
        pk_store(*k, i, src_dtype, (float) tap_rng_uniform(rng, -2.0, 2.0));
        pk_store(*v, i, src_dtype, (float) tap_rng_uniform(rng, -2.0, 2.0));
    }
}

/*
 * Runs a through the reference, then again from the pool's bytes in before through the CPU
 * backend (its work items in random chunks), and reports two tests, "label: ref what" and
 * "label: cpu what": whether each left the pool exactly as want. Returns nothing.
 */
static void check_ref_and_cpu(tap_rng *rng, const pk_append_args *a, const void *before, const void *want,
                              const char *label, const char *what)
{
    size_t bytes = pk_cache_bytes(&a->cache);
    int err = pk_ref_append(a);
    ok(err == 0 && same_pool(want, a->cache.base, bytes, label), "%s: ref %s", label, what);

    memcpy(a->cache.base, before, bytes);
    err = pk_cpu_append_check(a);
    size_t items = pk_cpu_append_items(a);
    size_t *begin = bmalloc((items + 1) * sizeof *begin), *end = bmalloc((items + 1) * sizeof *end);
    size_t chunks = nv_split(rng, items, begin, end);
    for (size_t i = 0; i < chunks && err == 0; i++)
        pk_cpu_append_run(a, begin[i], end[i]);
    ok(err == 0 && same_pool(want, a->cache.base, bytes, label), "%s: cpu %s", label, what);
    free(begin);
    free(end);
}

/* Runs one APPEND case through the reference and the CPU backend. */
static void append_case(uint64_t seed, int c)
{
    tap_rng rng;
    tap_rng_seed(&rng, seed + (uint64_t) c * 0x9e3779b97f4a7c15u);
    int32_t dtype = dtypes[c % 4];
    int32_t src_dtype = dtype == PAGED_DTYPE_FP8_E4M3 ? fp8_sources[(c / 4) % 4] : dtype;
    pk_cache cache = random_cache(&rng, c, dtype, 1);
    int32_t L = cache.num_layers, layer_begin = 0, num_layers = L;
    if (tap_rng_below(&rng, 2) == 0) {          /* one layer, or a range, rather than all */
        layer_begin = (int32_t) tap_rng_below(&rng, (uint64_t) L);
        num_layers = 1 + (int32_t) tap_rng_below(&rng, (uint64_t) (L - layer_begin));
    }
    int32_t slots = cache.num_blocks * cache.block_size;
    int32_t T = 1 + (int32_t) tap_rng_below(&rng, (uint64_t) (slots < 300 ? slots : 300));
    int skipped;
    int32_t *mapping = random_slots(&rng, slots, T, &skipped);
    size_t n = (size_t) num_layers * (size_t) T * (size_t) cache.num_kv_heads * (size_t) cache.head_dim;
    void *k, *v;
    random_kv(&rng, n, src_dtype, &k, &v);

    size_t bytes = pk_cache_bytes(&cache);
    void *before = bmalloc(bytes), *want = bmalloc(bytes);
    memcpy(before, cache.base, bytes);
    memcpy(want, cache.base, bytes);
    pk_append_args a = {
        .cache = cache,
        .layer_begin = layer_begin,
        .num_layers = num_layers,
        .num_tokens = T,
        .src_dtype = src_dtype,
        .k = k,
        .v = v,
        .slot_mapping = mapping,
    };
    expect_append(&a, want);

    char label[200];
    snprintf(label, sizeof label,
             "append %s from %s D=%d B=%d %d KV heads, layers %d..%d of %d, %d tokens (%d skipped)",
             nv_dtype_name(dtype), nv_dtype_name(src_dtype), (int) cache.head_dim, (int) cache.block_size,
             (int) cache.num_kv_heads, (int) layer_begin, (int) (layer_begin + num_layers - 1), (int) L,
             (int) T, skipped);
    check_ref_and_cpu(&rng, &a, before, want, label, "writes exactly the expected bits");

    free(before);
    free(want);
    free(k);
    free(v);
    free(mapping);
    free(cache.base);
}

/*
 * Runs one segmented APPEND case: up to 7 segments (some empty), each with its own key and
 * value sources, the slots of all side by side, some skipped. In half of the cases (by
 * runs of 12; every dtype pair among both halves) each segment also has its own random first layer
 * (seg_layer, what a merged launch of clients at different layers uses; the first two
 * different). The expected pool is what running each segment alone, in the contiguous form
 * on its layers, through the reference leaves; the segmented form must leave exactly that,
 * in the reference and in the CPU backend.
 */
static void segmented_case(uint64_t seed, int c)
{
    tap_rng rng;
    tap_rng_seed(&rng, seed + 0x7f4a7c15u + (uint64_t) c * 0x9e3779b97f4a7c15u);
    int32_t dtype = dtypes[c % 4];
    int32_t src_dtype = dtype == PAGED_DTYPE_FP8_E4M3 ? fp8_sources[(c / 4) % 4] : dtype;
    int mixed = (c / 12) % 2 == 1;
    pk_cache cache = random_cache(&rng, c, dtype, mixed ? 2 : 1);
    int32_t L = cache.num_layers, layer_begin = 0, num_layers = L;
    if (mixed) {
        num_layers = 1 + (int32_t) tap_rng_below(&rng, (uint64_t) (L - 1));   /* fewer than all */
        layer_begin = (int32_t) tap_rng_below(&rng, (uint64_t) (L - num_layers + 1));
    } else if (tap_rng_below(&rng, 2) == 0) {
        layer_begin = (int32_t) tap_rng_below(&rng, (uint64_t) L);
        num_layers = 1 + (int32_t) tap_rng_below(&rng, (uint64_t) (L - layer_begin));
    }
    int32_t nslots = cache.num_blocks * cache.block_size;
    int32_t S = 1 + (int32_t) tap_rng_below(&rng, 7);
    int32_t *indptr = bmalloc((size_t) (S + 1) * sizeof *indptr);
    indptr[0] = 0;
    for (int32_t s = 0; s < S; s++) {
        /* Every third or so empty; none past the pool's slots in all. */
        int32_t room = nslots - indptr[s],
                want = tap_rng_below(&rng, 3) == 0 ? 0 : 1 + (int32_t) tap_rng_below(&rng, 40);
        indptr[s + 1] = indptr[s] + (want < room ? want : room);
    }
    int32_t T = indptr[S];
    int32_t *seg_layer = mixed ? nv_random_layers(&rng, S, L - num_layers + 1) : NULL;
    int skipped;
    int32_t *mapping = random_slots(&rng, nslots, T, &skipped);
    size_t row = (size_t) cache.num_kv_heads * (size_t) cache.head_dim;
    const void **kseg = bmalloc((size_t) S * sizeof *kseg), **vseg = bmalloc((size_t) S * sizeof *vseg);
    for (int32_t s = 0; s < S; s++) {
        void *k, *v;
        random_kv(&rng, (size_t) num_layers * (size_t) (indptr[s + 1] - indptr[s]) * row, src_dtype, &k, &v);
        kseg[s] = k;
        vseg[s] = v;
    }

    size_t bytes = pk_cache_bytes(&cache);
    void *before = bmalloc(bytes), *want = bmalloc(bytes);
    memcpy(before, cache.base, bytes);
    memcpy(want, cache.base, bytes);
    int err = 0;
    for (int32_t s = 0; s < S && err == 0; s++) {
        pk_append_args one = {
            .cache = cache, .layer_begin = mixed ? seg_layer[s] : layer_begin, .num_layers = num_layers,
            .num_tokens = indptr[s + 1] - indptr[s], .src_dtype = src_dtype,
            .k = kseg[s], .v = vseg[s], .slot_mapping = mapping + indptr[s],
        };
        one.cache.base = want;
        err = pk_ref_append(&one);
    }
    if (err != 0)
        bail("pk_ref_append of one segment: %s", paged_strerror(err));
    pk_append_args a = {
        .cache = cache, .layer_begin = layer_begin, .num_layers = num_layers, .num_tokens = T,
        .src_dtype = src_dtype, .slot_mapping = mapping, .num_segments = S, .seg_indptr = indptr,
        .k_seg = kseg, .v_seg = vseg, .seg_layer = seg_layer,
    };

    char label[300];
    int n = snprintf(label, sizeof label,
                     "segmented append %s from %s D=%d B=%d %d KV heads, layers %d..%d of %d, %d segments, "
                     "%d tokens (%d skipped)", nv_dtype_name(dtype), nv_dtype_name(src_dtype),
                     (int) cache.head_dim, (int) cache.block_size, (int) cache.num_kv_heads, (int) layer_begin,
                     (int) (layer_begin + num_layers - 1), (int) L, (int) S, (int) T, skipped);
    if (mixed) {
        n += snprintf(label + n, sizeof label - (size_t) n, ", %d layers from per-segment firsts", (int) num_layers);
        for (int32_t s = 0; s < S; s++)
            n += snprintf(label + n, sizeof label - (size_t) n, " %d", (int) seg_layer[s]);
    }
    check_ref_and_cpu(&rng, &a, before, want, label, "writes what each segment alone writes");

    free(before);
    free(want);
    for (int32_t s = 0; s < S; s++) {
        free((void *) kseg[s]);
        free((void *) vseg[s]);
    }
    free(kseg);
    free(vseg);
    free(mapping);
    free(indptr);
    free(seg_layer);
    free(cache.base);
}

/* Checks the refusals of malformed segmented APPENDs, in the reference and the CPU check. */
static void test_segment_errors(void)
{
    uint16_t pool[2 * 2 * 2 * 8 * 64], k[2 * 64], v[2 * 64];
    int32_t slots[2] = { 3, 9 };
    int32_t indptr[3] = { 0, 1, 2 }, bad_end[3] = { 0, 1, 1 }, bad_start[3] = { 1, 1, 2 },
            down[3] = { 0, 2, 1 };
    const void *kseg[2] = { k, k + 64 }, *vseg[2] = { v, v + 64 }, *vnull[2] = { v, NULL };
    pk_append_args good = {
        .cache = { .base = pool, .num_layers = 2, .num_blocks = 2, .num_kv_heads = 1, .head_dim = 64,
                   .block_size = 8, .dtype = PAGED_DTYPE_F16, .k_scale = 1, .v_scale = 1 },
        .layer_begin = 1, .num_layers = 1, .num_tokens = 2, .src_dtype = PAGED_DTYPE_F16,
        .slot_mapping = slots, .num_segments = 2, .seg_indptr = indptr, .k_seg = kseg, .v_seg = vseg,
    };
    is_int(0, pk_ref_append(&good), "segmented append ref accepts two segments of a token each");
    struct {
        const char *what;
        pk_append_args a;
    } cases[NSEGERR];
    for (size_t i = 0; i < NSEGERR; i++)
        cases[i].a = good;
    cases[0].what = "no segments";
    cases[0].a.num_segments = 0;
    cases[1].what = "offsets that do not end at the token count";
    cases[1].a.seg_indptr = bad_end;
    cases[2].what = "offsets that do not start at 0";
    cases[2].a.seg_indptr = bad_start;
    cases[3].what = "decreasing offsets";
    cases[3].a.seg_indptr = down;
    cases[4].what = "a segment with tokens but no values";
    cases[4].a.v_seg = vnull;
    for (size_t i = 0; i < NSEGERR; i++) {
        is_int(PAGED_E_INVAL, pk_ref_append(&cases[i].a), "segmented append ref refuses %s", cases[i].what);
        is_int(PAGED_E_INVAL, pk_cpu_append_check(&cases[i].a), "segmented append cpu check refuses %s",
               cases[i].what);
    }

    /* Per-segment first layers: one layer each of a 2-layer pool. */
    int32_t layers[2] = { 0, 1 };
    pk_append_args a = good;
    a.seg_layer = layers;
    is_int(0, pk_ref_append(&a), "segmented append ref accepts first layers 0 and 1 of one layer each");
    layers[1] = 2;
    is_int(PAGED_E_LAYER, pk_ref_append(&a), "segmented append ref refuses a segment's layer past the pool");
    is_int(PAGED_E_LAYER, pk_cpu_append_check(&a), "segmented append cpu check refuses a segment's layer "
           "past the pool");
    layers[1] = 1;
    a.num_layers = 2;
    a.layer_begin = 0;
    is_int(PAGED_E_LAYER, pk_cpu_append_check(&a), "segmented append cpu check refuses a segment whose "
           "layers run past the pool");
    layers[1] = -1;
    a.num_layers = 1;
    is_int(PAGED_E_LAYER, pk_ref_append(&a), "segmented append ref refuses a negative first layer of a segment");
    pk_append_args b = {
        .cache = good.cache, .layer_begin = 0, .num_layers = 1, .num_tokens = 1,
        .src_dtype = PAGED_DTYPE_F16, .k = k, .v = v, .slot_mapping = slots, .seg_layer = layers,
    };
    layers[0] = 0;
    is_int(PAGED_E_INVAL, pk_ref_append(&b), "append ref refuses per-segment layers without segments");
    is_int(PAGED_E_INVAL, pk_cpu_append_check(&b), "append cpu check refuses per-segment layers without segments");
}

/* Runs COPY a as the CPU backend does, its work items in random chunks. Returns the check's
 * status. */
static int cpu_copy(tap_rng *rng, const pk_copy_args *a)
{
    int err = pk_cpu_copy_check(a);
    size_t items = pk_cpu_copy_items(a);
    size_t *begin = bmalloc((items + 1) * sizeof *begin), *end = bmalloc((items + 1) * sizeof *end);
    size_t chunks = nv_split(rng, items, begin, end);
    for (size_t i = 0; i < chunks && err == 0; i++)
        pk_cpu_copy_run(a, begin[i], end[i]);
    free(begin);
    free(end);
    return err;
}

/* Runs one COPY case through the reference and the CPU backend. */
static void copy_case(uint64_t seed, int c)
{
    tap_rng rng;
    tap_rng_seed(&rng, seed + 0x5bd1e995u + (uint64_t) c * 0x9e3779b97f4a7c15u);
    int32_t dtype = dtypes[c % 4];
    pk_cache cache = random_cache(&rng, c, dtype, 1);
    int32_t N = cache.num_blocks;
    int32_t *perm = nv_permutation(&rng, N);
    /* Destinations and sources are disjoint; one pair may copy a third block onto itself. */
    int32_t pairs = 1 + (int32_t) tap_rng_below(&rng, (uint64_t) ((N - 1) / 2 < 12 ? (N - 1) / 2 : 12));
    int self = tap_rng_below(&rng, 2) == 0;
    int32_t *src = bmalloc((size_t) (pairs + 1) * sizeof *src);
    int32_t *dst = bmalloc((size_t) (pairs + 1) * sizeof *dst);
    for (int32_t i = 0; i < pairs; i++) {
        dst[i] = perm[i];
        src[i] = perm[pairs + i];
    }
    if (self) {
        src[pairs] = dst[pairs] = perm[2 * pairs];
        pairs++;
    }

    size_t bytes = pk_cache_bytes(&cache);
    size_t block_bytes = (size_t) cache.num_kv_heads * (size_t) cache.block_size * (size_t) cache.head_dim
                         * pk_dtype_size(dtype);
    void *before = bmalloc(bytes), *want = bmalloc(bytes);
    memcpy(before, cache.base, bytes);
    memcpy(want, cache.base, bytes);
    for (int32_t i = 0; i < pairs; i++)
        for (int32_t l = 0; l < cache.num_layers; l++)
            for (int32_t kv = 0; kv < 2; kv++)
                memcpy((char *) want + nv_offset(&cache, l, kv, dst[i], 0, 0) * pk_dtype_size(dtype),
                       (char *) before + nv_offset(&cache, l, kv, src[i], 0, 0) * pk_dtype_size(dtype),
                       block_bytes);
    pk_copy_args a = { .cache = cache, .num_pairs = pairs, .src_blocks = src, .dst_blocks = dst };

    char label[200];
    snprintf(label, sizeof label, "copy %s D=%d B=%d %d KV heads %d layers, %d pairs of %d blocks%s",
             nv_dtype_name(dtype), (int) cache.head_dim, (int) cache.block_size, (int) cache.num_kv_heads,
             (int) cache.num_layers, (int) pairs, (int) N, self ? " (one onto itself)" : "");
    int err = pk_ref_copy(&a);
    ok(err == 0 && same_pool(want, cache.base, bytes, label),
       "%s: ref copies every layer's K and V, nothing else", label);

    memcpy(cache.base, before, bytes);
    err = cpu_copy(&rng, &a);
    ok(err == 0 && same_pool(want, cache.base, bytes, label),
       "%s: cpu copies every layer's K and V, nothing else", label);

    free(before);
    free(want);
    free(src);
    free(dst);
    free(perm);
    free(cache.base);
}

/* Runs one COPY case into another pool of the same geometry but its number of blocks, through
 * the reference and the CPU backend: the destination pool gets exactly the pairs' blocks, the
 * source pool is left as it was. */
static void copy_across_case(uint64_t seed, int c)
{
    tap_rng rng;
    tap_rng_seed(&rng, seed + 0x7f4a7c15u + (uint64_t) c * 0x9e3779b97f4a7c15u);
    int32_t dtype = dtypes[c % 4];
    pk_cache from = random_cache(&rng, c, dtype, 1);
    pk_cache to = from;
    to.num_blocks = 2 + (int32_t) tap_rng_below(&rng, 40);
    to.base = bmalloc(pk_cache_bytes(&to));
    random_bytes(&rng, to.base, pk_cache_bytes(&to));
    int32_t limit = from.num_blocks < to.num_blocks ? from.num_blocks : to.num_blocks;
    int32_t pairs = 1 + (int32_t) tap_rng_below(&rng, (uint64_t) limit);
    int32_t *sperm = nv_permutation(&rng, from.num_blocks), *dperm = nv_permutation(&rng, to.num_blocks);
    /* A source and a destination may have the same id: they are blocks of two pools. */
    const int32_t *src = sperm, *dst = dperm;
    size_t fbytes = pk_cache_bytes(&from), tbytes = pk_cache_bytes(&to), esize = pk_dtype_size(dtype);
    size_t block_bytes = (size_t) from.num_kv_heads * (size_t) from.block_size * (size_t) from.head_dim * esize;
    void *fbefore = bmalloc(fbytes), *tbefore = bmalloc(tbytes), *want = bmalloc(tbytes);
    memcpy(fbefore, from.base, fbytes);
    memcpy(tbefore, to.base, tbytes);
    memcpy(want, to.base, tbytes);
    for (int32_t i = 0; i < pairs; i++)
        for (int32_t l = 0; l < from.num_layers; l++)
            for (int32_t kv = 0; kv < 2; kv++)
                memcpy((char *) want + nv_offset(&to, l, kv, dst[i], 0, 0) * esize,
                       (char *) fbefore + nv_offset(&from, l, kv, src[i], 0, 0) * esize, block_bytes);
    pk_copy_args a = { .cache = from, .num_pairs = pairs, .src_blocks = src, .dst_blocks = dst,
                       .dst_base = to.base, .dst_num_blocks = to.num_blocks };
    char label[200];
    snprintf(label, sizeof label, "copy across %s D=%d B=%d %d KV heads %d layers, %d pairs from %d into %d blocks",
             nv_dtype_name(dtype), (int) from.head_dim, (int) from.block_size, (int) from.num_kv_heads,
             (int) from.num_layers, (int) pairs, (int) from.num_blocks, (int) to.num_blocks);
    int err = pk_ref_copy(&a);
    ok(err == 0 && same_pool(want, to.base, tbytes, label) && memcmp(fbefore, from.base, fbytes) == 0,
       "%s: ref writes the pairs into the other pool, nothing else", label);
    memcpy(to.base, tbefore, tbytes);
    err = cpu_copy(&rng, &a);
    ok(err == 0 && same_pool(want, to.base, tbytes, label) && memcmp(fbefore, from.base, fbytes) == 0,
       "%s: cpu writes the pairs into the other pool, nothing else", label);
    free(fbefore);
    free(tbefore);
    free(want);
    free(sperm);
    free(dperm);
    free(from.base);
    free(to.base);
}

/* Checks the refusals of APPEND and COPY, and that empty ops are accepted and do nothing. */
static void test_errors(void)
{
    uint16_t pool[2 * 2 * 2 * 8 * 64], k[64], v[64];
    int32_t slot = 3;
    pk_append_args good = {
        .cache = { .base = pool, .num_layers = 2, .num_blocks = 2, .num_kv_heads = 1, .head_dim = 64,
                   .block_size = 8, .dtype = PAGED_DTYPE_F16, .k_scale = 1, .v_scale = 1 },
        .layer_begin = 1, .num_layers = 1, .num_tokens = 1, .src_dtype = PAGED_DTYPE_F16,
        .k = k, .v = v, .slot_mapping = &slot,
    };
    struct {
        const char *what;
        int want;
        pk_append_args a;
    } cases[6];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cases[i].a = good;
    cases[0].what = "f32 input into an f16 cache";
    cases[0].want = PAGED_E_DTYPE;
    cases[0].a.src_dtype = PAGED_DTYPE_F32;
    cases[1].what = "fp8 input into an f16 cache";
    cases[1].want = PAGED_E_DTYPE;
    cases[1].a.src_dtype = PAGED_DTYPE_FP8_E4M3;
    cases[2].what = "layers past the pool";
    cases[2].want = PAGED_E_LAYER;
    cases[2].a.num_layers = 2;
    cases[3].what = "a negative first layer";
    cases[3].want = PAGED_E_LAYER;
    cases[3].a.layer_begin = -1;
    cases[4].what = "a negative token count";
    cases[4].want = PAGED_E_INVAL;
    cases[4].a.num_tokens = -1;
    cases[5].what = "no KV heads";
    cases[5].want = PAGED_E_GEOMETRY;
    cases[5].a.cache.num_kv_heads = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        is_int(cases[i].want, pk_ref_append(&cases[i].a), "append ref refuses %s", cases[i].what);
        is_int(cases[i].want, pk_cpu_append_check(&cases[i].a), "append cpu check refuses %s",
               cases[i].what);
        is_int(0, (long long) pk_cpu_append_items(&cases[i].a), "append cpu has no items for %s",
               cases[i].what);
    }

    pk_append_args none = good;
    none.num_tokens = 0;
    none.k = none.v = NULL;
    none.slot_mapping = NULL;
    is_int(0, pk_ref_append(&none), "append ref accepts zero tokens");
    is_int(0, (long long) pk_cpu_append_items(&none), "append cpu has no items for zero tokens");

    int32_t b0 = 0, b1 = 1;
    pk_copy_args copy = { .cache = good.cache, .num_pairs = -1, .src_blocks = &b0, .dst_blocks = &b1 };
    is_int(PAGED_E_INVAL, pk_ref_copy(&copy), "copy ref refuses a negative pair count");
    is_int(PAGED_E_INVAL, pk_cpu_copy_check(&copy), "copy cpu check refuses a negative pair count");
    copy.num_pairs = 1;
    copy.cache.num_blocks = 0;
    is_int(PAGED_E_GEOMETRY, pk_ref_copy(&copy), "copy ref refuses a pool of no blocks");
    is_int(PAGED_E_GEOMETRY, pk_cpu_copy_check(&copy), "copy cpu check refuses a pool of no blocks");
    copy.cache.num_blocks = good.cache.num_blocks;
    copy.dst_base = good.cache.base;
    copy.dst_num_blocks = 0;
    is_int(PAGED_E_GEOMETRY, pk_ref_copy(&copy), "copy ref refuses a destination pool of no blocks");
    is_int(PAGED_E_GEOMETRY, pk_cpu_copy_check(&copy), "copy cpu check refuses a destination pool of no blocks");
}

/* Runs the APPEND (contiguous, then segmented) and COPY cases, then the refusals; returns 0
 * (the TAP output tells the rest). */
int main(void)
{
    uint64_t seed = tap_seed();
    plan(2 * NAPPEND + 2 * NSEG + 4 * NCOPY + 3 * 6 + 6 + 1 + 2 * NSEGERR + 9);
    for (int c = 0; c < NAPPEND; c++)
        append_case(seed, c);
    for (int c = 0; c < NSEG; c++)
        segmented_case(seed, c);
    for (int c = 0; c < NCOPY; c++)
        copy_case(seed, c);
    for (int c = 0; c < NCOPY; c++)
        copy_across_case(seed, c);
    test_errors();
    test_segment_errors();
    return 0;
}
