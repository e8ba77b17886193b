/* merge-t.c: DECODEs and APPENDs of several client processes, of one layer or several, merged into one launch. */
/* SPDX-License-Identifier: MIT */
/* Every output must be right and every client's order kept. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "paged.h"
#include "kernels/kernels.h"
#include "lib/core/proto.h"
#include "tests/service/arena-io.h"
#include "tests/service/childrec.h"
#include "tests/service/launchlog.h"
#include "tests/service/rawclient.h"
#include "tests/service/proc.h"
#include "tests/tap/basic.h"

/*
 * NCLI client processes (libpaged) share one pool. Twice the parent stops the daemon
 * (SIGSTOP), lets every client publish a whole burst of requests at once, and continues it,
 * so that the bursts of all clients are in the rings when the engine looks: its passes take
 * DECODEs of several clients together, and merge those that fit into one launch.
 *
 *   Burst A: NA DECODEs per client, all in flight at once (more than the engine takes of a
 *   client per pass), over two layers (which share launches), two query head counts, a
 *   window, ALiBi with a soft cap, block-table strides 3 and 4, one DECODE whose query is an
 *   earlier one's output (so they must not run in one launch), and two bad requests: every
 *   output must match pk_ref_decode, and the bad ones fail alone.
 *
 *   Burst B: per layer and step, APPEND one token per sequence then DECODE over it, all in
 *   flight at once, and at the end a token rewritten in place and decoded again: every DECODE
 *   must match the reference with its client's just-appended token, and differ from the one
 *   without it (what it would give had it run before the APPEND); the DECODE before the
 *   rewrite must not see it.
 *
 *   Burst C: APPENDs only, plus one COPY, per client into two blocks of its own: two tokens
 *   of layer 0 (they merge with each other and with every client's), COPY of the first block
 *   onto the second, a token of layer 0 (which must NOT merge with the APPENDs before the
 *   COPY: it would run before it and the copy would carry it), the same slot rewritten, and
 *   two tokens of every layer. Afterwards each client reads the pool back and every one of
 *   its blocks, every layer, K and V, must hold exactly what it wrote, in its order.
 *
 *   Burst D: every client at a layer of its own (client w at layer w % L, as clients that
 *   drift apart are) APPENDs a token to each sequence and DECODEs over it. The engine takes
 *   them in one pass and must run the APPENDs as ONE launch and the DECODEs as ONE launch,
 *   each member on its own layer: every DECODE must match the reference with its APPEND's
 *   token on its layer (and differ from without it), and reading the pool back every block
 *   of the client, every layer, must hold exactly what it wrote. The parent finds the two
 *   launches in the part of the log that burst D wrote.
 *
 *   Burst E: every client submits a DECODE and an ALLOC together; the ALLOC runs in a later
 *   pass, which on the cuda backend may start while the DECODE's batch is still on the device:
 *   the completions must still arrive in ring order.
 *
 * The daemon logs each merged launch at debug level; the parent counts them in the log. With
 * PAGED_TEST_BACKEND=cuda the same runs on the GPU: the children (never the parent, since a
 * CUDA context does not survive fork) copy tensors into and out of their device arenas.
 * Children report each check as a fixed-size record through a pipe; the parent prints TAP.
 */

#define L 4                 /* layers: burst D puts each client on its own */
#define H 2                 /* KV heads */
#define QH 8                /* query heads: GQA groups of 4 (some requests use 4: groups of 2) */
#define D 64
#define B 16
#define N 128
#define NCLI 4
#define NSEQ 2
#define MAXBLK 4            /* blocks per sequence */
#define CTX0 37             /* tokens in every sequence before the bursts */
#define NA 40               /* burst A: DECODEs per client (the engine takes 32 per pass) */
/* Burst A: DECODE CHAIN_TO's query is DECODE CHAIN_FROM's output. CHAIN_FROM is on layer 1,
 * CHAIN_TO on layer 0, and DECODEs of both layers share launches, whose members run in any
 * order: the two must not share a pass. */
#define CHAIN_FROM 13
#define CHAIN_TO 17
#define NSTEP 5             /* burst B: tokens appended per layer */
#define NB (2 * NSTEP * L + 2)
#define NC 6                /* burst C: requests per client */
#define TOL 1e-4            /* f32 everywhere: relative L2 error of one output row */
#define WAIT_MS 120000

/* What a child tells the parent besides its checks (tests/service/childrec.h). */
enum rec_kind { REC_READY = CR_FIRST_KIND, REC_SUBMITTED, REC_DONE };

static struct pagedd daemon_;
static uint64_t seed;
static int use_cuda;        /* the daemon runs the cuda backend: data arenas are device memory */
static int child_who;

/* Returns n zeroed bytes, or exits the child. */
static void *xcalloc(size_t n)
{
    void *p = calloc(1, n > 0 ? n : 1);
    if (p == NULL)
        cr_fatal("client %d: out of memory", child_who);
    return p;
}

/* Everything one client holds. */
struct client {
    paged_client *c;
    paged_pool *pool;
    unsigned char *host, *data;   /* arena bases (data: a device pointer on cuda) */
    int32_t ids[NSEQ * MAXBLK];   /* our blocks, sequence by sequence */
    int32_t extra[2];             /* burst C's blocks */
    pk_cache ref;                 /* a host copy of the pool as we wrote it */
    tap_rng rng;
};

/* Returns the offset of size bytes of an arena, or exits. */
static uint64_t carve(struct client *cl, paged_arena_kind kind, size_t size)
{
    uint64_t off = 0;
    if (paged_arena_alloc(cl->c, kind, size, 256, &off) != PAGED_OK)
        cr_fatal("client %d: carving %zu bytes of an arena: %s", child_who, size, paged_client_error(cl->c));
    return off;
}

/* Copies n bytes of host memory into the data arena at off, or exits; returns nothing. */
static void put(struct client *cl, uint64_t off, const void *src, size_t n)
{
    if (aio_put(use_cuda, cl->data, off, src, n) < 0)
        cr_fatal("client %d: copying into the data arena", child_who);
}

/* Copies n bytes of the data arena at off out to dst, or exits; returns nothing. */
static void get(struct client *cl, void *dst, uint64_t off, size_t n)
{
    if (aio_get(use_cuda, cl->data, off, dst, n) < 0)
        cr_fatal("client %d: copying out of the data arena", child_who);
}

/* Fills n bytes of the data arena at off with 0xff (NaN as f32), so that an output the daemon
 * never wrote fails, or exits; returns nothing. */
static void poison(struct client *cl, uint64_t off, size_t n)
{
    if (aio_poison(use_cuda, cl->data, off, n) < 0)
        cr_fatal("client %d: poisoning the data arena", child_who);
}

/* Returns the slot of token pos of sequence s. */
static int32_t slot_of(const struct client *cl, int s, int pos)
{
    return cl->ids[s * MAXBLK + pos / B] * B + pos % B;
}

/* Returns the worst relative L2 error over rows of D floats of got against want. */
static double row_error(const float *got, const float *want, size_t rows)
{
    return aio_row_error(got, want, rows, D);
}

/* Prepares one request, or exits; returns nothing. */
static void prep(struct client *cl, const paged_request *req)
{
    if (paged_prep(cl->c, req) != PAGED_OK)
        cr_fatal("client %d: paged_prep: %s", child_who, paged_client_error(cl->c));
}

/* Waits for n completions into comp (by tag - base), or exits; returns nothing. */
static void await_all(struct client *cl, paged_completion *comp, unsigned n, uint64_t base)
{
    unsigned got = 0;
    for (unsigned i = 0; i < n; i++)
        comp[i].tag = UINT64_MAX;
    while (got < n) {
        paged_completion c[8];
        int k = paged_wait(cl->c, c, 8, WAIT_MS);
        if (k < 0)
            cr_fatal("client %d: waiting for completions: %s (%u of %u came)", child_who,
                  paged_strerror(k), got, n);
        for (int i = 0; i < k; i++) {
            uint64_t t = c[i].tag - base;
            if (t >= n || comp[t].tag != UINT64_MAX)
                cr_fatal("client %d: a completion with tag %llu it did not expect", child_who,
                      (unsigned long long) c[i].tag);
            comp[t] = c[i];
            got++;
        }
    }
}

/*
 * Runs burst phase (1 to 4: A to D; E has its own) of the n requests cl has prepared: tells the parent they
 * are ready, waits for its go, submits them at once, tells it they are submitted and waits
 * for their completions into comp (by tag - base). Exits on failure; returns nothing.
 */
static void run_burst(struct client *cl, int cmd_fd, int phase, paged_completion *comp, unsigned n,
                      uint64_t base)
{
    cr_send(REC_READY, 1, phase, NULL);
    cr_await_go(cmd_fd);
    if (paged_submit(cl->c) != (int) n)
        cr_fatal("client %d: submitting burst %c", child_who, 'A' + phase - 1);
    cr_send(REC_SUBMITTED, 1, phase, NULL);
    await_all(cl, comp, n, base);
}

/* Returns whether every one of the n completions in comp has the status PAGED_OK. */
static int all_ok(const paged_completion *comp, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (comp[i].status != PAGED_OK)
            return 0;
    return 1;
}

/* Connects, attaches, takes blocks and fills every sequence's first CTX0 tokens, every
 * layer, through one APPEND (mirrored into cl->ref); returns nothing. */
static void setup(struct client *cl)
{
    char name[32], why[256];
    snprintf(name, sizeof name, "merge-client-%d", child_who);
    struct aio_client ac = { .cuda = use_cuda, .ids = cl->ids, .nseq = NSEQ, .maxblk = MAXBLK };
    if (aio_open(&ac, daemon_.socket, name, "merge", 16u << 20, 8u << 20, why, sizeof why) < 0)
        cr_fatal("client %d: %s", child_who, why);
    cl->c = ac.c;
    cl->pool = ac.pool;
    cl->host = ac.host;
    cl->data = ac.data;
    cl->ref = (pk_cache) {
        .num_layers = L, .num_blocks = N, .num_kv_heads = H, .head_dim = D, .block_size = B,
        .dtype = PAGED_DTYPE_F32, .k_scale = 1.0f, .v_scale = 1.0f,
    };
    if (aio_fill_contexts(&ac, &cl->ref, CTX0, &cl->rng, 7, why, sizeof why) < 0)
        cr_fatal("client %d: %s", child_who, why);
}

/* One DECODE of burst A as the client made it, kept for the reference. */
struct dec {
    int layer, nseq, heads, stride, window;
    float soft_cap;
    int alibi;
    int32_t bt[NSEQ * MAXBLK];
    int32_t lens[NSEQ];
    float q[NSEQ * QH * D];
    uint64_t out_off;
    int expect;                   /* the status it must complete with */
    uint32_t expect_field;
};

/* Burst A: NA DECODEs in flight at once; checks their statuses and outputs. Returns nothing. */
static void burst_a(struct client *cl, int cmd_fd)
{
    static struct dec dv[NA];
    float slopes[QH];
    for (int h = 0; h < QH; h++)
        slopes[h] = -0.05f * (float) (h + 1);
    uint64_t slopes_off = carve(cl, PAGED_ARENA_HOST, sizeof slopes);
    memcpy(cl->host + slopes_off, slopes, sizeof slopes);
    size_t qbytes = (size_t) NSEQ * QH * D * 4;
    for (int r = 0; r < NA; r++) {
        struct dec *d = &dv[r];
        memset(d, 0, sizeof *d);
        d->nseq = 1 + r % 2;
        d->layer = r % 8 == 5 ? 1 : 0;
        d->heads = r % 10 == 9 ? QH / 2 : QH;
        d->window = r % 8 == 7 ? 9 : 0;
        d->stride = r % 3 == 0 ? MAXBLK : 3;
        if (r == 22) {
            d->alibi = 1;
            d->soft_cap = 20.0f;
        }
        for (int i = 0; i < d->nseq; i++) {
            int s = d->nseq == 1 ? (r / 2) % NSEQ : i;
            d->lens[i] = CTX0 - (r * 5 + i * 3 + child_who) % 21;
            for (int j = 0; j < d->stride; j++)
                d->bt[i * d->stride + j] = cl->ids[s * MAXBLK + j];
        }
        d->expect = PAGED_OK;
        if (r == 30) {
            d->lens[0] = 0;
            d->expect = PAGED_E_INVAL;
            d->expect_field = PCORE_FIELD_SEQ_LENS;
        } else if (r == 31) {
            d->bt[0] = -5;
            d->expect = PAGED_E_BLOCK;
            d->expect_field = PCORE_FIELD_BLOCK_TABLE;
        }
        tap_rng_fill_uniform(&cl->rng, d->q, (size_t) d->nseq * d->heads * D, -1.0, 1.0);
        uint64_t q_off = carve(cl, PAGED_ARENA_DATA, qbytes);
        d->out_off = carve(cl, PAGED_ARENA_DATA, qbytes);
        /* A chain: this query is the output of an earlier DECODE, so it must run after it. */
        if (r == CHAIN_TO)
            q_off = dv[CHAIN_FROM].out_off;
        uint64_t bt_off = carve(cl, PAGED_ARENA_HOST, sizeof d->bt);
        uint64_t lens_off = carve(cl, PAGED_ARENA_HOST, sizeof d->lens);
        memcpy(cl->host + bt_off, d->bt, sizeof d->bt);
        memcpy(cl->host + lens_off, d->lens, sizeof d->lens);
        if (r != CHAIN_TO)
            put(cl, q_off, d->q, qbytes);
        poison(cl, d->out_off, qbytes);
        paged_request req = {
            .op = PAGED_OP_DECODE, .pool = cl->pool, .layer = d->layer, .tag = 100 + (uint64_t) r,
            .u.attn = { .num_seqs = (uint32_t) d->nseq, .num_q_heads = (uint32_t) d->heads,
                        .dtype = PAGED_DTYPE_F32, .q_off = q_off, .out_off = d->out_off,
                        .block_tables_off = bt_off, .bt_stride = (uint32_t) d->stride,
                        .seq_lens_off = lens_off,
                        .opts = { .soft_cap = d->soft_cap, .window = d->window,
                                  .has_alibi = d->alibi, .alibi_off = slopes_off } },
        };
        prep(cl, &req);
    }
    static paged_completion comp[NA];
    run_burst(cl, cmd_fd, 1, comp, NA, 100);
    int statuses = 1, good = 0, bad = 0;
    double worst = 0;
    float got[NSEQ * QH * D], want[NSEQ * QH * D], chained_q[NSEQ * QH * D];
    for (int r = 0; r < NA; r++) {
        const struct dec *d = &dv[r];
        if (comp[r].status != d->expect
            || (d->expect < 0 && comp[r].err_field != d->expect_field)) {
            if (statuses)
                cr_check(0, "client %d: DECODE %d completes with %s (field %s), expected %s",
                      child_who, r, paged_strerror(comp[r].status),
                      paged_field_name(comp[r].err_field), paged_strerror(d->expect));
            statuses = 0;
            continue;
        }
        if (d->expect < 0)
            continue;
        get(cl, got, d->out_off, (size_t) d->nseq * d->heads * D * 4);
        if (r == CHAIN_FROM)
            memcpy(chained_q, got, (size_t) d->nseq * d->heads * D * 4);
        pk_decode_args ra = {
            .cache = cl->ref, .layer = d->layer, .num_seqs = d->nseq, .num_q_heads = d->heads,
            .q_dtype = PAGED_DTYPE_F32, .q = r == CHAIN_TO ? chained_q : d->q, .out = want,
            .block_tables = d->bt,
            .bt_stride = d->stride, .seq_lens = d->lens,
            .opts = { 1.0f / sqrtf((float) D), d->soft_cap, d->window, d->alibi ? slopes : NULL },
        };
        if (pk_ref_decode(&ra) != 0)
            cr_fatal("client %d: pk_ref_decode refused DECODE %d", child_who, r);
        double e = row_error(got, want, (size_t) d->nseq * d->heads);
        if (e > worst)
            worst = e;
        if (e <= TOL)
            good++;
        else if (bad++ == 0)
            cr_check(0, "client %d: DECODE %d (layer %d, %d sequences, %d heads, window %d, alibi %d): "
                  "row error %.3g", child_who, r, d->layer, d->nseq, d->heads, d->window, d->alibi, e);
    }
    cr_check(statuses, "client %d: %d DECODEs in flight at once all complete, the two bad ones alone "
          "with PAGED_E_INVAL (seq_lens) and PAGED_E_BLOCK (block_tables)", child_who, NA);
    cr_check(bad == 0 && good == NA - 2, "client %d: its %d good DECODEs (2 layers, GQA 4 and 2, a "
          "window, ALiBi with a soft cap, strides 3 and 4, one whose query is an earlier one's "
          "output) match pk_ref_decode (worst row error %.2g)", child_who, good, worst);
}

/*
 * Burst B: per step and layer, APPEND a token to both sequences then DECODE over it, all in
 * flight at once; at the end the last token of layer 0 rewritten and decoded again. Checks
 * that each DECODE saw its client's APPEND just before it and nothing after. Returns nothing.
 */
static void burst_b(struct client *cl, int cmd_fd)
{
    size_t kvn = (size_t) NSEQ * H * D, qn = (size_t) NSEQ * QH * D;
    static float kk[NB / 2][NSEQ * H * D], vv[NB / 2][NSEQ * H * D], qq[NB / 2][NSEQ * QH * D];
    static int32_t lens[NB / 2][NSEQ], slots[NB / 2][NSEQ];
    uint64_t out_off[NB / 2];
    int layer[NB / 2];
    int32_t bt[NSEQ * MAXBLK];
    memcpy(bt, cl->ids, sizeof bt);
    uint64_t bt_off = carve(cl, PAGED_ARENA_HOST, sizeof bt);
    memcpy(cl->host + bt_off, bt, sizeof bt);
    for (int i = 0; i < NB / 2; i++) {
        int rewrite = i == NB / 2 - 1;
        int step = rewrite ? NSTEP - 1 : i / L;
        layer[i] = rewrite ? 0 : i % L;
        int pos = CTX0 + step;
        tap_rng_fill_uniform(&cl->rng, kk[i], kvn, -1.0, 1.0);
        tap_rng_fill_uniform(&cl->rng, vv[i], kvn, -1.0, 1.0);
        tap_rng_fill_uniform(&cl->rng, qq[i], qn, -1.0, 1.0);
        for (int s = 0; s < NSEQ; s++) {
            slots[i][s] = slot_of(cl, s, pos);
            lens[i][s] = pos + 1;
        }
        uint64_t k_off = carve(cl, PAGED_ARENA_DATA, kvn * 4), v_off = carve(cl, PAGED_ARENA_DATA, kvn * 4);
        uint64_t q_off = carve(cl, PAGED_ARENA_DATA, qn * 4);
        out_off[i] = carve(cl, PAGED_ARENA_DATA, qn * 4);
        uint64_t s_off = carve(cl, PAGED_ARENA_HOST, sizeof slots[i]);
        uint64_t l_off = carve(cl, PAGED_ARENA_HOST, sizeof lens[i]);
        memcpy(cl->host + s_off, slots[i], sizeof slots[i]);
        memcpy(cl->host + l_off, lens[i], sizeof lens[i]);
        put(cl, k_off, kk[i], kvn * 4);
        put(cl, v_off, vv[i], kvn * 4);
        put(cl, q_off, qq[i], qn * 4);
        poison(cl, out_off[i], qn * 4);
        paged_request app = {
            .op = PAGED_OP_APPEND, .pool = cl->pool, .layer = layer[i], .tag = 1000 + 2 * (uint64_t) i,
            .u.append = { .num_tokens = NSEQ, .dtype = PAGED_DTYPE_F32, .k_off = k_off,
                          .v_off = v_off, .slots_off = s_off },
        };
        paged_request dec = {
            .op = PAGED_OP_DECODE, .pool = cl->pool, .layer = layer[i], .tag = 1001 + 2 * (uint64_t) i,
            .u.attn = { .num_seqs = NSEQ, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32,
                        .q_off = q_off, .out_off = out_off[i], .block_tables_off = bt_off,
                        .bt_stride = MAXBLK, .seq_lens_off = l_off },
        };
        prep(cl, &app);
        prep(cl, &dec);
    }
    static paged_completion comp[NB];
    run_burst(cl, cmd_fd, 2, comp, NB, 1000);
    cr_check(all_ok(comp, NB), "client %d: %d APPENDs and DECODEs in flight at once all complete OK",
          child_who, NB);

    /* Replay the client's order on the reference: each DECODE against the cache after its
     * APPEND (want) and before it (stale: what it gives if it ran first). */
    double worst = 0, least_change = INFINITY;
    int matches = 0;
    const int before = (NSTEP - 1) * L;   /* the last DECODE of layer 0 before the rewrite */
    float got[NSEQ * QH * D], want[NSEQ * QH * D], stale[NSEQ * QH * D], before_got[NSEQ * QH * D];
    for (int i = 0; i < NB / 2; i++) {
        pk_decode_args ra = {
            .cache = cl->ref, .layer = layer[i], .num_seqs = NSEQ, .num_q_heads = QH,
            .q_dtype = PAGED_DTYPE_F32, .q = qq[i], .out = stale, .block_tables = bt,
            .bt_stride = MAXBLK, .seq_lens = lens[i], .opts = { 1.0f / sqrtf((float) D), 0, 0, NULL },
        };
        pk_append_args aa = {
            .cache = cl->ref, .layer_begin = layer[i], .num_layers = 1, .num_tokens = NSEQ,
            .src_dtype = PAGED_DTYPE_F32, .k = kk[i], .v = vv[i], .slot_mapping = slots[i],
        };
        if (pk_ref_decode(&ra) != 0 || pk_ref_append(&aa) != 0)
            cr_fatal("client %d: the reference refused step %d", child_who, i);
        ra.out = want;
        if (pk_ref_decode(&ra) != 0)
            cr_fatal("client %d: the reference refused step %d", child_who, i);
        get(cl, got, out_off[i], sizeof got);
        double e = row_error(got, want, (size_t) NSEQ * QH), change = row_error(got, stale, (size_t) NSEQ * QH);
        if (e > worst)
            worst = e;
        if (change < least_change)
            least_change = change;
        matches += e <= TOL && change > 100 * TOL;
        if (i == before)
            memcpy(before_got, got, sizeof got);
    }
    /* The DECODE before the rewrite, replayed on the cache as it is after it: had the rewrite
     * overtaken it, this is what it would have given. */
    pk_decode_args late = {
        .cache = cl->ref, .layer = 0, .num_seqs = NSEQ, .num_q_heads = QH,
        .q_dtype = PAGED_DTYPE_F32, .q = qq[before], .out = want, .block_tables = bt,
        .bt_stride = MAXBLK, .seq_lens = lens[before], .opts = { 1.0f / sqrtf((float) D), 0, 0, NULL },
    };
    if (pk_ref_decode(&late) != 0)
        cr_fatal("client %d: the reference refused the late replay", child_who);
    double diff = row_error(before_got, want, (size_t) NSEQ * QH);
    cr_check(diff > 100 * TOL, "client %d: the DECODE before a token's rewrite in place does not see "
          "the new K and V (differs from what it would give by %.2g), the one after does", child_who,
          diff);
    cr_check(matches == NB / 2, "client %d: each of its %d DECODEs matches pk_ref_decode with the "
          "token its APPEND just wrote (worst row error %.2g) and not without it (smallest "
          "difference %.2g)", child_who, NB / 2, worst, least_change);
}

/* One request of burst C as the client made it, kept to replay on the reference. */
struct creq {
    int copy;                     /* a COPY of extra[0] onto extra[1], else an APPEND */
    int layer;                    /* APPEND: a layer or PAGED_ALL_LAYERS */
    int ntok;
    int32_t slots[B];
    float k[L * B * H * D], v[L * B * H * D];
};

/* Prepares an APPEND of the ntok tokens of r (random keys and values, into r->slots) and
 * records it in r; returns nothing. */
static void prep_append(struct client *cl, struct creq *r, int layer, int ntok, uint64_t tag)
{
    int nl = layer == PAGED_ALL_LAYERS ? L : 1;
    size_t n = (size_t) nl * ntok * H * D;
    r->copy = 0;
    r->layer = layer;
    r->ntok = ntok;
    tap_rng_fill_uniform(&cl->rng, r->k, n, -1.0, 1.0);
    tap_rng_fill_uniform(&cl->rng, r->v, n, -1.0, 1.0);
    uint64_t k_off = carve(cl, PAGED_ARENA_DATA, n * 4), v_off = carve(cl, PAGED_ARENA_DATA, n * 4);
    uint64_t s_off = carve(cl, PAGED_ARENA_HOST, (size_t) ntok * 4);
    memcpy(cl->host + s_off, r->slots, (size_t) ntok * 4);
    put(cl, k_off, r->k, n * 4);
    put(cl, v_off, r->v, n * 4);
    paged_request app = {
        .op = PAGED_OP_APPEND, .pool = cl->pool, .layer = layer, .tag = tag,
        .u.append = { .num_tokens = (uint32_t) ntok, .dtype = PAGED_DTYPE_F32, .k_off = k_off,
                      .v_off = v_off, .slots_off = s_off },
    };
    prep(cl, &app);
}

/* Replays r on the client's reference copy of the pool, or exits; returns nothing. */
static void replay(struct client *cl, const struct creq *r)
{
    int rc;
    if (r->copy) {
        pk_copy_args ca = { .cache = cl->ref, .num_pairs = 1, .src_blocks = &cl->extra[0],
                            .dst_blocks = &cl->extra[1] };
        rc = pk_ref_copy(&ca);
    } else {
        pk_append_args aa = {
            .cache = cl->ref, .layer_begin = r->layer == PAGED_ALL_LAYERS ? 0 : r->layer,
            .num_layers = r->layer == PAGED_ALL_LAYERS ? L : 1, .num_tokens = r->ntok,
            .src_dtype = PAGED_DTYPE_F32, .k = r->k, .v = r->v, .slot_mapping = r->slots,
        };
        rc = pk_ref_append(&aa);
    }
    if (rc != 0)
        cr_fatal("client %d: the reference refused a replay: %s", child_who, paged_strerror(rc));
}

/* Copies the whole pool as the daemon holds it into dst (pool bytes); returns nothing. */
static void read_pool(struct client *cl, void *dst, size_t bytes)
{
    void *base = NULL;
    if (paged_pool_map(cl->pool, &base) != PAGED_OK || base == NULL)
        cr_fatal("client %d: mapping the pool: %s", child_who, paged_client_error(cl->c));
#ifdef HAVE_CUDA
    if (use_cuda) {
        if (cudaMemcpy(dst, base, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
            cr_fatal("client %d: cudaMemcpy out of the pool", child_who);
        return;
    }
#endif
    memcpy(dst, base, bytes);
}

/* Returns the number of (layer, K or V) parts of block that differ between the pool got and
 * the reference; names the first difference in first (len bytes) unless it names one already. */
static int block_diffs(const struct client *cl, const void *got, int32_t block, char *first, size_t len)
{
    size_t rowb = (size_t) H * B * D * 4;
    int bad = 0;
    for (int l = 0; l < L; l++)
        for (int kv = 0; kv < 2; kv++) {
            size_t off = pk_cache_index(&cl->ref, l, kv, block, 0, 0) * 4;
            if (memcmp((const char *) got + off, (const char *) cl->ref.base + off, rowb) == 0)
                continue;
            if (bad++ == 0 && first[0] == '\0')
                snprintf(first, len, "block %d layer %d %s", (int) block, l, kv ? "V" : "K");
        }
    return bad;
}

/*
 * Reads the whole pool back and compares every block of the client's own (its sequences'
 * and its two extra) with the reference: stores in *bad the number of (layer, K or V) parts
 * that differ and names the first in first (len bytes). Returns the pool read (the caller
 * frees it).
 */
static unsigned char *own_block_diffs(struct client *cl, int *bad, char *first, size_t len)
{
    size_t bytes = pk_cache_bytes(&cl->ref);
    unsigned char *pool = xcalloc(bytes);
    read_pool(cl, pool, bytes);
    *bad = 0;
    for (int i = 0; i < NSEQ * MAXBLK; i++)
        *bad += block_diffs(cl, pool, cl->ids[i], first, len);
    for (int i = 0; i < 2; i++)
        *bad += block_diffs(cl, pool, cl->extra[i], first, len);
    return pool;
}

/*
 * Burst C: APPENDs and one COPY in flight at once; then reads the pool back and checks every
 * block of the client against its reference replayed in its order. Returns nothing.
 */
static void burst_c(struct client *cl, int cmd_fd)
{
    if (paged_alloc(cl->pool, 2, cl->extra) != PAGED_OK)
        cr_fatal("client %d: ALLOC for burst C: %s", child_who, paged_client_error(cl->c));
    /* Both blocks filled first, every layer, so every slot's old contents are known. */
    static struct creq r[NC + 2];
    for (int b = 0; b < 2; b++) {
        for (int t = 0; t < B; t++)
            r[NC + b].slots[t] = cl->extra[b] * B + t;
        prep_append(cl, &r[NC + b], PAGED_ALL_LAYERS, B, 3000 + (uint64_t) b);
    }
    if (paged_submit(cl->c) != 2)
        cr_fatal("client %d: submitting burst C's fill", child_who);
    paged_completion fillc[2];
    await_all(cl, fillc, 2, 3000);
    if (fillc[0].status != PAGED_OK || fillc[1].status != PAGED_OK)
        cr_fatal("client %d: burst C's fill: %s", child_who, paged_strerror(fillc[0].status != PAGED_OK
                                                                         ? fillc[0].status : fillc[1].status));
    replay(cl, &r[NC]);
    replay(cl, &r[NC + 1]);

    int32_t e0 = cl->extra[0] * B, e1 = cl->extra[1] * B;
    r[0].slots[0] = e0 + 0;                       /* two APPENDs of layer 0 that merge */
    prep_append(cl, &r[0], 0, 1, 2000);
    r[1].slots[0] = e0 + 2;
    prep_append(cl, &r[1], 0, 1, 2001);
    r[2].copy = 1;                                /* extra[0] onto extra[1] */
    uint64_t src_off = carve(cl, PAGED_ARENA_HOST, 4), dst_off = carve(cl, PAGED_ARENA_HOST, 4);
    memcpy(cl->host + src_off, &cl->extra[0], 4);
    memcpy(cl->host + dst_off, &cl->extra[1], 4);
    paged_request copy = { .op = PAGED_OP_COPY, .pool = cl->pool, .tag = 2002,
                           .u.copy = { .count = 1, .src_off = src_off, .dst_off = dst_off } };
    prep(cl, &copy);
    r[3].slots[0] = e0 + 1;                       /* must not overtake the COPY */
    prep_append(cl, &r[3], 0, 1, 2003);
    r[4].slots[0] = e0 + 1;                       /* the same slot again: after the one before */
    prep_append(cl, &r[4], 0, 1, 2004);
    r[5].slots[0] = e1 + 3;                       /* every layer, into the copy */
    r[5].slots[1] = e1 + 5;
    prep_append(cl, &r[5], PAGED_ALL_LAYERS, 2, 2005);

    static paged_completion comp[NC];
    run_burst(cl, cmd_fd, 3, comp, NC, 2000);
    cr_check(all_ok(comp, NC), "client %d: %d APPENDs and a COPY in flight at once all complete OK",
          child_who, NC);

    for (int i = 0; i < NC; i++)
        replay(cl, &r[i]);
    char first[96] = "";
    int bad;
    unsigned char *got = own_block_diffs(cl, &bad, first, sizeof first);
    /* The slot the third APPEND wrote, as the COPY left it in the copy: the fill's value, not
     * that APPEND's (what an APPEND moved before the COPY would leave). */
    size_t at = pk_cache_index(&cl->ref, 0, 0, cl->extra[1], 0, 1) * 4;
    int copy_first = memcmp(got + at, (const char *) cl->ref.base + at, (size_t) D * 4) == 0
                     && memcmp(got + at, r[3].k, (size_t) D * 4) != 0;
    cr_check(copy_first, "client %d: an APPEND after its COPY did not overtake it (the copy holds "
          "the slot's old keys, not the new ones)", child_who);
    cr_check(bad == 0, "client %d: reading the pool back, every block of its own (%d), every "
          "layer, K and V, holds exactly what it wrote, in its order%s%s", child_who,
          NSEQ * MAXBLK + 2, bad != 0 ? "; first difference: " : "", first);
    free(got);
}

/*
 * Burst D: one APPEND (a token per sequence) and one DECODE over it, both on the client's own
 * layer, submitted while the daemon is stopped so that every client's pair is in one pass;
 * checks the DECODE against the reference with and without the token, and every block of
 * the client, every layer, against the reference after the APPEND. Returns nothing.
 */
static void burst_d(struct client *cl, int cmd_fd)
{
    const int layer = child_who % L, pos = CTX0 + NSTEP;   /* after burst B's tokens */
    size_t kvn = (size_t) NSEQ * H * D, qn = (size_t) NSEQ * QH * D;
    static float k[NSEQ * H * D], v[NSEQ * H * D], q[NSEQ * QH * D];
    int32_t slots[NSEQ], lens[NSEQ], bt[NSEQ * MAXBLK];
    memcpy(bt, cl->ids, sizeof bt);
    tap_rng_fill_uniform(&cl->rng, k, kvn, -1.0, 1.0);
    tap_rng_fill_uniform(&cl->rng, v, kvn, -1.0, 1.0);
    tap_rng_fill_uniform(&cl->rng, q, qn, -1.0, 1.0);
    for (int s = 0; s < NSEQ; s++) {
        slots[s] = slot_of(cl, s, pos);
        lens[s] = pos + 1;
    }
    uint64_t k_off = carve(cl, PAGED_ARENA_DATA, kvn * 4), v_off = carve(cl, PAGED_ARENA_DATA, kvn * 4);
    uint64_t q_off = carve(cl, PAGED_ARENA_DATA, qn * 4), out_off = carve(cl, PAGED_ARENA_DATA, qn * 4);
    uint64_t s_off = carve(cl, PAGED_ARENA_HOST, sizeof slots), l_off = carve(cl, PAGED_ARENA_HOST, sizeof lens);
    uint64_t bt_off = carve(cl, PAGED_ARENA_HOST, sizeof bt);
    memcpy(cl->host + s_off, slots, sizeof slots);
    memcpy(cl->host + l_off, lens, sizeof lens);
    memcpy(cl->host + bt_off, bt, sizeof bt);
    put(cl, k_off, k, kvn * 4);
    put(cl, v_off, v, kvn * 4);
    put(cl, q_off, q, qn * 4);
    poison(cl, out_off, qn * 4);
    paged_request app = {
        .op = PAGED_OP_APPEND, .pool = cl->pool, .layer = layer, .tag = 4000,
        .u.append = { .num_tokens = NSEQ, .dtype = PAGED_DTYPE_F32, .k_off = k_off, .v_off = v_off,
                      .slots_off = s_off },
    };
    paged_request dec = {
        .op = PAGED_OP_DECODE, .pool = cl->pool, .layer = layer, .tag = 4001,
        .u.attn = { .num_seqs = NSEQ, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32, .q_off = q_off,
                    .out_off = out_off, .block_tables_off = bt_off, .bt_stride = MAXBLK,
                    .seq_lens_off = l_off },
    };
    prep(cl, &app);
    prep(cl, &dec);
    paged_completion comp[2];
    run_burst(cl, cmd_fd, 4, comp, 2, 4000);
    cr_check(comp[0].status == PAGED_OK && comp[1].status == PAGED_OK,
          "client %d: its APPEND and DECODE of layer %d complete OK (%s, %s)", child_who, layer,
          paged_strerror(comp[0].status), paged_strerror(comp[1].status));

    float got[NSEQ * QH * D], want[NSEQ * QH * D], stale[NSEQ * QH * D];
    pk_decode_args ra = {
        .cache = cl->ref, .layer = layer, .num_seqs = NSEQ, .num_q_heads = QH,
        .q_dtype = PAGED_DTYPE_F32, .q = q, .out = stale, .block_tables = bt, .bt_stride = MAXBLK,
        .seq_lens = lens, .opts = { 1.0f / sqrtf((float) D), 0, 0, NULL },
    };
    pk_append_args aa = {
        .cache = cl->ref, .layer_begin = layer, .num_layers = 1, .num_tokens = NSEQ,
        .src_dtype = PAGED_DTYPE_F32, .k = k, .v = v, .slot_mapping = slots,
    };
    if (pk_ref_decode(&ra) != 0 || pk_ref_append(&aa) != 0)
        cr_fatal("client %d: the reference refused burst D", child_who);
    ra.out = want;
    if (pk_ref_decode(&ra) != 0)
        cr_fatal("client %d: the reference refused burst D", child_who);
    get(cl, got, out_off, sizeof got);
    double e = row_error(got, want, (size_t) NSEQ * QH), change = row_error(got, stale, (size_t) NSEQ * QH);
    cr_check(e <= TOL && change > 100 * TOL, "client %d: its DECODE of layer %d, merged with other "
          "clients' of other layers, matches pk_ref_decode on its layer with the token its APPEND "
          "just wrote (row error %.2g) and not without it (difference %.2g)", child_who, layer, e, change);

    char first[96] = "";
    int bad;
    unsigned char *pool = own_block_diffs(cl, &bad, first, sizeof first);
    cr_check(bad == 0, "client %d: after its APPEND of layer %d, merged with other clients' of other "
          "layers, every block of its own, every layer, K and V, holds exactly what it wrote%s%s",
          child_who, layer, bad != 0 ? "; first difference: " : "", first);
    free(pool);
}

/*
 * Burst E: a DECODE and then an ALLOC, submitted together (every client's while the daemon is
 * stopped, as in the other bursts). An ALLOC cannot join the pass that took its client's
 * DECODE, so a later pass runs it, which on the cuda backend may start while the DECODE is
 * still on the device (its batch deferred, daemon/engine/engine.c): the completions must still come
 * in ring order, the DECODE's first. (On the cpu backend a deferred batch is done when queued,
 * so there the check holds either way, unless PAGEDD_CPU_DONE_US reports it done late, as
 * merge-late-t.sh does: then the check fails if the engine lets the client's ALLOC into a pass
 * while its DECODE's completion is withheld.) Returns nothing.
 */
static void burst_e(struct client *cl, int cmd_fd)
{
    const int layer = child_who % L;
    size_t qn = (size_t) NSEQ * QH * D;
    static float q[NSEQ * QH * D];
    int32_t lens[NSEQ];
    tap_rng_fill_uniform(&cl->rng, q, qn, -1.0, 1.0);
    for (int s = 0; s < NSEQ; s++)
        lens[s] = CTX0;                          /* the tokens setup wrote */
    uint64_t q_off = carve(cl, PAGED_ARENA_DATA, qn * 4), out_off = carve(cl, PAGED_ARENA_DATA, qn * 4);
    uint64_t l_off = carve(cl, PAGED_ARENA_HOST, sizeof lens);
    uint64_t bt_off = carve(cl, PAGED_ARENA_HOST, sizeof cl->ids), ids_off = carve(cl, PAGED_ARENA_HOST, 4);
    memcpy(cl->host + l_off, lens, sizeof lens);
    memcpy(cl->host + bt_off, cl->ids, sizeof cl->ids);
    put(cl, q_off, q, qn * 4);
    paged_request dec = {
        .op = PAGED_OP_DECODE, .pool = cl->pool, .layer = layer, .tag = 5000,
        .u.attn = { .num_seqs = NSEQ, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32, .q_off = q_off,
                    .out_off = out_off, .block_tables_off = bt_off, .bt_stride = MAXBLK,
                    .seq_lens_off = l_off },
    };
    paged_request alloc = {
        .op = PAGED_OP_ALLOC, .pool = cl->pool, .tag = 5001, .u.blocks = { .count = 1, .ids_off = ids_off },
    };
    prep(cl, &dec);
    prep(cl, &alloc);
    cr_send(REC_READY, 1, 5, NULL);
    cr_await_go(cmd_fd);
    if (paged_submit(cl->c) != 2)
        cr_fatal("client %d: submitting burst E", child_who);
    cr_send(REC_SUBMITTED, 1, 5, NULL);
    uint64_t order[2] = { 0, 0 };
    int status[2] = { PAGED_E_INVAL, PAGED_E_INVAL };
    for (unsigned got = 0; got < 2;) {
        paged_completion c[2];
        int k = paged_wait(cl->c, c, 2 - got, WAIT_MS);
        if (k < 0)
            cr_fatal("client %d: waiting for burst E: %s", child_who, paged_strerror(k));
        for (int i = 0; i < k; i++, got++) {
            order[got] = c[i].tag;
            status[got] = c[i].status;
        }
    }
    cr_check(order[0] == 5000 && order[1] == 5001 && status[0] == PAGED_OK && status[1] == PAGED_OK,
             "client %d: a DECODE and an ALLOC submitted together, the ALLOC run by a later pass, "
             "complete in ring order (tags %llu, %llu: %s, %s)", child_who, (unsigned long long) order[0],
             (unsigned long long) order[1], paged_strerror(status[0]), paged_strerror(status[1]));
    int32_t id;
    memcpy(&id, cl->host + ids_off, sizeof id);
    int rc = paged_free(cl->pool, 1, &id);
    cr_check(rc == PAGED_OK, "client %d: frees the block burst E's ALLOC took (%s)", child_who, paged_strerror(rc));
}

/* A client process: set up, bursts A to E, then exits. */
static void client_main(int who, int cmd_fd)
{
    child_who = who;
    struct client cl;
    memset(&cl, 0, sizeof cl);
    tap_rng_seed(&cl.rng, seed * 1000003u + (uint64_t) who * 7919u);
    setup(&cl);
    burst_a(&cl, cmd_fd);
    burst_b(&cl, cmd_fd);
    burst_c(&cl, cmd_fd);
    burst_d(&cl, cmd_fd);
    burst_e(&cl, cmd_fd);
    cr_send(REC_DONE, 1, 0, NULL);
    paged_client_close(cl.c);
    free(cl.ref.base);
    _exit(0);
}

/* Checks what the log says of the merged launches when the backend refuses them all: none
 * ran merged, the refused ones ran alone, burst D's one launch of each op among them (its
 * part of the log from d_from to d_to). Returns nothing. */
static void check_refused(long d_from, long d_to)
{
    ok(pagedd_log_contains(&daemon_, "(PAGEDD_REFUSE_MERGED)"),
       "the daemon says it refuses every merged launch");
    struct ll_merged m, ma;
    ll_merged_in(daemon_.log, "decode", 0, -1, &m);
    ll_merged_in(daemon_.log, "append", 0, -1, &ma);
    ok(m.launches == 0 && ma.launches == 0, "no launch ran merged (logged: %lu DECODE, %lu APPEND)", m.launches,
       ma.launches);
    struct ll_unmerged u;
    ll_unmerged_in(daemon_.log, "decode", 0, -1, &u);
    ok(u.launches > 0 && u.requests >= 2 * u.launches,
       "%lu refused merged DECODE launches ran their %lu requests one by one", u.launches, u.requests);
    ll_unmerged_in(daemon_.log, "append", 0, -1, &u);
    ok(u.launches > 0 && u.requests >= 2 * u.launches,
       "%lu refused merged APPEND launches ran their %lu requests one by one", u.launches, u.requests);
    ll_unmerged_in(daemon_.log, "decode", d_from, d_to, &u);
    ok(u.launches == 1 && u.requests == NCLI, "burst D: the one launch of the %d clients' DECODEs was refused "
       "and they ran alone (logged: %lu launches of %lu requests)", NCLI, u.launches, u.requests);
    ll_unmerged_in(daemon_.log, "append", d_from, d_to, &u);
    ok(u.launches == 1 && u.requests == NCLI, "burst D: the one launch of the %d clients' APPENDs was refused "
       "and they ran alone (logged: %lu launches of %lu requests)", NCLI, u.launches, u.requests);
}

/* Checks what the log and STATS say of the merged launches: DECODEs and APPENDs of several
 * clients ran merged, burst D's (from d_from to d_to in the log) as one launch of each op;
 * STATS counts what the log shows. Returns nothing. */
static void check_merged(struct rc_client *ctl, long d_from, long d_to)
{
    struct ll_merged m;
    ll_merged_in(daemon_.log, "decode", 0, -1, &m);
    ok(m.launches > 0, "the daemon logged %lu merged DECODE launches serving %lu requests", m.launches,
       m.requests);
    /* STATS (pactl stat) counts the same launches the log shows. */
    struct pcore_msg_stats_reply sr;
    struct ll_merged ma;
    ll_merged_in(daemon_.log, "append", 0, -1, &ma);
    if (ok(rc_stats(ctl, &sr) == 0, "STATS answers")) {
        const struct pcore_engine_stats *es = &sr.engine;
        ok(es->merged_decode_launches == m.launches && es->merged_decode_requests == m.requests,
           "STATS: %llu merged DECODE launches serving %llu requests, as logged",
           (unsigned long long) es->merged_decode_launches, (unsigned long long) es->merged_decode_requests);
        ok(es->merged_append_launches == ma.launches && es->merged_append_requests == ma.requests,
           "STATS: %llu merged APPEND launches serving %llu requests, as logged",
           (unsigned long long) es->merged_append_launches, (unsigned long long) es->merged_append_requests);
        ok(es->batches > 0 && es->launches >= es->batches && es->decode_batches <= es->batches
           && es->decode_requests >= es->merged_decode_requests && es->decode_clients <= es->decode_requests
           && es->append_requests >= es->merged_append_requests && es->device_wait_ns <= es->backend_ns
           && es->decode_requests <= sr.ops[PAGED_OP_DECODE].requests
           && es->decode_requests >= sr.ops[PAGED_OP_DECODE].requests - sr.ops[PAGED_OP_DECODE].errors,
           "STATS: engine counters add up (%llu batches, %llu launches, %llu DECODEs in %llu batches)",
           (unsigned long long) es->batches, (unsigned long long) es->launches,
           (unsigned long long) es->decode_requests, (unsigned long long) es->decode_batches);
    }
    ok(m.most_clients >= 2, "a merged launch served DECODEs of %u clients (at least 2)", m.most_clients);
    ok(ma.launches > 0, "the daemon logged %lu merged APPEND launches serving %lu requests", ma.launches,
       ma.requests);
    ok(ma.most_clients >= 2, "a merged launch served APPENDs of %u clients (at least 2)", ma.most_clients);
    /* Burst D: one launch each, every client on a layer of its own. */
    const int top = (NCLI < L ? NCLI : L) - 1;
    ll_merged_in(daemon_.log, "decode", d_from, d_to, &m);
    ok(m.launches == 1 && m.requests == NCLI && m.most_clients == NCLI && m.lo == 0 && m.hi == top,
       "burst D: the %d clients' DECODEs of layers 0..%d ran as one launch (logged: %lu launches "
       "serving %lu requests, at most %u clients, layers %d..%d)", NCLI, top, m.launches, m.requests,
       m.most_clients, m.lo, m.hi);
    ll_merged_in(daemon_.log, "append", d_from, d_to, &m);
    ok(m.launches == 1 && m.requests == NCLI && m.most_clients == NCLI && m.lo == 0 && m.hi == top,
       "burst D: the %d clients' APPENDs of layers 0..%d ran as one launch (logged: %lu launches "
       "serving %lu requests, at most %u clients, layers %d..%d)", NCLI, top, m.launches, m.requests,
       m.most_clients, m.lo, m.hi);
}

/* Stops the daemon and waits until it has stopped; returns nothing. */
static void stop_daemon(void)
{
    if (td_freeze_idle(&daemon_) != 0)
        sysbail("stopping the daemon");
}

/* Starts the daemon and the clients, conducts the two bursts, reads the log; returns 0. */
int main(void)
{
    seed = tap_seed();
    const char *extra[] = { "--log-level", "debug", "--threads", "2", NULL };
    use_cuda = aio_start(&daemon_, extra);
    int st = 0;
    plan_lazy();

    struct rc_client ctl;
    aio_pool_create(&ctl, &daemon_, "merge-t", "merge", L, H, D, B, PAGED_DTYPE_F32, N);

    struct cr_clients kids;
    cr_spawn(&kids, NCLI, client_main);

    int ready = 1;
    long burst_d_log = 0, burst_e_log = -1;   /* where burst D's and E's parts of the log start */
    for (int phase = 1; phase <= 5 && ready; phase++) {
        ready = cr_await(kids.rec_fd, REC_READY, phase, NCLI, WAIT_MS);
        if (!ok(ready, "burst %c: every client prepared its requests", 'A' + phase - 1))
            break;
        /* The log is written before completions are posted: all of burst C's is there. */
        if (phase == 4)
            burst_d_log = cr_file_size(daemon_.log);
        if (phase == 5)
            burst_e_log = cr_file_size(daemon_.log);
        /* Stopped, so every client's whole burst is in its ring when the engine looks. */
        stop_daemon();
        for (int w = 0; w < NCLI; w++)
            if (write(kids.cmd[w], "g", 1) != 1)
                sysbail("write");
        ready = cr_await(kids.rec_fd, REC_SUBMITTED, phase, NCLI, WAIT_MS);
        kill(daemon_.pid, SIGCONT);
        ok(ready, "burst %c: every client submitted while the daemon was stopped", 'A' + phase - 1);
    }
    ok(ready && cr_await(kids.rec_fd, REC_DONE, 0, NCLI, WAIT_MS), "every client checked the five bursts");
    cr_reap(&kids);

    /* PAGEDD_REFUSE_MERGED (merge-refused-t.sh): every merged launch refused, run op by op. */
    const char *refuse = getenv("PAGEDD_REFUSE_MERGED");
    if (refuse != NULL && strcmp(refuse, "1") == 0)
        check_refused(burst_d_log, burst_e_log);
    else
        check_merged(&ctl, burst_d_log, burst_e_log);
    rc_close(&ctl);
    st = pagedd_stop(&daemon_);
    ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exits 0 on SIGTERM");
    ok(!pagedd_log_contains(&daemon_, "corrupt"), "the daemon saw no corrupt ring");
    /* The decoding clients left: at debug, the engine logged its activity lines. */
    ok(pagedd_log_contains(&daemon_, "completion wake-ups per batch"),
       "the debug log carries the engine's activity lines");
    td_check_late_done(&daemon_, !use_cuda);
    pagedd_cleanup(&daemon_);
    return 0;
}
