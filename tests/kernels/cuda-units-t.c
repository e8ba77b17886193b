/* cuda-units-t.c: pk_cuda_units_copy gathers blocks into units and scatters them back, byte for byte, summed. */
/* SPDX-License-Identifier: MIT */
/*
 * Random pools of several geometries and dtypes: n distinct random blocks are gathered into
 * units (checked piece by piece against the host copy of the pool), then scattered into other
 * distinct blocks of a second pool (checked block by block, every other block untouched).
 * Shapes take the 16-byte path and the byte path (pieces not whole words, units at an odd
 * address), one block, and the most blocks one launch takes. Both moves also take each unit's
 * sum on the way, checked against pk_unit_sum (the host's) of the units' bytes. Then the
 * refusals.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/kernels.h"
#include "tests/kernels/gpu_util.h"
#include "tests/tap/basic.h"

/* One shape: the pool's geometry, how many blocks move, and how far into an allocation the
 * units start. */
struct shape {
    int32_t layers, heads, block_size, head_dim, dtype, num_blocks;
    int32_t n;
    size_t offset;
    int big;                        /* left out of the reduced case set */
};

static const struct shape shapes[] = {
    { 2, 2, 16, 64, PAGED_DTYPE_F32, 40, 7, 0, 0 },
    { 4, 8, 16, 128, PAGED_DTYPE_BF16, 600, PK_UNITS_MAX, 0, 1 },
    { 3, 1, 8, 64, PAGED_DTYPE_F16, 20, 1, 0, 0 },
    { 2, 1, 8, 80, PAGED_DTYPE_FP8_E4M3, 30, 9, 0, 0 },     /* 640-byte pieces: still whole words */
    { 1, 3, 8, 96, PAGED_DTYPE_FP8_E4M3, 16, 5, 1, 0 },     /* units at an odd address: the byte path */
    { 2, 2, 32, 256, PAGED_DTYPE_BF16, 64, 64, 0, 0 },
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* Bails naming what when e is not cudaSuccess; returns nothing. */
static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        bail("%s: %s", what, cudaGetErrorString(e));
}

/* Stores n distinct random block ids below num_blocks in ids. */
static void pick(tap_rng *rng, int32_t num_blocks, int32_t n, int32_t *ids)
{
    for (int32_t i = 0; i < n; i++) {
        int fresh = 0;
        for (int tries = 0; !fresh && tries < 100000; tries++) {
            ids[i] = (int32_t) tap_rng_below(rng, (uint64_t) num_blocks);
            fresh = 1;
            for (int32_t j = 0; j < i; j++)
                fresh &= ids[j] != ids[i];
        }
        if (!fresh)
            bail("no distinct block id left");
    }
}

/* Runs one shape; returns nothing (its assertions say how it went). */
static void run_shape(tap_rng *rng, const struct shape *sh)
{
    pk_cache c = { .num_layers = sh->layers, .num_blocks = sh->num_blocks, .num_kv_heads = sh->heads,
                   .head_dim = sh->head_dim, .block_size = sh->block_size, .dtype = sh->dtype, .k_scale = 1,
                   .v_scale = 1 };
    const size_t piece = (size_t) sh->heads * sh->block_size * sh->head_dim * pk_dtype_size(sh->dtype);
    const size_t planes = (size_t) sh->layers * 2, unit = piece * planes;
    const size_t pool_bytes = pk_cache_bytes(&c), units_bytes = unit * (size_t) sh->n;
    unsigned char *host = bmalloc(pool_bytes), *got = bmalloc(pool_bytes > units_bytes ? pool_bytes : units_bytes);
    for (size_t i = 0; i < pool_bytes; i++)
        host[i] = (unsigned char) tap_rng_below(rng, 256);
    void *pool = gu_clone(host, pool_bytes), *other = gu_alloc(pool_bytes);
    unsigned char *alloc = gu_alloc(units_bytes + sh->offset + 16);
    void *units = alloc + sh->offset;
    gu_poison(alloc, units_bytes + sh->offset + 16);
    gu_poison(other, pool_bytes);
    int32_t *src = bmalloc((size_t) sh->n * sizeof *src), *dst = bmalloc((size_t) sh->n * sizeof *dst);
    pick(rng, sh->num_blocks, sh->n, src);
    pick(rng, sh->num_blocks, sh->n, dst);
    char what[160];
    snprintf(what, sizeof what, "%d blocks of L%d H%d B%d D%d %s, units at +%zu", sh->n, sh->layers, sh->heads,
             sh->block_size, sh->head_dim, gu_dtype_name(sh->dtype), sh->offset);

    /* Gather: unit i, plane r is block src[i]'s piece of plane r. */
    c.base = pool;
    uint64_t *sums_dev = gu_alloc((size_t) sh->n * sizeof *sums_dev);
    uint64_t *sums = bmalloc((size_t) sh->n * sizeof *sums), *want_sums = bmalloc((size_t) sh->n * sizeof *want_sums);
    gu_poison(sums_dev, (size_t) sh->n * sizeof *sums_dev);
    pk_units_args a = { .cache = c, .n = sh->n, .blocks = src, .units = units, .to_units = 1, .sums = sums_dev };
    gu_sync("the uploads");
    is_int(0, pk_cuda_units_copy(&a, NULL), "gather of %s", what);
    gu_sync("the gather");
    gu_download(got, units, units_bytes);
    size_t bad = 0;
    for (int32_t i = 0; i < sh->n; i++)
        for (size_t r = 0; r < planes; r++) {
            const unsigned char *want = host + (r * (size_t) sh->num_blocks + (size_t) src[i]) * piece;
            bad += memcmp(got + (size_t) i * unit + r * piece, want, piece) != 0;
        }
    is_int(0, (long long) bad, "every unit holds its block's pieces in plane order (%s)", what);
    gu_download(sums, sums_dev, (size_t) sh->n * sizeof *sums);
    bad = 0;
    for (int32_t i = 0; i < sh->n; i++) {
        want_sums[i] = pk_unit_sum(got + (size_t) i * unit, unit);
        bad += sums[i] != want_sums[i];
    }
    is_int(0, (long long) bad, "the gather's sums are the host's unit sums of the units (%s)", what);

    /* Scatter into the other pool: blocks dst[i] get unit i; every other byte stays poison. */
    c.base = other;
    gu_poison(sums_dev, (size_t) sh->n * sizeof *sums_dev);
    a = (pk_units_args) { .cache = c, .n = sh->n, .blocks = dst, .units = units, .to_units = 0, .sums = sums_dev };
    is_int(0, pk_cuda_units_copy(&a, NULL), "scatter of %s", what);
    gu_sync("the scatter");
    gu_download(got, other, pool_bytes);
    bad = 0;
    for (int32_t b = 0; b < sh->num_blocks; b++) {
        int32_t from = -1;
        for (int32_t i = 0; i < sh->n; i++)
            if (dst[i] == b)
                from = src[i];
        for (size_t r = 0; r < planes; r++) {
            const unsigned char *g = got + (r * (size_t) sh->num_blocks + (size_t) b) * piece;
            if (from >= 0) {
                bad += memcmp(g, host + (r * (size_t) sh->num_blocks + (size_t) from) * piece, piece) != 0;
            } else {
                for (size_t k = 0; k < piece; k++)
                    bad += g[k] != 0xff;
            }
        }
    }
    is_int(0, (long long) bad, "the scatter wrote exactly the blocks named, with the source blocks' bytes (%s)",
           what);
    gu_download(sums, sums_dev, (size_t) sh->n * sizeof *sums);
    bad = 0;
    for (int32_t i = 0; i < sh->n; i++)
        bad += sums[i] != want_sums[i];
    is_int(0, (long long) bad, "the scatter's sums equal the gather's (%s)", what);
    gu_free(sums_dev);
    free(sums);
    free(want_sums);
    gu_free(pool);
    gu_free(other);
    gu_free(alloc);
    free(host);
    free(got);
    free(src);
    free(dst);
}

/* The arguments refused, nothing written. */
static void refusals(void)
{
    pk_cache c = { .num_layers = 1, .num_blocks = 4, .num_kv_heads = 1, .head_dim = 64, .block_size = 8,
                   .dtype = PAGED_DTYPE_F32, .k_scale = 1, .v_scale = 1 };
    const size_t bytes = pk_cache_bytes(&c);
    void *pool = gu_alloc(bytes), *units = gu_alloc(bytes);
    c.base = pool;
    int32_t ids[PK_UNITS_MAX + 1];
    memset(ids, 0, sizeof ids);
    pk_units_args a = { .cache = c, .n = PK_UNITS_MAX + 1, .blocks = ids, .units = units, .to_units = 1 };
    is_int(PAGED_E_INVAL, pk_cuda_units_copy(&a, NULL), "more than %d blocks: PAGED_E_INVAL", PK_UNITS_MAX);
    a.n = 1;
    ids[0] = 4;
    is_int(PAGED_E_INVAL, pk_cuda_units_copy(&a, NULL), "a block past the pool: PAGED_E_INVAL");
    ids[0] = -1;
    is_int(PAGED_E_INVAL, pk_cuda_units_copy(&a, NULL), "a negative block: PAGED_E_INVAL");
    ids[0] = 0;
    a.cache.dtype = 99;
    is_int(PAGED_E_DTYPE, pk_cuda_units_copy(&a, NULL), "an unknown dtype: PAGED_E_DTYPE");
    a.cache.dtype = PAGED_DTYPE_F32;
    a.cache.head_dim = 0;
    is_int(PAGED_E_GEOMETRY, pk_cuda_units_copy(&a, NULL), "head_dim 0: PAGED_E_GEOMETRY");
    a.cache.head_dim = 64;
    a.units = NULL;
    is_int(PAGED_E_INVAL, pk_cuda_units_copy(&a, NULL), "no units: PAGED_E_INVAL");
    a.units = units;
    a.sums = units;
    a.cache.head_dim = 3;
    a.cache.block_size = 1;
    a.cache.dtype = PAGED_DTYPE_FP8_E4M3;
    is_int(PAGED_E_INVAL, pk_cuda_units_copy(&a, NULL), "sums of 6-byte units (not whole words): PAGED_E_INVAL");
    a.n = 0;
    is_int(0, pk_cuda_units_copy(&a, NULL), "no blocks: nothing to do");
    check(cudaDeviceSynchronize(), "after the refusals");
    gu_free(pool);
    gu_free(units);
}

/* Runs the shapes and the refusals. */
int main(void)
{
    gu_require_device();
    plan_lazy();
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    for (size_t i = 0; i < NSHAPES; i++)
        if (!(gu_quick() && shapes[i].big))
            run_shape(&rng, &shapes[i]);
    refusals();
    return 0;
}
