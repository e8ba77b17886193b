/* host.h: the host tier's index of one pool: which (tenant, hash) unit sits in which slot, LRU. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_TIER_HOST_H
#define PAGED_DAEMON_TIER_HOST_H

/*
 * Pure data structure, no I/O, no memory of the units themselves: the caller keeps capacity
 * slots of unit_bytes each (pinned host memory on the cuda backend) and this says which slot
 * holds which published block, keyed like the allocator's prefix index by (tenant, hash).
 * Every slot is in exactly one state:
 *   free     on the free list;
 *   stored   in the index and on the LRU list (a unit the caller may reload or write out);
 *   taken    out of the index and the LRU list, its bytes still the caller's to use (a
 *            reload in progress); it goes back with pt_host_restore or to the free list with
 *            pt_host_release.
 * free + stored + taken == capacity always. Each stored slot carries the clock time it was
 * stored or last restored, for time to live (LRU order is that order, oldest at the head).
 */

#include <stdint.h>

#include "paged.h"

typedef struct pt_host pt_host;

/* Called for each stored unit that pt_host_put pushes out of the index to make room (LRU
 * first) or that pt_host_expire or pt_host_drop_all drops, before its slot is reused: the
 * caller may still read the slot's bytes during the call (to write them to the file tier).
 * It must not call back into this pt_host. */
typedef void pt_host_out_fn(void *ctx, int32_t slot, uint32_t tenant, const paged_hash *hash);

/* Creates an index of capacity slots (0 allowed: a tier that stores nothing). Returns NULL
 * when out of memory or capacity exceeds 2^30. */
pt_host *pt_host_create(uint32_t capacity);
/* Frees it; NULL is ignored. */
void pt_host_destroy(pt_host *h);

/* Returns the slot storing (tenant, hash), or -1. Changes nothing (no LRU bump). */
int32_t pt_host_find(const pt_host *h, uint32_t tenant, const paged_hash *hash);

/*
 * Stores (tenant, hash) stamped now: in a free slot, or else in the slot of the least
 * recently stored unit, which out (if not NULL) hears of first. Where (tenant, hash) is
 * stored already, it only moves to the most recent end with the new stamp, and *fresh is 0;
 * otherwise *fresh is 1 and the caller writes the unit's bytes into the slot. Returns the
 * slot, or -1 (capacity 0, or every slot taken) with nothing changed.
 */
int32_t pt_host_put(pt_host *h, uint32_t tenant, const paged_hash *hash, uint64_t now, int *fresh,
                    pt_host_out_fn *out, void *ctx);

/* Takes a stored slot out of the index for a reload. Returns 0 or PAGED_E_INVAL (not a
 * stored slot). */
int pt_host_take(pt_host *h, int32_t slot);
/* Puts a taken slot back in the index, most recent, stamped now (a reload that failed). Where
 * its (tenant, hash) was stored again meanwhile, the slot goes to the free list instead.
 * Returns 0 or PAGED_E_INVAL (not a taken slot). */
int pt_host_restore(pt_host *h, int32_t slot, uint64_t now);
/* Returns a taken slot to the free list (a reload that succeeded). Returns 0 or
 * PAGED_E_INVAL. */
int pt_host_release(pt_host *h, int32_t slot);

/* Drops (tenant, hash) from the index, its slot to the free list (evict by prefix). Returns 1
 * if it was stored, 0 if not. out is not called. */
int pt_host_remove(pt_host *h, uint32_t tenant, const paged_hash *hash);

/* Drops, oldest first, every stored unit stamped ttl_ns or more before now (ttl_ns 0: none),
 * calling out for each. Returns how many. */
uint32_t pt_host_expire(pt_host *h, uint64_t now, uint64_t ttl_ns, pt_host_out_fn *out, void *ctx);
/* Returns the time at which the oldest stored unit expires under ttl_ns, or UINT64_MAX. */
uint64_t pt_host_next_expiry(const pt_host *h, uint64_t ttl_ns);
/* Drops every stored unit, oldest first, calling out for each. Returns how many. */
uint32_t pt_host_drop_all(pt_host *h, pt_host_out_fn *out, void *ctx);

/* Writes the stored slots to slots (room for capacity), the most recently stored first.
 * Returns how many. */
uint32_t pt_host_recent_first(const pt_host *h, int32_t *slots);

/* Returns the tenant and hash of a stored or taken slot in *tenant and *hash; returns 0 or
 * PAGED_E_INVAL (a free slot or out of range). */
int pt_host_slot_key(const pt_host *h, int32_t slot, uint32_t *tenant, paged_hash *hash);

/* Counts of the slots in each state. */
typedef struct pt_host_counts {
    uint32_t capacity, free, stored, taken;
} pt_host_counts;
/* Fills *out. */
void pt_host_get_counts(const pt_host *h, pt_host_counts *out);

/* Cross-checks the index, the lists and the counts, for tests. Returns NULL or a static
 * description of the first problem. */
const char *pt_host_check(const pt_host *h);

#endif
