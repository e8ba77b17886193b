/* shard.c: tensor-parallel pools: shards by KV head, the worker groups that hold their blocks, publish on all. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/shard.h"
#include "daemon/util/heap.h"

/* Creates the shards; returns PAGED_OK and *out or an error with *cause. */
int pd_shards_create(pd_backend *b, uint32_t n, uint32_t device0, const pk_cache *cache0, pd_pool_mem *mem0,
                     struct pd_shards **out, char **cause)
{
    const uint32_t blocks = (uint32_t) cache0->num_blocks;
    struct pd_shards *t = pd_calloc(1, sizeof *t);
    if (t == NULL || (t->cache = pd_calloc(n, sizeof *t->cache)) == NULL
        || (t->mem = pd_calloc(n, sizeof *t->mem)) == NULL
        || (t->device = pd_calloc(n, sizeof *t->device)) == NULL
        || (t->asked = pd_calloc(blocks, sizeof *t->asked)) == NULL
        || (t->hash = pd_calloc(blocks, sizeof *t->hash)) == NULL
        || (t->tenant = pd_calloc(blocks, sizeof *t->tenant)) == NULL) {
        pd_shards_free(b, t);
        *cause = strdup("out of memory for the shards");
        return PAGED_E_NOMEM;
    }
    t->n = n;
    t->num_blocks = blocks;
    t->next_holder = PD_GROUP_HOLDER_BASE;
    t->cache[0] = *cache0;
    t->mem[0] = mem0;
    const uint32_t ndev = b->ndevices > 0 ? b->ndevices : 1;
    t->device[0] = device0;
    for (uint32_t r = 1; r < n; r++) {
        t->cache[r] = *cache0;
        t->cache[r].base = NULL;
        t->device[r] = (device0 + r) % ndev;
        int rc = b->ops->pool_create(b, t->device[r], &t->cache[r], &t->mem[r], cause);
        if (rc < 0) {
            t->mem[r] = NULL;
            pd_shards_free(b, t);
            return rc;
        }
    }
    *out = t;
    return PAGED_OK;
}

/* Frees shards 1 to n-1 and t; returns nothing. */
void pd_shards_free(pd_backend *b, struct pd_shards *t)
{
    if (t == NULL)
        return;
    for (uint32_t r = 1; t->mem != NULL && r < t->n; r++)
        if (t->mem[r] != NULL)
            b->ops->pool_destroy(b, t->mem[r]);
    while (t->groups != NULL) {
        struct pd_group *g = t->groups;
        t->groups = g->next;
        free(g);
    }
    free(t->cache);
    free(t->mem);
    free(t->device);
    free(t->asked);
    free(t->hash);
    free(t->tenant);
    free(t);
}

/* Returns the group of uid named name in t, or NULL. */
static struct pd_group *group_find(const struct pd_shards *t, uid_t uid, const char *name)
{
    for (struct pd_group *g = t->groups; g != NULL; g = g->next)
        if (g->uid == uid && strcmp(g->name, name) == 0)
            return g;
    return NULL;
}

/* Adds a rank to a group, making the group if needed; see shard.h. */
int pd_shards_join(struct pd_shards *t, uid_t uid, const char *group, uint32_t shard, uint32_t *holder,
                   char *why, size_t whylen)
{
    struct pd_group *g = group_find(t, uid, group);
    if (g != NULL && (g->ranks & (1u << shard)) != 0) {
        snprintf(why, whylen, "shard %u of group '%s' (uid %u) is attached already", shard, group,
                 (unsigned) uid);
        return PAGED_E_EXIST;
    }
    if (g == NULL) {
        if (t->next_holder == UINT32_MAX) {
            snprintf(why, whylen, "no group holder id left");
            return PAGED_E_LIMIT;
        }
        g = pd_calloc(1, sizeof *g);
        if (g == NULL) {
            snprintf(why, whylen, "out of memory for group '%s'", group);
            return PAGED_E_NOMEM;
        }
        snprintf(g->name, sizeof g->name, "%s", group);
        g->uid = uid;
        g->holder = t->next_holder++;
        g->next = t->groups;
        t->groups = g;
    }
    g->ranks |= 1u << shard;
    *holder = g->holder;
    return PAGED_OK;
}

/* Removes a rank from its group; returns 1 when the group went away. */
int pd_shards_leave(struct pd_shards *t, uint32_t holder, uint32_t shard)
{
    for (struct pd_group **pg = &t->groups; *pg != NULL; pg = &(*pg)->next) {
        struct pd_group *g = *pg;
        if (g->holder != holder)
            continue;
        g->ranks &= ~(1u << shard);
        if (g->ranks != 0)
            return 0;
        *pg = g->next;
        free(g);
        return 1;
    }
    return 0;
}

/* Returns the group of holder or NULL. */
const struct pd_group *pd_shards_group(const struct pd_shards *t, uint32_t holder)
{
    for (const struct pd_group *g = t->groups; g != NULL; g = g->next)
        if (g->holder == holder)
            return g;
    return NULL;
}

/* Clears the publish requests of new blocks; returns nothing. */
void pd_shards_reset(struct pd_shards *t, uint32_t n, const int32_t *ids)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] >= 0 && (uint32_t) ids[i] < t->num_blocks)
            t->asked[ids[i]] = 0;
}

/* Records a rank's publish request and publishes what every shard asked for; see shard.h. */
int pd_shards_publish(struct pd_shards *t, pa_alloc *a, uint32_t holder, uint32_t shard, uint32_t tenant,
                      uint32_t n, const int32_t *ids, const paged_hash *hashes, uint32_t *bad)
{
    const uint32_t all = (1u << t->n) - 1;   /* n is at most PCORE_MAX_SHARDS */
    int32_t *done = pd_malloc((size_t) n * sizeof *done + 1);
    paged_hash *done_hash = pd_malloc((size_t) n * sizeof *done_hash + 1);
    uint32_t *where = pd_malloc((size_t) n * sizeof *where + 1);
    int rc = PAGED_E_NOMEM;
    if (done == NULL || done_hash == NULL || where == NULL)
        goto out;
    /* Every id in range was checked held by the validator; a rank that asked before must
     * have asked for the same hash in the same scope. */
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t b = (uint32_t) ids[i];
        if (t->asked[b] != 0 && (t->tenant[b] != tenant || memcmp(&t->hash[b], &hashes[i], sizeof hashes[i]) != 0)) {
            *bad = i;
            rc = PAGED_E_INVAL;
            goto out;
        }
        if ((t->asked[b] | (1u << shard)) == all) {
            done[k] = ids[i];
            done_hash[k] = hashes[i];
            where[k++] = i;
        }
    }
    rc = 0;
    if (k != 0) {
        uint32_t kbad = 0;
        rc = pa_publish(a, holder, tenant, k, done, done_hash, &kbad);
        if (rc < 0) {
            *bad = kbad < k ? where[kbad] : 0;
            goto out;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t b = (uint32_t) ids[i];
        if (t->asked[b] == 0) {
            t->hash[b] = hashes[i];
            t->tenant[b] = tenant;
        }
        t->asked[b] |= 1u << shard;
    }
out:
    free(done);
    free(done_hash);
    free(where);
    return rc;
}
