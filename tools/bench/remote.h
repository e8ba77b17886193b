/* remote.h: paged-bench remote: a published prefix adopted from a peer daemon over UCX, against recomputing it. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_BENCH_REMOTE_H
#define PAGED_TOOLS_BENCH_REMOTE_H

#include "tools/bench/bench.h"
#include "tools/bench/report.h"

/* Starts two daemons peered over loopback, publishes a prompt on one and times its adoption by
 * the other (and recomputing it there, unless o->remote_no_recompute), into tables of r. In a
 * paged built without UCX it says so and adds nothing. Dies on failure. */
void bench_remote(const struct bench_opts *o, struct br_report *r);

#endif
