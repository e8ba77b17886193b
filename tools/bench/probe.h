/* probe.h: paged-bench's own device code: random fill, the streaming-read probe, a copy kernel, a spin. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_BENCH_PROBE_H
#define PAGED_TOOLS_BENCH_PROBE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Each function launches on stream (a cudaStream_t as void *) and returns the launch's
 * cudaError_t as an int (0 for success) without synchronizing.
 */

/* Bytes the read and copy kernels move per tile: their buffers' sizes must be multiples. */
size_t bp_tile_bytes(void);

/* Fills n elements of dtype (a paged_dtype) at p with amp * uniform[-1, 1) values, element
 * i drawn from a hash of (seed, i); fp8 stores value / scale, saturated, never NaN. */
int bp_fill(void *p, size_t n, int32_t dtype, float amp, float scale, uint64_t seed, void *stream);

/* Stores in *blocks the grid the probes use on this device: waves times the blocks that fit
 * on all its SMs at once. */
int bp_grid(int waves, int *blocks);

/* Reads bytes at src with 16-byte loads, eight in flight per thread, over a grid of blocks;
 * folds what it read into *sink so that no load can be dropped. */
int bp_read(const void *src, size_t bytes, unsigned *sink, int blocks, void *stream);

/* Copies bytes from src to dst with 16-byte loads and stores, over a grid of blocks. */
int bp_copy(void *dst, const void *src, size_t bytes, int blocks, void *stream);

/* Keeps the stream busy for ns nanoseconds (one thread watching the global timer), so that
 * the host can queue the runs to be timed behind it and they run back to back. */
int bp_spin(uint64_t ns, void *stream);

#ifdef __cplusplus
}
#endif

#endif
