/* cuda-stream-t.c: workers chaining their CUDA streams and pagedd's DECODEs through dependency words. */
/* SPDX-License-Identifier: MIT */
/* The workers' side of the chain is paged_stream_wait and paged_stream_signal. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "paged.h"
#include "kernels/kernels.h"
#include "lib/core/proto.h"
#include "tests/service/arena-io.h"
#include "tests/service/childrec.h"
#include "tests/service/rawclient.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"

/*
 * pagedd --backend cuda and CLIENTS worker processes, each running, in every way the calls
 * take (PAGED_STREAM_KERNEL, PAGED_STREAM_MEMOP, PAGED_STREAM_AUTO):
 *
 *   chain: ITERS DECODEs over the same sequences with fresh random queries each. On the
 *   worker's stream, for each i: copy query set i into the arena, paged_stream_signal W = i,
 *   paged_stream_wait X >= i, copy the output out; DECODE i (submitted after all of that was
 *   queued) waits for W >= i and signals X = i. Every output copied must match pk_ref_decode
 *   of its own queries: a wait that let the copy run early would take an older output (or the
 *   poison), a signal written early would let DECODE i read query set i - 1, and the query
 *   copy of i + 1 would overwrite set i under DECODE i if the wait for X let it by. The words
 *   start 8 short of 2^32, so the chain wraps. Both words end at the last value. The same
 *   again with the words in the host arena (PAGED_STREAM_HOST, PAGED_DEP_HOST).
 *
 *   hold and release: the stream waits for a word V that nobody writes, then copies a marker
 *   into the arena; after many queries the stream must still be busy and the marker not
 *   there; a paged_stream_signal of V on a second stream (as a worker whose daemon went away
 *   would release its own stream) lets it finish. A wait for a value V already passed does
 *   not hold the stream.
 *
 * and one worker checks the refusals: an unaligned offset, one beyond the data arena or the
 * host arena, and flags that name both ways or an unknown bit, each PAGED_E_INVAL with the
 * reason. The daemon must end with every block back and exit 0. Children report through
 * childrec.
 */

#define H 2
#define QH 8
#define D 64
#define B 16
#define N 96
#define NSEQ 2
#define MAXBLK 4
#define CTX 50
#define ITERS 12
#define CLIENTS 3
#define TOL 1e-4f
#define WAIT_MS 60000
#define HOLD_QUERIES 20000   /* queries of a held stream that must all find it busy */
#define START 0xfffffff8u    /* the words' value before the first step: the chain wraps */

enum rec_kind { REC_DONE = CR_FIRST_KIND };

static struct pagedd daemon_;
static uint64_t seed;

static const unsigned modes[3] = { PAGED_STREAM_KERNEL, PAGED_STREAM_MEMOP, PAGED_STREAM_AUTO };

/* Returns the name of a PAGED_STREAM_* way. */
static const char *mode_name(unsigned mode)
{
    return mode == PAGED_STREAM_KERNEL ? "kernel" : mode == PAGED_STREAM_MEMOP ? "memop" : "auto";
}

/* Queries st until its work is done, for at most ms; returns 1 when it finished without
 * error, 0 otherwise. */
static int stream_done_within(cudaStream_t st, int ms)
{
    int64_t deadline = tap_now_ns() + (int64_t) ms * 1000000;
    cudaError_t e;
    while ((e = cudaStreamQuery(st)) == cudaErrorNotReady)
        if (tap_now_ns() > deadline)
            return 0;
    return e == cudaSuccess;
}

/* Reads the 32-bit word at off of the data arena through st2 (never the legacy stream, which
 * would wait for nothing here but is kept out of the way of held streams); returns it, or
 * 0xdeadbeef when the copy failed. */
static uint32_t read_word(const struct aio_client *a, uint64_t off, cudaStream_t st2, uint32_t *pinned)
{
    *pinned = 0xdeadbeefu;
    if (cudaMemcpyAsync(pinned, a->data + off, 4, cudaMemcpyDeviceToHost, st2) != cudaSuccess
        || cudaStreamSynchronize(st2) != cudaSuccess)
        return 0xdeadbeefu;
    return *pinned;
}

/* Returns word off of the host arena of a (PAGED_STREAM_HOST words). */
static uint32_t host_word(const struct aio_client *a, uint64_t off)
{
    return __atomic_load_n((const uint32_t *) (a->host + off), __ATOMIC_ACQUIRE);
}

/* The chain of ITERS DECODEs in one way (see the top), its words in the data arena at
 * words_off or, with host, in the host arena at host_off (PAGED_STREAM_HOST, PAGED_DEP_HOST);
 * qs and outs are pinned, ITERS sets each. Returns nothing: reports its checks. */
static void chain(int who, struct aio_decoder *d, unsigned mode, int host, uint64_t words_off, uint64_t host_off,
                  cudaStream_t st, cudaStream_t st2, float *qs, float *outs, uint32_t *pinned, tap_rng *rng)
{
    struct aio_client *a = &d->a;
    const size_t nq = (size_t) NSEQ * QH * D;
    const uint64_t w_off = host ? host_off : words_off, x_off = w_off + 4;
    char how[32];
    snprintf(how, sizeof how, "%s%s", mode_name(mode), host ? ", host-arena words" : "");
    if (host)
        mode |= PAGED_STREAM_HOST;
    uint32_t start[2] = { START, START };
    if (host)
        memcpy(a->host + w_off, start, sizeof start);
    if ((!host && aio_put(1, a->data, w_off, start, sizeof start) < 0)
        || aio_poison(1, a->data, d->out_off, nq * 4) < 0)
        cr_fatal("client %d: setting the words", who);
    tap_rng_fill_uniform(rng, qs, nq * ITERS, -1.0, 1.0);
    for (size_t k = 0; k < nq * ITERS; k++)
        outs[k] = -7.0f;
    int queued = 1;
    for (uint32_t i = 1; i <= ITERS && queued; i++) {
        queued = cudaMemcpyAsync(a->data + d->q_off, qs + (i - 1) * nq, nq * 4, cudaMemcpyHostToDevice, st)
                         == cudaSuccess
                 && paged_stream_signal(a->c, st, w_off, START + i, mode) == PAGED_OK
                 && paged_stream_wait(a->c, st, x_off, START + i, mode) == PAGED_OK
                 && cudaMemcpyAsync(outs + (i - 1) * nq, a->data + d->out_off, nq * 4, cudaMemcpyDeviceToHost, st)
                        == cudaSuccess;
    }
    if (!cr_check(queued, "client %d, %s: the chain's copies, signals and waits are queued (%s)", who, how,
                  paged_client_error(a->c)))
        cr_fatal("client %d: cannot go on", who);
    for (uint32_t i = 1; i <= ITERS; i++) {
        paged_request r = d->req;
        r.tag = i;
        r.dep = (paged_dep) { .flags = PAGED_DEP_WAIT | PAGED_DEP_SIGNAL | (host ? PAGED_DEP_HOST : 0u),
                              .wait_value = START + i,
                              .signal_value = START + i, .wait_off = w_off, .signal_off = x_off };
        if (paged_prep(a->c, &r) != PAGED_OK)
            cr_fatal("client %d: preparing DECODE %u: %s", who, i, paged_client_error(a->c));
    }
    cr_check(paged_submit(a->c) == ITERS, "client %d, %s: %d DECODEs submitted", who, how, ITERS);
    cr_check(stream_done_within(st, WAIT_MS), "client %d, %s: the stream runs to its end", who, how);
    int done = 0, okc = 0;
    for (int k = 0; k < 1000 && done < ITERS; k++) {
        paged_completion c[ITERS];
        int n = paged_wait(a->c, c, (unsigned) (ITERS - done), WAIT_MS);
        if (n < 0)
            break;
        for (int j = 0; j < n; j++)
            okc += c[j].status == PAGED_OK;
        done += n;
    }
    cr_check(done == ITERS && okc == ITERS, "client %d, %s: every DECODE completes OK (%d of %d, %d OK)", who, how,
             done, ITERS, okc);
    const int32_t lens[NSEQ] = { CTX, CTX };
    int right = 0;
    for (int i = 0; i < ITERS; i++)
        right += aio_decoder_matches(d, QH, qs + (size_t) i * nq, outs + (size_t) i * nq, lens, TOL);
    cr_check(right == ITERS, "client %d, %s: every output copied after its wait matches the reference of its own "
             "queries (%d of %d)", who, how, right, ITERS);
    uint32_t w = host ? host_word(a, w_off) : read_word(a, w_off, st2, pinned);
    uint32_t x = host ? host_word(a, x_off) : read_word(a, x_off, st2, pinned);
    cr_check(w == START + ITERS && x == START + ITERS, "client %d, %s: both words end at %u, past the wrap (W %u, "
             "X %u)", who, how, START + ITERS, w, x);
}

/* A wait that nobody answers holds the stream until a signal from another stream; one for
 * a value already passed does not. Returns nothing: reports its checks. */
static void hold_release(int who, struct aio_decoder *d, unsigned mode, uint64_t v_off, uint64_t marker_off,
                         cudaStream_t st, cudaStream_t st2, uint32_t *pinned)
{
    struct aio_client *a = &d->a;
    const char *how = mode_name(mode);
    uint32_t zero[2] = { START, 0 };
    if (aio_put(1, a->data, v_off, zero, 4) < 0 || aio_put(1, a->data, marker_off, zero + 1, 4) < 0)
        cr_fatal("client %d: setting the word and the marker", who);
    pinned[1] = 0x600dcafeu;
    int queued = paged_stream_wait(a->c, st, v_off, START + 3, mode) == PAGED_OK
                 && cudaMemcpyAsync(a->data + marker_off, pinned + 1, 4, cudaMemcpyHostToDevice, st) == cudaSuccess;
    if (!cr_check(queued, "client %d, %s: a wait for a word nobody writes and a copy behind it are queued (%s)", who,
                  how, paged_client_error(a->c)))
        cr_fatal("client %d: cannot go on", who);
    int busy = 0;
    for (int k = 0; k < HOLD_QUERIES; k++)
        busy += cudaStreamQuery(st) == cudaErrorNotReady;
    uint32_t m = read_word(a, marker_off, st2, pinned);
    cr_check(busy == HOLD_QUERIES && m == 0, "client %d, %s: the stream stays held while the word is short (%d of %d "
             "queries found it busy; marker 0x%x)", who, how, busy, HOLD_QUERIES, m);
    cr_check(paged_stream_signal(a->c, st2, v_off, START + 3, mode) == PAGED_OK,
             "client %d, %s: a signal from a second stream is queued", who, how);
    cr_check(stream_done_within(st, WAIT_MS), "client %d, %s: it releases the held stream", who, how);
    m = read_word(a, marker_off, st2, pinned);
    cr_check(m == 0x600dcafeu, "client %d, %s: the copy behind the wait ran (marker 0x%x)", who, how, m);
    cr_check(paged_stream_wait(a->c, st, v_off, START + 1, mode) == PAGED_OK && stream_done_within(st, WAIT_MS),
             "client %d, %s: a wait for a value already passed does not hold the stream", who, how);
}

/* The refusals, each naming what was wrong. Returns nothing: reports its checks. */
static void refusals(int who, struct aio_client *a, cudaStream_t st)
{
    size_t size = 0;
    (void) paged_arena_base(a->c, PAGED_ARENA_DATA, &size);
    int rc = paged_stream_wait(a->c, st, 6, 1, PAGED_STREAM_AUTO);
    cr_check(rc == PAGED_E_INVAL && strstr(paged_client_error(a->c), "not 4-byte aligned") != NULL,
             "client %d: an unaligned offset is refused, saying so (%s)", who, paged_client_error(a->c));
    rc = paged_stream_signal(a->c, st, size, 1, PAGED_STREAM_KERNEL);
    cr_check(rc == PAGED_E_INVAL && strstr(paged_client_error(a->c), "beyond the data arena") != NULL,
             "client %d: an offset past the data arena is refused, saying so (%s)", who, paged_client_error(a->c));
    size_t hsize = 0;
    (void) paged_arena_base(a->c, PAGED_ARENA_HOST, &hsize);
    rc = paged_stream_signal(a->c, st, hsize, 1, PAGED_STREAM_HOST);
    cr_check(rc == PAGED_E_INVAL && strstr(paged_client_error(a->c), "beyond the host arena") != NULL,
             "client %d: a host-arena offset past its end is refused, saying so (%s)", who, paged_client_error(a->c));
    rc = paged_stream_wait(a->c, st, 0, 1, PAGED_STREAM_KERNEL | PAGED_STREAM_MEMOP);
    cr_check(rc == PAGED_E_INVAL && strstr(paged_client_error(a->c), "flags 0x3") != NULL,
             "client %d: flags naming both ways are refused (%s)", who, paged_client_error(a->c));
    rc = paged_stream_wait(a->c, st, 0, 1, 0x10);
    cr_check(rc == PAGED_E_INVAL && strstr(paged_client_error(a->c), "flags 0x10") != NULL,
             "client %d: an unknown flag is refused (%s)", who, paged_client_error(a->c));
    cr_check(stream_done_within(st, WAIT_MS), "client %d: nothing refused was queued", who);
}

/* A worker: fills its sequences, then runs the chain and the hold in every way. */
static void client_main(int who, int cmd_fd)
{
    (void) cmd_fd;
    char why[256];
    int32_t ids[NSEQ * MAXBLK];
    static float q0[NSEQ * QH * D];
    tap_rng rng;
    tap_rng_seed(&rng, seed + (uint64_t) who);
    struct aio_decoder d = {
        .a = { .cuda = 1, .ids = ids, .nseq = NSEQ, .maxblk = MAXBLK },
        .ref = { .num_layers = 1, .num_blocks = N, .num_kv_heads = H, .head_dim = D, .block_size = B,
                 .dtype = PAGED_DTYPE_F32, .k_scale = 1.0f, .v_scale = 1.0f },
    };
    char name[32];
    snprintf(name, sizeof name, "stream-%d", who);
    if (aio_decoder_open(&d, daemon_.socket, name, "stream", CTX, QH, &rng, q0, why, sizeof why) < 0)
        cr_fatal("client %d: %s", who, why);
    uint64_t words_off = 0, host_off = 0;
    if (paged_arena_alloc(d.a.c, PAGED_ARENA_DATA, 64, 64, &words_off) != PAGED_OK
        || paged_arena_alloc(d.a.c, PAGED_ARENA_HOST, 64, 64, &host_off) != PAGED_OK)
        cr_fatal("client %d: carving the words: %s", who, paged_client_error(d.a.c));
    cudaStream_t st, st2;
    float *qs = NULL, *outs = NULL;
    uint32_t *pinned = NULL;
    const size_t nq = (size_t) NSEQ * QH * D;
    if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess
        || cudaStreamCreateWithFlags(&st2, cudaStreamNonBlocking) != cudaSuccess
        || cudaMallocHost((void **) &qs, nq * ITERS * 4) != cudaSuccess
        || cudaMallocHost((void **) &outs, nq * ITERS * 4) != cudaSuccess
        || cudaMallocHost((void **) &pinned, 16) != cudaSuccess)
        cr_fatal("client %d: streams and pinned memory", who);
    if (who == 0)
        refusals(who, &d.a, st);
    for (int m = 0; m < 3; m++) {
        chain(who, &d, modes[m], 0, words_off, host_off, st, st2, qs, outs, pinned, &rng);
        chain(who, &d, modes[m], 1, words_off, host_off, st, st2, qs, outs, pinned, &rng);
        hold_release(who, &d, modes[m], words_off + 16, words_off + 20, st, st2, pinned);
    }
    free(d.ref.base);
    cr_send(REC_DONE, 1, 0, NULL);
    paged_client_close(d.a.c);
    _exit(0);
}

/* Starts the daemon and the workers, then checks the pool and the exit; returns 0. */
int main(void)
{
    seed = aio_device_test_begin();
    const char *extra[] = { "--backend=cuda", NULL };
    int st = 0;
    if (pagedd_start(&daemon_, extra, NULL, &st) != 0)
        bail("pagedd --backend cuda did not start (status %d)", st);
    struct rc_client ctl;
    aio_pool_create(&ctl, &daemon_, "cuda-stream-t", "stream", 1, H, D, B, PAGED_DTYPE_F32, N);
    struct cr_clients kids;
    cr_spawn(&kids, CLIENTS, client_main);
    ok(cr_await(kids.rec_fd, REC_DONE, 0, CLIENTS, WAIT_MS), "every worker ran its chains and holds");
    cr_reap(&kids);
    struct pcore_pool_item it;
    memset(&it, 0, sizeof it);
    ok(rc_pool_item_until(&ctl, "stream", rc_pool_free_is, N, 5000, &it) == 0,
       "the pool has all %d blocks free once the workers are gone (%u)", N, it.free);
    rc_close(&ctl);
    st = pagedd_stop(&daemon_);
    ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exits 0 on SIGTERM");
    pagedd_cleanup(&daemon_);
    return 0;
}
