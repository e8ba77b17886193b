/* barrier.h: a barrier between paged-demo and its worker processes, made of two pipes. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_DEMO_BARRIER_H
#define PAGED_TOOLS_DEMO_BARRIER_H

/*
 * A worker writes a byte to arrive and then waits for end of file on go, which comes when
 * the parent closes go's write end once every worker has arrived. One barrier serves one
 * crossing. Made before the workers are forked; each worker keeps its ends with
 * demo_barrier_child, the parent its own with demo_barrier_parent. The parent counts the
 * arrivals (polling arrive[0] for them, with whatever else it waits for) and lets the workers
 * go with demo_barrier_open: in between, every worker that arrived is held, which is the
 * moment to look at what they hold.
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

/* In the parent, once the workers are forked: closes the workers' ends of b. Returns
 * nothing. */
void demo_barrier_parent(struct demo_barrier *b);

/* In the parent: returns the descriptor that becomes readable when workers arrive at b. */
int demo_barrier_fd(const struct demo_barrier *b);

/* In the parent: reads the arrivals waiting at b without blocking. Returns how many, or -1
 * when no worker can arrive any more (every worker's end is closed). */
long demo_barrier_arrivals(struct demo_barrier *b);

/* In the parent: lets every worker waiting at b go, and those still to come pass.
 * Returns nothing. */
void demo_barrier_open(struct demo_barrier *b);

#endif
