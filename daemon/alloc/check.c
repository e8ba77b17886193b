/* check.c: pa_check, the allocator's cross-check of every structure, for tests. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/alloc/alloc.h"
#include "daemon/alloc/internal.h"
#include "daemon/util/heap.h"

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
            if (pd_map_get(&a->pair_map, pai_pair_key(a->holders[ref->holder].id, ref->block)) != r)
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
            if (pai_index_find(a, &blk->hash, blk->tenant) != (int32_t) b)
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
        if (!pai_block_ok(a, b) || a->blocks[b].state != ST_FREE || mark[b]++)
            return "the free list holds a block that is not free, or one twice";
    }
    uint32_t len = 0;
    int32_t prev = -1;
    for (int32_t b = a->lru_head; b >= 0; b = a->blocks[b].lru_next) {
        if (!pai_block_ok(a, b) || ++len > a->ncached || a->blocks[b].state != ST_CACHED
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
        if (!pai_block_ok(a, b) || !a->blocks[b].published
            || a->index[i].tag != (uint32_t) (pai_place_of(a, &a->blocks[b].hash, a->blocks[b].tenant) >> 32))
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
        for (size_t w = 0; w < pai_bits_words(a); w++)
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
