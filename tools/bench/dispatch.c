/* dispatch.c: the host's cost to await each layer on the GPU: launches one by one, or a resident kernel's doorbell. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/core/clock.h"
#include "lib/core/wake.h"
#include "tools/bench/gpu.h"
#include "tools/bench/probe.h"
#include "tools/bench/service.h"

/*
 * A worker that must see each layer's output on the host before it can start the next pays a
 * round trip per layer whatever runs the layer: the host learns the layer is done, then the
 * GPU learns the next may start. This measures that floor on the device, with no service in
 * between, for a layer of the given bytes (the streaming-read probe's work):
 *
 *   - launches queued back to back (no wait): the time a layer takes on the GPU;
 *   - a launch per layer, the host spinning on a word of mapped host memory that the layer's
 *     last block writes (the fastest way for the host to learn a kernel ended; an event
 *     query costs more);
 *   - one resident kernel fed through memory instead of launches: it waits for a doorbell the
 *     host writes into mapped host memory, runs the layer on every block, and writes the same
 *     done word. No launch at all: what a daemon that never launched per request could reach.
 *
 * The layers rotate through input sets that together exceed 4 x L2, as the kernel timings'
 * do. Every wait is bounded: the host's by DISPATCH_WAIT_NS, the resident kernel's by the
 * same on the device's clock.
 */

#define DISPATCH_WAIT_NS 5000000000ull

/* The probe's memory and grids. */
struct disp {
    unsigned char *src;        /* nsets x bytes */
    size_t bytes;
    unsigned nsets;
    unsigned *sink, *words;    /* device */
    unsigned *host;            /* mapped host memory: [0] done, [16] doorbell */
    unsigned *dev_host;        /* its device address */
    int grid;                  /* every kind runs on the resident kernel's grid, so only the dispatch differs */
    cudaEvent_t start, end;    /* around the layers queued back to back */
};

/* Spins until the host word *w reaches v (or UINT32_MAX: the resident kernel gave up); dies
 * past DISPATCH_WAIT_NS naming what. Returns nothing. */
static void spin_until(const unsigned *w, unsigned v, const char *what)
{
    uint64_t deadline = pcore_now_ns() + (uint64_t) DISPATCH_WAIT_NS;
    for (unsigned k = 0;; k++) {
        unsigned x = __atomic_load_n(w, __ATOMIC_ACQUIRE);
        if (x == UINT32_MAX)
            bench_die("dispatch probe: the resident kernel saw no doorbell for %llu ms (%s)",
                      DISPATCH_WAIT_NS / 1000000ull, what);
        if ((int32_t) (x - v) >= 0)
            return;
        if ((k & 1023) == 0 && pcore_now_ns() > deadline)
            bench_die("dispatch probe: %s: layer %u not done after %llu ms", what, v,
                      DISPATCH_WAIT_NS / 1000000ull);
        pcore_cpu_relax();
    }
}

/* Returns the set of layer l of step s. */
static const void *layer_src(const struct disp *d, unsigned s, unsigned l)
{
    return d->src + (size_t) ((s * SVC_LAYERS + l) % d->nsets) * d->bytes;
}

/* Launches one step's layers back to back behind a spin and returns the GPU time per layer
 * in microseconds (CUDA events). */
static double back_to_back(const struct disp *d, unsigned s)
{
    bg_check(bp_spin(200000, bg_stream()), "dispatch probe: the spin");
    bg_check((int) cudaEventRecord(d->start, bg_stream()), "dispatch probe: recording an event");
    for (unsigned l = 0; l < SVC_LAYERS; l++)
        bg_check(bp_read(layer_src(d, s, l), d->bytes, d->sink, d->grid, bg_stream()), "dispatch probe: a read");
    bg_check((int) cudaEventRecord(d->end, bg_stream()), "dispatch probe: recording an event");
    bg_sync("dispatch probe: layers back to back");
    float ms = 0.0f;
    bg_check((int) cudaEventElapsedTime(&ms, d->start, d->end), "dispatch probe: timing");
    return ms * 1e3 / SVC_LAYERS;
}

/* Runs one step's layers each launched, then awaited by the host; returns microseconds per
 * layer (host clock). */
static double launch_awaited(const struct disp *d, unsigned s)
{
    bg_check((int) cudaMemsetAsync(d->words, 0, 4096, bg_stream()), "dispatch probe: zeroing the counter");
    bg_sync("dispatch probe: zeroing the counter");
    __atomic_store_n(&d->host[0], 0, __ATOMIC_RELEASE);
    uint64_t t0 = pcore_now_ns();
    for (unsigned l = 0; l < SVC_LAYERS; l++) {
        bg_check(bp_layer(layer_src(d, s, l), d->bytes, d->sink, d->words, d->dev_host, l + 1, d->grid, bg_stream()),
                 "dispatch probe: a layer");
        spin_until(&d->host[0], l + 1, "a launch awaited");
    }
    double us = (double) (pcore_now_ns() - t0) / 1e3 / SVC_LAYERS;
    bg_sync("dispatch probe: launches awaited");
    return us;
}

/* Runs a step's layers through the resident kernel (a first, untimed layer lets it start);
 * returns microseconds per layer (host clock), or NAN when the device refuses the
 * cooperative launch (a grid that cannot be resident at once, as under an MPS limit on the
 * active threads; said once on stderr): the other rows stand without it. */
static double resident(const struct disp *d)
{
    bg_check((int) cudaMemsetAsync(d->words, 0, 4096, bg_stream()), "dispatch probe: zeroing the counter");
    bg_sync("dispatch probe: zeroing the counter");
    __atomic_store_n(&d->host[0], 0, __ATOMIC_RELEASE);
    __atomic_store_n(&d->host[16], 0, __ATOMIC_RELEASE);
    int rc = bp_resident(d->src, d->bytes, d->nsets, d->sink, d->words, d->dev_host + 16, d->dev_host, SVC_LAYERS + 1,
                         DISPATCH_WAIT_NS, d->grid, bg_stream());
    if (rc == (int) cudaErrorCooperativeLaunchTooLarge || rc == (int) cudaErrorNotSupported) {
        static int said;
        if (!said++)
            fprintf(stderr, "paged-bench: dispatch probe: no resident grid of %d blocks here (%s); its row is n/a\n",
                    d->grid, cudaGetErrorString((cudaError_t) rc));
        (void) cudaGetLastError();
        return NAN;
    }
    bg_check(rc, "dispatch probe: the resident kernel");
    __atomic_store_n(&d->host[16], 1, __ATOMIC_RELEASE);
    spin_until(&d->host[0], 1, "the resident kernel's first layer");
    uint64_t t0 = pcore_now_ns();
    for (unsigned l = 2; l <= SVC_LAYERS + 1; l++) {
        __atomic_store_n(&d->host[16], l, __ATOMIC_RELEASE);
        spin_until(&d->host[0], l, "a resident layer");
    }
    double us = (double) (pcore_now_ns() - t0) / 1e3 / SVC_LAYERS;
    bg_sync("dispatch probe: the resident kernel");
    return us;
}

/* Measures the three ways for layers of layer_bytes (the decode's K/V bytes of a batch-batch
 * layer) and adds the dispatch table to r. Returns nothing. */
void bench_dispatch(const struct bench_opts *o, double layer_bytes, unsigned batch, struct br_report *r)
{
    bg_open();
    struct disp d = { 0 };
    size_t tile = bp_tile_bytes();
    d.bytes = ((size_t) layer_bytes + tile - 1) / tile * tile;
    if (d.bytes == 0)
        d.bytes = tile;
    int dev = 0, l2 = 0;
    bg_check((int) cudaGetDevice(&dev), "dispatch probe: the device");
    bg_check((int) cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "dispatch probe: the L2 size");
    d.nsets = (unsigned) ((4 * (size_t) l2) / d.bytes + 2);
    d.src = bg_alloc(d.nsets * d.bytes, "the dispatch probe's layers");
    bg_fill(d.src, d.nsets * d.bytes / 2, PAGED_DTYPE_BF16, 1.0f, 1.0f, o->seed ^ 0xd15);
    d.sink = bg_alloc(4, "the dispatch probe's sink");
    d.words = bg_alloc(4096, "the dispatch probe's counters");
    bg_check((int) cudaHostAlloc((void **) &d.host, 4096, cudaHostAllocMapped), "dispatch probe: mapped host memory");
    bg_check((int) cudaHostGetDevicePointer((void **) &d.dev_host, d.host, 0), "dispatch probe: its device address");
    bg_check(bp_resident_grid(&d.grid), "dispatch probe: the resident grid");
    bg_check((int) cudaEventCreate(&d.start), "dispatch probe: an event");
    bg_check((int) cudaEventCreate(&d.end), "dispatch probe: an event");

    unsigned steps = o->quick ? 3 : 30;
    double *b2b = bench_alloc(steps * sizeof *b2b, "times"), *aw = bench_alloc(steps * sizeof *aw, "times"),
           *res = bench_alloc(steps * sizeof *res, "times");
    (void) back_to_back(&d, 0);   /* warm-up */
    for (unsigned s = 0; s < steps; s++) {
        b2b[s] = back_to_back(&d, s);
        aw[s] = launch_awaited(&d, s);
        res[s] = resident(&d);
    }
    /* The resident row is n/a when any step could not launch it. */
    int have_res = 1;
    for (unsigned s = 0; s < steps; s++)
        have_res &= !isnan(res[s]);
    double m[3] = { bench_median(b2b, steps), bench_median(aw, steps), have_res ? bench_median(res, steps) : NAN };
    static const char *const how[3] = { "launches back to back, not awaited", "a launch per layer, awaited",
                                        "resident kernel, doorbell per layer" };
    char title[400];
    snprintf(title, sizeof title,
             "dispatch: %d layers of %.1f MB (the K/V bytes of a batch-%u layer's decode, read by the streaming-read "
             "probe), each awaited by the host before the next starts, no service; medians of %u steps",
             SVC_LAYERS, (double) d.bytes / 1e6, batch, steps);
    struct br_table *t = br_table(r, "dispatch", title);
    br_col(t, "how", "how", 0, 0);
    br_col(t, "us_per_layer", "us/layer", 2, 1);
    br_col(t, "over_b2b", "x back to back", 3, 1);
    for (int i = 0; i < 3; i++) {
        int row = br_row(t);
        br_set_str(t, row, "how", how[i]);
        br_set_num(t, row, "us_per_layer", m[i]);
        br_set_num(t, row, "over_b2b", m[i] / m[0]);
    }
    br_print_table(t, stdout);
    free(b2b);
    free(aw);
    free(res);
    bg_check((int) cudaEventDestroy(d.start), "dispatch probe: an event");
    bg_check((int) cudaEventDestroy(d.end), "dispatch probe: an event");
    bg_check((int) cudaFreeHost(d.host), "dispatch probe: freeing mapped host memory");
    bg_free(d.words);
    bg_free(d.sink);
    bg_free(d.src);
}
