/* cuda.h: the cuda backend's interface: pools and data arenas in exportable device memory. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_CUDA_CUDA_H
#define PAGED_DAEMON_CUDA_CUDA_H

#include <stddef.h>

#include "daemon/backend.h"

/* The cuda backend (daemon/cuda/backend.c; only in a pagedd built with CUDA): pools and
 * data arenas in exportable device memory, ops on one stream of the device of runtime
 * ordinal ordinal. Returns NULL with *cause naming why. */
pd_backend *pd_backend_cuda_open(int ordinal, char **cause);

/* Resolves a device list (the device setting: items separated by commas, each an index or a
 * UUID "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"; "" or "all" for every visible device)
 * into runtime ordinals (at most max). Returns how many, or -1 with *cause naming why (no
 * driver, no device, no such device, one named twice). */
int pd_backend_cuda_devices(const char *spec, int *ordinals, int max, char **cause);

/* Returns the number of CUDA devices this process sees, or 0 with why (whylen bytes) saying
 * what is missing; quiet otherwise, for --backend auto (only built with CUDA). */
int pd_backend_cuda_probe(char *why, size_t whylen);

#endif
