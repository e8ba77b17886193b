/* staging.h: the cuda backend's part of the peers' transfers: staging buffers in device memory and their unit sums. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_CUDA_STAGING_H
#define PAGED_DAEMON_CUDA_STAGING_H

#include <stdint.h>

#include "daemon/backend.h"

struct cuda_backend;

/* backend.h's dev_alloc: device memory of the backend's device (cudaMalloc). */
int pd_cu_dev_alloc(pd_backend *b, uint64_t size, void **out, char **cause);
/* backend.h's dev_free: once nothing queued can use it (pd_cu_settle), cudaFree. */
void pd_cu_dev_free(pd_backend *b, void *p, uint64_t size);
/* backend.h's units_sums: pk_cuda_unit_sums on the tiers' stream into device memory of its
 * own, copied to sums; returns once done. */
int pd_cu_units_sums(pd_backend *b, const void *units, uint32_t n, uint64_t unit_bytes, uint64_t *sums,
                     char **cause);
/* Makes cb's kept device array for the peers' unit sums (sums_dev) hold at least n, growing
 * it (never freed per call). Returns PAGED_OK or PAGED_E_NOMEM with *cause. */
int pd_cu_sums_room(struct cuda_backend *cb, uint32_t n, char **cause);

#endif
