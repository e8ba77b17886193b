/* alloc-pin-t.c: directed tests of the allocator's prefix controls: pins, limits, time to live, eviction by prefix. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include "daemon/alloc/alloc.h"
#include "tests/tap/basic.h"

#define NB 4u              /* blocks in a test prefix */
#define TEN 1000u          /* a prefix scope */
#define HA 7u              /* holders */
#define HB 8u
#define UA 1000u           /* pinners */
#define UB 1001u
#define NOLIMIT UINT32_MAX

/* The tests' clock: time moves only when a test says so. */
static uint64_t fake_now = 1000;

/* Returns the tests' clock. */
static uint64_t fake_clock(void)
{
    return fake_now;
}

/* Counts evictions the hook reports. */
static void on_evict(void *ctx, int32_t block, uint32_t tenant, const paged_hash *hash)
{
    (void) tenant;
    (void) block;
    (void) hash;
    (*(uint32_t *) ctx)++;
}

/* Fills h[0..n) with distinct hashes that start at seed. */
static void make_hashes(paged_hash *h, uint32_t n, uint64_t seed)
{
    for (uint32_t i = 0; i < n; i++)
        h[i] = (paged_hash) { seed * 1000 + i + 1, ~(seed * 1000 + i) };
}

/* Allocates n blocks for holder, publishes them under TEN with hashes h and releases them, so
 * they are cached (the first most recently used). Writes their ids to ids. */
static void publish_cached(pa_alloc *a, uint32_t holder, uint32_t n, const paged_hash *h, int32_t *ids)
{
    pa_alloc_blocks(a, holder, n, ids);
    pa_publish(a, holder, TEN, n, ids, h, NULL);
    pa_release_holder(a, holder);
}

/* Reports pa_check's verdict on a. */
static void check_consistent(const pa_alloc *a, const char *where)
{
    const char *problem = pa_check(a);
    if (!ok(problem == NULL, "%s: internal structures consistent", where))
        diag("%s", problem);
}

/* A pinned prefix survives an allocation that evicts every other cached block; unpinned, it
 * goes next. */
static void test_pin_survives(void)
{
    uint32_t evicted = 0;
    pa_alloc *a = pa_create(16);
    pa_set_evict_hook(a, on_evict, &evicted);
    paged_hash hp[NB], ho[NB];
    int32_t pinned_ids[NB], other_ids[NB], got[16];
    make_hashes(hp, NB, 1);
    make_hashes(ho, NB, 2);
    publish_cached(a, HA, NB, hp, pinned_ids);
    publish_cached(a, HA, NB, ho, other_ids);
    uint32_t found = 99;
    is_int(NB, pa_pin(a, TEN, NB, hp, UA, NOLIMIT, NOLIMIT, &found), "pin: the 4 cached blocks pinned");
    is_int(NB, found, "pin: the prefix's length is stored");
    pa_counts c;
    pa_get_counts(a, &c);
    ok(c.cached == 2 * NB && c.pinned == NB && c.free == 16 - 2 * NB,
       "pin: 8 cached, 4 of them pinned, 8 free");
    is_int(NB, pa_pinned_by(a, UA), "pin: charged to its pinner");
    check_consistent(a, "pin");
    is_int(PAGED_E_NOSPC, pa_alloc_blocks(a, HB, 16 - NB + 1, got),
           "pin: an allocation that needs a pinned block is refused");
    is_int(0, pa_alloc_blocks(a, HB, 16 - NB, got), "pin: an allocation of every unpinned block succeeds");
    is_int(NB, evicted, "pin: it evicted the 4 unpinned cached blocks");
    int32_t out[NB];
    is_int(NB, pa_lookup(a, HA, TEN, NB, hp, out), "pin: the pinned prefix is still found");
    ok(memcmp(out, pinned_ids, sizeof out) == 0, "pin: under the same blocks");
    pa_block_info info;
    pa_block_info_get(a, out[0], &info);
    ok(info.pinned && info.pinner == UA && info.refcount == 1, "pin: a looked-up pinned block stays pinned");
    pa_release_holder(a, HA);
    pa_release_holder(a, HB);
    pa_get_counts(a, &c);
    ok(c.cached == NB && c.pinned == NB, "pin: released again, the pinned blocks are cached and pinned");
    is_int(0, pa_evict_cached(a), "pin: evicting every cached block leaves the pinned ones");
    check_consistent(a, "pin after eviction");

    is_int(NB, pa_unpin(a, TEN, NB, hp, UA, 0, NULL), "unpin: the prefix unpinned");
    pa_get_counts(a, &c);
    ok(c.pinned == 0 && c.cached == NB && pa_pinned_by(a, UA) == 0, "unpin: nothing pinned, 4 cached");
    evicted = 0;
    is_int(0, pa_alloc_blocks(a, HB, 16, got), "unpin: an allocation of the whole pool succeeds");
    is_int(NB, evicted, "unpin: it evicted the once pinned blocks");
    check_consistent(a, "unpin");
    pa_destroy(a);
}

/* Pinning is all or nothing against the pinner's and the pool's limits; only the pinner
 * (or anyone, when allowed) unpins; a prefix is pinned up to its first miss. */
static void test_pin_rules(void)
{
    pa_alloc *a = pa_create(32);
    paged_hash h1[NB], h2[NB], h3[NB + 2];
    int32_t ids[NB];
    make_hashes(h1, NB, 1);
    make_hashes(h2, NB, 2);
    make_hashes(h3, NB + 2, 3);
    publish_cached(a, HA, NB, h1, ids);
    publish_cached(a, HA, NB, h2, ids);
    publish_cached(a, HA, NB, h3, ids);   /* the last two hashes of h3 are never published */
    uint32_t found = 0;
    is_int(PAGED_E_LIMIT, pa_pin(a, TEN, NB, h1, UA, NB - 1, NOLIMIT, &found),
           "limits: 4 blocks past a pinner limit of 3 refused");
    is_int(NB, found, "limits: the refusal still says how long the prefix is");
    is_int(0, pa_pinned_by(a, UA), "limits: nothing pinned by the refusal");
    is_int(NB, pa_pin(a, TEN, NB, h1, UA, NB, NOLIMIT, NULL), "limits: 4 blocks within a limit of 4");
    is_int(NB, pa_pin(a, TEN, NB, h1, UA, NB, NOLIMIT, NULL), "limits: pinning them again costs nothing");
    is_int(PAGED_E_LIMIT, pa_pin(a, TEN, NB, h2, UB, NOLIMIT, 2 * NB - 1, NULL),
           "limits: another pinner past the pool's limit of 7 refused");
    is_int(NB, pa_pin(a, TEN, NB, h2, UB, NOLIMIT, 2 * NB, NULL), "limits: within the pool's limit of 8");
    paged_hash twice[2] = { h3[0], h3[0] };
    is_int(2, pa_pin(a, TEN, 2, twice, UA, NB + 1, NOLIMIT, NULL),
           "limits: a hash named twice is pinned once and counted once against the limit");
    is_int(NB + 1, pa_pinned_by(a, UA), "limits: its pinner has 5 pinned");
    is_int(0, pa_pin(a, TEN + 1, NB, h1, UA, NOLIMIT, NOLIMIT, NULL), "scope: another tenant finds nothing");
    is_int(NB, pa_pin(a, TEN, NB + 2, h3, UA, NOLIMIT, NOLIMIT, NULL), "prefix: pinned up to the first miss");
    uint32_t bad = 99;
    is_int(PAGED_E_PERM, pa_unpin(a, TEN, NB, h2, UA, 0, &bad), "owner: UB's pins are not UA's to drop");
    is_int(0, bad, "owner: the first block pinned by another is named");
    pa_counts c;
    pa_get_counts(a, &c);
    is_int(3 * NB, c.pinned, "owner: the refusal changed nothing");
    is_int(NB, pa_unpin(a, TEN, NB, h2, UA, 1, NULL), "owner: with any, UB's pins are dropped");
    is_int(0, pa_pinned_by(a, UB), "owner: UB has none left");
    is_int(PAGED_E_INVAL, pa_pin(a, TEN, 1, NULL, UA, NOLIMIT, NOLIMIT, NULL), "args: NULL hashes refused");
    pa_pin(a, TEN, NB, h2, UB, NOLIMIT, NOLIMIT, NULL);
    is_int(NB, pa_unpin_all(a, UB, 0), "unpin all: UB's 4 pins dropped");
    pa_get_counts(a, &c);
    ok(c.pinned == 2 * NB && pa_pinned_by(a, UA) == 2 * NB, "unpin all: UA's 8 pins stay");
    is_int(0, pa_unpin_all(a, UB, 0), "unpin all: UB has none left");
    is_int(2 * NB, pa_unpin_all(a, UB, 1), "unpin all with any: everyone's dropped");
    pa_get_counts(a, &c);
    ok(c.pinned == 0 && c.cached == 3 * NB, "unpin all: nothing pinned, every block cached again");
    check_consistent(a, "rules");
    pa_destroy(a);
}

/* Cached blocks expire ttl after they went on the LRU list, oldest first; pinned and
 * referenced blocks never do. */
static void test_ttl(void)
{
    uint32_t evicted = 0;
    pa_alloc *a = pa_create(16);
    pa_set_evict_hook(a, on_evict, &evicted);
    paged_hash h1[NB], h2[NB], h3[NB];
    int32_t ids[NB];
    make_hashes(h1, NB, 1);
    make_hashes(h2, NB, 2);
    make_hashes(h3, NB, 3);
    is_int(0, pa_expire(a, 100), "ttl: no clock, nothing expires");
    pa_set_clock(a, fake_clock);
    fake_now = 1000;
    publish_cached(a, HA, NB, h1, ids);       /* cached at 1000 */
    fake_now = 1050;
    publish_cached(a, HA, NB, h2, ids);       /* cached at 1050 */
    publish_cached(a, HA, NB, h3, ids);
    pa_pin(a, TEN, NB, h3, UA, NOLIMIT, NOLIMIT, NULL);
    is_int(1100, (long) pa_next_expiry(a, 100), "ttl: the oldest expires at 1100");
    ok(pa_next_expiry(a, 0) == UINT64_MAX, "ttl: a ttl of 0 never expires");
    fake_now = 1099;
    is_int(0, pa_expire(a, 100), "ttl: nothing expires before its time");
    fake_now = 1100;
    is_int(NB, pa_expire(a, 100), "ttl: the first prefix expires at its time");
    is_int(NB, evicted, "ttl: the hook saw each");
    int32_t out[NB];
    is_int(0, pa_lookup(a, HB, TEN, NB, h1, out), "ttl: an expired prefix is not found");
    is_int(NB, pa_lookup(a, HB, TEN, NB, h2, out), "ttl: the younger one is");
    fake_now = 5000;
    is_int(0, pa_expire(a, 100), "ttl: a referenced prefix and a pinned one do not expire");
    pa_release_holder(a, HB);                 /* h2 cached again at 5000 */
    is_int(5100, (long) pa_next_expiry(a, 100), "ttl: a block's time starts again when it is cached again");
    pa_unpin(a, TEN, NB, h3, UA, 0, NULL);    /* h3 cached at 5000 too */
    fake_now = 5100;
    is_int(2 * NB, pa_expire(a, 100), "ttl: both expire once unpinned and unreferenced");
    pa_counts c;
    pa_get_counts(a, &c);
    ok(c.cached == 0 && c.free == 16, "ttl: the pool is free again");
    check_consistent(a, "ttl");
    pa_destroy(a);
}

/* Eviction by prefix takes the named blocks out of the index: cached ones freed at once,
 * referenced ones at their last free, pins dropped only by who may. */
static void test_evict_prefix(void)
{
    uint32_t evicted = 0;
    pa_alloc *a = pa_create(16);
    pa_set_evict_hook(a, on_evict, &evicted);
    paged_hash h1[NB], h2[NB];
    int32_t ids[NB], out[NB];
    make_hashes(h1, NB, 1);
    make_hashes(h2, NB, 2);
    publish_cached(a, HA, NB, h1, ids);
    publish_cached(a, HA, NB, h2, ids);
    pa_lookup(a, HB, TEN, 1, h1, out);         /* h1's head is referenced */
    pa_pin(a, TEN, NB, h1, UA, NOLIMIT, NOLIMIT, NULL);
    uint32_t bad = 99;
    is_int(PAGED_E_PERM, pa_evict_prefix(a, TEN, NB, h1, UB, 0, &bad), "evict: another's pins refuse it");
    is_int(0, bad, "evict: naming the first pinned block");
    is_int(NB, pa_evict_prefix(a, TEN, NB, h1, UA, 0, NULL), "evict: the pinner evicts its prefix");
    is_int(NB - 1, evicted, "evict: the 3 unreferenced blocks freed at once");
    pa_counts c;
    pa_get_counts(a, &c);
    ok(c.pinned == 0 && c.cached == NB && c.referenced == 1 && c.free == 16 - NB - 1,
       "evict: no pins left, the other prefix cached, the held head referenced");
    is_int(0, pa_lookup(a, HA, TEN, NB, h1, out), "evict: the prefix is no longer found");
    pa_release_holder(a, HB);
    pa_get_counts(a, &c);
    ok(c.free == 16 - NB && c.cached == NB, "evict: its head went to the free list at its last free");
    is_int(NB, pa_evict_prefix(a, TEN, NB, h2, UB, 0, NULL), "evict: an unpinned prefix by anyone");
    is_int(0, pa_evict_prefix(a, TEN, NB, h2, UB, 0, NULL), "evict: again, nothing is found");
    check_consistent(a, "evict prefix");
    pa_destroy(a);
}

/* LOOKUP counts the blocks asked for beside those found. */
static void test_counters(void)
{
    pa_alloc *a = pa_create(16);
    paged_hash h[NB];
    int32_t ids[NB], out[NB + 2];
    make_hashes(h, NB, 1);
    publish_cached(a, HA, NB, h, ids);
    paged_hash longer[NB + 2];
    memcpy(longer, h, sizeof h);
    make_hashes(longer + NB, 2, 9);
    pa_lookup(a, HB, TEN, NB + 2, longer, out);
    pa_lookup(a, HB, TEN, 2, h, out);
    pa_counts c;
    pa_get_counts(a, &c);
    ok(c.lookups == 2 && c.lookup_blocks == NB + 4 && c.lookup_hits == NB + 2,
       "counters: 2 lookups, 8 blocks asked for, 6 found");
    pa_destroy(a);
}

/* Runs the tests. */
int main(void)
{
    plan_lazy();
    test_pin_survives();
    test_pin_rules();
    test_ttl();
    test_evict_prefix();
    test_counters();
    return 0;
}
