/* progress.h: paged-demo's progress lines: how far the workers are, every few seconds of a long stage. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_DEMO_PROGRESS_H
#define PAGED_TOOLS_DEMO_PROGRESS_H

#include <stdint.h>

#include "tools/demo/worker.h"

/* What each worker does in all, to say how far a stage is. */
struct demo_plan {
    uint32_t seqs;              /* sequences per worker */
    uint32_t steps;             /* decode steps */
    uint32_t layers;            /* outputs per sequence and step */
};

/*
 * The stage is the least advanced phase among the live workers. A stage that ends within
 * first_ms (DEMO_PROGRESS_FIRST_MS unless told) prints nothing; a longer one prints a line
 * then, and again after as long as it has run so far, but at most DEMO_PROGRESS_MAX_MS
 * later (5, 10, 20, 40, 70, 100 s ...): a short demo stays quiet and a long one says now
 * and then how far it is. With first_ms 0 every stage prints a line as it begins (and
 * then after 1, 2, 4 ... s).
 */
struct demo_progress {
    struct demo_plan plan;
    int64_t first_ns;           /* how long a stage runs before its first line */
    int stage;                  /* enum demo_phase of the stage being timed, -1: none */
    int64_t stage_ns;           /* when the parent saw it begin */
    int64_t next_ns;            /* when its next line is due */
};

#define DEMO_PROGRESS_FIRST_MS 5000
#define DEMO_PROGRESS_MAX_MS 30000

/* Starts with no stage; a stage's first line comes after first_ms. */
void demo_progress_init(struct demo_progress *p, const struct demo_plan *plan, uint32_t first_ms);

/*
 * Looks at the latest reports of the n workers in last (live[i] nonzero for those still
 * running) and prints a line on stdout when one is due. Returns the milliseconds until the
 * next could be due, at most 1000.
 */
int demo_progress_tick(struct demo_progress *p, const struct demo_result *last,
                       const unsigned char *live, uint32_t n);

#endif
