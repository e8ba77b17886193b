/* alloc.c: the block allocator of one pool: free list, references, holders, prefix cache, LRU. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "daemon/alloc/alloc.h"
#include "daemon/alloc/internal.h"
#include "daemon/alloc/u64map.h"
#include "daemon/util/heap.h"

/* ---- prefix index ------------------------------------------------------------------------- */

/*
 * Returns where the entry (tenant, h) lives: its low bits are the home slot, its top 32 bits
 * the slot's tag. Keyed by the pool's seed, so that neither a tenant's own entries nor tokens
 * chosen to collide tell it where another tenant's entry for the same hash would sit.
 */
uint64_t pai_place_of(const pa_alloc *a, const paged_hash *h, uint32_t tenant)
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
    return index_slot_at(a, h, tenant, pai_place_of(a, h, tenant));
}

/* Returns the block published under (tenant, h), or -1. */
int32_t pai_index_find(const pa_alloc *a, const paged_hash *h, uint32_t tenant)
{
    return a->index[index_slot_of(a, h, tenant)].block;
}

/* Enters block b, whose hash and tenant are set and absent from the index. */
static void index_put(pa_alloc *a, int32_t b)
{
    const pa_block *blk = &a->blocks[b];
    uint64_t place = pai_place_of(a, &blk->hash, blk->tenant);
    size_t i = index_slot_at(a, &blk->hash, blk->tenant, place);
    a->index[i].tag = (uint32_t) (place >> 32);
    a->index[i].block = b;
}

/* Removes block b, which is in the index, by backward shift (see pd_map_del). */
void pai_index_del(pa_alloc *a, int32_t b)
{
    size_t hole = index_slot_of(a, &a->blocks[b].hash, a->blocks[b].tenant);
    size_t j = hole;
    for (;;) {
        j = (j + 1) & a->index_mask;
        int32_t other = a->index[j].block;
        if (other < 0)
            break;
        size_t home = (size_t) pai_place_of(a, &a->blocks[other].hash, a->blocks[other].tenant) & a->index_mask;
        if (((j - home) & a->index_mask) >= ((j - hole) & a->index_mask)) {
            a->index[hole] = a->index[j];
            hole = j;
        }
    }
    a->index[hole].block = -1;
}

/* ---- lists -------------------------------------------------------------------------------- */

/* Appends cached block b at the most recently used end of the LRU list. */
void pai_lru_push(pa_alloc *a, int32_t b)
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
void pai_lru_unlink(pa_alloc *a, int32_t b)
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
uint64_t pai_pair_key(uint32_t holder, int32_t block)
{
    return (uint64_t) holder << 32 | (uint32_t) block;
}

/* Returns 1 if block lies in the pool. */
bool pai_block_ok(const pa_alloc *a, int32_t block)
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
size_t pai_bits_words(const pa_alloc *a)
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
    if (a->held_bits[h] == NULL && (a->held_bits[h] = pd_calloc(pai_bits_words(a), sizeof (uint64_t))) == NULL)
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
        pai_lru_push(a, b);
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
    uint64_t key = pai_pair_key(a->holders[h].id, b);
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
    pd_map_del(&a->pair_map, pai_pair_key(hold->id, ref->block));
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
void pai_evict_block(pa_alloc *a, int32_t b)
{
    pa_block *blk = &a->blocks[b];
    paged_hash hash = blk->hash;
    uint32_t tenant = blk->tenant;
    pai_lru_unlink(a, b);
    pai_index_del(a, b);
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
void pai_evict_one(pa_alloc *a)
{
    pai_evict_block(a, a->lru_head);
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
        if (!pai_block_ok(a, b)) {
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
    return pai_index_find(a, hash, tenant);
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
        pai_evict_one(a);
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
        ref_drop_one(a, pd_map_get(&a->pair_map, pai_pair_key(holder, ids[i])));
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
    if (!pai_block_ok(a, block))
        return 0;
    uint32_t r = pd_map_get(&a->pair_map, pai_pair_key(holder, block));
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
    if (!pai_block_ok(a, block))
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
        if (blk->published || pai_index_find(a, &hashes[i], tenant) >= 0)
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
        int32_t b = pai_index_find(a, &hashes[found], tenant);
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
            pai_lru_unlink(a, b);
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
        pai_evict_one(a);
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

/* Lists the published blocks, most recently used first; see alloc.h. */
uint32_t pa_published_recent_first(const pa_alloc *a, int32_t *out)
{
    uint32_t n = 0;
    for (uint32_t b = 0; b < a->nblocks; b++)
        if (a->blocks[b].published && a->blocks[b].state != ST_CACHED)
            out[n++] = (int32_t) b;
    for (int32_t b = a->lru_tail; b >= 0; b = a->blocks[b].lru_prev)
        out[n++] = b;
    return n;
}

/* Fills info for one block; returns 0 or PAGED_E_BLOCK. */
int pa_block_info_get(const pa_alloc *a, int32_t block, pa_block_info *info)
{
    if (!pai_block_ok(a, block))
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
    if (!pai_block_ok(a, block))
        return;
    for (uint32_t r = a->blocks[block].refs; r != NIL; r = a->refs[r].bnext)
        fn(ctx, a->holders[a->refs[r].holder].id, a->refs[r].count);
}
