/* progress.c: paged-demo's progress lines: how far the workers are, every few seconds of a long stage. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/demo/progress.h"

#include <stdio.h>

#include "lib/core/clock.h"

/* Starts with no stage. */
void demo_progress_init(struct demo_progress *p, const struct demo_plan *plan, uint32_t first_ms)
{
    *p = (struct demo_progress) { .plan = *plan, .first_ns = (int64_t) first_ms * 1000000,
                                  .stage = -1 };
}

/* Prints how far stage is: the sums of done and to do over the nlive live workers. */
static void print_line(const struct demo_progress *p, const struct demo_result *last,
                       const unsigned char *live, uint32_t n, uint32_t nlive, int64_t now)
{
    const struct demo_plan *pl = &p->plan;
    unsigned long long done = 0, total;
    const char *what, *unit;
    for (uint32_t i = 0; i < n; i++) {
        if (!live[i])
            continue;
        done += p->stage == DEMO_PHASE_BUILD ? last[i].seqs_built
                : p->stage == DEMO_PHASE_DECODE ? last[i].steps_done : last[i].outputs;
    }
    if (p->stage == DEMO_PHASE_BUILD) {
        what = "building prompts";
        unit = " sequences";
        total = (unsigned long long) nlive * pl->seqs;
    } else if (p->stage == DEMO_PHASE_DECODE) {
        what = "decoding";
        unit = " steps";
        total = (unsigned long long) nlive * pl->steps;
    } else {
        what = "checking outputs against the CPU reference";
        unit = "";
        total = (unsigned long long) nlive * pl->steps * pl->layers * pl->seqs;
    }
    if (done > total)
        done = total;
    printf("paged-demo: %s: %llu of %llu%s (%llu%%), %lld s so far\n", what, done, total, unit,
           total > 0 ? done * 100 / total : 0, (long long) ((now - p->stage_ns) / 1000000000));
}

/* Prints a line when one is due; returns the milliseconds until the next may be. */
int demo_progress_tick(struct demo_progress *p, const struct demo_result *last,
                       const unsigned char *live, uint32_t n)
{
    int64_t now = (int64_t) pcore_now_ns();
    int stage = DEMO_PHASE_DONE;
    uint32_t nlive = 0;
    for (uint32_t i = 0; i < n; i++)
        if (live[i]) {
            nlive++;
            if (last[i].phase < stage)
                stage = last[i].phase;
        }
    if (stage == DEMO_PHASE_DONE)
        return 1000;
    if (stage != p->stage) {
        p->stage = stage;
        p->stage_ns = now;
        p->next_ns = now + p->first_ns;
    }
    if (now >= p->next_ns) {
        print_line(p, last, live, n, nlive, now);
        int64_t gap = now - p->stage_ns;
        if (gap < p->first_ns || gap < 1000000000)
            gap = p->first_ns > 1000000000 ? p->first_ns : 1000000000;
        if (gap > (int64_t) DEMO_PROGRESS_MAX_MS * 1000000)
            gap = (int64_t) DEMO_PROGRESS_MAX_MS * 1000000;
        p->next_ns = now + gap;
    }
    int64_t ms = (p->next_ns - now) / 1000000 + 1;
    return ms < 1000 ? (int) ms : 1000;
}
