/* crew.c: paged-demo's side of its workers: their processes, their reports, the waits at barriers. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/demo/crew.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/core/clock.h"
#include "paged.h"
#include "tools/common/spawn.h"

/* How often the parent looks for workers that exited, in milliseconds. */
#define DEMO_REAP_MS 200

/* Sets up a crew of n workers; returns 0 or -1. */
int demo_crew_init(struct demo_crew *c, uint32_t n, const struct demo_plan *plan,
                   uint32_t progress_ms)
{
    *c = (struct demo_crew) { .n = n, .results = { -1, -1 } };
    c->pids = malloc(n * sizeof *c->pids);
    c->status = calloc(n, sizeof *c->status);
    c->reaped = calloc(n, 1);
    c->live = calloc(n, 1);
    c->last = calloc(n, sizeof *c->last);
    c->done = calloc(n, 1);
    demo_progress_init(&c->progress, plan, progress_ms);
    if (c->pids == NULL || c->status == NULL || c->reaped == NULL || c->live == NULL
        || c->last == NULL || c->done == NULL || pipe2(c->results, O_CLOEXEC) != 0) {
        demo_crew_free(c);
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        c->pids[i] = -1;
        c->last[i].index = i;
    }
    return 0;
}

/* Frees the arrays and closes what is left of the pipe. */
void demo_crew_free(struct demo_crew *c)
{
    free(c->pids);
    free(c->status);
    free(c->reaped);
    free(c->live);
    free(c->last);
    free(c->done);
    for (int i = 0; i < 2; i++)
        if (c->results[i] >= 0)
            close(c->results[i]);
    *c = (struct demo_crew) { .results = { -1, -1 } };
}

/* In a worker, the report callback: one write below PIPE_BUF is atomic, so the reports of
 * workers never interleave. */
static void send_report(void *ctx, const struct demo_result *r)
{
    const int *fd = ctx;
    if (write(*fd, r, sizeof *r) != (ssize_t) sizeof *r)
        return; /* the parent is gone: the worker finishes unheard */
}

/* Forks one worker; the child runs it and exits. Returns the child's pid or -1. */
pid_t demo_crew_start(struct demo_crew *c, struct demo_worker_args *a, int close_fd,
                      struct demo_barrier *barriers, int nbarriers)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid != 0) {
        if (pid > 0) {
            c->pids[a->index] = pid;
            c->live[a->index] = 1;
        }
        return pid;
    }
    struct demo_result r;
    struct demo_barrier *next = barriers;
    int fd = c->results[1];
    close(c->results[0]);
    if (close_fd >= 0)
        close(close_fd);
    demo_barrier_child(barriers, nbarriers);
    a->barrier = demo_barrier_cross;
    a->barrier_ctx = &next;
    a->report = send_report;
    a->report_ctx = &fd;
    demo_worker_run(a, &r);
    ssize_t n = write(fd, &r, sizeof r);
    _exit(n == (ssize_t) sizeof r && r.status == PAGED_OK ? 0 : 1);
}

/* Closes the parent's copies of the workers' ends. */
void demo_crew_started(struct demo_crew *c, struct demo_barrier *barriers, int nbarriers)
{
    close(c->results[1]);
    c->results[1] = -1;
    for (int i = 0; i < nbarriers; i++)
        demo_barrier_parent(&barriers[i]);
}

/* Reaps worker i if it has exited, keeping its wait status. Returns nothing. */
static void reap_if_exited(struct demo_crew *c, uint32_t i)
{
    int status;
    if (c->live[i] && waitpid(c->pids[i], &status, WNOHANG) == c->pids[i]) {
        c->status[i] = status;
        c->reaped[i] = 1;
        c->live[i] = 0;
    }
}

/* Returns how many workers run still, after reaping those that exited (looked for at most
 * every DEMO_REAP_MS, however often the reports wake the parent). */
static uint32_t count_live(struct demo_crew *c)
{
    int64_t now = (int64_t) pcore_now_ns();
    int reap = now - c->reaped_ns >= (int64_t) DEMO_REAP_MS * 1000000;
    uint32_t n = 0;
    if (reap)
        c->reaped_ns = now;
    for (uint32_t i = 0; i < c->n; i++) {
        if (reap)
            reap_if_exited(c, i);
        n += c->live[i];
    }
    return n;
}

/* Reads the reports waiting in the pipe into each worker's latest. Returns how many came,
 * or -1 at end of file (every worker is gone) or on a short read. */
static long read_reports(struct demo_crew *c)
{
    long got = 0;
    for (uint32_t k = 0; k < 64; k++) {
        struct pollfd p = { .fd = c->results[0], .events = POLLIN };
        if (poll(&p, 1, 0) <= 0)
            break;
        struct demo_result r;
        ssize_t n = read(c->results[0], &r, sizeof r);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != (ssize_t) sizeof r)
            return -1;
        if (r.index < c->n) {
            c->last[r.index] = r;
            c->done[r.index] |= r.phase == DEMO_PHASE_DONE;
        }
        got++;
    }
    return got;
}

/* Waits up to timeout_ms for reports or, with barrier_fd >= 0, arrivals. Returns nothing. */
static void await(struct demo_crew *c, int barrier_fd, int timeout_ms)
{
    struct pollfd p[2] = {
        { .fd = c->results[0], .events = POLLIN },
        { .fd = barrier_fd, .events = POLLIN },
    };
    if (poll(p, barrier_fd >= 0 ? 2 : 1, timeout_ms) < 0 && errno != EINTR)
        return;
}

/* Returns the milliseconds since since_ns. */
static int64_t ms_since(int64_t since_ns)
{
    return ((int64_t) pcore_now_ns() - since_ns) / 1000000;
}

/* Waits until the live workers arrived at b, or none was heard of for DEMO_BARRIER_MS;
 * returns how many arrived. */
uint32_t demo_crew_wait(struct demo_crew *c, struct demo_barrier *b)
{
    uint32_t arrived = 0;
    int64_t heard_ns = (int64_t) pcore_now_ns();
    int open = 1;
    while (open && arrived < count_live(c) && ms_since(heard_ns) < DEMO_BARRIER_MS) {
        await(c, demo_barrier_fd(b), demo_progress_tick(&c->progress, c->last, c->live, c->n));
        long n = demo_barrier_arrivals(b);
        open = n >= 0;
        arrived += n > 0 ? (uint32_t) n : 0;
        if (read_reports(c) > 0 || n > 0)
            heard_ns = (int64_t) pcore_now_ns();
    }
    /* A worker reports before it arrives: every report of those that arrived is in. */
    read_reports(c);
    return arrived;
}

/* Reads reports until every worker has exited, or none came for DEMO_WORKER_MS. */
void demo_crew_collect(struct demo_crew *c)
{
    int64_t heard_ns = (int64_t) pcore_now_ns();
    while (ms_since(heard_ns) < DEMO_WORKER_MS) {
        count_live(c);
        await(c, -1, demo_progress_tick(&c->progress, c->last, c->live, c->n));
        long n = read_reports(c);
        if (n < 0)
            break;
        if (n > 0)
            heard_ns = (int64_t) pcore_now_ns();
    }
}

/* Kills worker i and reaps it; returns 0 or -1. */
int demo_crew_kill(struct demo_crew *c, uint32_t i)
{
    if (i >= c->n || !c->live[i] || kill(c->pids[i], SIGKILL) != 0)
        return -1;
    c->status[i] = spawn_wait(c->pids[i], DEMO_BARRIER_MS);
    c->reaped[i] = c->status[i] != -1;
    c->live[i] = 0;
    return 0;
}

/* Reaps the workers left. */
void demo_crew_reap(struct demo_crew *c, int timeout_ms)
{
    for (uint32_t i = 0; i < c->n; i++)
        if (c->live[i]) {
            c->status[i] = spawn_wait(c->pids[i], timeout_ms);
            c->reaped[i] = c->status[i] != -1;
            c->live[i] = 0;
        }
}

/* Returns 1 when worker i ran to the end and exited 0. */
int demo_crew_finished(const struct demo_crew *c, uint32_t i)
{
    return c->done[i] && c->last[i].status == PAGED_OK && c->reaped[i]
           && WIFEXITED(c->status[i]) && WEXITSTATUS(c->status[i]) == 0;
}
