/* heap.h: the daemon's heap allocations, and a test aid that makes one of them fail. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_HEAP_H
#define PAGED_DAEMON_HEAP_H

#include <stddef.h>

/*
 * malloc, calloc and realloc for the daemon's own structures. Each counts one allocation;
 * once armed (pd_heap_arm), the allocation numbered PAGEDD_FAIL_ALLOC_AT fails as if the
 * system were out of memory (NULL, errno ENOMEM, a warning in the log), so a test can make
 * every allocation a client's requests cause fail in turn. Unarmed, they are the C
 * library's. Messages built with asprintf for errors are not counted.
 */
void *pd_malloc(size_t size);
void *pd_calloc(size_t n, size_t size);
void *pd_realloc(void *p, size_t size);

/* Reads PAGEDD_FAIL_ALLOC_AT (a number from 1; unset or 0: nothing fails) and starts
 * counting allocations from here; returns the number that will fail, or 0. */
unsigned long long pd_heap_arm(void);

/* Returns how many allocations were made since pd_heap_arm. */
unsigned long long pd_heap_counted(void);

#endif
