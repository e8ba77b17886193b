/* alloc.c: the block allocator of one pool: free list, references, holders, prefix cache, LRU. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "daemon/alloc/alloc.h"
#include "daemon/util/heap.h"
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

/* ---- prefix index ------------------------------------------------------------------------- */

/*
 * Returns where the entry (tenant, h) lives: its low bits are the home slot, its top 32 bits
 * the slot's tag. Keyed by the pool's seed, so that neither a tenant's own entries nor tokens
 * chosen to collide tell it where another tenant's entry for the same hash would sit.
 */
static uint64_t place_of(const pa_alloc *a, const paged_hash *h, uint32_t tenant)
{
    const uint64_t key[3] = { h->lo, h->hi, tenant };
    return XXH3_64bits_withSeed(key, sizeof key, a->index_seed);
}

/* Returns the index slot where (tenant, h), whose place is place, is stored (block >= 0) or
 * would go (block -1). */
static size_t index_slot_at(const pa_alloc *a, const paged_hash *h, uint32_t tenant, uint64_t place)
{
    size_t i = (size_t) place & a->index_mask;
    uint32_t tag = (uint32_t) (place >> 32);
    for (;;) {
        const index_slot *s = &a->index[i];
        if (s->block < 0)
            return i;
        if (s->tag == tag) {
            const pa_block *k = &a->blocks[s->block];
            if (k->hash.lo == h->lo && k->hash.hi == h->hi && k->tenant == tenant)
                return i;
        }
        i = (i + 1) & a->index_mask;
    }
}

/* Returns the index slot where (tenant, h) is stored (block >= 0) or would go (block -1). */
static size_t index_slot_of(const pa_alloc *a, const paged_hash *h, uint32_t tenant)
{
    return index_slot_at(a, h, tenant, place_of(a, h, tenant));
}

/* Returns the block published under (tenant, h), or -1. */
static int32_t index_find(const pa_alloc *a, const paged_hash *h, uint32_t tenant)
{
    return a->index[index_slot_of(a, h, tenant)].block;
}

/* Enters block b, whose hash and tenant are set and absent from the index. */
static void index_put(pa_alloc *a, int32_t b)
{
    const pa_block *blk = &a->blocks[b];
    uint64_t place = place_of(a, &blk->hash, blk->tenant);
    size_t i = index_slot_at(a, &blk->hash, blk->tenant, place);
    a->index[i].tag = (uint32_t) (place >> 32);
    a->index[i].block = b;
}

/* Removes block b, which is in the index, by backward shift (see pd_map_del). */
static void index_del(pa_alloc *a, int32_t b)
{
    size_t hole = index_slot_of(a, &a->blocks[b].hash, a->blocks[b].tenant);
    size_t j = hole;
    for (;;) {
        j = (j + 1) & a->index_mask;
        int32_t other = a->index[j].block;
        if (other < 0)
            break;
        size_t home = (size_t) place_of(a, &a->blocks[other].hash, a->blocks[other].tenant) & a->index_mask;
        if (((j - home) & a->index_mask) >= ((j - hole) & a->index_mask)) {
            a->index[hole] = a->index[j];
            hole = j;
        }
    }
    a->index[hole].block = -1;
}

/* ---- lists -------------------------------------------------------------------------------- */

/* Appends cached block b at the most recently used end of the LRU list. */
static void lru_push(pa_alloc *a, int32_t b)
{
    pa_block *blk = &a->blocks[b];
    blk->cached_ns = a->clock != NULL ? a->clock() : 0;
    blk->lru_prev = a->lru_tail;
    blk->lru_next = -1;
    if (a->lru_tail >= 0)
        a->blocks[a->lru_tail].lru_next = b;
    else
        a->lru_head = b;
    a->lru_tail = b;
    a->ncached++;
}

/* Takes block b off the LRU list. */
static void lru_unlink(pa_alloc *a, int32_t b)
{
    pa_block *blk = &a->blocks[b];
    if (blk->lru_prev >= 0)
        a->blocks[blk->lru_prev].lru_next = blk->lru_next;
    else
        a->lru_head = blk->lru_next;
    if (blk->lru_next >= 0)
        a->blocks[blk->lru_next].lru_prev = blk->lru_prev;
    else
        a->lru_tail = blk->lru_prev;
    blk->lru_prev = blk->lru_next = -1;
    a->ncached--;
}

/* Returns the key of the pair map for a (holder id, block) reference. */
static uint64_t pair_key(uint32_t holder, int32_t block)
{
    return (uint64_t) holder << 32 | (uint32_t) block;
}

/* Returns 1 if block lies in the pool. */
static bool block_ok(const pa_alloc *a, int32_t block)
{
    return block >= 0 && (uint32_t) block < a->nblocks;
}

/* Grows an array of records (whose indices must stay stable) to hold extra more; returns 0 or PAGED_E_NOMEM. */
static int grow_records(void **array, size_t elem, uint32_t *cap, uint32_t live, uint32_t extra)
{
    if ((uint64_t) live + extra <= *cap)
        return 0;
    uint64_t want = (uint64_t) *cap * 2;
    if (want < (uint64_t) live + extra)
        want = (uint64_t) live + extra;
    if (want < 16)
        want = 16;
    if (want >= NIL || want > SIZE_MAX / elem)
        return PAGED_E_NOMEM;
    void *p = pd_realloc(*array, (size_t) want * elem);
    if (p == NULL)
        return PAGED_E_NOMEM;
    *array = p;
    *cap = (uint32_t) want;
    return 0;
}

/* Returns the 64-bit words of one holder's bitmap. */
static size_t bits_words(const pa_alloc *a)
{
    return ((size_t) a->nblocks + 63) / 64;
}

/* Makes sure the holder slot holder_make takes next has its bitmap (all zero). Returns 0 or
 * PAGED_E_NOMEM, having changed nothing observable. */
static int bits_reserve(pa_alloc *a)
{
    uint32_t h = a->holders_free != NIL ? a->holders_free : a->holders_used;
    if (h >= a->bits_cap) {
        uint32_t cap = a->holders_cap > h ? a->holders_cap : h + 1;
        uint64_t **p = pd_realloc(a->held_bits, (size_t) cap * sizeof *p);
        if (p == NULL)
            return PAGED_E_NOMEM;
        memset(p + a->bits_cap, 0, (size_t) (cap - a->bits_cap) * sizeof *p);
        a->held_bits = p;
        a->bits_cap = cap;
    }
    if (a->held_bits[h] == NULL && (a->held_bits[h] = pd_calloc(bits_words(a), sizeof (uint64_t))) == NULL)
        return PAGED_E_NOMEM;
    return 0;
}

/*
 * Makes sure that adding up to nrefs new (holder, block) records, and a new holder if
 * new_holder, cannot fail for lack of memory, so that array operations stay all or nothing.
 * Returns 0 or PAGED_E_NOMEM, having changed nothing observable.
 */
static int reserve(pa_alloc *a, uint32_t nrefs, bool new_holder)
{
    void *p = a->refs;
    int err = grow_records(&p, sizeof *a->refs, &a->refs_cap, a->refs_live, nrefs);
    a->refs = p;
    if (err < 0 || pd_map_reserve(&a->pair_map, nrefs) < 0)
        return PAGED_E_NOMEM;
    if (new_holder) {
        p = a->holders;
        err = grow_records(&p, sizeof *a->holders, &a->holders_cap, a->holders_live, 1);
        a->holders = p;
        if (err < 0 || pd_map_reserve(&a->holder_map, 1) < 0 || bits_reserve(a) < 0)
            return PAGED_E_NOMEM;
    }
    return 0;
}

/* Returns the holders[] index of client id, or NIL when it holds nothing. */
static uint32_t holder_find(const pa_alloc *a, uint32_t id)
{
    return pd_map_get(&a->holder_map, id);
}

/* Creates the record of holder id in capacity reserved beforehand; returns its index. */
static uint32_t holder_make(pa_alloc *a, uint32_t id)
{
    uint32_t h;
    if (a->holders_free != NIL) {
        h = a->holders_free;
        a->holders_free = a->holders[h].refs;
    } else {
        h = a->holders_used++;
    }
    a->holders[h] = (pa_holder) { .id = id, .refs = NIL, .total = 0 };
    pd_map_put(&a->holder_map, id, h);
    a->holders_live++;
    return h;
}

/* Drops the record of holder h, which holds nothing any more. */
static void holder_drop(pa_alloc *a, uint32_t h)
{
    pd_map_del(&a->holder_map, a->holders[h].id);
    a->holders[h].refs = a->holders_free;
    a->holders_free = h;
    a->holders_live--;
}

/* Moves block b, whose last reference just went, to the cached LRU or to the free list. */
static void block_unreferenced(pa_alloc *a, int32_t b)
{
    pa_block *blk = &a->blocks[b];
    if (blk->pinned) {
        blk->state = ST_PINNED;
        a->npinned_idle++;
    } else if (blk->published) {
        blk->state = ST_CACHED;
        lru_push(a, b);
    } else {
        blk->state = ST_FREE;
        a->free_stack[a->nfree++] = b;
    }
}

/*
 * Adds count references of holder h to block b, creating their record (in capacity reserved
 * beforehand) if h did not hold b yet. The block's state is the caller's business.
 */
static void ref_add(pa_alloc *a, uint32_t h, int32_t b, uint32_t count)
{
    uint64_t key = pair_key(a->holders[h].id, b);
    uint32_t r = pd_map_get(&a->pair_map, key);
    pa_block *blk = &a->blocks[b];
    if (r == NIL) {
        if (a->refs_free != NIL) {
            r = a->refs_free;
            a->refs_free = a->refs[r].hnext;
        } else {
            r = a->refs_used++;
        }
        pa_ref *ref = &a->refs[r];
        /* Newest first on the holder's list: release then caches a sequence tail-first. */
        *ref = (pa_ref) { .holder = h, .block = b, .count = 0, .bprev = NIL, .bnext = blk->refs,
                          .hprev = NIL, .hnext = a->holders[h].refs };
        if (blk->refs != NIL)
            a->refs[blk->refs].bprev = r;
        blk->refs = r;
        if (a->holders[h].refs != NIL)
            a->refs[a->holders[h].refs].hprev = r;
        a->holders[h].refs = r;
        pd_map_put(&a->pair_map, key, r);
        a->held_bits[h][(uint32_t) b / 64] |= 1ull << ((uint32_t) b % 64);
        a->refs_live++;
        blk->holders++;
    }
    a->refs[r].count += count;
    blk->refcount += count;
    a->holders[h].total += count;
}

/*
 * Unlinks record r (whose count the caller has already taken off the block and holder) from
 * its block, its holder and the pair map, and recycles it.
 */
static void ref_unlink(pa_alloc *a, uint32_t r)
{
    pa_ref *ref = &a->refs[r];
    pa_block *blk = &a->blocks[ref->block];
    pa_holder *hold = &a->holders[ref->holder];
    if (ref->bprev != NIL)
        a->refs[ref->bprev].bnext = ref->bnext;
    else
        blk->refs = ref->bnext;
    if (ref->bnext != NIL)
        a->refs[ref->bnext].bprev = ref->bprev;
    if (ref->hprev != NIL)
        a->refs[ref->hprev].hnext = ref->hnext;
    else
        hold->refs = ref->hnext;
    if (ref->hnext != NIL)
        a->refs[ref->hnext].hprev = ref->hprev;
    pd_map_del(&a->pair_map, pair_key(hold->id, ref->block));
    a->held_bits[ref->holder][(uint32_t) ref->block / 64] &= ~(1ull << ((uint32_t) ref->block % 64));
    blk->holders--;
    ref->hnext = a->refs_free;
    a->refs_free = r;
    a->refs_live--;
}

/* Drops one reference of record r; the block and the holder go when it was their last. */
static void ref_drop_one(pa_alloc *a, uint32_t r)
{
    int32_t b = a->refs[r].block;
    uint32_t h = a->refs[r].holder;
    a->blocks[b].refcount--;
    a->holders[h].total--;
    if (--a->refs[r].count == 0)
        ref_unlink(a, r);
    if (a->blocks[b].refcount == 0)
        block_unreferenced(a, b);
    if (a->holders[h].total == 0)
        holder_drop(a, h);
}

/* Evicts cached block b (on the LRU list) to the free list; calls the hook. */
static void evict_block(pa_alloc *a, int32_t b)
{
    pa_block *blk = &a->blocks[b];
    paged_hash hash = blk->hash;
    uint32_t tenant = blk->tenant;
    lru_unlink(a, b);
    index_del(a, b);
    blk->published = 0;
    blk->hash = (paged_hash) { 0, 0 };
    blk->tenant = 0;
    blk->state = ST_FREE;
    a->free_stack[a->nfree++] = b;
    a->evictions++;
    if (a->evict_fn != NULL)
        a->evict_fn(a->evict_ctx, b, tenant, &hash);
}

/* Evicts the least recently used cached block to the free list; calls the hook. */
static void evict_one(pa_alloc *a)
{
    evict_block(a, a->lru_head);
}

/* ---- array validation --------------------------------------------------------------------- */

/* What an array of block ids is validated for. */
enum check_kind { CHECK_FREE, CHECK_FORK, CHECK_PUBLISH };

/*
 * Checks every id of an array against what holder holds: in range, held, for FREE no block
 * named more often than it is held, for FORK no count overflowing. Returns 0, or the error
 * of the first bad element with its index in *bad. Uses and re-zeroes a->scratch.
 */
static int check_ids(pa_alloc *a, uint32_t holder, uint32_t n, const int32_t *ids,
                     enum check_kind kind, uint32_t *bad)
{
    uint32_t h = holder_find(a, holder);
    uint64_t total = h != NIL ? a->holders[h].total : 0;
    int err = 0;
    uint32_t counted = 0;     /* elements whose scratch counter was bumped */
    uint32_t i;
    for (i = 0; i < n; i++) {
        int32_t b = ids[i];
        if (!block_ok(a, b)) {
            err = PAGED_E_BLOCK;
            break;
        }
        uint32_t seen = ++a->scratch[b];
        counted = i + 1;
        uint32_t held = pa_held(a, holder, b);
        if (held == 0 || (kind == CHECK_FREE && seen > held)) {
            err = PAGED_E_NOTHELD;
            break;
        }
        if (kind == CHECK_FORK && ((uint64_t) a->blocks[b].refcount + seen > UINT32_MAX
                                   || total + i + 1 > UINT32_MAX)) {
            err = PAGED_E_LIMIT;
            break;
        }
    }
    for (uint32_t j = 0; j < counted; j++)
        a->scratch[ids[j]] = 0;
    if (err < 0 && bad != NULL)
        *bad = i;
    return err;
}

/* ---- public functions --------------------------------------------------------------------- */

/* Creates an allocator of num_blocks free blocks; returns it, or NULL. */
pa_alloc *pa_create(uint32_t num_blocks)
{
    if (num_blocks == 0 || num_blocks > INT32_MAX)
        return NULL;
    pa_alloc *a = pd_calloc(1, sizeof *a);
    if (a == NULL)
        return NULL;
    a->nblocks = num_blocks;
    a->lru_head = a->lru_tail = -1;
    a->refs_free = a->holders_free = NIL;
    size_t index_cap = 2;
    while (index_cap < (size_t) num_blocks * 2)
        index_cap *= 2;
    a->index_mask = index_cap - 1;
    a->blocks = pd_calloc(num_blocks, sizeof *a->blocks);
    a->free_stack = pd_malloc((size_t) num_blocks * sizeof *a->free_stack);
    a->scratch = pd_calloc(num_blocks, sizeof *a->scratch);
    a->index = pd_malloc(index_cap * sizeof *a->index);
    if (a->blocks == NULL || a->free_stack == NULL || a->scratch == NULL || a->index == NULL
        || pd_map_init(&a->holder_map, 16) < 0 || pd_map_init(&a->pair_map, 64) < 0
        || pd_map_init(&a->pin_map, 16) < 0) {
        pa_destroy(a);
        return NULL;
    }
    for (size_t i = 0; i < index_cap; i++)
        a->index[i].block = -1;
    for (uint32_t b = 0; b < num_blocks; b++) {
        a->blocks[b].refs = NIL;
        a->blocks[b].lru_prev = a->blocks[b].lru_next = -1;
        /* Stacked in reverse so that a fresh pool hands out 0, 1, 2, ... */
        a->free_stack[b] = (int32_t) (num_blocks - 1 - b);
    }
    a->nfree = num_blocks;
    return a;
}

/* Frees the allocator and everything it owns. */
void pa_destroy(pa_alloc *a)
{
    if (a == NULL)
        return;
    free(a->blocks);
    free(a->free_stack);
    free(a->scratch);
    free(a->index);
    free(a->refs);
    free(a->holders);
    pd_map_free(&a->holder_map);
    pd_map_free(&a->pair_map);
    pd_map_free(&a->pin_map);
    for (uint32_t h = 0; h < a->bits_cap; h++)
        free(a->held_bits[h]);
    free(a->held_bits);
    free(a);
}

/* Sets the eviction hook. */
void pa_set_evict_hook(pa_alloc *a, pa_evict_fn *fn, void *ctx)
{
    a->evict_fn = fn;
    a->evict_ctx = ctx;
}

/* Sets the publication hook; see alloc.h. */
void pa_set_publish_hook(pa_alloc *a, pa_publish_fn *fn, void *ctx)
{
    a->publish_fn = fn;
    a->publish_ctx = ctx;
}

/* Returns the block published under (tenant, hash) or -1; see alloc.h. */
int32_t pa_find(const pa_alloc *a, uint32_t tenant, const paged_hash *hash)
{
    return index_find(a, hash, tenant);
}

/* Keys the places of index entries with seed and re-enters every published block under its
 * new place; returns nothing. */
void pa_set_index_seed(pa_alloc *a, uint64_t seed)
{
    a->index_seed = seed;
    for (size_t i = 0; i <= a->index_mask; i++)
        a->index[i].block = -1;
    for (uint32_t b = 0; b < a->nblocks; b++)
        if (a->blocks[b].published)
            index_put(a, (int32_t) b);
}

/* Takes n blocks for holder, evicting LRU cached blocks only when the free list runs short. */
int pa_alloc_blocks(pa_alloc *a, uint32_t holder, uint32_t n, int32_t *out)
{
    if (n == 0)
        return 0;
    if (out == NULL)
        return PAGED_E_INVAL;
    if ((uint64_t) a->nfree + a->ncached < n)
        return PAGED_E_NOSPC;
    uint32_t h = holder_find(a, holder);
    if (h != NIL && (uint64_t) a->holders[h].total + n > UINT32_MAX)
        return PAGED_E_LIMIT;
    if (reserve(a, n, h == NIL) < 0)
        return PAGED_E_NOMEM;
    if (h == NIL)
        h = holder_make(a, holder);
    while (a->nfree < n)
        evict_one(a);
    for (uint32_t i = 0; i < n; i++) {
        int32_t b = a->free_stack[--a->nfree];
        a->blocks[b].state = ST_REFERENCED;
        ref_add(a, h, b, 1);
        out[i] = b;
    }
    return 0;
}

/* Drops one reference of holder per element, all or nothing. */
int pa_free_blocks(pa_alloc *a, uint32_t holder, uint32_t n, const int32_t *ids, uint32_t *bad)
{
    if (n == 0)
        return 0;
    if (ids == NULL)
        return PAGED_E_INVAL;
    int err = check_ids(a, holder, n, ids, CHECK_FREE, bad);
    if (err < 0)
        return err;
    for (uint32_t i = 0; i < n; i++)
        ref_drop_one(a, pd_map_get(&a->pair_map, pair_key(holder, ids[i])));
    return 0;
}

/* Adds one reference of holder per element to blocks it holds, all or nothing. */
int pa_fork_blocks(pa_alloc *a, uint32_t holder, uint32_t n, const int32_t *ids, uint32_t *bad)
{
    if (n == 0)
        return 0;
    if (ids == NULL)
        return PAGED_E_INVAL;
    int err = check_ids(a, holder, n, ids, CHECK_FORK, bad);
    if (err < 0)
        return err;
    /* Every block is held already, so ref_add only bumps existing records: nothing to reserve. */
    uint32_t h = holder_find(a, holder);
    for (uint32_t i = 0; i < n; i++)
        ref_add(a, h, ids[i], 1);
    return 0;
}

/* Returns holder's references to block. */
uint32_t pa_held(const pa_alloc *a, uint32_t holder, int32_t block)
{
    if (!block_ok(a, block))
        return 0;
    uint32_t r = pd_map_get(&a->pair_map, pair_key(holder, block));
    return r == NIL ? 0 : a->refs[r].count;
}

/* Returns the index of the first id that is not a block of the pool holder references, or n. */
uint32_t pa_first_unheld(const pa_alloc *a, uint32_t holder, const int32_t *ids, uint32_t n)
{
    uint32_t h = holder_find(a, holder);
    if (h == NIL)
        return 0;
    const uint64_t *bits = a->held_bits[h];
    for (uint32_t i = 0; i < n; i++) {
        uint32_t b = (uint32_t) ids[i];   /* a negative id wraps far beyond nblocks */
        if (b >= a->nblocks || !(bits[b / 64] >> (b % 64) & 1))
            return i;
    }
    return n;
}

/* Returns holder's references in all. */
uint32_t pa_held_total(const pa_alloc *a, uint32_t holder)
{
    uint32_t h = holder_find(a, holder);
    return h == NIL ? 0 : a->holders[h].total;
}

/* Returns 1 when holder's single reference is the block's only one and it is unpublished. */
int pa_writable(const pa_alloc *a, uint32_t holder, int32_t block)
{
    if (!block_ok(a, block))
        return PAGED_E_BLOCK;
    if (pa_held(a, holder, block) == 0)
        return PAGED_E_NOTHELD;
    const pa_block *blk = &a->blocks[block];
    return blk->refcount == 1 && !blk->published;
}

/* Publishes held blocks under (tenant, their hashes), first publisher wins; returns how many. */
int pa_publish(pa_alloc *a, uint32_t holder, uint32_t tenant, uint32_t n, const int32_t *ids,
               const paged_hash *hashes, uint32_t *bad)
{
    if (n == 0)
        return 0;
    if (ids == NULL || hashes == NULL)
        return PAGED_E_INVAL;
    int err = check_ids(a, holder, n, ids, CHECK_PUBLISH, bad);
    if (err < 0)
        return err;
    int published = 0;
    for (uint32_t i = 0; i < n; i++) {
        pa_block *blk = &a->blocks[ids[i]];
        if (blk->published || index_find(a, &hashes[i], tenant) >= 0)
            continue;
        /* At most nblocks entries in a table of at least 2 * nblocks slots: never full. */
        blk->hash = hashes[i];
        blk->tenant = tenant;
        blk->published = 1;
        index_put(a, ids[i]);
        published++;
        if (a->publish_fn != NULL)
            a->publish_fn(a->publish_ctx, ids[i], tenant, &hashes[i]);
    }
    return published;
}

/* Takes references to the longest prefix of hashes published under tenant; returns its length. */
uint32_t pa_lookup(pa_alloc *a, uint32_t holder, uint32_t tenant, uint32_t n, const paged_hash *hashes,
                   int32_t *out)
{
    a->lookups++;
    if (n == 0 || hashes == NULL || out == NULL)
        return 0;
    a->lookup_blocks += n;
    return pa_lookup_continue(a, holder, tenant, n, hashes, out);
}

/* Takes references to the longest prefix as pa_lookup, counting its hits only; returns its
 * length. */
uint32_t pa_lookup_continue(pa_alloc *a, uint32_t holder, uint32_t tenant, uint32_t n, const paged_hash *hashes,
                            int32_t *out)
{
    if (n == 0 || hashes == NULL || out == NULL)
        return 0;
    uint32_t h = holder_find(a, holder);
    uint32_t found;
    for (found = 0; found < n; found++) {
        int32_t b = index_find(a, &hashes[found], tenant);
        if (b < 0)
            break;
        pa_block *blk = &a->blocks[b];
        /* A shorter prefix is still a right answer, so limits and no memory end it early. */
        if (blk->refcount == UINT32_MAX || (h != NIL && a->holders[h].total == UINT32_MAX))
            break;
        if (pa_held(a, holder, b) == 0 && reserve(a, 1, h == NIL) < 0)
            break;
        if (h == NIL)
            h = holder_make(a, holder);
        if (blk->state == ST_CACHED) {
            lru_unlink(a, b);
            blk->state = ST_REFERENCED;
        } else if (blk->state == ST_PINNED) {
            a->npinned_idle--;
            blk->state = ST_REFERENCED;
        }
        ref_add(a, h, b, 1);
        out[found] = b;
    }
    a->lookup_hits += found;
    return found;
}

/* Drops all of holder's references, newest first; returns how many there were. */
uint32_t pa_release_holder(pa_alloc *a, uint32_t holder)
{
    uint32_t h = holder_find(a, holder);
    if (h == NIL)
        return 0;
    uint32_t total = a->holders[h].total;
    uint32_t r = a->holders[h].refs;
    while (r != NIL) {
        uint32_t next = a->refs[r].hnext;
        int32_t b = a->refs[r].block;
        a->blocks[b].refcount -= a->refs[r].count;
        ref_unlink(a, r);
        if (a->blocks[b].refcount == 0)
            block_unreferenced(a, b);
        r = next;
    }
    a->holders[h].total = 0;
    holder_drop(a, h);
    return total;
}

/* Evicts every cached block, least recently used first; returns how many. */
uint32_t pa_evict_cached(pa_alloc *a)
{
    uint32_t n = 0;
    while (a->lru_head >= 0) {
        evict_one(a);
        n++;
    }
    return n;
}

/* Fills the counters. */
void pa_get_counts(const pa_alloc *a, pa_counts *out)
{
    out->free = a->nfree;
    out->cached = a->ncached + a->npinned_idle;
    out->referenced = a->nblocks - a->nfree - out->cached;
    out->evictions = a->evictions;
    out->lookups = a->lookups;
    out->lookup_hits = a->lookup_hits;
    out->lookup_blocks = a->lookup_blocks;
    out->pinned = a->npinned;
}

/* Returns the number of blocks. */
uint32_t pa_num_blocks(const pa_alloc *a)
{
    return a->nblocks;
}

/* Fills info for one block; returns 0 or PAGED_E_BLOCK. */
int pa_block_info_get(const pa_alloc *a, int32_t block, pa_block_info *info)
{
    if (!block_ok(a, block))
        return PAGED_E_BLOCK;
    const pa_block *blk = &a->blocks[block];
    info->refcount = blk->refcount;
    info->holders = blk->holders;
    info->published = blk->published;
    info->hash = blk->hash;
    info->tenant = blk->tenant;
    info->pinned = blk->pinned;
    info->pinner = blk->pinner;
    return 0;
}

/* Calls fn for each holder of block, with its reference count. */
void pa_block_holders(const pa_alloc *a, int32_t block,
                      void (*fn)(void *ctx, uint32_t holder, uint32_t refs), void *ctx)
{
    if (!block_ok(a, block))
        return;
    for (uint32_t r = a->blocks[block].refs; r != NIL; r = a->refs[r].bnext)
        fn(ctx, a->holders[a->refs[r].holder].id, a->refs[r].count);
}

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
    while (i < n && index_find(a, &hashes[i], tenant) >= 0)
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
        lru_unlink(a, b);
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
        lru_push(a, b);
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
        int32_t b = index_find(a, &hashes[i], tenant);
        if (!a->blocks[b].pinned && a->scratch[b]++ == 0)
            fresh++;
    }
    for (uint32_t i = 0; i < found; i++)
        a->scratch[index_find(a, &hashes[i], tenant)] = 0;
    if (found_out != NULL)
        *found_out = found;
    if ((uint64_t) pa_pinned_by(a, pinner) + fresh > pinner_limit
        || (uint64_t) a->npinned + fresh > pool_limit)
        return PAGED_E_LIMIT;
    if (fresh > 0 && pd_map_reserve(&a->pin_map, 1) < 0)
        return PAGED_E_NOMEM;
    for (uint32_t i = 0; i < found; i++) {
        int32_t b = index_find(a, &hashes[i], tenant);
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
        const pa_block *blk = &a->blocks[index_find(a, &hashes[i], tenant)];
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
        int32_t b = index_find(a, &hashes[i], tenant);
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
        int32_t b = index_find(a, &hashes[i], tenant);
        if (b < 0)
            continue;          /* a hash named twice */
        pa_block *blk = &a->blocks[b];
        if (blk->pinned)
            unpin_block(a, b);
        if (blk->state == ST_CACHED) {
            evict_block(a, b);
            continue;
        }
        /* Referenced: no longer findable; it goes to the free list when its last holder frees it. */
        index_del(a, b);
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
        evict_one(a);
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

/* ---- consistency check -------------------------------------------------------------------- */

/* Checks the block lists, LRU and free stack against the block states; returns a problem or NULL. */
static const char *check_blocks(const pa_alloc *a, uint8_t *mark)
{
    uint32_t nfree = 0, ncached = 0, npub = 0, npinned = 0, nidle = 0;
    for (uint32_t b = 0; b < a->nblocks; b++) {
        const pa_block *blk = &a->blocks[b];
        uint64_t sum = 0;
        uint32_t nrec = 0;
        uint32_t prev = NIL;
        for (uint32_t r = blk->refs; r != NIL; r = a->refs[r].bnext) {
            if (r >= a->refs_used || ++nrec > a->refs_live)
                return "a block's holder list is corrupt";
            const pa_ref *ref = &a->refs[r];
            if (ref->block != (int32_t) b || ref->bprev != prev || ref->count == 0)
                return "a reference record is linked to the wrong block";
            if (pd_map_get(&a->pair_map, pair_key(a->holders[ref->holder].id, ref->block)) != r)
                return "a reference record is missing from the pair map";
            sum += ref->count;
            prev = r;
        }
        if (sum != blk->refcount)
            return "a block's refcount differs from its holders' references";
        if (nrec != blk->holders)
            return "a block's holder count differs from its holder list";
        if (blk->pinned) {
            npinned++;
            if (!blk->published)
                return "a pinned block is not published";
        }
        if (blk->published) {
            npub++;
            if (index_find(a, &blk->hash, blk->tenant) != (int32_t) b)
                return "a published block is not found under its hash and tenant";
        }
        switch (blk->state) {
        case ST_FREE:
            nfree++;
            if (blk->refcount != 0 || blk->published || blk->tenant != 0)
                return "a free block is referenced, published or keeps a tenant";
            break;
        case ST_REFERENCED:
            if (blk->refcount == 0)
                return "a referenced block has no references";
            break;
        case ST_CACHED:
            ncached++;
            if (blk->refcount != 0 || !blk->published || blk->pinned)
                return "a cached block is referenced, unpublished or pinned";
            break;
        case ST_PINNED:
            nidle++;
            if (blk->refcount != 0 || !blk->pinned)
                return "an idle pinned block is referenced or not pinned";
            break;
        default:
            return "a block has an unknown state";
        }
    }
    if (nfree != a->nfree || ncached != a->ncached)
        return "the free or cached count differs from the block states";
    if (npinned != a->npinned || nidle != a->npinned_idle)
        return "the pinned counts differ from the blocks";
    uint64_t charged = 0;
    for (uint32_t i = 0; i <= a->pin_map.mask; i++)
        if (a->pin_map.slots[i].val != PD_MAP_EMPTY) {
            if (a->pin_map.slots[i].val == 0)
                return "a pinner with no pins is in the pin map";
            charged += a->pin_map.slots[i].val;
        }
    if (charged != npinned)
        return "the pinners' counts differ from the pinned blocks";
    for (uint32_t i = 0; i < a->nfree; i++) {
        int32_t b = a->free_stack[i];
        if (!block_ok(a, b) || a->blocks[b].state != ST_FREE || mark[b]++)
            return "the free list holds a block that is not free, or one twice";
    }
    uint32_t len = 0;
    int32_t prev = -1;
    for (int32_t b = a->lru_head; b >= 0; b = a->blocks[b].lru_next) {
        if (!block_ok(a, b) || ++len > a->ncached || a->blocks[b].state != ST_CACHED
            || a->blocks[b].lru_prev != prev)
            return "the LRU list is corrupt";
        prev = b;
    }
    if (len != a->ncached || a->lru_tail != prev)
        return "the LRU list length or tail is wrong";
    uint32_t nindex = 0;
    for (size_t i = 0; i <= a->index_mask; i++) {
        int32_t b = a->index[i].block;
        if (b < 0)
            continue;
        nindex++;
        if (!block_ok(a, b) || !a->blocks[b].published
            || a->index[i].tag != (uint32_t) (place_of(a, &a->blocks[b].hash, a->blocks[b].tenant) >> 32))
            return "the prefix index names an unpublished block";
    }
    if (nindex != npub)
        return "the prefix index and the published blocks differ in number";
    return NULL;
}

/* Checks each holder's list and the record and map counts; returns a problem or NULL. */
static const char *check_holders(const pa_alloc *a)
{
    uint32_t live = 0, nrec = 0;
    for (uint32_t i = 0; i <= a->holder_map.mask; i++) {
        uint32_t h = a->holder_map.slots[i].val;
        if (h == NIL)
            continue;
        live++;
        if (h >= a->holders_used || a->holders[h].id != (uint32_t) a->holder_map.slots[i].key)
            return "the holder map names the wrong holder";
        uint64_t sum = 0;
        uint32_t prev = NIL, records = 0;
        if (h >= a->bits_cap || a->held_bits[h] == NULL)
            return "a holder has no bitmap";
        const uint64_t *bits = a->held_bits[h];
        for (uint32_t r = a->holders[h].refs; r != NIL; r = a->refs[r].hnext) {
            if (r >= a->refs_used || ++nrec > a->refs_live)
                return "a holder's reference list is corrupt";
            if (a->refs[r].holder != h || a->refs[r].hprev != prev)
                return "a reference record is linked to the wrong holder";
            uint32_t b = (uint32_t) a->refs[r].block;
            if (!(bits[b / 64] >> (b % 64) & 1))
                return "a reference record's block is missing from its holder's bitmap";
            sum += a->refs[r].count;
            records++;
            prev = r;
        }
        if (sum != a->holders[h].total || sum == 0)
            return "a holder's total differs from its references, or it holds nothing";
        uint64_t set = 0;
        for (size_t w = 0; w < bits_words(a); w++)
            set += (uint64_t) __builtin_popcountll(bits[w]);
        if (set != records)
            return "a holder's bitmap names blocks it has no record for";
    }
    if (live != a->holders_live || live != a->holder_map.count)
        return "the holder count differs from the holder map";
    if (nrec != a->refs_live || nrec != a->pair_map.count)
        return "the reference record count differs from the pair map";
    return NULL;
}

/* Cross-checks every structure of the allocator; returns a description of a problem or NULL. */
const char *pa_check(const pa_alloc *a)
{
    uint8_t *mark = pd_calloc(a->nblocks, 1);
    if (mark == NULL)
        return "no memory for the check";
    const char *problem = check_blocks(a, mark);
    free(mark);
    if (problem == NULL)
        problem = check_holders(a);
    return problem;
}
