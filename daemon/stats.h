/* stats.h: per-op request counters and service-latency histograms for STATS. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_STATS_H
#define PAGED_DAEMON_STATS_H

#include <stdint.h>

#include "lib/core/proto.h"

/*
 * A log-linear histogram: values below 2^PD_HIST_SUB fall in exact buckets; above, each
 * power of two is cut into 2^PD_HIST_SUB equal buckets, so a percentile read back from it
 * is within 1/2^PD_HIST_SUB (3 %) of the truth over the whole 64-bit range.
 */
#define PD_HIST_SUB 5
#define PD_HIST_BUCKETS ((64 - PD_HIST_SUB + 1) << PD_HIST_SUB)

struct pd_hist {
    uint64_t count;
    uint64_t buckets[PD_HIST_BUCKETS];
};

/* Adds one value. */
void pd_hist_add(struct pd_hist *h, uint64_t v);
/* Returns the value at quantile q (0..1): the upper edge of its bucket, 0 when empty. */
uint64_t pd_hist_quantile(const struct pd_hist *h, double q);
/* Returns the bucket of v (exposed for tests). */
unsigned pd_hist_bucket(uint64_t v);
/* Returns the largest value bucket b holds. */
uint64_t pd_hist_bucket_max(unsigned b);

/* Counters of one opcode. */
struct pd_op_counters {
    uint64_t requests;
    uint64_t errors;
    uint64_t tokens;
    uint64_t bytes;
    struct pd_hist latency;
};

struct pd_stats {
    struct pd_op_counters ops[PCORE_OP_COUNT_];
};

/* Records one completed request of opcode op (ignored when out of range). */
void pd_stats_record(struct pd_stats *s, unsigned op, int status, uint64_t tokens,
                     uint64_t bytes, uint64_t service_ns);
/* Fills the wire form for STATS. */
void pd_stats_fill(const struct pd_stats *s, struct pcore_op_stats out[PCORE_OP_COUNT_]);

#endif
