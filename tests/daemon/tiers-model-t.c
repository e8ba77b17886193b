/* tiers-model-t.c: a pool's allocator with its host and file tiers against a reference model over random operations. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/alloc/alloc.h"
#include "daemon/backend.h"
#include "daemon/blocklog.h"
#include "daemon/tier/tiers.h"
#include "daemon/util/log.h"
#include "lib/core/clock.h"
#include "tests/tap/basic.h"

/* The pool: small, so that every operation collides with the others. */
#define NLAYERS 2
#define NHEADS 1
#define HEAD_DIM 64
#define BLOCK_SIZE 8
#define NBLOCKS 16
#define HOST_UNITS 5
#define ROUND_UNITS 2            /* a reload round takes at most half the host tier */
#define FILE_UNITS 6
#define PIECE_BYTES ((size_t) NHEADS * BLOCK_SIZE * HEAD_DIM * sizeof (float))
#define NPLANES (2 * NLAYERS)
#define UNIT_BYTES (NPLANES * PIECE_BYTES)

/* The prompts: NPROMPT chains of up to CHAIN blocks, some sharing a head with an earlier one,
 * in NTEN tenants that share hash values. */
#define NPROMPT 10
#define CHAIN 6
#define NHASH (NPROMPT * CHAIN)
#define NTEN 2
#define NKEYS (NTEN * NHASH)
#define NHOLD 4
#define MAXHELD 64

#define RUNS 4
#define OPS_PER_RUN 1500
#define MAXREC 64              /* eviction hook calls in one operation */
#define MAXEV 512              /* block events in one operation */

static const uint32_t tenant_ids[NTEN] = { 1000, 1001 };
static const uint32_t holder_ids[NHOLD] = { 7, 8, 9, 0xfffffff0u };

/* The allocator's clock: one tick per operation. */
static uint64_t fake_now;

/* Returns the allocator's clock. */
static uint64_t fake_clock(void)
{
    return fake_now;
}

/* A block event, the model's or the log's. */
typedef struct event {
    uint8_t action, tier;
    int32_t key;
} event;

/*
 * The reference model. The pool part tracks each block's holders and published key but not
 * the allocator's LRU order (alloc-model-t's business): which cached blocks an allocation,
 * an EVICT or an expiry takes is read from the eviction hook, and the model checks each was
 * cached and replays what the tiers must do with it. The host and file tiers are modeled
 * whole: their LRU orders, the host's stamps (as operation numbers), each key's generation
 * (the bytes it must hold), the counters and the events.
 */
typedef struct model {
    int32_t block_key[NBLOCKS];        /* key published on the block in the pool, or -1 */
    int32_t key_block[NKEYS];          /* block the key is published on, or -1 */
    uint32_t refs[NHOLD][NBLOCKS];
    int32_t host_lru[HOST_UNITS];      /* stored keys, least recently stored first */
    uint32_t nhost;
    uint64_t host_stamp[NKEYS];        /* operation that stored it */
    bool in_host[NKEYS];
    int32_t file_lru[FILE_UNITS + 1];  /* least recently used first */
    uint32_t nfile;
    bool in_file[NKEYS];
    bool taken[NKEYS];                 /* taken by the reload round in progress */
    uint32_t gen[NKEYS];               /* bumps when a key is published while held nowhere */
    uint64_t offloaded, written, reloaded_host, reloaded_file;
    event ev[MAXEV];
    uint32_t nev;
} model;

/* One run: the pool, its tiers, the model and what went wrong. */
typedef struct run {
    int index;
    uint64_t seed;
    tap_rng rng;
    pa_alloc *a;
    struct pd_tiers *t;
    pd_backend backend;
    struct pd_backend_ops ops;
    pk_cache cache;
    unsigned char *pool_mem;
    struct pd_blocklog log;
    char dir[64];
    char pool_dir[128];
    paged_hash hashes[NHASH];
    int32_t chain[NPROMPT][CHAIN];     /* hash ids */
    model m;
    int32_t held[NHOLD][MAXHELD];
    uint32_t nheld[NHOLD];
    int32_t rec_block[MAXREC];         /* what the eviction hook saw in this operation */
    int32_t rec_key[MAXREC];
    uint32_t nrec, rec_used;
    uint64_t op;
    uint64_t epoch_ns[OPS_PER_RUN + 2];
    bool failed;
    char first[400];
    /* coverage */
    uint64_t lookups, hits, reload_nospc, trims, restarts, expired_host, removed_prefix, evict_alls, kills;
    uint64_t offloaded, written, reloaded_host, reloaded_file;   /* the counters of tiers closed */
} run;

/* Records the run's first failure (with the operation and the seed) and stops it. Returns
 * false for use in conditions. */
static bool TAP_PRINTF(2, 3) fail(run *r, const char *fmt, ...)
{
    if (!r->failed) {
        char msg[300];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        r->failed = true;
        snprintf(r->first, sizeof r->first, "run %d op %" PRIu64 " (seed %" PRIu64 "): %s", r->index, r->op,
                 r->seed, msg);
    }
    return false;
}

/* Returns the next value of a splitmix64 sequence at *x. */
static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Returns key k's tenant. */
static uint32_t key_tenant(int32_t k)
{
    return tenant_ids[k / NHASH];
}

/* Returns key k's hash. */
static const paged_hash *key_hash(const run *r, int32_t k)
{
    return &r->hashes[k % NHASH];
}

/* Returns the key of (tenant, hash), or -1 for one outside the universe. */
static int32_t key_of(const run *r, uint32_t tenant, const paged_hash *hash)
{
    for (int ti = 0; ti < NTEN; ti++)
        if (tenant_ids[ti] == tenant)
            for (int32_t h = 0; h < NHASH; h++)
                if (r->hashes[h].lo == hash->lo && r->hashes[h].hi == hash->hi)
                    return ti * NHASH + h;
    return -1;
}

/* Fills unit (UNIT_BYTES) with the bytes of key k in generation gen, as a unit lays them out
 * (every layer's keys then values). Returns nothing. */
static void key_content(const run *r, int32_t k, uint32_t gen, unsigned char *unit)
{
    uint64_t x = r->seed ^ ((uint64_t) k << 32) ^ gen;
    for (size_t i = 0; i < UNIT_BYTES; i += 8) {
        uint64_t w = splitmix(&x);
        memcpy(unit + i, &w, 8);
    }
}

/* Returns the address of plane pl of block b in the pool's memory. */
static unsigned char *block_plane(const run *r, int32_t b, size_t pl)
{
    return r->pool_mem + (pl * NBLOCKS + (size_t) b) * PIECE_BYTES;
}

/* Writes unit (UNIT_BYTES, in unit layout) into block b of the pool. Returns nothing. */
static void write_block(run *r, int32_t b, const unsigned char *unit)
{
    for (size_t pl = 0; pl < NPLANES; pl++)
        memcpy(block_plane(r, b, pl), unit + pl * PIECE_BYTES, PIECE_BYTES);
}

/* Returns whether block b of the pool holds unit (in unit layout). */
static bool block_holds(const run *r, int32_t b, const unsigned char *unit)
{
    for (size_t pl = 0; pl < NPLANES; pl++)
        if (memcmp(block_plane(r, b, pl), unit + pl * PIECE_BYTES, PIECE_BYTES) != 0)
            return false;
    return true;
}

/* ---- the model ------------------------------------------------------------------------- */

/* Adds an event the implementation must log. Returns nothing. */
static void expect_event(run *r, enum pd_block_action action, enum pd_block_tier tier, int32_t k)
{
    model *m = &r->m;
    if (m->nev < MAXEV)
        m->ev[m->nev++] = (event) { (uint8_t) action, (uint8_t) tier, k };
    else
        fail(r, "the model's event list overflowed");
}

/* Returns whether key k is held nowhere (pool index, host tier, file tier, a reload round). */
static bool gone(const model *m, int32_t k)
{
    return m->key_block[k] < 0 && !m->in_host[k] && !m->in_file[k] && !m->taken[k];
}

/* Expects a REMOVED event of key k, which left tier, if no tier holds it now. Returns nothing. */
static void note_left(run *r, enum pd_block_tier tier, int32_t k)
{
    if (gone(&r->m, k))
        expect_event(r, PD_BLOCK_REMOVED, tier, k);
}

/* Takes key k out of the list lru of *n keys. Returns whether it was there. */
static bool list_remove(int32_t *lru, uint32_t *n, int32_t k)
{
    for (uint32_t i = 0; i < *n; i++)
        if (lru[i] == k) {
            memmove(lru + i, lru + i + 1, (*n - i - 1) * sizeof *lru);
            (*n)--;
            return true;
        }
    return false;
}

/* Drops key k from the model's file tier. Returns whether it was there. */
static bool m_file_remove(model *m, int32_t k)
{
    if (!m->in_file[k])
        return false;
    list_remove(m->file_lru, &m->nfile, k);
    m->in_file[k] = false;
    return true;
}

/* Marks key k most recently used in the model's file tier (a read). Returns nothing. */
static void m_file_touch(model *m, int32_t k)
{
    list_remove(m->file_lru, &m->nfile, k);
    m->file_lru[m->nfile++] = k;
}

/* The file tier's put: writes key k as most recently used, then drops the least recently used
 * units beyond the capacity (never k). Returns nothing. */
static void m_file_put(run *r, int32_t k)
{
    model *m = &r->m;
    if (m->in_file[k])
        list_remove(m->file_lru, &m->nfile, k);
    m->file_lru[m->nfile++] = k;
    m->in_file[k] = true;
    m->written++;
    expect_event(r, PD_BLOCK_OFFLOADED, PD_TIER_FILE, k);
    while (m->nfile > FILE_UNITS && m->file_lru[0] != k) {
        int32_t old = m->file_lru[0];
        m_file_remove(m, old);
        r->trims++;
        note_left(r, PD_TIER_FILE, old);
    }
}

/* Takes key k out of the model's host tier (no event). Returns whether it was there. */
static bool m_host_remove(model *m, int32_t k)
{
    if (!m->in_host[k])
        return false;
    list_remove(m->host_lru, &m->nhost, k);
    m->in_host[k] = false;
    return true;
}

/* The host tier's push-out of its least recently stored unit: to the file tier, or dropped
 * (dropping). Returns nothing. */
static void m_host_out(run *r, bool dropping)
{
    model *m = &r->m;
    int32_t k = m->host_lru[0];
    m_host_remove(m, k);
    if (!dropping)
        m_file_put(r, k);
    else
        note_left(r, PD_TIER_HOST, k);
}

/* Appends key k to the model's host tier, stamped now. Returns nothing. */
static void m_host_append(run *r, int32_t k)
{
    model *m = &r->m;
    m->host_lru[m->nhost++] = k;
    m->in_host[k] = true;
    m->host_stamp[k] = r->op;
}

/* The host tier's put of key k with taken slots in use: bumps it where stored, else stores it
 * in a free slot or pushes the oldest out first. Sets *fresh. Returns false where every slot
 * is taken. */
static bool m_host_put(run *r, int32_t k, uint32_t taken, bool *fresh)
{
    model *m = &r->m;
    *fresh = false;
    if (m->in_host[k]) {
        m_host_remove(m, k);
        m_host_append(r, k);
        return true;
    }
    if (m->nhost + taken >= HOST_UNITS) {
        if (m->nhost == 0)
            return false;
        m_host_out(r, false);
    }
    m_host_append(r, k);
    *fresh = true;
    return true;
}

/* Counts the model's blocks referenced (by any holder) into *referenced and those cached into
 * *cached. Returns nothing. */
static void m_block_counts(const model *m, uint32_t *referenced, uint32_t *cached)
{
    *referenced = *cached = 0;
    for (int32_t b = 0; b < NBLOCKS; b++) {
        uint32_t refs = 0;
        for (int h = 0; h < NHOLD; h++)
            refs += m->refs[h][b];
        if (refs > 0)
            (*referenced)++;
        else if (m->block_key[b] >= 0)
            (*cached)++;
    }
}

/* Returns the references of every holder to block b in the model. */
static uint32_t m_refs(const model *m, int32_t b)
{
    uint32_t refs = 0;
    for (int h = 0; h < NHOLD; h++)
        refs += m->refs[h][b];
    return refs;
}

/* Replays the next eviction the hook saw: the block must be cached in the model; it leaves the
 * pool and goes to the host tier (taken slots in use), or is dropped (dropping). Returns
 * whether there was one to replay. */
static bool m_replay_eviction(run *r, bool dropping, uint32_t taken)
{
    model *m = &r->m;
    if (r->rec_used >= r->nrec)
        return fail(r, "the model expects an eviction the hook did not see");
    int32_t b = r->rec_block[r->rec_used], k = r->rec_key[r->rec_used];
    r->rec_used++;
    if (b < 0 || b >= NBLOCKS || k < 0 || m->block_key[b] != k || m_refs(m, b) != 0)
        return fail(r, "evicted block %d (key %d) is not cached under that key in the model", b, k);
    m->block_key[b] = -1;
    m->key_block[k] = -1;
    bool fresh = false;
    if (!dropping && m_host_put(r, k, taken, &fresh)) {
        m->offloaded += fresh;
        expect_event(r, PD_BLOCK_OFFLOADED, PD_TIER_HOST, k);
        return true;
    }
    note_left(r, PD_TIER_POOL, k);
    return true;
}

/* Replays an allocation of n blocks for holder slot h that returned rc and ids: checks the
 * outcome (NOSPC exactly when the model has too few free and cached blocks), replays its
 * evictions and takes the blocks. Returns whether it succeeded. */
static bool m_alloc(run *r, int h, uint32_t n, int rc, const int32_t *ids, uint32_t taken)
{
    model *m = &r->m;
    uint32_t referenced, cached;
    m_block_counts(m, &referenced, &cached);
    uint32_t nfree = NBLOCKS - referenced - cached;
    if (n > nfree + cached) {
        if (rc != PAGED_E_NOSPC)
            fail(r, "allocating %" PRIu32 " blocks with %" PRIu32 " free and %" PRIu32 " cached returned %d", n,
                 nfree, cached, rc);
        return false;
    }
    if (rc != PAGED_OK)
        return fail(r, "allocating %" PRIu32 " blocks with %" PRIu32 " free and %" PRIu32 " cached returned %d", n,
                    nfree, cached, rc);
    for (uint32_t i = nfree; i < n && !r->failed; i++)
        m_replay_eviction(r, false, taken);
    for (uint32_t i = 0; i < n && !r->failed; i++) {
        int32_t b = ids[i];
        if (b < 0 || b >= NBLOCKS || m_refs(m, b) != 0 || m->block_key[b] >= 0)
            return fail(r, "allocation handed out block %d, not free in the model", b);
        m->refs[h][b]++;
    }
    return !r->failed;
}

/* Adds block b to holder slot h's list of references (for FREE). Returns nothing. */
static void hold(run *r, int h, int32_t b)
{
    if (r->nheld[h] < MAXHELD)
        r->held[h][r->nheld[h]++] = b;
    else
        fail(r, "holder %d's list of references overflowed", h);
}

/* ---- checks ---------------------------------------------------------------------------- */

/* Returns whether the log's events after index i name key k as put back in some tier. */
static bool readded_later(const run *r, uint32_t i, int32_t k)
{
    for (uint32_t j = i + 1; j < r->log.n; j++) {
        const struct pd_block_event *e = &r->log.ev[j];
        if (e->action != PD_BLOCK_REMOVED && key_of(r, e->tenant, &e->hash) == k)
            return true;
    }
    return false;
}

/* Checks the log's events against the model's (as multisets) and each REMOVED block against
 * the tiers themselves; clears both. Returns nothing. */
static void check_events(run *r)
{
    model *m = &r->m;
    bool used[MAXEV] = { false };
    if (r->log.lost != 0)
        fail(r, "the block log lost %" PRIu64 " events", r->log.lost);
    for (uint32_t i = 0; i < r->log.n && !r->failed; i++) {
        const struct pd_block_event *e = &r->log.ev[i];
        int32_t k = key_of(r, e->tenant, &e->hash);
        if (k < 0) {
            fail(r, "an event (action %u) names a block outside the universe", e->action);
            break;
        }
        if (e->action == PD_BLOCK_REMOVED && !readded_later(r, i, k)
            && (pa_find(r->a, e->tenant, &e->hash) >= 0 || pt_host_find(r->t->host, e->tenant, &e->hash) >= 0
                || pt_file_has(r->t->file, e->tenant, &e->hash)))
            fail(r, "REMOVED (tier %u) of key %d, which a tier still holds", e->tier, k);
        uint32_t j = 0;
        while (j < m->nev && (used[j] || m->ev[j].action != e->action || m->ev[j].tier != e->tier || m->ev[j].key != k))
            j++;
        if (j == m->nev)
            fail(r, "event action %u tier %u of key %d (event %" PRIu32 " of %" PRIu32 ") the model did not expect",
                 e->action, e->tier, k, i, r->log.n);
        else
            used[j] = true;
    }
    for (uint32_t j = 0; j < m->nev && !r->failed; j++)
        if (!used[j])
            fail(r, "no event action %u tier %u of key %d (the model's event %" PRIu32 " of %" PRIu32 ")",
                 m->ev[j].action, m->ev[j].tier, m->ev[j].key, j, m->nev);
    pd_blocklog_clear(&r->log);
    m->nev = 0;
}

/* Checks the payload of key k's unit file against unit. Returns nothing. */
static void check_file_bytes(run *r, int32_t k, const unsigned char *unit)
{
    char name[256];
    snprintf(name, sizeof name, "%s/%08" PRIx32 "-%016" PRIx64 "%016" PRIx64 ".unit", r->pool_dir, key_tenant(k),
             key_hash(r, k)->hi, key_hash(r, k)->lo);
    static unsigned char buf[UNIT_BYTES];
    int fd = open(name, O_RDONLY);
    ssize_t got = fd < 0 ? -1 : pread(fd, buf, UNIT_BYTES, (off_t) pt_file_header_bytes());
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t) UNIT_BYTES || memcmp(buf, unit, UNIT_BYTES) != 0)
        fail(r, "key %d's unit file does not hold generation %" PRIu32 "'s bytes", k, r->m.gen[k]);
}

/* Checks everything after an operation: structures, counts, where each key is, the bytes in
 * pool, host and file, the counters and the events. Returns nothing. */
static void check_all(run *r)
{
    const model *m = &r->m;
    const char *problem = pa_check(r->a);
    if (problem == NULL)
        problem = pt_host_check(r->t->host);
    if (problem != NULL)
        fail(r, "consistency check: %s", problem);
    pa_counts pc;
    pa_get_counts(r->a, &pc);
    uint32_t referenced, cached;
    m_block_counts(m, &referenced, &cached);
    if (pc.free + pc.referenced + pc.cached != NBLOCKS || pc.referenced != referenced || pc.cached != cached)
        fail(r, "free %" PRIu32 " referenced %" PRIu32 " cached %" PRIu32 ", model referenced %" PRIu32
             " cached %" PRIu32, pc.free, pc.referenced, pc.cached, referenced, cached);
    pt_host_counts hc;
    pt_host_get_counts(r->t->host, &hc);
    if (hc.taken != 0 || r->t->npend != 0 || hc.stored != m->nhost)
        fail(r, "host tier: %" PRIu32 " taken, %" PRIu32 " pending, %" PRIu32 " stored (model %" PRIu32 ")",
             hc.taken, r->t->npend, hc.stored, m->nhost);
    pt_file_counts fc;
    pt_file_get_counts(r->t->file, &fc);
    if (fc.units != m->nfile)
        fail(r, "file tier: %" PRIu32 " units, model %" PRIu32, fc.units, m->nfile);
    for (int h = 0; h < NHOLD && !r->failed; h++)
        for (int32_t b = 0; b < NBLOCKS; b++)
            if (pa_held(r->a, holder_ids[h], b) != m->refs[h][b])
                fail(r, "holder %d has %" PRIu32 " references to block %d, model %" PRIu32, h,
                     pa_held(r->a, holder_ids[h], b), b, m->refs[h][b]);
    static unsigned char unit[UNIT_BYTES];
    for (int32_t k = 0; k < NKEYS && !r->failed; k++) {
        uint32_t ten = key_tenant(k);
        const paged_hash *hash = key_hash(r, k);
        int32_t b = pa_find(r->a, ten, hash), s = pt_host_find(r->t->host, ten, hash);
        bool f = pt_file_has(r->t->file, ten, hash);
        if (b != m->key_block[k] || (s >= 0) != m->in_host[k] || f != m->in_file[k]) {
            fail(r, "key %d: pool block %d host slot %d file %d, model %d %d %d", k, b, s, f, m->key_block[k],
                 m->in_host[k], m->in_file[k]);
            break;
        }
        if (b < 0 && s < 0 && !f)
            continue;
        key_content(r, k, m->gen[k], unit);
        if (b >= 0 && !block_holds(r, b, unit))
            fail(r, "key %d: pool block %d does not hold generation %" PRIu32 "'s bytes", k, b, m->gen[k]);
        if (s >= 0 && memcmp(r->t->host_mem + (size_t) s * UNIT_BYTES, unit, UNIT_BYTES) != 0)
            fail(r, "key %d: host slot %d does not hold generation %" PRIu32 "'s bytes", k, s, m->gen[k]);
        if (f)
            check_file_bytes(r, k, unit);
    }
    const struct pd_tier_counts *c = &r->t->counts;
    if (c->offloaded != m->offloaded || c->written != m->written || c->reloaded_host != m->reloaded_host
        || c->reloaded_file != m->reloaded_file)
        fail(r, "counters offloaded %" PRIu64 " written %" PRIu64 " reloaded %" PRIu64 "+%" PRIu64 ", model %" PRIu64
             " %" PRIu64 " %" PRIu64 "+%" PRIu64, c->offloaded, c->written, c->reloaded_host, c->reloaded_file,
             m->offloaded, m->written, m->reloaded_host, m->reloaded_file);
    if (c->failures != 0 || c->damaged != 0)
        fail(r, "the tiers counted %" PRIu64 " failures and %" PRIu64 " damaged units", c->failures, c->damaged);
    if (r->rec_used != r->nrec)
        fail(r, "the hook saw %" PRIu32 " evictions, the model replayed %" PRIu32, r->nrec, r->rec_used);
    r->nrec = r->rec_used = 0;
    check_events(r);
}

/* ---- the pool under test --------------------------------------------------------------- */

/* The allocator's eviction hook: records the block for the model, then hands it to the
 * tiers as a pool does. */
static void on_evict(void *ctx, int32_t block, uint32_t tenant, const paged_hash *hash)
{
    run *r = ctx;
    if (r->nrec < MAXREC) {
        r->rec_block[r->nrec] = block;
        r->rec_key[r->nrec] = key_of(r, tenant, hash);
        r->nrec++;
    } else {
        fail(r, "more than %d evictions in one operation", MAXREC);
    }
    pd_tiers_evicted(r->t, block, tenant, hash);
}

/* The allocator's publication hook: logs the block as stored, as a pool does. */
static void on_publish(void *ctx, int32_t block, uint32_t tenant, const paged_hash *hash)
{
    (void) block;
    run *r = ctx;
    pd_blocklog_add(&r->log, PD_BLOCK_STORED, PD_TIER_POOL, tenant, hash);
}

/* Creates the allocator and the tiers over the pool's memory (zeroed), the file tier over
 * what the directory holds. Returns nothing (bails out on failure). */
static void open_pool(run *r)
{
    memset(r->pool_mem, 0, NBLOCKS * UNIT_BYTES);
    r->a = pa_create(NBLOCKS);
    if (r->a == NULL)
        bail("pa_create failed");
    pa_set_evict_hook(r->a, on_evict, r);
    pa_set_publish_hook(r->a, on_publish, r);
    pa_set_clock(r->a, fake_clock);
    pa_set_index_seed(r->a, r->seed);
    const struct pd_tiers_spec spec = {
        .host_units = HOST_UNITS, .file_dir = r->dir,
        .file_bytes = FILE_UNITS * (UNIT_BYTES + pt_file_header_bytes()),
        .owner_uid = 1000, .pool_name = "model", .k_scale = 1.0f, .v_scale = 1.0f,
    };
    char *cause = NULL;
    if (pd_tiers_create(&r->backend, NULL, &r->cache, r->a, &r->log, &spec, &r->t, &cause) != PAGED_OK)
        bail("pd_tiers_create: %s", cause != NULL ? cause : "?");
    if (r->t->unit_bytes != UNIT_BYTES)
        bail("unit of %" PRIu64 " bytes, expected %zu", r->t->unit_bytes, (size_t) UNIT_BYTES);
}

/* Frees the tiers (keeping the files) and the allocator. Returns nothing. */
static void close_pool(run *r)
{
    pd_tiers_destroy(r->t, 0);
    pa_destroy(r->a);
    r->t = NULL;
    r->a = NULL;
}

/* ---- operations ------------------------------------------------------------------------ */

/* Picks a prompt's chain in a tenant, n long: fills keys and hashes. Returns nothing. */
static void pick_chain(run *r, uint32_t n, int32_t *keys, paged_hash *hashes)
{
    int p = (int) tap_rng_below(&r->rng, NPROMPT), ti = (int) tap_rng_below(&r->rng, NTEN);
    for (uint32_t i = 0; i < n; i++) {
        keys[i] = ti * NHASH + r->chain[p][i];
        hashes[i] = r->hashes[r->chain[p][i]];
    }
}

/* A client computes a prompt's blocks: allocates them (which may offload), writes their
 * bytes and publishes them, keeping its references. Returns nothing. */
static void op_publish(run *r, int h)
{
    uint32_t n = 1 + (uint32_t) tap_rng_below(&r->rng, CHAIN);
    int32_t keys[CHAIN], ids[CHAIN];
    paged_hash hashes[CHAIN];
    pick_chain(r, n, keys, hashes);
    if (r->nheld[h] + n > MAXHELD)
        return;
    int rc = pa_alloc_blocks(r->a, holder_ids[h], n, ids);
    pd_tiers_flush(r->t);
    if (!m_alloc(r, h, n, rc, ids, 0))
        return;
    for (uint32_t i = 0; i < n; i++)
        hold(r, h, ids[i]);
    check_all(r);
    model *m = &r->m;
    static unsigned char unit[UNIT_BYTES];
    for (uint32_t i = 0; i < n; i++) {
        if (gone(m, keys[i]))
            m->gen[keys[i]]++;
        key_content(r, keys[i], m->gen[keys[i]], unit);
        write_block(r, ids[i], unit);
    }
    uint32_t want = 0;
    for (uint32_t i = 0; i < n; i++)
        if (m->key_block[keys[i]] < 0) {
            m->key_block[keys[i]] = ids[i];
            m->block_key[ids[i]] = keys[i];
            expect_event(r, PD_BLOCK_STORED, PD_TIER_POOL, keys[i]);
            want++;
        }
    int got = pa_publish(r->a, holder_ids[h], key_tenant(keys[0]), n, ids, hashes, NULL);
    if (got != (int) want)
        fail(r, "pa_publish of %" PRIu32 " blocks published %d, model %" PRIu32, n, got, want);
}

/* Drops one reference of holder slot h to block b in the model. Returns nothing. */
static void m_unref(model *m, int h, int32_t b)
{
    m->refs[h][b]--;
}

/* A client frees some of its references (blocks become cached or free). Returns nothing. */
static void op_free(run *r, int h)
{
    if (r->nheld[h] == 0)
        return;
    uint32_t n = 1 + (uint32_t) tap_rng_below(&r->rng, r->nheld[h]);
    int32_t ids[MAXHELD];
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = (uint32_t) tap_rng_below(&r->rng, r->nheld[h]);
        ids[i] = r->held[h][j];
        r->held[h][j] = r->held[h][--r->nheld[h]];
        m_unref(&r->m, h, ids[i]);
    }
    int rc = pa_free_blocks(r->a, holder_ids[h], n, ids, NULL);
    if (rc != PAGED_OK)
        fail(r, "pa_free_blocks of %" PRIu32 " references returned %d", n, rc);
}

/* A client takes blocks to write (pressure: allocations that offload), fills them with noise
 * and keeps them unpublished. Returns nothing. */
static void op_scratch(run *r, int h)
{
    uint32_t n = 1 + (uint32_t) tap_rng_below(&r->rng, 6);
    int32_t ids[8];
    if (r->nheld[h] + n > MAXHELD)
        return;
    int rc = pa_alloc_blocks(r->a, holder_ids[h], n, ids);
    pd_tiers_flush(r->t);
    if (!m_alloc(r, h, n, rc, ids, 0))
        return;
    static unsigned char unit[UNIT_BYTES];
    for (uint32_t i = 0; i < n; i++) {
        hold(r, h, ids[i]);
        key_content(r, -1 - (int32_t) r->op, (uint32_t) i, unit);
        write_block(r, ids[i], unit);
    }
}

/* Takes the keys from found on that the model's pool holds, one reference each for holder
 * slot h, into want. Returns the new found. */
static uint32_t m_pool_prefix(model *m, int h, uint32_t n, const int32_t *keys, uint32_t found, int32_t *want)
{
    while (found < n && m->key_block[keys[found]] >= 0) {
        want[found] = m->key_block[keys[found]];
        m->refs[h][want[found]]++;
        found++;
    }
    return found;
}

/* Replays pd_tiers_lookup in the model from found: rounds of units gathered from the host
 * tier (and staged from the file tier through it) up to its capacity, reloaded into blocks
 * allocated (which may evict, read from the hook), then what the pool holds after them.
 * got_ids: the blocks the lookup returned (the model checks those of reloads were free).
 * Returns the model's length of the prefix held. */
static uint32_t m_tiers_lookup(run *r, int h, uint32_t n, const int32_t *keys, uint32_t found,
                               const int32_t *got_ids, uint32_t got, int32_t *want)
{
    model *m = &r->m;
    while (found < n && !r->failed) {
        int32_t taken[HOST_UNITS];
        bool from_file[HOST_UNITS];
        uint32_t nt = 0;
        while (found + nt < n && nt < ROUND_UNITS) {
            int32_t k = keys[found + nt];
            if (m->key_block[k] >= 0)
                break;
            from_file[nt] = false;
            if (m->in_host[k]) {
                m_host_remove(m, k);
            } else if (m->in_file[k]) {
                bool fresh;
                if (!m_host_put(r, k, nt, &fresh))
                    return fail(r, "the model found no host slot to stage a unit in"), found;
                if (!m->in_file[k]) {
                    /* Pushing the oldest unit out to the file tier dropped this one. */
                    m_host_remove(m, k);
                    break;
                }
                m_file_touch(m, k);
                m_host_remove(m, k);
                from_file[nt] = true;
            } else {
                break;
            }
            taken[nt++] = k;
            m->taken[k] = true;
        }
        if (nt == 0)
            break;
        uint32_t referenced, cached;
        m_block_counts(m, &referenced, &cached);
        if (nt > NBLOCKS - referenced) {
            for (uint32_t i = 0; i < nt; i++) {
                m->taken[taken[i]] = false;
                m_host_append(r, taken[i]);
            }
            r->reload_nospc++;
            break;
        }
        if (found + nt > got)
            return fail(r, "the lookup returned %" PRIu32 " blocks, the model reloads %" PRIu32, got, found + nt),
                   found;
        if (!m_alloc(r, h, nt, PAGED_OK, got_ids + found, nt))
            return found;
        for (uint32_t i = 0; i < nt; i++) {
            int32_t k = taken[i], b = got_ids[found + i];
            m->taken[k] = false;
            want[found + i] = b;
            m->key_block[k] = b;
            m->block_key[b] = k;
            expect_event(r, PD_BLOCK_STORED, PD_TIER_POOL, k);
            expect_event(r, PD_BLOCK_RELOADED, from_file[i] ? PD_TIER_FILE : PD_TIER_HOST, k);
            if (from_file[i])
                m->reloaded_file++;
            else
                m->reloaded_host++;
        }
        found = m_pool_prefix(m, h, n, keys, found + nt, want);
    }
    return found;
}

/* A client looks a prompt up: the pool, then the tiers. Checks the prefix's length and every
 * block's bytes against the model; keeps the references or frees them. Returns nothing. */
static void op_lookup(run *r, int h)
{
    uint32_t n = 1 + (uint32_t) tap_rng_below(&r->rng, CHAIN);
    int32_t keys[CHAIN], ids[CHAIN], want[CHAIN];
    paged_hash hashes[CHAIN];
    pick_chain(r, n, keys, hashes);
    if (r->nheld[h] + n > MAXHELD)
        return;
    uint32_t ten = key_tenant(keys[0]);
    uint32_t found = pa_lookup(r->a, holder_ids[h], ten, n, hashes, ids);
    struct pd_tier_reload split;
    const uint64_t host0 = r->t->counts.reloaded_host, file0 = r->t->counts.reloaded_file;
    uint32_t got = pd_tiers_lookup(r->t, holder_ids[h], ten, n, hashes, ids, found, &split);
    if (split.host != r->t->counts.reloaded_host - host0 || split.file != r->t->counts.reloaded_file - file0
        || split.host + split.file > got - found)
        fail(r, "pd_tiers_lookup says it reloaded %" PRIu32 " from the host tier and %" PRIu32
             " from files of %" PRIu32 " found past the pool", split.host, split.file, got - found);
    model *m = &r->m;
    uint32_t m_found = m_pool_prefix(m, h, n, keys, 0, want);
    if (found != m_found)
        fail(r, "pa_lookup found %" PRIu32 " of %" PRIu32 ", model %" PRIu32, found, n, m_found);
    uint32_t m_got = m_tiers_lookup(r, h, n, keys, m_found, ids, got, want);
    if (r->failed)
        return;
    if (got != m_got)
        fail(r, "the lookup of %" PRIu32 " blocks held %" PRIu32 ", model %" PRIu32, n, got, m_got);
    r->lookups++;
    r->hits += got;
    static unsigned char unit[UNIT_BYTES];
    for (uint32_t i = 0; i < got && !r->failed; i++) {
        if (ids[i] != want[i])
            fail(r, "the lookup's block %" PRIu32 " is %d, model %d", i, ids[i], want[i]);
        key_content(r, keys[i], m->gen[keys[i]], unit);
        if (!block_holds(r, ids[i], unit))
            fail(r, "the lookup's block %" PRIu32 " (%d, key %d) does not hold generation %" PRIu32 "'s bytes", i,
                 ids[i], keys[i], m->gen[keys[i]]);
    }
    if (tap_rng_below(&r->rng, 2) == 0) {
        for (uint32_t i = 0; i < got; i++)
            m_unref(m, h, ids[i]);
        if (got > 0 && pa_free_blocks(r->a, holder_ids[h], got, ids, NULL) != PAGED_OK)
            fail(r, "freeing the lookup's blocks failed");
    } else {
        for (uint32_t i = 0; i < got; i++)
            hold(r, h, ids[i]);
    }
}

/* Evicts a prompt's prefix from the pool and the tiers, as PREFIX EVICT does. Returns
 * nothing. */
static void op_evict_prefix(run *r)
{
    uint32_t n = 1 + (uint32_t) tap_rng_below(&r->rng, CHAIN);
    int32_t keys[CHAIN];
    paged_hash hashes[CHAIN];
    pick_chain(r, n, keys, hashes);
    uint32_t ten = key_tenant(keys[0]);
    int dropped = pd_tiers_evict_prefix(r->t, r->a, r->t->log, ten, n, hashes, 0, 1, NULL);
    model *m = &r->m;
    uint32_t m_known = 0;
    while (m_known < n && m->key_block[keys[m_known]] >= 0)
        m_known++;
    bool referenced[CHAIN] = { false };
    for (uint32_t i = m_known; i-- > 0;) {
        int32_t k = keys[i], b = m->key_block[k];
        if (m_refs(m, b) == 0) {
            if (r->rec_used >= r->nrec || r->rec_block[r->rec_used] != b)
                fail(r, "evicting a prefix did not evict cached block %d first", b);
            m_replay_eviction(r, true, 0);
        } else {
            /* Referenced: it leaves the index with no hook call; REMOVED unless a tier has it. */
            m->key_block[k] = -1;
            m->block_key[b] = -1;
            referenced[i] = true;
        }
    }
    for (uint32_t j = 0; j < m_known; j++)
        if (referenced[j])
            note_left(r, PD_TIER_POOL, keys[j]);
    uint32_t i;
    for (i = 0; i < n; i++) {
        int32_t k = keys[i];
        bool in_host = m_host_remove(m, k), in_file = m_file_remove(m, k);
        if (!in_host && !in_file) {
            if (i >= m_known)
                break;
            continue;
        }
        note_left(r, in_file ? PD_TIER_FILE : PD_TIER_HOST, k);
    }
    uint32_t m_dropped = i > m_known ? i : m_known;
    if (dropped != (int) m_dropped)
        fail(r, "pd_tiers_evict_prefix of %" PRIu32 " returned %d, model %" PRIu32, n, dropped, m_dropped);
    r->removed_prefix += m_dropped;
}

/* Evicts every cached block (EVICT), each to the host tier. Returns nothing. */
static void op_evict_all(run *r)
{
    uint32_t n = pa_evict_cached(r->a);
    pd_tiers_flush(r->t);
    uint32_t referenced, cached;
    m_block_counts(&r->m, &referenced, &cached);
    if (n != cached || r->nrec != cached)
        fail(r, "pa_evict_cached evicted %" PRIu32 " (%" PRIu32 " hook calls), model %" PRIu32, n, r->nrec, cached);
    while (r->rec_used < r->nrec && !r->failed)
        m_replay_eviction(r, false, 0);
    r->evict_alls++;
}

/* A client dies: every reference it had goes. Returns nothing. */
static void op_kill(run *r, int h)
{
    uint32_t total = 0;
    for (int32_t b = 0; b < NBLOCKS; b++) {
        total += r->m.refs[h][b];
        r->m.refs[h][b] = 0;
    }
    r->nheld[h] = 0;
    uint32_t n = pa_release_holder(r->a, holder_ids[h]);
    if (n != total)
        fail(r, "pa_release_holder dropped %" PRIu32 " references, model %" PRIu32, n, total);
    r->kills++;
}

/* Expires cached blocks (the allocator's clock) and host units stored before a recent
 * operation, dropping them. Returns nothing. */
static void op_expire(run *r)
{
    uint64_t ttl = 1 + tap_rng_below(&r->rng, 60);
    r->t->dropping = 1;
    uint32_t n = pa_expire(r->a, ttl);
    r->t->dropping = 0;
    if (n != r->nrec)
        fail(r, "pa_expire evicted %" PRIu32 " with %" PRIu32 " hook calls", n, r->nrec);
    while (r->rec_used < r->nrec && !r->failed)
        m_replay_eviction(r, true, 0);
    uint64_t cutoff = r->op > 40 ? r->op - tap_rng_below(&r->rng, 40) : r->op;
    const uint64_t host_ttl = 1000000000ull;
    uint32_t dropped = pd_tiers_expire(r->t, r->epoch_ns[cutoff] + host_ttl, host_ttl);
    uint32_t m_dropped = 0;
    while (r->m.nhost > 0 && r->m.host_stamp[r->m.host_lru[0]] < cutoff) {
        m_host_out(r, true);
        m_dropped++;
    }
    if (dropped != m_dropped)
        fail(r, "pd_tiers_expire dropped %" PRIu32 ", model %" PRIu32, dropped, m_dropped);
    r->expired_host += dropped;
}

/* The run whose file tier older_file sorts. */
static run *sort_run;

/* Orders keys of sort_run's file tier by their files' modification times, then tenant and
 * hash, as a daemon that starts adopts them. Returns <0, 0, >0. */
static int older_file(const void *x, const void *y)
{
    int32_t kx = *(const int32_t *) x, ky = *(const int32_t *) y;
    struct stat sx, sy;
    char nx[256], ny[256];
    snprintf(nx, sizeof nx, "%s/%08" PRIx32 "-%016" PRIx64 "%016" PRIx64 ".unit", sort_run->pool_dir,
             key_tenant(kx), key_hash(sort_run, kx)->hi, key_hash(sort_run, kx)->lo);
    snprintf(ny, sizeof ny, "%s/%08" PRIx32 "-%016" PRIx64 "%016" PRIx64 ".unit", sort_run->pool_dir,
             key_tenant(ky), key_hash(sort_run, ky)->hi, key_hash(sort_run, ky)->lo);
    if (stat(nx, &sx) != 0 || stat(ny, &sy) != 0)
        return 0;
    if (sx.st_mtim.tv_sec != sy.st_mtim.tv_sec)
        return sx.st_mtim.tv_sec < sy.st_mtim.tv_sec ? -1 : 1;
    if (sx.st_mtim.tv_nsec != sy.st_mtim.tv_nsec)
        return sx.st_mtim.tv_nsec < sy.st_mtim.tv_nsec ? -1 : 1;
    if (key_tenant(kx) != key_tenant(ky))
        return key_tenant(kx) < key_tenant(ky) ? -1 : 1;
    const paged_hash *hx = key_hash(sort_run, kx), *hy = key_hash(sort_run, ky);
    if (hx->hi != hy->hi)
        return hx->hi < hy->hi ? -1 : 1;
    return hx->lo < hy->lo ? -1 : hx->lo > hy->lo;
}

/* The daemon restarts: the pool and the host tier are lost, the file tier is adopted again
 * from its directory. Returns nothing. */
static void op_restart(run *r)
{
    close_pool(r);
    model *m = &r->m;
    for (int32_t k = 0; k < NKEYS; k++) {
        m->key_block[k] = -1;
        m->in_host[k] = false;
    }
    for (int32_t b = 0; b < NBLOCKS; b++)
        m->block_key[b] = -1;
    memset(m->refs, 0, sizeof m->refs);
    memset(r->nheld, 0, sizeof r->nheld);
    m->nhost = 0;
    r->offloaded += m->offloaded;
    r->written += m->written;
    r->reloaded_host += m->reloaded_host;
    r->reloaded_file += m->reloaded_file;
    m->offloaded = m->written = m->reloaded_host = m->reloaded_file = 0;
    sort_run = r;
    qsort(m->file_lru, m->nfile, sizeof *m->file_lru, older_file);
    open_pool(r);
    if (r->t->counts.damaged != 0)
        fail(r, "reopening the file tier dropped %" PRIu64 " files", r->t->counts.damaged);
    r->restarts++;
}

/* Runs one random operation and the checks after it. */
static void step(run *r)
{
    r->epoch_ns[r->op] = pcore_now_ns();
    while (pcore_now_ns() == r->epoch_ns[r->op])
        ;
    fake_now++;
    int h = (int) tap_rng_below(&r->rng, NHOLD);
    uint64_t dice = tap_rng_below(&r->rng, 1000);
    if (dice < 250)
        op_publish(r, h);
    else if (dice < 450)
        op_free(r, h);
    else if (dice < 700)
        op_lookup(r, h);
    else if (dice < 800)
        op_scratch(r, h);
    else if (dice < 850)
        op_evict_prefix(r);
    else if (dice < 880)
        op_evict_all(r);
    else if (dice < 940)
        op_kill(r, h);
    else if (dice < 995)
        op_expire(r);
    else
        op_restart(r);
    if (!r->failed)
        check_all(r);
}

/* Makes the hash universe: each prompt's chain, sharing a head with an earlier prompt's at
 * times. Returns nothing. */
static void make_prompts(run *r)
{
    int32_t next = 0;
    for (int p = 0; p < NPROMPT; p++) {
        uint32_t shared = p > 0 && tap_rng_below(&r->rng, 2) == 0 ? 1 + (uint32_t) tap_rng_below(&r->rng, CHAIN - 1)
                                                                 : 0;
        int parent = p > 0 ? (int) tap_rng_below(&r->rng, (uint64_t) p) : 0;
        for (uint32_t i = 0; i < CHAIN; i++) {
            if (i < shared) {
                r->chain[p][i] = r->chain[parent][i];
                continue;
            }
            r->chain[p][i] = next;
            r->hashes[next].lo = tap_rng_u64(&r->rng);
            r->hashes[next].hi = tap_rng_u64(&r->rng);
            next++;
        }
    }
    for (int32_t h = next; h < NHASH; h++)
        r->hashes[h] = (paged_hash) { tap_rng_u64(&r->rng), tap_rng_u64(&r->rng) };
}

/* Releases every holder, evicts everything cached and checks that no block is left taken.
 * Returns nothing. */
static void finish(run *r)
{
    for (int h = 0; h < NHOLD && !r->failed; h++) {
        op_kill(r, h);
        check_all(r);
    }
    if (r->failed)
        return;
    op_evict_all(r);
    check_all(r);
    pa_counts pc;
    pa_get_counts(r->a, &pc);
    if (pc.free != NBLOCKS)
        fail(r, "after releasing and evicting everything %" PRIu32 " of %d blocks are free", pc.free, NBLOCKS);
}

/* Runs one seeded run of OPS_PER_RUN operations on a fresh pool and file directory. */
static void run_one(run *r, int index, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    r->index = index;
    r->seed = seed;
    tap_rng_seed(&r->rng, seed);
    make_prompts(r);
    for (int32_t k = 0; k < NKEYS; k++)
        r->m.key_block[k] = -1;
    for (int32_t b = 0; b < NBLOCKS; b++)
        r->m.block_key[b] = -1;
    r->ops.name = "model";
    r->backend.ops = &r->ops;
    r->pool_mem = bcalloc(NBLOCKS, UNIT_BYTES);
    r->cache = (pk_cache) {
        .base = r->pool_mem, .num_layers = NLAYERS, .num_blocks = NBLOCKS, .num_kv_heads = NHEADS,
        .head_dim = HEAD_DIM, .block_size = BLOCK_SIZE, .dtype = PAGED_DTYPE_F32, .k_scale = 1.0f, .v_scale = 1.0f,
    };
    r->log.enabled = 1;
    const char *tmp = getenv("TMPDIR");
    const int tmp_ok = tmp != NULL && *tmp != '\0' && strlen(tmp) < 30;
    snprintf(r->dir, sizeof r->dir, "%s/tiers-model-XXXXXX", tmp_ok ? tmp : "/tmp");
    if (mkdtemp(r->dir) == NULL)
        bail("mkdtemp %s failed", r->dir);
    snprintf(r->pool_dir, sizeof r->pool_dir, "%s/1000-model", r->dir);
    open_pool(r);
    for (r->op = 0; r->op < OPS_PER_RUN && !r->failed; r->op++)
        step(r);
    if (!r->failed)
        finish(r);
    pd_tiers_destroy(r->t, 1);
    pa_destroy(r->a);
    rmdir(r->dir);
    pd_blocklog_free(&r->log);
    free(r->pool_mem);
}

/* Runs RUNS seeded runs, one TAP line each, and the coverage lines. */
int main(void)
{
    static run r;
    uint64_t seed = tap_seed();
    plan(RUNS + 3);
    pd_log_set_level(PD_LOG_WARNING);
    uint64_t lookups = 0, hits = 0, nospc = 0, trims = 0, restarts = 0, expired = 0, removed = 0;
    uint64_t reloaded_host = 0, reloaded_file = 0, offloaded = 0, written = 0, ops = 0;
    for (int i = 0; i < RUNS; i++) {
        const int64_t t0 = tap_now_ns();
        run_one(&r, i, seed + (uint64_t) i);
        if (!ok(!r.failed, "run %d (seed %" PRIu64 "): %" PRIu64 " operations, the tiers match the model", i,
                seed + (uint64_t) i, r.op))
            diag("first failure: %s", r.first);
        diag("run %d: %" PRIu64 " lookups holding %" PRIu64 " blocks, %" PRIu64 " reloads refused for space, %"
             PRIu64 " file trims, %" PRIu64 " restarts, %" PRIu64 " host units expired, %" PRIu64
             " blocks evicted by prefix, %.2f s", i, r.lookups, r.hits, r.reload_nospc, r.trims, r.restarts,
             r.expired_host, r.removed_prefix, (double) (tap_now_ns() - t0) / 1e9);
        lookups += r.lookups;
        hits += r.hits;
        nospc += r.reload_nospc;
        trims += r.trims;
        restarts += r.restarts;
        expired += r.expired_host;
        removed += r.removed_prefix;
        offloaded += r.offloaded + r.m.offloaded;
        written += r.written + r.m.written;
        reloaded_host += r.reloaded_host + r.m.reloaded_host;
        reloaded_file += r.reloaded_file + r.m.reloaded_file;
        ops += r.op;
    }
    diag("the tiers' counters, summed: %" PRIu64 " offloaded, %" PRIu64 " written, %" PRIu64
         " reloaded from host, %" PRIu64 " from file", offloaded, written, reloaded_host, reloaded_file);
    ok(ops == (uint64_t) RUNS * OPS_PER_RUN, "%" PRIu64 " operations in all", ops);
    ok(lookups >= 1000 && reloaded_host >= 20 && reloaded_file >= 20 && trims > 0 && expired > 0 && removed > 0,
       "lookups, reloads from both tiers, file trims, host expiry and evictions by prefix were exercised");
    ok(restarts > 0 && nospc > 0, "restarts (%" PRIu64 ") and reloads refused for space (%" PRIu64 ") happened",
       restarts, nospc);
    return 0;
}
