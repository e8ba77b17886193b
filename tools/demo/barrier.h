/* barrier.h: a barrier between paged-demo and its worker processes, made of two pipes. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_DEMO_BARRIER_H
#define PAGED_TOOLS_DEMO_BARRIER_H

#include <stdint.h>
#include <sys/types.h>

/*
 * A worker writes a byte to arrive and then waits for end of file on go, which comes when
 * the parent closes go's write end once every worker has arrived. One barrier serves one
 * crossing. Made before the workers are forked; each worker keeps its ends with
 * demo_barrier_child, the parent its own in demo_barrier_release.
 */
struct demo_barrier {
    int arrive[2];
    int go[2];
};

/* The longest any side waits at a barrier, in milliseconds. */
#define DEMO_BARRIER_MS 600000

/* Makes the pipes of a barrier; returns 0 or -1 (errno set). */
int demo_barrier_init(struct demo_barrier *b);

/* In a worker: closes the parent's ends of n barriers. */
void demo_barrier_child(struct demo_barrier *b, int n);

/* In a worker: crosses the next barrier. ctx points to a struct demo_barrier * that walks
 * the worker's barriers in order (the shape of the worker's barrier callback). */
void demo_barrier_cross(void *ctx);

/* In the parent: waits until n of the npids workers in pids arrived at b (or one of them
 * exited, which only a crash does before the last barrier), then lets them go. */
void demo_barrier_release(struct demo_barrier *b, const pid_t *pids, uint32_t npids,
                          uint32_t n);

#endif
