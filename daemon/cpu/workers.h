/* workers.h: the CPU backend's thread pool: run one op's work items over N threads. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_CPU_WORKERS_H
#define PAGED_DAEMON_CPU_WORKERS_H

#include <stddef.h>

typedef struct pd_workers pd_workers;

/* Runs items [begin, end) of a job. */
typedef void pd_work_fn(const void *arg, size_t begin, size_t end);

/*
 * Starts n - 1 threads (the calling thread is the n-th worker: it takes items too while
 * it waits). Threads block every signal. Returns NULL with *cause on failure.
 */
pd_workers *pd_workers_create(unsigned n, char **cause);

/* Stops and joins the threads, frees the pool. NULL is ignored. */
void pd_workers_destroy(pd_workers *w);

/* Returns the number of workers, the calling thread included. */
unsigned pd_workers_count(const pd_workers *w);

/*
 * Runs fn(arg, begin, end) over items [0, items) split into chunks across the workers and
 * returns when every item is done. Only one thread calls this at a time (the engine).
 */
void pd_workers_run(pd_workers *w, pd_work_fn *fn, const void *arg, size_t items);

#endif
