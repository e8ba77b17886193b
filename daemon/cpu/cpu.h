/* cpu.h: the cpu backend's interface: pools in host shared memory, ops on a thread pool. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_CPU_CPU_H
#define PAGED_DAEMON_CPU_CPU_H

#include "daemon/backend.h"

/* The cpu backend: pools in sealed memfds, ops on a thread pool of threads workers (0: one
 * per online CPU). Returns NULL with *cause on failure. */
pd_backend *pd_backend_cpu_open(unsigned threads, char **cause);

#endif
