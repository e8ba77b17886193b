/* alloc-t.c: directed tests of the block allocator: exhaustion, all-or-nothing, CoW, prefix cache, LRU. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "daemon/alloc/alloc.h"
#include "tests/tap/basic.h"

#define HA 7u              /* three clients, one with an id at the top of the range */
#define HB 1000003u
#define HC 0xffffffffu
#define TEN 1000u          /* the prefix scope of the tests that use one */
#define TEN2 0u            /* another: root's uid in pagedd */

/* What the eviction hook saw. */
typedef struct evictions {
    uint32_t n;
    int32_t block[16];
    paged_hash hash[16];
} evictions;

/* Records one eviction. */
static void on_evict(void *ctx, int32_t block, uint32_t tenant, const paged_hash *hash)
{
    (void) tenant;
    evictions *ev = ctx;
    if (ev->n < 16) {
        ev->block[ev->n] = block;
        ev->hash[ev->n] = *hash;
    }
    ev->n++;
}

/* Returns a random hash. */
static paged_hash rand_hash(tap_rng *rng)
{
    paged_hash h = { tap_rng_u64(rng), tap_rng_u64(rng) };
    return h;
}

/* Returns whether two hashes are equal. */
static int hash_eq(paged_hash x, paged_hash y)
{
    return x.lo == y.lo && x.hi == y.hi;
}

/* Returns whether two counter sets are equal. */
static int counts_eq(const pa_counts *x, const pa_counts *y)
{
    return x->free == y->free && x->referenced == y->referenced && x->cached == y->cached
           && x->evictions == y->evictions && x->lookups == y->lookups
           && x->lookup_hits == y->lookup_hits;
}

/* Reports pa_check's verdict on a. */
static void check_consistent(const pa_alloc *a, const char *where)
{
    const char *problem = pa_check(a);
    if (!ok(problem == NULL, "%s: internal structures consistent", where))
        diag("pa_check: %s", problem);
}

/* Creation, a fresh pool's order, and counts. */
static void test_create(void)
{
    ok(pa_create(0) == NULL, "pa_create(0) fails");
    ok(pa_create(0x80000000u) == NULL, "pa_create(2^31) fails (ids are int32_t)");
    pa_alloc *a = pa_create(16);
    if (a == NULL)
        bail("pa_create(16) failed");
    pa_counts c;
    pa_get_counts(a, &c);
    ok(pa_num_blocks(a) == 16 && c.free == 16 && c.referenced == 0 && c.cached == 0,
       "fresh pool of 16: 16 free");
    int32_t out[3];
    is_int(0, pa_alloc_blocks(a, HA, 3, out), "alloc 3 from a fresh pool");
    ok(out[0] == 0 && out[1] == 1 && out[2] == 2, "a fresh pool hands out blocks 0, 1, 2");
    is_int(PAGED_E_INVAL, pa_alloc_blocks(a, HA, 1, NULL), "alloc with out NULL: PAGED_E_INVAL");
    is_int(0, pa_alloc_blocks(a, HA, 0, NULL), "alloc of 0 blocks succeeds");
    pa_destroy(a);
    pa_destroy(NULL);
}

/* Exhaustion: PAGED_E_NOSPC takes nothing, evicts nothing and writes nothing. */
static void test_exhaustion(tap_rng *rng)
{
    pa_alloc *a = pa_create(16);
    evictions ev = { 0 };
    pa_set_evict_hook(a, on_evict, &ev);
    int32_t ids[16];
    is_int(0, pa_alloc_blocks(a, HA, 10, ids), "exhaustion: alloc 10 of 16");
    pa_counts before, after;
    pa_get_counts(a, &before);
    int32_t out[16];
    for (int i = 0; i < 16; i++)
        out[i] = -7;
    is_int(PAGED_E_NOSPC, pa_alloc_blocks(a, HB, 7, out), "exhaustion: alloc 7 with 6 free: NOSPC");
    pa_get_counts(a, &after);
    ok(counts_eq(&before, &after) && after.free == 6, "exhaustion: counts unchanged, 6 still free");
    int untouched = 1;
    for (int i = 0; i < 16; i++)
        untouched &= out[i] == -7;
    ok(untouched && pa_held_total(a, HB) == 0, "exhaustion: nothing written, nothing held");
    is_int(0, pa_alloc_blocks(a, HB, 6, out), "exhaustion: alloc exactly the 6 free");
    is_int(PAGED_E_NOSPC, pa_alloc_blocks(a, HA, 1, out), "exhaustion: alloc 1 of none: NOSPC");
    is_int(PAGED_E_NOSPC, pa_alloc_blocks(a, HA, UINT32_MAX, out), "exhaustion: alloc 2^32-1: NOSPC");

    /* Two cached blocks, none free: 2 can be had by eviction, 3 cannot and evict nothing. */
    paged_hash h[2] = { rand_hash(rng), rand_hash(rng) };
    is_int(2, pa_publish(a, HA, TEN, 2, ids, h, NULL), "exhaustion: publish 2 blocks");
    is_int(0, pa_free_blocks(a, HA, 2, ids, NULL), "exhaustion: free them: cached");
    pa_get_counts(a, &before);
    is_int(PAGED_E_NOSPC, pa_alloc_blocks(a, HC, 3, out), "exhaustion: alloc 3 with 2 cached: NOSPC");
    pa_get_counts(a, &after);
    ok(counts_eq(&before, &after) && after.cached == 2 && ev.n == 0,
       "exhaustion: the failed alloc evicted nothing, 2 still cached");
    is_int(0, pa_alloc_blocks(a, HC, 2, out), "exhaustion: alloc 2 with 2 cached evicts them");
    ok(ev.n == 2, "exhaustion: the hook saw 2 evictions");
    check_consistent(a, "exhaustion");
    pa_destroy(a);
}

/* Array FREE is all or nothing, and names the first bad element. */
static void test_free_all_or_nothing(void)
{
    pa_alloc *a = pa_create(16);
    int32_t ids[6], other[2];
    pa_alloc_blocks(a, HA, 6, ids);              /* 0..5 */
    pa_alloc_blocks(a, HB, 2, other);            /* 6, 7 */
    pa_counts before, after;
    pa_get_counts(a, &before);
    uint32_t bad = 99;
    is_int(PAGED_E_BLOCK, pa_free_blocks(a, HA, 4, (int32_t[]) { 1, 2, 99, 3 }, &bad),
           "free {1, 2, 99, 3}: PAGED_E_BLOCK");
    is_int(2, bad, "free {1, 2, 99, 3}: bad index 2");
    is_int(PAGED_E_BLOCK, pa_free_blocks(a, HA, 2, (int32_t[]) { 1, -1 }, &bad),
           "free {1, -1}: PAGED_E_BLOCK");
    is_int(1, bad, "free {1, -1}: bad index 1");
    is_int(PAGED_E_NOTHELD, pa_free_blocks(a, HA, 3, (int32_t[]) { 1, 5, 5 }, &bad),
           "free {1, 5, 5} with 5 held once: PAGED_E_NOTHELD");
    is_int(2, bad, "free {1, 5, 5}: bad index 2");
    is_int(PAGED_E_NOTHELD, pa_free_blocks(a, HA, 2, (int32_t[]) { 1, 6 }, &bad),
           "free of another holder's block: PAGED_E_NOTHELD");
    is_int(1, bad, "free {1, 6}: bad index 1");
    is_int(PAGED_E_NOTHELD, pa_free_blocks(a, HC, 1, (int32_t[]) { 0 }, &bad),
           "free by a holder that holds nothing: PAGED_E_NOTHELD");
    is_int(0, bad, "free by a holder that holds nothing: bad index 0");
    pa_get_counts(a, &after);
    int held = 1;
    for (int32_t b = 0; b < 6; b++)
        held &= pa_held(a, HA, b) == 1;
    ok(counts_eq(&before, &after) && held && pa_held_total(a, HA) == 6,
       "failed frees changed nothing");
    is_int(PAGED_E_INVAL, pa_free_blocks(a, HA, 1, NULL, &bad), "free with ids NULL: PAGED_E_INVAL");
    is_int(0, pa_free_blocks(a, HA, 0, NULL, &bad), "free of 0 blocks succeeds");

    is_int(0, pa_fork_blocks(a, HA, 1, (int32_t[]) { 5 }, NULL), "fork block 5");
    is_int(0, pa_free_blocks(a, HA, 2, (int32_t[]) { 5, 5 }, &bad),
           "free {5, 5} with 5 held twice succeeds");
    pa_get_counts(a, &after);
    ok(pa_held(a, HA, 5) == 0 && after.free == before.free + 1, "block 5 is free again");
    check_consistent(a, "free");
    pa_destroy(a);
}

/* FORK adds references only to blocks already held. */
static void test_fork(void)
{
    pa_alloc *a = pa_create(16);
    int32_t ids[4];
    pa_alloc_blocks(a, HA, 4, ids);
    is_int(0, pa_fork_blocks(a, HA, 2, (int32_t[]) { 3, 3 }, NULL), "fork {3, 3}");
    pa_block_info info;
    pa_block_info_get(a, 3, &info);
    ok(pa_held(a, HA, 3) == 3 && info.refcount == 3 && info.holders == 1,
       "forked block: 3 references of 1 holder");
    uint32_t bad = 99;
    is_int(PAGED_E_NOTHELD, pa_fork_blocks(a, HA, 2, (int32_t[]) { 3, 8 }, &bad),
           "fork {3, 8} with 8 free: PAGED_E_NOTHELD");
    ok(bad == 1 && pa_held(a, HA, 3) == 3, "fork {3, 8}: bad index 1, block 3 unchanged");
    is_int(PAGED_E_NOTHELD, pa_fork_blocks(a, HB, 1, (int32_t[]) { 0 }, &bad),
           "fork of another holder's block: PAGED_E_NOTHELD");
    is_int(PAGED_E_BLOCK, pa_fork_blocks(a, HA, 1, (int32_t[]) { 16 }, &bad),
           "fork of block 16 of 16: PAGED_E_BLOCK");
    ok(pa_held_total(a, HA) == 6, "holder total counts forked references");
    pa_destroy(a);
}

/* The copy-on-write decision. */
static void test_cow(tap_rng *rng)
{
    pa_alloc *a = pa_create(8);
    int32_t b, c;
    pa_alloc_blocks(a, HA, 1, &b);
    is_int(1, pa_writable(a, HA, b), "CoW: a sole reference is writable");
    pa_fork_blocks(a, HA, 1, &b, NULL);
    is_int(0, pa_writable(a, HA, b), "CoW: a forked block is not writable");
    pa_free_blocks(a, HA, 1, &b, NULL);
    is_int(1, pa_writable(a, HA, b), "CoW: writable again once the fork is freed");
    is_int(PAGED_E_NOTHELD, pa_writable(a, HB, b), "CoW: another holder: PAGED_E_NOTHELD");
    is_int(PAGED_E_BLOCK, pa_writable(a, HA, 8), "CoW: block 8 of 8: PAGED_E_BLOCK");
    is_int(PAGED_E_BLOCK, pa_writable(a, HA, -1), "CoW: block -1: PAGED_E_BLOCK");
    paged_hash hb = rand_hash(rng), hc = rand_hash(rng);
    pa_publish(a, HA, TEN, 1, &b, &hb, NULL);
    is_int(0, pa_writable(a, HA, b), "CoW: a published sole reference is not writable");

    /* A second holder can only come by LOOKUP, so its block is published as well. */
    pa_alloc_blocks(a, HA, 1, &c);
    pa_publish(a, HA, TEN, 1, &c, &hc, NULL);
    int32_t got = -1;
    is_int(1, pa_lookup(a, HB, TEN, 1, &hc, &got), "CoW: another holder looks the block up");
    ok(got == c && pa_writable(a, HA, c) == 0 && pa_writable(a, HB, c) == 0,
       "CoW: another holder's reference makes it writable by neither");
    pa_free_blocks(a, HA, 1, &c, NULL);
    is_int(0, pa_writable(a, HB, c), "CoW: the last holder of a published block still may not write");
    pa_destroy(a);
}

/* A published prefix stays findable after its publisher let go. */
static void test_cached_prefix(tap_rng *rng)
{
    enum { B = 16, NB = 4 };
    int32_t tokens[NB * B + 3];
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++)
        tokens[i] = (int32_t) tap_rng_below(rng, 50000) + 1;
    paged_hash h[NB + 1];
    is_int(NB, paged_hash_blocks(NULL, tokens, NB * B + 3, B, 7, h), "prefix: 4 block hashes");
    h[NB] = rand_hash(rng);

    pa_alloc *a = pa_create(32);
    int32_t ids[NB];
    pa_alloc_blocks(a, HA, NB, ids);
    is_int(NB, pa_publish(a, HA, TEN, NB, ids, h, NULL), "prefix: publish 4 blocks");
    is_int(0, pa_publish(a, HA, TEN, NB, ids, h, NULL), "prefix: publishing again publishes none");
    is_int(NB, pa_release_holder(a, HA), "prefix: the publisher releases its 4 references");
    pa_counts c;
    pa_get_counts(a, &c);
    ok(c.cached == NB && c.referenced == 0 && c.free == 32 - NB, "prefix: 4 blocks cached");

    int32_t out[NB + 1];
    for (int i = 0; i <= NB; i++)
        out[i] = -7;
    is_int(NB, pa_lookup(a, HB, TEN, NB + 1, h, out), "prefix: lookup of 5 hashes finds the 4 cached");
    ok(memcmp(out, ids, sizeof ids) == 0 && out[NB] == -7, "prefix: lookup returns the published ids");
    pa_get_counts(a, &c);
    ok(c.cached == 0 && c.referenced == NB && c.lookups == 1 && c.lookup_hits == NB,
       "prefix: found blocks are referenced; 1 lookup, 4 hits counted");
    is_int(NB - 1, pa_lookup(a, HC, TEN, NB - 1, h + 1, out), "prefix: lookup from block 1 finds 3");
    pa_block_info info;
    pa_block_info_get(a, ids[2], &info);
    ok(info.refcount == 2 && info.holders == 2 && info.published && hash_eq(info.hash, h[2]),
       "prefix: block 2 has 2 holders and its hash");
    paged_hash miss[2] = { rand_hash(rng), h[0] };
    is_int(0, pa_lookup(a, HC, TEN, 2, miss, out), "prefix: lookup stops at a first miss");
    paged_hash near = { h[0].lo, h[0].hi ^ 1 };
    is_int(0, pa_lookup(a, HC, TEN, 1, &near, out), "prefix: same low 64 bits, other high bits: miss");
    near = (paged_hash) { h[0].lo ^ (1ull << 63), h[0].hi };
    is_int(0, pa_lookup(a, HC, TEN, 1, &near, out), "prefix: same high 64 bits, other low bits: miss");
    is_int(0, pa_lookup(a, HC, TEN, 0, h, out), "prefix: lookup of 0 hashes finds none");
    pa_get_counts(a, &c);
    ok(c.lookups == 6 && c.lookup_hits == 2 * NB - 1, "prefix: 6 lookups, 7 hits counted");
    check_consistent(a, "prefix");
    pa_destroy(a);
}

/* PUBLISH: the first publisher of a hash wins, a published block keeps its hash. */
static void test_publish(tap_rng *rng)
{
    pa_alloc *a = pa_create(8);
    int32_t ids[3];
    pa_alloc_blocks(a, HA, 3, ids);
    paged_hash h = rand_hash(rng), h2 = rand_hash(rng);
    is_int(1, pa_publish(a, HA, TEN, 2, ids, (paged_hash[]) { h, h }, NULL),
           "publish two blocks under one hash: one published");
    pa_block_info info;
    pa_block_info_get(a, ids[1], &info);
    is_int(0, info.published, "publish: the second block stays unpublished");
    is_int(0, pa_publish(a, HA, TEN, 1, ids, &h2, NULL), "publish: a published block is not republished");
    pa_block_info_get(a, ids[0], &info);
    ok(info.published && hash_eq(info.hash, h), "publish: the block keeps its first hash");
    is_int(1, pa_publish(a, HA, TEN, 1, ids + 1, &h2, NULL), "publish: the second block under a new hash");
    uint32_t bad = 99;
    is_int(PAGED_E_NOTHELD, pa_publish(a, HB, TEN, 1, ids, &h, &bad), "publish of another's block: NOTHELD");
    paged_hash h3 = rand_hash(rng);
    is_int(PAGED_E_BLOCK, pa_publish(a, HA, TEN, 2, (int32_t[]) { ids[2], 99 },
                                     (paged_hash[]) { h3, h3 }, &bad),
           "publish {held, 99}: PAGED_E_BLOCK");
    pa_block_info_get(a, ids[2], &info);
    ok(bad == 1 && !info.published, "publish {held, 99}: bad index 1, nothing published");
    int32_t out;
    is_int(0, pa_lookup(a, HB, TEN, 1, &h3, &out), "publish: the failed publish left no hash behind");
    pa_destroy(a);
}

/* Tenants: a hash published in one scope is found only there; another scope publishing the
 * same hash makes its own entry; a published block keeps its tenant; a new seed moves nothing. */
static void test_tenants(tap_rng *rng)
{
    pa_alloc *a = pa_create(16);
    int32_t ids[4];
    paged_hash h[2] = { rand_hash(rng), rand_hash(rng) };
    pa_alloc_blocks(a, HA, 4, ids);
    is_int(2, pa_publish(a, HA, TEN, 2, ids, h, NULL), "tenants: TEN publishes 2 blocks");
    int32_t out[2] = { -7, -7 };
    is_int(0, pa_lookup(a, HB, TEN2, 2, h, out), "tenants: TEN2's lookup of TEN's hashes misses");
    is_int(-7, out[0], "tenants: and writes no id");
    is_int(2, pa_publish(a, HA, TEN2, 2, ids + 2, h, NULL), "tenants: TEN2 publishes the same hashes anew");
    is_int(2, pa_lookup(a, HB, TEN2, 2, h, out), "tenants: TEN2 finds its own 2 blocks");
    ok(out[0] == ids[2] && out[1] == ids[3], "tenants: TEN2's lookup gives TEN2's blocks");
    is_int(2, pa_lookup(a, HC, TEN, 2, h, out), "tenants: TEN still finds its 2 blocks");
    ok(out[0] == ids[0] && out[1] == ids[1], "tenants: TEN's lookup gives TEN's blocks, not TEN2's");
    pa_block_info info;
    pa_block_info_get(a, ids[1], &info);
    ok(info.published && info.tenant == TEN && hash_eq(info.hash, h[1]), "tenants: a block keeps hash and tenant");
    is_int(0, pa_publish(a, HA, TEN2, 1, ids, h, NULL), "tenants: a published block is not republished elsewhere");
    pa_block_info_get(a, ids[0], &info);
    is_int(TEN, info.tenant, "tenants: and keeps its first tenant");
    pa_set_index_seed(a, tap_rng_u64(rng));
    check_consistent(a, "tenants: after a new seed");
    is_int(2, pa_lookup(a, HB, TEN, 2, h, out), "tenants: after a new seed TEN finds its blocks");
    ok(out[0] == ids[0] && out[1] == ids[1], "tenants: the same ones");
    is_int(0, pa_lookup(a, HB, 12345, 2, h, out), "tenants: a third scope finds nothing");
    pa_release_holder(a, HA);
    pa_release_holder(a, HB);
    pa_release_holder(a, HC);
    is_int(4, pa_evict_cached(a), "tenants: both scopes' blocks are evicted");
    is_int(0, pa_lookup(a, HB, TEN2, 2, h, out), "tenants: an evicted entry is found in no scope");
    check_consistent(a, "tenants");
    pa_destroy(a);
}

/* Eviction takes the least recently used cached block and tells the hook. */
static void test_evict(tap_rng *rng)
{
    pa_alloc *a = pa_create(4);
    evictions ev = { 0 };
    pa_set_evict_hook(a, on_evict, &ev);
    int32_t ids[4];
    paged_hash h[4];
    for (int i = 0; i < 4; i++)
        h[i] = rand_hash(rng);
    pa_alloc_blocks(a, HA, 4, ids);
    pa_publish(a, HA, TEN, 4, ids, h, NULL);
    is_int(0, pa_free_blocks(a, HA, 4, (int32_t[]) { 2, 0, 3, 1 }, NULL),
           "evict: free {2, 0, 3, 1}: LRU order 2, 0, 3, 1");
    int32_t out[2];
    is_int(0, pa_alloc_blocks(a, HB, 2, out), "evict: alloc 2 with none free");
    ok(ev.n == 2 && ev.block[0] == 2 && ev.block[1] == 0, "evict: the hook saw blocks 2 then 0");
    ok(ev.n == 2 && hash_eq(ev.hash[0], h[2]) && hash_eq(ev.hash[1], h[0]),
       "evict: the hook got their hashes");
    ok((out[0] == 2 && out[1] == 0) || (out[0] == 0 && out[1] == 2), "evict: alloc got blocks 0 and 2");
    int32_t got;
    is_int(0, pa_lookup(a, HC, TEN, 1, &h[2], &got), "evict: an evicted hash is not found");
    pa_block_info info;
    pa_block_info_get(a, 2, &info);
    ok(!info.published, "evict: the evicted block is unpublished");

    /* A cached block looked up and let go again becomes the most recently used. */
    is_int(1, pa_lookup(a, HC, TEN, 1, &h[3], &got), "evict: lookup takes cached block 3");
    pa_free_blocks(a, HC, 1, &got, NULL);
    ev.n = 0;
    is_int(2, pa_evict_cached(a), "evict: pa_evict_cached evicts the 2 cached");
    ok(ev.n == 2 && ev.block[0] == 1 && ev.block[1] == 3, "evict: LRU order is 1 then 3");
    pa_counts c;
    pa_get_counts(a, &c);
    ok(c.evictions == 4 && c.cached == 0 && c.free == 2, "evict: 4 evictions counted, 2 free");
    is_int(0, pa_evict_cached(a), "evict: nothing left to evict");
    check_consistent(a, "evict");
    pa_destroy(a);
}

/* The published blocks listed most recently used first: those in use, then the cached ones
 * from the most recently used; unpublished and free blocks left out. */
static void test_recent_first(tap_rng *rng)
{
    pa_alloc *a = pa_create(6);
    int32_t ids[5], out[6];
    paged_hash h[4] = { rand_hash(rng), rand_hash(rng), rand_hash(rng), rand_hash(rng) };
    pa_alloc_blocks(a, HA, 5, ids);
    pa_publish(a, HA, TEN, 4, ids, h, NULL);
    pa_free_blocks(a, HA, 3, (int32_t[]) { 2, 0, 3 }, NULL);
    is_int(4, (int) pa_published_recent_first(a, out), "recent first: the 4 published blocks listed");
    ok(out[0] == 1 && out[1] == 3 && out[2] == 0 && out[3] == 2,
       "recent first: referenced 1, then cached 3, 0, 2 (freed 2, 0, 3) (%d %d %d %d)", out[0], out[1], out[2],
       out[3]);
    pa_destroy(a);
}

/* A released sequence is cached newest first, so its tail is evicted before its head. */
static void test_release_order(tap_rng *rng)
{
    pa_alloc *a = pa_create(3);
    evictions ev = { 0 };
    pa_set_evict_hook(a, on_evict, &ev);
    int32_t ids[3], out;
    paged_hash h[3] = { rand_hash(rng), rand_hash(rng), rand_hash(rng) };
    pa_alloc_blocks(a, HA, 3, ids);
    pa_publish(a, HA, TEN, 3, ids, h, NULL);
    is_int(3, pa_release_holder(a, HA), "release order: 3 references released");
    pa_alloc_blocks(a, HB, 1, &out);
    ok(ev.n == 1 && ev.block[0] == ids[2], "release order: the sequence's last block is evicted first");
    int32_t found[3];
    is_int(2, pa_lookup(a, HB, TEN, 3, h, found), "release order: the first two blocks are still found");
    is_int(0, pa_release_holder(a, HA), "release of a holder that holds nothing: 0");
    pa_destroy(a);
}

/* Releasing a holder with 100k references (interleaved with another's) takes them all. */
static void test_release_many(tap_rng *rng)
{
    enum { N = 1 << 17, REFS = 100000, CHUNK = 1000 };
    pa_alloc *a = pa_create(N);
    static int32_t ids[REFS];
    int32_t other[10];
    for (uint32_t i = 0; i < REFS; i += CHUNK) {
        if (pa_alloc_blocks(a, HA, CHUNK, ids + i) != 0 || pa_alloc_blocks(a, HB, 10, other) != 0)
            bail("release many: alloc failed");
    }
    int32_t forks[CHUNK];
    for (int i = 0; i < CHUNK; i++)
        forks[i] = ids[tap_rng_below(rng, REFS)];
    is_int(0, pa_fork_blocks(a, HA, CHUNK, forks, NULL), "release many: fork 1000 of 100000 blocks");
    is_int(REFS + CHUNK, pa_held_total(a, HA), "release many: the holder has 101000 references");
    is_int(REFS + CHUNK, pa_release_holder(a, HA), "release many: release returns 101000");
    pa_counts c;
    pa_get_counts(a, &c);
    ok(pa_held_total(a, HA) == 0 && pa_held(a, HA, ids[REFS / 2]) == 0 && c.free == N - 1000
       && pa_held_total(a, HB) == 1000, "release many: all free but the other holder's 1000");
    check_consistent(a, "release many");
    pa_destroy(a);
}

/* What pa_block_holders reported. */
typedef struct holder_list {
    uint32_t n;
    uint32_t id[8];
    uint32_t refs[8];
} holder_list;

/* Collects one holder. */
static void on_holder(void *ctx, uint32_t holder, uint32_t refs)
{
    holder_list *l = ctx;
    if (l->n < 8) {
        l->id[l->n] = holder;
        l->refs[l->n] = refs;
    }
    l->n++;
}

/* Returns the references list l gives holder, or 0. */
static uint32_t listed(const holder_list *l, uint32_t holder)
{
    for (uint32_t i = 0; i < l->n && i < 8; i++)
        if (l->id[i] == holder)
            return l->refs[i];
    return 0;
}

/* pa_block_holders lists every holder with its count; large and zero ids are distinct. */
static void test_holders(tap_rng *rng)
{
    pa_alloc *a = pa_create(4);
    int32_t b, got;
    paged_hash h = rand_hash(rng);
    pa_alloc_blocks(a, HA, 1, &b);
    pa_publish(a, HA, TEN, 1, &b, &h, NULL);
    pa_fork_blocks(a, HA, 1, &b, NULL);
    pa_lookup(a, HB, TEN, 1, &h, &got);
    pa_lookup(a, HC, TEN, 1, &h, &got);
    pa_lookup(a, 0, TEN, 1, &h, &got);
    holder_list l = { 0 };
    pa_block_holders(a, b, on_holder, &l);
    ok(l.n == 4 && listed(&l, HA) == 2 && listed(&l, HB) == 1 && listed(&l, HC) == 1
       && listed(&l, 0) == 1, "holders: 4 listed, holder 7 with 2 references, 0 and 2^32-1 with 1");
    pa_block_info info;
    pa_block_info_get(a, b, &info);
    ok(info.refcount == 5 && info.holders == 4, "holders: refcount 5, 4 holders");
    pa_release_holder(a, HC);
    l.n = 0;
    pa_block_holders(a, b, on_holder, &l);
    ok(l.n == 3 && listed(&l, HC) == 0 && pa_held_total(a, 0) == 1,
       "holders: 3 left after releasing 2^32-1, holder 0 untouched");
    l.n = 0;
    pa_block_holders(a, 4, on_holder, &l);
    pa_block_holders(a, -1, on_holder, &l);
    ok(l.n == 0, "holders: blocks out of range list nobody");
    is_int(PAGED_E_BLOCK, pa_block_info_get(a, 4, &info), "info of block 4 of 4: PAGED_E_BLOCK");
    check_consistent(a, "holders");
    pa_destroy(a);
}

/* Runs the directed tests. */
int main(void)
{
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    plan_lazy();
    test_create();
    test_exhaustion(&rng);
    test_free_all_or_nothing();
    test_fork();
    test_cow(&rng);
    test_cached_prefix(&rng);
    test_publish(&rng);
    test_tenants(&rng);
    test_evict(&rng);
    test_release_order(&rng);
    test_recent_first(&rng);
    test_release_many(&rng);
    test_holders(&rng);
    return 0;
}
