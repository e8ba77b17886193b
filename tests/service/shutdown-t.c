/* shutdown-t.c: SIGTERM while client processes have DECODEs queued and running: each completes once, pagedd exits 0. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paged.h"
#include "kernels/kernels.h"
#include "lib/core/proto.h"
#include "tests/service/arena-io.h"
#include "tests/service/childrec.h"
#include "tests/service/rawclient.h"
#include "tests/service/proc.h"
#include "tests/tap/basic.h"

/*
 * NCLI client processes (libpaged) decode over contexts of their own, keeping INFLIGHT
 * DECODEs in flight and reaping as they go. Once every client has seen RUNNING completions,
 * the parent freezes the daemon (SIGSTOP, wherever it is: a batch may be on the GPU), lets
 * every client queue INFLIGHT more, and sends SIGTERM and SIGCONT together, so that the
 * daemon meets the signal with work queued in every ring and, on the cuda backend, batches
 * on the device whose completions it still withholds. Each client then reaps until its wait
 * says the daemon shut down, and reports: every request it submitted completed exactly once,
 * as PAGED_OK or PAGED_E_SHUTDOWN, and the outputs of those that completed OK are finite. The
 * daemon must exit 0, promptly, without a corrupt ring or a device error in its log. Which
 * requests complete OK depends on where the daemon was frozen: on an H100 it ran every queued
 * one before it read the signal (five runs); shutdown-late-t.sh, on the cpu backend with
 * completions due 2 ms late, meets the signal with withheld completions and queued requests.
 */

#define L 2
#define H 2                 /* KV heads */
#define QH 8
#define D 64
#define B 16
#define N 256
#define NCLI 4
#define NSEQ 4
#define MAXBLK 16           /* blocks per sequence */
#define CTX 240             /* tokens in every sequence */
#define INFLIGHT 8          /* DECODEs a client keeps in flight */
#define RUNNING 24          /* completions each client sees before the parent acts */
#define MAXREQ 4096         /* a client's requests at most (bounds every loop) */
#define WAIT_MS 60000

/* What a child tells the parent besides its checks. */
enum rec_kind { REC_RUNNING = CR_FIRST_KIND, REC_QUEUED, REC_DONE };

static struct pagedd daemon_;
static uint64_t seed;
static int use_cuda;
static int child_who;

/* A client: its connection, its sequences' tables and lengths in the host arena, and the
 * fate of each request it submitted (by tag). */
struct client {
    struct aio_client a;
    int32_t ids[NSEQ * MAXBLK];
    uint64_t bt_off, lens_off, q_off;
    uint64_t out_off[INFLIGHT * 2];   /* an output per request slot in flight */
    int32_t status[MAXREQ];           /* 1: not yet completed */
    unsigned submitted, completed, ok, shutdown, twice, nonfinite;
    tap_rng rng;
};

/* Prepares and submits one DECODE (tag = its number) whose output goes to slot tag %
 * (2 * INFLIGHT); returns paged_submit's result, or the paged_prep error. */
static int submit_one(struct client *cl)
{
    const unsigned tag = cl->submitted;
    paged_request r = {
        .op = PAGED_OP_DECODE, .pool = cl->a.pool, .layer = (int32_t) (tag % L), .tag = tag,
        .u.attn = { .num_seqs = NSEQ, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32, .q_off = cl->q_off,
                    .out_off = cl->out_off[tag % (2 * INFLIGHT)], .block_tables_off = cl->bt_off,
                    .bt_stride = MAXBLK, .seq_lens_off = cl->lens_off },
    };
    int rc = paged_prep(cl->a.c, &r);
    if (rc != PAGED_OK)
        return rc;
    rc = paged_submit(cl->a.c);
    if (rc == 1) {
        cl->status[tag] = 1;
        cl->submitted++;
    }
    return rc;
}

/* Returns whether the output in slot of cl holds only finite numbers (or cannot be read: 0). */
static int output_finite(struct client *cl, int slot)
{
    static float out[NSEQ * QH * D];
    if (aio_get(use_cuda, cl->a.data, cl->out_off[slot], out, sizeof out) < 0)
        return 0;
    for (size_t i = 0; i < NSEQ * QH * D; i++)
        if (!(out[i] == out[i]) || out[i] > 1e30f || out[i] < -1e30f)
            return 0;
    return 1;
}

/* Reaps what is ready (waiting up to wait_ms for the first); returns how many, or the wait's
 * error. Counts each completion, a second completion of one tag, and an OK one whose output
 * (read at once: its slot is not reused before it completed) is not finite. */
static int reap(struct client *cl, int wait_ms)
{
    paged_completion got[INFLIGHT * 2];
    int n = paged_wait(cl->a.c, got, INFLIGHT * 2, wait_ms);
    for (int i = 0; i < n; i++) {
        uint64_t t = got[i].tag;
        if (t >= cl->submitted || cl->status[t] != 1) {
            cl->twice++;
            continue;
        }
        cl->status[t] = got[i].status;
        cl->completed++;
        cl->ok += got[i].status == PAGED_OK;
        cl->shutdown += got[i].status == PAGED_E_SHUTDOWN;
        if (got[i].status == PAGED_OK && !output_finite(cl, (int) (t % (2 * INFLIGHT))))
            cl->nonfinite++;
    }
    return n;
}

/* Connects, fills the contexts, lays out the tables, lengths, queries and outputs; exits on
 * failure. Returns nothing. */
static void setup(struct client *cl)
{
    char name[32], why[256];
    snprintf(name, sizeof name, "shutdown-client-%d", child_who);
    cl->a = (struct aio_client) { .cuda = use_cuda, .ids = cl->ids, .nseq = NSEQ, .maxblk = MAXBLK };
    if (aio_open(&cl->a, daemon_.socket, name, "shutdown", 4u << 20, 16u << 20, why, sizeof why) < 0)
        cr_fatal("client %d: %s", child_who, why);
    pk_cache ref = { .num_layers = L, .num_blocks = N, .num_kv_heads = H, .head_dim = D, .block_size = B,
                     .dtype = PAGED_DTYPE_F32, .k_scale = 1.0f, .v_scale = 1.0f };
    if (aio_fill_contexts(&cl->a, &ref, CTX, &cl->rng, 1u << 30, why, sizeof why) < 0)
        cr_fatal("client %d: %s", child_who, why);
    free(ref.base);
    int32_t lens[NSEQ];
    for (int s = 0; s < NSEQ; s++)
        lens[s] = CTX;
    if (paged_arena_alloc(cl->a.c, PAGED_ARENA_HOST, sizeof cl->ids, 64, &cl->bt_off) != PAGED_OK
        || paged_arena_alloc(cl->a.c, PAGED_ARENA_HOST, sizeof lens, 64, &cl->lens_off) != PAGED_OK)
        cr_fatal("client %d: host arena: %s", child_who, paged_client_error(cl->a.c));
    memcpy(cl->a.host + cl->bt_off, cl->ids, sizeof cl->ids);
    memcpy(cl->a.host + cl->lens_off, lens, sizeof lens);
    static float q[NSEQ * QH * D];
    tap_rng_fill_uniform(&cl->rng, q, NSEQ * QH * D, -1.0, 1.0);
    const size_t out_bytes = sizeof q;
    if (paged_arena_alloc(cl->a.c, PAGED_ARENA_DATA, sizeof q, 256, &cl->q_off) != PAGED_OK
        || aio_put(use_cuda, cl->a.data, cl->q_off, q, sizeof q) < 0)
        cr_fatal("client %d: the queries: %s", child_who, paged_client_error(cl->a.c));
    for (int i = 0; i < INFLIGHT * 2; i++)
        if (paged_arena_alloc(cl->a.c, PAGED_ARENA_DATA, out_bytes, 256, &cl->out_off[i]) != PAGED_OK)
            cr_fatal("client %d: an output: %s", child_who, paged_client_error(cl->a.c));
}

/* A client process: decodes with INFLIGHT in flight until the parent's go, queues INFLIGHT
 * more, then reaps until the daemon is gone; reports and exits. */
static void client_main(int who, int cmd_fd)
{
    child_who = who;
    static struct client cl;
    memset(&cl, 0, sizeof cl);
    tap_rng_seed(&cl.rng, seed * 1000003u + (uint64_t) who * 7919u);
    setup(&cl);

    /* Running: keep INFLIGHT in flight; an output slot is reused only after its request,
     * 2 * INFLIGHT back, completed. Bounded by MAXREQ / 2 requests. */
    int told = 0;
    while (cl.submitted < MAXREQ / 2) {
        while (cl.submitted - cl.completed < INFLIGHT && cl.submitted < MAXREQ / 2)
            if (submit_one(&cl) != 1)
                cr_fatal("client %d: a submit failed while running: %s", child_who, paged_client_error(cl.a.c));
        if (reap(&cl, WAIT_MS) <= 0)
            cr_fatal("client %d: a wait failed while running", child_who);
        if (!told && cl.completed >= RUNNING) {
            cr_send(REC_RUNNING, 1, 0, NULL);
            told = 1;
            break;
        }
    }
    if (!told)
        cr_fatal("client %d: %u requests, never %d completions", child_who, cl.submitted, RUNNING);
    cr_await_go(cmd_fd);

    /* The daemon is frozen: queue INFLIGHT more behind what is in flight. */
    for (int i = 0; i < INFLIGHT && cl.submitted - cl.completed < 2 * INFLIGHT; i++)
        if (submit_one(&cl) != 1)
            cr_fatal("client %d: a submit to the frozen daemon failed: %s", child_who, paged_client_error(cl.a.c));
    const unsigned queued = cl.submitted - cl.completed;
    cr_send(REC_QUEUED, 1, 0, NULL);

    /* Reap until the daemon says it is gone; every wait is bounded, and so is the loop. */
    int rc = 0;
    for (unsigned i = 0; i < MAXREQ && rc >= 0; i++)
        rc = reap(&cl, WAIT_MS);
    cr_check(rc == PAGED_E_SHUTDOWN, "client %d: after SIGTERM its wait ends with PAGED_E_SHUTDOWN (%s)", child_who,
             paged_strerror(rc));
    cr_check(cl.completed == cl.submitted && cl.twice == 0,
             "client %d: each of its %u requests completed exactly once (%u completions, %u repeated; %u were "
             "in flight or queued at SIGTERM)", child_who, cl.submitted, cl.completed, cl.twice, queued);
    cr_check(cl.ok + cl.shutdown == cl.completed && cl.ok >= RUNNING,
             "client %d: every completion is PAGED_OK (%u) or PAGED_E_SHUTDOWN (%u)", child_who, cl.ok, cl.shutdown);
    cr_check(cl.nonfinite == 0, "client %d: the outputs of the %u DECODEs that completed OK are finite (%u not)",
             child_who, cl.ok, cl.nonfinite);
    cr_send(REC_DONE, 1, 0, NULL);
    paged_client_close(cl.a.c);
    _exit(0);
}

/* Starts the daemon and the clients, freezes, signals and checks the daemon's exit; returns 0. */
int main(void)
{
    seed = tap_seed();
    /* This daemon is stopped and continued by job control (SIGSTOP, SIGCONT). In a sanitizer
     * build, LeakSanitizer's check at its exit ptrace-stops every thread, and after that job
     * control the kernel may never report the stop: the check then waits forever (about one run
     * in thirty under load, its tracer in ThreadSuspender::SuspendThread). So this daemon skips
     * that check; every other test's daemon keeps it. */
    const char *asan = getenv("ASAN_OPTIONS");
    char options[512];
    snprintf(options, sizeof options, "%s%sdetect_leaks=0", asan != NULL ? asan : "", asan != NULL && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", options, 1);
    const char *extra[] = { "--threads", "2", NULL };
    use_cuda = aio_start(&daemon_, extra);
    plan_lazy();

    struct rc_client ctl;
    aio_pool_create(&ctl, &daemon_, "shutdown-t", "shutdown", L, H, D, B, PAGED_DTYPE_F32, N);
    rc_close(&ctl);

    struct cr_clients kids;
    cr_spawn(&kids, NCLI, client_main);
    int running = ok(cr_await(kids.rec_fd, REC_RUNNING, 0, NCLI, WAIT_MS),
                     "every client has %d DECODEs completed and %d in flight", RUNNING, INFLIGHT);
    int queued = 0;
    if (running) {
        /* Wherever it is: a pass may be half taken, a batch on the device. */
        if (td_freeze(&daemon_) != 0)
            sysbail("stopping the daemon");
        for (int w = 0; w < NCLI; w++)
            if (write(kids.cmd[w], "g", 1) != 1)
                sysbail("write");
        queued = cr_await(kids.rec_fd, REC_QUEUED, 0, NCLI, WAIT_MS);
        ok(queued, "every client queued %d more DECODEs while the daemon was stopped", INFLIGHT);
        kill(daemon_.pid, SIGTERM);
        kill(daemon_.pid, SIGCONT);
    }
    ok(running && queued && cr_await(kids.rec_fd, REC_DONE, 0, NCLI, WAIT_MS),
       "every client saw the shutdown and checked its requests");
    cr_reap(&kids);
    int st = pagedd_stop(&daemon_);
    ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exits 0 on SIGTERM with work queued and running");
    ok(!pagedd_log_contains(&daemon_, "corrupt"), "the daemon saw no corrupt ring");
    ok(!pagedd_log_contains(&daemon_, "[error]") && !pagedd_log_contains(&daemon_, "context is lost"),
       "the daemon logged no error (and no lost device context)");
    td_check_late_done(&daemon_, !use_cuda);
    pagedd_cleanup(&daemon_);
    return 0;
}
