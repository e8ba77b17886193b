/* blocklog.h: a pool's prefix-block events waiting to reach subscribers (stored, offloaded, ...). */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_BLOCKLOG_H
#define PAGED_DAEMON_BLOCKLOG_H

/*
 * What happened to a pool's published blocks, one entry per block, in the order it happened:
 * the engine and the tiers add entries as they act, and the server sends them to the
 * subscribers that asked for block events at the end of the pass (daemon/events.c), then
 * clears the log. Nothing is recorded while nobody listens (enabled 0), and at most
 * PD_BLOCKLOG_MAX entries wait: beyond that they are counted in lost, which the server
 * reports as a LOST event, so a subscriber always knows its picture has a gap.
 *
 * What an action means to a router that tracks where each prefix block is:
 *   STORED      published in the pool (tier: GPU, the pool itself);
 *   OFFLOADED   moved down to tier (host, or file) from the tier above it;
 *   RELOADED    brought back into the pool from tier;
 *   REMOVED     gone from the daemon (tier: the last one that held it).
 */

#include <stdint.h>

#include "paged.h"

#define PD_BLOCKLOG_MAX 65536u

enum pd_block_action {
    PD_BLOCK_STORED = 1,
    PD_BLOCK_OFFLOADED = 2,
    PD_BLOCK_RELOADED = 3,
    PD_BLOCK_REMOVED = 4,
};

enum pd_block_tier {
    PD_TIER_POOL = 0,         /* the pool's own memory (GPU memory on the cuda backend) */
    PD_TIER_HOST = 1,
    PD_TIER_FILE = 2,
};

struct pd_block_event {
    uint8_t action;           /* enum pd_block_action */
    uint8_t tier;             /* enum pd_block_tier */
    uint16_t reserved;
    uint32_t tenant;          /* the prefix scope it is published in */
    paged_hash hash;
};

struct pd_blocklog {
    struct pd_block_event *ev;
    uint32_t n, cap;
    uint64_t lost;            /* entries not recorded since the last flush (full, or no memory) */
    int enabled;              /* someone subscribed to block events */
};

/* Records one event when the log is enabled (counting it in lost when full or out of
 * memory). Returns nothing. */
void pd_blocklog_add(struct pd_blocklog *log, enum pd_block_action action, enum pd_block_tier tier,
                     uint32_t tenant, const paged_hash *hash);

/* Forgets the recorded events and the lost count. Returns nothing. */
void pd_blocklog_clear(struct pd_blocklog *log);

/* Frees the log's memory. Returns nothing. */
void pd_blocklog_free(struct pd_blocklog *log);

#endif
