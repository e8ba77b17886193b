/* tiers.h: a pool's host and file tiers: offload on eviction, reload on LOOKUP, their counters. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_TIER_TIERS_H
#define PAGED_DAEMON_TIER_TIERS_H

/*
 * A pool with a host tier keeps the published blocks its allocator evicts: the eviction hook
 * hands each block here (pd_tiers_evicted) before anything can write it, and its layers are
 * gathered into one unit in the host tier (every layer's keys, then its values: paged(7),
 * TIERS). The copies of one allocator call are batched: the caller runs pd_tiers_flush right
 * after the call that may evict (an allocation, EVICT) and before anything else touches the
 * pool, and a unit pushed out of the host tier while its copy is pending flushes first. A
 * unit pushed out of the host tier goes to the file tier when the pool has one, else it is
 * gone. A LOOKUP that misses in the pool asks pd_tiers_lookup, which reloads the chain's next
 * blocks from the host tier (and from the file tier through it), publishes them again and
 * returns once they are resident, stopping at the first unit it cannot bring back whole.
 * Units move between pool and host (a block is in one of them); the file tier keeps a copy
 * of what it was given until its capacity or an evict by prefix drops it.
 *
 * Everything runs on the engine thread, and copies are synchronous: the cpu backend copies
 * with memcpy, the cuda backend (units_copy) on its stream and waits.
 */

#include <stdint.h>

#include "daemon/alloc/alloc.h"
#include "daemon/backend.h"
#include "daemon/blocklog.h"
#include "daemon/tier/file.h"
#include "daemon/tier/host.h"
#include "kernels/kernels.h"
#include "lib/core/proto.h"

/* What a pool's tiers did since it was created. */
struct pd_tier_counts {
    uint64_t offloaded;         /* blocks copied from the pool to the host tier */
    uint64_t offload_ns;        /* time those copies took, summed */
    uint64_t written;           /* units written from the host tier to the file tier */
    uint64_t reloaded_host;     /* blocks a LOOKUP reloaded from the host tier */
    uint64_t reloaded_file;     /* of the file tier (through the host tier) */
    uint64_t reloads;           /* LOOKUPs that reloaded at least one block */
    uint64_t reload_ns;         /* their time reloading, summed */
    uint64_t dropped;           /* units dropped: no room below, expired, or a failed copy */
    uint64_t damaged;           /* unit files refused: short, or a check failed */
    uint64_t failures;          /* copies or writes that failed */
};

struct pd_tiers {
    pd_backend *b;
    pd_pool_mem *mem;           /* the pool's memory and geometry */
    const pk_cache *cache;
    pa_alloc *alloc;
    struct pd_blocklog *log;
    uint64_t unit_bytes;        /* one block, every layer, K and V */
    pt_host *host;
    unsigned char *host_mem;    /* host_units units */
    uint32_t host_units;
    pt_file *file;              /* NULL: none */
    int dropping;               /* evictions drop blocks (expiry, evict by prefix) */
    int reloading;              /* publications are reloads (no STORED event) */
    /* Offloads whose copy is pending: block i goes to slot i. */
    int32_t *pend_block, *pend_slot;
    uint32_t npend;
    uint8_t *slot_pending;      /* per host slot: its copy is pending */
    uint8_t *slot_bad;          /* per host slot: its copy failed; dropped at the next chance */
    /* The reload round in progress: the host slots it took (round_n of at most round_max, half
     * the host tier), out of the host tier's index but still held (they go back to it if the
     * reload fails), and whether each unit came from the file tier. */
    int32_t *round_slots;
    uint8_t *round_from_file;
    uint32_t round_n, round_max;
    struct pd_tier_counts counts;
};

/* What a pool's tiers are made of: host_units units of host memory, and the file tier's
 * directory (NULL: none) with its bound in bytes (0: none). */
struct pd_tiers_spec {
    uint32_t host_units;
    const char *file_dir;
    uint64_t file_bytes;
    uint32_t owner_uid;
    const char *pool_name;
    float k_scale, v_scale;
};

/* Creates the tiers of a pool whose memory, geometry, allocator and event log are given.
 * Returns PAGED_OK and *out, or an error with *cause (malloc'd). */
int pd_tiers_create(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, pa_alloc *alloc,
                    struct pd_blocklog *log, const struct pd_tiers_spec *spec, struct pd_tiers **out,
                    char **cause);

/* Frees the tiers; purge deletes the file tier's files (the pool was destroyed), else they stay
 * for the next daemon. NULL is ignored. */
void pd_tiers_destroy(struct pd_tiers *t, int purge);

/* The eviction hook's part: moves evicted block (published under tenant, hash) to the host
 * tier, its copy pending until pd_tiers_flush, or drops it while t->dropping. Records the
 * block event. Returns nothing. */
void pd_tiers_evicted(struct pd_tiers *t, int32_t block, uint32_t tenant, const paged_hash *hash);

/* Runs the pending offload copies. Returns nothing (a failed copy drops its units). */
void pd_tiers_flush(struct pd_tiers *t);

/* What one pd_tiers_lookup brought back: blocks reloaded from each tier, and the time it took. */
struct pd_tier_reload {
    uint32_t host, file;
    uint64_t ns;
};

/* Continues a LOOKUP of holder that found hashes[0..found) in the pool: reloads the next
 * blocks of the chain from the tiers (and takes those after them still in the pool), writing
 * their ids to ids[found..) and what it reloaded to *got (zeroed first; may be NULL). Returns
 * the length of the prefix now held (found or more). */
uint32_t pd_tiers_lookup(struct pd_tiers *t, uint32_t holder, uint32_t tenant, uint32_t n,
                         const paged_hash *hashes, int32_t *ids, uint32_t found, struct pd_tier_reload *got);

/* Evict by prefix (PREFIX EVICT): takes the longest prefix of hashes published under tenant out
 * of allocator a as pa_evict_prefix does for who (any: every pin may go), then out of t's
 * tiers (pd_tiers_remove; t may be NULL), recording in log a REMOVED event for each block of
 * it still in use, which the eviction hook does not see (it goes to the free list when its
 * last holder frees it). Returns the length dropped, or PAGED_E_PERM (*bad) or
 * PAGED_E_NOMEM with nothing changed. */
int pd_tiers_evict_prefix(struct pd_tiers *t, pa_alloc *a, struct pd_blocklog *log, uint32_t tenant, uint32_t n,
                          const paged_hash *hashes, uint32_t who, int any, uint32_t *bad);

/* Evict by prefix, after the pool dropped the first known blocks of the chain hashes[0..n)
 * published under tenant: drops those from the host and file tiers too, and then the longest
 * run of the chain's next blocks that either tier holds. Returns the length of the prefix
 * dropped (known or more). */
uint32_t pd_tiers_remove(struct pd_tiers *t, uint32_t tenant, uint32_t n, const paged_hash *hashes,
                         uint32_t known);

/* Records in log that (tenant, hash) left tier, as REMOVED unless one of t's tiers still
 * holds it (t NULL: a pool without tiers, always). Returns nothing. */
void pd_tiers_note_gone(const struct pd_tiers *t, struct pd_blocklog *log, enum pd_block_tier tier, uint32_t tenant,
                        const paged_hash *hash);

/* Drops the host tier's units stored ttl_ns or more before now. Returns how many. */
uint32_t pd_tiers_expire(struct pd_tiers *t, uint64_t now, uint64_t ttl_ns);
/* Returns when the host tier's oldest unit expires under ttl_ns, or UINT64_MAX. */
uint64_t pd_tiers_next_expiry(const struct pd_tiers *t, uint64_t ttl_ns);

/* Fills the tiers' fields of a LIST item (block_size: tokens per block). Returns nothing. */
void pd_tiers_item(const struct pd_tiers *t, uint32_t block_size, struct pcore_pool_item *it);

/* Copies n blocks of t's pool to or from units in host memory, every layer gathered into one
 * unit (paged(7), TIERS): through the backend's units_copy, or pd_tiers_copy_host where the
 * pool's memory is host memory. Returns PAGED_OK or an error (logged, counted a failure). */
int pd_tiers_copy_units(struct pd_tiers *t, int to_units, uint32_t n, const int32_t *blocks,
                        unsigned char *const *units);

/* Returns the address of host slot s of t's host tier. */
unsigned char *pd_tiers_slot_mem(const struct pd_tiers *t, int32_t s);

/* Allocates bytes of host memory that b copies units to and from (pinned on cuda), into *out.
 * Returns PAGED_OK, or an error with *cause (malloc'd). */
int pd_tiers_host_alloc(pd_backend *b, uint64_t bytes, unsigned char **out, char **cause);
/* Frees what pd_tiers_host_alloc gave (bytes: as asked; p NULL is ignored). Returns nothing. */
void pd_tiers_host_free(pd_backend *b, unsigned char *p, uint64_t bytes);

/* Copies n blocks of a pool (mem, cache) to or from units, every layer gathered into one unit
 * (paged(7), TIERS): through b's units_copy (units in host or device memory), or
 * pd_tiers_copy_host where the pool's memory is host memory. Returns PAGED_OK, or an error
 * with *cause (malloc'd, or left NULL). */
int pd_units_copy(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, int to_units, uint32_t n,
                  const int32_t *blocks, unsigned char *const *units, char **cause);

/* Copies n blocks of a pool to or from units in host memory where the pool's memory is host
 * memory (the cpu backend); returns PAGED_OK. The layout of a unit is paged(7)'s. */
int pd_tiers_copy_host(const pk_cache *cache, int to_units, uint32_t n, const int32_t *blocks,
                       unsigned char *const *units);

#endif
