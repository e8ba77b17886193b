/* gpu.h: the CUDA side of paged-bench: checked runtime calls, the ceilings, kernel timing (HAVE_CUDA only). */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_BENCH_GPU_H
#define PAGED_TOOLS_BENCH_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "tools/bench/bench.h"
#include "tools/bench/cpuwork.h"
#include "tools/bench/shapes.h"

/*
 * Every CUDA call paged-bench makes goes through bg_check or one of the wrappers here: a
 * failure prints what was being done and the CUDA error, and exits 1. A tool that goes on
 * after a device error only prints wrong numbers.
 */

/* Returns the number of CUDA devices, 0 when there is no driver or no device. */
int bg_device_count(void);

/* Dies with the message and the CUDA error's name when err (a cudaError_t) is not success. */
void bg_check(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Dies when a pk_cuda_* call returned rc != 0 or left a launch error behind. */
void bg_check_kernel(int rc, const char *what);

/* Selects device 0; idempotent. */
void bg_open(void);

/* Returns the stream of the device bg_use_device made current (device 0 until then), a
 * cudaStream_t made at its first use: one stream per device. */
void *bg_stream(void);

/* Makes device dev current for this thread (cudaSetDevice) and bg_stream's stream that
 * device's; every change of device in paged-bench goes through it. Dies on failure. */
void bg_use_device(int dev);

/* Sets *sm_max_mhz and *mem_max_mhz (highest SM and memory clocks) and *power_limit_w (the
 * power limit the driver enforces) of CUDA device dev through NVML (nvml.c): what tells one
 * box of a kind from another (an H200 SXM from an NVL, a power-capped card). Each is 0 where
 * unknown, all of them where NVML is not there. Returns nothing. */
void bg_gpu_limits(int dev, int *sm_max_mhz, int *mem_max_mhz, int *power_limit_w);

/* Device memory: allocation, release, host-to-device copy; each dies on failure. */
void *bg_alloc(size_t bytes, const char *what);
void bg_free(void *p);
void bg_upload(void *dst, const void *src, size_t bytes);

/* Mapped host memory: bytes zeroed, readable and writable by host and device (its device
 * address in *dev), and its release; each dies on failure. */
void *bg_host_mapped(size_t bytes, void **dev);
void bg_host_free(void *h);

/* Fills n elements of dtype with seeded random values on the stream (see bp_fill). */
void bg_fill(void *p, size_t n, int32_t dtype, float amp, float scale, uint64_t seed);

/* Waits for the stream, dying (with what) if anything on it failed. */
void bg_sync(const char *what);

/* Queues on stream (a cudaStream_t) a write of value to the 32-bit device word at addr,
 * ordered after everything before it (cuStreamWriteValue32): the in-process loop's word that
 * says a layer is done. Dies on failure. */
void bg_stream_write_word(void *stream, void *addr, uint32_t value);

/* Measures the device's ceilings: name, SMs, L2, streaming read, copy, cuBLAS bf16. */
void bk_cuda_ceilings(const struct bench_opts *o, struct bench_ceilings *c);

/* Times one launch of the streaming-read probe over bytes, in input sets rotated past L2 as
 * the kernels' are; returns the median in microseconds (a plain read of a decode's bytes in
 * one launch: what that launch could take at best). */
double bk_cuda_read_us(const struct bench_opts *o, const struct bench_ceilings *c, double bytes);

/* Times shape s with the pk_cuda_* kernels. */
void bk_cuda_time(const struct bench_opts *o, const struct bench_ceilings *c, const struct bk_shape *s,
                  uint64_t seed, struct bk_timing *t);

/* Runs launch(ctx, i) for runs runs after warmup warm-up runs, set (i mod nsets) each,
 * timed one by one with CUDA events queued back to back behind a spin (so the host's
 * launch cost stays out of the numbers); stores each run's time in microseconds in
 * us[runs]. Returns the SM clock in MHz that a probe beside the runs counted over them
 * (cycles over the global timer), or NAN where the probe could not run: the GPU lowers it
 * under its power limit, so times of one kernel from different runs compare in cycles
 * (time x this clock). Dies on failure. */
typedef void bg_launch_fn(void *ctx, int set);
double bg_time_runs(bg_launch_fn *launch, void *ctx, int nsets, int warmup, int runs, double *us);

/* Measures what it costs the host to await each of 32 layers of layer_bytes (the decode's K/V
 * bytes at batch batch): launches back to back, a launch per layer awaited, a resident
 * kernel fed by a doorbell (dispatch.c); adds and prints the dispatch table. Dies on failure. */
void bench_dispatch(const struct bench_opts *o, double layer_bytes, unsigned batch, struct br_report *r);

/* Measures cuBLAS's bf16 matrix rate (n^3, f32 accumulate, random data) with runs timed
 * runs; returns TFLOP/s, or NAN when libcublas cannot be loaded (why in *why). */
double bg_cublas_tflops(int n, int runs, uint64_t seed, char *why, size_t whylen);

#endif
