/* tier-host-t.c: the host tier's index: directed cases, then random operations against a plain reference model. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "daemon/tier/host.h"
#include "tests/tap/basic.h"

#define MAXOUT 64              /* out calls one operation may make in these tests */

/* What out heard, in order. */
typedef struct heard {
    uint32_t n;
    int32_t slot[MAXOUT];
    uint32_t tenant[MAXOUT];
    paged_hash hash[MAXOUT];
} heard;

/* Records one out call in the heard ctx; returns nothing. */
static void record_out(void *ctx, int32_t slot, uint32_t tenant, const paged_hash *hash)
{
    heard *hd = ctx;
    if (hd->n < MAXOUT) {
        hd->slot[hd->n] = slot;
        hd->tenant[hd->n] = tenant;
        hd->hash[hd->n] = *hash;
    }
    hd->n++;
}

/* Returns the i-th test key's hash. */
static paged_hash key_hash(uint32_t i)
{
    return (paged_hash) { 0x1000 + i, ~(uint64_t) i };
}

/* Reports pt_host_check's verdict on h. */
static void check_consistent(const pt_host *h, const char *where)
{
    const char *problem = pt_host_check(h);
    if (!ok(problem == NULL, "%s: pt_host_check finds the index consistent", where))
        diag("%s", problem);
}

/* Returns whether h's counts are free, stored, taken. */
static int counts_are(const pt_host *h, uint32_t nfree, uint32_t stored, uint32_t taken)
{
    pt_host_counts c;
    pt_host_get_counts(h, &c);
    return c.free == nfree && c.stored == stored && c.taken == taken && c.capacity == nfree + stored + taken;
}

/* Returns whether the heard record holds exactly keys[0..n) (tenant t), in that order. */
static int heard_keys(const heard *hd, uint32_t t, const uint32_t *keys, uint32_t n)
{
    if (hd->n != n)
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        paged_hash want = key_hash(keys[i]);
        if (hd->tenant[i] != t || hd->hash[i].lo != want.lo || hd->hash[i].hi != want.hi)
            return 0;
    }
    return 1;
}

/* Put, find, bump and the LRU order of the units a full index pushes out. */
static void test_put_find_push(void)
{
    pt_host *h = pt_host_create(4);
    int32_t slot[6];
    int fresh = -1, all_fresh = 1;
    for (uint32_t i = 0; i < 4; i++) {
        paged_hash k = key_hash(i);
        slot[i] = pt_host_put(h, 7, &k, 10 * (i + 1), &fresh, NULL, NULL);
        all_fresh &= fresh == 1 && slot[i] >= 0 && slot[i] < 4;
    }
    ok(all_fresh && slot[0] != slot[1] && slot[1] != slot[2] && slot[2] != slot[3] && slot[0] != slot[3],
       "put: four keys take four distinct slots, each fresh");
    ok(counts_are(h, 0, 4, 0), "put: 0 free, 4 stored");
    check_consistent(h, "put");
    paged_hash k2 = key_hash(2), k9 = key_hash(9);
    is_int(slot[2], pt_host_find(h, 7, &k2), "find: a stored key gives its slot");
    is_int(-1, pt_host_find(h, 8, &k2), "find: the same hash under another tenant is not found");
    is_int(-1, pt_host_find(h, 7, &k9), "find: an unknown key gives -1");

    paged_hash k0 = key_hash(0);
    is_int(slot[0], pt_host_put(h, 7, &k0, 50, &fresh, NULL, NULL), "put again: the same slot");
    is_int(0, fresh, "put again: not fresh");
    ok(counts_are(h, 0, 4, 0), "put again: counts unchanged");
    check_consistent(h, "put again");

    heard hd = { 0 };
    paged_hash k4 = key_hash(4), k5 = key_hash(5);
    slot[4] = pt_host_put(h, 7, &k4, 60, &fresh, record_out, &hd);
    slot[5] = pt_host_put(h, 7, &k5, 70, &fresh, record_out, &hd);
    uint32_t pushed[] = { 1, 2 };
    ok(heard_keys(&hd, 7, pushed, 2), "push out: keys 1 then 2, the least recently stored, in that order");
    ok(hd.n == 2 && hd.slot[0] == slot[1] && hd.slot[1] == slot[2], "push out: out hears their slots");
    ok(slot[4] == slot[1] && slot[5] == slot[2] && fresh == 1, "push out: the new keys reuse those slots, fresh");
    paged_hash k1 = key_hash(1);
    ok(pt_host_find(h, 7, &k1) == -1 && pt_host_find(h, 7, &k2) == -1, "push out: keys 1 and 2 are gone");
    check_consistent(h, "push out");

    int32_t recent[4];
    is_int(4, (int) pt_host_recent_first(h, recent), "recent_first: the 4 stored listed");
    ok(recent[0] == slot[5] && recent[1] == slot[4] && recent[2] == slot[0] && recent[3] == slot[3],
       "recent_first: most recently stored first (5, 4, 0 bumped at 50, 3)");
    hd.n = 0;
    is_int(4, pt_host_drop_all(h, record_out, &hd), "drop_all: drops the 4 stored");
    uint32_t order[] = { 3, 0, 4, 5 };
    ok(heard_keys(&hd, 7, order, 4), "drop_all: oldest first (3, then 0 bumped at 50, then 4, 5)");
    ok(counts_are(h, 4, 0, 0), "drop_all: every slot free");
    check_consistent(h, "drop_all");
    pt_host_destroy(h);
}

/* Take, restore, release, remove and slot_key, restore after the key was stored again
 * included. */
static void test_take_restore(void)
{
    pt_host *h = pt_host_create(3);
    paged_hash k[3] = { key_hash(0), key_hash(1), key_hash(2) };
    int32_t s[3];
    int fresh;
    for (int i = 0; i < 3; i++)
        s[i] = pt_host_put(h, 1, &k[i], 100 + (uint64_t) i, &fresh, NULL, NULL);

    is_int(0, pt_host_take(h, s[0]), "take: a stored slot");
    is_int(-1, pt_host_find(h, 1, &k[0]), "take: its key is no longer found");
    ok(counts_are(h, 0, 2, 1), "take: 2 stored, 1 taken");
    is_int(PAGED_E_INVAL, pt_host_take(h, s[0]), "take: a taken slot is refused");
    is_int(PAGED_E_INVAL, pt_host_take(h, -1), "take: slot -1 is refused");
    is_int(PAGED_E_INVAL, pt_host_take(h, 3), "take: a slot past capacity is refused");
    uint32_t t = 0;
    paged_hash kh = { 0, 0 };
    ok(pt_host_slot_key(h, s[0], &t, &kh) == 0 && t == 1 && kh.lo == k[0].lo && kh.hi == k[0].hi,
       "slot_key: a taken slot keeps its key");
    is_int(PAGED_E_INVAL, pt_host_restore(h, s[1], 200), "restore: a stored slot is refused");
    is_int(PAGED_E_INVAL, pt_host_release(h, s[1]), "release: a stored slot is refused");
    check_consistent(h, "take");

    is_int(0, pt_host_restore(h, s[0], 200), "restore: the taken slot");
    is_int(s[0], pt_host_find(h, 1, &k[0]), "restore: its key leads to it again");
    ok(counts_are(h, 0, 3, 0), "restore: 3 stored");
    ok(pt_host_next_expiry(h, 50) == 101 + 50, "restore: key 1 (stamped 101) is now the oldest");
    check_consistent(h, "restore");

    is_int(0, pt_host_take(h, s[1]), "take again: key 1's slot");
    is_int(0, pt_host_release(h, s[1]), "release: the taken slot");
    ok(counts_are(h, 1, 2, 0), "release: 1 free, 2 stored");
    is_int(PAGED_E_INVAL, pt_host_slot_key(h, s[1], &t, &kh), "slot_key: a free slot is refused");
    is_int(PAGED_E_INVAL, pt_host_release(h, s[1]), "release: a free slot is refused");
    check_consistent(h, "release");

    /* Key 2 taken, then stored again in the free slot: restoring the taken one frees it. */
    is_int(0, pt_host_take(h, s[2]), "stored again: key 2's slot taken");
    int32_t again = pt_host_put(h, 1, &k[2], 300, &fresh, NULL, NULL);
    ok(again == s[1] && fresh == 1, "stored again: key 2 goes to the free slot, fresh");
    check_consistent(h, "stored again");
    is_int(0, pt_host_restore(h, s[2], 310), "stored again: restore succeeds");
    is_int(again, pt_host_find(h, 1, &k[2]), "stored again: the key still leads to the newer slot");
    ok(counts_are(h, 1, 2, 0), "stored again: the restored slot went to the free list");
    is_int(PAGED_E_INVAL, pt_host_slot_key(h, s[2], &t, &kh), "stored again: the restored slot is free");
    check_consistent(h, "restore after stored again");

    heard hd = { 0 };
    is_int(1, pt_host_remove(h, 1, &k[2]), "remove: a stored key");
    is_int(0, pt_host_remove(h, 1, &k[2]), "remove: again, nothing");
    is_int(-1, pt_host_find(h, 1, &k[2]), "remove: the key is gone");
    ok(counts_are(h, 2, 1, 0), "remove: its slot is free");
    is_int(0, (long long) hd.n, "remove: out not involved");
    check_consistent(h, "remove");
    pt_host_destroy(h);
}

/* Time to live: next_expiry from the oldest, expire drops exactly those at or past it,
 * oldest first. */
static void test_expire(void)
{
    pt_host *h = pt_host_create(8);
    int fresh;
    for (uint32_t i = 0; i < 5; i++) {
        paged_hash k = key_hash(i);
        pt_host_put(h, 2, &k, 1000 + 100 * (uint64_t) i, &fresh, NULL, NULL);
    }
    heard hd = { 0 };
    is_int((long long) UINT64_MAX, (long long) pt_host_next_expiry(h, 0), "next_expiry: ttl 0 never");
    ok(pt_host_next_expiry(h, 500) == 1500, "next_expiry: the oldest's stamp plus ttl");
    is_int(0, pt_host_expire(h, 1000000, 0, record_out, &hd), "expire: ttl 0 drops nothing");
    is_int(0, pt_host_expire(h, 1499, 500, record_out, &hd), "expire: a nanosecond early, nothing");
    is_int(2, pt_host_expire(h, 1600, 500, record_out, &hd), "expire: at 1600 with ttl 500, the two stamped <= 1100");
    uint32_t gone[] = { 0, 1 };
    ok(heard_keys(&hd, 2, gone, 2), "expire: out hears keys 0 then 1");
    ok(counts_are(h, 5, 3, 0), "expire: 3 left stored");
    ok(pt_host_next_expiry(h, 500) == 1700, "expire: next_expiry moves to the new oldest");
    ok(pt_host_next_expiry(h, UINT64_MAX) == UINT64_MAX, "next_expiry: saturates instead of wrapping");
    check_consistent(h, "expire");
    paged_hash k2 = key_hash(2);
    pt_host_put(h, 2, &k2, 1700, &fresh, NULL, NULL);
    hd.n = 0;
    is_int(1, pt_host_expire(h, 1800, 500, record_out, &hd), "expire after a bump: at 1800, only key 3 (1300) is old");
    uint32_t only3[] = { 3 };
    ok(heard_keys(&hd, 2, only3, 1), "expire after a bump: key 2 was restamped");
    check_consistent(h, "expire after a bump");
    pt_host_destroy(h);
}

/* Capacity 0, and an index whose every slot is taken: put gives -1 and changes nothing. */
static void test_no_room(void)
{
    heard hd = { 0 };
    int fresh = -1;
    paged_hash k = key_hash(0), k1 = key_hash(1);
    pt_host *h = pt_host_create(0);
    ok(h != NULL, "capacity 0: created");
    is_int(-1, pt_host_put(h, 0, &k, 1, &fresh, record_out, &hd), "capacity 0: put gives -1");
    ok(fresh == 0 && hd.n == 0, "capacity 0: not fresh, out not called");
    ok(counts_are(h, 0, 0, 0), "capacity 0: all counts 0");
    is_int(-1, pt_host_find(h, 0, &k), "capacity 0: nothing found");
    is_int(PAGED_E_INVAL, pt_host_take(h, 0), "capacity 0: slot 0 does not exist");
    is_int(0, pt_host_drop_all(h, record_out, &hd), "capacity 0: drop_all drops nothing");
    ok(pt_host_next_expiry(h, 10) == UINT64_MAX, "capacity 0: nothing expires");
    check_consistent(h, "capacity 0");
    pt_host_destroy(h);

    h = pt_host_create(2);
    int32_t a = pt_host_put(h, 0, &k, 1, &fresh, NULL, NULL);
    int32_t b = pt_host_put(h, 0, &k1, 2, &fresh, NULL, NULL);
    pt_host_take(h, a);
    pt_host_take(h, b);
    paged_hash k2 = key_hash(2);
    fresh = -1;
    is_int(-1, pt_host_put(h, 0, &k2, 3, &fresh, record_out, &hd), "all taken: put gives -1");
    ok(fresh == 0 && hd.n == 0, "all taken: not fresh, out not called");
    ok(counts_are(h, 0, 0, 2) && pt_host_find(h, 0, &k2) == -1, "all taken: nothing changed");
    check_consistent(h, "all taken");
    is_int(0, pt_host_restore(h, a, 4), "all taken: restore one");
    is_int(a, pt_host_put(h, 0, &k2, 5, &fresh, record_out, &hd), "one restored: put pushes it out");
    ok(hd.n == 1 && hd.slot[0] == a && hd.hash[0].lo == k.lo, "one restored: out heard the restored key");
    check_consistent(h, "one restored");
    pt_host_destroy(h);
    pt_host_destroy(NULL);
}

/* ---- The model run. */

#define M_CAP 16
#define M_KEYS 40              /* keys in play: 2.5 times the slots */
#define M_OPS 20000
#define M_THOROUGH_EVERY 128
#define M_SEED 20240601u

enum { M_FREE, M_STORED, M_TAKEN };

/* The reference: each slot's state, key (an index into the key list), stamp and recency. */
typedef struct model {
    int state[M_CAP];
    uint32_t key[M_CAP];
    uint64_t stamp[M_CAP];
    uint64_t seq[M_CAP];       /* larger: stored or bumped later */
    uint64_t next_seq;
} model;

/* The invariant families, one TAP line each. */
enum family { F_RESULT, F_OUT, F_COUNTS, F_FIND, F_SLOTKEY, F_EXPIRY, F_CHECK, F_COUNT };
static const char *const family_what[F_COUNT] = {
    "return values and slots match the model",
    "out hears exactly the model's victims, oldest first, with their slots and keys",
    "free, stored and taken counts match the model after every operation",
    "find agrees with the model for every key",
    "slot_key agrees with the model for every slot",
    "next_expiry agrees with the model",
    "pt_host_check finds the index consistent",
};
static unsigned long failures[F_COUNT];

/* Records a failure of family f, printing the first few; returns nothing. */
__attribute__((format(printf, 3, 4)))
static void fail(enum family f, uint32_t op, const char *fmt, ...)
{
    if (failures[f]++ >= 5)
        return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag("op %" PRIu32 ": %s", op, msg);
}

/* The key list: tenants and hashes from the extremes too. */
static uint32_t m_tenant(uint32_t key)
{
    static const uint32_t tenants[] = { 0, 1, 0xffffffffu, 1000 };
    return tenants[key % 4];
}
/* Returns the hash of key index key. */
static paged_hash m_hash(uint32_t key)
{
    return (paged_hash) { key / 4 * 0x9e3779b97f4a7c15ull, key / 4 == 3 ? UINT64_MAX : key / 4 };
}

/* Returns the model's slot storing key, or -1. */
static int32_t m_find(const model *m, uint32_t key)
{
    for (int32_t s = 0; s < M_CAP; s++)
        if (m->state[s] == M_STORED && m->key[s] == key)
            return s;
    return -1;
}

/* Returns the model's least recently stored slot, or -1. */
static int32_t m_oldest(const model *m)
{
    int32_t best = -1;
    for (int32_t s = 0; s < M_CAP; s++)
        if (m->state[s] == M_STORED && (best < 0 || m->seq[s] < m->seq[best]))
            best = s;
    return best;
}

/* Makes a model slot stored with key, stamped now, most recent; returns nothing. */
static void m_store(model *m, int32_t s, uint32_t key, uint64_t now)
{
    m->state[s] = M_STORED;
    m->key[s] = key;
    m->stamp[s] = now;
    m->seq[s] = ++m->next_seq;
}

/* Returns whether out heard exactly slot s of the model with its key as call i. */
static int heard_slot(const heard *hd, uint32_t i, const model *m, int32_t s)
{
    paged_hash want = m_hash(m->key[s]);
    return i < hd->n && i < MAXOUT && hd->slot[i] == s && hd->tenant[i] == m_tenant(m->key[s]) &&
           hd->hash[i].lo == want.lo && hd->hash[i].hi == want.hi;
}

/* Drops the model's stored slots oldest first while they are expired under ttl at now (all
 * of them when all is set), checking out's calls; returns how many. */
static uint32_t m_drop(model *m, uint64_t now, uint64_t ttl, int all, const heard *hd, uint32_t op)
{
    uint32_t n = 0;
    for (;;) {
        int32_t s = m_oldest(m);
        if (s < 0 || (!all && (ttl == 0 || now - m->stamp[s] < ttl)))
            break;
        if (!heard_slot(hd, n, m, s))
            fail(F_OUT, op, "out call %" PRIu32 " is not slot %" PRId32 "'s key", n, s);
        m->state[s] = M_FREE;
        n++;
    }
    if (hd->n != n)
        fail(F_OUT, op, "out heard %" PRIu32 " units, the model dropped %" PRIu32, hd->n, n);
    return n;
}

/* Compares the counts; returns nothing. */
static void compare_counts(const pt_host *h, const model *m, uint32_t op)
{
    uint32_t want[3] = { 0, 0, 0 };
    for (int s = 0; s < M_CAP; s++)
        want[m->state[s]]++;
    if (!counts_are(h, want[M_FREE], want[M_STORED], want[M_TAKEN]))
        fail(F_COUNTS, op, "counts differ from %" PRIu32 "/%" PRIu32 "/%" PRIu32, want[0], want[1], want[2]);
}

/* Compares every key's find, every slot's key and pt_host_check; returns nothing. */
static void compare_all(const pt_host *h, const model *m, uint32_t op)
{
    for (uint32_t k = 0; k < M_KEYS; k++) {
        paged_hash hash = m_hash(k);
        if (pt_host_find(h, m_tenant(k), &hash) != m_find(m, k))
            fail(F_FIND, op, "find of key %" PRIu32 " differs", k);
    }
    for (int32_t s = -1; s <= M_CAP; s++) {
        uint32_t t;
        paged_hash hash;
        int rc = pt_host_slot_key(h, s, &t, &hash);
        int valid = s >= 0 && s < M_CAP && m->state[s] != M_FREE;
        paged_hash want = valid ? m_hash(m->key[s]) : (paged_hash) { 0, 0 };
        if (valid ? rc != 0 || t != m_tenant(m->key[s]) || hash.lo != want.lo || hash.hi != want.hi
                  : rc != PAGED_E_INVAL)
            fail(F_SLOTKEY, op, "slot_key of slot %" PRId32 " differs", s);
    }
    const char *problem = pt_host_check(h);
    if (problem != NULL)
        fail(F_CHECK, op, "%s", problem);
}

/* Runs one random operation on h and the model; returns nothing. */
static void model_step(pt_host *h, model *m, tap_rng *rng, uint64_t now, uint32_t op)
{
    heard hd = { 0 };
    uint32_t key = (uint32_t) tap_rng_below(rng, M_KEYS);
    paged_hash hash = m_hash(key);
    int32_t slot = (int32_t) tap_rng_below(rng, M_CAP + 2) - 1;   /* -1 .. M_CAP */
    int valid = slot >= 0 && slot < M_CAP;
    uint64_t ttl = tap_rng_below(rng, 4) == 0 ? 0 : tap_rng_below(rng, 40);
    int fresh = -1;
    switch (tap_rng_below(rng, 20)) {
    case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7: {
        int32_t got = pt_host_put(h, m_tenant(key), &hash, now, &fresh, record_out, &hd);
        int32_t had = m_find(m, key);
        if (had >= 0) {
            if (got != had || fresh != 0 || hd.n != 0)
                fail(F_RESULT, op, "put of stored key %" PRIu32 ": slot %" PRId32 " fresh %d", key, got, fresh);
            m->stamp[had] = now;
            m->seq[had] = ++m->next_seq;
            break;
        }
        int any_free = 0;
        for (int s = 0; s < M_CAP; s++)
            any_free |= m->state[s] == M_FREE;
        int32_t victim = any_free ? -1 : m_oldest(m);
        if (!any_free && victim < 0) {
            if (got != -1 || fresh != 0 || hd.n != 0)
                fail(F_RESULT, op, "put with every slot taken gave %" PRId32, got);
            break;
        }
        if (victim >= 0 && (hd.n != 1 || !heard_slot(&hd, 0, m, victim)))
            fail(F_OUT, op, "put pushed out the wrong unit (model: slot %" PRId32 ")", victim);
        if (victim < 0 && hd.n != 0)
            fail(F_OUT, op, "put with a free slot called out");
        if (got < 0 || got >= M_CAP || fresh != 1 || (victim >= 0 ? got != victim : m->state[got] != M_FREE)) {
            fail(F_RESULT, op, "put of key %" PRIu32 " gave slot %" PRId32 " fresh %d", key, got, fresh);
            break;
        }
        m_store(m, got, key, now);
        break;
    }
    case 8: case 9: case 10: {
        int want = valid && m->state[slot] == M_STORED ? 0 : PAGED_E_INVAL;
        if (pt_host_take(h, slot) != want)
            fail(F_RESULT, op, "take of slot %" PRId32, slot);
        if (want == 0)
            m->state[slot] = M_TAKEN;
        break;
    }
    case 11: case 12: {
        int want = valid && m->state[slot] == M_TAKEN ? 0 : PAGED_E_INVAL;
        if (pt_host_restore(h, slot, now) != want)
            fail(F_RESULT, op, "restore of slot %" PRId32, slot);
        if (want == 0 && m_find(m, m->key[slot]) >= 0)
            m->state[slot] = M_FREE;
        else if (want == 0)
            m_store(m, slot, m->key[slot], now);
        break;
    }
    case 13: case 14: {
        int want = valid && m->state[slot] == M_TAKEN ? 0 : PAGED_E_INVAL;
        if (pt_host_release(h, slot) != want)
            fail(F_RESULT, op, "release of slot %" PRId32, slot);
        if (want == 0)
            m->state[slot] = M_FREE;
        break;
    }
    case 15: case 16: {
        int32_t had = m_find(m, key);
        if (pt_host_remove(h, m_tenant(key), &hash) != (had >= 0))
            fail(F_RESULT, op, "remove of key %" PRIu32, key);
        if (had >= 0)
            m->state[had] = M_FREE;
        break;
    }
    case 17: case 18: {
        int32_t oldest = m_oldest(m);
        uint64_t want = ttl == 0 || oldest < 0 ? UINT64_MAX : m->stamp[oldest] + ttl;
        if (pt_host_next_expiry(h, ttl) != want)
            fail(F_EXPIRY, op, "next_expiry under ttl %" PRIu64, ttl);
        uint32_t got = pt_host_expire(h, now, ttl, record_out, &hd);
        if (got != m_drop(m, now, ttl, 0, &hd, op))
            fail(F_RESULT, op, "expire under ttl %" PRIu64 " returned %" PRIu32, ttl, got);
        break;
    }
    default:
        if (tap_rng_below(rng, 10) != 0)
            break;
        uint32_t got = pt_host_drop_all(h, record_out, &hd);
        if (got != m_drop(m, now, 0, 1, &hd, op))
            fail(F_RESULT, op, "drop_all returned %" PRIu32, got);
        break;
    }
    compare_counts(h, m, op);
}

/* 20000 random operations against the model, with a fixed seed. */
static void test_model(void)
{
    tap_rng rng;
    tap_rng_seed(&rng, M_SEED);
    diag("model: seed %u, %d slots, %d keys, %d operations", M_SEED, M_CAP, M_KEYS, M_OPS);
    pt_host *h = pt_host_create(M_CAP);
    model m;
    memset(&m, 0, sizeof m);
    uint64_t now = 1;
    for (uint32_t op = 0; op < M_OPS; op++) {
        now += tap_rng_below(&rng, 4);
        model_step(h, &m, &rng, now, op);
        if (op % M_THOROUGH_EVERY == 0 || op == M_OPS - 1)
            compare_all(h, &m, op);
    }
    pt_host_destroy(h);
    for (int f = 0; f < F_COUNT; f++)
        ok(failures[f] == 0, "model: %s (%lu failures)", family_what[f], failures[f]);
}

/* Runs the cases. */
int main(void)
{
    plan_lazy();
    test_put_find_push();
    test_take_restore();
    test_expire();
    test_no_room();
    test_model();
    return 0;
}
