/* ring.h: single-producer single-consumer rings over shared memory, and the channel layout. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_CORE_RING_H
#define PAGED_CORE_RING_H

/*
 * A ring is a struct pcore_ring_ctl (lib/core/proto.h) plus an array of capacity fixed-size
 * entries, both in memory the two processes share. Head (next entry to consume) is written
 * only by the consumer, tail (next entry to produce) only by the producer; both count freely
 * over 32 bits and wrap, so tail - head (mod 2^32) is the number of entries in the ring.
 *
 * Each side holds a private handle (struct pcore_ring_prod or struct pcore_ring_cons) with its
 * own copy of the geometry (entry array, mask, entry size) and of its own index. It never
 * reads the geometry or its own index back from shared memory, and it checks every index the
 * other side publishes: (uint32_t)(tail - head) > capacity means the peer wrote garbage, and
 * the handle then reports PAGED_E_RING from every call, for good. So a peer that scribbles
 * over the control words or the entries can only ever spoil its own traffic.
 *
 * Entries are read and written in place in shared memory. A consumer that does not trust its
 * producer (the daemon reading a client's submissions) copies each entry out before looking
 * at it: pcore_ring_cons_pop does that.
 *
 * Each side caches the last index it read of the other's, and reads the shared word again
 * only when the cache cannot satisfy the request, so a producer that is not near full does
 * not pull the consumer's cache line over, and vice versa.
 *
 * Thread safety: a handle belongs to one thread at a time; a ring has one producer and one
 * consumer. Nothing here makes a system call; lib/core/wake.h adds the sleeping and waking.
 */

#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/proto.h"

/*
 * The control words in lib/core/proto.h are declared uint32_t so the header describes the layout
 * in plain C; every access goes through this view of them as _Atomic uint32_t. That is sound
 * because (1) they live in a shared mapping, memory with no declared type, and are only
 * ever accessed through this atomic view, so it is their effective type; (2) the asserts
 * below pin _Atomic uint32_t to the size and alignment of uint32_t; (3) it is always lock
 * free, and lock-free atomics are address free (C17 7.17.5), so they work across processes
 * that map the words at different addresses. GCC and Clang compile these accesses to plain
 * loads, stores and fences on the word.
 */
_Static_assert(sizeof(_Atomic uint32_t) == sizeof(uint32_t), "atomic u32 has the size of u32");
_Static_assert(_Alignof(_Atomic uint32_t) == _Alignof(uint32_t), "atomic u32 has u32's alignment");
#if ATOMIC_INT_LOCK_FREE != 2 || UINT_MAX != UINT32_MAX
#error "the rings need an always lock-free 32-bit atomic int"
#endif

/* Returns the atomic view of a shared control word. */
static inline _Atomic uint32_t *pcore_ring_word(uint32_t *word)
{
    return (_Atomic uint32_t *) word;
}

/* The largest ring: counts of entries then fit an int with room to spare. */
#define PCORE_RING_MAX_ENTRIES (1u << 30)

/* Alignment of the channel's host arena and of its total size. */
#define PCORE_CHANNEL_PAGE 4096u

/* The producer's private view of a ring. */
struct pcore_ring_prod {
    struct pcore_ring_ctl *ctl; /* shared control words */
    unsigned char *entries;     /* shared entry array */
    uint32_t mask;              /* capacity - 1 */
    uint32_t entry_size;        /* bytes per entry */
    uint32_t tail;              /* our own index: the next entry we will publish */
    uint32_t head_cache;        /* the consumer's head as last read */
    int broken;                 /* nonzero once the consumer's head was found corrupt */
};

/* The consumer's private view of a ring. */
struct pcore_ring_cons {
    struct pcore_ring_ctl *ctl;
    const unsigned char *entries;
    uint32_t mask;
    uint32_t entry_size;
    uint32_t head;              /* our own index: the next entry we will consume */
    uint32_t tail_cache;        /* the producer's tail as last read */
    int broken;                 /* nonzero once the producer's tail was found corrupt */
};

/*
 * Resets a ring's control words to an empty ring whose indices start at start (normally
 * 0; tests start near UINT32_MAX to cross the wrap). Only the creator of a ring calls this,
 * before either side is attached.
 */
void pcore_ring_ctl_init(struct pcore_ring_ctl *ctl, uint32_t start);

/*
 * Attaches a producer handle to the ring at ctl with capacity entries of entry_size bytes at
 * entries. Capacity must be a power of two up to PCORE_RING_MAX_ENTRIES, ctl aligned as its
 * type requires. Reads both indices once. Returns PAGED_OK, PAGED_E_INVAL for bad arguments,
 * or PAGED_E_RING when the indices already disagree.
 */
int pcore_ring_prod_init(struct pcore_ring_prod *p, struct pcore_ring_ctl *ctl, void *entries,
                         uint32_t capacity, uint32_t entry_size);

/*
 * Returns the number of free slots (0 when full), reading the consumer's head again only
 * when fewer than want slots are known to be free; PAGED_E_RING when that head is corrupt.
 */
int pcore_ring_prod_space(struct pcore_ring_prod *p, uint32_t want);

/*
 * Returns the i-th free slot past the tail, to be filled before publishing, or NULL when i is
 * not below the free space last returned by pcore_ring_prod_space.
 */
void *pcore_ring_prod_slot(struct pcore_ring_prod *p, uint32_t i);

/*
 * Makes the first n free slots visible to the consumer (a release store of the tail).
 * Returns PAGED_OK, PAGED_E_INVAL when n exceeds the known free space, or PAGED_E_RING.
 */
int pcore_ring_prod_publish(struct pcore_ring_prod *p, uint32_t n);

/*
 * Copies one entry of entry_size bytes into the ring and publishes it. Returns PAGED_OK,
 * PAGED_E_AGAIN when the ring is full, or PAGED_E_RING.
 */
int pcore_ring_prod_push(struct pcore_ring_prod *p, const void *entry);

/*
 * Attaches a consumer handle; the same rules and results as pcore_ring_prod_init.
 */
int pcore_ring_cons_init(struct pcore_ring_cons *c, struct pcore_ring_ctl *ctl,
                         const void *entries, uint32_t capacity, uint32_t entry_size);

/*
 * Returns the number of entries ready to consume (0 when empty), reading the producer's tail
 * again only when fewer than want entries are known; PAGED_E_RING when the tail is more
 * than capacity ahead of the head (or behind it).
 */
int pcore_ring_cons_available(struct pcore_ring_cons *c, uint32_t want);

/*
 * Returns the i-th ready entry in shared memory, or NULL when i is not below the count last
 * returned by pcore_ring_cons_available. The producer may still scribble on it: copy it out
 * before trusting it.
 */
const void *pcore_ring_cons_entry(const struct pcore_ring_cons *c, uint32_t i);

/*
 * Hands the first n ready entries back to the producer (a release store of the head).
 * Returns PAGED_OK, PAGED_E_INVAL when n exceeds the known ready count, or PAGED_E_RING.
 */
int pcore_ring_cons_release(struct pcore_ring_cons *c, uint32_t n);

/*
 * Copies the next entry out to out and releases its slot. Returns 1 when an entry was
 * copied, 0 when the ring is empty, PAGED_E_RING when it is corrupt.
 */
int pcore_ring_cons_pop(struct pcore_ring_cons *c, void *out);

/* Returns the ring's capacity as seen by this handle. */
static inline uint32_t pcore_ring_prod_capacity(const struct pcore_ring_prod *p)
{
    return p->mask + 1;
}

/* Returns the ring's capacity as seen by this handle. */
static inline uint32_t pcore_ring_cons_capacity(const struct pcore_ring_cons *c)
{
    return c->mask + 1;
}

/*
 * Asks the CPU to start fetching the producer's tail and the first two lines of the next
 * entry, so that a consumer serving many rings has their cache misses in flight at once
 * instead of one after another. Only a hint: it reads nothing and changes nothing. Returns
 * nothing.
 */
static inline void pcore_ring_cons_prefetch(const struct pcore_ring_cons *c)
{
    const unsigned char *next = c->entries + (size_t) (c->head & c->mask) * c->entry_size;
    __builtin_prefetch(&c->ctl->tail, 0, 3);
    __builtin_prefetch(next, 0, 3);
    if (c->entry_size > PCORE_CACHELINE)
        __builtin_prefetch(next + PCORE_CACHELINE, 0, 3);
}

/*
 * Computes the layout of a client channel (see lib/core/proto.h): the header page, then the SQ
 * control words and entries, the CQ control words and entries, then the host arena on a
 * page boundary, arena_size rounded up to whole pages. Fills every field of *hdr (magic and
 * version included). sq_entries and cq_entries must be powers of two up to
 * PCORE_RING_MAX_ENTRIES with cq_entries >= sq_entries; the whole must fit size_t and off_t.
 * Returns PAGED_OK or PAGED_E_INVAL, leaving *hdr untouched on error.
 */
int pcore_channel_layout(uint32_t sq_entries, uint32_t cq_entries, uint64_t arena_size,
                         struct pcore_channel_hdr *hdr);

/*
 * Checks a channel header read from shared memory (copy it out first) against the layout
 * its own sq_entries, cq_entries and arena_size give, and against map_size, the size of the
 * object it came in. Returns PAGED_OK, PAGED_E_VERSION for another protocol version, or
 * PAGED_E_PROTO for anything else that does not add up.
 */
int pcore_channel_check(const struct pcore_channel_hdr *hdr, uint64_t map_size);

#endif
