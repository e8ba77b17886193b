/* internal.h: what the allocator's files share: its records and the helpers over them. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_ALLOC_INTERNAL_H
#define PAGED_DAEMON_ALLOC_INTERNAL_H

/*
 * The allocator is three files over one record: alloc.c (blocks, references, holders, the
 * prefix index and the LRU list: allocation, free, fork, publish, lookup), pins.c (pins, time
 * to live, evict by prefix) and check.c (pa_check, for tests). Only they include this header.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/alloc/alloc.h"
#include "daemon/alloc/u64map.h"

/* The "no record / no holder / empty slot" index; record and holder indices stay below it.
 * A lookup in the maps answers it for a key they do not hold. */
#define NIL UINT32_MAX
_Static_assert(NIL == PD_MAP_EMPTY, "the maps' empty value is the allocator's NIL");

/* Block states (see alloc.h). A pinned block with no references is ST_PINNED: cached, but off
 * the LRU list, so neither an allocation nor a sweep evicts it. */
enum { ST_FREE = 0, ST_REFERENCED = 1, ST_CACHED = 2, ST_PINNED = 3 };

/*
 * One block. The hash and tenant live here, not in the index, so that an index slot can stay
 * 8 bytes and the block, which a hit reads anyway, confirms the full 128 bits and the tenant.
 */
typedef struct pa_block {
    paged_hash hash;          /* valid while published, zero otherwise */
    uint32_t tenant;          /* the prefix scope it was published in; zero unless published */
    uint32_t refcount;        /* references of all holders */
    uint32_t holders;         /* records in the list below (distinct holders) */
    uint32_t refs;            /* first reference record of this block, or NIL */
    int32_t lru_prev;         /* LRU links while cached, -1 at the ends */
    int32_t lru_next;
    uint64_t cached_ns;       /* the allocator's clock when it went on the LRU list */
    uint32_t pinner;          /* who pinned it, while pinned */
    uint8_t state;
    uint8_t published;
    uint8_t pinned;           /* never evicted (pa_pin); only a published block is pinned */
} pa_block;

/*
 * One reference record: all references of one holder to one block, counted. A record sits on
 * two doubly linked lists, its block's (for listings and the distinct-holder count) and its
 * holder's (so a holder is released in time linear in what it holds), and in the pair map
 * under (holder id, block) so that any single (holder, block) reference is found in O(1).
 */
typedef struct pa_ref {
    uint32_t holder;          /* index into holders[] */
    int32_t block;
    uint32_t count;
    uint32_t bprev, bnext;    /* the block's list */
    uint32_t hprev, hnext;    /* the holder's list, newest first; hnext links free records */
} pa_ref;

/* One holder with at least one reference. */
typedef struct pa_holder {
    uint32_t id;              /* the client id */
    uint32_t refs;            /* newest reference record, or NIL; links free holders */
    uint32_t total;           /* references in all */
} pa_holder;

/* A slot of the prefix index: the top 32 bits of the entry's place (see place_of), to skip
 * most non-matches. */
typedef struct index_slot {
    uint32_t tag;
    int32_t block;            /* -1: empty */
} index_slot;

struct pa_alloc {
    uint32_t nblocks;
    pa_block *blocks;
    int32_t *free_stack;      /* LIFO: a block freed last is reused first */
    uint32_t nfree;
    int32_t lru_head;         /* least recently used cached block: evicted first */
    int32_t lru_tail;         /* most recently used */
    uint32_t ncached;
    uint32_t *scratch;        /* per-block counters for validating arrays, kept all zero */

    index_slot *index;        /* the prefix index, never more than half full */
    size_t index_mask;
    uint64_t index_seed;      /* keys the places of entries (pa_set_index_seed) */

    pa_ref *refs;             /* reference records, indices stable across growth */
    uint32_t refs_cap, refs_used, refs_live, refs_free;
    pa_holder *holders;       /* holder records, indices stable across growth */
    uint32_t holders_cap, holders_used, holders_live, holders_free;
    pd_u64map holder_map;     /* holder id -> holders[] index */
    pd_u64map pair_map;       /* (holder id << 32 | block) -> refs[] index */
    /* Per holders[] index, a bit per block it has a record for (pa_first_unheld: checking a
     * request's block table is a bit test per id, not a hash lookup). Made with the holder
     * slot and kept, all zero, while the slot is free; bits_cap entries, NULL beyond. */
    uint64_t **held_bits;
    uint32_t bits_cap;

    pa_evict_fn *evict_fn;
    void *evict_ctx;
    pa_publish_fn *publish_fn;
    void *publish_ctx;
    uint64_t evictions, lookups, lookup_hits, lookup_blocks;

    pa_clock_fn *clock;       /* stamps blocks entering the LRU (TTL); NULL: always 0 */
    uint32_t npinned;         /* pinned blocks, referenced or not */
    uint32_t npinned_idle;    /* of them, ST_PINNED (no references) */
    pd_u64map pin_map;        /* pinner -> blocks it has pinned */
};

/*
 * Returns where the entry (tenant, h) lives: its low bits are the home slot, its top 32 bits
 * the slot's tag. Keyed by the pool's seed, so that neither a tenant's own entries nor tokens
 * chosen to collide tell it where another tenant's entry for the same hash would sit.
 */
uint64_t pai_place_of(const pa_alloc *a, const paged_hash *h, uint32_t tenant);

/* Returns the block published under (tenant, h), or -1. */
int32_t pai_index_find(const pa_alloc *a, const paged_hash *h, uint32_t tenant);

/* Removes block b, which is in the index, by backward shift (see pd_map_del). */
void pai_index_del(pa_alloc *a, int32_t b);

/* Appends cached block b at the most recently used end of the LRU list. */
void pai_lru_push(pa_alloc *a, int32_t b);

/* Takes block b off the LRU list. */
void pai_lru_unlink(pa_alloc *a, int32_t b);

/* Returns the key of the pair map for a (holder id, block) reference. */
uint64_t pai_pair_key(uint32_t holder, int32_t block);

/* Returns 1 if block lies in the pool. */
bool pai_block_ok(const pa_alloc *a, int32_t block);

/* Returns the 64-bit words of one holder's bitmap. */
size_t pai_bits_words(const pa_alloc *a);

/* Evicts cached block b (on the LRU list) to the free list; calls the hook. */
void pai_evict_block(pa_alloc *a, int32_t b);

/* Evicts the least recently used cached block to the free list; calls the hook. */
void pai_evict_one(pa_alloc *a);

#endif
