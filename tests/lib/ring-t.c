/* ring-t.c: tests of the SPSC rings and the channel layout within one process. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/ring.h"
#include "tests/tap/basic.h"

/* Bytes of guard pattern after each entry array; a stray write would change them. */
#define GUARD 256
#define GUARD_BYTE 0xa5

/* A ring in heap memory with both handles attached. */
struct test_ring {
    struct pcore_ring_ctl *ctl;
    unsigned char *entries;
    uint32_t capacity;
    uint32_t entry_size;
    struct pcore_ring_prod prod;
    struct pcore_ring_cons cons;
};

/* Allocates a ring whose indices start at start and attaches both sides; bails on failure. */
static void ring_open(struct test_ring *r, uint32_t capacity, uint32_t entry_size, uint32_t start)
{
    /* Heap memory has no declared type, like the shared mapping the rings normally use. */
    r->ctl = aligned_alloc(_Alignof(struct pcore_ring_ctl), sizeof *r->ctl);
    if (r->ctl == NULL)
        bail("out of memory");
    size_t bytes = (size_t) capacity * entry_size;
    r->entries = bmalloc(bytes + GUARD);
    memset(r->entries, 0, bytes);
    memset(r->entries + bytes, GUARD_BYTE, GUARD);
    r->capacity = capacity;
    r->entry_size = entry_size;
    pcore_ring_ctl_init(r->ctl, start);
    if (pcore_ring_prod_init(&r->prod, r->ctl, r->entries, capacity, entry_size) != PAGED_OK
        || pcore_ring_cons_init(&r->cons, r->ctl, r->entries, capacity, entry_size) != PAGED_OK)
        bail("cannot attach to a fresh ring of %u x %u", capacity, entry_size);
}

/* Returns whether the guard after the entry array is intact. */
static int ring_guard_ok(const struct test_ring *r)
{
    const unsigned char *g = r->entries + (size_t) r->capacity * r->entry_size;
    for (size_t i = 0; i < GUARD; i++)
        if (g[i] != GUARD_BYTE)
            return 0;
    return 1;
}

/* Returns whether p points at the start of an entry inside the ring's array. */
static int in_array(const struct test_ring *r, const void *p)
{
    const unsigned char *b = p;
    if (b < r->entries || b >= r->entries + (size_t) r->capacity * r->entry_size)
        return 0;
    return (size_t) (b - r->entries) % r->entry_size == 0;
}

/* Stores v in a shared control word the way the ring code does (a peer scribbling on it). */
static void put(uint32_t *word, uint32_t v)
{
    atomic_store_explicit(pcore_ring_word(word), v, memory_order_relaxed);
}

/* Returns a shared control word, read the way the ring code reads it. */
static uint32_t get(uint32_t *word)
{
    return atomic_load_explicit(pcore_ring_word(word), memory_order_relaxed);
}

/* Frees a ring made by ring_open. */
static void ring_close(struct test_ring *r)
{
    free(r->ctl);
    free(r->entries);
}

/* Fills an entry of size bytes with bytes derived from seq (never all zero); returns nothing. */
static void make_entry(unsigned char *e, uint32_t size, uint64_t seq)
{
    tap_rng rng;
    tap_rng_seed(&rng, seq * 0x9e3779b97f4a7c15u + 1);
    for (uint32_t i = 0; i < size; i++)
        e[i] = (unsigned char) (tap_rng_u64(&rng) | 1);
    memcpy(e, &seq, size < sizeof seq ? size : sizeof seq);
}

/* Checks bad geometry and pointers are refused by both init calls. */
static void test_init_args(void)
{
    struct pcore_ring_ctl *ctl = aligned_alloc(_Alignof(struct pcore_ring_ctl), 2 * sizeof *ctl);
    unsigned char buf[64];
    struct pcore_ring_prod p;
    struct pcore_ring_cons c;
    if (ctl == NULL)
        bail("out of memory");
    pcore_ring_ctl_init(ctl, 0);
    is_int(PAGED_E_INVAL, pcore_ring_prod_init(&p, ctl, buf, 0, 8), "init: capacity 0 refused");
    is_int(PAGED_E_INVAL, pcore_ring_cons_init(&c, ctl, buf, 3, 8), "init: capacity 3 refused");
    is_int(PAGED_E_INVAL, pcore_ring_prod_init(&p, ctl, buf, PCORE_RING_MAX_ENTRIES * 2u, 8),
           "init: capacity 2^31 refused");
    is_int(PAGED_E_INVAL, pcore_ring_cons_init(&c, ctl, buf, 4, 0), "init: entry size 0 refused");
    is_int(PAGED_E_INVAL, pcore_ring_prod_init(&p, NULL, buf, 4, 8), "init: NULL control refused");
    is_int(PAGED_E_INVAL, pcore_ring_cons_init(&c, ctl, NULL, 4, 8), "init: NULL entries refused");
    is_int(PAGED_E_INVAL,
           pcore_ring_prod_init(&p, (struct pcore_ring_ctl *) ((char *) ctl + 4), buf, 4, 8),
           "init: misaligned control refused");
    is_int(PAGED_OK, pcore_ring_prod_init(&p, ctl, buf, 8, 8), "init: 8 x 8 accepted");
    free(ctl);
}

/*
 * Fills a ring to exactly its capacity, checks it reports full, drains it checking order and
 * contents, and checks it reports empty; then runs several laps in random batches. start
 * near UINT32_MAX makes the indices wrap.
 */
static void test_fill_drain(tap_rng *rng, uint32_t cap, uint32_t esize, uint32_t start)
{
    struct test_ring r;
    ring_open(&r, cap, esize, start);
    unsigned char *want = bmalloc(esize);
    unsigned char *got = bmalloc(esize);
    int ok_empty = pcore_ring_cons_available(&r.cons, 1) == 0 && pcore_ring_cons_pop(&r.cons, got) == 0
                   && pcore_ring_cons_entry(&r.cons, 0) == NULL
                   && pcore_ring_cons_release(&r.cons, 1) == PAGED_E_INVAL
                   && pcore_ring_prod_space(&r.prod, cap) == (int) cap;
    ok(ok_empty, "ring %u x %u from %u: a fresh ring is empty with %u free", cap, esize, start, cap);

    int pushed = 1;
    for (uint32_t i = 0; i < cap; i++) {
        make_entry(want, esize, i);
        pushed &= pcore_ring_prod_push(&r.prod, want) == PAGED_OK;
    }
    make_entry(want, esize, cap);
    ok(pushed && pcore_ring_prod_push(&r.prod, want) == PAGED_E_AGAIN
           && pcore_ring_prod_space(&r.prod, 1) == 0 && pcore_ring_prod_slot(&r.prod, 0) == NULL,
       "ring %u x %u from %u: %u pushes fill it, the next one gets PAGED_E_AGAIN", cap, esize,
       start, cap);
    is_int(cap, pcore_ring_cons_available(&r.cons, 1), "ring %u x %u from %u: all %u are ready",
           cap, esize, start, cap);

    int order = 1;
    for (uint32_t i = 0; i < cap; i++) {
        make_entry(want, esize, i);
        order &= pcore_ring_cons_pop(&r.cons, got) == 1 && memcmp(want, got, esize) == 0;
    }
    ok(order && pcore_ring_cons_pop(&r.cons, got) == 0 && pcore_ring_cons_available(&r.cons, 1) == 0,
       "ring %u x %u from %u: drained in order with the same bytes, then empty", cap, esize, start);

    /* Laps in random batches through the batch API, both sides interleaved. */
    uint64_t next_in = cap, next_out = cap, total = (uint64_t) cap * 5 + 17;
    int laps_ok = 1;
    for (uint64_t guard = 0; next_out < cap + total && guard < 100 * total && laps_ok; guard++) {
        int space = pcore_ring_prod_space(&r.prod, cap);
        uint32_t k = space > 0 ? 1 + (uint32_t) tap_rng_below(rng, (uint64_t) space) : 0;
        if (next_in + k > cap + total)
            k = (uint32_t) (cap + total - next_in);
        for (uint32_t i = 0; i < k; i++) {
            void *slot = pcore_ring_prod_slot(&r.prod, i);
            laps_ok &= slot != NULL && in_array(&r, slot);
            if (slot != NULL)
                make_entry(slot, esize, next_in + i);
        }
        laps_ok &= pcore_ring_prod_slot(&r.prod, (uint32_t) space) == NULL;
        laps_ok &= pcore_ring_prod_publish(&r.prod, k) == PAGED_OK;
        next_in += k;
        int ready = pcore_ring_cons_available(&r.cons, cap);
        laps_ok &= ready >= 0 && ready <= (int) cap;
        uint32_t m = ready > 0 ? 1 + (uint32_t) tap_rng_below(rng, (uint64_t) ready) : 0;
        for (uint32_t i = 0; i < m && laps_ok; i++) {
            const void *e = pcore_ring_cons_entry(&r.cons, i);
            make_entry(want, esize, next_out + i);
            laps_ok &= e != NULL && in_array(&r, e) && memcmp(e, want, esize) == 0;
        }
        laps_ok &= pcore_ring_cons_entry(&r.cons, (uint32_t) ready) == NULL;
        laps_ok &= pcore_ring_cons_release(&r.cons, m) == PAGED_OK;
        next_out += m;
    }
    ok(laps_ok && next_out == cap + total,
       "ring %u x %u from %u: %llu more entries in random batches arrive in order", cap, esize,
       start, (unsigned long long) total);
    uint32_t end = start + (uint32_t) (cap + total);
    ok(get(&r.ctl->head) == end && get(&r.ctl->tail) == end && ring_guard_ok(&r),
       "ring %u x %u from %u: indices end at %u (mod 2^32), guard intact", cap, esize, start, end);
    free(want);
    free(got);
    ring_close(&r);
}

/* Checks the batch calls refuse counts beyond what the other side made available. */
static void test_batch_limits(void)
{
    struct test_ring r;
    ring_open(&r, 16, 32, 100);
    is_int(16, pcore_ring_prod_space(&r.prod, 1), "batch: 16 free");
    is_int(PAGED_E_INVAL, pcore_ring_prod_publish(&r.prod, 17), "batch: publishing 17 of 16 refused");
    for (uint32_t i = 0; i < 10; i++)
        make_entry(pcore_ring_prod_slot(&r.prod, i), 32, i + 1);
    is_int(PAGED_OK, pcore_ring_prod_publish(&r.prod, 10), "batch: 10 published at once");
    is_int(10, pcore_ring_cons_available(&r.cons, 1), "batch: consumer sees 10");
    is_int(PAGED_E_INVAL, pcore_ring_cons_release(&r.cons, 11), "batch: releasing 11 of 10 refused");
    is_int(PAGED_OK, pcore_ring_cons_release(&r.cons, 4), "batch: releasing 4 of 10");
    is_int(6, pcore_ring_cons_available(&r.cons, 1), "batch: 6 left after releasing 4");
    unsigned char want[32];
    make_entry(want, 32, 5);
    ok(memcmp(pcore_ring_cons_entry(&r.cons, 0), want, 32) == 0, "batch: entry 0 is now the 5th");
    /* The cached head says 6 free; asking for 7 makes the producer read the new head. */
    is_int(6, pcore_ring_prod_space(&r.prod, 6), "batch: producer cache still says 6 free");
    is_int(10, pcore_ring_prod_space(&r.prod, 7), "batch: asking for 7 refreshes to 10 free");
    ring_close(&r);
}

/* Checks a tail written past capacity or behind the head is PAGED_E_RING, sticky, touching nothing. */
static void test_corrupt_tail(tap_rng *rng)
{
    struct test_ring r;
    unsigned char out[24];
    ring_open(&r, 8, 24, UINT32_MAX - 3);
    uint32_t head = get(&r.ctl->head);

    put(&r.ctl->tail, head + 8);
    is_int(8, pcore_ring_cons_available(&r.cons, 1), "corrupt: a tail exactly capacity ahead is full, not corrupt");
    put(&r.ctl->tail, head + 9);
    struct pcore_ring_cons c2 = r.cons;
    is_int(PAGED_E_RING, pcore_ring_cons_available(&c2, 9), "corrupt: tail capacity + 1 ahead is PAGED_E_RING");
    ok(pcore_ring_cons_entry(&c2, 0) == NULL, "corrupt: no entry handed out after PAGED_E_RING");
    is_int(PAGED_E_RING, pcore_ring_cons_pop(&c2, out), "corrupt: pop reports PAGED_E_RING");
    is_int(PAGED_E_RING, pcore_ring_cons_release(&c2, 0), "corrupt: release reports PAGED_E_RING");
    put(&r.ctl->tail, head);
    is_int(PAGED_E_RING, pcore_ring_cons_available(&c2, 1), "corrupt: PAGED_E_RING sticks after the tail is put back");

    struct pcore_ring_cons c3;
    pcore_ring_cons_init(&c3, r.ctl, r.entries, 8, 24);
    put(&r.ctl->tail, head - 1);
    is_int(PAGED_E_RING, pcore_ring_cons_available(&c3, 1), "corrupt: tail one behind the head is PAGED_E_RING");
    put(&r.ctl->tail, head + 0x80000000u);
    is_int(PAGED_E_RING, pcore_ring_cons_init(&c3, r.ctl, r.entries, 8, 24),
           "corrupt: consumer init sees a corrupt tail");

    /* Random garbage: either a legal fill level or PAGED_E_RING, and no pointer outside. */
    int sane = 1, corrupt = 0;
    for (int i = 0; i < 2000; i++) {
        uint32_t t = (uint32_t) tap_rng_u64(rng);
        if (i % 4 == 0)
            t = head + (uint32_t) tap_rng_below(rng, 20); /* near the edge, both sides of it */
        put(&r.ctl->head, head); /* the pop below moves it */
        put(&r.ctl->tail, head);
        struct pcore_ring_cons c;
        pcore_ring_cons_init(&c, r.ctl, r.entries, 8, 24);
        put(&r.ctl->tail, t);
        int n = pcore_ring_cons_available(&c, UINT32_MAX);
        uint32_t fill = t - head;
        if (fill <= 8) {
            sane &= n == (int) fill;
            for (int k = 0; k < n; k++)
                sane &= in_array(&r, pcore_ring_cons_entry(&c, (uint32_t) k));
            sane &= pcore_ring_cons_entry(&c, (uint32_t) n) == NULL;
            sane &= n == 0 || pcore_ring_cons_pop(&c, out) == 1;
        } else {
            corrupt++;
            sane &= n == PAGED_E_RING && pcore_ring_cons_entry(&c, 0) == NULL
                    && pcore_ring_cons_pop(&c, out) == PAGED_E_RING;
        }
    }
    ok(sane && corrupt > 0, "corrupt: 2000 random tails give a legal count or PAGED_E_RING (%d corrupt)", corrupt);
    ok(ring_guard_ok(&r), "corrupt: nothing written past the entry array");
    ring_close(&r);
}

/* Checks a consumer head ahead of the tail or too far behind it is PAGED_E_RING for the producer. */
static void test_corrupt_head(void)
{
    struct test_ring r;
    unsigned char e[16];
    make_entry(e, 16, 7);
    ring_open(&r, 4, 16, UINT32_MAX - 1);
    for (int i = 0; i < 3; i++)
        pcore_ring_prod_push(&r.prod, e);
    uint32_t tail = get(&r.ctl->tail);

    struct pcore_ring_prod p1 = r.prod;
    put(&r.ctl->head, tail + 1);
    is_int(PAGED_E_RING, pcore_ring_prod_space(&p1, 4), "corrupt: head ahead of the tail is PAGED_E_RING");
    ok(pcore_ring_prod_slot(&p1, 0) == NULL, "corrupt: no slot handed out after PAGED_E_RING");
    is_int(PAGED_E_RING, pcore_ring_prod_push(&p1, e), "corrupt: push reports PAGED_E_RING");
    is_int(PAGED_E_RING, pcore_ring_prod_publish(&p1, 0), "corrupt: publish reports PAGED_E_RING");

    struct pcore_ring_prod p2 = r.prod;
    put(&r.ctl->head, tail - 5);
    is_int(PAGED_E_RING, pcore_ring_prod_space(&p2, 4), "corrupt: head capacity + 1 behind is PAGED_E_RING");
    put(&r.ctl->head, tail - 4);
    struct pcore_ring_prod p3;
    is_int(PAGED_OK, pcore_ring_prod_init(&p3, r.ctl, r.entries, 4, 16),
           "corrupt: head capacity behind is a full ring");
    is_int(0, pcore_ring_prod_space(&p3, 1), "corrupt: ... with no room");
    put(&r.ctl->head, tail + 100);
    is_int(PAGED_E_RING, pcore_ring_prod_init(&p3, r.ctl, r.entries, 4, 16),
           "corrupt: producer init sees a corrupt head");
    ok(ring_guard_ok(&r), "corrupt: guard intact after head corruption");
    ring_close(&r);
}

/* Checks the channel layout's alignment and ordering for one set of sizes; returns success. */
static int layout_sane(const struct pcore_channel_hdr *h, uint32_t sq, uint32_t cq, uint64_t arena)
{
    return h->magic == PCORE_CHANNEL_MAGIC && h->version == PCORE_PROTO_VERSION
           && h->sq_entries == sq && h->cq_entries == cq
           && h->sq_ctl_off >= sizeof(struct pcore_channel_hdr) && h->sq_ctl_off >= PCORE_CHANNEL_PAGE
           && h->sq_ctl_off % PCORE_CACHELINE == 0 && h->sq_off % PCORE_CACHELINE == 0
           && h->cq_ctl_off % PCORE_CACHELINE == 0 && h->cq_off % PCORE_CACHELINE == 0
           && h->sq_off >= h->sq_ctl_off + sizeof(struct pcore_ring_ctl)
           && h->cq_ctl_off >= h->sq_off + (uint64_t) sq * sizeof(struct pcore_sqe)
           && h->cq_off >= h->cq_ctl_off + sizeof(struct pcore_ring_ctl)
           && h->arena_off >= h->cq_off + (uint64_t) cq * sizeof(struct pcore_cqe)
           && h->arena_off % PCORE_CHANNEL_PAGE == 0 && h->arena_size >= arena
           && h->arena_size - arena < PCORE_CHANNEL_PAGE && h->arena_size % PCORE_CHANNEL_PAGE == 0
           && h->total_size == h->arena_off + h->arena_size;
}

/* Checks the channel layout: offsets, alignment, refusals, and the header check. */
static void test_layout(tap_rng *rng)
{
    struct pcore_channel_hdr h;
    is_int(PAGED_OK, pcore_channel_layout(8, 16, 10000, &h), "layout: 8/16/10000 accepted");
    ok(layout_sane(&h, 8, 16, 10000) && h.arena_size == 12288,
       "layout: 8/16/10000 aligned, ordered, arena rounded to 12288");
    int all = 1;
    for (int i = 0; i < 300; i++) {
        uint32_t sq = 1u << tap_rng_below(rng, 16);
        uint32_t cq = sq << tap_rng_below(rng, 4);
        uint64_t arena = tap_rng_below(rng, 1u << 26);
        all &= pcore_channel_layout(sq, cq, arena, &h) == PAGED_OK && layout_sane(&h, sq, cq, arena)
               && pcore_channel_check(&h, h.total_size) == PAGED_OK;
    }
    ok(all, "layout: 300 random geometries aligned, ordered, passing the check");
    is_int(PAGED_OK, pcore_channel_layout(PCORE_RING_MAX_ENTRIES, PCORE_RING_MAX_ENTRIES, 0, &h),
           "layout: largest rings fit");

    struct pcore_channel_hdr keep;
    pcore_channel_layout(4, 4, 4096, &keep);
    h = keep;
    is_int(PAGED_E_INVAL, pcore_channel_layout(0, 4, 0, &h), "layout: 0 SQ entries refused");
    is_int(PAGED_E_INVAL, pcore_channel_layout(6, 8, 0, &h), "layout: 6 SQ entries refused");
    is_int(PAGED_E_INVAL, pcore_channel_layout(8, 4, 0, &h), "layout: CQ smaller than SQ refused");
    is_int(PAGED_E_INVAL, pcore_channel_layout(4, PCORE_RING_MAX_ENTRIES * 2u, 0, &h), "layout: CQ of 2^31 refused");
    is_int(PAGED_E_INVAL, pcore_channel_layout(4, 4, UINT64_MAX - 100, &h),
           "layout: arena overflowing 64 bits refused");
    is_int(PAGED_E_INVAL, pcore_channel_layout(4, 4, UINT64_MAX - 8191, &h),
           "layout: arena plus rings overflowing 64 bits refused");
    is_int(PAGED_E_INVAL, pcore_channel_layout(4, 4, (uint64_t) INT64_MAX - 4096, &h),
           "layout: total beyond off_t refused");
    ok(memcmp(&h, &keep, sizeof h) == 0, "layout: header untouched by refusals");

    is_int(PAGED_E_PROTO, pcore_channel_check(&h, h.total_size - 1), "check: object smaller than the layout refused");
    h.arena_off += 4096;
    is_int(PAGED_E_PROTO, pcore_channel_check(&h, UINT64_MAX), "check: moved arena refused");
    h = keep;
    h.cq_entries = 3;
    is_int(PAGED_E_PROTO, pcore_channel_check(&h, UINT64_MAX), "check: 3 CQ entries refused");
    h = keep;
    h.version = PCORE_PROTO_VERSION + 1;
    is_int(PAGED_E_VERSION, pcore_channel_check(&h, UINT64_MAX), "check: other protocol version refused");
    h = keep;
    h.magic ^= 1;
    is_int(PAGED_E_PROTO, pcore_channel_check(&h, UINT64_MAX), "check: bad magic refused");
}

/* Runs the ring tests; returns 0 (the TAP library reports failures). */
int main(void)
{
    plan_lazy();
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    test_init_args();
    static const uint32_t shapes[][2] = { { 1, 8 }, { 2, 32 }, { 4, 128 }, { 16, 24 },
                                          { 64, 32 }, { 256, 7 }, { 1024, 128 } };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        uint32_t cap = shapes[i][0], esize = shapes[i][1];
        test_fill_drain(&rng, cap, esize, 0);
        test_fill_drain(&rng, cap, esize, UINT32_MAX - cap / 2);
        test_fill_drain(&rng, cap, esize, (uint32_t) tap_rng_u64(&rng));
    }
    test_batch_limits();
    test_corrupt_tail(&rng);
    test_corrupt_head();
    test_layout(&rng);
    return 0;
}
