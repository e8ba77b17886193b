/* barrier.c: a barrier between paged-demo and its worker processes, made of two pipes. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/demo/barrier.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

/* Makes the pipes of a barrier; returns 0 or -1. */
int demo_barrier_init(struct demo_barrier *b)
{
    if (pipe2(b->arrive, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(b->go, O_CLOEXEC) != 0) {
        close(b->arrive[0]);
        close(b->arrive[1]);
        return -1;
    }
    return 0;
}

/* In a worker: keeps only its ends of the barriers. */
void demo_barrier_child(struct demo_barrier *b, int n)
{
    for (int i = 0; i < n; i++) {
        close(b[i].arrive[0]);
        close(b[i].go[1]);
    }
}

/* In a worker, the barrier callback: arrives at the next of its barriers and waits for the
 * others, bounded by DEMO_BARRIER_MS. */
void demo_barrier_cross(void *ctx)
{
    struct demo_barrier **next = ctx;
    struct demo_barrier *b = (*next)++;
    char byte;
    struct pollfd p = { .fd = b->go[0], .events = POLLIN };
    int rc = 0;
    if (write(b->arrive[1], "A", 1) == 1)
        do
            rc = poll(&p, 1, DEMO_BARRIER_MS);
        while (rc < 0 && errno == EINTR);
    /* End of file, or the time limit: go on either way. */
    if (rc > 0 && read(b->go[0], &byte, 1) < 0)
        return;
}

/* In the parent: keeps only its ends of b. */
void demo_barrier_parent(struct demo_barrier *b)
{
    close(b->arrive[1]);
    close(b->go[0]);
    b->arrive[1] = b->go[0] = -1;
}

/* Returns the parent's end that arrivals come through. */
int demo_barrier_fd(const struct demo_barrier *b)
{
    return b->arrive[0];
}

/* Reads the arrival bytes waiting in the pipe; returns their count, 0 when none is waiting,
 * or -1 at end of file. */
long demo_barrier_arrivals(struct demo_barrier *b)
{
    char bytes[64];
    struct pollfd p = { .fd = b->arrive[0], .events = POLLIN };
    if (poll(&p, 1, 0) <= 0)
        return 0;
    ssize_t got = read(b->arrive[0], bytes, sizeof bytes);
    if (got < 0)
        return errno == EINTR || errno == EAGAIN ? 0 : -1;
    return got == 0 ? -1 : (long) got;
}

/* Closes the parent's ends: the workers see end of file on go. */
void demo_barrier_open(struct demo_barrier *b)
{
    close(b->arrive[0]);
    close(b->go[1]);
    b->arrive[0] = b->go[1] = -1;
}
