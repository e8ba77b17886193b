/* heap.h: the daemon's heap allocations, and a test aid that makes one of them fail. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_UTIL_HEAP_H
#define PAGED_DAEMON_UTIL_HEAP_H

#include <stddef.h>

/*
 * malloc, calloc and realloc for the daemon's own structures. Each counts one allocation;
 * once armed (pd_heap_arm), the allocation numbered PAGEDD_FAIL_ALLOC_AT fails as if the
 * system were out of memory (NULL, errno ENOMEM, a warning in the log), so a test can make
 * every allocation a client's requests cause fail in turn. Unarmed, they are the C
 * library's. Messages built with asprintf for errors are not counted.
 */
#define pd_malloc(size) pd_heap_malloc((size), __FILE__, __LINE__)
#define pd_calloc(n, size) pd_heap_calloc((n), (size), __FILE__, __LINE__)
#define pd_realloc(p, size) pd_heap_realloc((p), (size), __FILE__, __LINE__)

/* What the macros above call: file and line name the caller in the planted failure's log
 * line. Each returns what the C library's function returns. */
void *pd_heap_malloc(size_t size, const char *file, int line);
void *pd_heap_calloc(size_t n, size_t size, const char *file, int line);
void *pd_heap_realloc(void *p, size_t size, const char *file, int line);

/* Reads PAGEDD_FAIL_ALLOC_AT (a number from 1; unset or 0: nothing fails) and starts
 * counting allocations from here; returns the number that will fail, or 0. */
unsigned long long pd_heap_arm(void);

/* Returns how many allocations were made since pd_heap_arm. */
unsigned long long pd_heap_counted(void);

#endif
