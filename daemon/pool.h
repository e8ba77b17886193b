/* pool.h: pools: named KV caches with an owner, a mode, an allocator and backend memory. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_POOL_H
#define PAGED_DAEMON_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/alloc/alloc.h"
#include "daemon/blocklog.h"
#include "daemon/shard.h"
#include "daemon/tier/tiers.h"
#include "daemon/backend.h"
#include "kernels/kernels.h"
#include "lib/core/proto.h"

/* Most layers and KV heads a pool may have (keeps every size product far from overflow). */
#define PD_POOL_MAX_LAYERS 4096u
#define PD_POOL_MAX_HEADS 4096u

/* How a new pool's memory reaches clients when POOL_CREATE names neither PAGED_POOL_SEALED
 * nor PAGED_POOL_EXPORTED: paged.conf's pool-memory (whose values these are, in order). */
enum pd_pool_memory {
    PD_POOL_MEMORY_AUTO = 0,     /* sealed when the mode grants group or others anything */
    PD_POOL_MEMORY_SEALED = 1,
    PD_POOL_MEMORY_EXPORTED = 2,
};

/* A pool's geometry as checked from a POOL_CREATE. */
struct pd_pool_geom {
    uint32_t num_layers, num_kv_heads, head_dim, block_size, num_blocks;
    int32_t dtype;
    uint32_t mode;           /* permission bits (0777 at most) */
    int shared_prefixes;     /* PAGED_POOL_SHARED_PREFIXES: one prefix scope for every uid */
    int sealed;              /* PAGED_POOL_SEALED: its memory is never sent to a client */
    int peers;               /* PAGED_POOL_PEERS: served to and filled from the daemon's peers */
    uint32_t shards;         /* 1, or the shards of a tensor-parallel pool (shard.h) */
    uint32_t device;         /* the device of its memory (of shard 0; shard r's is device + r,
                              * modulo the daemon's devices) */
    struct pcore_shard_ref as;  /* the creator's shard and group */
    float k_scale, v_scale;
    uint64_t block_bytes;    /* one block, every layer, K and V */
    uint64_t bytes;          /* the whole pool */
};

struct pd_pool {
    uint32_t id;
    char name[PCORE_NAME_MAX];
    struct pd_pool_geom geom;
    pk_cache cache;          /* geometry plus the daemon's view of the memory (shard 0's, of
                              * num_kv_heads / shards heads, in a sharded pool) */
    uid_t owner_uid;
    gid_t owner_gid;
    pa_alloc *alloc;
    pd_pool_mem *mem;
    uint32_t attached;       /* clients attached */
    int destroyed;           /* name removed; freed at the last detach */
    uint32_t evicted_pending;/* evictions not yet announced as an event */
    uint64_t ttl_ns;         /* time to live of a cached unpinned block; 0: none */
    uint64_t expired;        /* cached blocks dropped by the time to live */
    struct pd_blocklog blocklog; /* prefix-block events for subscribers, sent each pass */
    struct pd_tiers *tiers;  /* host and file tiers; NULL: none */
    struct pd_shards *tp;    /* a sharded pool's shards and groups; NULL: not sharded */
    struct pd_pool *next;
};

/* Returns shard r's geometry and the daemon's view of its memory (r 0 of an unsharded pool:
 * the whole pool). */
static inline const pk_cache *pd_pool_shard_cache(const struct pd_pool *p, uint32_t r)
{
    return p->tp != NULL ? &p->tp->cache[r] : &p->cache;
}

/* Returns shard r's memory (r 0 of an unsharded pool: the whole pool's). */
static inline pd_pool_mem *pd_pool_shard_mem(const struct pd_pool *p, uint32_t r)
{
    return p->tp != NULL ? p->tp->mem[r] : p->mem;
}

/* Returns the device of shard r's memory (r 0 of an unsharded pool: the pool's). */
static inline uint32_t pd_pool_shard_device(const struct pd_pool *p, uint32_t r)
{
    return p->tp != NULL ? p->tp->device[r] : p->geom.device;
}

/* Returns percent % of p's blocks, rounded down: a pin limit (pin-limit-uid, pin-limit-pool). */
uint32_t pd_pool_share(const struct pd_pool *p, uint32_t percent);

/* Takes n blocks of p for holder as pa_alloc_blocks does; the cached blocks it evicts go to
 * p's host tier (their copies done before anyone can write the blocks), and *offloaded (if
 * not NULL) gets how many did; a sharded pool forgets the new blocks' publish requests.
 * Returns pa_alloc_blocks's status. */
int pd_pool_alloc_blocks(struct pd_pool *p, uint32_t holder, uint32_t n, int32_t *out, uint64_t *offloaded);

/* Ends an attachment to p whose block references are holder's, to shard shard: releases them
 * (pa_release_holder), or, in a sharded pool, only when it was its group's last rank.
 * Returns how many references it released. */
uint32_t pd_pool_detach_holder(struct pd_pool *p, uint32_t holder, uint32_t shard);

/* Returns how many of hashes[0..n), from the first, p holds published under tenant in the
 * pool itself or in its host or file tier (no reference taken, nothing moved). */
uint32_t pd_pool_chain(const struct pd_pool *p, uint32_t tenant, uint32_t n, const paged_hash *hashes);

/* Evicts every cached block of p as pa_evict_cached does, each to p's host tier where it has
 * one. Returns how many. */
uint32_t pd_pool_evict_cached(struct pd_pool *p);

/* Drops p's cached blocks whose time to live passed. Returns how many. */
uint32_t pd_pool_expire(struct pd_pool *p);

/* Returns when p's next cached block expires (pcore_now_ns time), or UINT64_MAX. */
uint64_t pd_pool_next_expiry(const struct pd_pool *p);

/*
 * Checks a POOL_CREATE's name and geometry (pure: no allocation, no I/O). mem_limit is the
 * most bytes a pool may take (0: no limit); memory decides sealed or exported where the
 * mode names neither. Returns PAGED_OK with *g filled, or a negative paged_error with why (a
 * NUL-terminated message naming the field and value, such as "head_dim 100 not supported
 * (64, 80, 96, 128, 256)").
 */
int pd_pool_check_create(const struct pcore_msg_pool_create *m, uint64_t mem_limit,
                         enum pd_pool_memory memory, struct pd_pool_geom *g, char *why, size_t whylen);

/* Checks the shard and group an attachment names for a pool of shards shards (1: not
 * sharded: both must be zero). Returns PAGED_OK or PAGED_E_INVAL with why. */
int pd_pool_check_shard_ref(const struct pcore_shard_ref *as, uint32_t shards, char *why, size_t whylen);

/* Checks a pool name field: NUL-terminated, 1 to 63 bytes of [A-Za-z0-9._-]. Returns
 * PAGED_OK or PAGED_E_INVAL with why. */
int pd_pool_check_name(const char name[PCORE_NAME_MAX], char *why, size_t whylen);

/* Returns whether uid/gid may read (want_write 0) or write a pool, as file permission bits
 * owner/group/other say; root may do anything. */
int pd_pool_may(const struct pd_pool *p, uid_t uid, gid_t gid, int want_write);

/* The prefix scope of every uid in a pool with shared prefixes; no uid is (uid_t) -1. */
#define PD_TENANT_SHARED UINT32_MAX

/* Returns the prefix scope (allocator tenant) of a client of uid in p: the uid itself, or
 * PD_TENANT_SHARED when the owner made the pool's prefixes shared. */
uint32_t pd_pool_tenant(const struct pd_pool *p, uid_t uid);

/* Returns whether a client of uid may see what happens to the blocks of p published in
 * prefix scope tenant (their hashes): in its own scope (pd_pool_tenant), or everywhere for
 * root and the daemon's own uid, who can read the daemon's memory anyway. A hash tells whoever
 * can compute hashes of candidate prompts what was sent. */
int pd_pool_may_see_tenant(const struct pd_pool *p, uid_t uid, uint32_t tenant);

/* Returns p's mode as the wire and paged_pool_info carry it: the permission bits, with
 * PAGED_POOL_SHARED_PREFIXES when its prefixes are shared, and PAGED_POOL_SEALED or
 * PAGED_POOL_EXPORTED (exactly one). */
uint32_t pd_pool_mode_word(const struct pd_pool *p);

/* Returns how p's memory reaches clients, as pagedd's log says it: "sealed" or "exported". */
const char *pd_pool_memory_name(const struct pd_pool *p);

/* Returns how p's prefix cache is scoped, as pagedd's log and pactl say it: "per-uid" or
 * "shared". */
const char *pd_pool_prefixes_name(const struct pd_pool *p);

/* Creates a pool (allocator and backend memory) from a checked geometry. Returns PAGED_OK
 * and *out, or an error with *cause. */
int pd_pool_create(pd_backend *b, uint32_t id, const char *name, const struct pd_pool_geom *g,
                   uid_t uid, gid_t gid, struct pd_pool **out, char **cause);

/* Gives a new pool p the host tier (and file tier) spec describes; nothing when its host_units
 * is 0. Returns PAGED_OK or an error with *cause. */
int pd_pool_add_tiers(pd_backend *b, struct pd_pool *p, const struct pd_tiers_spec *spec, char **cause);

/* Frees a pool and its memory (its file tier's units stay for the next daemon). */
void pd_pool_free(pd_backend *b, struct pd_pool *p);

/* At an orderly shutdown: writes what p's file tier lacks of its published blocks and host
 * tier's units, most recently used first, until deadline_ns of pcore_now_ns (0: none), and
 * logs how many it wrote and how long it took, and its first failure once. A pool without a
 * file tier, or destroyed, writes nothing. Returns the units written. */
uint32_t pd_pool_persist(struct pd_pool *p, uint64_t deadline_ns);

/* Unlinks p from the list that starts at *pools, whose length *n_pools counts, logs that it
 * is freed and frees it with its memory of backend b (a destroyed pool at its last detach,
 * whose file tier's units are deleted too).
 * Returns nothing. */
void pd_pool_release(struct pd_pool **pools, uint32_t *n_pools, pd_backend *b, struct pd_pool *p);

/* Fills a LIST item for a pool. */
void pd_pool_item(const struct pd_pool *p, struct pcore_pool_item *it);

#endif
