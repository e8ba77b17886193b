/* heap.c: the daemon's heap allocations, and the test aid that makes one of them fail. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/util/knobs.h"
#include "daemon/util/heap.h"
#include "daemon/util/log.h"

/* The allocation that fails (0: none) and how many were made since pd_heap_arm. The
 * engine's thread allocates; the CPU backend's workers and the reaper may too. */
static atomic_ullong fail_at, counted;

/* Counts one allocation of size bytes made at file:line; returns whether it is the one that
 * must fail, logging it if so. */
static int planted_failure(size_t size, const char *file, int line)
{
    const unsigned long long at = atomic_load_explicit(&fail_at, memory_order_relaxed);
    if (at == 0 || atomic_fetch_add(&counted, 1) + 1 != at)
        return 0;
    const char *base = strrchr(file, '/');
    pd_log(PD_LOG_WARNING, "allocation %llu (%zu bytes, %s:%d) fails on purpose (PAGEDD_FAIL_ALLOC_AT)", at, size,
           base != NULL ? base + 1 : file, line);
    errno = ENOMEM;
    return 1;
}

/* malloc, but for a planted failure; returns the memory or NULL. */
void *pd_heap_malloc(size_t size, const char *file, int line)
{
    return planted_failure(size, file, line) ? NULL : malloc(size);
}

/* calloc, but for a planted failure; returns the zeroed memory or NULL. */
void *pd_heap_calloc(size_t n, size_t size, const char *file, int line)
{
    return planted_failure(n * size, file, line) ? NULL : calloc(n, size);
}

/* realloc, but for a planted failure, which leaves p as it was; returns the memory or NULL. */
void *pd_heap_realloc(void *p, size_t size, const char *file, int line)
{
    return planted_failure(size, file, line) ? NULL : realloc(p, size);
}

/* Arms the planted failure from the environment; see heap.h. */
unsigned long long pd_heap_arm(void)
{
    const unsigned long long n = pd_knob(PD_KNOB_FAIL_ALLOC_AT);
    atomic_store(&counted, 0);
    atomic_store(&fail_at, n);
    if (n != 0)
        pd_log(PD_LOG_INFO, "allocation %llu from now on will fail on purpose (PAGEDD_FAIL_ALLOC_AT)", n);
    return n;
}

/* Returns the allocations counted since pd_heap_arm; see heap.h. */
unsigned long long pd_heap_counted(void)
{
    return atomic_load(&counted);
}
