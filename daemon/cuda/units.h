/* units.h: the cuda backend's part of the tiers: pinned host memory and unit copies. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_CUDA_UNITS_H
#define PAGED_DAEMON_CUDA_UNITS_H

#include <stdint.h>

#include "daemon/backend.h"

/* backend.h's host_alloc: page-locked host memory (cudaHostAlloc), zeroed. */
int pd_cu_host_alloc(pd_backend *b, uint64_t size, void **out, char **cause);
/* backend.h's host_free. */
void pd_cu_host_free(pd_backend *b, void *p, uint64_t size);
/* backend.h's units_copy: one strided copy per block on the backend's stream (every layer's
 * K and V piece of the block is one row of it), then a wait for the batches queued before
 * (pd_cu_settle) and for the stream. */
int pd_cu_units_copy(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, int to_units, uint32_t n,
                     const int32_t *blocks, unsigned char *const *units, char **cause);

#endif
