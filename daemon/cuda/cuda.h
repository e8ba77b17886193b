/* cuda.h: the cuda backend's interface: pools and data arenas in exportable device memory. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_CUDA_CUDA_H
#define PAGED_DAEMON_CUDA_CUDA_H

#include <stddef.h>

#include "daemon/backend.h"

/* The cuda backend (daemon/cuda/backend.c; only in a pagedd built with CUDA): pools and
 * data arenas in exportable device memory, ops on one stream of the device that device
 * names (an index, a UUID "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", or "" for device 0).
 * Returns NULL with *cause naming why (no driver, no device, no such device). */
pd_backend *pd_backend_cuda_open(const char *device, char **cause);

/* Returns the number of CUDA devices this process sees, or 0 with why (whylen bytes) saying
 * what is missing; quiet otherwise, for --backend auto (only built with CUDA). */
int pd_backend_cuda_probe(char *why, size_t whylen);

#endif
