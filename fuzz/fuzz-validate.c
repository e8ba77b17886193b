/* fuzz-validate.c: libFuzzer harness over the request validator and the engine (cpu backend). */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/conn.h"
#include "daemon/cpu/cpu.h"
#include "daemon/engine/batch.h"
#include "daemon/engine/engine.h"
#include "daemon/util/knobs.h"
#include "daemon/engine/validate.h"
#include "daemon/stats.h"
#include "fuzz/fuzz.h"
#include "fuzz/validate-setup.h"

/*
 * The input: one setup byte, n submission entries (struct pcore_sqe, 128 bytes each), then
 * the host arena: every byte left, exactly (a heap block of that size, so ASan sees any
 * access past it; on the cpu backend it is the data arena too). Setup bits 0-2 set the
 * per-client block limit (0 none, k: the references the client holds plus k - 1); bits 3-5
 * are n - 1 (fewer when the input is too short for them); bit 6 makes a wait for a word not
 * reached time out at once (PAGED_E_TIMEOUT) instead of holding its entry in the ring.
 *
 * The client (id FV_HOLDER) is attached to the pools of validate-setup.h, each with an
 * allocator in the state that header describes: blocks it holds writable, forked, published,
 * shared with another holder, blocks only the other holder has, cached and free ones. The n
 * entries go on its submission ring; the engine (pd_engine_drain, the same pass pagedd runs)
 * takes them in passes, as many at a time as daemon/engine/batch.h's rules allow. Beside it the
 * harness runs a model of each pass on a shadow of the state (allocators built the same
 * way, a copy of the arena):
 *
 *   1. it takes the entries the way batch.h says, validating each with pv_validate (twice:
 *      it is pure) against the shadow;
 *   2. an independent model of the rules (validate.h, paged(7)) checks every accepted op:
 *      every block it reads is held by the client, every block it writes is writable by it
 *      (held once, not shared, not published) through a writable attachment, every offset
 *      and length lies inside the arena, every array was copied faithfully, bounds and
 *      limits hold; the allocator ops run on the shadow, with their results checked;
 *   3. once the pass is taken, every op waiting for the backend must still have the rights
 *      it was validated with, since the backend runs it only then: the blocks it reads
 *      still held by the client, those it writes still writable by it;
 *   4. each waiting op runs alone on the backend over the shadow arena, with every arena
 *      byte and every pool block it does not name poisoned (ASan builds), so a kernel that
 *      strays reports a use of poisoned memory; then the pool is put back.
 *
 * Then the engine runs the same pass for real, with every pool block no op of the pass names
 * poisoned, and its completions must equal the model's (tag, status, error field and index,
 * count), its arena the shadow arena (ids written, kernel outputs: a merged DECODE launch
 * must give what separate ones give), the blocks it wrote what the lone runs wrote, and its
 * allocators the shadow's. At the end of the input the pools' contents and allocators are
 * put back, so every input starts from the same state.
 */

#define MAX_SQES 8

/* One pool of the harness: the engine's, the shadow allocator, the first contents. */
struct fpool {
    struct pd_pool p;
    pa_alloc *shadow;
    unsigned char *pristine;
    size_t bytes;
    size_t block_region;      /* bytes of one block in one layer, K or V */
};

static struct fpool pools[FV_NUM_POOLS];
static struct pd_attach attach[FV_NUM_POOLS], shadow_attach[FV_NUM_POOLS];
static struct pd_conn conn, shadow_conn;
static struct pd_conn *conns = &conn;      /* the engine's connection list: the client alone */
static struct pd_stats stats;
static struct pd_engine_env engine_env;
static struct pd_engine *engine;
static struct pd_channel channel;
static _Alignas(PCORE_CACHELINE) struct pcore_ring_ctl sq_ctl;
static _Alignas(PCORE_CACHELINE) struct pcore_ring_ctl cq_ctl;
static struct pcore_sqe sq_entries[MAX_SQES];
static struct pcore_cqe cq_entries[MAX_SQES];
static struct pcore_ring_prod sq_prod;    /* the harness submits */
static struct pcore_ring_cons cq_cons;    /* and reaps */

/* What the model learned of one accepted op: pool blocks and arena ranges it may touch. */
struct touch {
    struct fpool *fp;
    uint64_t reads;           /* pool blocks the op reads (pools have at most 64 blocks) */
    uint64_t writes;          /* pool blocks the op writes */
    struct fpool *fp2;        /* a COPY into another pool: that pool, and its blocks written */
    uint64_t writes2;
    uint64_t arena_off[2], arena_len[2];
};

/* One entry of a pass in the model: what its completion must say, and its op while it
 * waits for the backend. */
struct item {
    struct pcore_cqe cqe;
    struct pv_op op;
    struct touch t;
    int waits;
};

/* ---- setup */

/* The allocator's eviction hook: counts for the engine's event, as pool.c's does. */
static void on_evict(void *ctx, int32_t block, uint32_t tenant, const paged_hash *hash)
{
    (void) tenant;
    (void) block;
    (void) hash;
    struct pd_pool *p = ctx;
    p->evicted_pending++;
}

/* Builds pool i's allocators (engine's and shadow) in the documented state; returns nothing. */
static void build_alloc(int i)
{
    struct fpool *fp = &pools[i];
    if (fp->p.alloc != NULL)
        pa_destroy(fp->p.alloc);
    if (fp->shadow != NULL)
        pa_destroy(fp->shadow);
    fp->p.alloc = fv_build_alloc(&fv_pools[i]);
    fp->shadow = fv_build_alloc(&fv_pools[i]);
    if (fp->p.alloc == NULL || fp->shadow == NULL)
        fuzz_fail(__FILE__, __LINE__, "fv_build_alloc", "pool %u: setup failed", fv_pools[i].id);
    pa_set_evict_hook(fp->p.alloc, on_evict, &fp->p);
    fp->p.evicted_pending = 0;
    attach[i].view.alloc = fp->p.alloc;
    shadow_attach[i].view.alloc = fp->shadow;
}

/* Fills pool memory with finite values from a fixed generator; returns nothing. */
static void fill_pool(struct fpool *fp)
{
    uint64_t x = 0x9e3779b97f4a7c15u * (fp->p.id + 1);
    size_t es = pk_dtype_size(fp->p.cache.dtype);
    unsigned char *b = fp->p.cache.base;
    for (size_t i = 0; i < fp->bytes; i += es) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        float v = (float) ((int) (x % 2001) - 1000) / 1000.0f;
        uint32_t u;
        uint16_t h;
        switch (fp->p.cache.dtype) {
        case PAGED_DTYPE_F32:
            memcpy(b + i, &v, 4);
            break;
        case PAGED_DTYPE_F16:
            /* Small normal halves: any sign and mantissa, exponent 13 or 14. */
            h = (uint16_t) (((x >> 20) & 1) << 15 | (13 + ((x >> 21) & 1)) << 10 | ((x >> 22) & 0x3ff));
            memcpy(b + i, &h, 2);
            break;
        case PAGED_DTYPE_BF16:
            memcpy(&u, &v, 4);
            h = (uint16_t) (u >> 16);
            memcpy(b + i, &h, 2);
            break;
        default:
            /* e4m3: any byte but the two NaNs. */
            b[i] = (unsigned char) ((x >> 24) & 0xff);
            if ((b[i] & 0x7f) == 0x7f)
                b[i] = 0x3c;
            break;
        }
    }
}

/* Makes pool i and the client's two views of it; returns nothing. */
static void make_pool(int i)
{
    const struct fv_pool *s = &fv_pools[i];
    struct fpool *fp = &pools[i];
    struct pd_pool *p = &fp->p;
    p->id = s->id;
    snprintf(p->name, sizeof p->name, "pool%u", s->id);
    p->geom = (struct pd_pool_geom) {
        .num_layers = s->num_layers, .num_kv_heads = s->num_kv_heads, .head_dim = s->head_dim,
        .block_size = s->block_size, .num_blocks = s->num_blocks, .dtype = s->dtype,
        .mode = 0600, .k_scale = s->k_scale, .v_scale = s->v_scale,
    };
    p->cache = (pk_cache) {
        .num_layers = (int32_t) s->num_layers, .num_blocks = (int32_t) s->num_blocks,
        .num_kv_heads = (int32_t) s->num_kv_heads, .head_dim = (int32_t) s->head_dim,
        .block_size = (int32_t) s->block_size, .dtype = s->dtype,
        .k_scale = s->k_scale, .v_scale = s->v_scale,
    };
    fp->bytes = pk_cache_bytes(&p->cache);
    fp->block_region = (size_t) s->num_kv_heads * s->block_size * s->head_dim * pk_dtype_size(s->dtype);
    p->geom.block_bytes = fp->bytes / s->num_blocks;
    p->geom.bytes = fp->bytes;
    /* Exactly the pool's size on the heap, so ASan sees any access beyond it. */
    p->cache.base = malloc(fp->bytes);
    fp->pristine = malloc(fp->bytes);
    if (p->cache.base == NULL || fp->pristine == NULL)
        fuzz_fail(__FILE__, __LINE__, "malloc", "out of memory");
    fill_pool(fp);
    memcpy(fp->pristine, p->cache.base, fp->bytes);
    p->attached = 1;
    struct pv_pool view = {
        .id = s->id, .num_layers = s->num_layers, .num_kv_heads = s->num_kv_heads,
        .head_dim = s->head_dim, .block_size = s->block_size, .num_blocks = s->num_blocks,
        .dtype = s->dtype, .writable = s->writable, .tenant = FV_TENANT, .holder = FV_HOLDER, .user = p,
    };
    attach[i] = (struct pd_attach) { p, view };
    shadow_attach[i] = (struct pd_attach) { p, view };
    build_alloc(i);
}

/* The engine's kill: the harness's rings are never corrupt and its backend never runs late,
 * so a disconnection is a failure. Returns nothing (fails). */
static void engine_kill(void *ctx, struct pd_conn *c, enum pd_log_level level, const char *reason)
{
    (void) ctx;
    (void) level;
    fuzz_fail(__FILE__, __LINE__, "kill", "the engine disconnected client %u: %s", c->id, reason);
}

/* The engine's flush_evictions: with nobody subscribed, the evictions are only counted as
 * announced, as pagedd counts them. Returns nothing. */
static void engine_flush_evictions(void *ctx)
{
    (void) ctx;
    for (int i = 0; i < FV_NUM_POOLS; i++)
        pools[i].p.evicted_pending = 0;
}

/* Makes the pools, the client's connection, channel and shadow, and the engine over them;
 * returns 0. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void) argc;
    (void) argv;
    fuzz_log_init();
    char *cause = NULL;
    if (pd_knobs_load(&cause) < 0)   /* the environment's knobs, as pagedd's main reads them */
        fuzz_fail(__FILE__, __LINE__, "pd_knobs_load", "%s", cause != NULL ? cause : "?");
    engine_env = (struct pd_engine_env) {
        .backend = pd_backend_cpu_open(1, &cause), .conns = &conns,
        .dependency_timeout_ms = 3600000,   /* set per input: see waits_time_out */
        .stats = &stats, .kill = engine_kill, .flush_evictions = engine_flush_evictions,
    };
    if (engine_env.backend == NULL)
        fuzz_fail(__FILE__, __LINE__, "pd_backend_cpu_open", "%s", cause != NULL ? cause : "?");
    engine = pd_engine_create(&engine_env);
    if (engine == NULL)
        fuzz_fail(__FILE__, __LINE__, "pd_engine_create", "out of memory");
    for (int i = 0; i < FV_NUM_POOLS; i++)
        make_pool(i);

    pcore_ring_ctl_init(&sq_ctl, 0);
    pcore_ring_ctl_init(&cq_ctl, 0);
    if (pcore_ring_cons_init(&channel.sq, &sq_ctl, sq_entries, MAX_SQES, sizeof sq_entries[0]) < 0
        || pcore_ring_prod_init(&channel.cq, &cq_ctl, cq_entries, MAX_SQES, sizeof cq_entries[0]) < 0
        || pcore_ring_prod_init(&sq_prod, &sq_ctl, sq_entries, MAX_SQES, sizeof sq_entries[0]) < 0
        || pcore_ring_cons_init(&cq_cons, &cq_ctl, cq_entries, MAX_SQES, sizeof cq_entries[0]) < 0)
        fuzz_fail(__FILE__, __LINE__, "ring init", "cannot set up the rings");
    channel.hdr.sq_entries = channel.hdr.cq_entries = MAX_SQES;
    channel.sq_wait = channel.cq_notify = -1;

    conn.id = FV_HOLDER;
    conn.fd = -1;
    conn.pid = 1;
    conn.state = PD_CONN_READY;
    snprintf(conn.name, sizeof conn.name, "fuzz");
    conn.ch = &channel;
    conn.att = attach;
    conn.natt = conn.catt = FV_NUM_POOLS;
    shadow_conn = conn;
    shadow_conn.att = shadow_attach;
    shadow_conn.ch = NULL;
    return 0;
}

/* Returns the pool the validator sees under id, as engine.c's lookup does, or NULL. */
static const struct pv_pool *find_pool(void *ctx, uint32_t id)
{
    struct pd_attach *a = pd_conn_attach_find(ctx, id);
    return a != NULL ? &a->view : NULL;
}

/* Returns the block references the client holds in the shadow allocators. */
static uint64_t shadow_held(void)
{
    uint64_t n = 0;
    for (int i = 0; i < FV_NUM_POOLS; i++)
        n += pa_held_total(pools[i].shadow, FV_HOLDER);
    return n;
}

/* ---- step 2: the model of the rules */

/* Returns whether n elements of es bytes at off fit an arena of size bytes (in 128 bits). */
static int fits(uint64_t off, uint64_t n, uint64_t es, uint64_t size)
{
    unsigned __int128 end = (unsigned __int128) off + (unsigned __int128) n * es;
    return end <= size;
}

/* Returns the int32 at byte off of the arena (range checked by the caller). */
static int32_t arena_i32(const struct pv_env *env, uint64_t off)
{
    int32_t v;
    memcpy(&v, env->host + off, 4);
    return v;
}

/* Returns whether dtype may be an activation against a cache of cache_dtype: the same
 * non-fp8 dtype, or f32, f16 or bf16 for an fp8 cache. */
static int act_ok(uint32_t dtype, int32_t cache_dtype)
{
    int wide = dtype == PAGED_DTYPE_F32 || dtype == PAGED_DTYPE_F16 || dtype == PAGED_DTYPE_BF16;
    if (cache_dtype == PAGED_DTYPE_FP8_E4M3)
        return wide;
    return wide && (int32_t) dtype == cache_dtype;
}

/* Returns whether dtype may be APPEND's new keys and values against a cache of cache_dtype:
 * an activation's dtype, or fp8 for an fp8 cache (stored byte for byte). */
static int kv_ok(uint32_t dtype, int32_t cache_dtype)
{
    return act_ok(dtype, cache_dtype)
           || (dtype == PAGED_DTYPE_FP8_E4M3 && cache_dtype == PAGED_DTYPE_FP8_E4M3);
}

/* Checks that block id is in range and held by the client; marks it read (when mark).
 * Returns nothing. */
static void model_read(struct touch *t, const pa_alloc *a, int32_t id, const char *what,
                       uint32_t i, int mark)
{
    FUZZ_CHECK(id >= 0 && (uint32_t) id < t->fp->p.geom.num_blocks, "%s[%u]: block %d out of "
               "range", what, i, id);
    FUZZ_CHECK(pa_held(a, FV_HOLDER, id) > 0, "%s[%u]: block %d not held", what, i, id);
    if (mark)
        t->reads |= UINT64_C(1) << id;
}

/* Checks that block id may be written by the client; marks it written. Returns nothing. */
static void model_write(struct touch *t, const pa_alloc *a, int32_t id, const char *what, uint32_t i)
{
    FUZZ_CHECK(id >= 0 && (uint32_t) id < t->fp->p.geom.num_blocks, "%s[%u]: block %d out of "
               "range", what, i, id);
    FUZZ_CHECK(pa_writable(a, FV_HOLDER, id) == 1, "%s[%u]: block %d not writable (%d)", what,
               i, id, pa_writable(a, FV_HOLDER, id));
    t->writes |= UINT64_C(1) << id;
}

/* Checks an array of n int32 at off in the host arena against the op's copy; returns
 * nothing. */
static void model_array(const struct pv_env *env, uint64_t off, uint32_t n, const int32_t *copy,
                        const char *what)
{
    FUZZ_CHECK(fits(off, n, 4, env->host_size), "%s: %u entries at %llu past the arena (%llu)",
               what, n, (unsigned long long) off, (unsigned long long) env->host_size);
    FUZZ_CHECK(n == 0 || copy != NULL, "%s: no copy", what);
    for (uint32_t i = 0; i < n; i++)
        FUZZ_CHECK(copy[i] == arena_i32(env, off + 4ull * i), "%s[%u]: copied %d, arena has %d",
                   what, i, copy[i], arena_i32(env, off + 4ull * i));
}

/* Checks the limit on block references for an op that takes n more; returns nothing. */
static void model_limit(const struct pv_env *env, uint64_t n)
{
    FUZZ_CHECK(env->max_blocks == 0 || env->held_total + n <= env->max_blocks,
               "%llu more references pass the limit %llu (held %llu)", (unsigned long long) n,
               (unsigned long long) env->max_blocks, (unsigned long long) env->held_total);
}

/* Records arena range k the backend may touch, checked inside the data arena and aligned;
 * returns nothing. */
static void model_range(struct touch *t, int k, const struct pv_env *env, uint64_t off,
                        uint64_t n, uint64_t es, const char *what)
{
    FUZZ_CHECK(fits(off, n, es, env->data_size), "%s: %llu x %llu bytes at %llu past the data "
               "arena (%llu)", what, (unsigned long long) n, (unsigned long long) es,
               (unsigned long long) off, (unsigned long long) env->data_size);
    FUZZ_CHECK(es == 0 || off % es == 0, "%s: offset %llu not aligned to %llu", what,
               (unsigned long long) off, (unsigned long long) es);
    t->arena_off[k] = off;
    t->arena_len[k] = n * es;
}

/* Checks an op's hashes against the token ids of the arena; returns nothing. */
static void model_hashes(const struct pv_env *env, const struct pcore_req_prefix *a,
                         uint32_t block_size, const struct pv_op *op)
{
    if (op->count == 0)
        return;
    size_t ntok = (size_t) op->count * block_size;
    int32_t *tokens = malloc(ntok * 4);
    paged_hash *h = malloc(sizeof *h * op->count);
    if (tokens == NULL || h == NULL)
        fuzz_fail(__FILE__, __LINE__, "malloc", "out of memory");
    memcpy(tokens, env->host + a->tokens_off, ntok * 4);
    paged_hash parent = a->parent;
    long got = paged_hash_blocks(&parent, tokens, ntok, block_size, a->salt, h);
    FUZZ_CHECK(got == (long) op->count && memcmp(h, op->hashes, sizeof *h * op->count) == 0,
               "hashes of %u blocks differ from the token ids'", op->count);
    free(tokens);
    free(h);
}

/* The model of DECODE and PREFILL; returns nothing. */
static void model_attn(const struct pcore_sqe *s, const struct pv_env *env, const struct pv_op *op,
                       struct touch *t, const pa_alloc *al)
{
    const struct pcore_req_attn *a = &s->u.attn;
    const struct pd_pool_geom *g = &t->fp->p.geom;
    int prefill = s->opcode == PAGED_OP_PREFILL;
    uint32_t ns = a->num_seqs;
    FUZZ_CHECK(s->layer >= 0 && (uint32_t) s->layer < g->num_layers && op->layer_begin == s->layer
               && op->num_layers == 1, "layer %d of %u", s->layer, g->num_layers);
    FUZZ_CHECK(a->num_q_heads > 0 && a->num_q_heads % g->num_kv_heads == 0
               && op->num_q_heads == a->num_q_heads, "%u query heads", a->num_q_heads);
    FUZZ_CHECK(act_ok(a->dtype, g->dtype) && op->dtype == (int32_t) a->dtype,
               "q dtype %u against cache %d", a->dtype, g->dtype);
    FUZZ_CHECK(op->count == ns && op->bt_stride == a->bt_stride, "counts");
    /* The kernels take these as int32: every accepted value must fit. */
    FUZZ_CHECK(ns <= INT32_MAX && a->bt_stride <= INT32_MAX && a->num_q_heads <= INT32_MAX,
               "%u sequences, stride %u, %u query heads: past what a kernel takes", ns,
               a->bt_stride, a->num_q_heads);
    FUZZ_CHECK(isfinite(a->attn.sm_scale) && isfinite(a->attn.soft_cap) && a->attn.window >= 0
               && op->window == a->attn.window && op->soft_cap == a->attn.soft_cap, "options");
    float scale = a->attn.sm_scale != 0 ? a->attn.sm_scale : 1.0f / sqrtf((float) g->head_dim);
    FUZZ_CHECK(op->sm_scale == scale, "scale %g, expected %g", (double) op->sm_scale,
               (double) scale);
    uint64_t bt_n = (uint64_t) ns * a->bt_stride;
    FUZZ_CHECK(fits(a->bt_off, bt_n, 4, env->host_size), "block table past the arena");
    model_array(env, a->lens_off, ns, op->seq_lens, "seq_lens");
    if (a->attn.has_alibi) {
        FUZZ_CHECK(fits(a->attn.alibi_off, a->num_q_heads, 4, env->host_size) && op->alibi != NULL,
                   "alibi past the arena");
        for (uint32_t h = 0; h < a->num_q_heads; h++) {
            float v;
            memcpy(&v, env->host + a->attn.alibi_off + 4ull * h, 4);
            FUZZ_CHECK(isfinite(v) && memcmp(&v, &op->alibi[h], 4) == 0, "alibi[%u]", h);
        }
    } else {
        FUZZ_CHECK(op->alibi == NULL, "alibi without has_alibi");
    }
    if (prefill)
        model_array(env, a->qo_indptr_off, ns + 1, op->qo_indptr, "qo_indptr");
    int64_t max_qo = 0;
    for (uint32_t i = 0; i < ns; i++) {
        int32_t len = op->seq_lens[i];
        FUZZ_CHECK(len >= 1 && (uint64_t) len <= (uint64_t) a->bt_stride * g->block_size,
                   "seq_lens[%u] = %d, stride %u", i, len, a->bt_stride);
        int64_t lo = op->qo_indptr[i], hi = op->qo_indptr[i + 1];
        if (prefill) {
            FUZZ_CHECK(lo >= 0 && hi >= lo && hi - lo <= len, "qo_indptr[%u..%u] = %lld..%lld, "
                       "len %d", i, i + 1, (long long) lo, (long long) hi, len);
            if (hi - lo > max_qo)
                max_qo = hi - lo;
        } else {
            FUZZ_CHECK(lo == i && hi == i + 1, "decode qo_indptr[%u]", i);
        }
        uint32_t used = (uint32_t) (((uint64_t) len + g->block_size - 1) / g->block_size);
        for (uint32_t j = 0; j < a->bt_stride; j++) {
            uint64_t at = (uint64_t) i * a->bt_stride + j;
            int32_t id = op->block_tables[at];
            if (j < used) {
                FUZZ_CHECK(id == arena_i32(env, a->bt_off + 4 * at), "block_tables[%llu] copied "
                           "wrong", (unsigned long long) at);
                model_read(t, al, id, "block_tables", (uint32_t) at, 1);
            } else {
                FUZZ_CHECK(id == 0, "block_tables[%llu] = %d past the length, not zeroed",
                           (unsigned long long) at, id);
            }
        }
    }
    if (prefill)
        FUZZ_CHECK(op->qo_indptr[0] == 0, "qo_indptr[0] = %d", op->qo_indptr[0]);
    int64_t rows = prefill ? (int64_t) op->qo_indptr[ns] : (int64_t) ns;
    FUZZ_CHECK(op->total_q == rows && op->max_qo_len == (prefill ? max_qo : ns != 0),
               "total_q %d (expected %lld), max_qo_len %d", op->total_q, (long long) rows,
               op->max_qo_len);
    uint64_t es = paged_dtype_size((paged_dtype) a->dtype);
    uint64_t elems = (uint64_t) rows * a->num_q_heads * g->head_dim;
    model_range(t, 0, env, a->q_off, elems, es, "q");
    model_range(t, 1, env, a->out_off, elems, es, "out");
    uint64_t bytes = elems * es;
    FUZZ_CHECK(bytes == 0 || a->q_off + bytes <= a->out_off || a->out_off + bytes <= a->q_off,
               "q and out overlap");
}

/* The model of APPEND; returns nothing. */
static void model_append(const struct pcore_sqe *s, const struct pv_env *env, const struct pv_op *op,
                         struct touch *t, const pa_alloc *al)
{
    const struct pcore_req_append *a = &s->u.append;
    const struct pd_pool_geom *g = &t->fp->p.geom;
    if (s->flags & PCORE_SQE_ALL_LAYERS)
        FUZZ_CHECK(op->layer_begin == 0 && op->num_layers == (int32_t) g->num_layers, "all layers");
    else
        FUZZ_CHECK(s->layer >= 0 && (uint32_t) s->layer < g->num_layers
                   && op->layer_begin == s->layer && op->num_layers == 1, "layer %d", s->layer);
    FUZZ_CHECK(kv_ok(a->dtype, g->dtype) && op->dtype == (int32_t) a->dtype,
               "k/v dtype %u against cache %d", a->dtype, g->dtype);
    uint32_t n = a->num_tokens;
    FUZZ_CHECK(op->num_tokens == n, "num_tokens");
    model_array(env, a->slots_off, n, op->slots, "slots");
    uint64_t es = paged_dtype_size((paged_dtype) a->dtype);
    uint64_t elems = (uint64_t) op->num_layers * n * g->num_kv_heads * g->head_dim;
    model_range(t, 0, env, a->k_off, elems, es, "k");
    model_range(t, 1, env, a->v_off, elems, es, "v");
    uint64_t seen[64 * 32 / 64]; /* one bit per slot: at most 64 blocks of 32 tokens */
    uint64_t nslots = (uint64_t) g->num_blocks * g->block_size;
    FUZZ_CHECK(nslots <= sizeof seen * 8, "pool of %llu slots", (unsigned long long) nslots);
    memset(seen, 0, sizeof seen);
    uint32_t written = 0;
    for (uint32_t i = 0; i < n; i++) {
        int32_t slot = op->slots[i];
        if (slot == -1)
            continue;
        FUZZ_CHECK(slot >= 0 && (uint64_t) slot < nslots, "slots[%u] = %d", i, slot);
        FUZZ_CHECK(!(seen[slot / 64] >> (slot % 64) & 1), "slots[%u] = %d written twice", i, slot);
        seen[slot / 64] |= UINT64_C(1) << (slot % 64);
        model_write(t, al, slot / (int32_t) g->block_size, "slots", i);
        written++;
    }
    FUZZ_CHECK(op->count == written, "count %u, slots written %u", op->count, written);
}

/* The model of a COPY into another pool: the destination attached, writable, of the source's
 * geometry; each destination block in range, writable, named once. Returns nothing. */
static void model_copy_across(const struct pcore_sqe *s, const struct pv_op *op, struct touch *t)
{
    struct pd_attach *d = pd_conn_attach_find(&shadow_conn, s->u.copy.dst_pool);
    FUZZ_CHECK(d != NULL && op->pool2 == &d->view && d->view.writable, "dst_pool %u: not a writable attachment",
               s->u.copy.dst_pool);
    const struct pv_pool *a = op->pool, *b = op->pool2;
    FUZZ_CHECK(a->num_layers == b->num_layers && a->num_kv_heads == b->num_kv_heads && a->head_dim == b->head_dim
               && a->block_size == b->block_size && a->dtype == b->dtype, "dst_pool %u: another geometry",
               s->u.copy.dst_pool);
    t->fp2 = (struct fpool *) d->pool;
    for (uint32_t i = 0; i < op->count; i++) {
        int32_t id = op->ids2[i];
        FUZZ_CHECK(id >= 0 && (uint32_t) id < t->fp2->p.geom.num_blocks, "dst[%u] = %d", i, id);
        FUZZ_CHECK(pa_writable(t->fp2->shadow, FV_HOLDER, id) == 1, "dst[%u]: block %d not writable", i, id);
        FUZZ_CHECK(!(t->writes2 >> id & 1), "dst[%u] = %d named twice", i, id);
        t->writes2 |= UINT64_C(1) << id;
    }
}

/* The model of COPY; returns nothing. */
static void model_copy(const struct pcore_sqe *s, const struct pv_env *env, const struct pv_op *op,
                       struct touch *t, const pa_alloc *al)
{
    uint32_t n = s->u.copy.count;
    FUZZ_CHECK(op->count == n, "count");
    model_array(env, s->u.copy.src_off, n, op->ids, "src");
    model_array(env, s->u.copy.dst_off, n, op->ids2, "dst");
    for (uint32_t i = 0; i < n; i++)
        model_read(t, al, op->ids[i], "src", i, 1);
    const int across = s->u.copy.dst_pool != 0 && s->u.copy.dst_pool != s->pool;
    FUZZ_CHECK(across == (op->pool2 != NULL), "dst_pool %u: taken as %s", s->u.copy.dst_pool,
               op->pool2 != NULL ? "another pool" : "the same pool");
    if (across) {
        model_copy_across(s, op, t);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        int32_t d = op->ids2[i];
        FUZZ_CHECK(d >= 0 && (uint32_t) d < t->fp->p.geom.num_blocks, "dst[%u] = %d", i, d);
        FUZZ_CHECK(!(t->writes >> d & 1), "dst[%u] = %d named twice", i, d);
        model_write(t, al, d, "dst", i);
    }
    FUZZ_CHECK((t->reads & t->writes) == 0, "a block is both source and destination");
}

/* Step 2: checks an accepted op against the rules and the shadow state; fills *t. Returns
 * nothing. */
static void model(const struct pcore_sqe *s, const struct pv_env *env, const struct pv_op *op,
                  struct touch *t)
{
    memset(t, 0, sizeof *t);
    FUZZ_CHECK(op->opcode == s->opcode && op->tag == s->tag && op->flags == s->flags, "echo");
    FUZZ_CHECK(s->opcode < PCORE_OP_COUNT_, "opcode %u accepted", s->opcode);
    FUZZ_CHECK((s->flags & ~(PCORE_SQE_ALL_LAYERS | PCORE_SQE_WAIT | PCORE_SQE_SIGNAL | PCORE_SQE_HOST_WORDS)) == 0
               && (!(s->flags & PCORE_SQE_ALL_LAYERS) || s->opcode == PAGED_OP_APPEND)
               && (!(s->flags & (PCORE_SQE_WAIT | PCORE_SQE_SIGNAL)) || pv_backend_op(s->opcode))
               && (!(s->flags & PCORE_SQE_HOST_WORDS) || (s->flags & (PCORE_SQE_WAIT | PCORE_SQE_SIGNAL))),
               "flags 0x%x accepted for opcode %u", s->flags, s->opcode);
    uint64_t words = (s->flags & PCORE_SQE_HOST_WORDS) ? env->host_size : env->data_size;
    FUZZ_CHECK(!(s->flags & PCORE_SQE_WAIT)
                   || (s->dep.wait_off % 4 == 0 && words >= 4 && s->dep.wait_off <= words - 4
                       && op->wait_off == s->dep.wait_off && op->wait_value == s->dep.wait_value),
               "wait word %llu accepted", (unsigned long long) s->dep.wait_off);
    FUZZ_CHECK(!(s->flags & PCORE_SQE_SIGNAL)
                   || (s->dep.signal_off % 4 == 0 && words >= 4 && s->dep.signal_off <= words - 4
                       && op->signal_off == s->dep.signal_off && op->signal_value == s->dep.signal_value),
               "signal word %llu accepted", (unsigned long long) s->dep.signal_off);
    if (s->opcode == PAGED_OP_NOP) {
        FUZZ_CHECK(op->pool == NULL, "NOP with a pool");
        return;
    }
    struct pd_attach *a = pd_conn_attach_find(&shadow_conn, s->pool);
    FUZZ_CHECK(a != NULL && op->pool == &a->view, "pool %u: not the client's attachment", s->pool);
    const int copy_across = s->opcode == PAGED_OP_COPY && s->u.copy.dst_pool != 0 && s->u.copy.dst_pool != s->pool;
    FUZZ_CHECK(!pv_op_writes(s->opcode) || a->view.writable || copy_across, "opcode %u writes a read-only "
               "attachment", s->opcode);
    t->fp = (struct fpool *) a->pool;
    const pa_alloc *al = t->fp->shadow;
    const struct pd_pool_geom *g = &t->fp->p.geom;
    switch (s->opcode) {
    case PAGED_OP_ALLOC:
        FUZZ_CHECK(op->count == s->u.alloc.count && op->out_ids_off == s->u.alloc.ids_off, "alloc");
        FUZZ_CHECK(fits(op->out_ids_off, op->count, 4, env->host_size), "alloc ids past the arena");
        model_limit(env, op->count);
        break;
    case PAGED_OP_FREE:
    case PAGED_OP_FORK:
        FUZZ_CHECK(op->count == s->u.blocks.count, "count");
        model_array(env, s->u.blocks.ids_off, op->count, op->ids, "ids");
        for (uint32_t i = 0; i < op->count; i++)
            model_read(t, al, op->ids[i], "ids", i, 0);
        if (s->opcode == PAGED_OP_FORK)
            model_limit(env, op->count);
        break;
    case PAGED_OP_APPEND: model_append(s, env, op, t, al); break;
    case PAGED_OP_DECODE:
    case PAGED_OP_PREFILL: model_attn(s, env, op, t, al); break;
    case PAGED_OP_COPY: model_copy(s, env, op, t, al); break;
    case PAGED_OP_PUBLISH:
    case PAGED_OP_LOOKUP: {
        const struct pcore_req_prefix *pr = &s->u.prefix;
        uint32_t n = pr->num_blocks;
        FUZZ_CHECK(fits(pr->tokens_off, (uint64_t) n * g->block_size, 4, env->host_size)
                   && fits(pr->ids_off, n, 4, env->host_size), "prefix arrays past the arena");
        if (s->opcode == PAGED_OP_PUBLISH) {
            FUZZ_CHECK(op->count == n, "publish count %u of %u", op->count, n);
            model_array(env, pr->ids_off, n, op->ids, "ids");
            for (uint32_t i = 0; i < n; i++)
                model_read(t, al, op->ids[i], "ids", i, 0);
        } else {
            uint64_t want = n;
            if (env->max_blocks != 0) {
                uint64_t room = env->held_total < env->max_blocks ? env->max_blocks - env->held_total : 0;
                FUZZ_CHECK(room != 0 || n == 0, "lookup at the limit accepted");
                want = want < room ? want : room;
            }
            FUZZ_CHECK(op->count == want && op->out_ids_off == pr->ids_off, "lookup count %u, "
                       "expected %llu", op->count, (unsigned long long) want);
        }
        model_hashes(env, pr, g->block_size, op);
        break;
    }
    default:
        fuzz_fail(__FILE__, __LINE__, "known opcode", "opcode %u accepted", s->opcode);
    }
}

/* Runs an accepted allocator op on the shadow as the engine does, into the shadow arena,
 * and checks what it did; fills the completion. Returns nothing. */
static void shadow_execute(const struct pv_op *op, struct fpool *fp, unsigned char *arena,
                           struct pcore_cqe *cqe)
{
    pa_alloc *al = fp != NULL ? fp->shadow : NULL;
    uint64_t before = shadow_held();
    uint32_t bad = 0;
    int rc = PAGED_OK;
    switch (op->opcode) {
    case PAGED_OP_NOP:
        break;
    case PAGED_OP_ALLOC:
    case PAGED_OP_LOOKUP: {
        int32_t *ids = malloc((size_t) op->count * 4 + 4);
        if (ids == NULL)
            fuzz_fail(__FILE__, __LINE__, "malloc", "out of memory");
        if (op->opcode == PAGED_OP_ALLOC) {
            rc = pa_alloc_blocks(al, FV_HOLDER, op->count, ids);
            FUZZ_CHECK(rc == PAGED_OK || rc == PAGED_E_NOSPC, "ALLOC: %s", paged_strerror(rc));
            if (rc == PAGED_OK)
                cqe->count = op->count;
            else
                cqe->err_field = PCORE_FIELD_COUNT;
        } else {
            cqe->count = pa_lookup(al, FV_HOLDER, FV_TENANT, op->count, op->hashes, ids);
            FUZZ_CHECK(cqe->count <= op->count, "LOOKUP found %u of %u", cqe->count, op->count);
        }
        for (uint32_t i = 0; rc == PAGED_OK && i < cqe->count; i++)
            FUZZ_CHECK(op->opcode == PAGED_OP_LOOKUP
                       ? pa_held(al, FV_HOLDER, ids[i]) > 0
                       : pa_held(al, FV_HOLDER, ids[i]) == 1 && pa_writable(al, FV_HOLDER, ids[i]) == 1,
                       "opcode %u gave block %d, not held (writable)", op->opcode, ids[i]);
        if (rc == PAGED_OK && cqe->count != 0)
            memcpy(arena + op->out_ids_off, ids, (size_t) cqe->count * 4);
        FUZZ_CHECK(shadow_held() == before + (rc == PAGED_OK ? cqe->count : 0), "references "
                   "moved by other than the blocks taken");
        free(ids);
        break;
    }
    case PAGED_OP_FREE:
    case PAGED_OP_FORK:
        rc = op->opcode == PAGED_OP_FREE ? pa_free_blocks(al, FV_HOLDER, op->count, op->ids, &bad)
                                         : pa_fork_blocks(al, FV_HOLDER, op->count, op->ids, &bad);
        FUZZ_CHECK(rc == PAGED_OK || rc == PAGED_E_NOTHELD || rc == PAGED_E_LIMIT,
                   "FREE/FORK: %s", paged_strerror(rc));
        if (rc < 0) {
            cqe->err_field = PCORE_FIELD_IDS;
            cqe->err_index = bad;
            FUZZ_CHECK(shadow_held() == before, "a failed FREE/FORK moved references");
        } else {
            cqe->count = op->count;
            FUZZ_CHECK(shadow_held() == (op->opcode == PAGED_OP_FREE ? before - op->count
                                                                    : before + op->count),
                       "FREE/FORK of %u moved references by another count", op->count);
        }
        break;
    case PAGED_OP_PUBLISH:
        rc = pa_publish(al, FV_HOLDER, FV_TENANT, op->count, op->ids, op->hashes, &bad);
        FUZZ_CHECK(rc >= 0 && (uint32_t) rc <= op->count && shadow_held() == before,
                   "PUBLISH: %d of %u", rc, op->count);
        cqe->count = (uint32_t) rc;
        rc = PAGED_OK;
        break;
    default:
        fuzz_fail(__FILE__, __LINE__, "allocator op", "opcode %u", op->opcode);
    }
    cqe->status = rc;
}

/* ---- steps 3 and 4: the backend's ops of a pass */


/* Returns the byte offset of block b of layer l, K or V, in a pool. */
static size_t block_at(const struct fpool *fp, int32_t l, int32_t kv, int32_t b)
{
    return pk_cache_index(&fp->p.cache, l, kv, b, 0, 0) * pk_dtype_size(fp->p.cache.dtype);
}

/* Poisons (ASan) every block region of a pool outside keep; returns nothing. */
static void poison_pool(struct fpool *fp, uint64_t keep)
{
    const pk_cache *c = &fp->p.cache;
    FUZZ_POISON(c->base, fp->bytes);
    for (int32_t b = 0; b < c->num_blocks; b++)
        if (keep >> b & 1)
            for (int32_t l = 0; l < c->num_layers; l++)
                for (int32_t kv = 0; kv < 2; kv++)
                    FUZZ_UNPOISON((char *) c->base + block_at(fp, l, kv, b), fp->block_region);
}

/* Copies the blocks in mask out of (save) or back into (!save) buf; returns nothing. */
static void blocks_copy(struct fpool *fp, uint64_t mask, unsigned char *buf, int save)
{
    const pk_cache *c = &fp->p.cache;
    size_t k = 0;
    for (int32_t b = 0; b < c->num_blocks; b++) {
        if (!(mask >> b & 1))
            continue;
        for (int32_t l = 0; l < c->num_layers; l++)
            for (int32_t kv = 0; kv < 2; kv++, k++) {
                unsigned char *at = (unsigned char *) c->base + block_at(fp, l, kv, b);
                if (save)
                    memcpy(buf + k * fp->block_region, at, fp->block_region);
                else
                    memcpy(at, buf + k * fp->block_region, fp->block_region);
            }
    }
}

/* Puts the blocks in mask back to the pool's first contents; returns nothing. */
static void blocks_restore(struct fpool *fp, uint64_t mask)
{
    const pk_cache *c = &fp->p.cache;
    for (int32_t b = 0; b < c->num_blocks; b++)
        if (mask >> b & 1)
            for (int32_t l = 0; l < c->num_layers; l++)
                for (int32_t kv = 0; kv < 2; kv++) {
                    size_t at = block_at(fp, l, kv, b);
                    memcpy((unsigned char *) c->base + at, fp->pristine + at, fp->block_region);
                }
}

/* Returns the bytes blocks_copy needs for mask. */
static size_t blocks_bytes(const struct fpool *fp, uint64_t mask)
{
    return (size_t) __builtin_popcountll(mask) * (size_t) fp->p.cache.num_layers * 2 * fp->block_region;
}

/* Step 4: runs one waiting op alone on the backend over arena, with every byte and block
 * it must not touch poisoned; returns nothing. */
static void run_alone(struct item *it, unsigned char *arena, uint64_t arena_size)
{
    struct fpool *fp = it->t.fp;
    FUZZ_POISON(arena, arena_size);
    for (int k = 0; k < 2; k++)
        if (it->t.arena_len[k] != 0)
            FUZZ_UNPOISON(arena + it->t.arena_off[k], it->t.arena_len[k]);
    poison_pool(fp, it->t.reads | it->t.writes);
    struct fpool *fp2 = it->t.fp2;
    if (fp2 != NULL)
        poison_pool(fp2, it->t.writes2);
    struct pd_batch_op bo = {
        .cache = &fp->p.cache, .mem = fp->p.mem, .dst_cache = fp2 != NULL ? &fp2->p.cache : NULL,
        .arenas = { arena, arena_size, NULL, arena_size }, .op = &it->op, .status = PAGED_E_INVAL,
    };
    struct pd_launch la = { 0, 1, 0 };
    struct pd_batch batch = { .ops = &bo, .nops = 1, .launches = &la, .nlaunches = 1 };
    engine_env.backend->ops->run_batch(engine_env.backend, &batch);
    FUZZ_UNPOISON(fp->p.cache.base, fp->bytes);
    if (fp2 != NULL)
        FUZZ_UNPOISON(fp2->p.cache.base, fp2->bytes);
    FUZZ_UNPOISON(arena, arena_size);
    const struct pv_op *op = &it->op;
    FUZZ_CHECK(bo.status == PAGED_OK, "the backend refused an accepted op %u: %s (pool %u, "
               "layer %d, count %u, tokens %u, dtype %d, q heads %u, stride %u, scale %g, soft "
               "cap %g, window %d)", op->opcode, paged_strerror(bo.status), fp->p.id,
               op->layer_begin, op->count, op->num_tokens, op->dtype, op->num_q_heads,
               op->bt_stride, (double) op->sm_scale, (double) op->soft_cap, op->window);
}

/* ---- one input */

/* The model's side of one pass: the items it took. */
struct pass {
    struct item items[MAX_SQES];
    uint32_t n;
    uint64_t reads[FV_NUM_POOLS], writes[FV_NUM_POOLS];   /* what the backend ops touch */
    unsigned changed;                                      /* pools allocator ops ran on */
    int backend;                                           /* an op waits for the backend */
    int unmet;                                             /* it stopped at a wait not met: */
    uint64_t unmet_off;                                    /* this word short of */
    uint32_t unmet_value;                                  /* this value */
    unsigned char *before[FV_NUM_POOLS], *alone[FV_NUM_POOLS];  /* written blocks */
};

/* The input's setup bit 6: a wait not met times out at once (1 ms, the engine's clock made
 * old) instead of holding the entry in the ring (an hour). */
static int waits_time_out;

/* Step 1 and 2: takes entries [first, n) into a pass as the engine would, on the shadow, at
 * most room of them. Returns nothing; p->n says how many it took. */
static void model_pass(struct pass *p, const struct pcore_sqe *sqes, uint32_t first, uint32_t n,
                       uint32_t room, unsigned char *sarena, uint64_t arena_size, uint64_t limit)
{
    struct pb_client rules = { .host_is_data = 1 };
    int backend_ops = 0;   /* an entry for the backend was taken: a waiting one must not join */
    int timed_out = 0;     /* an entry's wait timed out in this pass */
    memset(p, 0, sizeof *p);
    if (n - first > room)
        n = first + room;
    for (uint32_t k = first; k < n; k++) {
        const struct pcore_sqe *s = &sqes[k];
        if (!pb_may_join(&rules, s->opcode))
            break;
        struct item *it = &p->items[p->n];
        struct pv_env env = {
            .host = sarena, .host_size = arena_size, .data_size = arena_size,
            .held_total = shadow_held(), .max_blocks = limit, .host_words = 1, .find_pool = find_pool,
            .ctx = &shadow_conn,
        };
        struct pv_op op2;
        struct pv_error err, err2;
        int rc = pv_validate(s, &env, &it->op, &err);
        int rc2 = pv_validate(s, &env, &op2, &err2);
        FUZZ_CHECK(rc == rc2 && err.status == err2.status && err.field == err2.field
                   && err.index == err2.index && it->op.count == op2.count
                   && it->op.kv_bytes == op2.kv_bytes, "pv_validate gave %d then %d", rc, rc2);
        FUZZ_CHECK(rc <= 0 && (rc == 0 || (err.status == rc && err.field < PCORE_FIELD_COUNT_)),
                   "pv_validate returned %d with status %d field %u", rc, err.status, err.field);
        pv_op_free(&op2);
        memset(&it->cqe, 0, sizeof it->cqe);
        it->cqe.tag = s->tag;
        it->cqe.opcode = s->opcode;
        if (rc < 0) {
            it->cqe.status = rc;
            it->cqe.err_field = err.field;
            it->cqe.err_index = err.index;
            p->n++;
            continue;
        }
        if (s->flags & PCORE_SQE_WAIT) {
            uint32_t w;
            memcpy(&w, sarena + it->op.wait_off, 4);
            if (!backend_ops && (int32_t) (w - it->op.wait_value) < 0 && waits_time_out && !timed_out) {
                /* Timed out at the first look (run_pass makes the engine's clock say so); the
                 * next entry that waits in vain starts the clock afresh. */
                timed_out = 1;
                pv_op_free(&it->op);
                it->cqe.status = PAGED_E_TIMEOUT;
                it->cqe.err_field = PCORE_FIELD_WAIT;
                p->n++;
                continue;
            }
            if (backend_ops || (int32_t) (w - it->op.wait_value) < 0) {
                p->unmet = !backend_ops;
                p->unmet_off = it->op.wait_off;
                p->unmet_value = it->op.wait_value;
                pv_op_free(&it->op);
                break;
            }
        }
        model(s, &env, &it->op, &it->t);
        if (pv_backend_op(s->opcode)) {
            int wait = 0;
            for (uint32_t j = 0; j < p->n && s->opcode == PAGED_OP_DECODE; j++)
                if (p->items[j].waits && pb_decode_conflicts(&rules, &p->items[j].op, &it->op, s))
                    wait = 1;
            if (wait) {
                pv_op_free(&it->op);
                break;
            }
            pb_taken(&rules, &it->op);
            backend_ops = 1;
            it->waits = 1;
            p->backend = 1;
            it->cqe.count = it->op.count;
            int i = (int) (it->t.fp - pools);
            p->reads[i] |= it->t.reads;
            p->writes[i] |= it->t.writes;
            if (it->t.fp2 != NULL)
                p->writes[it->t.fp2 - pools] |= it->t.writes2;
        } else {
            shadow_execute(&it->op, it->t.fp, sarena, &it->cqe);
            if (it->t.fp != NULL)
                p->changed |= 1u << (it->t.fp - pools);
            pv_op_free(&it->op);
        }
        p->n++;
    }
    FUZZ_CHECK(p->n != 0 || first == n || p->unmet, "a pass took nothing");
}

/* Step 3: checks that the pass's backend ops (entries from first) still touch only blocks
 * the client holds now that the whole pass is taken; returns nothing. */
static void check_still_held(const struct pass *p, uint32_t first)
{
    for (uint32_t k = 0; k < p->n; k++) {
        const struct item *it = &p->items[k];
        if (!it->waits)
            continue;
        const pa_alloc *al = it->t.fp->shadow;
        for (int32_t b = 0; b < 64; b++) {
            if (it->t.writes >> b & 1)
                FUZZ_CHECK(pa_writable(al, FV_HOLDER, b) == 1, "entry %u (opcode %u) will write "
                           "block %d of pool %u, which the client may no longer write (%d): an "
                           "entry that joined the pass after it changed that", first + k,
                           it->op.opcode, b, it->t.fp->p.id, pa_writable(al, FV_HOLDER, b));
            if (it->t.reads >> b & 1)
                FUZZ_CHECK(pa_held(al, FV_HOLDER, b) > 0, "entry %u (opcode %u) will read block "
                           "%d of pool %u, which the client no longer holds: an entry that "
                           "joined the pass after it let go of it", first + k, it->op.opcode, b,
                           it->t.fp->p.id);
            if (it->t.fp2 != NULL && (it->t.writes2 >> b & 1))
                FUZZ_CHECK(pa_writable(it->t.fp2->shadow, FV_HOLDER, b) == 1, "entry %u (COPY) will write "
                           "block %d of pool %u, which the client may no longer write", first + k, b,
                           it->t.fp2->p.id);
        }
    }
}

/* Checks the engine's allocators against the shadow's, block by block, for the pools in
 * mask (those an allocator op of the pass named); returns nothing. */
static void compare_allocators(unsigned mask)
{
    for (int i = 0; i < FV_NUM_POOLS; i++) {
        struct fpool *fp = &pools[i];
        if (!(mask >> i & 1))
            continue;
        FUZZ_CHECK(pa_held_total(fp->p.alloc, FV_HOLDER) == pa_held_total(fp->shadow, FV_HOLDER),
                   "pool %u: the engine's client holds %u references, the model's %u", fp->p.id,
                   pa_held_total(fp->p.alloc, FV_HOLDER), pa_held_total(fp->shadow, FV_HOLDER));
        for (int32_t b = 0; b < (int32_t) fp->p.geom.num_blocks; b++) {
            pa_block_info x, y;
            pa_block_info_get(fp->p.alloc, b, &x);
            pa_block_info_get(fp->shadow, b, &y);
            FUZZ_CHECK(x.refcount == y.refcount && x.holders == y.holders
                       && x.published == y.published
                       && pa_held(fp->p.alloc, FV_HOLDER, b) == pa_held(fp->shadow, FV_HOLDER, b),
                       "pool %u block %d: engine refcount %u published %d, model %u %d",
                       fp->p.id, b, x.refcount, x.published, y.refcount, y.published);
        }
        const char *why = pa_check(fp->p.alloc);
        FUZZ_CHECK(why == NULL, "pool %u allocator: %s", fp->p.id, why);
        why = pa_check(fp->shadow);
        FUZZ_CHECK(why == NULL, "pool %u shadow allocator: %s", fp->p.id, why);
    }
}

/* Runs one pass: the model, the lone runs, the engine, the comparisons; adds the blocks it
 * wrote to written and the pools whose allocators it changed to *changed. Returns how many
 * entries it took. */
static uint32_t run_pass(const struct pcore_sqe *sqes, uint32_t first, uint32_t n,
                         unsigned char *arena, unsigned char *sarena, uint64_t arena_size,
                         uint64_t limit, uint64_t written[FV_NUM_POOLS], unsigned *changed)
{
    static struct pass p;
    memcpy(sarena, arena, arena_size);
    /* An entry waiting for a word not reached has waited for ever already (the timeout is 1 ms
     * then), or has just begun to (the timeout is an hour). */
    conn.dep_since_ns = waits_time_out ? 1 : 0;
    /* The engine takes as many entries as its ring handles say are there and have room for
     * their completions; a handle re-reads the other side only when it knows of too few, so
     * asking it first changes nothing of what the engine will see. */
    int avail = pcore_ring_cons_available(&channel.sq, 1);
    int space = pcore_ring_prod_space(&channel.cq, 1);
    FUZZ_CHECK(avail > 0 && space > 0, "ring handles: %d entries, room for %d", avail, space);
    uint32_t room = (uint32_t) (avail < space ? avail : space);
    model_pass(&p, sqes, first, n, room < MAX_SQES ? room : MAX_SQES, sarena, arena_size, limit);
    if (p.n == 0 && p.unmet) {
        /* The first entry waits for a word not reached: the engine takes nothing (checked
         * here), then, the word written as a worker would, takes it. */
        FUZZ_CHECK(pd_engine_drain(engine, &conn, MAX_SQES) == 0, "the engine took an entry whose wait is not met");
        memcpy(arena + p.unmet_off, &p.unmet_value, 4);
        memcpy(sarena, arena, arena_size);
        model_pass(&p, sqes, first, n, room < MAX_SQES ? room : MAX_SQES, sarena, arena_size, limit);
    }
    check_still_held(&p, first);

    /* The lone runs, in the engine's order (every non-DECODE in order, then the DECODEs),
     * between a save of the blocks they write and its restore. */
    for (int i = 0; i < FV_NUM_POOLS; i++) {
        size_t bytes = blocks_bytes(&pools[i], p.writes[i]);
        p.before[i] = p.alone[i] = NULL;
        if (bytes == 0)
            continue;
        p.before[i] = malloc(bytes);
        p.alone[i] = malloc(bytes);
        if (p.before[i] == NULL || p.alone[i] == NULL)
            fuzz_fail(__FILE__, __LINE__, "malloc", "out of memory");
        blocks_copy(&pools[i], p.writes[i], p.before[i], 1);
    }
    for (int decodes = 0; decodes < 2; decodes++)
        for (uint32_t k = 0; k < p.n; k++)
            if (p.items[k].waits && (p.items[k].op.opcode == PAGED_OP_DECODE) == decodes)
                run_alone(&p.items[k], sarena, arena_size);
    for (int i = 0; i < FV_NUM_POOLS; i++)
        if (p.before[i] != NULL) {
            blocks_copy(&pools[i], p.writes[i], p.alone[i], 1);
            blocks_copy(&pools[i], p.writes[i], p.before[i], 0);
        }
    /* The engine writes the signal words after the batch, in ring order. */
    for (uint32_t k = 0; k < p.n; k++)
        if (p.items[k].waits && (p.items[k].op.flags & PCORE_SQE_SIGNAL))
            memcpy(sarena + p.items[k].op.signal_off, &p.items[k].op.signal_value, 4);

    /* The engine, with every block no op of the pass names poisoned. */
    for (int i = 0; i < FV_NUM_POOLS && p.backend; i++)
        poison_pool(&pools[i], p.reads[i] | p.writes[i]);
    unsigned ran = pd_engine_drain(engine, &conn, MAX_SQES);
    for (int i = 0; i < FV_NUM_POOLS && p.backend; i++)
        FUZZ_UNPOISON(pools[i].p.cache.base, pools[i].bytes);
    FUZZ_CHECK(ran == p.n, "the engine completed %u entries in a pass, the model took %u", ran, p.n);
    for (uint32_t k = 0; k < p.n; k++) {
        struct pcore_cqe q;
        const struct pcore_cqe *want = &p.items[k].cqe;
        FUZZ_CHECK(pcore_ring_cons_pop(&cq_cons, &q) == 1, "completion %u missing", k);
        FUZZ_CHECK(q.tag == want->tag && q.opcode == want->opcode && q.status == want->status
                   && q.count == want->count && q.err_field == want->err_field
                   && q.err_index == want->err_index,
                   "entry %u (opcode %u): the engine said %d count %u field %u index %u, the "
                   "model %d count %u field %u index %u", first + k, want->opcode, q.status,
                   q.count, q.err_field, q.err_index, want->status, want->count, want->err_field,
                   want->err_index);
        if (p.items[k].waits)
            pv_op_free(&p.items[k].op);
    }
    FUZZ_CHECK(pcore_ring_cons_available(&cq_cons, 1) == 0, "more completions than entries");

    /* The engine's results against the model's. */
    for (uint64_t i = 0; i < arena_size; i++)
        FUZZ_CHECK(arena[i] == sarena[i], "arena byte %llu: the engine left 0x%02x, the lone "
                   "runs 0x%02x", (unsigned long long) i, arena[i], sarena[i]);
    for (int i = 0; i < FV_NUM_POOLS; i++) {
        if (p.alone[i] == NULL)
            continue;
        size_t bytes = blocks_bytes(&pools[i], p.writes[i]);
        blocks_copy(&pools[i], p.writes[i], p.before[i], 1);
        FUZZ_CHECK(memcmp(p.before[i], p.alone[i], bytes) == 0, "pool %u: the engine wrote other "
                   "contents into its blocks than the lone runs", pools[i].p.id);
        written[i] |= p.writes[i];
        free(p.before[i]);
        free(p.alone[i]);
    }
    compare_allocators(p.changed);
    *changed |= p.changed;
    return p.n;
}

/* Runs one input; returns 0. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 + sizeof(struct pcore_sqe))
        return 0;
    uint8_t setup = data[0];
    waits_time_out = setup >> 6 & 1;
    engine_env.dependency_timeout_ms = waits_time_out ? 1 : 3600000;
    uint32_t n = 1 + ((setup >> 3) & 7);
    if (n > (size - 1) / sizeof(struct pcore_sqe))
        n = (uint32_t) ((size - 1) / sizeof(struct pcore_sqe));
    struct pcore_sqe sqes[MAX_SQES];
    memcpy(sqes, data + 1, n * sizeof sqes[0]);
    size_t arena_size = size - 1 - n * sizeof sqes[0];
    unsigned char *arena = malloc(arena_size != 0 ? arena_size : 1);
    unsigned char *sarena = malloc(arena_size != 0 ? arena_size : 1);
    if (arena == NULL || sarena == NULL)
        fuzz_fail(__FILE__, __LINE__, "malloc", "out of memory");
    memcpy(arena, data + 1 + n * sizeof sqes[0], arena_size);
    channel.arena = arena;
    channel.arena_size = channel.data_size = arena_size;
    channel.host_words = 1;   /* the cpu backend's: the engine handles every word */

    uint64_t held = pd_conn_held(&conn);
    FUZZ_CHECK(held == shadow_held(), "the engine's state and the model's differ at the start");
    engine_env.max_blocks_per_client = (setup & 7) == 0 ? 0 : held + (setup & 7) - 1;
    for (uint32_t k = 0; k < n; k++)
        FUZZ_CHECK(pcore_ring_prod_push(&sq_prod, &sqes[k]) == PAGED_OK, "submission ring full");

    uint64_t written[FV_NUM_POOLS] = { 0 };
    unsigned changed = 0;
    for (uint32_t first = 0, passes = 0; first < n; passes++) {
        FUZZ_CHECK(passes < n, "%u passes for %u entries", passes, n);
        first += run_pass(sqes, first, n, arena, sarena, arena_size,
                          engine_env.max_blocks_per_client, written, &changed);
    }
    FUZZ_CHECK(pcore_ring_cons_available(&channel.sq, 1) == 0, "entries left in the ring");

    /* Back to the first state: contents the ops wrote, allocators they may have changed. */
    for (int i = 0; i < FV_NUM_POOLS; i++) {
        blocks_restore(&pools[i], written[i]);
        if (changed >> i & 1)
            build_alloc(i);
    }
    channel.arena = NULL;
    channel.arena_size = channel.data_size = 0;
    free(arena);
    free(sarena);
    return 0;
}
