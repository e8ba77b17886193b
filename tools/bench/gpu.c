/* gpu.c: paged-bench's checked CUDA runtime calls and its event timing loop. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/bench/gpu.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "kernels/kernels.h"
#include "lib/core/clock.h"
#include "paged.h"
#include "tools/bench/probe.h"

/* One stream per device, created on first use there: a benchmark whose daemons serve two
 * devices (paged-bench remote) fills each client's arena on that arena's device. */
#define BG_MAX_DEVICES 64
static cudaStream_t streams[BG_MAX_DEVICES];
static int current;            /* the device bg_use_device made current (0 from bg_open) */
static int opened;

/* Returns the number of devices, 0 on any error (no driver, no device). */
int bg_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();   /* not sticky, but leave nothing behind */
        return 0;
    }
    return n;
}

/* Dies naming what failed when err is not cudaSuccess. */
void bg_check(int err, const char *fmt, ...)
{
    if (err == (int) cudaSuccess)
        return;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    bench_die("%s: %s (%s)", what, cudaGetErrorString((cudaError_t) err),
              cudaGetErrorName((cudaError_t) err));
}

/* Dies when a kernel entry point failed or left a launch error. */
void bg_check_kernel(int rc, const char *what)
{
    if (rc != 0)
        bench_die("%s: %s", what, paged_strerror(rc));
    bg_check((int) cudaGetLastError(), "%s: launch", what);
}

/* Selects device 0, once. */
void bg_open(void)
{
    if (opened)
        return;
    bg_check((int) cudaSetDevice(0), "cudaSetDevice(0)");
    opened = 1;
}

/* Makes dev this thread's device and the one whose stream bg_stream gives. */
void bg_use_device(int dev)
{
    bg_open();
    if (dev < 0 || dev >= BG_MAX_DEVICES)
        bench_die("device %d: this benchmark keeps streams for devices 0 to %d", dev, BG_MAX_DEVICES - 1);
    bg_check((int) cudaSetDevice(dev), "cudaSetDevice(%d)", dev);
    current = dev;
}

/* Returns the current device's stream, creating it on first use. */
void *bg_stream(void)
{
    bg_open();
    if (streams[current] == NULL)
        bg_check((int) cudaStreamCreateWithFlags(&streams[current], cudaStreamNonBlocking), "cudaStreamCreate");
    return streams[current];
}

/* Allocates device memory or dies. */
void *bg_alloc(size_t bytes, const char *what)
{
    void *p = NULL;
    bg_check((int) cudaMalloc(&p, bytes > 0 ? bytes : 1), "cudaMalloc(%zu bytes) for %s", bytes, what);
    return p;
}

/* Frees device memory (NULL is fine) or dies. */
void bg_free(void *p)
{
    if (p != NULL)
        bg_check((int) cudaFree(p), "cudaFree");
}

/* Allocates bytes of zeroed host memory mapped into the device's address space, storing its
 * device address in *dev; dies on failure. */
void *bg_host_mapped(size_t bytes, void **dev)
{
    void *h = NULL;
    bg_check((int) cudaHostAlloc(&h, bytes, cudaHostAllocMapped), "cudaHostAlloc(%zu bytes, mapped)", bytes);
    memset(h, 0, bytes);
    bg_check((int) cudaHostGetDevicePointer(dev, h, 0), "the device address of mapped host memory");
    return h;
}

/* Frees what bg_host_mapped allocated, or dies. */
void bg_host_free(void *h)
{
    bg_check((int) cudaFreeHost(h), "cudaFreeHost");
}

/* Copies host memory to the device and waits, or dies. */
void bg_upload(void *dst, const void *src, size_t bytes)
{
    if (bytes > 0)
        bg_check((int) cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "upload of %zu bytes", bytes);
}

/* Fills device memory with random values or dies. */
void bg_fill(void *p, size_t n, int32_t dtype, float amp, float scale, uint64_t seed)
{
    if (n > 0)
        bg_check(bp_fill(p, n, dtype, amp, scale, seed, bg_stream()), "random fill of %zu elements", n);
}

/* Waits for the current device's stream or dies. */
void bg_sync(const char *what)
{
    bg_check((int) cudaStreamSynchronize((cudaStream_t) bg_stream()), "%s", what);
}

/* The clock probe's memory: the start and stop words it waits on, then its two counts. */
struct bg_clock_words {
    unsigned words[2];
    unsigned long long counted[2];
};

/*
 * Enqueues the timed runs behind a spin of spin_ns and returns whether the spin was still
 * running once they were all queued (so they ran back to back). Stores the times, and in
 * *sm_mhz the SM clock the clock probe counted over the runs, from a stream of its own (side)
 * beside them, between the words the runs' stream writes at their start and end (probe, in
 * device memory; gen tells this pass's words from the last one's).
 */
static int timed_pass(bg_launch_fn *launch, void *ctx, int nsets, int warmup, int runs, double *us,
                      cudaEvent_t *ev, uint64_t spin_ns, struct bg_clock_words *probe, cudaStream_t side,
                      double *sm_mhz)
{
    static unsigned gen;
    cudaStream_t stream = (cudaStream_t) bg_stream();
    ++gen;
    bg_check(bp_clock(probe->words, gen, spin_ns + 30000000000ull, probe->counted, side), "launching the clock probe");
    bg_check(bp_spin(spin_ns, stream), "launching the spin kernel");
    bg_stream_write_word(stream, &probe->words[0], gen);
    bg_check((int) cudaEventRecord(ev[0], stream), "cudaEventRecord");
    for (int r = 0; r < runs; r++) {
        launch(ctx, (warmup + r) % nsets);
        bg_check((int) cudaEventRecord(ev[r + 1], stream), "cudaEventRecord");
    }
    bg_stream_write_word(stream, &probe->words[1], gen);
    cudaError_t q = cudaEventQuery(ev[0]);
    if (q != cudaErrorNotReady)
        bg_check((int) q, "cudaEventQuery");
    bg_sync("the timed runs");
    bg_check((int) cudaStreamSynchronize(side), "the clock probe");
    unsigned long long counted[2];
    bg_check((int) cudaMemcpy(counted, probe->counted, sizeof counted, cudaMemcpyDeviceToHost),
             "reading the clock probe");
    *sm_mhz = counted[1] > 0 ? (double) counted[0] * 1e3 / (double) counted[1] : NAN;
    for (int r = 0; r < runs; r++) {
        float ms = 0.0f;
        bg_check((int) cudaEventElapsedTime(&ms, ev[r], ev[r + 1]), "cudaEventElapsedTime");
        us[r] = (double) ms * 1e3;
    }
    return q == cudaErrorNotReady;
}

/* Times runs one by one with events; see gpu.h. */
double bg_time_runs(bg_launch_fn *launch, void *ctx, int nsets, int warmup, int runs, double *us)
{
    bg_open();
    /* Warm-up: module loading and first-touch costs stay out; the host's cost of queueing
     * one run (the later warm-up runs, past lazy loading) sizes the spin. */
    double *enqueue = bench_alloc((size_t) (warmup > 0 ? warmup : 1) * sizeof *enqueue, "warm-up times");
    for (int i = 0; i < warmup; i++) {
        uint64_t t0 = pcore_now_ns();
        launch(ctx, i % nsets);
        enqueue[i] = (double) (pcore_now_ns() - t0);
    }
    bg_sync("the warm-up runs");
    double per_run = warmup > 1 ? bench_median(enqueue + 1, (size_t) warmup - 1) : 50e3;
    free(enqueue);

    cudaEvent_t *ev = bench_alloc((size_t) (runs + 1) * sizeof *ev, "events");
    for (int i = 0; i <= runs; i++)
        bg_check((int) cudaEventCreate(&ev[i]), "cudaEventCreate");
    struct bg_clock_words *probe = bg_alloc(sizeof *probe, "the clock probe's words");
    bg_check((int) cudaMemset(probe, 0, sizeof *probe), "clearing the clock probe's words");
    cudaStream_t side = NULL;
    bg_check((int) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), "cudaStreamCreate for the clock probe");
    /* Twice the queueing time plus slack for the event records; if the spin still ran out
     * before the last run was queued, the host fell behind somewhere: spin longer. */
    double spin = 2.0 * (per_run + 5e3) * runs + 1e6;
    double sm_mhz = NAN;
    for (int attempt = 0;; attempt++) {
        if (spin > 4e9)
            spin = 4e9;
        if (timed_pass(launch, ctx, nsets, warmup, runs, us, ev, (uint64_t) spin, probe, side, &sm_mhz))
            break;
        if (attempt == 3) {
            fprintf(stderr, "paged-bench: warning: the host could not queue %d runs ahead of the "
                            "GPU; their times include launch gaps\n", runs);
            break;
        }
        spin *= 4.0;
    }
    for (int i = 0; i <= runs; i++)
        bg_check((int) cudaEventDestroy(ev[i]), "cudaEventDestroy");
    free(ev);
    bg_check((int) cudaStreamDestroy(side), "cudaStreamDestroy of the clock probe's stream");
    bg_free(probe);
    return sm_mhz;
}

/* Queues a write of a word by a stream memory operation; see gpu.h. */
void bg_stream_write_word(void *st, void *addr, uint32_t value)
{
    static CUresult (*write_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
    if (write_fn == NULL) {
        void *fn = NULL;
        enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
        bg_check((int) cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &fn, 12000, cudaEnableDefault, &q),
                 "looking up cuStreamWriteValue32");
#else
        bg_check((int) cudaGetDriverEntryPoint("cuStreamWriteValue32", &fn, cudaEnableDefault, &q),
                 "looking up cuStreamWriteValue32");
#endif
        if (q != cudaDriverEntryPointSuccess || fn == NULL)
            bench_die("the CUDA driver has no cuStreamWriteValue32");
        memcpy(&write_fn, &fn, sizeof fn);
    }
    CUresult r = write_fn((CUstream) st, (CUdeviceptr) (uintptr_t) addr, value, CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r != CUDA_SUCCESS)
        bench_die("cuStreamWriteValue32 on a stream: CUDA driver error %d", (int) r);
}
