/* alloc.h: the block allocator of one pool: free list, references, holders, prefix cache, LRU. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_ALLOC_ALLOC_H
#define PAGED_DAEMON_ALLOC_ALLOC_H

/*
 * Pure data structure, no I/O, no locks (the caller serializes). Every block is in exactly
 * one state:
 *   free        on the free list, no references;
 *   referenced  refcount > 0; each reference belongs to one holder (a client id), and a
 *               holder may hold several references to one block (a forked sequence);
 *   cached      refcount 0 but published in the prefix index: findable by LOOKUP until it
 *               is evicted, least recently used first, when the free list runs out, or
 *               expires (pa_expire);
 *   pinned      refcount 0, published and pinned (pa_pin): findable, off the LRU list,
 *               never evicted nor expired until unpinned. A referenced block may be pinned
 *               too; it becomes this rather than cached when its last reference goes.
 * A published block stays published (immutable) while referenced; when its last reference
 * goes it becomes cached rather than free. free + referenced + cached == num_blocks always.
 *
 * The prefix index is keyed by (tenant, hash): a block is published in one tenant's scope
 * and keeps it until evicted, and a lookup finds only blocks of the tenant it names, so
 * equal hashes of two tenants are two entries. The caller says what a tenant is (pagedd:
 * a uid, or one scope for all). Where an entry sits is keyed by a seed (pa_set_index_seed):
 * a tenant's lookup probes past another tenant's entry for the same hash no more often than
 * past any other entry, so its time says nothing about what other tenants published.
 *
 * Functions that take arrays are all or nothing: they validate every element first and
 * change nothing on error. Errors are negative paged_error codes; *bad (if not NULL) gets
 * the index of the first offending element (for PAGED_E_LIMIT, the element that would pass
 * the limit). Every function may also return PAGED_E_INVAL for a NULL array with n > 0, and
 * those that create references PAGED_E_NOMEM when the host is out of memory (nothing changed).
 * A reference count (a block's, or a holder's total) never passes UINT32_MAX: PAGED_E_LIMIT.
 *
 * LRU order: a block whose last reference goes enters the cached list at the most recently
 * used end. pa_free_blocks does this in array order; pa_release_holder does it newest
 * reference first, so the blocks a holder took first (a sequence's head, which every longer
 * prefix needs) end up most recent and are evicted last.
 *
 * Costs: pa_held, pa_writable and each array element are O(1) expected; pa_release_holder is
 * linear in the (holder, block) pairs it held; memory is O(blocks + distinct (holder, block)
 * pairs at their peak).
 */

#include <stddef.h>
#include <stdint.h>

#include "paged.h"

typedef struct pa_alloc pa_alloc;

/* Called for each cached block evicted, by an allocation, pa_evict_cached, pa_evict_prefix or
 * pa_expire (for events, stats and the tiers), after the block is on the free list but before
 * anything can write it: the block's memory still holds what was published, under tenant and
 * hash. It must not call back into the allocator. */
typedef void pa_evict_fn(void *ctx, int32_t block, uint32_t tenant, const paged_hash *hash);

/* Called for each block pa_publish newly publishes under tenant and hash (for events); it must
 * not call back into the allocator. */
typedef void pa_publish_fn(void *ctx, int32_t block, uint32_t tenant, const paged_hash *hash);

/* The allocator's clock for time to live, in nanoseconds, never going back (pagedd:
 * pcore_now_ns; the tests: a clock of their own). */
typedef uint64_t pa_clock_fn(void);

/* Per-block information for listings. */
typedef struct pa_block_info {
    uint32_t refcount;        /* references of all holders */
    uint32_t holders;         /* distinct holders */
    int published;            /* in the prefix index */
    paged_hash hash;          /* valid when published */
    uint32_t tenant;          /* the scope it was published in; valid when published */
    int pinned;               /* never evicted until unpinned */
    uint32_t pinner;          /* who pinned it; valid when pinned */
} pa_block_info;

typedef struct pa_counts {
    uint32_t free;
    uint32_t referenced;
    uint32_t cached;          /* refcount 0 and published, pinned ones included */
    uint32_t pinned;          /* pinned, referenced or not */
    uint64_t evictions;       /* cached blocks evicted so far */
    uint64_t lookups;         /* LOOKUP calls */
    uint64_t lookup_hits;     /* blocks found by LOOKUP */
    uint64_t lookup_blocks;   /* blocks LOOKUP calls asked for */
} pa_counts;

/* Creates an allocator of num_blocks (1 to INT32_MAX) blocks, all free; a fresh one hands
 * out blocks 0, 1, 2, ... in order. Returns NULL on no memory or a bad count. */
pa_alloc *pa_create(uint32_t num_blocks);
/* Frees the allocator. */
void pa_destroy(pa_alloc *a);
/* Sets the eviction hook (NULL for none). */
void pa_set_evict_hook(pa_alloc *a, pa_evict_fn *fn, void *ctx);
/* Sets the publication hook (NULL for none). */
void pa_set_publish_hook(pa_alloc *a, pa_publish_fn *fn, void *ctx);
/* Returns the block published under (tenant, hash), or -1. Changes nothing. */
int32_t pa_find(const pa_alloc *a, uint32_t tenant, const paged_hash *hash);
/* Keys where prefix index entries sit with seed (a fresh allocator's is 0) and re-enters the
 * published blocks, in time linear in the allocator's size. pagedd gives each pool a random
 * seed, so no client can predict which entries share a probe sequence. */
void pa_set_index_seed(pa_alloc *a, uint64_t seed);

/* Takes n blocks for holder, evicting cached blocks (LRU first) only as many as the free
 * list is short. Writes their ids to out. Returns 0, or PAGED_E_NOSPC (n > free + cached),
 * PAGED_E_LIMIT or PAGED_E_NOMEM having taken and evicted nothing. */
int pa_alloc_blocks(pa_alloc *a, uint32_t holder, uint32_t n, int32_t *out);
/* Drops one reference of holder to each block in ids (a block may appear as often as it is
 * held). Returns 0, PAGED_E_BLOCK (id out of range) or PAGED_E_NOTHELD. */
int pa_free_blocks(pa_alloc *a, uint32_t holder, uint32_t n, const int32_t *ids, uint32_t *bad);
/* Adds one reference of holder to each block in ids, which holder must already hold
 * (fork: a sequence shares its blocks with a new one). Returns 0 or an error as above. */
int pa_fork_blocks(pa_alloc *a, uint32_t holder, uint32_t n, const int32_t *ids, uint32_t *bad);

/* Returns how many references holder has to block (0 if none or out of range). */
uint32_t pa_held(const pa_alloc *a, uint32_t holder, int32_t block);
/* Returns the index of the first of ids[0..n) that is out of range or not held by holder,
 * or n when holder references every one (a bit test each: for checking block tables). */
uint32_t pa_first_unheld(const pa_alloc *a, uint32_t holder, const int32_t *ids, uint32_t n);
/* Returns the number of references holder has in all. */
uint32_t pa_held_total(const pa_alloc *a, uint32_t holder);
/* The copy-on-write decision: returns 1 if holder may write block in place (its only
 * reference is holder's single one and it is not published), 0 if the block is shared or
 * published and must be copied first, PAGED_E_BLOCK or PAGED_E_NOTHELD otherwise. */
int pa_writable(const pa_alloc *a, uint32_t holder, int32_t block);

/* Publishes blocks (each held by holder) under (tenant, hashes[i]). A block already published
 * keeps its hash and tenant; a (tenant, hash) already in the index for another block leaves
 * that entry (the first publisher wins) and this block unpublished. Returns the number newly
 * published, or an error with nothing changed. */
int pa_publish(pa_alloc *a, uint32_t holder, uint32_t tenant, uint32_t n, const int32_t *ids,
               const paged_hash *hashes, uint32_t *bad);
/* Looks up (tenant, hashes[i]) for i in [0, n) in order and stops at the first miss; for each
 * hit takes one reference for holder (a cached block becomes referenced) and writes its id to out.
 * Returns the number found (the longest cached prefix). It also stops, with a shorter but
 * still valid prefix, where a reference count would overflow or memory runs out. Counts one
 * lookup per call and one hit per block found. */
uint32_t pa_lookup(pa_alloc *a, uint32_t holder, uint32_t tenant, uint32_t n, const paged_hash *hashes,
                   int32_t *out);
/* The same as pa_lookup for the rest of a chain that a LOOKUP already counted (the tiers
 * reloaded the blocks before it): counts its hits, not a lookup nor the blocks asked for. */
uint32_t pa_lookup_continue(pa_alloc *a, uint32_t holder, uint32_t tenant, uint32_t n, const paged_hash *hashes,
                            int32_t *out);

/* Drops every reference holder has, in time linear in what it held. Returns how many. */
uint32_t pa_release_holder(pa_alloc *a, uint32_t holder);
/* Evicts every cached (unreferenced, published) block. Returns how many. */
uint32_t pa_evict_cached(pa_alloc *a);

/* Sets the clock that stamps a block when it goes on the LRU list (NULL, the default: no
 * clock, and pa_expire evicts nothing). */
void pa_set_clock(pa_alloc *a, pa_clock_fn *clock);

/*
 * Pins, for pinner, the longest prefix of the chain hashes[0..n) published under tenant (up
 * to the first hash not in the index), so that none of its blocks is evicted or expires
 * until unpinned; a block pinned already keeps its pinner. Refuses with PAGED_E_LIMIT,
 * pinning nothing, when the blocks it would newly pin would take pinner past pinner_limit
 * or the pool past pool_limit pinned blocks (UINT32_MAX: no limit). Stores the prefix's
 * length in *found (if not NULL) either way. Returns that length, or PAGED_E_LIMIT,
 * PAGED_E_NOMEM or PAGED_E_INVAL with nothing changed.
 */
int pa_pin(pa_alloc *a, uint32_t tenant, uint32_t n, const paged_hash *hashes, uint32_t pinner,
           uint32_t pinner_limit, uint32_t pool_limit, uint32_t *found);
/* Drops the pins of the longest prefix of hashes published under tenant: an idle block goes
 * on the LRU list as the most recently used. Only the pins of who, unless any. Returns the
 * prefix's length, or PAGED_E_PERM (*bad: the first block pinned by another) with nothing
 * changed. */
int pa_unpin(pa_alloc *a, uint32_t tenant, uint32_t n, const paged_hash *hashes, uint32_t who, int any,
             uint32_t *bad);
/* Drops every pin of who, or with any every pin, in block order (idle blocks go on the LRU
 * list in that order). Returns how many, in time linear in the pool's size. */
uint32_t pa_unpin_all(pa_alloc *a, uint32_t who, int any);
/* Takes the longest prefix of hashes published under tenant out of the prefix index, pins
 * and all (the pins' rule as pa_unpin's): its unreferenced blocks go to the free list (the
 * evict hook called), referenced ones when their last holder frees them. Returns the
 * prefix's length or PAGED_E_PERM with nothing changed. */
int pa_evict_prefix(pa_alloc *a, uint32_t tenant, uint32_t n, const paged_hash *hashes, uint32_t who,
                    int any, uint32_t *bad);
/* Returns how many blocks pinner has pinned. */
uint32_t pa_pinned_by(const pa_alloc *a, uint32_t pinner);
/* Evicts, oldest first, the cached blocks that went on the LRU list ttl_ns or more before the
 * clock's now (ttl_ns 0: none). Returns how many. */
uint32_t pa_expire(pa_alloc *a, uint64_t ttl_ns);
/* Returns the clock time at which the oldest cached block expires under ttl_ns, or
 * UINT64_MAX (none cached, ttl_ns 0, no clock). */
uint64_t pa_next_expiry(const pa_alloc *a, uint64_t ttl_ns);

/* Fills the counters. */
void pa_get_counts(const pa_alloc *a, pa_counts *out);
/* Returns the number of blocks. */
uint32_t pa_num_blocks(const pa_alloc *a);
/* Writes to out (room for every block) the published blocks, most recently used first: those
 * off the LRU list (referenced or pinned) in block order, then the cached ones from the most
 * recently used end. Returns how many. */
uint32_t pa_published_recent_first(const pa_alloc *a, int32_t *out);
/* Fills info for one block; returns 0 or PAGED_E_BLOCK. */
int pa_block_info_get(const pa_alloc *a, int32_t block, pa_block_info *info);
/* Calls fn(ctx, holder, refs) for each holder of block, in no particular order (for
 * listings); fn must not change the allocator. Does nothing for a block out of range. */
void pa_block_holders(const pa_alloc *a, int32_t block,
                      void (*fn)(void *ctx, uint32_t holder, uint32_t refs), void *ctx);

/* Cross-checks every internal structure (lists, counts, maps, index) in time linear in the
 * allocator's size, for tests. Returns NULL, or a static description of the first problem. */
const char *pa_check(const pa_alloc *a);

#endif
