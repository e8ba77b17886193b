/* allocfail-t.c: pagedd's allocations for clients fail one at a time; each costs one request, named, nothing else. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "kernels/kernels.h"
#include "paged.h"
#include "lib/core/proto.h"
#include "tests/service/arena-io.h"
#include "tests/service/rawclient.h"
#include "tests/service/proc.h"
#include "tests/tap/basic.h"

/*
 * A sweep in the manner of an out-of-memory test: pagedd (the cpu backend, or the cuda one
 * with PAGED_TEST_BACKEND=cuda, where the workers' tensors live on the device) is started with
 * PAGEDD_FAIL_ALLOC_AT=n (daemon/util/heap.h) for n = 1, 2, ... in turn, so that the n-th heap
 * allocation it makes once serving fails as if memory had run out. Each time, a control
 * connection makes a pool and two client processes go through a worker's life on it:
 * connect, attach, ALLOC, APPEND, DECODE and PREFILL (outputs against the CPU reference),
 * FORK and FREE, COPY (a DECODE over the copy), PUBLISH and LOOKUP (the blocks found), FREE,
 * detach. A call that fails must fail with PAGED_E_NOMEM and a message, and the same call
 * made again must then succeed (the failure is planted once); nothing else may fail, every
 * output must match, every block must come back to the pool, and pagedd must exit 0 on
 * SIGTERM. A first run with no failure counts the allocations (the daemon logs the count);
 * the sweep goes on until a run in which the planted failure no longer fires.
 */

#define L 2u
#define H 2u
#define QH 4u
#define D 64u
#define B 16u
#define N 32u
#define TOK 40u               /* tokens appended: blocks of 16, 16 and 8 */
#define QO 8u                 /* PREFILL's query tokens: the last 8 */
#define WORKERS 2
#define SWEEP_MAX 600         /* the most runs a sweep may take */
#define TOL 1e-4

static const char *pool_name = "allocfail";
static struct pagedd daemon_;
static uint64_t seed;
static int use_cuda;          /* PAGED_TEST_BACKEND=cuda */

/* A worker's report to the parent. */
struct report {
    int nomem;                /* calls that failed with PAGED_E_NOMEM (and were made again) */
    int failed;               /* a step failed otherwise: why says how */
    char why[600];
    char nomem_msg[300];      /* the message the PAGED_E_NOMEM came with */
};

/* The steps of a worker's life, in order. */
enum step {
    S_CONNECT, S_ATTACH, S_ALLOC, S_ALLOC_COPY, S_APPEND, S_DECODE, S_PREFILL, S_FORK, S_UNFORK,
    S_COPY, S_PUBLISH, S_LOOKUP, S_FREE_FOUND, S_FREE, S_FREE_COPY, S_DETACH, S_COUNT
};

static const char *const step_names[S_COUNT] = {
    "connect", "attach", "ALLOC", "ALLOC (copy target)", "APPEND", "DECODE", "PREFILL", "FORK", "FREE (forked)",
    "COPY", "PUBLISH", "LOOKUP", "FREE (found)", "FREE", "FREE (copy target)", "detach",
};

/* One worker's state: its connection, pool, the data it wrote and a shadow of the pool. */
struct worker {
    int who;
    paged_client *c;
    paged_pool *p;
    int32_t ids[3], copy_id, found[2], tokens[TOK], slots[TOK], lens[1], indptr[2];
    float k[L * TOK * H * D], v[L * TOK * H * D];
    float q[L][QO * QH * D], out[QO * QH * D], ref[QO * QH * D];
    /* What the pool's blocks should hold, written where APPEND writes, for the reference. */
    float shadow[L * 2 * N * H * B * D];
    pk_cache cache;
    /* On the cuda backend the tensors the requests name live on the device (device copies of
     * k, v, q, and the output); on the cpu backend these are the host arrays. */
    void *dk, *dv, *dq, *dout;
    char errbuf[256];
    char why[200];            /* a step's own finding (an output that differs) */
};

/* Returns whether n outputs lie within the tolerance of the reference. */
static int matches(const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double) got[i] - (double) want[i]) <= TOL + TOL * fabs((double) want[i])))
            return 0;
    return 1;
}

/* Gives the worker its request tensors: device copies on cuda, the host arrays on cpu.
 * Returns 0 or -1. */
static int tensors(struct worker *w)
{
    if (!use_cuda) {
        w->dk = w->k;
        w->dv = w->v;
        w->dq = w->q;
        w->dout = w->out;
        return 0;
    }
#ifdef HAVE_CUDA
    if (cudaMalloc(&w->dk, sizeof w->k) != cudaSuccess || cudaMalloc(&w->dv, sizeof w->v) != cudaSuccess
        || cudaMalloc(&w->dq, sizeof w->q) != cudaSuccess || cudaMalloc(&w->dout, sizeof w->out) != cudaSuccess)
        return -1;
    return aio_put(1, w->dk, 0, w->k, sizeof w->k) | aio_put(1, w->dv, 0, w->v, sizeof w->v)
           | aio_put(1, w->dq, 0, w->q, sizeof w->q);
#else
    return -1;
#endif
}

/* Writes what an APPEND of the worker's keys and values wrote into the shadow; returns nothing. */
static void shadow_append(struct worker *w)
{
    float *sh = w->shadow;
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t t = 0; t < TOK; t++)
            for (uint32_t h = 0; h < H; h++) {
                int32_t b = w->slots[t] / (int32_t) B, o = w->slots[t] % (int32_t) B;
                size_t src = (((size_t) l * TOK + t) * H + h) * D;
                memcpy(sh + pk_cache_index(&w->cache, (int32_t) l, 0, b, (int32_t) h, o), w->k + src, D * sizeof *sh);
                memcpy(sh + pk_cache_index(&w->cache, (int32_t) l, 1, b, (int32_t) h, o), w->v + src, D * sizeof *sh);
            }
}

/* Copies block src's keys and values over block dst's in the shadow, as COPY does. */
static void shadow_copy(struct worker *w, int32_t src, int32_t dst)
{
    for (uint32_t l = 0; l < L; l++)
        for (int kv = 0; kv < 2; kv++)
            for (uint32_t h = 0; h < H; h++)
                memcpy(w->shadow + pk_cache_index(&w->cache, (int32_t) l, kv, dst, (int32_t) h, 0),
                       w->shadow + pk_cache_index(&w->cache, (int32_t) l, kv, src, (int32_t) h, 0),
                       (size_t) B * D * sizeof(float));
}

/*
 * DECODE (qo 0) or PREFILL of qo query tokens, one sequence of len tokens over nb blocks of
 * table, in every layer, each output checked against the reference over the shadow. Returns
 * the status, PAGED_E_INVAL with w->why where an output differs.
 */
static int attend(struct worker *w, const int32_t *table, int32_t nb, int32_t len, uint32_t qo)
{
    const int32_t lens[1] = { len }, indptr[2] = { 0, (int32_t) qo };
    const size_t n = (qo != 0 ? qo : 1u) * QH * D;
    const pk_attn_opts opts = { .sm_scale = 1.0f / sqrtf((float) D) };
    for (uint32_t l = 0; l < L; l++) {
        paged_attn_args a = { .num_seqs = 1, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32,
                              .q = (const float *) w->dq + (size_t) l * QO * QH * D, .out = w->dout,
                              .block_tables = table, .bt_stride = (uint32_t) nb, .seq_lens = lens,
                              .qo_indptr = qo != 0 ? indptr : NULL };
        int rc = qo != 0 ? paged_prefill(w->p, (int32_t) l, &a) : paged_decode(w->p, (int32_t) l, &a);
        if (rc != PAGED_OK)
            return rc;
        int rrc;
        if (qo != 0) {
            pk_prefill_args ra = { .cache = w->cache, .layer = (int32_t) l, .num_seqs = 1, .num_q_heads = QH,
                                   .q_dtype = PAGED_DTYPE_F32, .causal = 1, .total_q = (int32_t) qo,
                                   .max_qo_len = (int32_t) qo, .q = w->q[l], .out = w->ref, .qo_indptr = indptr,
                                   .block_tables = table, .bt_stride = nb, .seq_lens = lens, .opts = opts };
            rrc = pk_ref_prefill(&ra);
        } else {
            pk_decode_args ra = { .cache = w->cache, .layer = (int32_t) l, .num_seqs = 1, .num_q_heads = QH,
                                  .q_dtype = PAGED_DTYPE_F32, .q = w->q[l], .out = w->ref, .block_tables = table,
                                  .bt_stride = nb, .seq_lens = lens, .opts = opts };
            rrc = pk_ref_decode(&ra);
        }
        if (rrc != 0 || aio_get(use_cuda, w->dout, 0, w->out, n * sizeof(float)) != 0 || !matches(w->out, w->ref, n)) {
            snprintf(w->why, sizeof w->why, "layer %u's output differs from the reference", l);
            return PAGED_E_INVAL;
        }
    }
    return PAGED_OK;
}

/* Runs step s once; returns PAGED_OK, a paged_error, or PAGED_E_INVAL with w->why set when the
 * call succeeded but what it gave back is wrong. */
static int run_step(struct worker *w, enum step s, const char *socket)
{
    int rc;
    switch (s) {
    case S_CONNECT: {
        paged_connect_opts o = { .socket_path = socket, .name = "allocfail-t", .spin_us = -1 };
        return paged_client_connect_err(&o, &w->c, w->errbuf, sizeof w->errbuf);
    }
    case S_ATTACH:
        return paged_pool_attach(w->c, pool_name, &w->p);
    case S_ALLOC:
        return paged_alloc(w->p, 3, w->ids);
    case S_ALLOC_COPY:
        return paged_alloc(w->p, 1, &w->copy_id);
    case S_APPEND:
        for (uint32_t t = 0; t < TOK; t++)
            w->slots[t] = w->ids[t / B] * (int32_t) B + (int32_t) (t % B);
        rc = paged_append(w->p, PAGED_ALL_LAYERS, TOK, PAGED_DTYPE_F32, w->dk, w->dv, w->slots);
        if (rc == PAGED_OK)
            shadow_append(w);
        return rc;
    case S_DECODE:
        return attend(w, w->ids, 3, (int32_t) TOK, 0);
    case S_PREFILL:
        return attend(w, w->ids, 3, (int32_t) TOK, QO);
    case S_FORK:
        return paged_fork(w->p, 3, w->ids);
    case S_UNFORK:
        return paged_free(w->p, 3, w->ids);
    case S_COPY:
        /* Checked by a DECODE over the copy alone, against the reference over the shadow's copy. */
        rc = paged_copy(w->p, 1, &w->ids[0], &w->copy_id);
        if (rc == PAGED_OK) {
            shadow_copy(w, w->ids[0], w->copy_id);
            rc = attend(w, &w->copy_id, 1, (int32_t) B, 0);
        }
        return rc;
    case S_PUBLISH:
        rc = paged_publish(w->p, NULL, (uint64_t) w->who + 1, 2, w->tokens, w->ids);
        return rc < 0 ? rc : PAGED_OK;
    case S_LOOKUP:
        rc = paged_lookup(w->p, NULL, (uint64_t) w->who + 1, 2, w->tokens, w->found);
        if (rc >= 0 && (rc != 2 || w->found[0] != w->ids[0] || w->found[1] != w->ids[1])) {
            snprintf(w->why, sizeof w->why, "LOOKUP found %d blocks (%d, %d) where it published %d and %d", rc,
                     w->found[0], w->found[1], w->ids[0], w->ids[1]);
            return PAGED_E_INVAL;
        }
        return rc < 0 ? rc : PAGED_OK;
    case S_FREE_FOUND:
        return paged_free(w->p, 2, w->found);
    case S_FREE:
        return paged_free(w->p, 3, w->ids);
    case S_FREE_COPY:
        return paged_free(w->p, 1, &w->copy_id);
    case S_DETACH:
        rc = paged_pool_detach(w->p);
        if (rc == PAGED_OK)
            w->p = NULL;
        return rc;
    case S_COUNT:
        break;
    }
    return PAGED_E_INVAL;
}

/* Returns whether a request's message names its op and nothing else: "<op>: out of memory",
 * no field of the request being at fault. */
static int blames_nothing(const char *m)
{
    size_t op = strspn(m, "abcdefghijklmnopqrstuvwxyz");
    return op > 0 && strcmp(m + op, ": out of memory") == 0;
}

/* Returns the message that came with a failed step: the connect's, or the client's. */
static const char *step_message(const struct worker *w, enum step s)
{
    if (s == S_CONNECT)
        return w->errbuf;
    const char *m = w->c != NULL ? paged_client_error(w->c) : NULL;
    return m != NULL ? m : "";
}

/* A worker's life (see the top of this file); fills *r. */
static void worker_run(int who, const char *socket, struct report *r)
{
    static struct worker w;
    memset(&w, 0, sizeof w);
    w.who = who;
    w.cache = (pk_cache) { .base = w.shadow, .num_layers = L, .num_blocks = N, .num_kv_heads = H, .head_dim = D,
                           .block_size = B, .dtype = PAGED_DTYPE_F32, .k_scale = 1.0f, .v_scale = 1.0f };
    tap_rng rng;
    tap_rng_seed(&rng, seed + 1 + (uint64_t) who);
    tap_rng_fill_uniform(&rng, w.k, L * TOK * H * D, -1.0, 1.0);
    tap_rng_fill_uniform(&rng, w.v, L * TOK * H * D, -1.0, 1.0);
    for (uint32_t l = 0; l < L; l++)
        tap_rng_fill_uniform(&rng, w.q[l], QO * QH * D, -1.0, 1.0);
    for (uint32_t t = 0; t < TOK; t++)
        w.tokens[t] = (int32_t) tap_rng_below(&rng, 50000);
    if (tensors(&w) != 0) {
        r->failed = 1;
        snprintf(r->why, sizeof r->why, "the worker's device tensors could not be made");
        return;
    }
    for (int s = 0; s < S_COUNT && !r->failed; s++) {
        w.why[0] = '\0';
        int rc = run_step(&w, (enum step) s, socket);
        if (rc == PAGED_E_NOMEM && r->nomem == 0) {
            const char *m = step_message(&w, (enum step) s);
            r->nomem++;
            snprintf(r->nomem_msg, sizeof r->nomem_msg, "%s: %s", step_names[s], m);
            if (m[0] == '\0') {
                r->failed = 1;
                snprintf(r->why, sizeof r->why, "%s failed with PAGED_E_NOMEM and no message", step_names[s]);
                break;
            }
            if (s >= S_ALLOC && s != S_DETACH && !blames_nothing(m)) {
                r->failed = 1;
                snprintf(r->why, sizeof r->why, "%s: out of memory blamed on a request field (%s)", step_names[s], m);
                break;
            }
            rc = run_step(&w, (enum step) s, socket);
        }
        if (rc != PAGED_OK) {
            r->failed = 1;
            snprintf(r->why, sizeof r->why, "%s: %s (%s)", step_names[s], paged_strerror(rc),
                     w.why[0] != '\0' ? w.why : step_message(&w, (enum step) s));
            break;
        }
    }
    if (w.p != NULL)
        paged_pool_detach(w.p);
    paged_client_close(w.c);
}

/* Forks the workers; each writes its report to its pipe. Stores their pids and the read
 * ends in pids and fds; returns nothing. */
static void spawn_workers(pid_t *pids, int *fds)
{
    for (int i = 0; i < WORKERS; i++) {
        int p[2];
        if (pipe(p) != 0)
            sysbail("pipe");
        pids[i] = bfork();
        if (pids[i] == 0) {
            close(p[0]);
            alarm(60);        /* a worker stuck in the daemon ends, and its report is missing */
            struct report r;
            memset(&r, 0, sizeof r);
            worker_run(i, daemon_.socket, &r);
            _exit(write(p[1], &r, sizeof r) == (ssize_t) sizeof r ? 0 : 1);
        }
        close(p[1]);
        fds[i] = p[0];
    }
}

/* Reads a worker's report (blocking: the worker ends within its alarm) and reaps it; returns
 * 1 when the report came and the worker exited 0. */
static int collect(pid_t pid, int fd, struct report *r)
{
    ssize_t got = read(fd, r, sizeof *r);
    close(fd);
    int st = 0;
    waitpid(pid, &st, 0);
    return got == (ssize_t) sizeof *r && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Whether a pool item shows every block back: none referenced. */
static int all_back(const struct pcore_pool_item *it, uint32_t want)
{
    (void) want;
    return it->referenced == 0 && it->attached == 1;
}

/* What one run found. */
struct outcome {
    int good;                 /* everything held */
    char what[2000];
    struct td_allocfail log;  /* what the daemon logged of the planted failure */
};

/* Starts pagedd with allocation n failing (0: none), makes the pool, runs the workers and
 * checks everything; fills *o. */
static void one_run(unsigned long long n, struct outcome *o)
{
    memset(o, 0, sizeof *o);
    char v[64];
    snprintf(v, sizeof v, "PAGEDD_FAIL_ALLOC_AT=%llu", n != 0 ? n : 1000000000ull);
    const char *extra[] = { "--threads", "2", NULL };
    const char *env[] = { v, NULL };
    int st = 0;
    if (pagedd_start(&daemon_, extra, env, &st) != 0) {
        if (use_cuda && n == 0)
            skip_all("pagedd --backend cuda does not start here (no CUDA device?)");
        bail("pagedd did not start (status %d)", st);
    }
    struct rc_client ctl;
    char pool_note[300] = "";
    int rc = rc_connect(daemon_.socket, "allocfail-ctl", PCORE_HELLO_CONTROL, &ctl);
    if (rc == PAGED_E_NOMEM) {
        snprintf(pool_note, sizeof pool_note, "control connect: %s; ", ctl.errmsg);
        rc = ctl.errmsg[0] != '\0' ? rc_connect(daemon_.socket, "allocfail-ctl", PCORE_HELLO_CONTROL, &ctl) : rc;
    }
    if (rc == 0) {
        for (int attempt = 0; attempt < 2; attempt++) {
            rc = rc_pool_create(&ctl, pool_name, L, H, D, B, PAGED_DTYPE_F32, N, 0600, 0, NULL, NULL);
            if (rc != PAGED_E_NOMEM || ctl.errmsg[0] == '\0')
                break;
            snprintf(pool_note, sizeof pool_note, "pool create: %s; ", ctl.errmsg);
        }
    }
    if (rc != 0) {
        snprintf(o->what, sizeof o->what, "the control connection or the pool failed: %s (%s)", paged_strerror(rc),
                 ctl.errmsg);
        pagedd_stop(&daemon_);
        td_read_allocfail(&daemon_, &o->log);
        pagedd_cleanup(&daemon_);
        return;
    }
    pid_t pids[WORKERS];
    int fds[WORKERS];
    spawn_workers(pids, fds);
    struct report r[WORKERS];
    int reported = 1, failed = 0;
    char notes[1400] = "";
    for (int i = 0; i < WORKERS; i++) {
        memset(&r[i], 0, sizeof r[i]);
        reported &= collect(pids[i], fds[i], &r[i]);
        failed |= r[i].failed;
    }
    for (int i = 0; i < WORKERS; i++) {
        size_t at = strlen(notes);
        if (r[i].failed)
            snprintf(notes + at, sizeof notes - at, "worker %d failed at %s; ", i, r[i].why);
        else if (r[i].nomem)
            snprintf(notes + at, sizeof notes - at, "worker %d: %s; ", i, r[i].nomem_msg);
    }
    struct pcore_pool_item it;
    memset(&it, 0, sizeof it);
    int back = rc_pool_item_until(&ctl, pool_name, all_back, 0, 5000, &it) == 0 && it.free + it.cached == N;
    struct pcore_msg_stats_reply stats;
    int alive = rc_stats(&ctl, &stats) == 0;
    rc_close(&ctl);
    st = pagedd_stop(&daemon_);
    int exited = st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    td_read_allocfail(&daemon_, &o->log);
    if (n == 0)
        td_check_late_done(&daemon_, 1);   /* allocfail-late-t.sh */
    pagedd_cleanup(&daemon_);
    o->good = reported && !failed && back && alive && exited;
    snprintf(o->what, sizeof o->what, "%s%s%s%s%s%s", pool_note, notes, reported ? "" : "a worker did not report; ",
             back ? "" : "blocks not all back; ", alive ? "" : "the daemon did not answer; ",
             exited ? "" : "pagedd did not exit 0");
}

/* Counts the allocations of a run, then sweeps them; returns 0. */
int main(void)
{
    if (getenv("PAGED_DAEMON_WRAPPER") != NULL)
        skip_all("a sweep of hundreds of daemon runs is too slow under $PAGED_DAEMON_WRAPPER");
    const char *backend = getenv("PAGED_TEST_BACKEND");
    use_cuda = backend != NULL && strcmp(backend, "cuda") == 0;
#ifndef HAVE_CUDA
    if (use_cuda)
        skip_all("PAGED_TEST_BACKEND=cuda, but this build has no CUDA for the workers' tensors");
#endif
    plan_lazy();
    seed = tap_seed();
    struct outcome o;
    one_run(0, &o);
    ok(o.good && !o.log.fired && o.log.counted > 0,
       "with no failure planted every step succeeds (%llu allocations; %s)", o.log.counted, o.what);
    const unsigned long long counted = o.log.counted;
    unsigned long long n = 1, fired = 0, bad = 0;
    for (; n <= SWEEP_MAX; n++) {
        one_run(n, &o);
        if (!o.log.fired && n > counted)
            break;
        fired += o.log.fired;
        if (!o.good) {
            bad++;
            diag("allocation %llu went wrong: %s [log: %s]", n, o.what, o.log.logged);
        } else if (o.log.fired) {
            diag("allocation %llu (%s): %s", n, o.log.site, o.what[0] != '\0' ? o.what : "no call failed");
        }
    }
    ok(bad == 0, "each of allocations 1 to %llu failing in turn (%llu fired) cost at most one call, PAGED_E_NOMEM "
       "with a message, made again with success; outputs matched, every block came back, pagedd exited 0 (%llu runs "
       "went wrong)", n - 1, fired, bad);
    ok(n <= SWEEP_MAX, "the sweep ended: allocation %llu was never made", n);
    return 0;
}
