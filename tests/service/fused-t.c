/* fused-t.c: clients decoding layer by layer, each layer's APPEND of new tokens riding in its DECODE's launch. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paged.h"
#include "kernels/cpu/dtype.h"
#include "kernels/kernels.h"
#include "tests/service/arena-io.h"
#include "tests/service/childrec.h"
#include "tests/service/launchlog.h"
#include "tests/service/rawclient.h"
#include "tests/service/proc.h"
#include "tests/tap/basic.h"

/*
 * NCLI client processes share a bf16 pool and decode as a model does: per step and layer,
 * an APPEND of each sequence's newest token and a DECODE over it, submitted together, both
 * awaited before the next layer. On the cuda backend the daemon runs such a pass as one
 * launch, the decode kernel writing the tokens (daemon/engine/fuse.h); the cpu backend runs the two
 * apart. Either way each DECODE must match the reference of APPEND then DECODE, and since
 * later DECODEs read the tokens earlier layers and steps wrote, a token written wrong shows
 * there too.
 *
 *   Phase 1: NSTEP steps of L layers. On cuda the daemon's log must show fused launches.
 *   Phase 2: every client's second sequence also names, first in its table, the block its
 *   first sequence's newest token goes to: the two CTAs that read that block could race the
 *   write, so the daemon must not fuse (no fused launch in the log of this phase), and the
 *   outputs must still match.
 *
 *   Phase 3: the parent stops the daemon while every client submits one more layer (an
 *   APPEND and a DECODE), so that one pass takes them all: on cuda the DECODEs must run as one
 *   merged launch carrying every client's APPEND (the launch's metadata in its parameters);
 *   under PAGEDD_REFUSE_MERGED (fused-refused-t.sh) that launch is refused and its requests
 *   run one by one, the metadata uploaded after all. Under PAGEDD_SPLIT=2,1 with batches that
 *   finish behind the engine's back (fused-split-t.sh) every pass that finds the device idle
 *   with two decoding clients or more is split in two batches queued back to back (in phases
 *   1 and 2 whenever the clients happen to come so): in phase 3 the first client's requests
 *   run alone and the other two clients' DECODEs as one launch, both batches' completions
 *   withheld until each is done. The outputs must match in every case.
 *
 * Children report each check through tests/service/childrec.h's pipe; the parent prints TAP.
 */

#define L 2
#define H 2                 /* KV heads */
#define QH 8                /* query heads: GQA groups of 4 */
#define D 128               /* a head dim of the tensor-core decode kernel */
#define B 16
#define N 96
#define NCLI 3
#define NSEQ 3
#define MAXBLK 4            /* blocks per sequence: up to 64 tokens */
#define CTX 37              /* tokens in every sequence before phase 1 */
#define NSTEP 4             /* phase 1: steps (a token per layer each) */
#define TOL 2e-2            /* bf16 everywhere: relative L2 error of one output row */
#define WAIT_MS 120000

/* What a child tells the parent besides its checks (tests/service/childrec.h). */
enum rec_kind { REC_DONE = CR_FIRST_KIND, REC_SUBMITTED };

static struct pagedd daemon_;
static uint64_t seed;
static int use_cuda;        /* the daemon runs the cuda backend: data arenas are device memory */
static int child_who;

/* Everything one client holds. */
struct client {
    struct aio_client a;
    int32_t ids[NSEQ * MAXBLK];   /* our blocks, sequence by sequence */
    pk_cache ref;                 /* a host copy of the pool as we wrote it */
    tap_rng rng;
    uint64_t tag;
};

/* Returns the offset of size bytes of an arena, or exits. */
static uint64_t carve(struct client *cl, paged_arena_kind kind, size_t size)
{
    uint64_t off = 0;
    if (paged_arena_alloc(cl->a.c, kind, size, 256, &off) != PAGED_OK)
        cr_fatal("client %d: carving %zu bytes of an arena: %s", child_who, size, paged_client_error(cl->a.c));
    return off;
}

/* Fills n bf16 values with uniform random ones in [-1, 1); returns nothing. */
static void random_bf16(tap_rng *rng, uint16_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pk_f32_to_bf16((float) tap_rng_uniform(rng, -1.0, 1.0));
}

/* Copies n bytes into the data arena at a fresh offset; returns the offset, or exits. */
static uint64_t put_new(struct client *cl, const void *src, size_t n)
{
    uint64_t off = carve(cl, PAGED_ARENA_DATA, n);
    if (aio_put(use_cuda, cl->a.data, off, src, n) < 0)
        cr_fatal("client %d: copying into the data arena", child_who);
    return off;
}

/* Copies n bytes of host memory into the host arena at a fresh offset; returns the offset. */
static uint64_t host_new(struct client *cl, const void *src, size_t n)
{
    uint64_t off = carve(cl, PAGED_ARENA_HOST, n);
    memcpy(cl->a.host + off, src, n);
    return off;
}

/* Submits what was prepared (count requests), tells the parent so when phase is nonzero
 * (REC_SUBMITTED), and awaits as many completions, each PAGED_OK, or exits; returns nothing. */
static void run_announced(struct client *cl, int count, const char *what, int phase)
{
    if (paged_submit(cl->a.c) != count)
        cr_fatal("client %d: submitting %s: %s", child_who, what, paged_client_error(cl->a.c));
    if (phase != 0)
        cr_send(REC_SUBMITTED, 1, phase, NULL);
    for (int got = 0; got < count;) {
        paged_completion comp[4];
        int k = paged_wait(cl->a.c, comp, 4, WAIT_MS);
        if (k < 0)
            cr_fatal("client %d: waiting for %s: %s", child_who, what, paged_strerror(k));
        for (int i = 0; i < k; i++)
            if (comp[i].status != PAGED_OK)
                cr_fatal("client %d: %s: request %llu failed: %s (%s[%u])", child_who, what,
                       (unsigned long long) comp[i].tag, paged_strerror(comp[i].status),
                       paged_field_name(comp[i].err_field), comp[i].err_index);
        got += k;
    }
}

/* Submits what was prepared (count requests) and awaits as many completions, each PAGED_OK,
 * or exits; returns nothing. */
static void run(struct client *cl, int count, const char *what)
{
    run_announced(cl, count, what, 0);
}

/* Prepares req, or exits; returns nothing. */
static void prep(struct client *cl, paged_request *req)
{
    req->tag = cl->tag++;
    if (paged_prep(cl->a.c, req) != PAGED_OK)
        cr_fatal("client %d: paged_prep: %s", child_who, paged_client_error(cl->a.c));
}

/* Connects, takes blocks and fills every sequence's first CTX tokens of every layer with one
 * APPEND, mirrored into cl->ref; returns nothing. */
static void setup(struct client *cl)
{
    char name[32], why[256];
    snprintf(name, sizeof name, "fused-client-%d", child_who);
    cl->a = (struct aio_client) { .cuda = use_cuda, .ids = cl->ids, .nseq = NSEQ, .maxblk = MAXBLK };
    if (aio_open(&cl->a, daemon_.socket, name, "fused", 8u << 20, 8u << 20, why, sizeof why) < 0)
        cr_fatal("client %d: %s", child_who, why);
    cl->ref = (pk_cache) { .num_layers = L, .num_blocks = N, .num_kv_heads = H, .head_dim = D, .block_size = B,
                           .dtype = PAGED_DTYPE_BF16, .k_scale = 1.0f, .v_scale = 1.0f };
    cl->ref.base = calloc(1, pk_cache_bytes(&cl->ref));
    size_t n = (size_t) L * NSEQ * CTX * H * D;
    uint16_t *k = malloc(n * 2), *v = malloc(n * 2);
    int32_t slots[NSEQ * CTX];
    if (cl->ref.base == NULL || k == NULL || v == NULL)
        cr_fatal("client %d: out of memory", child_who);
    random_bf16(&cl->rng, k, n);
    random_bf16(&cl->rng, v, n);
    for (int s = 0; s < NSEQ; s++)
        for (int t = 0; t < CTX; t++)
            slots[s * CTX + t] = cl->ids[s * MAXBLK + t / B] * B + t % B;
    paged_request app = {
        .op = PAGED_OP_APPEND, .pool = cl->a.pool, .layer = PAGED_ALL_LAYERS,
        .u.append = { .num_tokens = NSEQ * CTX, .dtype = PAGED_DTYPE_BF16, .k_off = put_new(cl, k, n * 2),
                      .v_off = put_new(cl, v, n * 2), .slots_off = host_new(cl, slots, sizeof slots) },
    };
    prep(cl, &app);
    run(cl, 1, "the contexts' APPEND");
    pk_append_args ra = { .cache = cl->ref, .layer_begin = 0, .num_layers = L, .num_tokens = NSEQ * CTX,
                          .src_dtype = PAGED_DTYPE_BF16, .k = k, .v = v, .slot_mapping = slots };
    if (pk_ref_append(&ra) != 0)
        cr_fatal("client %d: the reference refused the contexts", child_who);
    free(k);
    free(v);
}

/*
 * One layer of a decode step: the newest token (position pos) of every sequence on layer,
 * APPENDed and DECODEd over in one submission, with table bt (the parent told it is
 * submitted when phase is nonzero); checks the output against the reference and returns the
 * worst row error (infinity when it is not finite).
 */
static double layer_step(struct client *cl, int layer, int pos, const int32_t *bt, int phase)
{
    static uint16_t k[NSEQ * H * D], v[NSEQ * H * D], q[NSEQ * QH * D], got[NSEQ * QH * D], want[NSEQ * QH * D];
    int32_t slots[NSEQ], lens[NSEQ];
    random_bf16(&cl->rng, k, NSEQ * H * D);
    random_bf16(&cl->rng, v, NSEQ * H * D);
    random_bf16(&cl->rng, q, NSEQ * QH * D);
    for (int s = 0; s < NSEQ; s++) {
        slots[s] = bt[s * MAXBLK + pos / B] * B + pos % B;
        lens[s] = pos + 1;
    }
    uint64_t out_off = carve(cl, PAGED_ARENA_DATA, sizeof got);
    if (aio_poison(use_cuda, cl->a.data, out_off, sizeof got) < 0)
        cr_fatal("client %d: poisoning the output", child_who);
    paged_request app = {
        .op = PAGED_OP_APPEND, .pool = cl->a.pool, .layer = layer,
        .u.append = { .num_tokens = NSEQ, .dtype = PAGED_DTYPE_BF16, .k_off = put_new(cl, k, sizeof k),
                      .v_off = put_new(cl, v, sizeof v), .slots_off = host_new(cl, slots, sizeof slots) },
    };
    paged_request dec = {
        .op = PAGED_OP_DECODE, .pool = cl->a.pool, .layer = layer,
        .u.attn = { .num_seqs = NSEQ, .num_q_heads = QH, .dtype = PAGED_DTYPE_BF16, .q_off = put_new(cl, q, sizeof q),
                    .out_off = out_off, .block_tables_off = host_new(cl, bt, NSEQ * MAXBLK * sizeof *bt),
                    .bt_stride = MAXBLK, .seq_lens_off = host_new(cl, lens, sizeof lens) },
    };
    prep(cl, &app);
    prep(cl, &dec);
    run_announced(cl, 2, "an APPEND and its DECODE", phase);
    if (aio_get(use_cuda, cl->a.data, out_off, got, sizeof got) < 0)
        cr_fatal("client %d: copying the output out", child_who);

    pk_append_args ra = { .cache = cl->ref, .layer_begin = layer, .num_layers = 1, .num_tokens = NSEQ,
                          .src_dtype = PAGED_DTYPE_BF16, .k = k, .v = v, .slot_mapping = slots };
    pk_decode_args rd = { .cache = cl->ref, .layer = layer, .num_seqs = NSEQ, .num_q_heads = QH,
                          .q_dtype = PAGED_DTYPE_BF16, .q = q, .out = want, .block_tables = bt,
                          .bt_stride = MAXBLK, .seq_lens = lens, .opts = { 1.0f / sqrtf((float) D), 0, 0, NULL } };
    if (pk_ref_append(&ra) != 0 || pk_ref_decode(&rd) != 0)
        cr_fatal("client %d: the reference refused a step", child_who);
    static float gf[NSEQ * QH * D], wf[NSEQ * QH * D];
    for (size_t i = 0; i < NSEQ * QH * D; i++) {
        gf[i] = pk_bf16_to_f32(got[i]);
        wf[i] = pk_bf16_to_f32(want[i]);
    }
    return aio_row_error(gf, wf, NSEQ * QH, D);
}

/* A client process: setup, phase 1, then (each on the parent's go) phases 2 and 3; exits. */
static void client_main(int who, int cmd_fd)
{
    child_who = who;
    struct client cl;
    memset(&cl, 0, sizeof cl);
    cl.tag = 1;
    tap_rng_seed(&cl.rng, seed * 1000003u + (uint64_t) who * 7919u);
    setup(&cl);

    double worst = 0.0;
    for (int step = 0; step < NSTEP; step++)
        for (int layer = 0; layer < L; layer++) {
            double e = layer_step(&cl, layer, CTX + step, cl.ids, 0);
            worst = e > worst || isnan(e) ? e : worst;
        }
    cr_check(worst <= TOL, "client %d: %d steps of %d layers, each an APPEND of the newest tokens and a "
           "DECODE over them, match the reference (worst row error %.2g)", child_who, NSTEP, L, worst);
    cr_send(REC_DONE, 1, 1, NULL);
    cr_await_go(cmd_fd);

    /* Phase 2: sequence 1 also reads the block sequence 0's newest token goes to, all of it:
     * the slots after that token get zeros first (device memory starts undefined). */
    const int pos = CTX + NSTEP, rest = B - 1 - pos % B;
    static uint16_t zeros[L * B * H * D];
    int32_t tail[B];
    for (int t = 0; t < rest; t++)
        tail[t] = cl.ids[0 * MAXBLK + pos / B] * B + pos % B + 1 + t;
    paged_request zap = {
        .op = PAGED_OP_APPEND, .pool = cl.a.pool, .layer = PAGED_ALL_LAYERS,
        .u.append = { .num_tokens = (uint32_t) rest, .dtype = PAGED_DTYPE_BF16,
                      .k_off = put_new(&cl, zeros, sizeof zeros), .v_off = put_new(&cl, zeros, sizeof zeros),
                      .slots_off = host_new(&cl, tail, sizeof tail) },
    };
    prep(&cl, &zap);
    run(&cl, 1, "the zeros after the newest token");
    pk_append_args rz = { .cache = cl.ref, .layer_begin = 0, .num_layers = L, .num_tokens = rest,
                          .src_dtype = PAGED_DTYPE_BF16, .k = zeros, .v = zeros, .slot_mapping = tail };
    if (pk_ref_append(&rz) != 0)
        cr_fatal("client %d: the reference refused the zeros", child_who);
    int32_t bt[NSEQ * MAXBLK];
    memcpy(bt, cl.ids, sizeof bt);
    bt[1 * MAXBLK + 0] = bt[0 * MAXBLK + pos / B];
    double e = layer_step(&cl, 0, pos, bt, 0);
    cr_check(e <= TOL, "client %d: a DECODE whose second sequence also reads the block the first one's newest "
           "token goes to matches the reference (row error %.2g)", child_who, e);
    cr_send(REC_DONE, 1, 2, NULL);

    /* Phase 3: layer 1's token at pos, submitted while the daemon is stopped. */
    cr_await_go(cmd_fd);
    e = layer_step(&cl, 1, pos, cl.ids, 3);
    cr_check(e <= TOL, "client %d: an APPEND and a DECODE run in one pass with every other client's match the "
           "reference (row error %.2g)", child_who, e);
    cr_send(REC_DONE, 1, 3, NULL);
    paged_client_close(cl.a.c);
    free(cl.ref.base);
    _exit(0);
}

/* Checks what the log says of phase 3 (from byte from to byte to): every client's DECODE in
 * one merged launch carrying their APPENDs on cuda, merged apart from them on cpu; under
 * PAGEDD_REFUSE_MERGED both merged launches refused and their requests run alone (on cuda
 * the metadata the DECODE launch carried uploaded after all). Returns nothing. */
static void check_phase3(int refuse, int split, long from, long to)
{
    struct ll_merged m;
    struct ll_unmerged u, ua;
    ll_merged_in(daemon_.log, "decode", from, to, &m);
    ll_unmerged_in(daemon_.log, "decode", from, to, &u);
    ll_unmerged_in(daemon_.log, "append", from, to, &ua);
    unsigned long fused = ll_fused_in(daemon_.log, from, to);
    if (refuse) {
        ok(m.launches == 0 && u.launches == 1 && u.requests == NCLI && ua.launches == 1 && ua.requests == NCLI
           && fused == 0, "phase 3: the merged launches of the %d clients' DECODEs and APPENDs were refused and "
           "each ran alone (logged: %lu merged, %lu and %lu refused of %lu and %lu requests, %lu fused)", NCLI,
           m.launches, u.launches, ua.launches, u.requests, ua.requests, fused);
        if (use_cuda)
            ok(ll_count_in(daemon_.log, "a refused launch carried the batch's metadata", from, to) == 1,
               "phase 3: cuda: the metadata the refused launch carried was uploaded after all");
    } else if (split) {
        unsigned long splits = ll_count_in(daemon_.log, "pass split in two batches on an idle device: 1 and 2 clients",
                                           from, to);
        ok(splits == 1 && m.launches == 1 && m.requests == NCLI - 1 && m.most_clients == NCLI - 1 && u.launches == 0,
           "phase 3: split in two batches (%lu logged), the first client alone, the other %d clients' DECODEs "
           "as one launch (logged: %lu launches serving %lu requests, at most %u clients)", splits, NCLI - 1,
           m.launches, m.requests, m.most_clients);
        if (use_cuda)
            ok(fused == NCLI, "phase 3: cuda: both launches carried their clients' APPENDs (%lu fused)", fused);
    } else {
        ok(m.launches == 1 && m.requests == NCLI && m.most_clients == NCLI && u.launches == 0,
           "phase 3: the %d clients' DECODEs ran as one launch (logged: %lu launches serving %lu requests, at "
           "most %u clients)", NCLI, m.launches, m.requests, m.most_clients);
        if (use_cuda)
            ok(fused == NCLI, "phase 3: cuda: that launch carried the %d clients' APPENDs (%lu fused)", NCLI, fused);
    }
}

/* Starts the daemon and the clients, conducts the three phases, reads the log; returns 0. */
int main(void)
{
    seed = tap_seed();
    const char *extra[] = { "--log-level", "debug", "--threads", "2", NULL };
    use_cuda = aio_start(&daemon_, extra);
    plan_lazy();

    struct rc_client ctl;
    aio_pool_create(&ctl, &daemon_, "fused-t", "fused", L, H, D, B, PAGED_DTYPE_BF16, N);

    struct cr_clients kids;
    cr_spawn(&kids, NCLI, client_main);

    /* The log is written before completions are posted: all of a phase's is there at its end. */
    int done = ok(cr_await(kids.rec_fd, REC_DONE, 1, NCLI, WAIT_MS), "phase 1: every client decoded its steps");
    long mark = cr_file_size(daemon_.log);
    for (int w = 0; w < NCLI; w++)
        if (write(kids.cmd[w], "g", 1) != 1)
            sysbail("write");
    done = ok(done && cr_await(kids.rec_fd, REC_DONE, 2, NCLI, WAIT_MS),
              "phase 2: every client decoded its aliased step") && done;
    long end = cr_file_size(daemon_.log);

    /* Phase 3: stopped, so every client's two requests are in its ring when the engine looks. */
    if (done && td_freeze_idle(&daemon_) != 0)
        sysbail("stopping the daemon");
    for (int w = 0; w < NCLI && done; w++)
        if (write(kids.cmd[w], "g", 1) != 1)
            sysbail("write");
    int sent = done && cr_await(kids.rec_fd, REC_SUBMITTED, 3, NCLI, WAIT_MS);
    if (done)
        kill(daemon_.pid, SIGCONT);
    ok(sent, "phase 3: every client submitted while the daemon was stopped");
    done = ok(sent && cr_await(kids.rec_fd, REC_DONE, 3, NCLI, WAIT_MS), "phase 3: every client decoded its layer");
    long end3 = cr_file_size(daemon_.log);
    cr_reap(&kids);

    /* PAGEDD_REFUSE_MERGED (fused-refused-t.sh): a launch of several requests is refused. */
    const char *refuse_env = getenv("PAGEDD_REFUSE_MERGED");
    const int refuse = refuse_env != NULL && strcmp(refuse_env, "1") == 0;
    unsigned long fused1 = ll_fused_in(daemon_.log, 0, mark), fused2 = ll_fused_in(daemon_.log, mark, end);
    if (use_cuda && !refuse)
        ok(done && fused1 > 0 && fused1 <= NCLI * NSTEP * L,
           "cuda: the daemon fused %lu of phase 1's %d APPENDs into their DECODEs' launches", fused1,
           NCLI * NSTEP * L);
    else if (use_cuda)
        ok(done && fused1 <= NCLI * NSTEP * L, "cuda: the daemon fused %lu of phase 1's %d APPENDs (merged "
           "launches refused)", fused1, NCLI * NSTEP * L);
    else
        ok(fused1 == 0, "cpu: no APPEND fused (%lu): the cpu backend runs APPEND and DECODE apart", fused1);
    ok(fused2 == 0, "phase 2: no APPEND fused where another row reads the block a token goes to (%lu)", fused2);
    if (refuse)
        ok(pagedd_log_contains(&daemon_, "(PAGEDD_REFUSE_MERGED)"),
           "the daemon says it refuses every merged launch");
    /* PAGEDD_SPLIT (fused-split-t.sh): passes that find the device idle split in two. */
    const char *split_env = getenv("PAGEDD_SPLIT");
    const int split = split_env != NULL && strcmp(split_env, "2,1") == 0;
    if (split)
        ok(pagedd_log_contains(&daemon_, "(PAGEDD_SPLIT; 0 clients: never)"),
           "the daemon says it splits passes");
    check_phase3(refuse, split, end, end3);
    rc_close(&ctl);
    int st = pagedd_stop(&daemon_);
    ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exits 0 on SIGTERM");
    td_check_late_done(&daemon_, !use_cuda);
    pagedd_cleanup(&daemon_);
    return 0;
}
