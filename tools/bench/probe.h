/* probe.h: paged-bench's device code: random fill, a streaming-read probe, a copy kernel, a spin, dispatch probes. */
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
/* Queues the clock probe on stream, to run beside another stream's work: one thread that
 * counts SM clock cycles and global-timer nanoseconds from when words[0] holds gen to when
 * words[1] does and stores them in out[0..1] (zeros past timeout_ns); all device memory. */
int bp_clock(unsigned *words, unsigned gen, uint64_t timeout_ns, unsigned long long *out, void *stream);

/*
 * The dispatch probes (tools/bench/dispatch.c): what it costs the host to await each layer.
 * bp_layer runs the read probe over bytes at src, then the last block to finish writes seq
 * to *done (mapped host memory; *count, device memory, counts arrivals over the launches:
 * zero it before the first, whose seq is 1). bp_resident launches one cooperative grid of
 * blocks (bp_resident_grid: all it can keep resident) that runs layers 1..layers, each
 * once *bell (mapped host memory) reaches the layer's number, reading set (number mod
 * nsets) of the nsets sets of set_bytes at src, then writing the number to *done; words is
 * 4096 zeroed bytes of device memory. A doorbell late by timeout_ns ends it with
 * UINT32_MAX in *done.
 */
int bp_layer(const void *src, size_t bytes, unsigned *sink, unsigned *count, unsigned *done, unsigned seq,
             int blocks, void *stream);
int bp_resident_grid(int *blocks);
int bp_resident(const void *src, size_t set_bytes, unsigned nsets, unsigned *sink, unsigned *words,
                const unsigned *bell, unsigned *done, unsigned layers, uint64_t timeout_ns, int blocks,
                void *stream);

#ifdef __cplusplus
}
#endif

#endif
