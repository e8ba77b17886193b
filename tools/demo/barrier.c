/* barrier.c: a barrier between paged-demo and its worker processes, made of two pipes. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/demo/barrier.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
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

/* Returns 1 if one of the workers has exited (without reaping it). */
static int worker_exited(const pid_t *pids, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        siginfo_t si = { .si_pid = 0 };
        if (pids[i] > 0 && waitid(P_PID, (id_t) pids[i], &si, WEXITED | WNOHANG | WNOWAIT) == 0
            && si.si_pid != 0)
            return 1;
    }
    return 0;
}

/*
 * In the parent: waits until n workers (of the npids in pids) arrived at b, then lets
 * them go. A worker only
 * exits after crossing every barrier, so one that exits before arriving has crashed: the
 * others are let go then too. Bounded by DEMO_BARRIER_MS in all.
 */
void demo_barrier_release(struct demo_barrier *b, const pid_t *pids, uint32_t npids,
                            uint32_t n)
{
    uint32_t arrived = 0;
    int waited = 0;
    close(b->arrive[1]);
    close(b->go[0]);
    while (arrived < n && waited < DEMO_BARRIER_MS) {
        struct pollfd p = { .fd = b->arrive[0], .events = POLLIN };
        int rc = poll(&p, 1, 1000);
        char bytes[64];
        if (rc > 0) {
            ssize_t got = read(b->arrive[0], bytes, sizeof bytes < n - arrived ? sizeof bytes
                                                                               : n - arrived);
            if (got <= 0)
                break;
            arrived += (uint32_t) got;
        } else if (rc == 0) {
            waited += 1000;
            if (worker_exited(pids, npids))
                break;
        } else if (errno != EINTR)
            break;
    }
    close(b->arrive[0]);
    close(b->go[1]);
}
