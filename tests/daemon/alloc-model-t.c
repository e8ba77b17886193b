/* alloc-model-t.c: the block allocator against a plain reference model over random operations, pins and ttl too. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "daemon/alloc/alloc.h"
#include "tests/tap/basic.h"

#define MAXN 256               /* largest pool */
#define NUNIV (2 * MAXN)       /* keys that can be published: a pool's worth, twice */
#define NHOLD 7
#define MAXARR 8               /* elements of a FREE, FORK, PUBLISH or LOOKUP array */
#define PHASES 2
#define OPS_PER_PHASE 500000
#define THOROUGH_EVERY 256     /* ops between checks of every block and every structure */

/* Client ids: small, large and sparse, the extremes of uint32_t included. */
static const uint32_t holder_ids[NHOLD] = {
    0, 1, 42, 1000003, 0x7fffffffu, 0xdeadbeefu, 0xffffffffu,
};

enum { M_FREE, M_REF, M_CACHED, M_PINNED };

/* Pinners: uid-like ids, one of them root's. */
#define NPIN 3
static const uint32_t pinner_ids[NPIN] = { 0, 1000, 1001 };

/* The allocator's clock in these runs: one tick per operation. */
static uint64_t fake_now;

/* Returns the runs' clock. */
static uint64_t fake_clock(void)
{
    return fake_now;
}

/* The invariant families, one TAP line each. */
enum family {
    F_RESULT, F_COUNTS, F_REFCOUNT, F_HELD, F_EVICT, F_LOOKUP, F_ERROR, F_WRITABLE,
    F_PUBLISHED, F_INTERNAL, F_COUNT
};

static const char *const family_what[F_COUNT] = {
    "return codes, bad indices and returned block ids match the model",
    "free + referenced + cached == N, and every counter matches the model",
    "each block's refcount equals the sum of its holders' references (and its holder list)",
    "pa_held, pa_held_total and pa_first_unheld match the model for every holder",
    "evictions take the model's least recently used block first, with its hash, only when short",
    "no lookup returns an evicted or unpublished block",
    "an operation that fails changes nothing",
    "pa_writable (the copy-on-write decision) matches the model",
    "published state, hashes, tenants and pins match the model",
    "pa_check finds every internal structure consistent",
};

/*
 * The reference model: plain arrays, every operation done the obvious way. The LRU is an
 * array in order, least recently used first; a (holder, block) pair remembers when it was
 * first taken so that a release can be replayed newest first.
 */
typedef struct model {
    uint32_t n;
    uint8_t state[MAXN];
    int32_t hash_of[MAXN];            /* universe index while published, else -1 */
    uint32_t refcount[MAXN];
    uint32_t held[NHOLD][MAXN];
    uint64_t since[NHOLD][MAXN];      /* when the pair went from 0 to 1 reference */
    uint32_t total[NHOLD];
    int32_t block_of[NUNIV];          /* the block published under a universe hash, or -1 */
    int32_t lru[MAXN];
    uint32_t nlru;
    uint64_t stamp[MAXN];             /* the clock when it went on the LRU */
    uint8_t pinned[MAXN];
    uint32_t pinner[MAXN];            /* pinner_ids index while pinned */
    uint32_t pinned_by[NPIN];
    uint32_t npinned, npin_idle;
    uint32_t nfree;
    uint64_t clock;
    uint64_t evictions, lookups, hits;
} model;

/* One run: the allocator, its model, the hashes, what the hook saw, what went wrong. */
typedef struct run {
    pa_alloc *a;
    model m;
    paged_hash univ[NUNIV];
    uint32_t nuniv;
    int32_t ev_block[MAXN + 1];
    paged_hash ev_hash[MAXN + 1];
    uint32_t nev;
    bool ev_overflow;
    tap_rng rng;
    uint64_t seed;
    uint64_t op;                      /* operations so far, over all phases */
    bool op_failed;                   /* the current operation returned an error */
    int32_t touched[4 * MAXN];
    uint32_t ntouched;
    bool stop;
    bool failed[F_COUNT];
    char first[F_COUNT][320];
    uint64_t errors, nospc, releases, evict_alls, writable_yes, thorough_checks;
    uint64_t pins, unpins, prefix_evictions, expiries;
    bool may_evict;                   /* the current operation may call the eviction hook */
    double free_share, cached_share;  /* summed over operations, for the diagnostic */
} run;

/* Records a failure of family f (or of F_ERROR inside a failed operation when state is
 * compared); keeps the first message per family and stops the run, since the model has
 * diverged. Returns 0 for use in conditions. */
static int TAP_PRINTF(3, 4) fail(run *r, enum family f, const char *fmt, ...)
{
    if (!r->failed[f]) {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        r->failed[f] = true;
        snprintf(r->first[f], sizeof r->first[f], "op %" PRIu64 " (seed %" PRIu64 "): %s",
                 r->op, r->seed, msg);
    }
    r->stop = true;
    return 0;
}

/* Returns the family a state mismatch belongs to: F_ERROR if the operation failed. */
static enum family state_family(const run *r, enum family f)
{
    return r->op_failed ? F_ERROR : f;
}

/* Returns whether two hashes are equal. */
static bool hash_eq(const paged_hash *x, const paged_hash *y)
{
    return x->lo == y->lo && x->hi == y->hi;
}

/* The eviction hook: records the block and hash in the run. */
static void on_evict(void *ctx, int32_t block, uint32_t tenant, const paged_hash *hash)
{
    (void) tenant;
    run *r = ctx;
    if (r->nev > MAXN) {
        r->ev_overflow = true;
        return;
    }
    r->ev_block[r->nev] = block;
    r->ev_hash[r->nev] = *hash;
    r->nev++;
}

/* Notes a block whose state the per-operation check must compare. */
static void touch(run *r, int32_t b)
{
    if (b >= 0 && (uint32_t) b < r->m.n && r->ntouched < sizeof r->touched / sizeof r->touched[0])
        r->touched[r->ntouched++] = b;
}

/* Fills the hash universe with distinct random hashes, some of them sharing their low half,
 * their high half, or all but one bit. */
static void make_universe(run *r)
{
    r->nuniv = 2 * r->m.n;
    for (uint32_t i = 0; i < r->nuniv; i++) {
        r->univ[i].lo = tap_rng_u64(&r->rng);
        r->univ[i].hi = tap_rng_u64(&r->rng);
        if (i > 0 && i % 7 == 0)
            r->univ[i].lo = r->univ[i - 1].lo;
        else if (i > 0 && i % 11 == 0)
            r->univ[i].hi = r->univ[i - 1].hi;
        else if (i > 0 && i % 13 == 0)
            r->univ[i] = (paged_hash) { r->univ[i - 1].lo ^ (1ull << 62), r->univ[i - 1].hi };
        else if (i > 0 && i % 17 == 0)
            r->univ[i] = (paged_hash) { r->univ[i - 1].lo, r->univ[i - 1].hi ^ 1 };
    }
    for (uint32_t i = 0; i < r->nuniv; i++)
        for (uint32_t j = 0; j < i; j++)
            if (hash_eq(&r->univ[i], &r->univ[j]))
                bail("hash universe has a duplicate (seed %" PRIu64 ")", r->seed);
}

/* The universe's keys are (tenant, hash) pairs: key u is hash u / 2 in tenant u % 2, so every
 * hash can be published once per tenant. Returns key u's hash. */
static const paged_hash *key_hash(const run *r, uint32_t u)
{
    return &r->univ[u / 2];
}

/* Returns key u's tenant (a uid-like number, never zero). */
static uint32_t key_tenant(uint32_t u)
{
    return 1000 + u % 2;
}

/* ---- the model ------------------------------------------------------------------------- */

/* Sets up an empty model of n blocks. */
static void model_init(model *m, uint32_t n)
{
    memset(m, 0, sizeof *m);
    m->n = n;
    m->nfree = n;
    for (uint32_t b = 0; b < MAXN; b++)
        m->hash_of[b] = -1;
    for (uint32_t u = 0; u < NUNIV; u++)
        m->block_of[u] = -1;
}

/* Adds one reference of holder slot h to block b. */
static void model_add_ref(model *m, int h, int32_t b)
{
    if (m->held[h][b]++ == 0)
        m->since[h][b] = ++m->clock;
    m->refcount[b]++;
    m->total[h]++;
    m->state[b] = M_REF;
}

/* Puts cached block b at the LRU's recent end, stamped now. */
static void model_lru_push(model *m, int32_t b)
{
    m->state[b] = M_CACHED;
    m->stamp[b] = fake_now;
    m->lru[m->nlru++] = b;
}

/* Moves block b, whose last reference went, aside (pinned), to the LRU's recent end or to
 * the free set. */
static void model_unreferenced(model *m, int32_t b)
{
    if (m->pinned[b]) {
        m->state[b] = M_PINNED;
        m->npin_idle++;
    } else if (m->hash_of[b] >= 0) {
        model_lru_push(m, b);
    } else {
        m->state[b] = M_FREE;
        m->nfree++;
    }
}

/* Takes block b off the LRU array. */
static void model_lru_remove(model *m, int32_t b)
{
    uint32_t i = 0;
    while (i < m->nlru && m->lru[i] != b)
        i++;
    if (i == m->nlru)
        bail("model: block %d is not in its LRU", b);
    memmove(&m->lru[i], &m->lru[i + 1], (m->nlru - i - 1) * sizeof m->lru[0]);
    m->nlru--;
}

/* Evicts the least recently used cached block; returns it. */
static int32_t model_evict(model *m)
{
    int32_t b = m->lru[0];
    model_lru_remove(m, b);
    m->block_of[m->hash_of[b]] = -1;
    m->hash_of[b] = -1;
    m->state[b] = M_FREE;
    m->nfree++;
    m->evictions++;
    return b;
}

/* ---- checks ---------------------------------------------------------------------------- */

/* Compares one block's state, references and publication with the model. */
static void check_block(run *r, int32_t b)
{
    const model *m = &r->m;
    pa_block_info info;
    if (pa_block_info_get(r->a, b, &info) != 0) {
        fail(r, F_RESULT, "pa_block_info_get(%d) failed for a block in range", b);
        return;
    }
    uint64_t sum = 0;
    uint32_t nh = 0;
    for (int h = 0; h < NHOLD; h++) {
        uint32_t got = pa_held(r->a, holder_ids[h], b);
        if (got != m->held[h][b])
            fail(r, state_family(r, F_HELD), "pa_held(holder %" PRIu32 ", block %d) = %" PRIu32
                 ", model %" PRIu32, holder_ids[h], b, got, m->held[h][b]);
        sum += got;
        nh += got > 0;
    }
    if ((info.pinned != 0) != (m->pinned[b] != 0) || (m->pinned[b] && info.pinner != pinner_ids[m->pinner[b]]))
        fail(r, state_family(r, F_PUBLISHED), "block %d pinned %d by %" PRIu32 ", model %d by %" PRIu32, b,
             info.pinned, info.pinner, m->pinned[b], pinner_ids[m->pinner[b]]);
    if (info.refcount != sum)
        fail(r, F_REFCOUNT, "block %d refcount %" PRIu32 " but its holders hold %" PRIu64,
             b, info.refcount, sum);
    if (info.refcount != m->refcount[b] || info.holders != nh)
        fail(r, state_family(r, F_REFCOUNT), "block %d refcount %" PRIu32 " holders %" PRIu32
             ", model %" PRIu32 " and %" PRIu32, b, info.refcount, info.holders,
             m->refcount[b], nh);
    bool pub = m->hash_of[b] >= 0;
    if ((info.published != 0) != pub
        || (pub && (!hash_eq(&info.hash, key_hash(r, (uint32_t) m->hash_of[b]))
                    || info.tenant != key_tenant((uint32_t) m->hash_of[b]))))
        fail(r, state_family(r, F_PUBLISHED), "block %d published %d, model %d (or another hash or tenant)",
             b, info.published, pub);
}

/* Compares the counters and every holder's total with the model; the cheap check of every op. */
static void check_counts(run *r)
{
    const model *m = &r->m;
    pa_counts c;
    pa_get_counts(r->a, &c);
    if ((uint64_t) c.free + c.referenced + c.cached != m->n)
        fail(r, F_COUNTS, "free %" PRIu32 " + referenced %" PRIu32 " + cached %" PRIu32
             " != %" PRIu32, c.free, c.referenced, c.cached, m->n);
    if (c.free != m->nfree || c.cached != m->nlru + m->npin_idle || c.pinned != m->npinned)
        fail(r, state_family(r, F_COUNTS), "free %" PRIu32 " cached %" PRIu32 " pinned %" PRIu32 ", model %"
             PRIu32 ", %" PRIu32 " and %" PRIu32, c.free, c.cached, c.pinned, m->nfree, m->nlru + m->npin_idle,
             m->npinned);
    for (int i = 0; i < NPIN; i++)
        if (pa_pinned_by(r->a, pinner_ids[i]) != m->pinned_by[i])
            fail(r, state_family(r, F_COUNTS), "pa_pinned_by(%" PRIu32 ") = %" PRIu32 ", model %" PRIu32,
                 pinner_ids[i], pa_pinned_by(r->a, pinner_ids[i]), m->pinned_by[i]);
    if (c.evictions != m->evictions || c.lookups != m->lookups || c.lookup_hits != m->hits)
        fail(r, state_family(r, F_COUNTS), "evictions %" PRIu64 " lookups %" PRIu64 " hits %"
             PRIu64 ", model %" PRIu64 ", %" PRIu64 ", %" PRIu64, c.evictions, c.lookups,
             c.lookup_hits, m->evictions, m->lookups, m->hits);
    for (int h = 0; h < NHOLD; h++) {
        uint32_t got = pa_held_total(r->a, holder_ids[h]);
        if (got != m->total[h])
            fail(r, state_family(r, F_HELD), "pa_held_total(%" PRIu32 ") = %" PRIu32
                 ", model %" PRIu32, holder_ids[h], got, m->total[h]);
    }
}

/* What pa_block_holders reported for one block. */
typedef struct listing {
    run *r;
    int32_t block;
    uint32_t entries;
    uint64_t refs;
    bool wrong;
} listing;

/* Collects one holder of a listing, checking it against the model. */
static void on_holder(void *ctx, uint32_t holder, uint32_t refs)
{
    listing *l = ctx;
    int h = 0;
    while (h < NHOLD && holder_ids[h] != holder)
        h++;
    if (h == NHOLD || l->r->m.held[h][l->block] != refs)
        l->wrong = true;
    l->entries++;
    l->refs += refs;
}

/* Asks pa_first_unheld, for every holder, about an array of every block in a random order
 * with an out-of-range id at a random place, and compares the answer with the model's first
 * block the holder does not reference. Returns nothing. */
static void check_first_unheld(run *r)
{
    const model *m = &r->m;
    int32_t ids[MAXN + 1];
    uint32_t n = m->n;
    for (uint32_t i = 0; i < n; i++)
        ids[i] = (int32_t) i;
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = (uint32_t) tap_rng_below(&r->rng, i);
        int32_t t = ids[i - 1];
        ids[i - 1] = ids[j];
        ids[j] = t;
    }
    uint32_t bad_at = (uint32_t) tap_rng_below(&r->rng, n + 1);
    memmove(ids + bad_at + 1, ids + bad_at, (size_t) (n - bad_at) * sizeof *ids);
    ids[bad_at] = tap_rng_below(&r->rng, 2) ? -1 : (int32_t) n;
    for (int h = 0; h < NHOLD; h++) {
        uint32_t want = 0;
        while (want < n + 1 && ids[want] >= 0 && ids[want] < (int32_t) n && m->held[h][ids[want]] != 0)
            want++;
        uint32_t got = pa_first_unheld(r->a, holder_ids[h], ids, n + 1);
        if (got != want)
            fail(r, state_family(r, F_HELD), "pa_first_unheld(holder %" PRIu32 ") = %" PRIu32
                 ", model %" PRIu32, holder_ids[h], got, want);
    }
}

/* Compares every block, its holder listing and the internal structures with the model. */
static void check_thorough(run *r)
{
    for (uint32_t b = 0; b < r->m.n && !r->stop; b++) {
        check_block(r, (int32_t) b);
        listing l = { .r = r, .block = (int32_t) b };
        pa_block_holders(r->a, (int32_t) b, on_holder, &l);
        if (l.wrong || l.refs != r->m.refcount[b])
            fail(r, F_REFCOUNT, "pa_block_holders(%" PRIu32 ") lists %" PRIu32 " holders with %"
                 PRIu64 " references, model refcount %" PRIu32, b, l.entries, l.refs,
                 r->m.refcount[b]);
    }
    check_first_unheld(r);
    /* A new seed moves every index entry; what is found under which key must not change. */
    if (tap_rng_below(&r->rng, 4) == 0)
        pa_set_index_seed(r->a, tap_rng_u64(&r->rng));
    const char *problem = pa_check(r->a);
    if (problem != NULL)
        fail(r, F_INTERNAL, "pa_check: %s", problem);
    r->thorough_checks++;
}

/* ---- operations ------------------------------------------------------------------------ */

/* Returns a random block held by holder slot h, or any block when h holds none. */
static int32_t pick_held(run *r, int h)
{
    uint32_t start = (uint32_t) tap_rng_below(&r->rng, r->m.n);
    for (uint32_t i = 0; i < r->m.n; i++) {
        uint32_t b = (start + i) % r->m.n;
        if (r->m.held[h][b] > 0)
            return (int32_t) b;
    }
    return (int32_t) start;
}

/* Returns a block id outside the pool. */
static int32_t pick_out_of_range(run *r)
{
    switch (tap_rng_below(&r->rng, 5)) {
    case 0: return -1;
    case 1: return INT32_MIN;
    case 2: return INT32_MAX;
    case 3: return (int32_t) r->m.n;
    default: return (int32_t) (r->m.n + tap_rng_below(&r->rng, 100000));
    }
}

/* Fills ids[0..len) with distinct blocks held by h (a random block if it holds none), now
 * and then a repeat or one bad element (out of range, not held, or repeated to the end, which
 * frees more than is held); returns len. */
static uint32_t pick_ids(run *r, int h, int32_t *ids)
{
    int32_t held[MAXN];
    uint32_t nheld = 0;
    for (uint32_t b = 0; b < r->m.n; b++)
        if (r->m.held[h][b] > 0)
            held[nheld++] = (int32_t) b;
    uint32_t len = 1 + (uint32_t) tap_rng_below(&r->rng, MAXARR - 1);
    if (nheld == 0) {
        held[nheld++] = (int32_t) tap_rng_below(&r->rng, r->m.n);
        len = 1;
    } else if (len > nheld) {
        len = nheld;
    }
    for (uint32_t i = 0; i < len; i++) {
        /* A partial Fisher-Yates shuffle: distinct picks without replacement. */
        uint32_t j = i + (uint32_t) tap_rng_below(&r->rng, nheld - i);
        int32_t t = held[i];
        held[i] = held[j];
        held[j] = t;
        ids[i] = tap_rng_below(&r->rng, 32) == 0 && i > 0 ? ids[tap_rng_below(&r->rng, i)] : held[i];
    }
    if (tap_rng_below(&r->rng, 8) == 0) {
        uint32_t at = (uint32_t) tap_rng_below(&r->rng, len);
        switch (tap_rng_below(&r->rng, 3)) {
        case 0: ids[at] = pick_out_of_range(r); break;
        case 1: ids[at] = (int32_t) tap_rng_below(&r->rng, r->m.n); break;
        default:
            for (uint32_t i = len; i < MAXARR; i++)
                ids[i] = ids[at];
            len = MAXARR;
            break;
        }
    }
    return len;
}

/* Validates an id array the model's way; returns 0 or the error, with the index in *bad. */
static int model_check_ids(const model *m, int h, uint32_t len, const int32_t *ids, bool freeing,
                           uint32_t *bad)
{
    for (uint32_t i = 0; i < len; i++) {
        int32_t b = ids[i];
        *bad = i;
        if (b < 0 || (uint32_t) b >= m->n)
            return PAGED_E_BLOCK;
        uint32_t seen = 0;
        for (uint32_t j = 0; j <= i; j++)
            seen += ids[j] == b;
        if (m->held[h][b] == 0 || (freeing && seen > m->held[h][b]))
            return PAGED_E_NOTHELD;
    }
    return 0;
}

/* Checks the return code and *bad of an array operation against the model's; returns
 * whether the operation succeeded. */
static bool check_rc(run *r, const char *what, int rc, int want, uint32_t bad, uint32_t want_bad)
{
    if (rc != want || (want < 0 && bad != want_bad))
        fail(r, F_RESULT, "%s returned %d (bad %" PRIu32 "), model %d (bad %" PRIu32 ")",
             what, rc, bad, want, want_bad);
    if (want < 0) {
        r->op_failed = true;
        r->errors++;
    }
    return want >= 0;
}

/* Allocates a random number of blocks, at times more than there are. */
static void op_alloc(run *r, int h)
{
    model *m = &r->m;
    uint32_t avail = m->nfree + m->nlru;
    uint32_t n;
    uint64_t kind = tap_rng_below(&r->rng, 100);
    if (kind < 70)
        n = 1 + (uint32_t) tap_rng_below(&r->rng, 4);
    else if (kind < 88)
        n = (uint32_t) tap_rng_below(&r->rng, m->n / 4 + 1);
    else if (kind < 97)
        n = avail + (uint32_t) tap_rng_below(&r->rng, 3) - (avail > 0);
    else
        n = tap_rng_below(&r->rng, 2) ? UINT32_MAX : m->n + 1;
    int32_t out[MAXN + 1];
    for (uint32_t i = 0; i <= MAXN; i++)
        out[i] = -7;
    int rc = pa_alloc_blocks(r->a, holder_ids[h], n, out);
    if (n > avail) {
        r->nospc++;
        check_rc(r, "pa_alloc_blocks", rc, PAGED_E_NOSPC, 0, 0);
        if (r->nev != 0)
            fail(r, F_ERROR, "pa_alloc_blocks(%" PRIu32 ") failed but evicted %" PRIu32, n, r->nev);
        for (uint32_t i = 0; i <= MAXN; i++)
            if (out[i] != -7)
                fail(r, F_ERROR, "pa_alloc_blocks(%" PRIu32 ") failed but wrote out[%" PRIu32 "]",
                     n, i);
        return;
    }
    if (!check_rc(r, "pa_alloc_blocks", rc, 0, 0, 0))
        return;
    uint32_t short_by = n > m->nfree ? n - m->nfree : 0;
    if (r->nev != short_by || r->ev_overflow)
        fail(r, F_EVICT, "pa_alloc_blocks(%" PRIu32 ") with %" PRIu32 " free evicted %" PRIu32
             ", model %" PRIu32, n, m->nfree, r->nev, short_by);
    for (uint32_t i = 0; i < short_by && i < r->nev; i++) {
        int32_t want = m->lru[0];
        if (r->ev_block[i] != want || !hash_eq(&r->ev_hash[i], key_hash(r, (uint32_t) m->hash_of[want])))
            fail(r, F_EVICT, "eviction %" PRIu32 " took block %d, model's LRU block is %d",
                 i, r->ev_block[i], want);
        touch(r, model_evict(m));
    }
    for (uint32_t i = 0; i < n; i++) {
        int32_t b = out[i];
        if (b < 0 || (uint32_t) b >= m->n || m->state[b] != M_FREE) {
            fail(r, F_RESULT, "pa_alloc_blocks returned block %d, not free in the model", b);
            return;
        }
        m->nfree--;
        model_add_ref(m, h, b);
        touch(r, b);
    }
    if (out[n] != -7)
        fail(r, F_RESULT, "pa_alloc_blocks(%" PRIu32 ") wrote past its %" PRIu32 " ids", n, n);
}

/* Frees an array of blocks, valid or not. */
static void op_free(run *r, int h)
{
    model *m = &r->m;
    int32_t ids[MAXARR];
    uint32_t len = pick_ids(r, h, ids);
    uint32_t want_bad = 0, bad = UINT32_MAX;
    int want = model_check_ids(m, h, len, ids, true, &want_bad);
    int rc = pa_free_blocks(r->a, holder_ids[h], len, ids, &bad);
    for (uint32_t i = 0; i < len; i++)
        touch(r, ids[i]);
    if (!check_rc(r, "pa_free_blocks", rc, want, bad, want_bad))
        return;
    for (uint32_t i = 0; i < len; i++) {
        int32_t b = ids[i];
        m->held[h][b]--;
        m->total[h]--;
        if (--m->refcount[b] == 0)
            model_unreferenced(m, b);
    }
}

/* Forks an array of blocks, valid or not. */
static void op_fork(run *r, int h)
{
    int32_t ids[MAXARR];
    uint32_t len = pick_ids(r, h, ids);
    uint32_t want_bad = 0, bad = UINT32_MAX;
    int want = model_check_ids(&r->m, h, len, ids, false, &want_bad);
    int rc = pa_fork_blocks(r->a, holder_ids[h], len, ids, &bad);
    for (uint32_t i = 0; i < len; i++)
        touch(r, ids[i]);
    if (!check_rc(r, "pa_fork_blocks", rc, want, bad, want_bad))
        return;
    for (uint32_t i = 0; i < len; i++)
        model_add_ref(&r->m, h, ids[i]);
}

/* Returns a universe hash that is published, if any (a random one otherwise). */
static uint32_t pick_published_hash(run *r)
{
    uint32_t start = (uint32_t) tap_rng_below(&r->rng, r->nuniv);
    for (uint32_t i = 0; i < r->nuniv; i++) {
        uint32_t u = (start + i) % r->nuniv;
        if (r->m.block_of[u] >= 0)
            return u;
    }
    return start;
}

/* Publishes an array of blocks under universe keys of one tenant, some taken already. */
static void op_publish(run *r, int h)
{
    model *m = &r->m;
    int32_t ids[MAXARR];
    uint32_t us[MAXARR];
    paged_hash hashes[MAXARR];
    uint32_t len = pick_ids(r, h, ids);
    uint32_t t = (uint32_t) tap_rng_below(&r->rng, 2);
    for (uint32_t i = 0; i < len; i++) {
        us[i] = tap_rng_below(&r->rng, 6) == 0 ? pick_published_hash(r)
                                               : (uint32_t) tap_rng_below(&r->rng, r->nuniv);
        us[i] = us[i] / 2 * 2 + t;
        hashes[i] = *key_hash(r, us[i]);
    }
    uint32_t want_bad = 0, bad = UINT32_MAX;
    int want = model_check_ids(m, h, len, ids, false, &want_bad);
    if (want == 0)
        for (uint32_t i = 0; i < len; i++) {
            int32_t b = ids[i];
            if (m->hash_of[b] >= 0 || m->block_of[us[i]] >= 0)
                continue;
            m->hash_of[b] = (int32_t) us[i];
            m->block_of[us[i]] = b;
            want++;
        }
    int rc = pa_publish(r->a, holder_ids[h], key_tenant(t), len, ids, hashes, &bad);
    for (uint32_t i = 0; i < len; i++)
        touch(r, ids[i]);
    check_rc(r, "pa_publish", rc, want, bad, want_bad);
}

/* Looks up a chain of hashes in one tenant, mostly published ones (in that tenant or the
 * other), ending at a miss now and then. */
static void op_lookup(run *r, int h)
{
    model *m = &r->m;
    uint32_t len = (uint32_t) tap_rng_below(&r->rng, tap_rng_below(&r->rng, 4) ? 4 : MAXARR + 1);
    uint32_t us[MAXARR];
    paged_hash hashes[MAXARR];
    for (uint32_t i = 0; i < len; i++) {
        us[i] = tap_rng_below(&r->rng, 6) != 0 ? pick_published_hash(r)
                                               : (uint32_t) tap_rng_below(&r->rng, r->nuniv);
        hashes[i] = *key_hash(r, us[i]);
    }
    /* One tenant per call, the first key's: the others' hashes, published in either tenant,
     * are found only where published in this one. */
    uint32_t t = len > 0 ? us[0] % 2 : 0;
    for (uint32_t i = 0; i < len; i++)
        us[i] = us[i] / 2 * 2 + t;
    int32_t out[MAXARR + 1];
    for (uint32_t i = 0; i <= MAXARR; i++)
        out[i] = -7;
    uint32_t found = pa_lookup(r->a, holder_ids[h], key_tenant(t), len, hashes, out);
    m->lookups++;
    uint32_t want = 0;
    while (want < len && m->block_of[us[want]] >= 0)
        want++;
    if (found != want) {
        fail(r, F_RESULT, "pa_lookup of %" PRIu32 " hashes found %" PRIu32 ", model %" PRIu32,
             len, found, want);
        return;
    }
    for (uint32_t i = 0; i < want; i++) {
        int32_t b = m->block_of[us[i]];
        if (out[i] != b) {
            fail(r, F_LOOKUP, "pa_lookup hash %" PRIu32 " returned block %d, model %d (%s)",
                 i, out[i], b, out[i] >= 0 && (uint32_t) out[i] < m->n
                 && m->state[out[i]] == M_FREE ? "evicted" : "another");
            return;
        }
        if (m->state[b] == M_CACHED)
            model_lru_remove(m, b);
        else if (m->state[b] == M_PINNED)
            m->npin_idle--;
        model_add_ref(m, h, b);
        touch(r, b);
    }
    m->hits += want;
    if (out[want] != -7)
        fail(r, F_RESULT, "pa_lookup wrote past the %" PRIu32 " blocks it found", want);
}

/* Releases everything a holder holds, replaying it newest pair first in the model. */
static void op_release(run *r, int h)
{
    model *m = &r->m;
    int32_t order[MAXN];
    uint32_t norder = 0;
    for (uint32_t b = 0; b < m->n; b++)
        if (m->held[h][b] > 0) {
            /* Insertion sort by first-reference time, newest first. */
            uint32_t i = norder++;
            while (i > 0 && m->since[h][order[i - 1]] < m->since[h][b]) {
                order[i] = order[i - 1];
                i--;
            }
            order[i] = (int32_t) b;
        }
    uint32_t got = pa_release_holder(r->a, holder_ids[h]);
    if (got != m->total[h])
        fail(r, F_RESULT, "pa_release_holder(%" PRIu32 ") = %" PRIu32 ", model %" PRIu32,
             holder_ids[h], got, m->total[h]);
    for (uint32_t i = 0; i < norder; i++) {
        int32_t b = order[i];
        m->refcount[b] -= m->held[h][b];
        m->held[h][b] = 0;
        if (m->refcount[b] == 0)
            model_unreferenced(m, b);
        touch(r, b);
    }
    m->total[h] = 0;
    r->releases++;
}

/* Evicts every cached block; the hook must see them in LRU order. */
static void op_evict_all(run *r)
{
    model *m = &r->m;
    uint32_t got = pa_evict_cached(r->a);
    if (got != m->nlru || r->nev != m->nlru)
        fail(r, F_EVICT, "pa_evict_cached = %" PRIu32 " with %" PRIu32 " hook calls, model %"
             PRIu32, got, r->nev, m->nlru);
    for (uint32_t i = 0; m->nlru > 0; i++) {
        int32_t want = m->lru[0];
        if (i < r->nev && (r->ev_block[i] != want
                           || !hash_eq(&r->ev_hash[i], key_hash(r, (uint32_t) m->hash_of[want]))))
            fail(r, F_EVICT, "pa_evict_cached evicted block %d as number %" PRIu32
                 ", model's LRU block is %d", r->ev_block[i], i, want);
        touch(r, model_evict(m));
    }
    r->evict_alls++;
}

/* Picks a chain of keys of one tenant as op_lookup does: fills us and hashes, returns its
 * length and the tenant's index in *t. */
static uint32_t pick_chain(run *r, uint32_t *us, paged_hash *hashes, uint32_t *t)
{
    uint32_t len = (uint32_t) tap_rng_below(&r->rng, MAXARR + 1);
    for (uint32_t i = 0; i < len; i++)
        us[i] = tap_rng_below(&r->rng, 6) != 0 ? pick_published_hash(r)
                                               : (uint32_t) tap_rng_below(&r->rng, r->nuniv);
    *t = len > 0 ? us[0] % 2 : 0;
    for (uint32_t i = 0; i < len; i++) {
        us[i] = us[i] / 2 * 2 + *t;
        hashes[i] = *key_hash(r, us[i]);
    }
    return len;
}

/* Returns how many keys of the chain are published, up to the first that is not. */
static uint32_t model_found(const model *m, const uint32_t *us, uint32_t len)
{
    uint32_t i = 0;
    while (i < len && m->block_of[us[i]] >= 0)
        i++;
    return i;
}

/* Drops block b's pin in the model. */
static void model_unpin(model *m, int32_t b)
{
    m->pinned_by[m->pinner[b]]--;
    m->pinned[b] = 0;
    m->npinned--;
    if (m->state[b] == M_PINNED) {
        m->npin_idle--;
        model_lru_push(m, b);
    }
}

/* Pins a chain for a random pinner under random limits. */
static void op_pin(run *r)
{
    model *m = &r->m;
    uint32_t us[MAXARR], t;
    paged_hash hashes[MAXARR];
    uint32_t len = pick_chain(r, us, hashes, &t);
    uint32_t p = (uint32_t) tap_rng_below(&r->rng, NPIN);
    uint32_t limit_u = tap_rng_below(&r->rng, 2) ? UINT32_MAX : (uint32_t) tap_rng_below(&r->rng, m->n / 4 + 1);
    uint32_t limit_p = tap_rng_below(&r->rng, 2) ? UINT32_MAX : m->n / 2;
    uint32_t found = model_found(m, us, len), fresh = 0;
    uint8_t seen[MAXN] = { 0 };
    for (uint32_t i = 0; i < found; i++) {
        int32_t b = m->block_of[us[i]];
        if (!m->pinned[b] && !seen[b]++)
            fresh++;
    }
    int want = (int) found;
    if ((uint64_t) m->pinned_by[p] + fresh > limit_u || (uint64_t) m->npinned + fresh > limit_p)
        want = PAGED_E_LIMIT;
    uint32_t got_found = UINT32_MAX;
    int rc = pa_pin(r->a, key_tenant(t), len, hashes, pinner_ids[p], limit_u, limit_p, &got_found);
    if (!check_rc(r, "pa_pin", rc, want, 0, 0))
        return;
    if (got_found != found)
        fail(r, F_RESULT, "pa_pin stored a prefix of %" PRIu32 ", model %" PRIu32, got_found, found);
    if (want < 0)
        return;
    for (uint32_t i = 0; i < found; i++) {
        int32_t b = m->block_of[us[i]];
        touch(r, b);
        if (m->pinned[b])
            continue;
        m->pinned[b] = 1;
        m->pinner[b] = p;
        m->pinned_by[p]++;
        m->npinned++;
        if (m->state[b] == M_CACHED) {
            model_lru_remove(m, b);
            m->state[b] = M_PINNED;
            m->npin_idle++;
        }
    }
    r->pins++;
}

/* Returns PAGED_E_PERM with the index in *bad when a block of the chain's first found keys is
 * pinned by another than pinner p and any is false; else 0. */
static int model_check_unpin(const model *m, const uint32_t *us, uint32_t found, uint32_t p, bool any,
                             uint32_t *bad)
{
    for (uint32_t i = 0; i < found && !any; i++) {
        int32_t b = m->block_of[us[i]];
        if (m->pinned[b] && m->pinner[b] != p) {
            *bad = i;
            return PAGED_E_PERM;
        }
    }
    return 0;
}

/* Unpins a chain as a random pinner, at times allowed to drop anyone's pins. */
static void op_unpin(run *r)
{
    model *m = &r->m;
    uint32_t us[MAXARR], t;
    paged_hash hashes[MAXARR];
    uint32_t len = pick_chain(r, us, hashes, &t);
    uint32_t p = (uint32_t) tap_rng_below(&r->rng, NPIN);
    bool any = tap_rng_below(&r->rng, 3) == 0;
    if (tap_rng_below(&r->rng, 8) == 0) {
        /* Every pin of p (any: everyone's), in block order. */
        uint32_t want = 0;
        uint32_t got = pa_unpin_all(r->a, pinner_ids[p], any);
        for (uint32_t b = 0; b < m->n; b++)
            if (m->pinned[b] && (any || m->pinner[b] == p)) {
                model_unpin(m, (int32_t) b);
                touch(r, (int32_t) b);
                want++;
            }
        if (got != want)
            fail(r, F_RESULT, "pa_unpin_all = %" PRIu32 ", model %" PRIu32, got, want);
        r->unpins++;
        return;
    }
    uint32_t found = model_found(m, us, len), want_bad = 0, bad = UINT32_MAX;
    int want = model_check_unpin(m, us, found, p, any, &want_bad);
    if (want == 0)
        want = (int) found;
    int rc = pa_unpin(r->a, key_tenant(t), len, hashes, pinner_ids[p], any, &bad);
    if (!check_rc(r, "pa_unpin", rc, want, bad, want_bad) || want < 0)
        return;
    for (uint32_t i = 0; i < found; i++) {
        int32_t b = m->block_of[us[i]];
        touch(r, b);
        if (m->pinned[b])
            model_unpin(m, b);
    }
    r->unpins++;
}

/* Checks that the hook's i-th eviction was block b with its hash (before the model drops it). */
static void expect_evicted(run *r, uint32_t i, int32_t b, const char *what)
{
    if (i >= r->nev || r->ev_block[i] != b || !hash_eq(&r->ev_hash[i], key_hash(r, (uint32_t) r->m.hash_of[b])))
        fail(r, F_EVICT, "%s: eviction %" PRIu32 " was block %d, model %d", what, i,
             i < r->nev ? r->ev_block[i] : -1, b);
}

/* Evicts a chain by prefix as a random pinner: cached blocks freed back to front, referenced
 * ones unpublished. */
static void op_evict_prefix(run *r)
{
    model *m = &r->m;
    uint32_t us[MAXARR], t;
    paged_hash hashes[MAXARR];
    uint32_t len = pick_chain(r, us, hashes, &t);
    uint32_t p = (uint32_t) tap_rng_below(&r->rng, NPIN);
    bool any = tap_rng_below(&r->rng, 2) == 0;
    uint32_t found = model_found(m, us, len), want_bad = 0, bad = UINT32_MAX;
    int want = model_check_unpin(m, us, found, p, any, &want_bad);
    if (want == 0)
        want = (int) found;
    r->may_evict = true;
    int rc = pa_evict_prefix(r->a, key_tenant(t), len, hashes, pinner_ids[p], any, &bad);
    if (!check_rc(r, "pa_evict_prefix", rc, want, bad, want_bad) || want < 0)
        return;
    uint32_t k = 0;
    for (uint32_t i = found; i-- > 0;) {
        int32_t b = m->block_of[us[i]];
        if (b < 0)
            continue;
        touch(r, b);
        if (m->pinned[b])
            model_unpin(m, b);
        if (m->state[b] == M_CACHED) {
            expect_evicted(r, k++, b, "pa_evict_prefix");
            model_lru_remove(m, b);
            m->state[b] = M_FREE;
            m->nfree++;
            m->evictions++;
        }
        m->block_of[m->hash_of[b]] = -1;
        m->hash_of[b] = -1;
    }
    if (r->nev != k)
        fail(r, F_EVICT, "pa_evict_prefix called the hook %" PRIu32 " times, model %" PRIu32, r->nev, k);
    r->prefix_evictions++;
}

/* Expires cached blocks under a random time to live: the LRU's oldest, in order. */
static void op_expire(run *r)
{
    model *m = &r->m;
    uint64_t ttl = tap_rng_below(&r->rng, 4) == 0 ? 0 : 1 + tap_rng_below(&r->rng, 1000);
    r->may_evict = true;
    uint32_t got = pa_expire(r->a, ttl);
    uint64_t next = pa_next_expiry(r->a, ttl);
    uint32_t k = 0;
    while (ttl != 0 && m->nlru > 0 && fake_now - m->stamp[m->lru[0]] >= ttl) {
        expect_evicted(r, k++, m->lru[0], "pa_expire");
        touch(r, model_evict(m));
    }
    if (got != k || r->nev != k)
        fail(r, F_EVICT, "pa_expire(%" PRIu64 ") = %" PRIu32 " with %" PRIu32 " hook calls, model %" PRIu32, ttl,
             got, r->nev, k);
    uint64_t want_next = ttl == 0 || m->nlru == 0 ? UINT64_MAX : m->stamp[m->lru[0]] + ttl;
    if (next != want_next)
        fail(r, F_EVICT, "pa_next_expiry(%" PRIu64 ") = %" PRIu64 ", model %" PRIu64, ttl, next, want_next);
    r->expiries += k;
}

/* Asks the copy-on-write question for a random (holder, block), at times out of range. */
static void op_writable(run *r, int h)
{
    const model *m = &r->m;
    uint64_t kind = tap_rng_below(&r->rng, 20);
    int32_t b = kind == 0 ? pick_out_of_range(r)
                : kind < 12 ? pick_held(r, h) : (int32_t) tap_rng_below(&r->rng, m->n);
    int want;
    if (b < 0 || (uint32_t) b >= m->n)
        want = PAGED_E_BLOCK;
    else if (m->held[h][b] == 0)
        want = PAGED_E_NOTHELD;
    else
        want = m->refcount[b] == 1 && m->hash_of[b] < 0;
    int got = pa_writable(r->a, holder_ids[h], b);
    if (got != want)
        fail(r, F_WRITABLE, "pa_writable(holder %" PRIu32 ", block %d) = %d, model %d",
             holder_ids[h], b, got, want);
    r->writable_yes += want == 1;
    touch(r, b);
}

/* Queries out-of-range blocks, which must read as held by nobody. */
static void op_bad_queries(run *r, int h)
{
    int32_t b = pick_out_of_range(r);
    pa_block_info info;
    if (pa_held(r->a, holder_ids[h], b) != 0 || pa_block_info_get(r->a, b, &info) != PAGED_E_BLOCK)
        fail(r, F_RESULT, "block %d out of range reads as held or has info", b);
}

/* Returns a random holder slot, preferring (a few tries) one that holds something, so that
 * FREE, FORK and PUBLISH mostly do work rather than fail for an empty holder. */
static int pick_holder(run *r, bool holding)
{
    int h = (int) tap_rng_below(&r->rng, NHOLD);
    for (int tries = 0; holding && tries < 3 && r->m.total[h] == 0; tries++)
        h = (int) tap_rng_below(&r->rng, NHOLD);
    return h;
}

/* Runs one random operation and the per-operation checks. */
static void step(run *r)
{
    r->nev = 0;
    r->ev_overflow = false;
    r->ntouched = 0;
    r->op_failed = false;
    r->may_evict = false;
    fake_now++;
    /* Weights (per mille) that keep a fair share of the pool free and cached, so that
     * allocations both succeed and evict, and lookups both hit and miss. */
    uint64_t dice = tap_rng_below(&r->rng, 1000);
    int h = pick_holder(r, dice >= 180 && dice < 680);
    if (dice < 180) {
        r->may_evict = true;
        op_alloc(r, h);
    }
    else if (dice < 480)
        op_free(r, h);
    else if (dice < 530)
        op_fork(r, h);
    else if (dice < 680)
        op_publish(r, h);
    else if (dice < 800)
        op_lookup(r, h);
    else if (dice < 830)
        op_release(r, h);
    else if (dice < 832) {
        r->may_evict = true;
        op_evict_all(r);
    } else if (dice < 862)
        op_pin(r);
    else if (dice < 892)
        op_unpin(r);
    else if (dice < 902)
        op_evict_prefix(r);
    else if (dice < 912)
        op_expire(r);
    else if (dice < 985)
        op_writable(r, h);
    else
        op_bad_queries(r, h);
    if (r->nev > 0 && !r->may_evict)
        fail(r, F_EVICT, "an operation that does not evict called the eviction hook");
    check_counts(r);
    r->free_share += (double) r->m.nfree / r->m.n;
    r->cached_share += (double) r->m.nlru / r->m.n;
    for (uint32_t i = 0; i < r->ntouched && !r->stop; i++)
        check_block(r, r->touched[i]);
}

/* Runs one phase on a fresh pool of n blocks. */
static void run_phase(run *r, uint32_t n, uint64_t ops)
{
    r->a = pa_create(n);
    if (r->a == NULL)
        bail("pa_create(%" PRIu32 ") failed", n);
    pa_set_evict_hook(r->a, on_evict, r);
    pa_set_clock(r->a, fake_clock);
    model_init(&r->m, n);
    make_universe(r);
    for (uint64_t i = 0; i < ops && !r->stop; i++, r->op++) {
        step(r);
        if (i % THOROUGH_EVERY == 0 && !r->stop)
            check_thorough(r);
    }
    if (!r->stop)
        check_thorough(r);
    pa_destroy(r->a);
    r->a = NULL;
}

/* Runs the phases and reports one line per invariant family plus coverage lines. */
int main(void)
{
    static run r;
    r.seed = tap_seed();
    tap_rng_seed(&r.rng, r.seed);
    plan(F_COUNT + 5);

    uint64_t evictions = 0, lookups = 0, hits = 0;
    uint32_t sizes[PHASES] = { 0 };
    for (int p = 0; p < PHASES && !r.stop; p++) {
        /* A small pool first, where everything collides; then one up to MAXN. */
        sizes[p] = p == 0 ? 64 + (uint32_t) tap_rng_below(&r.rng, 64)
                          : 128 + (uint32_t) tap_rng_below(&r.rng, MAXN - 128 + 1);
        run_phase(&r, sizes[p], OPS_PER_PHASE);
        evictions += r.m.evictions;
        lookups += r.m.lookups;
        hits += r.m.hits;
    }
    for (int f = 0; f < F_COUNT; f++)
        if (!ok(!r.failed[f], "%s", family_what[f]))
            diag("first failure: %s", r.first[f]);
    ok(!r.stop && r.op == (uint64_t) PHASES * OPS_PER_PHASE,
       "ran %" PRIu64 " random operations on pools of %" PRIu32 " and %" PRIu32 " blocks",
       r.op, sizes[0], PHASES > 1 ? sizes[1] : 0);
    diag("%" PRIu64 " errors (%" PRIu64 " no space), %" PRIu64 " evictions, %" PRIu64
         " lookups with %" PRIu64 " hits, %" PRIu64 " releases, %" PRIu64 " evict-all, %"
         PRIu64 " writable, %" PRIu64 " thorough checks", r.errors, r.nospc, evictions,
         lookups, hits, r.releases, r.evict_alls, r.writable_yes, r.thorough_checks);
    diag("on average %.0f%% of the blocks free, %.0f%% cached", 100 * r.free_share / (double) r.op,
         100 * r.cached_share / (double) r.op);
    ok(evictions >= 1000 && r.nospc >= 1000, "eviction (%" PRIu64 ") and exhaustion (%" PRIu64
       ") happened often", evictions, r.nospc);
    ok(hits >= 10000 && hits < lookups * MAXARR, "lookups hit often (%" PRIu64 ") and missed too",
       hits);
    diag("%" PRIu64 " pins, %" PRIu64 " unpins, %" PRIu64 " evictions by prefix, %" PRIu64 " blocks expired",
         r.pins, r.unpins, r.prefix_evictions, r.expiries);
    ok(r.pins >= 1000 && r.unpins >= 1000 && r.prefix_evictions >= 1000 && r.expiries >= 1000,
       "pins, unpins, evictions by prefix and expiries were exercised");
    ok(r.errors >= 10000 && r.writable_yes >= 1000, "invalid operations (%" PRIu64
       ") and writable blocks (%" PRIu64 ") were exercised", r.errors, r.writable_yes);
    return 0;
}
