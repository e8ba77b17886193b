/* restart-t.c: clients of a daemon that is killed or stopped get an error, not a hang, and reconnect to the next. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "paged.h"
#include "tests/hard/hard.h"
#include "tests/service/proc.h"

/* The pools the clients make: 1 layer, 2 KV heads, head_dim 64, blocks of 16, f32. */
#define H 2
#define QH 4
#define D 64
#define B 16
#define N 16
#define CTX 21            /* tokens of the checked sequence: two blocks, the last partial */
#define ROUNDS 2          /* round 0 ends with SIGKILL, round 1 with SIGTERM */
#define WAIT_MS 20000     /* the most a blocked call may take to return once the daemon is gone */

/* What a client is doing when the daemon goes. */
enum mode {
    MODE_IDLE,            /* nothing: its next call meets the dead daemon */
    MODE_WAIT,            /* paged_wait(-1) on a request the stopped daemon never served */
    MODE_SYNC,            /* a synchronous paged_nop the stopped daemon never answers */
    MODE_CTL,             /* a control call (paged_pool_attach) the stopped daemon never answers */
    MODE_COUNT
};
static const char *const mode_names[MODE_COUNT] = { "idle", "in paged_wait", "in paged_nop",
                                                    "in paged_pool_attach" };

static struct pagedd daemon_;
static uint64_t seed;

/* A client's report. */
struct report {
    int setup_rc;         /* connect, create, first checked decode */
    int blocked_rc;       /* the call in progress when the daemon went (MODE_IDLE: 0) */
    int blocked_ok_calls; /* calls that the daemon still answered before it went */
    int next_rc;          /* the first call made after the daemon was gone */
    int again_rc;         /* and one more after that */
    int absent_rc;        /* a connect while no daemon listens */
    int reconnect_rc;     /* connect to the new daemon and a checked decode there */
    long blocked_ms;      /* how long the blocked call took to return after the kill */
};

/* Returns whether rc says the daemon is gone (disconnected or shut down). */
static int gone(int rc)
{
    return rc == PAGED_E_DISCONNECTED || rc == PAGED_E_SHUTDOWN;
}

/*
 * Connects to the daemon, creates pool name, writes CTX tokens of random K and V and checks
 * one DECODE against the reference on a private copy. Returns PAGED_OK with *out and *pool
 * kept open, or the first error (1 for a wrong output).
 */
static int checked_session(const char *name, tap_rng *rng, paged_client **out, paged_pool **pool)
{
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = name, .host_arena_size = 1 << 20 };
    paged_client *c = NULL;
    paged_pool *p = NULL;
    *out = NULL;
    *pool = NULL;
    int rc = paged_client_connect(&o, &c);
    if (rc != PAGED_OK)
        return rc;
    paged_pool_desc d = { .name = name, .num_layers = 1, .num_kv_heads = H, .head_dim = D,
                          .block_size = B, .dtype = PAGED_DTYPE_F32, .num_blocks = N };
    int32_t blocks[2], slots[CTX], lens[1] = { CTX };
    static float k[CTX * H * D], v[CTX * H * D], q[QH * D], outv[QH * D], ref[QH * D];
    pk_cache mine = { NULL, 1, N, H, D, B, PAGED_DTYPE_F32, 1.0f, 1.0f };
    mine.base = bcalloc(pk_cache_bytes(&mine), 1);
    hard_fill(rng, k, CTX * H * D);
    hard_fill(rng, v, CTX * H * D);
    hard_fill(rng, q, QH * D);
    if ((rc = paged_pool_create(c, &d, &p)) == PAGED_OK && (rc = paged_alloc(p, 2, blocks)) == PAGED_OK) {
        for (int t = 0; t < CTX; t++)
            slots[t] = blocks[t / B] * B + t % B;
        rc = paged_append(p, 0, CTX, PAGED_DTYPE_F32, k, v, slots);
    }
    if (rc == PAGED_OK) {
        paged_attn_args a = { .num_seqs = 1, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32, .q = q,
                              .out = outv, .block_tables = blocks, .bt_stride = 2, .seq_lens = lens };
        rc = paged_decode(p, 0, &a);
    }
    if (rc == PAGED_OK) {
        pk_append_args ap = { .cache = mine, .layer_begin = 0, .num_layers = 1, .num_tokens = CTX,
                              .src_dtype = PAGED_DTYPE_F32, .k = k, .v = v, .slot_mapping = slots };
        pk_decode_args da = { .cache = mine, .layer = 0, .num_seqs = 1, .num_q_heads = QH,
                              .q_dtype = PAGED_DTYPE_F32, .q = q, .out = ref, .block_tables = blocks,
                              .bt_stride = 2, .seq_lens = lens,
                              .opts = { 1.0f / sqrtf((float) D), 0.0f, 0, NULL } };
        if (pk_ref_append(&ap) != 0 || pk_ref_decode(&da) != 0)
            rc = 1;
        for (int i = 0; i < QH * D && rc == PAGED_OK; i++)
            if (!(fabsf(outv[i] - ref[i]) <= 1e-4f + 1e-4f * fabsf(ref[i])))
                rc = 1;
    }
    free(mine.base);
    if (rc != PAGED_OK) {
        paged_client_close(c);
        return rc;
    }
    *out = c;
    *pool = p;
    return PAGED_OK;
}

/* Waits for the parent's byte on cmd_fd; exits if it does not come. Returns nothing. */
static void await(int cmd_fd, char want)
{
    char ch;
    if (!hard_read_full(cmd_fd, &ch, 1, 120000) || ch != want)
        _exit(10);
}

/*
 * A client of round `round`: a checked exchange with the daemon; then, told to, starts
 * what its mode says and writes 'R'; once told the daemon is gone ('K') makes more calls,
 * closes, tries to connect with no daemon there and writes 'A'; once told a new one runs ('N')
 * connects to it and checks a decode. Writes its report to rep_fd.
 */
static void client(int round, int mode, int cmd_fd, int rep_fd)
{
    struct report r;
    memset(&r, 0, sizeof r);
    tap_rng rng;
    tap_rng_seed(&rng, seed + (uint64_t) (round * MODE_COUNT + mode));
    char name[32];
    snprintf(name, sizeof name, "r%d-%d", round, mode);
    paged_client *c = NULL;
    paged_pool *p = NULL;
    r.setup_rc = checked_session(name, &rng, &c, &p);
    /* A sequence holding a block, to be destroyed once the daemon is gone. */
    paged_seq *s = NULL;
    int32_t slot;
    if (r.setup_rc == PAGED_OK
        && (paged_seq_create(p, 0, &s) != PAGED_OK || paged_seq_extend(s, 1, NULL, &slot) != PAGED_OK))
        r.setup_rc = PAGED_E_INVAL;
    if (write(rep_fd, "S", 1) != 1 || r.setup_rc != PAGED_OK)
        _exit(write(rep_fd, &r, sizeof r) == (ssize_t) sizeof r ? 0 : 11);
    await(cmd_fd, 'G');

    uint64_t t0 = 0;
    paged_completion comp[4];
    if (mode == MODE_WAIT) {
        paged_request rq = { .op = PAGED_OP_NOP, .tag = 7 };
        if (paged_prep(c, &rq) != PAGED_OK || paged_submit(c) != 1)
            _exit(13);
    }
    if (write(rep_fd, "R", 1) != 1)
        _exit(14);
    t0 = hard_now_ns();
    /* The blocked call: until it fails (a call the daemon still served may come first). */
    for (int i = 0; i < 1000 && mode != MODE_IDLE; i++) {
        int rc;
        if (mode == MODE_WAIT)
            rc = paged_wait(c, comp, 4, -1);
        else if (mode == MODE_SYNC)
            rc = paged_nop(c);
        else {
            paged_pool *other = NULL;
            rc = paged_pool_attach(c, "r-nonexistent", &other);
            if (rc == PAGED_E_NOENT)
                rc = PAGED_OK; /* answered */
        }
        r.blocked_rc = rc;
        if (rc < 0)
            break;
        r.blocked_ok_calls++;
    }
    r.blocked_ms = (long) ((hard_now_ns() - t0) / 1000000u);
    await(cmd_fd, 'K');
    r.next_rc = paged_nop(c);
    int32_t more[1];
    r.again_rc = paged_alloc(p, 1, more);
    /* A dead connection's handles still go away cleanly. */
    paged_seq_destroy(s);
    paged_pool_detach(p);
    paged_client_close(c);
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = name };
    r.absent_rc = paged_client_connect(&o, &c);
    if (r.absent_rc == PAGED_OK)
        paged_client_close(c);
    if (write(rep_fd, "A", 1) != 1)
        _exit(16);

    await(cmd_fd, 'N');
    snprintf(name, sizeof name, "r%d-%d-new", round, mode);
    r.reconnect_rc = checked_session(name, &rng, &c, &p);
    if (r.reconnect_rc == PAGED_OK) {
        paged_pool_detach(p);
        paged_client_close(c);
    }
    _exit(write(rep_fd, &r, sizeof r) == (ssize_t) sizeof r ? 0 : 15);
}

/* Sends byte ch to every child; returns nothing. */
static void tell_all(const int *cmd, char ch)
{
    for (int m = 0; m < MODE_COUNT; m++)
        if (write(cmd[m], &ch, 1) != 1)
            diag("cannot tell client %d '%c'", m, ch);
}

/* Runs one round: clients in every mode, the daemon stopped with sig, a new one started.
 * Returns nothing (TAP reports). */
static void run_round(int round, int sig)
{
    const char *how = sig == SIGKILL ? "SIGKILL" : "SIGTERM";
    int cmd[MODE_COUNT], rep[MODE_COUNT];
    pid_t pid[MODE_COUNT];
    for (int m = 0; m < MODE_COUNT; m++) {
        int cp[2], rp[2];
        /* Close-on-exec: the daemons this test starts must not hold the clients' pipes. */
        if (pipe2(cp, O_CLOEXEC) < 0 || pipe2(rp, O_CLOEXEC) < 0)
            sysbail("pipe");
        pid[m] = bfork();
        if (pid[m] == 0) {
            close(cp[1]);
            close(rp[0]);
            for (int j = 0; j < m; j++) {
                close(cmd[j]);
                close(rep[j]);
            }
            client(round, m, cp[0], rp[1]);
        }
        close(cp[0]);
        close(rp[1]);
        cmd[m] = cp[1];
        rep[m] = rp[0];
    }
    int set = 0;
    for (int m = 0; m < MODE_COUNT; m++) {
        char ch;
        set += hard_read_full(rep[m], &ch, 1, 30000) && ch == 'S';
    }
    is_int(MODE_COUNT, set, "%s round: %d clients connected and checked a decode", how, MODE_COUNT);

    /* Freeze the daemon (and see it frozen: kill only asks), so the blocked calls are
     * surely unanswered when it goes. */
    ok(td_freeze(&daemon_) == 0, "%s round: the daemon is stopped", how);
    tell_all(cmd, 'G');
    int started = 0;
    for (int m = 0; m < MODE_COUNT; m++) {
        char ch;
        started += hard_read_full(rep[m], &ch, 1, 30000) && ch == 'R';
    }
    is_int(MODE_COUNT, started, "%s round: every client is in its call", how);
    /* The frozen daemon gets sig, and SIGCONT to act on it. */
    int st = pagedd_stop_with(&daemon_, sig);
    if (sig == SIGKILL)
        ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "%s round: the daemon died of SIGKILL", how);
    else
        ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s round: the daemon exited cleanly (status %d)", how, st);
    tell_all(cmd, 'K');
    int absent = 0;
    for (int m = 0; m < MODE_COUNT; m++) {
        char ch;
        absent += hard_read_full(rep[m], &ch, 1, WAIT_MS + 30000) && ch == 'A';
    }
    is_int(MODE_COUNT, absent, "%s round: every client is through with the dead daemon", how);

    const char *const args[] = { "--log-level=info", NULL };
    int started_again = pagedd_start(&daemon_, args, NULL, &st) == 0;
    ok(started_again, "%s round: a new daemon listens on the same socket path", how);
    tell_all(cmd, 'N');

    for (int m = 0; m < MODE_COUNT; m++) {
        struct report r;
        memset(&r, 0, sizeof r);
        int got = hard_read_full(rep[m], &r, sizeof r, 120000);
        int wst = -1;
        if (!got)
            kill(pid[m], SIGKILL);
        waitpid(pid[m], &wst, 0);
        close(cmd[m]);
        close(rep[m]);
        ok(got && WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "%s round, client %s: reported, exited cleanly "
           "(status %d)", how, mode_names[m], wst);
        if (m != MODE_IDLE) {
            /* After SIGKILL the frozen daemon answered nothing; after SIGTERM it may still
             * have served the call before it shut down. */
            int want_err = sig == SIGKILL ? r.blocked_ok_calls == 0 && gone(r.blocked_rc) : gone(r.blocked_rc);
            ok(want_err && r.blocked_ms <= WAIT_MS, "%s round, client %s: the blocked call returned %s "
               "after %ld ms (%d answered before)", how, mode_names[m], paged_strerror(r.blocked_rc),
               r.blocked_ms, r.blocked_ok_calls);
        }
        ok(gone(r.next_rc), "%s round, client %s: the next call says %s", how, mode_names[m],
           paged_strerror(r.next_rc));
        ok(gone(r.again_rc), "%s round, client %s: and the one after it says %s", how, mode_names[m],
           paged_strerror(r.again_rc));
        is_int(PAGED_E_NOTCONN, r.absent_rc, "%s round, client %s: connecting with no daemon: %s", how,
               mode_names[m], paged_strerror(r.absent_rc));
        is_int(PAGED_OK, r.reconnect_rc, "%s round, client %s: reconnected to the new daemon, decode checked",
               how, mode_names[m]);
    }
}

/* Runs the rounds; returns 0 (TAP reports). */
int main(void)
{
    seed = tap_seed();
    plan_lazy();
    const char *const args[] = { "--log-level=info", NULL };
    int st;
    if (pagedd_start(&daemon_, args, NULL, &st) != 0)
        bail("pagedd did not start (status %d)", st);
    run_round(0, SIGKILL);
    run_round(1, SIGTERM);
    st = pagedd_stop(&daemon_);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the last daemon exited cleanly on SIGTERM (status %d)", st);
    pagedd_cleanup(&daemon_);
    return 0;
}
