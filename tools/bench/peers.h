/* peers.h: paged-bench peers: paged's kernels and FlashInfer's on the same shapes, outputs compared (peers.py). */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_BENCH_PEERS_H
#define PAGED_TOOLS_BENCH_PEERS_H

#include <stdio.h>

#include "tools/bench/bench.h"
#include "tools/bench/report.h"

/* Writes the bf16 decode and prefill shapes of the options (--quick, and the CPU's prefill
 * list when cpu) to f as the JSON document peers.py reads, without paged's times (what
 * --list-shapes prints). Returns 0, or -1 when writing failed. */
int bench_peers_list(const struct bench_opts *o, int cpu, FILE *f);

/* Times paged's decode and prefill kernels as the kernels benchmark does (its tables go into
 * r), then runs peers.py (FlashInfer on a pool's zero-copy view, every output checked) with
 * those times and the read ceiling, and adds its rows to the tables peers_decode and
 * peers_prefill. Without a python3 or the paged package it says so and adds nothing.
 * Returns 0, or -1 when the script found a mismatch or failed. */
int bench_peers(const struct bench_opts *o, const struct bench_ceilings *c, struct br_report *r);

#endif
