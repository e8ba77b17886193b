/* stats.c: per-op request counters and service-latency histograms for STATS. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/stats.h"

#include <string.h>

/* Returns the bucket of v: exact below 2^SUB, then SUB bits of mantissa per power of two. */
unsigned pd_hist_bucket(uint64_t v)
{
    if (v < (1u << PD_HIST_SUB))
        return (unsigned) v;
    unsigned msb = 63u - (unsigned) __builtin_clzll(v);
    unsigned shift = msb - PD_HIST_SUB;
    unsigned mant = (unsigned) (v >> shift) & ((1u << PD_HIST_SUB) - 1);
    return ((shift + 1) << PD_HIST_SUB) + mant;
}

/* Returns the largest value bucket b holds. */
uint64_t pd_hist_bucket_max(unsigned b)
{
    if (b < (1u << PD_HIST_SUB))
        return b;
    unsigned shift = (b >> PD_HIST_SUB) - 1;
    uint64_t mant = (b & ((1u << PD_HIST_SUB) - 1)) | (1u << PD_HIST_SUB);
    uint64_t lo = mant << shift;
    return lo + ((UINT64_C(1) << shift) - 1);
}

/* Adds one value; returns nothing. */
void pd_hist_add(struct pd_hist *h, uint64_t v)
{
    h->buckets[pd_hist_bucket(v)]++;
    h->count++;
}

/* Returns the upper edge of the bucket holding quantile q, or 0 when empty. */
uint64_t pd_hist_quantile(const struct pd_hist *h, double q)
{
    if (h->count == 0)
        return 0;
    if (q < 0)
        q = 0;
    if (q > 1)
        q = 1;
    /* The rank of the q-th value, 1-based: ceil(q * count), at least 1. */
    uint64_t rank = (uint64_t) (q * (double) h->count);
    if ((double) rank < q * (double) h->count)
        rank++;
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned b = 0; b < PD_HIST_BUCKETS; b++) {
        seen += h->buckets[b];
        if (seen >= rank)
            return pd_hist_bucket_max(b);
    }
    return pd_hist_bucket_max(PD_HIST_BUCKETS - 1);
}

/* Records one request; returns nothing. */
void pd_stats_record(struct pd_stats *s, unsigned op, int status, uint64_t tokens,
                     uint64_t bytes, uint64_t service_ns)
{
    if (op >= PCORE_OP_COUNT_)
        return;
    struct pd_op_counters *c = &s->ops[op];
    c->requests++;
    if (status < 0)
        c->errors++;
    else {
        c->tokens += tokens;
        c->bytes += bytes;
    }
    pd_hist_add(&c->latency, service_ns);
}

/* Fills the wire form; returns nothing. */
void pd_stats_fill(const struct pd_stats *s, struct pcore_op_stats out[PCORE_OP_COUNT_])
{
    for (unsigned i = 0; i < PCORE_OP_COUNT_; i++) {
        const struct pd_op_counters *c = &s->ops[i];
        memset(&out[i], 0, sizeof out[i]);
        out[i].requests = c->requests;
        out[i].errors = c->errors;
        out[i].tokens = c->tokens;
        out[i].bytes = c->bytes;
        out[i].latency_p50_ns = pd_hist_quantile(&c->latency, 0.50);
        out[i].latency_p99_ns = pd_hist_quantile(&c->latency, 0.99);
    }
}
