/* shard-t.c: a tensor-parallel pool's groups and its publish-on-every-shard rule, against a model. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/shard.h"
#include "tests/tap/basic.h"

#define NBLOCKS 24
#define OPS 4000
#define TENANT 1000u

/* ---- a backend whose pools are plain host memory: the shards' memories are all it makes */

/* Allocates cache's memory; returns PAGED_OK. */
static int fake_pool_create(pd_backend *b, uint32_t device, pk_cache *cache, pd_pool_mem **out, char **cause)
{
    (void) b;
    (void) device;
    (void) cause;
    cache->base = bcalloc(pk_cache_bytes(cache) + 1, 1);
    *out = cache->base;
    return PAGED_OK;
}

/* Frees a pool's memory. */
static void fake_pool_destroy(pd_backend *b, pd_pool_mem *mem)
{
    (void) b;
    free(mem);
}

static const struct pd_backend_ops fake_ops = {
    .name = "fake", .pool_create = fake_pool_create, .pool_destroy = fake_pool_destroy,
};

/* ---- the model of one group's blocks */

struct model {
    uint32_t asked[NBLOCKS];     /* ranks that asked to publish each block since it was taken */
    paged_hash hash[NBLOCKS];    /* under which hash */
    int published[NBLOCKS];      /* the allocator has it published */
    int held[NBLOCKS];           /* the group holds it */
};

/* The allocator's eviction hook (ctx: the model): the block is no longer published. */
static void on_evict(void *ctx, int32_t block, uint32_t tenant, const paged_hash *hash)
{
    (void) tenant;
    (void) hash;
    struct model *m = ctx;
    m->published[block] = 0;
}

/* Returns a hash none has used: (serial, salt). */
static paged_hash fresh_hash(uint64_t *serial)
{
    paged_hash h = { ++*serial, 0x5eed };
    return h;
}

/* Runs random operations of a group on a pool of n shards against the model; returns the
 * number of mismatches, having said the first. */
static int random_run(uint32_t n, uint64_t seed)
{
    tap_rng rng;
    tap_rng_seed(&rng, seed);
    struct pd_backend b = { .ops = &fake_ops };
    pk_cache c0 = { .num_layers = 1, .num_blocks = NBLOCKS, .num_kv_heads = 1, .head_dim = 64, .block_size = 8,
                    .dtype = PAGED_DTYPE_F32 };
    pd_pool_mem *m0 = NULL;
    char *cause = NULL;
    fake_pool_create(&b, 0, &c0, &m0, &cause);
    struct pd_shards *t = NULL;
    if (pd_shards_create(&b, n, 0, &c0, m0, &t, &cause) != PAGED_OK)
        bail("pd_shards_create");
    pa_alloc *a = pa_create(NBLOCKS);
    struct model m;
    memset(&m, 0, sizeof m);
    pa_set_evict_hook(a, on_evict, &m);
    uint32_t holder = 0;
    char why[160];
    if (pd_shards_join(t, 7, "g", 0, &holder, why, sizeof why) != PAGED_OK)
        bail("join: %s", why);
    uint64_t serial = 0;
    int bad = 0;
    for (int op = 0; op < OPS && bad == 0; op++) {
        const uint64_t dice = tap_rng_below(&rng, 10);
        if (dice < 3) {                               /* ALLOC one block */
            int32_t id;
            if (pa_alloc_blocks(a, holder, 1, &id) != PAGED_OK)
                continue;
            pd_shards_reset(t, 1, &id);
            m.asked[id] = 0;
            m.held[id] = 1;
            m.published[id] = 0;
        } else if (dice < 5) {                        /* FREE a held block */
            int32_t id = (int32_t) tap_rng_below(&rng, NBLOCKS);
            uint32_t where;
            if (!m.held[id])
                continue;
            if (pa_free_blocks(a, holder, 1, &id, &where) != PAGED_OK)
                bad += diag("op %d: free of block %d refused", op, id);
            m.held[id] = 0;
        } else {                                      /* a rank PUBLISHes a held block */
            int32_t id = (int32_t) tap_rng_below(&rng, NBLOCKS);
            if (!m.held[id])
                continue;
            const uint32_t rank = (uint32_t) tap_rng_below(&rng, n);
            /* The first rank names a fresh hash; later ones mostly the same, sometimes another. */
            int wrong = m.asked[id] != 0 && tap_rng_below(&rng, 6) == 0;
            paged_hash h = m.asked[id] == 0 || wrong ? fresh_hash(&serial) : m.hash[id];
            uint32_t where = 0;
            int rc = pd_shards_publish(t, a, holder, rank, TENANT, 1, &id, &h, &where);
            if (wrong) {
                if (rc != PAGED_E_INVAL)
                    bad += diag("op %d: rank %u named another hash for block %d: %d, not PAGED_E_INVAL", op, rank,
                                id, rc);
                continue;
            }
            if (m.asked[id] == 0)
                m.hash[id] = h;
            m.asked[id] |= 1u << rank;
            const int complete = m.asked[id] == (1u << n) - 1;
            const int newly = complete && !m.published[id];
            if (rc != newly)
                bad += diag("op %d: rank %u published block %d: %d, the model says %d", op, rank, id, rc, newly);
            if (complete)
                m.published[id] = 1;
        }
        /* Every block: published in the allocator exactly when the model says so. */
        for (int32_t id = 0; id < NBLOCKS && bad == 0; id++) {
            if (m.asked[id] == 0)
                continue;
            const int32_t found = pa_find(a, TENANT, &m.hash[id]);
            if ((found == id) != m.published[id])
                bad += diag("op %d: block %d (ranks %#x of %u) is %spublished, the model says %s", op, id,
                            m.asked[id], n, found == id ? "" : "not ", m.published[id] ? "published" : "not");
        }
    }
    pa_destroy(a);
    pd_shards_free(&b, t);
    free(m0);
    return bad;
}

/* Runs the cases. */
int main(void)
{
    plan(13);
    struct pd_backend b = { .ops = &fake_ops, .ndevices = 2 };
    pk_cache c0 = { .num_layers = 2, .num_blocks = 8, .num_kv_heads = 2, .head_dim = 64, .block_size = 16,
                    .dtype = PAGED_DTYPE_F32 };
    pd_pool_mem *m0 = NULL;
    char *cause = NULL;
    fake_pool_create(&b, 0, &c0, &m0, &cause);
    struct pd_shards *t = NULL;
    is_int(PAGED_OK, pd_shards_create(&b, 3, 1, &c0, m0, &t, &cause), "three shards made");
    ok(t->device[0] == 1 && t->device[1] == 0 && t->device[2] == 1,
       "shard r is on device (1 + r) modulo the backend's two devices (%u %u %u)", t->device[0], t->device[1],
       t->device[2]);
    ok(t->cache[1].base != NULL && t->cache[2].base != NULL && t->cache[1].base != t->cache[2].base
       && t->mem[0] == m0 && t->cache[1].num_kv_heads == 2, "shards 1 and 2 have memories of their own, of shard 0's "
       "geometry");

    char why[160];
    uint32_t h1 = 0, h2 = 0, h3 = 0, h4 = 0;
    is_int(PAGED_OK, pd_shards_join(t, 7, "model", 0, &h1, why, sizeof why), "uid 7's rank 0 of group model joins");
    ok(h1 >= PD_GROUP_HOLDER_BASE, "its holder lies above every connection id (%#x)", h1);
    ok(pd_shards_join(t, 7, "model", 1, &h2, why, sizeof why) == PAGED_OK && h2 == h1,
       "rank 1 of the same group shares that holder");
    is_int(PAGED_E_EXIST, pd_shards_join(t, 7, "model", 1, &h3, why, sizeof why), "rank 1 again: PAGED_E_EXIST (%s)",
           why);
    ok(pd_shards_join(t, 8, "model", 0, &h3, why, sizeof why) == PAGED_OK && h3 != h1,
       "the group of the same name of another uid is another holder");
    ok(pd_shards_join(t, 7, "", 0, &h4, why, sizeof why) == PAGED_OK && h4 != h1 && h4 != h3,
       "uid 7's default group is a third");
    ok(pd_shards_leave(t, h1, 0) == 0 && pd_shards_group(t, h1) != NULL, "rank 0 leaving keeps the group");
    ok(pd_shards_leave(t, h1, 1) == 1 && pd_shards_group(t, h1) == NULL, "its last rank leaving ends it");
    pd_shards_free(&b, t);
    free(m0);

    const uint64_t seed = tap_seed();
    int bad2 = random_run(2, seed), bad4 = random_run(4, seed + 1);
    ok(bad2 == 0, "%d random ALLOC, FREE and PUBLISH of 2 ranks: published exactly when every rank asked, with one "
       "hash, and not again after an allocation", OPS);
    ok(bad4 == 0, "the same with 4 ranks");
    return 0;
}
