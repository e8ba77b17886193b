/* pins.c: the allocator's pins, time to live and eviction by prefix. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>

#include "daemon/alloc/alloc.h"
#include "daemon/alloc/internal.h"

/* ---- pins, time to live, eviction by prefix ---------------------------------------------- */

/* Sets the clock that stamps blocks entering the LRU list. */
void pa_set_clock(pa_alloc *a, pa_clock_fn *clock)
{
    a->clock = clock;
}

/* Returns how many blocks of the chain hashes[0..n) are published under tenant, counting up to
 * the first miss. */
static uint32_t prefix_found(const pa_alloc *a, uint32_t tenant, uint32_t n, const paged_hash *hashes)
{
    uint32_t i = 0;
    while (i < n && pai_index_find(a, &hashes[i], tenant) >= 0)
        i++;
    return i;
}

/* Returns the blocks pinner has pinned. */
uint32_t pa_pinned_by(const pa_alloc *a, uint32_t pinner)
{
    uint32_t v = pd_map_get(&a->pin_map, pinner);
    return v == PD_MAP_EMPTY ? 0 : v;
}

/* Pins block b (published, not pinned) for pinner, whose pin_map entry is reserved. */
static void pin_block(pa_alloc *a, int32_t b, uint32_t pinner)
{
    pa_block *blk = &a->blocks[b];
    uint32_t had = pa_pinned_by(a, pinner);
    if (had == 0)
        pd_map_put(&a->pin_map, pinner, 1);
    else
        a->pin_map.slots[pd_map_slot_of(&a->pin_map, pinner)].val = had + 1;
    blk->pinned = 1;
    blk->pinner = pinner;
    a->npinned++;
    if (blk->state == ST_CACHED) {
        pai_lru_unlink(a, b);
        blk->state = ST_PINNED;
        a->npinned_idle++;
    }
}

/* Drops block b's pin; an idle block goes on the LRU list as most recently used. */
static void unpin_block(pa_alloc *a, int32_t b)
{
    pa_block *blk = &a->blocks[b];
    uint32_t had = pa_pinned_by(a, blk->pinner);
    if (had <= 1)
        pd_map_del(&a->pin_map, blk->pinner);
    else
        a->pin_map.slots[pd_map_slot_of(&a->pin_map, blk->pinner)].val = had - 1;
    blk->pinned = 0;
    blk->pinner = 0;
    a->npinned--;
    if (blk->state == ST_PINNED) {
        a->npinned_idle--;
        blk->state = ST_CACHED;
        pai_lru_push(a, b);
    }
}

/* Pins the longest published prefix of hashes under tenant for pinner, within the limits. */
int pa_pin(pa_alloc *a, uint32_t tenant, uint32_t n, const paged_hash *hashes, uint32_t pinner,
           uint32_t pinner_limit, uint32_t pool_limit, uint32_t *found_out)
{
    if (n > 0 && hashes == NULL)
        return PAGED_E_INVAL;
    uint32_t found = prefix_found(a, tenant, n, hashes);
    uint32_t fresh = 0;
    for (uint32_t i = 0; i < found; i++) {
        int32_t b = pai_index_find(a, &hashes[i], tenant);
        if (!a->blocks[b].pinned && a->scratch[b]++ == 0)
            fresh++;
    }
    for (uint32_t i = 0; i < found; i++)
        a->scratch[pai_index_find(a, &hashes[i], tenant)] = 0;
    if (found_out != NULL)
        *found_out = found;
    if ((uint64_t) pa_pinned_by(a, pinner) + fresh > pinner_limit
        || (uint64_t) a->npinned + fresh > pool_limit)
        return PAGED_E_LIMIT;
    if (fresh > 0 && pd_map_reserve(&a->pin_map, 1) < 0)
        return PAGED_E_NOMEM;
    for (uint32_t i = 0; i < found; i++) {
        int32_t b = pai_index_find(a, &hashes[i], tenant);
        if (!a->blocks[b].pinned)
            pin_block(a, b, pinner);
    }
    return (int) found;
}

/* Checks that who may drop the pins among the first found blocks of hashes (any: whoever
 * pinned them); returns 0 or PAGED_E_PERM with the index in *bad. */
static int check_unpin(const pa_alloc *a, uint32_t tenant, uint32_t found, const paged_hash *hashes,
                       uint32_t who, int any, uint32_t *bad)
{
    for (uint32_t i = 0; i < found && !any; i++) {
        const pa_block *blk = &a->blocks[pai_index_find(a, &hashes[i], tenant)];
        if (blk->pinned && blk->pinner != who) {
            if (bad != NULL)
                *bad = i;
            return PAGED_E_PERM;
        }
    }
    return 0;
}

/* Finds the longest published prefix of hashes under tenant and checks that who (any: the
 * pool's owner or root) may drop its pins (check_unpin); stores its length in blocks.
 * Returns 0 or the error (bad: the block at fault). */
static int unpinnable_prefix(pa_alloc *a, uint32_t tenant, uint32_t n, const paged_hash *hashes, uint32_t who,
                             int any, uint32_t *bad, uint32_t *found)
{
    if (n > 0 && hashes == NULL)
        return PAGED_E_INVAL;
    *found = prefix_found(a, tenant, n, hashes);
    return check_unpin(a, tenant, *found, hashes, who, any, bad);
}

/* Drops the pins of the longest published prefix of hashes under tenant. */
int pa_unpin(pa_alloc *a, uint32_t tenant, uint32_t n, const paged_hash *hashes, uint32_t who, int any,
             uint32_t *bad)
{
    uint32_t found;
    int err = unpinnable_prefix(a, tenant, n, hashes, who, any, bad, &found);
    if (err < 0)
        return err;
    for (uint32_t i = 0; i < found; i++) {
        int32_t b = pai_index_find(a, &hashes[i], tenant);
        if (a->blocks[b].pinned)
            unpin_block(a, b);
    }
    return (int) found;
}

/* Drops every pin of who (any: everyone's); returns how many, in time linear in the pool. */
uint32_t pa_unpin_all(pa_alloc *a, uint32_t who, int any)
{
    uint32_t n = 0;
    for (uint32_t b = 0; b < a->nblocks && a->npinned > 0; b++)
        if (a->blocks[b].pinned && (any || a->blocks[b].pinner == who)) {
            unpin_block(a, (int32_t) b);
            n++;
        }
    return n;
}

/* Takes the published blocks of hashes under tenant out of the prefix index. */
int pa_evict_prefix(pa_alloc *a, uint32_t tenant, uint32_t n, const paged_hash *hashes, uint32_t who,
                    int any, uint32_t *bad)
{
    uint32_t found;
    int err = unpinnable_prefix(a, tenant, n, hashes, who, any, bad, &found);
    if (err < 0)
        return err;
    /* Back to front: each block is looked up before any other of the chain leaves the index. */
    for (uint32_t i = found; i-- > 0;) {
        int32_t b = pai_index_find(a, &hashes[i], tenant);
        if (b < 0)
            continue;          /* a hash named twice */
        pa_block *blk = &a->blocks[b];
        if (blk->pinned)
            unpin_block(a, b);
        if (blk->state == ST_CACHED) {
            pai_evict_block(a, b);
            continue;
        }
        /* Referenced: no longer findable; it goes to the free list when its last holder frees it. */
        pai_index_del(a, b);
        blk->published = 0;
        blk->hash = (paged_hash) { 0, 0 };
        blk->tenant = 0;
    }
    return (int) found;
}

/* Evicts cached blocks that went on the LRU list ttl_ns or more before the clock's now. */
uint32_t pa_expire(pa_alloc *a, uint64_t ttl_ns)
{
    if (ttl_ns == 0 || a->clock == NULL)
        return 0;
    uint64_t now = a->clock();
    uint32_t n = 0;
    while (a->lru_head >= 0 && now - a->blocks[a->lru_head].cached_ns >= ttl_ns) {
        pai_evict_one(a);
        n++;
    }
    return n;
}

/* Returns when the oldest cached block expires under ttl_ns, or UINT64_MAX. */
uint64_t pa_next_expiry(const pa_alloc *a, uint64_t ttl_ns)
{
    if (ttl_ns == 0 || a->clock == NULL || a->lru_head < 0)
        return UINT64_MAX;
    uint64_t at = a->blocks[a->lru_head].cached_ns + ttl_ns;
    return at < ttl_ns ? UINT64_MAX : at;
}
