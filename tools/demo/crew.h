/* crew.h: paged-demo's side of its workers: their processes, their reports, the waits at barriers. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_DEMO_CREW_H
#define PAGED_TOOLS_DEMO_CREW_H

#include <stdint.h>
#include <sys/types.h>

#include "tools/demo/barrier.h"
#include "tools/demo/progress.h"
#include "tools/demo/worker.h"

/*
 * The workers report through one pipe (struct demo_result records, each one atomic write);
 * the parent keeps each worker's latest and prints the progress lines from them while it
 * waits. A worker that exits is reaped within a second, so that a crash does not hold the
 * others at a barrier and the way it ended is kept for the summary.
 */
struct demo_crew {
    uint32_t n;                 /* workers asked for */
    pid_t *pids;                /* each one's process, -1: not started */
    int *status;                /* its wait status, once reaped */
    unsigned char *reaped;
    unsigned char *live;        /* started and not reaped */
    struct demo_result *last;   /* its latest report (zeros: none yet) */
    unsigned char *done;        /* its final report came */
    int results[2];             /* the reports' pipe */
    int64_t reaped_ns;          /* when the parent last looked for exited workers */
    struct demo_progress progress;
};

/* The longest paged-demo waits for the next report of a worker, in milliseconds. */
#define DEMO_WORKER_MS 600000

/* Sets up a crew of n workers doing plan, whose progress lines start once a stage has
 * run progress_ms (see struct demo_progress); returns 0, or -1 with errno set. */
int demo_crew_init(struct demo_crew *c, uint32_t n, const struct demo_plan *plan,
                   uint32_t progress_ms);

/* Frees what demo_crew_init took. */
void demo_crew_free(struct demo_crew *c);

/*
 * Forks worker a->index: the child closes close_fd (unless -1), keeps its ends of the
 * nbarriers barriers, runs the worker with reports through the pipe, sends its final
 * result and exits (0 only when it ran to the end). Returns the child's pid, or -1 with
 * errno set.
 */
pid_t demo_crew_start(struct demo_crew *c, struct demo_worker_args *a, int close_fd,
                      struct demo_barrier *barriers, int nbarriers);

/* In the parent, once every worker is forked: closes the pipe's write end and the
 * workers' ends of the barriers. */
void demo_crew_started(struct demo_crew *c, struct demo_barrier *barriers, int nbarriers);

/*
 * Waits until every live worker arrived at b (a crashed worker no longer counts), reading
 * reports and printing progress meanwhile, bounded by DEMO_BARRIER_MS; does not let them
 * go. Returns how many arrived.
 */
uint32_t demo_crew_wait(struct demo_crew *c, struct demo_barrier *b);

/* Reads reports until every worker has exited (the pipe's end of file), printing progress
 * meanwhile; gives up when none comes for DEMO_WORKER_MS. */
void demo_crew_collect(struct demo_crew *c);

/* Kills worker i (SIGKILL) and reaps it. Returns 0, or -1 when it was not running. */
int demo_crew_kill(struct demo_crew *c, uint32_t i);

/* Reaps every worker not reaped yet, waiting up to timeout_ms for each. */
void demo_crew_reap(struct demo_crew *c, int timeout_ms);

/* Returns 1 when worker i finished: its final report says it succeeded and it exited 0. */
int demo_crew_finished(const struct demo_crew *c, uint32_t i);

#endif
