/* tiers.c: a pool's host and file tiers: offload on eviction, reload on LOOKUP, their counters. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/tier/tiers.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "daemon/util/heap.h"
#include "daemon/util/log.h"
#include "lib/core/clock.h"

/* Returns the address of host slot s; see tiers.h. */
unsigned char *pd_tiers_slot_mem(const struct pd_tiers *t, int32_t s)
{
    return t->host_mem + (uint64_t) s * t->unit_bytes;
}

/* Returns whether (tenant, hash) is still anywhere in the pool or its tiers, a slot a reload
 * round has taken included. */
static int still_held(const struct pd_tiers *t, uint32_t tenant, const paged_hash *hash)
{
    if (pa_find(t->alloc, tenant, hash) >= 0 || pt_host_find(t->host, tenant, hash) >= 0
        || (t->file != NULL && pt_file_has(t->file, tenant, hash)))
        return 1;
    /* A unit a reload round has taken is out of the host tier's index but not gone: it is
     * reloaded or put back. Without this, a file trim of its copy while the round staged the
     * next unit logged REMOVED, and a reload refused for space then put it back unannounced. */
    for (uint32_t i = 0; i < t->round_n; i++) {
        uint32_t taken_tenant;
        paged_hash taken_hash;
        if (pt_host_slot_key(t->host, t->round_slots[i], &taken_tenant, &taken_hash) == 0 && taken_tenant == tenant
            && taken_hash.lo == hash->lo && taken_hash.hi == hash->hi)
            return 1;
    }
    return 0;
}

/* Records that a unit left tier, gone from the daemon unless another tier holds it still. */
static void note_gone(struct pd_tiers *t, enum pd_block_tier tier, uint32_t tenant, const paged_hash *hash)
{
    if (!still_held(t, tenant, hash))
        pd_blocklog_add(t->log, PD_BLOCK_REMOVED, tier, tenant, hash);
}

/* Copies n blocks of a pool to or from units through b, or in host memory; see tiers.h. */
int pd_units_copy(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, int to_units, uint32_t n,
                  const int32_t *blocks, unsigned char *const *units, char **cause)
{
    if (b->ops->units_copy == NULL)
        return pd_tiers_copy_host(cache, to_units, n, blocks, units);
    return b->ops->units_copy(b, mem, cache, to_units, n, blocks, units, cause);
}

/* Copies n blocks to or from the tier's units, logging and counting a failure; see tiers.h. */
int pd_tiers_copy_units(struct pd_tiers *t, int to_units, uint32_t n, const int32_t *blocks,
                        unsigned char *const *units)
{
    char *cause = NULL;
    int rc = pd_units_copy(t->b, t->mem, t->cache, to_units, n, blocks, units, &cause);
    if (rc < 0) {
        pd_log(PD_LOG_WARNING, "tiers: copying %u blocks %s the host tier failed: %s", n,
               to_units ? "to" : "from", cause != NULL ? cause : paged_strerror(rc));
        t->counts.failures++;
    }
    free(cause);
    return rc;
}

/* Copies n blocks to or from units in host memory (the pool's memory is host memory); see
 * tiers.h. */
int pd_tiers_copy_host(const pk_cache *cache, int to_units, uint32_t n, const int32_t *blocks,
                       unsigned char *const *units)
{
    const size_t es = pk_dtype_size(cache->dtype);
    const size_t piece = (size_t) cache->num_kv_heads * (size_t) cache->block_size * (size_t) cache->head_dim * es;
    const size_t planes = (size_t) cache->num_layers * 2;
    unsigned char *base = cache->base;
    for (uint32_t i = 0; i < n; i++)
        for (size_t pl = 0; pl < planes; pl++) {
            unsigned char *in_pool = base + (pl * (size_t) cache->num_blocks + (size_t) blocks[i]) * piece;
            unsigned char *in_unit = units[i] + pl * piece;
            if (to_units)
                memcpy(in_unit, in_pool, piece);
            else
                memcpy(in_pool, in_unit, piece);
        }
    return PAGED_OK;
}

/* Drops the unit at host slot s, whose copy failed, from the host tier (not from within a
 * pt_host callback). */
static void drop_bad(struct pd_tiers *t, int32_t s)
{
    uint32_t tenant;
    paged_hash hash;
    t->slot_bad[s] = 0;
    if (pt_host_slot_key(t->host, s, &tenant, &hash) == 0 && pt_host_remove(t->host, tenant, &hash)) {
        t->counts.dropped++;
        note_gone(t, PD_TIER_HOST, tenant, &hash);
    }
}

/* Settles the pending offloads after their copy ran with status rc in ns: counts them, or
 * marks their slots bad, and outside a pt_host callback (in_callback 0) drops those at once.
 * Returns nothing. */
static void pend_done(struct pd_tiers *t, int rc, uint64_t ns, int in_callback)
{
    const uint32_t n = t->npend;
    t->npend = 0;
    for (uint32_t i = 0; i < n; i++) {
        t->slot_pending[t->pend_slot[i]] = 0;
        if (rc < 0)
            t->slot_bad[t->pend_slot[i]] = 1;
    }
    if (rc == PAGED_OK) {
        t->counts.offloaded += n;
        t->counts.offload_ns += ns;
    } else if (!in_callback)
        for (uint32_t i = 0; i < n; i++)
            drop_bad(t, t->pend_slot[i]);
}

/* Runs the pending offload copies; a failed copy marks its slots bad, and outside a pt_host
 * callback (in_callback 0) drops them at once. Returns nothing. */
static void flush(struct pd_tiers *t, int in_callback)
{
    if (t->npend == 0)
        return;
    unsigned char **units = pd_malloc((size_t) t->npend * sizeof *units);
    int rc = PAGED_E_NOMEM;
    const uint64_t t0 = pcore_now_ns();
    if (units != NULL) {
        for (uint32_t i = 0; i < t->npend; i++)
            units[i] = pd_tiers_slot_mem(t, t->pend_slot[i]);
        rc = pd_tiers_copy_units(t, 1, t->npend, t->pend_block, units);
        free(units);
    }
    pend_done(t, rc, pcore_now_ns() - t0, in_callback);
}

/* Runs the pending offload copies; see tiers.h. */
void pd_tiers_flush(struct pd_tiers *t)
{
    if (t != NULL)
        flush(t, 0);
}

/* The file tier's trim: a unit file dropped to keep the tier within its capacity (ctx: the
 * tiers). Counts it and records its removal where no other tier holds it. Returns nothing. */
static void file_out(void *ctx, uint32_t tenant, const paged_hash *hash)
{
    struct pd_tiers *t = ctx;
    t->counts.dropped++;
    note_gone(t, PD_TIER_FILE, tenant, hash);
}

/* The host tier's push-out: writes the unit at slot to the file tier, or drops it. Called by
 * pt_host_put, pt_host_expire and pt_host_drop_all (ctx: the tiers) before the slot is
 * reused; a pending copy into the slot runs first. */
static void host_out(void *ctx, int32_t slot, uint32_t tenant, const paged_hash *hash)
{
    struct pd_tiers *t = ctx;
    if (t->slot_pending[slot])
        flush(t, 1);
    const int bad = t->slot_bad[slot];
    t->slot_bad[slot] = 0;
    if (t->file != NULL && !t->dropping && !bad) {
        char why[256];
        /* file_out hears of the units the write pushes out of the file tier: without it a unit
         * dropped there for room left no REMOVED event, and subscribers kept it listed. */
        int rc = pt_file_put(t->file, tenant, hash, pd_tiers_slot_mem(t, slot), file_out, t, why, sizeof why);
        if (rc == PAGED_OK) {
            t->counts.written++;
            pd_blocklog_add(t->log, PD_BLOCK_OFFLOADED, PD_TIER_FILE, tenant, hash);
            return;
        }
        t->counts.failures++;
        pd_log(PD_LOG_WARNING, "tiers: %s", why);
    }
    t->counts.dropped++;
    /* The host tier lets go of it: what holds it still is the pool or the file tier. */
    if (pa_find(t->alloc, tenant, hash) < 0 && (t->file == NULL || !pt_file_has(t->file, tenant, hash)))
        pd_blocklog_add(t->log, PD_BLOCK_REMOVED, PD_TIER_HOST, tenant, hash);
}

/* The eviction hook's part; see tiers.h. */
void pd_tiers_evicted(struct pd_tiers *t, int32_t block, uint32_t tenant, const paged_hash *hash)
{
    if (!t->dropping && t->host_units != 0) {
        int fresh = 0;
        int32_t s = pt_host_put(t->host, tenant, hash, pcore_now_ns(), &fresh, host_out, t);
        if (s >= 0) {
            if (fresh || t->slot_bad[s]) {
                t->slot_bad[s] = 0;
                t->pend_block[t->npend] = block;
                t->pend_slot[t->npend] = s;
                t->npend++;
                t->slot_pending[s] = 1;
            }
            pd_blocklog_add(t->log, PD_BLOCK_OFFLOADED, PD_TIER_HOST, tenant, hash);
            return;
        }
    }
    if (!t->dropping)
        t->counts.dropped++;
    note_gone(t, PD_TIER_POOL, tenant, hash);
}

/* Brings the unit of (tenant, hash) from the file tier into a host slot and takes the slot.
 * Returns the slot, or -1 (no such file, no free slot, or a damaged file, now dropped). */
static int32_t stage_from_file(struct pd_tiers *t, uint32_t tenant, const paged_hash *hash)
{
    int fresh = 0;
    int32_t s = pt_host_put(t->host, tenant, hash, pcore_now_ns(), &fresh, host_out, t);
    if (s < 0)
        return -1;
    char why[256];
    int rc = pt_file_get(t->file, tenant, hash, pd_tiers_slot_mem(t, s), NULL, NULL, why, sizeof why);
    if (rc < 0) {
        pt_host_remove(t->host, tenant, hash);
        if (rc == PAGED_E_PROTO) {
            t->counts.damaged++;
            pd_log(PD_LOG_WARNING, "tiers: unit file refused: %s", why);
            note_gone(t, PD_TIER_FILE, tenant, hash);
        } else if (rc != PAGED_E_NOENT) {
            t->counts.failures++;
            pd_log(PD_LOG_WARNING, "tiers: %s", why);
        }
        return -1;
    }
    pt_host_take(t->host, s);
    return s;
}

/* Takes from the tiers the units of hashes[0..n) in order, up to round_max (half the host
 * tier, at least one), stopping at the first that is in neither tier or is in the pool; their
 * slots go to t->round_slots and whether each came from the file tier to t->round_from_file.
 * Returns how many. The other half keeps room for the blocks the round's allocation evicts:
 * each of them needs a slot that is not taken, or it would be dropped with a file tier behind. */
static uint32_t gather_round(struct pd_tiers *t, uint32_t tenant, uint32_t n, const paged_hash *hashes)
{
    int32_t *slots = t->round_slots;
    uint8_t *from_file = t->round_from_file;
    uint32_t r = 0;
    while (r < n && r < t->round_max) {
        const paged_hash *h = &hashes[r];
        if (pa_find(t->alloc, tenant, h) >= 0)
            break;
        int32_t s = pt_host_find(t->host, tenant, h);
        from_file[r] = 0;
        if (s >= 0 && t->slot_bad[s]) {
            drop_bad(t, s);
            s = -1;
        }
        if (s >= 0)
            pt_host_take(t->host, s);
        else if (t->file != NULL && pt_file_has(t->file, tenant, h)) {
            s = stage_from_file(t, tenant, h);
            from_file[r] = 1;
        }
        if (s < 0)
            break;
        slots[r++] = s;
        t->round_n = r;
    }
    return r;
}

/* Loads units into the r blocks ids that a reload allocated, and runs the offloads pending
 * from that allocation (which evicted some of those very blocks): together through the
 * backend's units_swap, so that saving a block overlaps loading the ones before it, where it
 * has one and every pending block is among ids; else the offloads first, then the loads.
 * Returns the loads' status (a failed swap fails the offloads too). */
static int swap_in(struct pd_tiers *t, uint32_t r, const int32_t *ids, unsigned char *const *units)
{
    unsigned char **save = NULL;
    uint32_t matched = 0;
    if (t->npend > 0 && t->b->ops->units_swap != NULL && (save = pd_calloc(r, sizeof *save)) != NULL)
        for (uint32_t j = 0; j < t->npend; j++)
            for (uint32_t i = 0; i < r; i++)
                if (ids[i] == t->pend_block[j] && save[i] == NULL) {
                    save[i] = pd_tiers_slot_mem(t, t->pend_slot[j]);
                    matched++;
                    break;
                }
    if (save == NULL || matched != t->npend) {
        free(save);
        pd_tiers_flush(t);
        return pd_tiers_copy_units(t, 0, r, ids, units);
    }
    char *cause = NULL;
    const uint64_t t0 = pcore_now_ns();
    int rc = t->b->ops->units_swap(t->b, t->mem, t->cache, r, ids, save, units, &cause);
    free(save);
    if (rc < 0) {
        pd_log(PD_LOG_WARNING, "tiers: swapping %u blocks with the host tier failed: %s", r,
               cause != NULL ? cause : paged_strerror(rc));
        t->counts.failures++;
    }
    free(cause);
    pend_done(t, rc, pcore_now_ns() - t0, 0);
    return rc;
}

/* Reloads the r units at slots into newly allocated blocks of holder, published under tenant
 * and hashes; returns PAGED_OK with the blocks in ids, or an error with every slot put back. */
static int reload_round(struct pd_tiers *t, uint32_t holder, uint32_t tenant, uint32_t r,
                        const paged_hash *hashes, const int32_t *slots, const uint8_t *from_file, int32_t *ids)
{
    unsigned char **units = pd_malloc((size_t) r * sizeof *units);
    int rc = units != NULL ? pa_alloc_blocks(t->alloc, holder, r, ids) : PAGED_E_NOMEM;
    if (rc == PAGED_OK) {
        for (uint32_t i = 0; i < r; i++)
            units[i] = pd_tiers_slot_mem(t, slots[i]);
        rc = swap_in(t, r, ids, units);
        if (rc < 0)
            (void) pa_free_blocks(t->alloc, holder, r, ids, NULL);
    } else
        pd_tiers_flush(t);
    free(units);
    uint64_t now = pcore_now_ns();
    for (uint32_t i = 0; i < r; i++) {
        if (rc < 0) {
            (void) pt_host_restore(t->host, slots[i], now);
            continue;
        }
        (void) pt_host_release(t->host, slots[i]);
        t->reloading = 1;   /* a block back, not a new one: RELOADED, not STORED */
        (void) pa_publish(t->alloc, holder, tenant, 1, &ids[i], &hashes[i], NULL);
        t->reloading = 0;
        pd_blocklog_add(t->log, PD_BLOCK_RELOADED, from_file[i] ? PD_TIER_FILE : PD_TIER_HOST, tenant, &hashes[i]);
        if (from_file[i])
            t->counts.reloaded_file++;
        else
            t->counts.reloaded_host++;
    }
    t->round_n = 0;
    return rc;
}

/* Continues a LOOKUP from the tiers; see tiers.h. */
uint32_t pd_tiers_lookup(struct pd_tiers *t, uint32_t holder, uint32_t tenant, uint32_t n,
                         const paged_hash *hashes, int32_t *ids, uint32_t found, struct pd_tier_reload *got)
{
    struct pd_tier_reload none;
    if (got == NULL)
        got = &none;
    memset(got, 0, sizeof *got);
    if (t == NULL || t->host_units == 0 || found >= n)
        return found;
    const uint64_t host0 = t->counts.reloaded_host, file0 = t->counts.reloaded_file;
    const uint64_t t0 = pcore_now_ns();
    int reloaded = 0;
    /* Bounded: every round takes at least one block or ends the loop. */
    while (found < n) {
        uint32_t r = gather_round(t, tenant, n - found, hashes + found);
        if (r == 0 || reload_round(t, holder, tenant, r, hashes + found, t->round_slots, t->round_from_file,
                                   ids + found) < 0)
            break;
        reloaded = 1;
        found += r;
        found += pa_lookup_continue(t->alloc, holder, tenant, n - found, hashes + found, ids + found);
    }
    if (reloaded) {
        got->ns = pcore_now_ns() - t0;
        got->host = (uint32_t) (t->counts.reloaded_host - host0);
        got->file = (uint32_t) (t->counts.reloaded_file - file0);
        t->counts.reloads++;
        t->counts.reload_ns += got->ns;
    }
    return found;
}

/* Drops a prefix from the host and file tiers; see tiers.h. */
uint32_t pd_tiers_remove(struct pd_tiers *t, uint32_t tenant, uint32_t n, const paged_hash *hashes,
                         uint32_t known)
{
    if (t == NULL)
        return known;
    uint32_t dropped = 0, i;
    for (i = 0; i < n; i++) {
        int32_t s = pt_host_find(t->host, tenant, &hashes[i]);
        if (s >= 0 && t->slot_pending[s])
            pd_tiers_flush(t);
        if (s >= 0)
            t->slot_bad[s] = 0;
        int in_host = pt_host_remove(t->host, tenant, &hashes[i]);
        int in_file = t->file != NULL && pt_file_remove(t->file, tenant, &hashes[i]);
        if (!in_host && !in_file) {
            if (i >= known)
                break;
            continue;
        }
        dropped++;
        note_gone(t, in_file ? PD_TIER_FILE : PD_TIER_HOST, tenant, &hashes[i]);
    }
    t->counts.dropped += dropped;
    return i > known ? i : known;
}

/* Evicts a prefix from the pool and the tiers, announcing the blocks in use; see tiers.h. */
int pd_tiers_evict_prefix(struct pd_tiers *t, pa_alloc *a, struct pd_blocklog *log, uint32_t tenant, uint32_t n,
                          const paged_hash *hashes, uint32_t who, int any, uint32_t *bad)
{
    uint8_t *in_use = pd_calloc(n > 0 ? n : 1, 1);
    if (in_use == NULL)
        return PAGED_E_NOMEM;
    for (uint32_t i = 0; i < n; i++) {
        pa_block_info bi;
        int32_t b = pa_find(a, tenant, &hashes[i]);
        if (b < 0 || pa_block_info_get(a, b, &bi) < 0)
            break;
        in_use[i] = bi.refcount > 0;
    }
    if (t != NULL)
        t->dropping = 1;
    int rc = pa_evict_prefix(a, tenant, n, hashes, who, any, bad);
    if (t != NULL)
        t->dropping = 0;
    /* Before the tiers drop their copies: a block they hold too is announced as they drop it. */
    for (int i = 0; i < rc; i++)
        if (in_use[i])
            pd_tiers_note_gone(t, log, PD_TIER_POOL, tenant, &hashes[i]);
    free(in_use);
    if (rc >= 0 && t != NULL)
        rc = (int) pd_tiers_remove(t, tenant, n, hashes, (uint32_t) rc);
    return rc;
}

/* Records a block gone from tier unless a tier holds it still; see tiers.h. */
void pd_tiers_note_gone(const struct pd_tiers *t, struct pd_blocklog *log, enum pd_block_tier tier, uint32_t tenant,
                        const paged_hash *hash)
{
    if (t == NULL || !still_held(t, tenant, hash))
        pd_blocklog_add(log, PD_BLOCK_REMOVED, tier, tenant, hash);
}

/* Drops the host tier's expired units; see tiers.h. */
uint32_t pd_tiers_expire(struct pd_tiers *t, uint64_t now, uint64_t ttl_ns)
{
    if (t == NULL || ttl_ns == 0)
        return 0;
    t->dropping = 1;
    uint32_t n = pt_host_expire(t->host, now, ttl_ns, host_out, t);
    t->dropping = 0;
    return n;
}

/* Returns when the host tier's oldest unit expires; see tiers.h. */
uint64_t pd_tiers_next_expiry(const struct pd_tiers *t, uint64_t ttl_ns)
{
    return t != NULL ? pt_host_next_expiry(t->host, ttl_ns) : UINT64_MAX;
}

/* Fills the tiers' fields of a LIST item; see tiers.h. */
void pd_tiers_item(const struct pd_tiers *t, uint32_t block_size, struct pcore_pool_item *it)
{
    pt_host_counts hc;
    pt_host_get_counts(t->host, &hc);
    it->host_units = hc.capacity;
    it->host_stored = hc.stored;
    if (t->file != NULL) {
        pt_file_counts fc;
        pt_file_get_counts(t->file, &fc);
        it->file_units = fc.units;
        it->file_bytes = fc.bytes;
    }
    const struct pd_tier_counts *c = &t->counts;
    it->host_hit_tokens = c->reloaded_host * block_size;
    it->file_hit_tokens = c->reloaded_file * block_size;
    it->offloaded_bytes = c->offloaded * t->unit_bytes;
    it->written_bytes = c->written * t->unit_bytes;
    it->reloaded_bytes = (c->reloaded_host + c->reloaded_file) * t->unit_bytes;
    it->reloads = c->reloads;
    it->reload_ns = c->reload_ns;
    it->offload_ns = c->offload_ns;
    it->tier_dropped = c->dropped;
    it->tier_damaged = c->damaged;
    it->tier_failures = c->failures;
}

/* Allocates host memory the backend copies units to and from; see tiers.h. */
int pd_tiers_host_alloc(pd_backend *b, uint64_t bytes, unsigned char **out, char **cause)
{
    void *p = NULL;
    int rc = PAGED_OK;
    if (b->ops->host_alloc != NULL)
        rc = b->ops->host_alloc(b, bytes, &p, cause);
    else {
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            p = NULL;
            *cause = strdup("no host memory for the host tier");
            rc = PAGED_E_NOMEM;
        }
    }
    *out = p;
    return rc;
}

/* Frees what pd_tiers_host_alloc gave; see tiers.h. */
void pd_tiers_host_free(pd_backend *b, unsigned char *p, uint64_t bytes)
{
    if (p == NULL)
        return;
    if (b->ops->host_free != NULL)
        b->ops->host_free(b, p, bytes);
    else
        munmap(p, bytes);
}

/* Frees the host tier's memory; returns nothing. */
static void free_host_mem(struct pd_tiers *t)
{
    pd_tiers_host_free(t->b, t->host_mem, (uint64_t) t->host_units * t->unit_bytes);
}

/* Creates a pool's tiers; see tiers.h. */
int pd_tiers_create(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, pa_alloc *alloc,
                    struct pd_blocklog *log, const struct pd_tiers_spec *spec, struct pd_tiers **out,
                    char **cause)
{
    *out = NULL;
    struct pd_tiers *t = pd_calloc(1, sizeof *t);
    if (t == NULL) {
        *cause = strdup("out of memory for the tiers");
        return PAGED_E_NOMEM;
    }
    t->b = b;
    t->mem = mem;
    t->cache = cache;
    t->alloc = alloc;
    t->log = log;
    t->unit_bytes = pk_cache_bytes(cache) / (uint64_t) cache->num_blocks;
    t->host_units = spec->host_units;
    uint32_t cap = spec->host_units;
    t->host = pt_host_create(cap);
    t->pend_block = pd_malloc((size_t) (cap + 1) * sizeof *t->pend_block);
    t->pend_slot = pd_malloc((size_t) (cap + 1) * sizeof *t->pend_slot);
    t->slot_pending = pd_calloc((size_t) cap + 1, 1);
    t->slot_bad = pd_calloc((size_t) cap + 1, 1);
    t->round_max = cap > 1 ? cap / 2 : 1;
    t->round_slots = pd_malloc((size_t) t->round_max * sizeof *t->round_slots);
    t->round_from_file = pd_malloc(t->round_max);
    int rc = PAGED_OK;
    if (t->host == NULL || t->pend_block == NULL || t->pend_slot == NULL || t->slot_pending == NULL
        || t->slot_bad == NULL || t->round_slots == NULL || t->round_from_file == NULL) {
        *cause = strdup("out of memory for the host tier's index");
        rc = PAGED_E_NOMEM;
    } else if (cap != 0)
        rc = pd_tiers_host_alloc(b, (uint64_t) cap * t->unit_bytes, &t->host_mem, cause);
    if (rc == PAGED_OK && cap != 0 && spec->file_dir != NULL && spec->file_dir[0] != '\0') {
        const pt_geom g = {
            .num_layers = (uint32_t) cache->num_layers, .num_kv_heads = (uint32_t) cache->num_kv_heads,
            .head_dim = (uint32_t) cache->head_dim, .block_size = (uint32_t) cache->block_size,
            .dtype = cache->dtype, .k_scale = spec->k_scale, .v_scale = spec->v_scale,
            .unit_bytes = t->unit_bytes,
        };
        char why[512];
        uint32_t dropped = 0;
        t->file = pt_file_open(spec->file_dir, spec->owner_uid, spec->pool_name, &g, spec->file_bytes, &dropped,
                               why, sizeof why);
        if (t->file == NULL) {
            *cause = strdup(why);
            rc = PAGED_E_SYSTEM;
        } else {
            pt_file_counts fc;
            pt_file_get_counts(t->file, &fc);
            if (fc.units != 0 || dropped != 0)
                pd_log(PD_LOG_INFO, "pool '%s': file tier holds %u units (%llu bytes); %u damaged or foreign "
                       "files dropped", spec->pool_name, fc.units, (unsigned long long) fc.bytes, dropped);
            t->counts.damaged += dropped;
        }
    }
    if (rc < 0) {
        pd_tiers_destroy(t, 0);
        return rc;
    }
    *out = t;
    return PAGED_OK;
}

/* Frees the tiers; see tiers.h. */
void pd_tiers_destroy(struct pd_tiers *t, int purge)
{
    if (t == NULL)
        return;
    if (purge)
        pt_file_purge(t->file);
    else
        pt_file_close(t->file);
    free_host_mem(t);
    pt_host_destroy(t->host);
    free(t->pend_block);
    free(t->pend_slot);
    free(t->slot_pending);
    free(t->slot_bad);
    free(t->round_slots);
    free(t->round_from_file);
    free(t);
}
