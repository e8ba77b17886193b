/* heap.c: an allocator with free over a client's arena, above libpaged's bump pointer. */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

#include <stdlib.h>
#include <string.h>

/* libpaged's arenas are bump allocators whose synchronous calls stage above the mark and
 * rewind to it. The heap owns everything below the mark that it took: arrays live as long as
 * Python keeps them, so freed extents are kept in a sorted list, reused first fit, and the
 * extent that ends at the mark is handed back to libpaged. */

/* Starts an empty heap over arena kind of pc; returns nothing. */
void pyp_heap_init(struct pyp_heap *h, paged_client *pc, paged_arena_kind kind)
{
    memset(h, 0, sizeof *h);
    h->pc = pc;
    h->kind = kind;
}

/* Frees the heap's list (the arena itself goes with its client); returns nothing. */
void pyp_heap_fini(struct pyp_heap *h)
{
    free(h->free);
    memset(h, 0, sizeof *h);
}

/* Removes free extent i; returns nothing. */
static void remove_at(struct pyp_heap *h, size_t i)
{
    memmove(&h->free[i], &h->free[i + 1], (h->nfree - i - 1) * sizeof h->free[0]);
    h->nfree--;
}

/* Inserts [off, off + len) as free extent i (the list stays sorted); returns 0, or -1 when
 * the list cannot grow (the bytes are then lost to the heap, not to correctness). */
static int insert_at(struct pyp_heap *h, size_t i, uint64_t off, uint64_t len)
{
    if (h->nfree == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        struct pyp_extent *e = realloc(h->free, cap * sizeof *e);
        if (e == NULL)
            return -1;
        h->free = e;
        h->cap = cap;
    }
    memmove(&h->free[i + 1], &h->free[i], (h->nfree - i) * sizeof h->free[0]);
    h->free[i] = (struct pyp_extent) { off, len };
    h->nfree++;
    return 0;
}

/* Hands the free extent that ends at libpaged's mark back to it; returns nothing. */
static void trim_top(struct pyp_heap *h)
{
    if (h->nfree == 0)
        return;
    struct pyp_extent *last = &h->free[h->nfree - 1];
    if (last->off + last->len == paged_arena_mark(h->pc, h->kind)) {
        paged_arena_release(h->pc, h->kind, last->off);
        remove_at(h, h->nfree - 1);
    }
}

/* Returns len bytes of free space [off, off + len) to the heap, merging neighbours;
 * returns nothing. */
void pyp_heap_free(struct pyp_heap *h, uint64_t off, uint64_t len)
{
    if (len == 0 || h->pc == NULL)
        return;
    size_t i = 0;
    while (i < h->nfree && h->free[i].off < off)
        i++;
    if (i > 0 && h->free[i - 1].off + h->free[i - 1].len == off) {
        h->free[i - 1].len += len;
        if (i < h->nfree && off + len == h->free[i].off) {
            h->free[i - 1].len += h->free[i].len;
            remove_at(h, i);
        }
    } else if (i < h->nfree && off + len == h->free[i].off) {
        h->free[i].off = off;
        h->free[i].len += len;
    } else if (insert_at(h, i, off, len) < 0) {
        return;
    }
    trim_top(h);
}

/* Takes len bytes aligned to align (a power of two) from the heap, reusing a free extent
 * first; stores the offset. Returns PAGED_OK or PAGED_E_NOMEM (the arena is full). */
int pyp_heap_alloc(struct pyp_heap *h, uint64_t len, uint64_t align, uint64_t *off)
{
    if (len == 0)
        len = 1;
    for (size_t i = 0; i < h->nfree; i++) {
        struct pyp_extent e = h->free[i];
        uint64_t start = (e.off + align - 1) & ~(align - 1);
        if (start - e.off > e.len || e.len - (start - e.off) < len)
            continue;
        uint64_t tail_off = start + len, tail_len = e.off + e.len - tail_off;
        remove_at(h, i);
        /* What is left on either side stays free; the list had room for e, so for one more
         * only when it can grow, else those bytes are lost to the heap. */
        if (start > e.off)
            (void) insert_at(h, i++, e.off, start - e.off);
        if (tail_len > 0)
            (void) insert_at(h, i, tail_off, tail_len);
        *off = start;
        return PAGED_OK;
    }
    uint64_t mark = paged_arena_mark(h->pc, h->kind);
    int rc = paged_arena_alloc(h->pc, h->kind, (size_t) len, (size_t) align, off);
    if (rc == PAGED_OK && *off > mark)
        pyp_heap_free(h, mark, *off - mark);
    return rc;
}
