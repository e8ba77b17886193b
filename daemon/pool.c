/* pool.c: pools: named KV caches with an owner, a mode, an allocator and backend memory. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/pool.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <xxhash.h>

#include "daemon/tier/persist.h"
#include "daemon/util/heap.h"
#include "daemon/util/log.h"
#include "lib/core/clock.h"
#include "paged.h"

/* Formats why and returns status. */
static int refuse(int status, char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse(int status, char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return status;
}

/* Checks a pool name; returns PAGED_OK or PAGED_E_INVAL with why. */
int pd_pool_check_name(const char name[PCORE_NAME_MAX], char *why, size_t whylen)
{
    size_t n = strnlen(name, PCORE_NAME_MAX);
    if (n == PCORE_NAME_MAX)
        return refuse(PAGED_E_INVAL, why, whylen, "pool name is not NUL-terminated within %u bytes",
                      PCORE_NAME_MAX);
    if (n == 0)
        return refuse(PAGED_E_INVAL, why, whylen, "pool name is empty");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char) name[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
              || ch == '.' || ch == '_' || ch == '-'))
            return refuse(PAGED_E_INVAL, why, whylen,
                          "pool name has byte 0x%02x at %zu (allowed: A-Z a-z 0-9 . _ -)", ch, i);
    }
    return PAGED_OK;
}

/*
 * Returns whether a new pool is sealed: as the create's mode word asks, or else as the
 * pool-memory setting says; auto seals a pool whose permission bits (perm, resolved) grant
 * group or others anything, since its clients are principals that need not trust each other.
 */
static int resolve_sealed(uint32_t mode_word, uint32_t perm, enum pd_pool_memory memory)
{
    if (mode_word & PAGED_POOL_SEALED)
        return 1;
    if (mode_word & PAGED_POOL_EXPORTED)
        return 0;
    if (memory == PD_POOL_MEMORY_AUTO)
        return (perm & 077) != 0;
    return memory == PD_POOL_MEMORY_SEALED;
}

/* Checks a shard and group of an attachment to a pool of shards shards (1: not sharded).
 * Returns PAGED_OK or an error with why. */
int pd_pool_check_shard_ref(const struct pcore_shard_ref *as, uint32_t shards, char *why, size_t whylen)
{
    if (as->reserved != 0)
        return refuse(PAGED_E_INVAL, why, whylen, "shard reference's reserved field %#x is not 0", as->reserved);
    if (shards <= 1) {
        if (as->shard != 0 || as->group[0] != '\0')
            return refuse(PAGED_E_INVAL, why, whylen, "shard %u, group '%.63s': for a sharded pool only",
                          as->shard, as->group);
        return PAGED_OK;
    }
    if (as->shard >= shards)
        return refuse(PAGED_E_INVAL, why, whylen, "shard %u of a pool of %u shards (0 to %u)", as->shard, shards,
                      shards - 1);
    if (as->group[0] != '\0' && pd_pool_check_name(as->group, why, whylen) < 0)
        return refuse(PAGED_E_INVAL, why, whylen, "group: 1 to 63 bytes of [A-Za-z0-9._-], NUL-terminated");
    return PAGED_OK;
}

/* Checks a POOL_CREATE's shards and the creator's shard reference. Returns PAGED_OK or an
 * error with why. */
static int check_shards(const struct pcore_msg_pool_create *m, char *why, size_t whylen)
{
    const uint32_t n = m->shards > 1 ? m->shards : 1;
    if (n > PCORE_MAX_SHARDS)
        return refuse(PAGED_E_INVAL, why, whylen, "shards %u not supported (1 to %u)", m->shards,
                      PCORE_MAX_SHARDS);
    if (m->num_kv_heads % n != 0)
        return refuse(PAGED_E_GEOMETRY, why, whylen, "num_kv_heads %u is not a multiple of shards %u",
                      m->num_kv_heads, n);
    if (n > 1 && (m->mode & PAGED_POOL_PEERS) != 0)
        return refuse(PAGED_E_INVAL, why, whylen, "PAGED_POOL_PEERS is not supported on a sharded pool");
    if (n > 1 && m->host_tier_bytes != 0)
        return refuse(PAGED_E_INVAL, why, whylen, "host_tier_bytes %llu: a sharded pool has no host tier",
                      (unsigned long long) m->host_tier_bytes);
    return pd_pool_check_shard_ref(&m->as, n, why, whylen);
}

/* Checks a POOL_CREATE; returns PAGED_OK with *g, or an error with why. */
int pd_pool_check_create(const struct pcore_msg_pool_create *m, uint64_t mem_limit,
                         enum pd_pool_memory memory, struct pd_pool_geom *g, char *why, size_t whylen)
{
    int rc = pd_pool_check_name(m->name, why, whylen);
    if (rc < 0)
        return rc;
    memset(g, 0, sizeof *g);
    if (m->num_layers < 1 || m->num_layers > PD_POOL_MAX_LAYERS)
        return refuse(PAGED_E_GEOMETRY, why, whylen, "num_layers %u not supported (1 to %u)",
                      m->num_layers, PD_POOL_MAX_LAYERS);
    if (m->num_kv_heads < 1 || m->num_kv_heads > PD_POOL_MAX_HEADS)
        return refuse(PAGED_E_GEOMETRY, why, whylen, "num_kv_heads %u not supported (1 to %u)",
                      m->num_kv_heads, PD_POOL_MAX_HEADS);
    switch (m->head_dim) {
    case 64: case 80: case 96: case 128: case 256: break;
    default:
        return refuse(PAGED_E_GEOMETRY, why, whylen, "head_dim %u not supported (64, 80, 96, 128, 256)",
                      m->head_dim);
    }
    switch (m->block_size) {
    case 8: case 16: case 32: break;
    default:
        return refuse(PAGED_E_GEOMETRY, why, whylen, "block_size %u not supported (8, 16, 32)",
                      m->block_size);
    }
    size_t es = paged_dtype_size((paged_dtype) m->dtype);
    if (es == 0)
        return refuse(PAGED_E_DTYPE, why, whylen,
                      "dtype %u not supported (f32 = 1, f16 = 2, bf16 = 3, fp8_e4m3 = 4)", m->dtype);
    const uint32_t memory_bits = PAGED_POOL_SEALED | PAGED_POOL_EXPORTED;
    if ((m->mode & ~(0777u | PAGED_POOL_SHARED_PREFIXES | memory_bits | PAGED_POOL_PEERS)) != 0)
        return refuse(PAGED_E_INVAL, why, whylen,
                      "mode %#o has bits beyond 0777, PAGED_POOL_SHARED_PREFIXES (%#o), "
                      "PAGED_POOL_SEALED (%#o), PAGED_POOL_EXPORTED (%#o) and PAGED_POOL_PEERS (%#o)", m->mode,
                      PAGED_POOL_SHARED_PREFIXES, PAGED_POOL_SEALED, PAGED_POOL_EXPORTED, PAGED_POOL_PEERS);
    if ((m->mode & memory_bits) == memory_bits)
        return refuse(PAGED_E_INVAL, why, whylen,
                      "mode %#o has both PAGED_POOL_SEALED and PAGED_POOL_EXPORTED: one at most", m->mode);
    rc = check_shards(m, why, whylen);
    if (rc < 0)
        return rc;
    if ((m->flags & ~PCORE_ATTACH_WRITE) != 0)
        return refuse(PAGED_E_INVAL, why, whylen, "flags %#x unknown (PCORE_ATTACH_WRITE = 1)", m->flags);
    g->k_scale = 1.0f;
    g->v_scale = 1.0f;
    if (m->dtype == PAGED_DTYPE_FP8_E4M3) {
        float ks = m->k_scale == 0 ? 1.0f : m->k_scale, vs = m->v_scale == 0 ? 1.0f : m->v_scale;
        if (!isfinite(ks) || ks <= 0)
            return refuse(PAGED_E_GEOMETRY, why, whylen, "k_scale %g not a positive finite number",
                          (double) m->k_scale);
        if (!isfinite(vs) || vs <= 0)
            return refuse(PAGED_E_GEOMETRY, why, whylen, "v_scale %g not a positive finite number",
                          (double) m->v_scale);
        g->k_scale = ks;
        g->v_scale = vs;
    }
    /* At most 4096 * 2 * 4096 * 32 * 256 * 4 bytes: no overflow. */
    uint64_t block_bytes = (uint64_t) m->num_layers * 2 * m->num_kv_heads * m->block_size
                           * m->head_dim * es;
    uint64_t max_blocks = (uint64_t) INT32_MAX / m->block_size;
    uint64_t n = m->num_blocks;
    if (n == 0) {
        if (m->byte_budget == 0)
            return refuse(PAGED_E_GEOMETRY, why, whylen, "num_blocks 0 and byte_budget 0: one is needed");
        n = m->byte_budget / block_bytes;
        if (n == 0)
            return refuse(PAGED_E_GEOMETRY, why, whylen,
                          "byte_budget %llu holds no block (a block is %llu bytes)",
                          (unsigned long long) m->byte_budget, (unsigned long long) block_bytes);
        if (n > max_blocks)
            n = max_blocks;
    }
    if (n > max_blocks)
        return refuse(PAGED_E_GEOMETRY, why, whylen,
                      "num_blocks %llu too large: num_blocks * block_size must fit int32 (at most %llu)",
                      (unsigned long long) n, (unsigned long long) max_blocks);
    if (n > UINT64_MAX / block_bytes || (mem_limit != 0 && n * block_bytes > mem_limit))
        return refuse(PAGED_E_NOMEM, why, whylen,
                      "pool of %llu blocks of %llu bytes exceeds the memory available (%llu bytes)",
                      (unsigned long long) n, (unsigned long long) block_bytes,
                      (unsigned long long) mem_limit);
    g->num_layers = m->num_layers;
    g->num_kv_heads = m->num_kv_heads;
    g->head_dim = m->head_dim;
    g->block_size = m->block_size;
    g->num_blocks = (uint32_t) n;
    g->dtype = (int32_t) m->dtype;
    g->mode = (m->mode & 0777) == 0 ? 0600 : m->mode & 0777;
    g->shared_prefixes = (m->mode & PAGED_POOL_SHARED_PREFIXES) != 0;
    g->peers = (m->mode & PAGED_POOL_PEERS) != 0;
    g->sealed = resolve_sealed(m->mode, g->mode, memory);
    g->block_bytes = block_bytes;
    g->bytes = n * block_bytes;
    g->shards = m->shards > 1 ? m->shards : 1;
    g->as = m->as;
    return PAGED_OK;
}

/* Returns whether uid/gid may read or write p. */
int pd_pool_may(const struct pd_pool *p, uid_t uid, gid_t gid, int want_write)
{
    if (uid == 0)
        return 1;
    unsigned bits;
    if (uid == p->owner_uid)
        bits = (p->geom.mode >> 6) & 7;
    else if (gid == p->owner_gid)
        bits = (p->geom.mode >> 3) & 7;
    else
        bits = p->geom.mode & 7;
    return (bits & (want_write ? 2u : 4u)) != 0;
}

/* Returns the prefix scope of uid's clients in p. */
uint32_t pd_pool_tenant(const struct pd_pool *p, uid_t uid)
{
    return p->geom.shared_prefixes ? PD_TENANT_SHARED : (uint32_t) uid;
}

/* Returns whether uid may see the hashes of p's blocks of scope tenant. */
int pd_pool_may_see_tenant(const struct pd_pool *p, uid_t uid, uint32_t tenant)
{
    return uid == 0 || uid == geteuid() || pd_pool_tenant(p, uid) == tenant;
}

/* Returns p's mode with its prefix sharing and memory bits. */
uint32_t pd_pool_mode_word(const struct pd_pool *p)
{
    return p->geom.mode | (p->geom.shared_prefixes ? PAGED_POOL_SHARED_PREFIXES : 0)
           | (p->geom.sealed ? PAGED_POOL_SEALED : PAGED_POOL_EXPORTED) | (p->geom.peers ? PAGED_POOL_PEERS : 0);
}

/* Returns "sealed" or "exported". */
const char *pd_pool_memory_name(const struct pd_pool *p)
{
    return p->geom.sealed ? "sealed" : "exported";
}

/* Returns "shared" or "per-uid". */
const char *pd_pool_prefixes_name(const struct pd_pool *p)
{
    return p->geom.shared_prefixes ? "shared" : "per-uid";
}

/*
 * Returns a seed for a pool's prefix index that no client can guess: from getrandom, or,
 * where the kernel has none to give yet, the clock and addresses (the scopes hold either way;
 * the seed only keeps where entries sit unpredictable).
 */
static uint64_t index_seed(const struct pd_pool *p)
{
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == (ssize_t) sizeof seed)
        return seed;
    const uint64_t parts[3] = { pcore_now_ns(), (uint64_t) (uintptr_t) p, (uint64_t) getpid() };
    return XXH3_64bits(parts, sizeof parts);
}

/* Counts an eviction for the next event and records the block's removal; the allocator's
 * hook. */
static void on_evict(void *ctx, int32_t block, uint32_t tenant, const paged_hash *hash)
{
    struct pd_pool *p = ctx;
    p->evicted_pending++;
    if (p->tiers != NULL)
        pd_tiers_evicted(p->tiers, block, tenant, hash);
    else
        pd_blocklog_add(&p->blocklog, PD_BLOCK_REMOVED, PD_TIER_POOL, tenant, hash);
}

/* Records a newly published block; the allocator's hook. */
static void on_publish(void *ctx, int32_t block, uint32_t tenant, const paged_hash *hash)
{
    (void) block;
    struct pd_pool *p = ctx;
    if (p->tiers == NULL || !p->tiers->reloading)
        pd_blocklog_add(&p->blocklog, PD_BLOCK_STORED, PD_TIER_POOL, tenant, hash);
}

/* Creates a pool; returns PAGED_OK and *out or an error with *cause. */
int pd_pool_create(pd_backend *b, uint32_t id, const char *name, const struct pd_pool_geom *g,
                   uid_t uid, gid_t gid, struct pd_pool **out, char **cause)
{
    struct pd_pool *p = pd_calloc(1, sizeof *p);
    if (p == NULL || (p->alloc = pa_create(g->num_blocks)) == NULL) {
        free(p);
        *cause = strdup("out of memory for the block allocator");
        return PAGED_E_NOMEM;
    }
    p->id = id;
    snprintf(p->name, sizeof p->name, "%s", name);
    p->geom = *g;
    p->owner_uid = uid;
    p->owner_gid = gid;
    p->cache = (pk_cache) {
        .base = NULL, .num_layers = (int32_t) g->num_layers, .num_blocks = (int32_t) g->num_blocks,
        .num_kv_heads = (int32_t) (g->num_kv_heads / g->shards), .head_dim = (int32_t) g->head_dim,
        .block_size = (int32_t) g->block_size, .dtype = g->dtype,
        .k_scale = g->k_scale, .v_scale = g->v_scale,
    };
    int rc = b->ops->pool_create(b, g->device, &p->cache, &p->mem, cause);
    if (rc == PAGED_OK && g->shards > 1) {
        rc = pd_shards_create(b, g->shards, g->device, &p->cache, p->mem, &p->tp, cause);
        if (rc < 0)
            b->ops->pool_destroy(b, p->mem);
    }
    if (rc < 0) {
        pa_destroy(p->alloc);
        free(p);
        return rc;
    }
    pa_set_evict_hook(p->alloc, on_evict, p);
    pa_set_publish_hook(p->alloc, on_publish, p);
    pa_set_clock(p->alloc, pcore_now_ns);
    pa_set_index_seed(p->alloc, index_seed(p));
    *out = p;
    return PAGED_OK;
}

/* Frees a pool; returns nothing. */
void pd_pool_free(pd_backend *b, struct pd_pool *p)
{
    if (p == NULL)
        return;
    pd_tiers_destroy(p->tiers, 0);
    pd_shards_free(b, p->tp);
    b->ops->pool_destroy(b, p->mem);
    pa_destroy(p->alloc);
    pd_blocklog_free(&p->blocklog);
    free(p);
}

/* Writes p's blocks and host tier's units to its file tier at a shutdown; see pool.h. */
uint32_t pd_pool_persist(struct pd_pool *p, uint64_t deadline_ns)
{
    if (p->destroyed || p->tiers == NULL || p->tiers->file == NULL)
        return 0;
    struct pd_tiers_persisted w;
    const uint32_t written = pd_tiers_persist(p->tiers, deadline_ns, &w);
    if (w.first_failure[0] != '\0')
        pd_log(PD_LOG_WARNING, "pool '%s': %u units not written to the file tier: %s", p->name, w.failed,
               w.first_failure);
    char beyond[64] = "", late[64] = "";
    if (w.beyond_bound != 0)
        snprintf(beyond, sizeof beyond, "; %u left out for file-tier-mb", w.beyond_bound);
    if (w.left_at_deadline != 0)
        snprintf(late, sizeof late, "; %u left at shutdown-write-timeout", w.left_at_deadline);
    pd_log(PD_LOG_INFO, "pool '%s': wrote %u units to the file tier in %llu ms (%u of the pool's blocks, "
           "%u of the host tier's)%s%s", p->name, written, (unsigned long long) (w.ns / 1000000u), w.from_pool,
           w.from_host, beyond, late);
    return written;
}

/* Unlinks p from the list and frees it; returns nothing. */
void pd_pool_release(struct pd_pool **pools, uint32_t *n_pools, pd_backend *b, struct pd_pool *p)
{
    for (struct pd_pool **pp = pools; *pp != NULL; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    (*n_pools)--;
    pd_log(PD_LOG_INFO, "pool '%s' (id %u) freed", p->name, p->id);
    /* Its name was removed: so are the units it wrote to the file tier. */
    if (p->destroyed) {
        pd_tiers_destroy(p->tiers, 1);
        p->tiers = NULL;
    }
    pd_pool_free(b, p);
}

/* Gives p the tiers spec describes; see pool.h. */
int pd_pool_add_tiers(pd_backend *b, struct pd_pool *p, const struct pd_tiers_spec *spec, char **cause)
{
    if (spec->host_units == 0)
        return PAGED_OK;
    return pd_tiers_create(b, p->mem, &p->cache, p->alloc, &p->blocklog, spec, &p->tiers, cause);
}

/* Fills a LIST item; returns nothing. */
void pd_pool_item(const struct pd_pool *p, struct pcore_pool_item *it)
{
    pa_counts c;
    pa_get_counts(p->alloc, &c);
    memset(it, 0, sizeof *it);
    memcpy(it->name, p->name, sizeof it->name);
    it->id = p->id;
    it->num_layers = p->geom.num_layers;
    it->num_kv_heads = p->geom.num_kv_heads;
    it->head_dim = p->geom.head_dim;
    it->block_size = p->geom.block_size;
    it->dtype = (uint32_t) p->geom.dtype;
    it->num_blocks = p->geom.num_blocks;
    it->device = p->geom.device;
    it->owner_uid = (uint32_t) p->owner_uid;
    it->mode = pd_pool_mode_word(p);
    it->free = c.free;
    it->referenced = c.referenced;
    it->cached = c.cached;
    it->attached = p->attached;
    it->destroyed = (uint32_t) p->destroyed;
    it->bytes = p->geom.bytes;
    it->evictions = c.evictions;
    it->lookups = c.lookups;
    it->lookup_hits = c.lookup_hits;
    it->lookup_tokens = c.lookup_blocks * p->geom.block_size;
    it->hit_tokens = c.lookup_hits * p->geom.block_size;
    it->expired = p->expired;
    it->ttl_ms = p->ttl_ns / 1000000u;
    it->pinned = c.pinned;
    it->shards = p->geom.shards;
    if (p->tiers != NULL)
        pd_tiers_item(p->tiers, p->geom.block_size, it);
}

/* Returns percent % of p's blocks, rounded down. */
uint32_t pd_pool_share(const struct pd_pool *p, uint32_t percent)
{
    return (uint32_t) ((uint64_t) p->geom.num_blocks * (percent > 100 ? 100 : percent) / 100u);
}

/* Takes blocks, offloading what it evicts; see pool.h. */
int pd_pool_alloc_blocks(struct pd_pool *p, uint32_t holder, uint32_t n, int32_t *out, uint64_t *offloaded)
{
    const uint64_t before = p->tiers != NULL ? p->tiers->counts.offloaded : 0;
    int rc = pa_alloc_blocks(p->alloc, holder, n, out);
    pd_tiers_flush(p->tiers);
    if (rc == PAGED_OK && p->tp != NULL)
        pd_shards_reset(p->tp, n, out);
    if (offloaded != NULL)
        *offloaded = p->tiers != NULL ? p->tiers->counts.offloaded - before : 0;
    return rc;
}

/* Releases an attachment's references, or its group's at its last rank; see pool.h. */
uint32_t pd_pool_detach_holder(struct pd_pool *p, uint32_t holder, uint32_t shard)
{
    if (p->tp != NULL && !pd_shards_leave(p->tp, holder, shard))
        return 0;
    return pa_release_holder(p->alloc, holder);
}

/* Returns the length of the chain p holds in any tier; see pool.h. */
uint32_t pd_pool_chain(const struct pd_pool *p, uint32_t tenant, uint32_t n, const paged_hash *hashes)
{
    const struct pd_tiers *t = p->tiers;
    uint32_t i = 0;
    while (i < n && (pa_find(p->alloc, tenant, &hashes[i]) >= 0
                     || (t != NULL && pt_host_find(t->host, tenant, &hashes[i]) >= 0)
                     || (t != NULL && t->file != NULL && pt_file_has(t->file, tenant, &hashes[i]))))
        i++;
    return i;
}

/* Evicts every cached block, offloading each; see pool.h. */
uint32_t pd_pool_evict_cached(struct pd_pool *p)
{
    uint32_t n = pa_evict_cached(p->alloc);
    pd_tiers_flush(p->tiers);
    return n;
}

/* Drops p's expired cached blocks, not counting them as evictions to announce; returns how many. */
uint32_t pd_pool_expire(struct pd_pool *p)
{
    uint32_t pending = p->evicted_pending;
    if (p->tiers != NULL)
        p->tiers->dropping = 1;
    uint32_t n = pa_expire(p->alloc, p->ttl_ns);
    if (p->tiers != NULL)
        p->tiers->dropping = 0;
    n += pd_tiers_expire(p->tiers, pcore_now_ns(), p->ttl_ns);
    p->evicted_pending = pending;
    p->expired += n;
    return n;
}

/* Returns when p's next cached block expires, or UINT64_MAX. */
uint64_t pd_pool_next_expiry(const struct pd_pool *p)
{
    uint64_t pool = pa_next_expiry(p->alloc, p->ttl_ns), host = pd_tiers_next_expiry(p->tiers, p->ttl_ns);
    return pool < host ? pool : host;
}
