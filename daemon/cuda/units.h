/* units.h: the cuda backend's part of the tiers: pinned host memory and unit copies. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_CUDA_UNITS_H
#define PAGED_DAEMON_CUDA_UNITS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "daemon/backend.h"

/* The tiers' own copy stream and an event, made at the first swap: the saves of a swap run
 * on it while the loads run on the backend's stream, so the two directions overlap. */
struct pd_cu_units {
    cudaStream_t save_stream;
    cudaEvent_t saved;            /* a save done: the load into the same block may start */
    cudaEvent_t queued;           /* everything queued on the backend's stream before the swap */
};

/* Makes the tiers' stream and events at first use (the peers' unit sums run on that stream
 * too). Returns the runtime's error. */
cudaError_t pd_cu_units_stream(struct pd_cu_units *u);

/* Frees the tiers' stream and events (at the backend's end). */
void pd_cu_units_free(struct pd_cu_units *u);

/* backend.h's host_alloc: page-locked host memory (cudaHostAlloc), zeroed. */
int pd_cu_host_alloc(pd_backend *b, uint64_t size, void **out, char **cause);
/* backend.h's host_free. */
void pd_cu_host_free(pd_backend *b, void *p, uint64_t size);
/* backend.h's units_copy: one strided copy per block on the backend's stream (units of host or
 * device memory) (every layer's
 * K and V piece of the block is one row of it), then a wait for the batches queued before
 * (pd_cu_settle) and for the stream. */
int pd_cu_units_copy(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, int to_units, uint32_t n,
                     const int32_t *blocks, unsigned char *const *units, char **cause);

/* backend.h's units_swap: per block, the save (block to its save unit, where there is one) on
 * the tiers' stream, then the load (load unit to block) on the backend's stream once that
 * block's save is done, so that a save overlaps the loads before it; then waits as
 * pd_cu_units_copy does. */
int pd_cu_units_swap(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, uint32_t n, const int32_t *blocks,
                     unsigned char *const *save, unsigned char *const *load, char **cause);

/* backend.h's units_move: pk_cuda_units_copy with its sums into the kept sums array
 * (pd_cu_sums_room) on the backend's stream, the sums copied to sums, then a wait as
 * pd_cu_units_copy does. PAGED_E_NOTSUP when the units are not this device's memory or more
 * than PK_UNITS_MAX. */
int pd_cu_units_move(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, int to_units, uint32_t n,
                     const int32_t *blocks, unsigned char *units, uint64_t *sums, char **cause);

#endif
