/* cpuwork.h: the CPU side of paged-bench: one thread pool, parallel fills, the CPU ceilings and kernel timing. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_BENCH_CPUWORK_H
#define PAGED_TOOLS_BENCH_CPUWORK_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/cpu/workers.h"
#include "tools/bench/bench.h"
#include "tools/bench/shapes.h"

/*
 * The CPU backend's kernels run on the daemon's own thread pool (daemon/cpu/workers.h), with
 * the same split into work items, so an in-process CPU run costs what the daemon's does
 * minus the service around it.
 */

/* Returns the process's thread pool of threads workers (0: one per online CPU), started on
 * first use. Dies on failure. */
pd_workers *bench_workers(unsigned threads);

/* Stops the thread pool, if started. */
void bench_workers_close(void);

/* Fills n elements of dtype at p with seeded random values on the thread pool (see
 * bench_fill_host). */
void bench_fill_parallel(void *p, size_t n, int32_t dtype, float amp, float scale, uint64_t seed);

/* The median time of one kernel case, how many runs it came from, over how many sets. */
struct bk_timing {
    double median_us;
    int runs;
    int sets;
    char plan[64];                /* decode on cuda: how the launch split the work ("" elsewhere) */
    double sm_mhz;                /* on cuda: the SM clock over the runs (NAN elsewhere) */
};

/* Times shape s with the pk_cpu_* kernels on the thread pool. Dies on failure. */
void bk_cpu_time(const struct bench_opts *o, const struct bench_ceilings *c, const struct bk_shape *s,
                 uint64_t seed, struct bk_timing *t);

#endif
