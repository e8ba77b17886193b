/* cuda-sum-t.c: pk_cuda_unit_sums agrees bit for bit with pk_unit_sum, and a bit flipped on the device shows. */
/* SPDX-License-Identifier: MIT */
/*
 * Random units go to the device in shapes that walk every path of the kernel: one word, a
 * few pages, many 64 KiB units, units larger than a chunk grid and not a multiple of 16
 * bytes, more units than grid y could hold, and units read by 8-byte and by byte loads.
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

/* One shape: n units of unit_bytes each, starting offset bytes into a device allocation. */
struct shape {
    uint32_t n;
    uint64_t unit_bytes;
    size_t offset;
    int big;                        /* left out of the reduced case set */
};

static const struct shape shapes[] = {
    { 1, 8, 0, 0 },
    { 3, 4096, 0, 0 },
    { 2048, 65536, 0, 1 },
    { 4, (8u << 20) + 8, 0, 1 },
    { 70000, 64, 0, 0 },
    { 2, 64u << 20, 0, 1 },
    { 5, 4096, 8, 0 },              /* 8-byte aligned only: the 8-byte loads */
    { 3, 4104, 1, 0 },              /* odd address: the byte loads */
    { 257, 24, 0, 0 },
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* Bails naming what when e is not cudaSuccess; returns nothing. */
static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        bail("%s: %s", what, cudaGetErrorString(e));
}

/*
 * Runs pk_cuda_unit_sums on stream and downloads the n sums into got; returns its status.
 * The stream does not wait for the legacy stream, on which the uploads and the poison ran
 * (and a pageable upload may return before its copy lands), so the device is synchronized first.
 */
static int run_sums(const void *units, uint32_t n, uint64_t unit_bytes, uint64_t *dsums, uint64_t *got,
                    cudaStream_t stream)
{
    gu_sync("the uploads");
    int rc = pk_cuda_unit_sums(units, n, unit_bytes, dsums, stream);
    check(cudaStreamSynchronize(stream), "pk_cuda_unit_sums");
    gu_download(got, dsums, (size_t) n * sizeof *got);
    return rc;
}

/* Checks one shape: every sum against the CPU's, then one bit flipped on the device; returns nothing. */
static void shape_case(tap_rng *rng, const struct shape *s, cudaStream_t stream)
{
    const size_t total = (size_t) s->n * s->unit_bytes;
    unsigned char *host = bmalloc(total);
    for (size_t i = 0; i < total; i += 8) {
        uint64_t x = tap_rng_u64(rng);
        memcpy(host + i, &x, 8);
    }
    char *dmem = gu_alloc(total + s->offset);
    char *dunits = dmem + s->offset;
    gu_upload(dunits, host, total);
    uint64_t *dsums = gu_alloc((size_t) s->n * sizeof *dsums);
    gu_poison(dsums, (size_t) s->n * sizeof *dsums);
    uint64_t *got = bcalloc(s->n, sizeof *got);
    uint64_t *want = bcalloc(s->n, sizeof *want);
    for (uint32_t u = 0; u < s->n; u++)
        want[u] = pk_unit_sum(host + (size_t) u * s->unit_bytes, s->unit_bytes);

    char name[96];
    snprintf(name, sizeof name, "%u units of %llu bytes at offset %zu", s->n, (unsigned long long) s->unit_bytes,
             s->offset);
    is_int(0, run_sums(dunits, s->n, s->unit_bytes, dsums, got, stream), "%s: pk_cuda_unit_sums returns 0", name);
    uint32_t bad = 0;
    for (uint32_t u = 0; u < s->n; u++)
        if (got[u] != want[u] && bad++ == 0)
            diag("unit %u: wanted %016llx, got %016llx", u, (unsigned long long) want[u], (unsigned long long) got[u]);
    ok(bad == 0, "%s: every sum is the CPU's (%u differ)", name, bad);

    /* One bit of one unit flipped on the device: that unit's sum changes, to the CPU's of the
     * flipped bytes, and no other. */
    const uint32_t fu = (uint32_t) tap_rng_below(rng, s->n);
    const uint64_t bit = tap_rng_below(rng, s->unit_bytes * 8);
    const size_t at = (size_t) fu * s->unit_bytes + (size_t) (bit / 8);
    host[at] ^= (unsigned char) (1u << (bit % 8));
    gu_upload(dunits + at, host + at, 1);
    const uint64_t flipped = pk_unit_sum(host + (size_t) fu * s->unit_bytes, s->unit_bytes);
    is_int(0, run_sums(dunits, s->n, s->unit_bytes, dsums, got, stream), "%s: again after a flip", name);
    uint32_t others = 0;
    for (uint32_t u = 0; u < s->n; u++)
        if (u != fu && got[u] != want[u])
            others++;
    ok(got[fu] != want[fu] && got[fu] == flipped && others == 0,
       "%s: flipping bit %llu of unit %u changes its sum only (%u others changed)", name, (unsigned long long) bit,
       fu, others);

    free(want);
    free(got);
    gu_free(dsums);
    gu_free(dmem);
    free(host);
}

/* The refusals and the empty call; returns nothing. */
static void error_cases(cudaStream_t stream)
{
    uint64_t *dsums = gu_alloc(64);
    void *dunits = gu_alloc(64);
    is_int(PAGED_E_INVAL, pk_cuda_unit_sums(dunits, 1, 12, dsums, stream), "units of 12 bytes: PAGED_E_INVAL");
    is_int(PAGED_E_INVAL, pk_cuda_unit_sums(NULL, 1, 8, dsums, stream), "no units: PAGED_E_INVAL");
    is_int(PAGED_E_INVAL, pk_cuda_unit_sums(dunits, 1, 8, NULL, stream), "no sums: PAGED_E_INVAL");
    is_int(PAGED_E_INVAL, pk_cuda_unit_sums(dunits, 4, UINT64_MAX / 2 - 7, dsums, stream),
           "units whose total overflows: PAGED_E_INVAL");
    is_int(0, pk_cuda_unit_sums(dunits, 0, 8, dsums, stream), "no units at all: 0");
    uint64_t got = 0;
    static const unsigned char nothing[8];
    is_int(0, run_sums(dunits, 1, 0, dsums, &got, stream), "an empty unit: 0");
    ok(got == pk_unit_sum(nothing, 0), "an empty unit: the CPU's sum");
    check(cudaStreamSynchronize(stream), "error cases");
    gu_free(dunits);
    gu_free(dsums);
}

/* Runs the cases; returns 0 (the TAP output carries the verdict). */
int main(void)
{
    gu_require_device();
    plan_lazy();
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    const int quick = gu_quick();
    cudaStream_t stream;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

    error_cases(stream);
    for (size_t i = 0; i < NSHAPES; i++)
        if (!quick || !shapes[i].big)
            shape_case(&rng, &shapes[i], stream);

    check(cudaStreamDestroy(stream), "cudaStreamDestroy");
    return 0;
}
