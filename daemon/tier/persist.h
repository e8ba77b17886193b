/* persist.h: at an orderly shutdown, a pool's blocks and host tier's units written to its file tier. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_TIER_PERSIST_H
#define PAGED_DAEMON_TIER_PERSIST_H

/*
 * The file tier is inclusive and gets units only when the host tier pushes them out; what the
 * pool and the host tier hold when the daemon stops would be lost with it. pd_tiers_persist
 * writes it to the file tier before the tiers are freed: the pool's published blocks (each
 * gathered into a unit as an offload does, through a staging buffer) and the host tier's
 * units, those the file tier lacks, most recently used first (the pool's blocks in use, then
 * its cached ones from the most recently used, then the host tier's from the most recently
 * stored), as many as the tier's bound holds. Each file is dated so that the next daemon's
 * LRU order is that order, below the time the writing began. It runs on the engine's thread
 * once no client is left.
 */

#include <stdint.h>

#include "daemon/tier/tiers.h"

/* What one pd_tiers_persist did. */
struct pd_tiers_persisted {
    uint32_t from_pool;         /* units written of the pool's published blocks */
    uint32_t from_host;         /* of the host tier's units */
    uint32_t beyond_bound;      /* units left out for the file tier's bound */
    uint32_t left_at_deadline;  /* units not written when the deadline came */
    uint32_t failed;            /* units whose copy or write failed */
    uint64_t ns;                /* the time it took */
    char first_failure[256];    /* why the first failure failed; "" if none */
};

/* Writes to t's file tier the units it lacks of the pool's published blocks and the host
 * tier's, most recently used first, within the tier's bound, stopping at deadline_ns of
 * pcore_now_ns (0: none) and after a run of failures (a full disk); fills *out. t NULL or
 * without a file tier writes nothing. Returns the units written. */
uint32_t pd_tiers_persist(struct pd_tiers *t, uint64_t deadline_ns, struct pd_tiers_persisted *out);

#endif
