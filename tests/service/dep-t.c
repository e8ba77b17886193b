/* dep-t.c: device-side dependencies: requests wait for a word of the client's data arena, signal another when done. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paged.h"
#include "kernels/kernels.h"
#include "lib/core/proto.h"
#include "tests/service/arena-io.h"
#include "tests/service/rawclient.h"
#include "tests/service/proc.h"
#include "tests/tap/basic.h"

/*
 * A real pagedd (--dependency-timeout 300) and libpaged client processes; with
 * PAGED_TEST_BACKEND=cuda the same on the GPU (the children alone touch CUDA: a context does
 * not survive fork), once with dependency-waits = isolated, the default (the engine holds a
 * waiting request in its ring until it sees the word reached) and once with inline (the
 * daemon's stream waits for the word); on the cpu backend every wait is isolated.
 *
 *   chain: a DECODE that waits for word W and signals word X neither runs nor signals while
 *   W is short of its value (its output stays poisoned; inline, its completion arrives at
 *   once, since every request of its pass signals), and does both once the client writes W.
 *   Then STEPS x L layers of APPEND (waits for W, signals Y) and DECODE (signals X), all
 *   submitted at once, the client writing W for each layer only after it saw X of the one
 *   before, as a worker's stream would: every DECODE must match pk_ref_decode with its
 *   APPEND's token (and differ from without it), every X and Y must end at its last value.
 *
 *   stuck and bystander, at once: stuck waits for a word it never writes, and fails with
 *   PAGED_E_TIMEOUT naming dep.wait_off; meanwhile the bystander's DECODEs all complete and
 *   match the reference. Then late, alone, waits for a host-arena word it never writes and
 *   signals another: isolated it fails likewise; inline it completes when queued, then the
 *   daemon writes the word and disconnects it with an error naming the word.
 *
 *   bad: dependency fields the daemon must refuse, each naming the field.
 *
 *   dead: a client exits with a request queued that waits for a word it never wrote (inline:
 *   completed early, its wait on the daemon's stream). The daemon must reclaim every block it
 *   held (inline, the watchdog releasing the wait first) and go on serving.
 *
 * Children report each check as one line ("1 text" or "0 text") through a pipe; the parent
 * prints TAP.
 */

#define L 2
#define H 2
#define QH 4
#define D 64
#define B 16
#define N 64
#define NSEQ 2
#define MAXBLK 4
#define CTX0 21
#define STEPS 3
#define TOL 1e-4
#define TIMEOUT_MS 300     /* the daemon that times waits out */
#define PATIENT_MS 60000   /* the other one: no wait of a correct client comes near it */
#define WAIT_MS 60000

static struct pagedd patient, strict;   /* dependency timeouts: PATIENT_MS, TIMEOUT_MS */
static struct pagedd *daemon_ = &patient; /* the one the children connect to */
static uint64_t seed;
static int use_cuda;
static int inline_;        /* dependency-waits = inline (cuda): the daemon's stream waits for the words */
static int out_fd = -1;
static int ready_fd = -1;  /* stuck: written once it has submitted */
static const char *who = "parent";

/* Reports one check to the parent; returns cond. */
static int check(int cond, const char *fmt, ...) TAP_PRINTF(2, 3);
static int check(int cond, const char *fmt, ...)
{
    char line[PIPE_BUF];
    int n = snprintf(line, sizeof line, "%d %s: ", cond ? 1 : 0, who);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t) n - 1, fmt, ap);
    va_end(ap);
    for (char *p = line; *p != '\0'; p++)
        if (*p == '\n')
            *p = ' ';
    size_t len = strlen(line);
    line[len++] = '\n';
    if (write(out_fd, line, len) != (ssize_t) len)
        _exit(3);
    return cond;
}

/* Reports a failed check and exits the child; returns nothing. */
static void fatal(const char *fmt, ...) TAP_PRINTF(1, 2);
static void fatal(const char *fmt, ...)
{
    char msg[PIPE_BUF / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    check(0, "%s", msg);
    _exit(2);
}

/* One client process's state. */
struct client {
    paged_client *c;
    paged_pool *pool;
    unsigned char *host, *data;
    int32_t ids[NSEQ * MAXBLK];
    uint64_t bt_off, words_off;   /* block tables (host arena); W, X, Y (data arena) */
    uint64_t hwords_off;          /* W, X, Y in the host arena (PAGED_DEP_HOST) */
    pk_cache ref;
    tap_rng rng;
};

/* Returns the offset of size bytes of an arena, or exits. */
static uint64_t carve(struct client *cl, paged_arena_kind kind, size_t size)
{
    uint64_t off = 0;
    if (paged_arena_alloc(cl->c, kind, size, 256, &off) != PAGED_OK)
        fatal("carving %zu bytes: %s", size, paged_client_error(cl->c));
    return off;
}

/* Copies n bytes into the data arena at off (a 4-byte dependency word with a release store on
 * the cpu backend, as the daemon reads it meanwhile), or exits; returns nothing. */
static void put(struct client *cl, uint64_t off, const void *src, size_t n)
{
    if (!use_cuda && n == 4) {
        uint32_t v;
        memcpy(&v, src, 4);
        __atomic_store_n((uint32_t *) (cl->data + off), v, __ATOMIC_RELEASE);
        return;
    }
    if (aio_put(use_cuda, cl->data, off, src, n) < 0)
        fatal("copying into the data arena");
}

/* Copies n bytes of the data arena at off to dst (a dependency word with an acquire load on
 * the cpu backend), or exits; returns nothing. */
static void get(struct client *cl, void *dst, uint64_t off, size_t n)
{
    if (!use_cuda && n == 4) {
        uint32_t v = __atomic_load_n((const uint32_t *) (cl->data + off), __ATOMIC_ACQUIRE);
        memcpy(dst, &v, 4);
        return;
    }
    if (aio_get(use_cuda, cl->data, off, dst, n) < 0)
        fatal("copying out of the data arena");
}

/* Which words a check uses: the data arena's, or the host arena's (PAGED_DEP_HOST). */
static int host_words;

/* Writes value to dependency word i (0 W, 1 X, 2 Y); returns nothing. */
static void set_word(struct client *cl, int i, uint32_t value)
{
    if (host_words)
        __atomic_store_n((uint32_t *) (cl->host + cl->hwords_off) + i, value, __ATOMIC_RELEASE);
    else
        put(cl, cl->words_off + 4 * (uint64_t) i, &value, 4);
}

/* Returns dependency word i. */
static uint32_t word(struct client *cl, int i)
{
    uint32_t v;
    if (host_words)
        return __atomic_load_n((const uint32_t *) (cl->host + cl->hwords_off) + i, __ATOMIC_ACQUIRE);
    get(cl, &v, cl->words_off + 4 * (uint64_t) i, 4);
    return v;
}

/* Returns the offset of dependency word i in its arena. */
static uint64_t word_off(const struct client *cl, int i)
{
    return (host_words ? cl->hwords_off : cl->words_off) + 4 * (uint64_t) i;
}

/* Returns the dep flags for the words in use, with flags. */
static unsigned dep_flags(unsigned flags)
{
    return flags | (host_words ? PAGED_DEP_HOST : 0);
}

/* Polls word i (bounded: WAIT_MS) until it reaches value; returns whether it did. */
static int await_word(struct client *cl, int i, uint32_t value)
{
    for (int k = 0; k < WAIT_MS * 10; k++) {
        if ((int32_t) (word(cl, i) - value) >= 0)
            return 1;
        td_pause_us(100);
    }
    return 0;
}

/* Returns the slot of token pos of sequence s. */
static int32_t slot_of(const struct client *cl, int s, int pos)
{
    return cl->ids[s * MAXBLK + pos / B] * B + pos % B;
}

/* Returns the worst relative L2 error over rows of D floats (infinity for a non-finite value). */
static double row_error(const float *got, const float *want, size_t rows)
{
    return aio_row_error(got, want, rows, D);
}

/* Waits for one completion into *comp; returns 1, or 0 when none came within ms. Exits on errors. */
static int await_one(struct client *cl, paged_completion *comp, int ms)
{
    int k = paged_wait(cl->c, comp, 1, ms);
    if (k == PAGED_E_TIMEOUT)
        return 0;
    if (k != 1)
        fatal("waiting for a completion: %s (%s)", paged_strerror(k), paged_client_error(cl->c));
    return 1;
}

/* Connects, attaches the pool, takes blocks and carves the shared pieces; fills the context
 * of every sequence with CTX0 random tokens (also in the reference). Returns nothing. */
static void setup(struct client *cl, const char *name)
{
    who = name;
    tap_rng_seed(&cl->rng, seed ^ (uint64_t) (uintptr_t) name[0] * 7919u);
    struct aio_client ac = { .cuda = use_cuda, .ids = cl->ids, .nseq = NSEQ, .maxblk = MAXBLK };
    char why[256];
    if (aio_open(&ac, daemon_->socket, name, "dep", 4u << 20, 4u << 20, why, sizeof why) < 0)
        fatal("%s", why);
    cl->c = ac.c;
    cl->pool = ac.pool;
    cl->host = ac.host;
    cl->data = ac.data;
    cl->bt_off = carve(cl, PAGED_ARENA_HOST, sizeof cl->ids);
    memcpy(cl->host + cl->bt_off, cl->ids, sizeof cl->ids);
    cl->words_off = carve(cl, PAGED_ARENA_DATA, 16);
    uint32_t zero[4] = { 0, 0, 0, 0 };
    put(cl, cl->words_off, zero, sizeof zero);
    cl->hwords_off = carve(cl, PAGED_ARENA_HOST, 16);
    memset(cl->host + cl->hwords_off, 0, 16);
    cl->ref = (pk_cache) {
        .num_layers = L, .num_blocks = N, .num_kv_heads = H, .head_dim = D, .block_size = B,
        .dtype = PAGED_DTYPE_F32, .k_scale = 1.0f, .v_scale = 1.0f,
    };
    if (aio_fill_contexts(&ac, &cl->ref, CTX0, &cl->rng, 1, why, sizeof why) < 0)
        fatal("%s", why);
}

/* One DECODE as the client made it. */
struct dec {
    int layer;
    int32_t lens[NSEQ];
    float q[NSEQ * QH * D];
    uint64_t q_off, out_off, lens_off;
};

/* Makes a DECODE of layer over contexts of len tokens with fresh random queries and a
 * poisoned output; fills r with it (dep left to the caller). Returns nothing. */
static void make_decode(struct client *cl, struct dec *d, int layer, int len, paged_request *r, uint64_t tag)
{
    size_t qn = (size_t) NSEQ * QH * D;
    d->layer = layer;
    tap_rng_fill_uniform(&cl->rng, d->q, qn, -1.0, 1.0);
    d->q_off = carve(cl, PAGED_ARENA_DATA, qn * 4);
    d->out_off = carve(cl, PAGED_ARENA_DATA, qn * 4);
    d->lens_off = carve(cl, PAGED_ARENA_HOST, sizeof d->lens);
    for (int s = 0; s < NSEQ; s++)
        d->lens[s] = len;
    memcpy(cl->host + d->lens_off, d->lens, sizeof d->lens);
    put(cl, d->q_off, d->q, qn * 4);
    if (aio_poison(use_cuda, cl->data, d->out_off, qn * 4) < 0)
        fatal("poisoning an output");
    *r = (paged_request) {
        .op = PAGED_OP_DECODE, .pool = cl->pool, .layer = layer, .tag = tag,
        .u.attn = { .num_seqs = NSEQ, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32, .q_off = d->q_off,
                    .out_off = d->out_off, .block_tables_off = cl->bt_off, .bt_stride = MAXBLK,
                    .seq_lens_off = d->lens_off },
    };
}

/* Computes d's reference output on the client's reference cache into want; returns nothing. */
static void reference(struct client *cl, const struct dec *d, float *want)
{
    pk_decode_args ra = {
        .cache = cl->ref, .layer = d->layer, .num_seqs = NSEQ, .num_q_heads = QH, .q_dtype = PAGED_DTYPE_F32,
        .q = d->q, .out = want, .block_tables = cl->ids, .bt_stride = MAXBLK, .seq_lens = d->lens,
        .opts = { 1.0f / sqrtf((float) D), 0, 0, NULL },
    };
    if (pk_ref_decode(&ra) != 0)
        fatal("pk_ref_decode refused a DECODE");
}

/* Returns d's output's error against the reference. */
static double decode_error(struct client *cl, const struct dec *d)
{
    float got[NSEQ * QH * D], want[NSEQ * QH * D];
    get(cl, got, d->out_off, sizeof got);
    reference(cl, d, want);
    return row_error(got, want, (size_t) NSEQ * QH);
}

/* Prepares and submits one request, or exits; returns nothing. */
static void submit_one(struct client *cl, const paged_request *r)
{
    if (paged_prep(cl->c, r) != PAGED_OK || paged_submit(cl->c) < 0)
        fatal("submitting: %s", paged_client_error(cl->c));
}

/* The first half of chain: one DECODE held by its wait word. Returns nothing. */
static void chain_hold(struct client *cl)
{
    struct dec d;
    paged_request r;
    make_decode(cl, &d, 0, CTX0, &r, 100);
    r.dep = (paged_dep) { .flags = dep_flags(PAGED_DEP_WAIT | PAGED_DEP_SIGNAL), .wait_off = word_off(cl, 0),
                          .wait_value = 5, .signal_off = word_off(cl, 1), .signal_value = 7 };
    set_word(cl, 0, 4);
    submit_one(cl, &r);
    paged_completion comp;
    if (inline_) {
        int got = await_one(cl, &comp, WAIT_MS);
        check(got && comp.status == PAGED_OK && comp.tag == 100,
              "a DECODE that waits and signals completes OK as soon as it is queued (status %s)",
              got ? paged_strerror(comp.status) : "none");
    } else {
        /* A bounded look for something that must not happen. */
        check(!await_one(cl, &comp, 50), "a DECODE waiting for word W = 5 while W is 4 does not complete");
    }
    float out[NSEQ * QH * D];
    get(cl, out, d.out_off, sizeof out);
    int poisoned = 1;
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        poisoned &= !isfinite(out[i]);
    check(word(cl, 1) == 0 && poisoned, "while W is short, signal word X stays 0 and the output is untouched");
    set_word(cl, 0, 5);
    int signalled = await_word(cl, 1, 7);
    check(signalled, "once the client writes W = 5, the daemon writes X = 7");
    if (!inline_) {
        int got = await_one(cl, &comp, WAIT_MS);
        check(got && comp.status == PAGED_OK && comp.tag == 100, "and the DECODE completes OK (status %s)",
              got ? paged_strerror(comp.status) : "none");
    }
    double e = decode_error(cl, &d);
    check(signalled && e <= TOL, "when X is written the output matches pk_ref_decode (row error %.2g)", e);
}

/* The second half of chain: STEPS x L pipelined layers from step step0 on, their words counting
 * from base (which may wrap). Returns nothing. */
static void chain_pipeline(struct client *cl, uint32_t base, int step0)
{
    enum { NL = STEPS * L };
    size_t kvn = (size_t) NSEQ * H * D;
    static struct dec dd[NL];
    static float kk[NL][NSEQ * H * D], vv[NL][NSEQ * H * D];
    static int32_t slots[NL][NSEQ];
    char where[64];
    snprintf(where, sizeof where, "%s from %u", host_words ? "host-arena words" : "data-arena words", base);
    for (int w = 0; w < 3; w++)
        set_word(cl, w, base - 1);
    for (int i = 0; i < NL; i++) {
        int step = step0 + i / L, layer = i % L, pos = CTX0 + step;
        tap_rng_fill_uniform(&cl->rng, kk[i], kvn, -1.0, 1.0);
        tap_rng_fill_uniform(&cl->rng, vv[i], kvn, -1.0, 1.0);
        uint64_t k_off = carve(cl, PAGED_ARENA_DATA, kvn * 4), v_off = carve(cl, PAGED_ARENA_DATA, kvn * 4);
        uint64_t s_off = carve(cl, PAGED_ARENA_HOST, sizeof slots[i]);
        for (int s = 0; s < NSEQ; s++)
            slots[i][s] = slot_of(cl, s, pos);
        memcpy(cl->host + s_off, slots[i], sizeof slots[i]);
        put(cl, k_off, kk[i], kvn * 4);
        put(cl, v_off, vv[i], kvn * 4);
        paged_request app = {
            .op = PAGED_OP_APPEND, .pool = cl->pool, .layer = layer, .tag = 200 + 2 * (uint64_t) i,
            .u.append = { .num_tokens = NSEQ, .dtype = PAGED_DTYPE_F32, .k_off = k_off, .v_off = v_off,
                          .slots_off = s_off },
            .dep = { .flags = dep_flags(PAGED_DEP_WAIT | PAGED_DEP_SIGNAL), .wait_off = word_off(cl, 0),
                     .wait_value = base + (uint32_t) i, .signal_off = word_off(cl, 2),
                     .signal_value = base + (uint32_t) i },
        };
        paged_request dec;
        make_decode(cl, &dd[i], layer, pos + 1, &dec, 201 + 2 * (uint64_t) i);
        dec.dep = (paged_dep) { .flags = dep_flags(PAGED_DEP_SIGNAL), .signal_off = word_off(cl, 1),
                                .signal_value = base + (uint32_t) i };
        if (paged_prep(cl->c, &app) != PAGED_OK || paged_prep(cl->c, &dec) != PAGED_OK)
            fatal("preparing layer %d: %s", i, paged_client_error(cl->c));
    }
    if (paged_submit(cl->c) < 0)
        fatal("submitting the pipeline: %s", paged_client_error(cl->c));
    int chained = 1, held = 1;
    for (int i = 0; i < NL && chained; i++) {
        uint32_t v = base + (uint32_t) i;
        /* Layer i cannot have run: W is short of v. */
        held &= (int32_t) (word(cl, 1) - v) < 0 && (int32_t) (word(cl, 2) - v) < 0;
        set_word(cl, 0, v);
        chained = await_word(cl, 1, v);
    }
    check(held, "%s: no layer's X or Y is written before the client writes its W", where);
    check(chained, "%s: %d layers submitted at once run one by one as the client writes W after each X",
          where, NL);
    int ok_all = 1;
    for (int i = 0; i < 2 * NL; i++) {
        paged_completion comp;
        int got = await_one(cl, &comp, WAIT_MS);
        ok_all &= got && comp.status == PAGED_OK;
    }
    check(ok_all, "%s: all %d APPENDs and DECODEs complete OK", where, 2 * NL);
    check(word(cl, 1) == base + (uint32_t) NL - 1 && word(cl, 2) == base + (uint32_t) NL - 1,
          "%s: X and Y end at the last layer's value (%u, %u)", where, word(cl, 1), word(cl, 2));
    double worst = 0, least_change = INFINITY;
    float got[NSEQ * QH * D], stale[NSEQ * QH * D], want[NSEQ * QH * D];
    for (int i = 0; i < NL; i++) {
        reference(cl, &dd[i], stale);
        pk_append_args aa = {
            .cache = cl->ref, .layer_begin = dd[i].layer, .num_layers = 1, .num_tokens = NSEQ,
            .src_dtype = PAGED_DTYPE_F32, .k = kk[i], .v = vv[i], .slot_mapping = slots[i],
        };
        if (pk_ref_append(&aa) != 0)
            fatal("pk_ref_append refused layer %d", i);
        reference(cl, &dd[i], want);
        get(cl, got, dd[i].out_off, sizeof got);
        double e = row_error(got, want, (size_t) NSEQ * QH), c = row_error(got, stale, (size_t) NSEQ * QH);
        worst = e > worst ? e : worst;
        least_change = c < least_change ? c : least_change;
    }
    check(worst <= TOL && least_change > 100 * TOL, "%s: every DECODE matches pk_ref_decode with its APPEND's "
          "token (worst row error %.2g) and not without it (smallest difference %.2g)", where, worst, least_change);
}

/* stuck: waits for a word nobody writes. Returns nothing. */
static void stuck_main(void)
{
    struct client cl;
    setup(&cl, "stuck");
    struct dec d;
    paged_request r;
    make_decode(&cl, &d, 1, CTX0, &r, 300);
    r.dep = (paged_dep) { .flags = PAGED_DEP_WAIT, .wait_off = cl.words_off, .wait_value = 1 };
    submit_one(&cl, &r);
    /* The bystander starts only now (run_children waits for this byte). */
    if (ready_fd >= 0 && (write(ready_fd, "S", 1) != 1 || close(ready_fd) != 0))
        fatal("telling the parent it submitted");
    paged_completion comp;
    int got = await_one(&cl, &comp, WAIT_MS);
    check(got && comp.status == PAGED_E_TIMEOUT && strcmp(paged_field_name(comp.err_field), "dep.wait_off") == 0,
          "a DECODE waiting for a word never written fails with PAGED_E_TIMEOUT on dep.wait_off (%s, %s)",
          got ? paged_strerror(comp.status) : "none", got ? paged_field_name(comp.err_field) : "-");
    check(word(&cl, 0) == (inline_ ? 1u : 0u), "its word is %s (%u)",
          inline_ ? "the awaited value: the watchdog wrote it to release the daemon's stream" : "untouched",
          word(&cl, 0));

    check(paged_nop(cl.c) == PAGED_OK, "the client goes on (NOP)");
    paged_client_close(cl.c);
}

/* late: alone (so that its pass holds nothing that does not signal), waits for a word of its
 * host arena that it never writes, and signals another. Returns nothing. */
static void late_main(void)
{
    struct client cl;
    setup(&cl, "late");
    struct dec d;
    paged_request r;
    make_decode(&cl, &d, 1, CTX0, &r, 301);
    host_words = 1;
    r.dep = (paged_dep) { .flags = PAGED_DEP_WAIT | PAGED_DEP_SIGNAL | PAGED_DEP_HOST, .wait_off = word_off(&cl, 0),
                          .wait_value = 1, .signal_off = word_off(&cl, 1), .signal_value = 1 };
    submit_one(&cl, &r);
    paged_completion comp;
    int got = await_one(&cl, &comp, WAIT_MS);
    if (!inline_) {
        check(got && comp.status == PAGED_E_TIMEOUT, "a DECODE that waits for a host-arena word never written "
              "and signals fails with PAGED_E_TIMEOUT (%s)", got ? paged_strerror(comp.status) : "none");
        check(word(&cl, 1) == 0, "and its signal word is not written");
        check(paged_nop(cl.c) == PAGED_OK, "the client goes on (NOP)");
    } else {
        check(got && comp.status == PAGED_OK, "a DECODE that waits for a host-arena word never written and "
              "signals completes when queued (%s)", got ? paged_strerror(comp.status) : "none");
        /* Idle: nothing but the watchdog makes the daemon look. */
        int rc = paged_wait(cl.c, &comp, 1, WAIT_MS);
        const char *why = paged_client_error(cl.c);
        /* The reason names the word, which a wait that merely ran out of time would not. */
        check(rc < 0 && strstr(why, "dep.wait_off") != NULL,
              "then, the client idle, the daemon writes the word and disconnects it, naming the word (%s: %s)",
              paged_strerror(rc), why);
        check(word(&cl, 1) == 1, "its signal word was written all the same");
    }
    paged_client_close(cl.c);
}

/* bystander: DECODE round trips while stuck waits. Returns nothing. */
static void bystander_main(void)
{
    struct client cl;
    setup(&cl, "bystander");
    int good = 0, failed = -1, status = PAGED_OK;
    double worst = 0;
    for (int i = 0; i < 20; i++) {
        struct dec d;
        paged_request r;
        make_decode(&cl, &d, i % L, CTX0, &r, 400 + (uint64_t) i);
        submit_one(&cl, &r);
        paged_completion comp;
        int got = await_one(&cl, &comp, WAIT_MS);
        double e = got && comp.status == PAGED_OK ? decode_error(&cl, &d) : INFINITY;
        worst = e > worst ? e : worst;
        good += e <= TOL;
        if (e > TOL && failed < 0) {
            failed = i;
            status = got ? comp.status : PAGED_E_TIMEOUT;
        }
    }
    check(good == 20, "20 DECODEs of another client complete and match pk_ref_decode meanwhile (worst %.2g; "
          "first bad: %d, %s)", worst, failed, paged_strerror(status));
    paged_client_close(cl.c);
}

/* Submits r and checks it fails with status on field; returns nothing. */
static void expect_refused(struct client *cl, paged_request *r, int status, const char *field, const char *what)
{
    submit_one(cl, r);
    paged_completion comp;
    int got = await_one(cl, &comp, WAIT_MS);
    check(got && comp.status == status && strcmp(paged_field_name(comp.err_field), field) == 0,
          "%s: %s on %s (got %s on %s)", what, paged_strerror(status), field,
          got ? paged_strerror(comp.status) : "none", got ? paged_field_name(comp.err_field) : "-");
}

/* bad: dependency fields the daemon refuses. Returns nothing. */
static void bad_main(void)
{
    struct client cl;
    setup(&cl, "bad");
    size_t dsize = 0;
    paged_arena_base(cl.c, PAGED_ARENA_DATA, &dsize);
    struct dec d;
    paged_request r;
    make_decode(&cl, &d, 0, CTX0, &r, 500);
    r.dep = (paged_dep) { .flags = PAGED_DEP_WAIT, .wait_off = dsize - 2, .wait_value = 1 };
    expect_refused(&cl, &r, PAGED_E_RANGE, "dep.wait_off", "a wait word past the data arena's end");
    r.dep = (paged_dep) { .flags = PAGED_DEP_WAIT, .wait_off = UINT64_MAX - 1, .wait_value = 1 };
    expect_refused(&cl, &r, PAGED_E_RANGE, "dep.wait_off", "a wait offset that overflows");
    r.dep = (paged_dep) { .flags = PAGED_DEP_SIGNAL, .signal_off = cl.words_off + 2, .signal_value = 1 };
    expect_refused(&cl, &r, PAGED_E_INVAL, "dep.signal_off", "a misaligned signal word");
    r.dep = (paged_dep) { .flags = PAGED_DEP_SIGNAL, .signal_off = dsize, .signal_value = 1 };
    expect_refused(&cl, &r, PAGED_E_RANGE, "dep.signal_off", "a signal word at the data arena's end");
    paged_request nop = { .op = PAGED_OP_NOP, .tag = 501,
                          .dep = { .flags = PAGED_DEP_SIGNAL, .signal_off = cl.words_off, .signal_value = 1 } };
    expect_refused(&cl, &nop, PAGED_E_INVAL, "flags", "a NOP with a dependency");
    paged_request alloc = { .op = PAGED_OP_ALLOC, .pool = cl.pool, .tag = 502,
                            .u.blocks = { .count = 1, .ids_off = cl.bt_off },
                            .dep = { .flags = PAGED_DEP_WAIT, .wait_off = cl.words_off, .wait_value = 0 } };
    expect_refused(&cl, &alloc, PAGED_E_INVAL, "flags", "an ALLOC with a dependency");
    r.dep = (paged_dep) { .flags = PAGED_DEP_HOST };
    expect_refused(&cl, &r, PAGED_E_INVAL, "flags", "PAGED_DEP_HOST without a wait or a signal");
    size_t hsize = 0;
    paged_arena_base(cl.c, PAGED_ARENA_HOST, &hsize);
    r.dep = (paged_dep) { .flags = PAGED_DEP_SIGNAL | PAGED_DEP_HOST, .signal_off = hsize - 2, .signal_value = 1 };
    expect_refused(&cl, &r, PAGED_E_RANGE, "dep.signal_off", "a host-arena signal word past its end");
    r.dep = (paged_dep) { .flags = 0x8 };
    check(paged_prep(cl.c, &r) == PAGED_E_INVAL && strstr(paged_client_error(cl.c), "dep.flags") != NULL,
          "an unknown dep flag is refused by the library (%s)", paged_client_error(cl.c));
    check(word(&cl, 0) == 0 && word(&cl, 1) == 0, "no refused request wrote a word");
    check(paged_nop(cl.c) == PAGED_OK, "the client goes on (NOP)");
    paged_client_close(cl.c);
}

/* dead: exits with a waiting request queued and its blocks held. Returns nothing (exits). */
static void dead_main(void)
{
    struct client cl;
    setup(&cl, "dead");
    struct dec d;
    paged_request r;
    make_decode(&cl, &d, 0, CTX0, &r, 600);
    r.dep = (paged_dep) { .flags = PAGED_DEP_WAIT | PAGED_DEP_SIGNAL, .wait_off = cl.words_off, .wait_value = 9,
                          .signal_off = cl.words_off + 4, .signal_value = 9 };
    submit_one(&cl, &r);
    if (inline_) {
        paged_completion comp;
        int got = await_one(&cl, &comp, WAIT_MS);
        check(got && comp.status == PAGED_OK, "its waiting DECODE was queued on the GPU (%s)",
              got ? paged_strerror(comp.status) : "none");
    } else {
        paged_completion comp;
        check(!await_one(&cl, &comp, 50), "its waiting DECODE stays in its ring");   /* a bounded look */
    }
    _exit(0);   /* no close: as a crash would leave it */
}

/* Polls (bounded) until pool "dep" has want free blocks; returns the last count seen. */
static uint32_t await_free(struct rc_client *ctl, uint32_t want)
{
    struct pcore_pool_item it = { .free = UINT32_MAX };
    for (int k = 0; k < 20000; k++) {
        if (rc_pool_item(ctl, "dep", &it) == 0 && it.free == want)
            break;
        td_pause_ms(1);
    }
    return it.free;
}

/* chain's main. Returns nothing. */
static void chain_main(void)
{
    struct client cl;
    setup(&cl, "chain");
    chain_hold(&cl);
    chain_pipeline(&cl, 10, 0);
    chain_pipeline(&cl, UINT32_MAX - 2, STEPS);   /* the words wrap */
    host_words = 1;
    chain_pipeline(&cl, 100, 2 * STEPS);
    paged_client_close(cl.c);
}

/* Forks a child running fn with its reports going to fd; returns its pid. */
static pid_t spawn_child(void (*fn)(void), int fd, int rfd)
{
    pid_t pid = bfork();
    if (pid == 0) {
        close(rfd);
        out_fd = fd;
        fn();
        _exit(0);
    }
    return pid;
}

/* Reads the children's reports from fd until every writer closed it, as TAP; returns how many. */
static int relay(int fd)
{
    FILE *f = fdopen(fd, "r");
    if (f == NULL)
        sysbail("fdopen");
    char line[PIPE_BUF + 2];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        ok(line[0] == '1', "%s", line + 2);
        n++;
    }
    fclose(f);
    return n;
}

/* Runs the children in fns (NULL-terminated) at once and relays their reports; with
 * first_ready, starts the others only once the first has said (a byte on ready_fd) that its
 * request is in. Returns nothing. */
static void run_children(const char *what, void (*const *fns)(void), int first_ready)
{
    int p[2], r[2] = { -1, -1 };
    if (pipe(p) < 0 || (first_ready && pipe(r) < 0))
        sysbail("pipe");
    pid_t pids[4];
    int n = 0;
    for (; fns[n] != NULL; n++) {
        if (n == 0 && first_ready)
            ready_fd = r[1];
        pids[n] = spawn_child(fns[n], p[1], p[0]);
        ready_fd = -1;
        if (n == 0 && first_ready) {
            close(r[1]);
            struct pollfd pfd = { .fd = r[0], .events = POLLIN };
            char byte = 0;
            int got = poll(&pfd, 1, WAIT_MS) == 1 && read(r[0], &byte, 1) == 1 && byte == 'S';
            close(r[0]);
            ok(got, "%s: the first child's request is in before the others start", what);
        }
    }
    close(p[1]);
    int reports = relay(p[0]);
    ok(reports > 0, "%s: the children reported %d checks", what, reports);
    for (int i = 0; i < n; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        is_int(0, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), "%s: child %d exits 0", what, i);
    }
}

/* Starts d with the dependency timeout ms and dependency-waits mode and creates pool "dep" on
 * it over *ctl; bails when it cannot. Returns whether the daemon runs the cuda backend. */
static int start(struct pagedd *d, int ms, const char *mode, struct rc_client *ctl)
{
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", ms);
    const char *extra[] = { "--threads", "2", "--dependency-timeout", timeout, "--dependency-waits", mode, NULL };
    int cuda = aio_start(d, extra);
    int rc = rc_connect(d->socket, "dep-t", PCORE_HELLO_CONTROL, ctl);
    if (rc == 0)
        rc = rc_pool_create(ctl, "dep", L, H, D, B, PAGED_DTYPE_F32, N, 0600, PCORE_ATTACH_WRITE, NULL, NULL);
    if (rc != 0)
        bail("pool 'dep' not created (dependency timeout %d ms): %s", ms, ctl->errmsg);
    return cuda;
}

/* Stops d (closing ctl), checks it exits 0 and whether it logged a late wait's disconnection
 * (late). Returns nothing. */
static void stop(struct pagedd *d, struct rc_client *ctl, const char *name, int late)
{
    rc_close(ctl);
    int st = pagedd_stop(d);
    ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: pagedd exits 0 on SIGTERM", name);
    ok(late == pagedd_log_contains(d, "dependency wait timed out"), "%s: the daemon logged %s", name,
       late ? "the disconnection for a late wait" : "no disconnection for a late wait");
    /* The engine's figures are debug lines: an info log has none of them. */
    ok(!pagedd_log_contains(d, "completion wake-ups per batch")
       && !pagedd_log_contains(d, "batches completed when queued"),
       "%s: the info log carries no engine activity lines", name);
    pagedd_cleanup(d);
}

/* Runs the dependency checks against a patient daemon (bad requests, chains) and then one that
 * times waits out (stuck, late and dead clients), in dependency-waits mode; returns nothing. */
static void run_mode(const char *mode)
{
    static int planned;
    struct rc_client ctl;
    inline_ = 0;
    use_cuda = start(&patient, PATIENT_MS, mode, &ctl);
    if (!planned) {
        plan_lazy();
        planned = 1;
    }
    inline_ = use_cuda && strcmp(mode, "inline") == 0;
    diag("dependency-waits = %s", mode);

    /* A daemon that would wait a minute: bad requests and correct chains. */
    static void (*const bad[])(void) = { bad_main, NULL };
    static void (*const chain[])(void) = { chain_main, NULL };
    daemon_ = &patient;
    run_children("bad", bad, 0);
    run_children("chain", chain, 0);
    struct pcore_msg_stats_reply sr;
    if (ok(rc_stats(&ctl, &sr) == 0, "STATS answers"))
        ok(use_cuda ? sr.engine.early_batches > 0 : sr.engine.early_batches == 0,
           "STATS: %llu batches completed early (%s)", (unsigned long long) sr.engine.early_batches,
           use_cuda ? "the cuda backend completes all-signalling batches when queued" : "none on the cpu backend");
    stop(&patient, &ctl, "patient", 0);

    /* One that times waits out after TIMEOUT_MS. */
    start(&strict, TIMEOUT_MS, mode, &ctl);
    daemon_ = &strict;
    static void (*const pair[])(void) = { stuck_main, bystander_main, NULL };
    run_children("stuck and bystander", pair, 1);
    static void (*const late[])(void) = { late_main, NULL };
    run_children("late", late, 0);

    uint32_t before = await_free(&ctl, N);
    ok(before == N, "every block is free again (%u of %d)", before, N);
    static void (*const dead[])(void) = { dead_main, NULL };
    run_children("dead", dead, 0);
    uint32_t after = await_free(&ctl, N);
    ok(after == N, "dead: the daemon reclaimed every block of the client that died with a waiting request "
       "(%u of %d free)", after, N);
    static void (*const again[])(void) = { bystander_main, NULL };
    run_children("after the dead client", again, 0);
    stop(&strict, &ctl, "strict", inline_);
}

/* Runs the checks with isolated waits and, on the cuda backend, inline ones too; returns 0
 * (TAP reports the result). */
int main(void)
{
    seed = tap_seed();
    run_mode("isolated");
    if (use_cuda)
        run_mode("inline");
    return 0;
}
