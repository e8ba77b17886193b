/* stall-t.c: a request held on a word its client never writes holds up nobody else; repeated timeouts are refused. */
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
#include "tests/hard/hard.h"
#include "tests/service/arena-io.h"
#include "tests/service/childrec.h"
#include "tests/service/rawclient.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"
#include "tests/tools/tpactl.h"

/*
 * A real pagedd and libpaged client processes; with PAGED_TEST_BACKEND=cuda the same on the
 * GPU, the words then in device data arenas (the children alone touch CUDA).
 *
 *   held: with dependency-timeout at a minute, the holder submits a DECODE that waits for a
 *   word of its data arena that it never writes. Meanwhile the bystander's DECODEs complete,
 *   each matching pk_ref_decode, at the rate they had before (median round trip); pactl
 *   status answers and pactl subscribe reports a worker's connection; then SIGTERM ends the
 *   daemon within STOP_BOUND_MS, the holder's request ending with PAGED_E_SHUTDOWN long before
 *   its minute and the idle bystander's wait too.
 *
 *   strikes: with dependency-timeout at TIMEOUT_MS and dependency-strikes at STRIKES, a
 *   client's waits on a word it never writes time out STRIKES times (PAGED_E_TIMEOUT on
 *   dep.wait_off); its next such wait is refused at once with PAGED_E_LIMIT, and so is one of
 *   the same uid's after it reconnects; a wait whose word is already reached still runs and
 *   matches the reference; the daemon logs the refusal naming dependency-strikes.
 */

#define H 2
#define QH 8
#define D 64
#define B 16
#define N 64
#define NSEQ 2
#define MAXBLK 4
#define CTX 40
#define ROUNDS 40
#define TOL 1e-4f
#define WAIT_MS 60000
#define PATIENT_MS 60000   /* the held phase's dependency timeout */
#define TIMEOUT_MS 150     /* the strikes phase's */
#define STRIKES 2
#define STOP_BOUND_MS 10000
#define SLOWER 3           /* the bystander's median round trip may grow this much (and 1 ms) */

enum rec_kind { REC_BASE = CR_FIRST_KIND, REC_HELD, REC_DURING, REC_DONE };

static struct pagedd daemon_;
static uint64_t seed;
static int use_cuda;

/* One decoding client of pool "stall" and what its checks need. */
struct decoder {
    struct aio_decoder d;
    int32_t ids[NSEQ * MAXBLK];
    float q[NSEQ * QH * D], out[NSEQ * QH * D];
    int32_t lens[NSEQ];
    tap_rng rng;
    uint64_t word_off;            /* a word of its data arena, zero, that it never writes */
};

/* Opens c as name: fills its contexts, carves its word; exits (a failed check) when it cannot.
 * Returns nothing. */
static void open_decoder(struct decoder *c, const char *name, uint64_t salt)
{
    char why[256];
    tap_rng_seed(&c->rng, seed ^ salt);
    c->d = (struct aio_decoder) {
        .a = { .cuda = use_cuda, .ids = c->ids, .nseq = NSEQ, .maxblk = MAXBLK },
        .ref = { .num_layers = 1, .num_blocks = N, .num_kv_heads = H, .head_dim = D, .block_size = B,
                 .dtype = PAGED_DTYPE_F32, .k_scale = 1.0f, .v_scale = 1.0f },
    };
    if (aio_decoder_open(&c->d, daemon_.socket, name, "stall", CTX, QH, &c->rng, c->q, why, sizeof why) < 0)
        cr_fatal("%s: %s", name, why);
    for (int s = 0; s < NSEQ; s++)
        c->lens[s] = CTX;
    const uint32_t zero = 0;
    if (paged_arena_alloc(c->d.a.c, PAGED_ARENA_DATA, 4, 256, &c->word_off) != PAGED_OK
        || aio_put(use_cuda, c->d.a.data, c->word_off, &zero, 4) < 0)
        cr_fatal("%s: carving its word: %s", name, paged_client_error(c->d.a.c));
}

/* Runs one DECODE of c (poisoned output first) with tag, waiting for c's word to reach value
 * when value is not 0; returns its status, or exits when it was not answered. Sets *right when
 * it completed OK and matches the reference, and *field (field may be NULL) to the field its
 * completion names. */
static int decode_once(struct decoder *c, uint64_t tag, uint32_t value, int *right, const char **field)
{
    *right = 0;
    c->d.req.dep = value != 0 ? (paged_dep) { .flags = PAGED_DEP_WAIT, .wait_off = c->word_off, .wait_value = value }
                              : (paged_dep) { 0 };
    if (aio_poison(use_cuda, c->d.a.data, c->d.out_off, sizeof c->out) < 0)
        cr_fatal("poisoning an output");
    paged_completion comp;
    if (aio_decoder_call(&c->d, tag, &comp) < 0)
        cr_fatal("DECODE %llu was not answered: %s", (unsigned long long) tag, paged_client_error(c->d.a.c));
    if (field != NULL)
        *field = paged_field_name(comp.err_field);
    if (comp.status == PAGED_OK)
        *right = aio_get(use_cuda, c->d.a.data, c->d.out_off, c->out, sizeof c->out) == 0
                 && aio_decoder_matches(&c->d, QH, c->q, c->out, c->lens, TOL);
    return comp.status;
}

/* Compares two round trips for qsort; returns their order. */
static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return (x > y) - (x < y);
}

/* Runs ROUNDS DECODEs of c one after another; returns the median round trip in ns and stores
 * how many matched the reference in *right. */
static uint64_t decode_rounds(struct decoder *c, uint64_t tag0, int *right)
{
    uint64_t rtt[ROUNDS];
    *right = 0;
    for (int i = 0; i < ROUNDS; i++) {
        int r = 0;
        uint64_t t0 = hard_now_ns();
        decode_once(c, tag0 + (uint64_t) i, 0, &r, NULL);
        rtt[i] = hard_now_ns() - t0;
        *right += r;
    }
    qsort(rtt, ROUNDS, sizeof rtt[0], cmp_u64);
    return rtt[ROUNDS / 2];
}

/* The bystander (who 0): decodes before and while the holder waits, then waits for the
 * shutdown. Returns nothing (exits). */
static void bystander_main(int cmd_fd)
{
    static struct decoder c;
    open_decoder(&c, "bystander", 1);
    int right = 0;
    const uint64_t before = decode_rounds(&c, 100, &right);
    cr_check(right == ROUNDS, "bystander: %d DECODEs match pk_ref_decode before the holder submits (%d did)", ROUNDS,
             right);
    cr_send(REC_BASE, 1, 0, NULL);
    cr_await_go(cmd_fd);
    const uint64_t during = decode_rounds(&c, 200, &right);
    cr_check(right == ROUNDS, "bystander: %d DECODEs complete and match pk_ref_decode while the holder's request "
             "waits (%d did)", ROUNDS, right);
    cr_check(during <= SLOWER * before + 1000000u, "bystander: at the rate they had before: median round trip "
             "%.1f us against %.1f us", (double) during / 1e3, (double) before / 1e3);
    cr_send(REC_DURING, 1, 0, NULL);
    paged_completion comp;
    int rc = paged_wait(c.d.a.c, &comp, 1, WAIT_MS);
    cr_check(rc == PAGED_E_SHUTDOWN, "bystander: idle, its wait ends with PAGED_E_SHUTDOWN at SIGTERM (%s)",
             paged_strerror(rc));
    cr_send(REC_DONE, 1, 0, NULL);
    _exit(0);
}

/* The holder (who 1): submits a DECODE that waits for its word, never written, and waits for
 * how it ends. Returns nothing (exits). */
static void holder_main(int cmd_fd)
{
    static struct decoder c;
    open_decoder(&c, "holder", 2);
    cr_await_go(cmd_fd);
    c.d.req.tag = 300;
    c.d.req.dep = (paged_dep) { .flags = PAGED_DEP_WAIT, .wait_off = c.word_off, .wait_value = 1 };
    if (paged_prep(c.d.a.c, &c.d.req) != PAGED_OK || paged_submit(c.d.a.c) < 0)
        cr_fatal("holder: submitting: %s", paged_client_error(c.d.a.c));
    const uint64_t t0 = hard_now_ns();
    cr_send(REC_HELD, 1, 0, NULL);
    paged_completion comp;
    int rc = paged_wait(c.d.a.c, &comp, 1, 2 * PATIENT_MS);
    const int status = rc == 1 ? comp.status : rc;
    const double waited = (double) (hard_now_ns() - t0) / 1e9;
    cr_check(status == PAGED_E_SHUTDOWN && waited < PATIENT_MS / 1000.0,
             "holder: its waiting DECODE ends with PAGED_E_SHUTDOWN at SIGTERM, after %.1f s of its %d (%s)", waited,
             PATIENT_MS / 1000, paged_strerror(status));
    cr_send(REC_DONE, 1, 0, NULL);
    _exit(0);
}

/* Runs client who of the held phase; returns nothing (exits). */
static void held_client(int who, int cmd_fd)
{
    if (who == 0)
        bystander_main(cmd_fd);
    holder_main(cmd_fd);
}

/* The striker (who 0 of the strikes phase): waits that time out, then are refused, also after
 * a reconnection; a reached word still runs. Returns nothing (exits). */
static void striker_client(int who, int cmd_fd)
{
    (void) who;
    (void) cmd_fd;
    static struct decoder c;
    open_decoder(&c, "striker", 3);
    const char *field = NULL;
    int right = 0;
    for (int i = 0; i < STRIKES; i++) {
        int st = decode_once(&c, 400 + (uint64_t) i, 1, &right, &field);
        cr_check(st == PAGED_E_TIMEOUT && field != NULL && strcmp(field, "dep.wait_off") == 0,
                 "striker: wait %d on a word never written times out (%s on %s)", i + 1, paged_strerror(st), field);
    }
    uint64_t t0 = hard_now_ns();
    int st = decode_once(&c, 410, 1, &right, &field);
    double ms = (double) (hard_now_ns() - t0) / 1e6;
    cr_check(st == PAGED_E_LIMIT && field != NULL && strcmp(field, "dep.wait_off") == 0,
             "striker: after %d timeouts its next wait on a short word is refused (%s on %s, after %.0f ms; the "
             "timeout is %d)", STRIKES, paged_strerror(st), field, ms, TIMEOUT_MS);
    const uint32_t one = 1;
    if (aio_put(use_cuda, c.d.a.data, c.word_off, &one, 4) < 0)
        cr_fatal("striker: writing its word");
    st = decode_once(&c, 411, 1, &right, &field);
    cr_check(st == PAGED_OK && right, "striker: a wait on a word already reached still runs, matching "
             "pk_ref_decode (%s)", paged_strerror(st));
    paged_client_close(c.d.a.c);
    free(c.d.ref.base);

    static struct decoder again;
    open_decoder(&again, "striker-again", 4);
    st = decode_once(&again, 420, 1, &right, &field);
    cr_check(st == PAGED_E_LIMIT, "striker: reconnected, the same user's wait on a short word is refused still (%s)",
             paged_strerror(st));
    int r = 0;
    st = decode_once(&again, 421, 0, &r, NULL);
    cr_check(st == PAGED_OK && r, "striker: its DECODEs without a wait run (%s)", paged_strerror(st));
    cr_send(REC_DONE, 1, 0, NULL);
    paged_client_close(again.d.a.c);
    _exit(0);
}

/* Starts the daemon with dependency-timeout ms (and strikes) and pools "stall" and "t1" (the
 * pactl holders'); *ctl stays connected. Returns nothing. */
static void start(const char *ms, const char *strikes, struct rc_client *ctl)
{
    const char *extra[] = { "--dependency-timeout", ms, "--dependency-strikes", strikes, NULL };
    use_cuda = aio_start(&daemon_, extra);
    aio_pool_create(ctl, &daemon_, "stall-t", "stall", 1, H, D, B, PAGED_DTYPE_F32, N);
    if (rc_pool_create(ctl, "t1", 1, H, D, B, PAGED_DTYPE_F32, 16, 0600, PCORE_ATTACH_WRITE, NULL, NULL) != 0)
        bail("pool t1 not created: %s", ctl->errmsg);
}

/* Tells client who to go on; bails when it cannot. Returns nothing. */
static void go(const struct cr_clients *cl, int who)
{
    if (write(cl->cmd[who], "g", 1) != 1)
        sysbail("telling client %d to go on", who);
}

/* The held phase. Returns nothing. */
static void held_phase(void)
{
    struct rc_client ctl;
    start("60000", "3", &ctl);
    struct cr_clients cl;
    cr_spawn(&cl, 2, held_client);
    ok(cr_await(cl.rec_fd, REC_BASE, 0, 1, WAIT_MS), "held: the bystander decoded before");
    go(&cl, 1);
    ok(cr_await(cl.rec_fd, REC_HELD, 0, 1, WAIT_MS), "held: the holder's waiting DECODE is in");
    go(&cl, 0);

    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "status", NULL);
    ok(r.status == 0 && strstr(r.out, "clients") != NULL, "held: pactl status answers while the request waits "
       "(exit %d)", r.status);
    tp_run_free(&r);
    char *const sub[] = { tp_pactl, "-s", daemon_.socket, "-f", "json", "subscribe", NULL };
    struct tp_child s = tp_spawn(sub);
    int bad = 0;
    ok(tp_probe_subscription(daemon_.socket, s.out, "probe", &bad, NULL) && bad == 0,
       "held: pactl subscribe reports a worker's connection while the request waits");
    kill(s.pid, SIGTERM);
    tp_reap(s.pid, TP_RUN_MS);
    close(s.out);
    if (s.in >= 0)
        close(s.in);
    ok(cr_await(cl.rec_fd, REC_DURING, 0, 1, WAIT_MS), "held: the bystander decoded while the request waits");
    struct pcore_msg_stats_reply sr;
    ok(rc_stats(&ctl, &sr) == 0, "held: STATS answers while the request waits");
    rc_close(&ctl);

    const long long t0 = tp_now_ms();
    int st = pagedd_stop(&daemon_);
    const long long took = tp_now_ms() - t0;
    ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && took < STOP_BOUND_MS,
       "held: SIGTERM ends pagedd in %lld ms (bound %d), exit 0", took, STOP_BOUND_MS);
    ok(cr_await(cl.rec_fd, REC_DONE, 0, 2, WAIT_MS), "held: both clients saw the shutdown");
    cr_reap(&cl);
    pagedd_cleanup(&daemon_);
}

/* The strikes phase. Returns nothing. */
static void strikes_phase(void)
{
    char ms[16], n[16];
    snprintf(ms, sizeof ms, "%d", TIMEOUT_MS);
    snprintf(n, sizeof n, "%d", STRIKES);
    pagedd_mkdir(&daemon_);
    struct rc_client ctl;
    start(ms, n, &ctl);
    struct cr_clients cl;
    cr_spawn(&cl, 1, striker_client);
    ok(cr_await(cl.rec_fd, REC_DONE, 0, 1, WAIT_MS), "strikes: the striker is done");
    cr_reap(&cl);
    ok(pagedd_log_contains(&daemon_, "(dependency-strikes 2)"), "strikes: the daemon logged the refusal, naming "
       "dependency-strikes");
    rc_close(&ctl);
    int st = pagedd_stop(&daemon_);
    ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "strikes: pagedd exits 0 on SIGTERM");
    pagedd_cleanup(&daemon_);
}

/* Runs both phases; returns 0 (TAP reports the result). */
int main(void)
{
    tp_init(&daemon_);
    seed = tap_seed();
    held_phase();
    strikes_phase();
    return 0;
}
