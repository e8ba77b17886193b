/* shard.h: tensor-parallel pools: shards by KV head, the worker groups that hold their blocks, publish on all. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_SHARD_H
#define PAGED_DAEMON_SHARD_H

/*
 * A pool created with N shards (2 to PCORE_MAX_SHARDS) keeps its KV heads in N memories:
 * shard r holds heads [r*H/N, (r+1)*H/N) of every block, laid out as a pool of H/N heads
 * (paged(7), TENSOR-PARALLEL POOLS). The worker of rank r attaches shard r and its APPEND,
 * DECODE, PREFILL and COPY run on that memory only; the allocator, the block ids, the prefix
 * cache and the pins are the pool's, one namespace across the shards.
 *
 * The workers of one model instance form a group (a name, per uid): their attachments share
 * one holder of block references in the pool's allocator, so that a block one rank allocates
 * or looks up is held, writable and readable alike by every rank, and is released when the
 * group's last member detaches. One rank at most per shard per group. Holder ids of groups
 * start at PD_GROUP_HOLDER_BASE, above every connection id.
 *
 * A block is published when every shard's rank of the group has asked to publish it under the
 * same hash: each rank appends its own heads, and a prefix found by a LOOKUP is complete on
 * every shard, or not published at all. Until then the block is only held.
 */

#include <stdint.h>
#include <sys/types.h>

#include "daemon/alloc/alloc.h"
#include "daemon/backend.h"
#include "kernels/kernels.h"
#include "lib/core/proto.h"

#define PD_GROUP_HOLDER_BASE PCORE_GROUP_HOLDER_BASE

/* One group of workers attached to a sharded pool. */
struct pd_group {
    char name[PCORE_NAME_MAX];
    uid_t uid;
    uint32_t holder;             /* its holder id in the pool's allocator */
    uint32_t ranks;              /* bit r: a client is attached as shard r */
    struct pd_group *next;
};

/* A sharded pool's shards, groups and publish state. */
struct pd_shards {
    uint32_t n;                  /* shards, 2 or more */
    pk_cache *cache;             /* [n]: each shard's geometry and the daemon's view of it */
    pd_pool_mem **mem;           /* [n]; [0] is the pool's own (pd_pool.mem) */
    uint32_t *device;            /* [n]: each shard's device */
    struct pd_group *groups;
    uint32_t next_holder;
    uint32_t num_blocks;
    uint32_t *asked;             /* [num_blocks]: bit r: rank r asked to publish the block */
    paged_hash *hash;            /* [num_blocks]: under which hash (the first rank's) */
    uint32_t *tenant;            /* [num_blocks]: in which prefix scope */
};

/* Makes n shards for a pool whose shard 0 is cache0 (a pool of H/n heads) in mem0 on device
 * device0, creating shard r (1 to n-1) with backend b on device (device0 + r) modulo
 * b->ndevices: shard r on its own device where there are enough. Returns PAGED_OK and *out,
 * or an error with *cause. */
int pd_shards_create(pd_backend *b, uint32_t n, uint32_t device0, const pk_cache *cache0, pd_pool_mem *mem0,
                     struct pd_shards **out, char **cause);

/* Frees shards 1 to n-1 and t itself (shard 0's memory is the pool's). NULL is ignored. */
void pd_shards_free(pd_backend *b, struct pd_shards *t);

/* Adds rank shard of uid's group (name group, "" the default one) to t. Returns PAGED_OK
 * with *holder the group's holder id, or PAGED_E_EXIST (that rank is attached) or
 * PAGED_E_NOMEM with why. */
int pd_shards_join(struct pd_shards *t, uid_t uid, const char *group, uint32_t shard, uint32_t *holder,
                   char *why, size_t whylen);

/* Removes rank shard from the group of holder. Returns 1 when the group is now empty (the
 * caller releases holder's blocks), else 0. */
int pd_shards_leave(struct pd_shards *t, uint32_t holder, uint32_t shard);

/* Returns the group whose holder is holder, or NULL. */
const struct pd_group *pd_shards_group(const struct pd_shards *t, uint32_t holder);

/* Forgets every rank's publish request of the blocks ids[0..n) (newly allocated). */
void pd_shards_reset(struct pd_shards *t, uint32_t n, const int32_t *ids);

/*
 * Records rank shard's request to publish ids[i] under (tenant, hashes[i]), for holder, and
 * publishes in a (the pool's allocator) the blocks every shard has now asked for. Returns how
 * many blocks it published now, or a negative paged_error with *bad the index of the block
 * refused (PAGED_E_INVAL: a hash or scope that differs from another rank's, or what
 * pa_publish refuses), nothing recorded then.
 */
int pd_shards_publish(struct pd_shards *t, pa_alloc *a, uint32_t holder, uint32_t shard, uint32_t tenant,
                      uint32_t n, const int32_t *ids, const paged_hash *hashes, uint32_t *bad);

#endif
