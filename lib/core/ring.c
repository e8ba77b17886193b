/* ring.c: single-producer single-consumer rings over shared memory, and the channel layout. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "lib/core/ring.h"

/* Resets the control words: both indices at start, nobody waiting. */
void pcore_ring_ctl_init(struct pcore_ring_ctl *ctl, uint32_t start)
{
    atomic_store_explicit(pcore_ring_word(&ctl->head), start, memory_order_relaxed);
    atomic_store_explicit(pcore_ring_word(&ctl->tail), start, memory_order_relaxed);
    atomic_store_explicit(pcore_ring_word(&ctl->consumer_waiting), 0, memory_order_relaxed);
    atomic_store_explicit(pcore_ring_word(&ctl->consumer_nospin), 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

/*
 * Checks the geometry both handle kinds share. Returns PAGED_OK or PAGED_E_INVAL when a
 * pointer is missing or misaligned, the capacity is not a power of two in range, or the entry
 * array would not fit the address space.
 */
static int ring_check_geometry(const struct pcore_ring_ctl *ctl, const void *entries,
                               uint32_t capacity, uint32_t entry_size)
{
    if (ctl == NULL || entries == NULL || entry_size == 0)
        return PAGED_E_INVAL;
    if ((uintptr_t) ctl % _Alignof(struct pcore_ring_ctl) != 0)
        return PAGED_E_INVAL;
    if (capacity == 0 || capacity > PCORE_RING_MAX_ENTRIES || (capacity & (capacity - 1)) != 0)
        return PAGED_E_INVAL;
    if ((uint64_t) capacity * entry_size > SIZE_MAX)
        return PAGED_E_INVAL;
    return PAGED_OK;
}

/* Returns whether tail - head is a possible fill level of a ring of mask + 1 entries. */
static inline int ring_indices_sane(uint32_t head, uint32_t tail, uint32_t mask)
{
    /* Unsigned wrap makes a head ahead of the tail a huge difference, so one test covers
     * both a tail run too far ahead and a head past the tail. */
    return (uint32_t) (tail - head) <= mask + 1;
}

/* Attaches a producer: copies the geometry, takes its tail and the consumer's head once. */
int pcore_ring_prod_init(struct pcore_ring_prod *p, struct pcore_ring_ctl *ctl, void *entries,
                         uint32_t capacity, uint32_t entry_size)
{
    if (p == NULL)
        return PAGED_E_INVAL;
    int err = ring_check_geometry(ctl, entries, capacity, entry_size);
    if (err < 0)
        return err;
    p->ctl = ctl;
    p->entries = entries;
    p->mask = capacity - 1;
    p->entry_size = entry_size;
    p->tail = atomic_load_explicit(pcore_ring_word(&ctl->tail), memory_order_relaxed);
    p->head_cache = atomic_load_explicit(pcore_ring_word(&ctl->head), memory_order_acquire);
    p->broken = !ring_indices_sane(p->head_cache, p->tail, p->mask);
    if (p->broken) {
        /* Leave the cache describing a full ring so no slot is ever handed out. */
        p->head_cache = p->tail - capacity;
        return PAGED_E_RING;
    }
    return PAGED_OK;
}

/* Returns the free slots the cached head guarantees. */
static inline uint32_t ring_prod_known_free(const struct pcore_ring_prod *p)
{
    return p->mask + 1 - (uint32_t) (p->tail - p->head_cache);
}

/* Returns the free slot count, refreshing the consumer's head only when needed. */
int pcore_ring_prod_space(struct pcore_ring_prod *p, uint32_t want)
{
    if (p->broken)
        return PAGED_E_RING;
    uint32_t known = ring_prod_known_free(p);
    if (known >= want)
        return (int) known;
    /* Acquire: the consumer's reads of the slots it released happen before we refill them. */
    uint32_t head = atomic_load_explicit(pcore_ring_word(&p->ctl->head), memory_order_acquire);
    if (!ring_indices_sane(head, p->tail, p->mask)) {
        p->broken = 1;
        p->head_cache = p->tail - (p->mask + 1);
        return PAGED_E_RING;
    }
    p->head_cache = head;
    return (int) ring_prod_known_free(p);
}

/* Returns the i-th free slot, or NULL when it is not known to be free. */
void *pcore_ring_prod_slot(struct pcore_ring_prod *p, uint32_t i)
{
    if (p->broken || i >= ring_prod_known_free(p))
        return NULL;
    return p->entries + (size_t) ((p->tail + i) & p->mask) * p->entry_size;
}

/* Advances the shared tail by n with release semantics. */
int pcore_ring_prod_publish(struct pcore_ring_prod *p, uint32_t n)
{
    if (p->broken)
        return PAGED_E_RING;
    if (n > ring_prod_known_free(p))
        return PAGED_E_INVAL;
    p->tail += n;
    /* Release: the entries' contents are visible before the tail that covers them. */
    atomic_store_explicit(pcore_ring_word(&p->ctl->tail), p->tail, memory_order_release);
    return PAGED_OK;
}

/* Copies one entry in and publishes it. */
int pcore_ring_prod_push(struct pcore_ring_prod *p, const void *entry)
{
    int space = pcore_ring_prod_space(p, 1);
    if (space < 0)
        return space;
    if (space == 0)
        return PAGED_E_AGAIN;
    memcpy(pcore_ring_prod_slot(p, 0), entry, p->entry_size);
    return pcore_ring_prod_publish(p, 1);
}

/* Attaches a consumer: copies the geometry, takes its head and the producer's tail once. */
int pcore_ring_cons_init(struct pcore_ring_cons *c, struct pcore_ring_ctl *ctl,
                         const void *entries, uint32_t capacity, uint32_t entry_size)
{
    if (c == NULL)
        return PAGED_E_INVAL;
    int err = ring_check_geometry(ctl, entries, capacity, entry_size);
    if (err < 0)
        return err;
    c->ctl = ctl;
    c->entries = entries;
    c->mask = capacity - 1;
    c->entry_size = entry_size;
    c->head = atomic_load_explicit(pcore_ring_word(&ctl->head), memory_order_relaxed);
    c->tail_cache = atomic_load_explicit(pcore_ring_word(&ctl->tail), memory_order_acquire);
    c->broken = !ring_indices_sane(c->head, c->tail_cache, c->mask);
    if (c->broken) {
        c->tail_cache = c->head; /* an empty view: no entry is ever handed out */
        return PAGED_E_RING;
    }
    return PAGED_OK;
}

/* Returns the ready entries the cached tail guarantees. */
static inline uint32_t ring_cons_known_ready(const struct pcore_ring_cons *c)
{
    return c->tail_cache - c->head;
}

/* Returns the ready entry count, refreshing the producer's tail only when needed. */
int pcore_ring_cons_available(struct pcore_ring_cons *c, uint32_t want)
{
    if (c->broken)
        return PAGED_E_RING;
    uint32_t known = ring_cons_known_ready(c);
    if (known >= want)
        return (int) known;
    /* Acquire: the producer's writes of the entries happen before we read them. */
    uint32_t tail = atomic_load_explicit(pcore_ring_word(&c->ctl->tail), memory_order_acquire);
    if (!ring_indices_sane(c->head, tail, c->mask)) {
        c->broken = 1;
        c->tail_cache = c->head;
        return PAGED_E_RING;
    }
    c->tail_cache = tail;
    return (int) ring_cons_known_ready(c);
}

/* Returns the i-th ready entry in place, or NULL when it is not known to be ready. */
const void *pcore_ring_cons_entry(const struct pcore_ring_cons *c, uint32_t i)
{
    if (c->broken || i >= ring_cons_known_ready(c))
        return NULL;
    return c->entries + (size_t) ((c->head + i) & c->mask) * c->entry_size;
}

/* Advances the shared head by n with release semantics. */
int pcore_ring_cons_release(struct pcore_ring_cons *c, uint32_t n)
{
    if (c->broken)
        return PAGED_E_RING;
    if (n > ring_cons_known_ready(c))
        return PAGED_E_INVAL;
    c->head += n;
    /* Release: our reads of the entries are done before the producer may overwrite them. */
    atomic_store_explicit(pcore_ring_word(&c->ctl->head), c->head, memory_order_release);
    return PAGED_OK;
}

/* Copies the next entry out and releases it. */
int pcore_ring_cons_pop(struct pcore_ring_cons *c, void *out)
{
    int ready = pcore_ring_cons_available(c, 1);
    if (ready <= 0)
        return ready;
    memcpy(out, pcore_ring_cons_entry(c, 0), c->entry_size);
    int err = pcore_ring_cons_release(c, 1);
    return err < 0 ? err : 1;
}

/* Returns whether n is a power of two no larger than the largest ring. */
static int ring_size_ok(uint32_t n)
{
    return n != 0 && n <= PCORE_RING_MAX_ENTRIES && (n & (n - 1)) == 0;
}

/* Rounds x up to a multiple of align (a power of two); returns 0 with *out unset on overflow. */
static int round_up(uint64_t x, uint64_t align, uint64_t *out)
{
    if (x > UINT64_MAX - (align - 1))
        return 0;
    *out = (x + align - 1) & ~(align - 1);
    return 1;
}

/* Computes the channel layout; see ring.h. */
int pcore_channel_layout(uint32_t sq_entries, uint32_t cq_entries, uint64_t arena_size,
                         struct pcore_channel_hdr *hdr)
{
    if (hdr == NULL || !ring_size_ok(sq_entries) || !ring_size_ok(cq_entries)
        || cq_entries < sq_entries)
        return PAGED_E_INVAL;
    /* The ring parts are at most a few hundred GiB (2^30 x 128 bytes), so only the arena
     * can overflow 64 bits. */
    struct pcore_channel_hdr h = {
        .magic = PCORE_CHANNEL_MAGIC,
        .version = PCORE_PROTO_VERSION,
        .sq_entries = sq_entries,
        .cq_entries = cq_entries,
    };
    h.sq_ctl_off = PCORE_CHANNEL_PAGE;
    h.sq_off = h.sq_ctl_off + sizeof(struct pcore_ring_ctl);
    uint64_t sq_end = h.sq_off + (uint64_t) sq_entries * sizeof(struct pcore_sqe);
    if (!round_up(sq_end, PCORE_CACHELINE, &h.cq_ctl_off))
        return PAGED_E_INVAL;
    h.cq_off = h.cq_ctl_off + sizeof(struct pcore_ring_ctl);
    uint64_t cq_end = h.cq_off + (uint64_t) cq_entries * sizeof(struct pcore_cqe);
    if (!round_up(cq_end, PCORE_CHANNEL_PAGE, &h.arena_off))
        return PAGED_E_INVAL;
    if (!round_up(arena_size, PCORE_CHANNEL_PAGE, &h.arena_size))
        return PAGED_E_INVAL;
    if (h.arena_size > UINT64_MAX - h.arena_off)
        return PAGED_E_INVAL;
    h.total_size = h.arena_off + h.arena_size;
    /* The whole object is ftruncated (off_t) and mapped (size_t). */
    if (h.total_size > (uint64_t) INT64_MAX || h.total_size > SIZE_MAX)
        return PAGED_E_INVAL;
    *hdr = h;
    return PAGED_OK;
}

/* Checks a received channel header against the layout it claims; see ring.h. */
int pcore_channel_check(const struct pcore_channel_hdr *hdr, uint64_t map_size)
{
    if (hdr == NULL || hdr->magic != PCORE_CHANNEL_MAGIC)
        return PAGED_E_PROTO;
    if (hdr->version != PCORE_PROTO_VERSION)
        return PAGED_E_VERSION;
    struct pcore_channel_hdr want;
    if (pcore_channel_layout(hdr->sq_entries, hdr->cq_entries, hdr->arena_size, &want) < 0)
        return PAGED_E_PROTO;
    if (want.sq_ctl_off != hdr->sq_ctl_off || want.sq_off != hdr->sq_off
        || want.cq_ctl_off != hdr->cq_ctl_off || want.cq_off != hdr->cq_off
        || want.arena_off != hdr->arena_off || want.arena_size != hdr->arena_size
        || want.total_size != hdr->total_size)
        return PAGED_E_PROTO;
    if (hdr->total_size > map_size)
        return PAGED_E_PROTO;
    return PAGED_OK;
}
