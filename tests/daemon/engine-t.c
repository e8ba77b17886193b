/* engine-t.c: the request engine driven through its environment alone, with no server. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/conn.h"
#include "daemon/cpu/cpu.h"
#include "daemon/engine/engine.h"
#include "daemon/pool.h"
#include "daemon/stats.h"
#include "lib/core/ring.h"
#include "lib/core/shm.h"
#include "tests/tap/basic.h"

/*
 * The test fills a struct pd_engine_env by hand, as pagedd's server does: a cpu backend, two
 * pools made by pd_pool_create, and three connections, each with a channel made by
 * pd_channel_create (its rings and arena in a memfd) and a socket pair for its ERRORs. It
 * plays the three clients through their own mapping of the memfd, the way libpaged does,
 * and runs pd_engine_pass: ALLOCs, APPENDs and DECODEs (checked against the CPU reference
 * kernels run on a shadow copy of the pools), requests that must fail with their error, and
 * a ring whose indices are made corrupt, whose client must be disconnected through the
 * env's kill callback while the others' requests still complete. It links the engine's
 * library and not the front's: the engine needs no server.
 *
 * Then the isolated dependency waits, with a second engine over the cpu backend dressed as
 * one with data arenas of its own (a probe that reads the word as the cuda backend's copy
 * would, answering "on its way" at a request's first look, and a run_batch that records
 * whether an op still waits): a DECODE on a short word stays in its ring while another
 * client's request completes, runs once the word is written (with no wait left for the
 * backend, and the output of the same DECODE without one); inline, the probe is never asked
 * and the backend gets the wait; a word never written fails with PAGED_E_TIMEOUT, and after
 * dependency-strikes of those the next short word is refused with PAGED_E_LIMIT, though not
 * on a look started before it; a probe's error fails the request with it.
 */

#define NCLIENTS 3
#define MAX_PASSES 8              /* a batch's withheld completions come one pass later */
#define BUDGET 32u
#define TOL 1e-4

/* Where each client keeps what its requests name, in its host arena (the data arena too on
 * the cpu backend). */
#define OFF_IDS 0u
#define OFF_SLOTS 256u
#define OFF_TABLE 1024u
#define OFF_LENS 2048u
#define OFF_FREE 3072u
#define OFF_K 4096u
#define OFF_V 65536u
#define OFF_Q 131072u
#define OFF_OUT 196608u
#define OFF_WORD 262144u
#define OFF_OUT2 262400u

/* One pool of the test: the engine's, and a shadow of its memory for the reference. */
struct tpool {
    struct pd_pool *p;
    pk_cache shadow;
};

/* One client: the engine's connection, its end of the socket and its view of the channel. */
struct client {
    struct pd_conn *c;
    int peer;                     /* the client's end of the socket pair */
    int fds[3];                   /* what WELCOME would send: memfd, SQ notify, CQ wait */
    void *map;
    struct pcore_channel_hdr hdr;
    struct pcore_ring_prod sq;
    struct pcore_ring_cons cq;
    unsigned char *arena;
    struct tpool *pool;           /* the pool its APPEND and DECODE use */
    uint32_t layer, tokens, q_heads, nblocks;
    int32_t ids[8];
};

/* What the kill callback saw. */
struct kills {
    unsigned n;
    struct pd_conn *last;
    enum pd_log_level level;
    char reason[128];
};

static struct pd_conn *conns;     /* the list the engine passes over, as the server's */
static struct tpool pools[2];
static struct client clients[NCLIENTS];
static struct kills kills;

/* The env's kill: records the call and marks c dead, as pd_server_kill does (the
 * connection stays in the list until its owner frees it). Returns nothing. */
static void on_kill(void *ctx, struct pd_conn *c, enum pd_log_level level, const char *reason)
{
    struct kills *k = ctx;
    k->n++;
    k->last = c;
    k->level = level;
    snprintf(k->reason, sizeof k->reason, "%s", reason);
    c->state = PD_CONN_DEAD;
}

/* The env's flush_evictions: nobody subscribes here; the counts are taken as announced.
 * Returns nothing. */
static void on_flush_evictions(void *ctx)
{
    (void) ctx;
    for (int i = 0; i < 2; i++)
        pools[i].p->evicted_pending = 0;
}

/* Makes pool tp with the geometry given (f32) and its zeroed shadow; bails on failure.
 * Returns nothing. */
static void make_pool(struct tpool *tp, pd_backend *b, uint32_t id, const char *name,
                      uint32_t layers, uint32_t kv_heads, uint32_t head_dim, uint32_t block_size,
                      uint32_t blocks)
{
    struct pcore_msg_pool_create m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "%s", name);
    m.num_layers = layers;
    m.num_kv_heads = kv_heads;
    m.head_dim = head_dim;
    m.block_size = block_size;
    m.dtype = PAGED_DTYPE_F32;
    m.num_blocks = blocks;
    m.mode = 0600;
    struct pd_pool_geom g;
    char why[PCORE_ERRMSG_MAX];
    if (pd_pool_check_create(&m, 0, PD_POOL_MEMORY_AUTO, &g, why, sizeof why) < 0)
        bail("pool %s: %s", name, why);
    char *cause = NULL;
    if (pd_pool_create(b, id, name, &g, getuid(), getgid(), &tp->p, &cause) < 0)
        bail("pool %s: %s", name, cause != NULL ? cause : "?");
    tp->shadow = tp->p->cache;
    tp->shadow.base = bcalloc(1, pk_cache_bytes(&tp->shadow));
}

/* Connects client k as pagedd does on HELLO: a socket pair, a channel of 16 submissions,
 * 32 completions and a 1 MiB arena, the client's own mapping of it, attachments to the
 * pools pa and pb (NULL: none), and k at the head of the list. Bails on failure. Returns
 * nothing. */
static void connect_client(struct client *k, uint32_t id, struct tpool *pa, struct tpool *pb)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        sysbail("socketpair");
    struct pd_conn *c = bcalloc(1, sizeof *c);
    c->id = id;
    c->fd = sv[0];
    c->pid = getpid();
    c->uid = getuid();
    c->gid = getgid();
    snprintf(c->name, sizeof c->name, "client%u", id);
    uint32_t sq = 16, cq = 32;
    uint64_t arena = 1u << 20;
    pd_channel_clamp(&sq, &cq, &arena);
    char *cause = NULL;
    if (pd_channel_create(sq, cq, arena, &c->ch, k->fds, &cause) < 0)
        bail("client %u: %s", id, cause != NULL ? cause : "?");
    if (pcore_shm_map(k->fds[0], c->ch->size, 1, &k->map) < 0)
        sysbail("client %u: mapping the channel", id);
    memcpy(&k->hdr, k->map, sizeof k->hdr);
    unsigned char *b = k->map;
    if (pcore_channel_check(&k->hdr, c->ch->size) < 0
        || pcore_ring_prod_init(&k->sq, (void *) (b + k->hdr.sq_ctl_off), b + k->hdr.sq_off,
                                k->hdr.sq_entries, sizeof(struct pcore_sqe)) < 0
        || pcore_ring_cons_init(&k->cq, (void *) (b + k->hdr.cq_ctl_off), b + k->hdr.cq_off,
                                k->hdr.cq_entries, sizeof(struct pcore_cqe)) < 0)
        bail("client %u: the channel does not add up", id);
    k->arena = b + k->hdr.arena_off;
    struct tpool *tp[2] = { pa, pb };
    for (int i = 0; i < 2; i++) {
        if (tp[i] == NULL)
            continue;
        if (pd_conn_attach_room(c) < 0)
            bail("client %u: out of memory", id);
        pd_conn_attach_add(c, tp[i]->p, 1);
    }
    c->state = PD_CONN_READY;
    c->next = conns;
    if (conns != NULL)
        conns->prev = c;
    conns = c;
    k->c = c;
    k->peer = sv[1];
}

/* Puts sqe on k's submission ring; bails when it is full. Returns nothing. */
static void submit(struct client *k, const struct pcore_sqe *sqe)
{
    if (pcore_ring_prod_push(&k->sq, sqe) != PAGED_OK)
        bail("client %u: submission ring full", k->c->id);
}

/* Counts the completions waiting in every client's ring. */
static unsigned completions_waiting(void)
{
    unsigned n = 0;
    for (int i = 0; i < NCLIENTS; i++)
        if (clients[i].c->state == PD_CONN_READY) {
            int a = pcore_ring_cons_available(&clients[i].cq, 1);
            n += a > 0 ? (unsigned) a : 0;
        }
    return n;
}

/* Runs passes until want completions wait in the rings, at most MAX_PASSES; returns how
 * many passes that took (MAX_PASSES + 1 when they never came). */
static unsigned pass_until(struct pd_engine *e, unsigned want)
{
    for (unsigned i = 1; i <= MAX_PASSES; i++) {
        pd_engine_pass(e, BUDGET);
        if (completions_waiting() >= want)
            return i;
    }
    return MAX_PASSES + 1;
}

/* Takes k's next completion into *cqe; returns whether there was one. */
static int reap(struct client *k, struct pcore_cqe *cqe)
{
    return pcore_ring_cons_pop(&k->cq, cqe) == 1;
}

/* Returns the largest absolute difference between n floats at a and b. */
static double max_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double) a[i] - (double) b[i]) > d)
            d = fabs((double) a[i] - (double) b[i]);
    return d;
}

/* ALLOC: every client takes its blocks in one pass; checks them. Returns nothing. */
static void check_alloc(struct pd_engine *e)
{
    for (int i = 0; i < NCLIENTS; i++) {
        struct client *k = &clients[i];
        struct pcore_sqe s = { .opcode = PAGED_OP_ALLOC, .pool = k->pool->p->id, .tag = 100u + (uint64_t) i };
        s.u.alloc = (struct pcore_req_alloc) { .count = k->nblocks, .ids_off = OFF_IDS };
        submit(k, &s);
    }
    is_int(NCLIENTS, pd_engine_pass(e, BUDGET), "one pass completes the three ALLOCs (allocator ops: no batch)");
    for (int i = 0; i < NCLIENTS; i++) {
        struct client *k = &clients[i];
        struct pcore_cqe q;
        int got = reap(k, &q);
        ok(got && q.tag == 100u + (uint64_t) i && q.status == PAGED_OK && q.count == k->nblocks,
           "client %u: ALLOC of %u blocks completed (tag %llu, status %d, count %u)", k->c->id,
           k->nblocks, (unsigned long long) q.tag, q.status, q.count);
        memcpy(k->ids, k->arena + OFF_IDS, k->nblocks * sizeof k->ids[0]);
        int held = 1;
        for (uint32_t b = 0; b < k->nblocks; b++)
            held &= k->ids[b] >= 0 && k->ids[b] < k->pool->shadow.num_blocks
                    && pa_held(k->pool->p->alloc, k->c->id, k->ids[b]) == 1;
        ok(held, "client %u: the ids written to its arena are blocks it now holds", k->c->id);
    }
    /* Clients 1 and 2 share pool p1: no block of one is the other's. */
    int apart = 1;
    for (uint32_t a = 0; a < clients[0].nblocks; a++)
        for (uint32_t b = 0; b < clients[1].nblocks; b++)
            apart &= clients[0].ids[a] != clients[1].ids[b];
    ok(apart, "two clients of one pool got different blocks");
}

/* APPEND: each client writes its tokens' keys and values to its blocks at its layer; the
 * pools must then hold what the reference kernel writes into the shadow. Returns nothing. */
static void check_append(struct pd_engine *e, tap_rng *rng)
{
    for (int i = 0; i < NCLIENTS; i++) {
        struct client *k = &clients[i];
        const pk_cache *sc = &k->pool->shadow;
        size_t n = (size_t) k->tokens * (size_t) sc->num_kv_heads * (size_t) sc->head_dim;
        tap_rng_fill_uniform(rng, (float *) (k->arena + OFF_K), n, -1, 1);
        tap_rng_fill_uniform(rng, (float *) (k->arena + OFF_V), n, -1, 1);
        int32_t *slots = (int32_t *) (k->arena + OFF_SLOTS);
        for (uint32_t t = 0; t < k->tokens; t++)
            slots[t] = k->ids[t / (uint32_t) sc->block_size] * sc->block_size
                       + (int32_t) (t % (uint32_t) sc->block_size);
        struct pcore_sqe s = { .opcode = PAGED_OP_APPEND, .pool = k->pool->p->id, .tag = 200u + (uint64_t) i,
                               .layer = (int32_t) k->layer };
        s.u.append = (struct pcore_req_append) { .num_tokens = k->tokens, .dtype = PAGED_DTYPE_F32,
                                                 .k_off = OFF_K, .v_off = OFF_V, .slots_off = OFF_SLOTS };
        submit(k, &s);
        pk_append_args ref = {
            .cache = *sc, .layer_begin = (int32_t) k->layer, .num_layers = 1,
            .num_tokens = (int32_t) k->tokens, .src_dtype = PAGED_DTYPE_F32,
            .k = k->arena + OFF_K, .v = k->arena + OFF_V, .slot_mapping = slots,
        };
        if (pk_ref_append(&ref) != PAGED_OK)
            bail("client %u: the reference APPEND refused its own arguments", k->c->id);
    }
    unsigned passes = pass_until(e, NCLIENTS);
    ok(passes <= MAX_PASSES, "the three APPENDs completed (in %u passes)", passes);
    for (int i = 0; i < NCLIENTS; i++) {
        struct client *k = &clients[i];
        struct pcore_cqe q;
        int got = reap(k, &q);
        ok(got && q.tag == 200u + (uint64_t) i && q.status == PAGED_OK && q.count == k->tokens,
           "client %u: APPEND of %u tokens completed (status %d, count %u)", k->c->id, k->tokens,
           q.status, q.count);
    }
    for (int i = 0; i < 2; i++)
        is_blob(pools[i].shadow.base, pools[i].p->cache.base, pk_cache_bytes(&pools[i].shadow),
                "pool %s: what the APPENDs wrote is what pk_ref_append writes", pools[i].p->name);
}

/* DECODE: each client attends with one query over its tokens; the outputs must match the
 * reference kernel over the shadow, and the two DECODEs of pool p1 share one launch. Returns
 * nothing. */
static void check_decode(struct pd_engine *e, tap_rng *rng)
{
    struct pcore_engine_stats before, after;
    pd_engine_stats(e, &before);
    float *want[NCLIENTS];
    for (int i = 0; i < NCLIENTS; i++) {
        struct client *k = &clients[i];
        const pk_cache *sc = &k->pool->shadow;
        size_t n = (size_t) k->q_heads * (size_t) sc->head_dim;
        tap_rng_fill_uniform(rng, (float *) (k->arena + OFF_Q), n, -1, 1);
        memset(k->arena + OFF_OUT, 0, n * sizeof(float));
        int32_t *table = (int32_t *) (k->arena + OFF_TABLE);
        memcpy(table, k->ids, k->nblocks * sizeof *table);
        int32_t *lens = (int32_t *) (k->arena + OFF_LENS);
        lens[0] = (int32_t) k->tokens;
        const float scale = 1.0f / sqrtf((float) sc->head_dim);
        struct pcore_sqe s = { .opcode = PAGED_OP_DECODE, .pool = k->pool->p->id, .tag = 300u + (uint64_t) i,
                               .layer = (int32_t) k->layer };
        s.u.attn = (struct pcore_req_attn) {
            .num_seqs = 1, .num_q_heads = k->q_heads, .dtype = PAGED_DTYPE_F32, .bt_stride = k->nblocks,
            .q_off = OFF_Q, .out_off = OFF_OUT, .bt_off = OFF_TABLE, .lens_off = OFF_LENS,
            .attn = { .sm_scale = scale },
        };
        submit(k, &s);
        want[i] = bcalloc(n, sizeof(float));
        pk_decode_args ref = {
            .cache = *sc, .layer = (int32_t) k->layer, .num_seqs = 1, .num_q_heads = (int32_t) k->q_heads,
            .q_dtype = PAGED_DTYPE_F32, .q = k->arena + OFF_Q, .out = want[i], .block_tables = table,
            .bt_stride = (int32_t) k->nblocks, .seq_lens = lens, .opts = { .sm_scale = scale },
        };
        if (pk_ref_decode(&ref) != PAGED_OK)
            bail("client %u: the reference DECODE refused its own arguments", k->c->id);
    }
    unsigned passes = pass_until(e, NCLIENTS);
    ok(passes <= MAX_PASSES, "the three DECODEs completed (in %u passes)", passes);
    for (int i = 0; i < NCLIENTS; i++) {
        struct client *k = &clients[i];
        struct pcore_cqe q;
        int got = reap(k, &q);
        ok(got && q.tag == 300u + (uint64_t) i && q.status == PAGED_OK,
           "client %u: DECODE completed (status %d)", k->c->id, q.status);
        size_t n = (size_t) k->q_heads * (size_t) k->pool->shadow.head_dim;
        double d = max_diff(want[i], (const float *) (k->arena + OFF_OUT), n);
        ok(d <= TOL, "client %u: DECODE of %u tokens, %u query heads over %d KV heads matches "
           "pk_ref_decode (largest difference %.2g)", k->c->id, k->tokens, k->q_heads,
           k->pool->shadow.num_kv_heads, d);
        free(want[i]);
    }
    pd_engine_stats(e, &after);
    is_int(3, (long long) (after.decode_requests - before.decode_requests), "the engine counted three DECODE requests");
    is_int(1, (long long) (after.merged_decode_launches - before.merged_decode_launches),
           "the two DECODEs of pool p1 ran as one merged launch");
}

/* Requests that must fail: a FREE of a block the client does not hold, an ALLOC in a pool it
 * is not attached to; each completes with its error and the field it names, and changes
 * nothing. Returns nothing. */
static void check_refusals(struct pd_engine *e)
{
    struct client *b = &clients[1], *c = &clients[2], *a = &clients[0];
    memcpy(b->arena + OFF_FREE, &a->ids[0], sizeof a->ids[0]);
    struct pcore_sqe s = { .opcode = PAGED_OP_FREE, .pool = a->pool->p->id, .tag = 400 };
    s.u.blocks = (struct pcore_req_blocks) { .count = 1, .ids_off = OFF_FREE };
    submit(b, &s);
    s = (struct pcore_sqe) { .opcode = PAGED_OP_ALLOC, .pool = pools[0].p->id, .tag = 401 };
    s.u.alloc = (struct pcore_req_alloc) { .count = 1, .ids_off = OFF_FREE };
    submit(c, &s);
    is_int(2, pd_engine_pass(e, BUDGET), "one pass completes both refused requests");
    struct pcore_cqe q;
    int got = reap(b, &q);
    ok(got && q.tag == 400 && q.status == PAGED_E_NOTHELD && q.err_field == PCORE_FIELD_IDS && q.err_index == 0,
       "a FREE of another client's block fails with PAGED_E_NOTHELD on ids[0] (%d, field %u, index %u)",
       q.status, q.err_field, q.err_index);
    ok(pa_held(a->pool->p->alloc, a->c->id, a->ids[0]) == 1, "and the block is still its owner's");
    got = reap(c, &q);
    ok(got && q.tag == 401 && q.status == PAGED_E_NOENT && q.err_field == PCORE_FIELD_POOL,
       "an ALLOC in a pool the client is not attached to fails with PAGED_E_NOENT on pool (%d, field %u)",
       q.status, q.err_field);
    is_int(2, (long long) (b->c->errors + c->c->errors), "the connections counted their errors");
}

/* A corrupt ring: client 3's submission tail runs far past its capacity. It must be killed
 * through the env, with an ERROR on its socket, while client 1's request of the same pass
 * completes; a later pass leaves it alone. Returns nothing. */
static void check_corrupt(struct pd_engine *e)
{
    struct client *a = &clients[0], *c = &clients[2];
    struct pcore_sqe s = { .opcode = PAGED_OP_NOP, .pool = 0, .tag = 500 };
    submit(a, &s);
    atomic_store_explicit(pcore_ring_word(&c->sq.ctl->tail), c->sq.tail + 1000u, memory_order_release);
    unsigned kills_before = kills.n;
    pd_engine_pass(e, BUDGET);
    ok(kills.n == kills_before + 1 && kills.last == c->c && kills.level == PD_LOG_WARNING,
       "the corrupt client was disconnected through env.kill, once, at warning level (%s)", kills.reason);
    ok(strstr(kills.reason, "corrupt") != NULL, "the reason says the ring is corrupt");
    struct pcore_msg_error err;
    ssize_t n = recv(c->peer, &err, sizeof err, 0);
    ok(n == (ssize_t) sizeof err && err.hdr.type == PCORE_MSG_ERROR && err.hdr.status == PAGED_E_RING,
       "it was told why: an ERROR with PAGED_E_RING on its socket (%zd bytes, status %d)", n,
       n > 0 ? err.hdr.status : 0);
    struct pcore_cqe q;
    int got = reap(a, &q);
    ok(got && q.tag == 500 && q.status == PAGED_OK,
       "another client's request in the same pass completed (status %d)", q.status);
    is_int(0, pd_engine_pass(e, BUDGET), "the next pass finds nothing to do");
    is_int(kills_before + 1, kills.n, "and kills nobody again");
}

/* The gate phase's backend: the cpu backend's ops with a probe of its own and a run_batch that
 * records what reaches it. */
static struct gate {
    pd_backend b;
    struct pd_backend_ops ops;
    const struct pd_backend_ops *cpu;
    unsigned looks, fresh_looks;  /* probe calls, those with fresh set */
    int fail;                     /* the probe answers this error instead (0: none) */
    unsigned waiting_ops, ops_run;/* ops that reached run_batch still waiting, and in all */
} gate;

/* The gate backend's probe: the word is in the host arena here; a request's first look is on
 * its way (as a copy would be), later ones read it. Returns a PD_PROBE_* or gate.fail. */
static int gate_probe(pd_backend *b, pd_arena *arena, uint64_t off, uint32_t value, int fresh)
{
    (void) b;
    (void) arena;
    gate.looks++;
    gate.fresh_looks += fresh != 0;
    if (gate.fail != 0)
        return gate.fail;
    if (fresh)
        return PD_PROBE_PENDING;
    const uint32_t w = __atomic_load_n((const uint32_t *) (clients[0].c->ch->arena + off), __ATOMIC_ACQUIRE);
    return (int32_t) (w - value) >= 0 ? PD_PROBE_REACHED : PD_PROBE_SHORT;
}

/* The gate backend's run_batch: counts the ops still waiting, then runs the cpu backend's.
 * Returns nothing. */
static void gate_run(pd_backend *b, struct pd_batch *batch)
{
    for (uint32_t i = 0; i < batch->nops; i++)
        gate.waiting_ops += (batch->ops[i].op->flags & PCORE_SQE_WAIT) != 0;
    gate.ops_run += batch->nops;
    gate.cpu->run_batch(b, batch);
}

/* Queues client 0's DECODE (tag) over its tokens into out_off, waiting for OFF_WORD to reach
 * value when value is not 0. Returns nothing. */
static void gate_decode(uint64_t tag, uint32_t value, uint64_t out_off)
{
    struct client *k = &clients[0];
    struct pcore_sqe s = { .opcode = PAGED_OP_DECODE, .pool = k->pool->p->id, .tag = tag, .layer = (int32_t) k->layer };
    s.u.attn = (struct pcore_req_attn) {
        .num_seqs = 1, .num_q_heads = k->q_heads, .dtype = PAGED_DTYPE_F32, .bt_stride = k->nblocks, .q_off = OFF_Q,
        .out_off = out_off, .bt_off = OFF_TABLE, .lens_off = OFF_LENS,
        .attn = { .sm_scale = 1.0f / sqrtf((float) k->pool->shadow.head_dim) },
    };
    if (value != 0) {
        s.flags |= PCORE_SQE_WAIT;
        s.dep = (struct pcore_dep_wire) { .wait_off = OFF_WORD, .wait_value = value };
    }
    submit(k, &s);
}

/* Runs passes of e until client 0 has a completion or ms pass (bounded either way); takes it
 * into *q. Returns whether one came. */
static int gate_await(struct pd_engine *e, struct pcore_cqe *q, int ms)
{
    const uint64_t deadline = (uint64_t) tap_now_ns() + (uint64_t) ms * 1000000u;
    for (unsigned i = 0; i < 1000000u && (uint64_t) tap_now_ns() < deadline; i++) {
        pd_engine_pass(e, BUDGET);
        if (reap(&clients[0], q))
            return 1;
    }
    return 0;
}

/* Sets client 0's dependency word; returns nothing. */
static void gate_word(uint32_t v)
{
    __atomic_store_n((uint32_t *) (clients[0].arena + OFF_WORD), v, __ATOMIC_RELEASE);
}

/* The isolated waits (see the top). Returns nothing. */
static void check_gate(pd_backend *cpu, struct pd_stats *stats)
{
    gate.cpu = cpu->ops;
    gate.ops = *cpu->ops;
    gate.ops.probe = gate_probe;
    gate.ops.run_batch = gate_run;
    gate.b = *cpu;
    gate.b.ops = &gate.ops;
    struct client *a = &clients[0], *b = &clients[1];
    /* A data arena of its own, as far as the engine can tell; the cpu backend runs on the host one. */
    pd_arena *const fake = (pd_arena *) &gate;
    a->c->ch->data = fake;
    struct pd_engine_env env = {
        .backend = &gate.b, .conns = &conns, .dependency_timeout_ms = 60000, .dependency_strikes = 2,
        .stats = stats, .ctx = &kills, .kill = on_kill, .flush_evictions = on_flush_evictions,
    };
    struct pd_engine *e = pd_engine_create(&env);
    if (e == NULL)
        bail("pd_engine_create: out of memory");
    const size_t n = (size_t) a->q_heads * a->pool->shadow.head_dim;
    struct pcore_cqe q;
    int got;

    gate_word(0);
    gate_decode(600, 0, OFF_OUT);
    got = gate_await(e, &q, 5000);
    ok(got && q.status == PAGED_OK, "gate: a DECODE without a wait runs (status %d)", q.status);
    gate_decode(601, 1, OFF_OUT2);
    for (int i = 0; i < 5; i++)
        pd_engine_pass(e, BUDGET);
    ok(!reap(a, &q), "gate: a DECODE whose word is short stays in its ring over 5 passes");
    is_int(1, gate.fresh_looks, "gate: its first look was fresh, the later ones not (%u looks)", gate.looks);
    struct pcore_sqe nop = { .opcode = PAGED_OP_NOP, .tag = 602 };
    submit(b, &nop);
    pd_engine_pass(e, BUDGET);
    ok(reap(b, &q) && q.tag == 602 && q.status == PAGED_OK, "gate: another client's request completes meanwhile");
    const unsigned ran = gate.ops_run;
    gate_word(1);
    got = gate_await(e, &q, 5000);
    ok(got && q.tag == 601 && q.status == PAGED_OK,
       "gate: once its word is written the DECODE completes (status %d)", q.status);
    ok(gate.ops_run == ran + 1 && gate.waiting_ops == 0, "gate: it reached the backend with no wait left (%u waiting)",
       gate.waiting_ops);
    is_blob(a->arena + OFF_OUT, a->arena + OFF_OUT2, n * sizeof(float),
            "gate: its output is the same DECODE's without a wait");

    env.dependency_inline = 1;
    const unsigned looks = gate.looks;
    gate_decode(603, 2, OFF_OUT2);
    got = gate_await(e, &q, 5000);
    ok(got && q.tag == 603, "gate: inline, a waiting DECODE goes to the backend at once");
    ok(gate.looks == looks && gate.waiting_ops == 1, "gate: inline, with its wait and no look (%u looks, %u waiting)",
       gate.looks - looks, gate.waiting_ops);
    env.dependency_inline = 0;

    env.dependency_timeout_ms = 30;
    for (int i = 0; i < 2; i++) {
        gate_decode(604 + (uint64_t) i, 100, OFF_OUT2);
        got = gate_await(e, &q, 5000);
        ok(got && q.status == PAGED_E_TIMEOUT && q.err_field == PCORE_FIELD_WAIT,
           "gate: a word never written times out, on dep.wait_off (strike %d; status %d)", i + 1, q.status);
    }
    const unsigned before = gate.looks;
    gate_decode(606, 100, OFF_OUT2);
    pd_engine_pass(e, BUDGET);
    ok(!reap(a, &q), "gate: struck out, a wait whose first look is still on its way is not refused on it");
    got = gate_await(e, &q, 5000);
    ok(got && q.status == PAGED_E_LIMIT && q.err_field == PCORE_FIELD_WAIT && gate.looks == before + 2,
       "gate: the next look finds the word short and the wait is refused with PAGED_E_LIMIT on dep.wait_off "
       "(status %d, %u looks)", q.status, gate.looks - before);
    gate_decode(607, 1, OFF_OUT2);
    got = gate_await(e, &q, 5000);
    ok(got && q.status == PAGED_OK, "gate: struck out, a wait on a reached word still runs");

    gate.fail = PAGED_E_DEVICE;
    gate_decode(608, 200, OFF_OUT2);
    got = gate_await(e, &q, 5000);
    ok(got && q.status == PAGED_E_DEVICE && q.err_field == PCORE_FIELD_WAIT,
       "gate: a probe's error fails the request with it, on dep.wait_off (status %d)", q.status);
    gate.fail = 0;
    a->c->ch->data = NULL;
    pd_engine_destroy(e);
    cpu->late_fn = NULL;
}

/* Lets client k go, as pd_server_kill and pd_server_sweep would. Returns nothing. */
static void disconnect(struct client *k)
{
    for (uint32_t i = 0; i < k->c->natt; i++) {
        pa_release_holder(k->c->att[i].pool->alloc, k->c->id);
        k->c->att[i].pool->attached--;
    }
    pd_channel_destroy(k->c->ch);
    pcore_shm_unmap(k->map, k->hdr.total_size);
    for (int i = 0; i < 3; i++)
        close(k->fds[i]);
    close(k->c->fd);
    close(k->peer);
    free(k->c->att);
    free(k->c);
}

/* Runs the cases; returns 0 (TAP says how it went). */
int main(void)
{
    plan(53);
    pd_log_set_level(PD_LOG_ERROR);
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    char *cause = NULL;
    pd_backend *backend = pd_backend_cpu_open(2, &cause);
    if (backend == NULL)
        bail("cpu backend: %s", cause != NULL ? cause : "?");
    make_pool(&pools[0], backend, 1, "p1", 2, 2, 64, 16, 32);
    make_pool(&pools[1], backend, 2, "p2", 1, 2, 128, 8, 16);
    /* Clients 1 and 2 decode on p1 alike (their DECODEs merge); client 2 is attached to p2
     * too, client 3 to p2 alone. */
    connect_client(&clients[0], 1, &pools[0], NULL);
    connect_client(&clients[1], 2, &pools[0], &pools[1]);
    connect_client(&clients[2], 3, &pools[1], NULL);
    clients[0].pool = &pools[0];
    clients[0].layer = 1;
    clients[0].tokens = 20;
    clients[0].q_heads = 4;
    clients[0].nblocks = 2;
    clients[1].pool = &pools[0];
    clients[1].layer = 1;
    clients[1].tokens = 29;
    clients[1].q_heads = 4;
    clients[1].nblocks = 2;
    clients[2].pool = &pools[1];
    clients[2].layer = 0;
    clients[2].tokens = 11;
    clients[2].q_heads = 8;
    clients[2].nblocks = 3;
    struct pd_stats stats;
    memset(&stats, 0, sizeof stats);
    struct pd_engine_env env = {
        .backend = backend, .conns = &conns, .max_blocks_per_client = 0,
        .dependency_timeout_ms = 1000, .stats = &stats, .sigpipe_ignored = 0, .ctx = &kills,
        .kill = on_kill, .flush_evictions = on_flush_evictions,
    };
    struct pd_engine *e = pd_engine_create(&env);
    if (e == NULL)
        bail("pd_engine_create: out of memory");
    ok(backend->late_fn != NULL && backend->late_ctx == e, "pd_engine_create made the engine the backend's late_fn");
    is_int(0, pd_engine_pass(e, BUDGET), "a pass over empty rings completes nothing");

    check_alloc(e);
    check_append(e, &rng);
    check_decode(e, &rng);
    check_refusals(e);
    check_corrupt(e);
    is_int(0, pd_engine_withheld(e), "no completion is withheld at the end");
    is_int(3, (long long) stats.ops[PAGED_OP_DECODE].requests, "env.stats counted the three DECODEs");
    check_gate(backend, &stats);

    for (int i = 0; i < NCLIENTS; i++)
        disconnect(&clients[i]);
    for (int i = 0; i < 2; i++) {
        free(pools[i].shadow.base);
        pd_pool_free(backend, pools[i].p);
    }
    pd_backend_close(backend);
    pd_engine_destroy(e);
    return 0;
}
