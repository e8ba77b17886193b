/* torture-t.c: checked decode workers keep going while another client is SIGKILLed again and again. */
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

#include "kernels/kernels.h"
#include "paged.h"
#include "tests/hard/hard.h"
#include "tests/service/proc.h"

/* Both pools: 2 layers, 2 KV heads (GQA 2), head_dim 64, blocks of 16 tokens, f32. */
#define L 2
#define H 2
#define QH 4
#define D 64
#define B 16
#define NA 256            /* pool "work": the survivors and the victims */
#define NB 64             /* pool "victim": the victims only, so its counts are exact */
#define PROMPT 32         /* the published system prompt of each pool: 2 blocks */
#define SURVIVORS 8
#define SEQS 2            /* sequences per survivor */
#define TOL 1e-4
#define KILLS_SHORT 200
#define KILLS_LONG 1000
#define INFLIGHT 8        /* a victim's requests in flight at once */
#define RECLAIM_WAIT_MS 10000

/* The victim's markers: it writes one to the parent just before each phase. */
enum {
    PH_CONNECTED,         /* connected and attached, pools mapped */
    PH_LOOKUP,            /* taking published blocks by LOOKUP */
    PH_APPEND,            /* a large APPEND in flight */
    PH_FORKED,            /* holding forked (shared) blocks */
    PH_PUBLISH,           /* publishing, then holding published blocks */
    PH_SHARED,            /* holding the prompt blocks the survivors share */
    PH_SUBMIT,            /* requests prepared, being submitted */
    PH_INFLIGHT,          /* requests submitted, completions not reaped */
    PH_COUNT
};
static const char *const phase_names[PH_COUNT] = {
    "connected", "lookup", "mid-append", "holding forked", "publishing", "holding shared",
    "mid-submit", "between request and completion",
};

static struct pagedd daemon_;
static uint64_t seed;
static int32_t prompt_tokens[PROMPT];
static float *prompt_k, *prompt_v;   /* [L][PROMPT][H][D], the same in both pools */

/* A survivor's report to the parent. */
struct report {
    long steps, checks, wrong, errors;
    double max_err;
    char why[160];
};

/* Records a survivor's failure and its first reason; returns nothing. */
static void fail_why(struct report *r, int wrong, const char *why, int rc)
{
    if (wrong)
        r->wrong++;
    else
        r->errors++;
    if (r->why[0] == '\0')
        snprintf(r->why, sizeof r->why, "%s%s%s", why, rc != 0 ? ": " : "", rc != 0 ? paged_strerror(rc) : "");
}

/* Returns a private cache of the pools' geometry with num_blocks blocks, zeroed. */
static pk_cache private_cache(int32_t num_blocks)
{
    pk_cache c = { NULL, L, num_blocks, H, D, B, PAGED_DTYPE_F32, 1.0f, 1.0f };
    c.base = bcalloc(pk_cache_bytes(&c), 1);
    return c;
}

/* Mirrors an APPEND of n tokens (all layers) into a private cache; returns nothing. */
static void mirror_append(pk_cache *c, uint32_t n, const float *k, const float *v, const int32_t *slots)
{
    pk_append_args a = { .cache = *c, .layer_begin = 0, .num_layers = L, .num_tokens = (int32_t) n,
                         .src_dtype = PAGED_DTYPE_F32, .k = k, .v = v, .slot_mapping = slots };
    if (pk_ref_append(&a) != 0)
        bail("reference append failed");
}

/* Mirrors the copy of block src to dst into a private cache; returns nothing. */
static void mirror_copy(pk_cache *c, int32_t src, int32_t dst)
{
    pk_copy_args a = { .cache = *c, .num_pairs = 1, .src_blocks = &src, .dst_blocks = &dst };
    if (pk_ref_copy(&a) != 0)
        bail("reference copy failed");
}

/* Starts a survivor's sequence on the pool's prompt; mirrors the prompt into its private
 * cache. Returns the sequence or NULL (with the failure recorded). */
static paged_seq *seq_start(paged_pool *p, pk_cache *mine, struct report *r)
{
    paged_seq *s = NULL;
    int rc = paged_seq_create(p, 1, &s);
    if (rc != PAGED_OK) {
        fail_why(r, 0, "seq_create", rc);
        return NULL;
    }
    long got = paged_seq_adopt_prefix(s, prompt_tokens, PROMPT);
    if (got != PROMPT) {
        fail_why(r, 0, "adopting the published prompt", got < 0 ? (int) got : 0);
        paged_seq_destroy(s);
        return NULL;
    }
    int32_t slots[PROMPT];
    uint32_t nb;
    const int32_t *b = paged_seq_blocks(s, &nb);
    for (int t = 0; t < PROMPT; t++)
        slots[t] = b[t / B] * B + t % B;
    mirror_append(mine, PROMPT, prompt_k, prompt_v, slots);
    return s;
}

/* Adds one token with random K and V to s, in the pool and the private cache, following a
 * copy-on-write the library made. Returns 0 or -1 (recorded). */
static int seq_step(tap_rng *rng, paged_pool *p, pk_cache *mine, paged_seq *s, struct report *r)
{
    uint32_t nb0;
    const int32_t *b0 = paged_seq_blocks(s, &nb0);
    int32_t last = nb0 > 0 ? b0[nb0 - 1] : -1, slot, tok = (int32_t) tap_rng_below(rng, 50000);
    int rc = paged_seq_extend(s, 1, &tok, &slot);
    if (rc != PAGED_OK) {
        fail_why(r, 0, "extend", rc);
        return -1;
    }
    uint32_t nb1;
    const int32_t *b1 = paged_seq_blocks(s, &nb1);
    if (nb0 > 0 && b1[nb0 - 1] != last)
        mirror_copy(mine, last, b1[nb0 - 1]);
    float k[L * H * D], v[L * H * D];
    hard_fill(rng, k, L * H * D);
    hard_fill(rng, v, L * H * D);
    rc = paged_append(p, PAGED_ALL_LAYERS, 1, PAGED_DTYPE_F32, k, v, &slot);
    if (rc != PAGED_OK) {
        fail_why(r, 0, "append", rc);
        return -1;
    }
    mirror_append(mine, 1, k, v, &slot);
    return 0;
}

/* Runs DECODE of every layer over the sequences and checks each output against the
 * reference on the private cache; returns nothing. */
static void decode_check(tap_rng *rng, paged_pool *p, pk_cache *mine, paged_seq **seqs, int n,
                         struct report *r)
{
    enum { MAXBT = 16 };
    int32_t bt[SEQS * MAXBT] = { 0 }, lens[SEQS];
    for (int i = 0; i < n; i++) {
        uint32_t nb;
        const int32_t *b = paged_seq_blocks(seqs[i], &nb);
        memcpy(bt + i * MAXBT, b, (nb < MAXBT ? nb : MAXBT) * sizeof *b);
        lens[i] = (int32_t) paged_seq_len(seqs[i]);
    }
    float q[SEQS * QH * D], out[SEQS * QH * D], ref[SEQS * QH * D];
    for (int l = 0; l < L; l++) {
        hard_fill(rng, q, (size_t) n * QH * D);
        paged_attn_args a = { .num_seqs = (uint32_t) n, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32,
                              .q = q, .out = out, .block_tables = bt, .bt_stride = MAXBT,
                              .seq_lens = lens };
        int rc = paged_decode(p, l, &a);
        r->checks++;
        if (rc != PAGED_OK) {
            fail_why(r, 0, "decode", rc);
            continue;
        }
        pk_decode_args ra = { .cache = *mine, .layer = l, .num_seqs = n, .num_q_heads = QH,
                              .q_dtype = PAGED_DTYPE_F32, .q = q, .out = ref, .block_tables = bt,
                              .bt_stride = MAXBT, .seq_lens = lens,
                              .opts = { 1.0f / sqrtf((float) D), 0.0f, 0, NULL } };
        if (pk_ref_decode(&ra) != 0)
            bail("reference decode failed");
        for (int i = 0; i < n * QH * D; i++) {
            double e = fabs((double) out[i] - (double) ref[i]);
            if (!(e <= TOL + TOL * fabs((double) ref[i]))) {
                fail_why(r, 1, "decode output differs from the reference", 0);
                break;
            }
            if (e > r->max_err)
                r->max_err = e;
        }
    }
}

/*
 * A survivor: SEQS sequences on the shared prompt grow a token per step (K and V appended,
 * mirrored into a private cache), each step decoded in every layer and checked; a sequence
 * that reaches its length starts over, half the time as a fork of the other one. Runs
 * until stop_fd turns readable; writes 'R' once set up, then its report, to report_fd.
 */
static void survivor(int id, int stop_fd, int report_fd)
{
    struct report r;
    memset(&r, 0, sizeof r);
    tap_rng rng;
    tap_rng_seed(&rng, seed * 977 + (uint64_t) id);
    char name[32];
    snprintf(name, sizeof name, "survivor-%d", id);
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = name, .host_arena_size = 1 << 20 };
    paged_client *c = NULL;
    paged_pool *p = NULL;
    int rc = paged_client_connect(&o, &c);
    if (rc == PAGED_OK)
        rc = paged_pool_attach(c, "work", &p);
    if (rc != PAGED_OK)
        _exit(2);
    pk_cache mine = private_cache(NA);
    paged_seq *seqs[SEQS];
    int32_t life[SEQS];
    for (int i = 0; i < SEQS; i++) {
        seqs[i] = seq_start(p, &mine, &r);
        life[i] = PROMPT + 1 + (int32_t) tap_rng_below(&rng, 48);
        if (seqs[i] == NULL)
            _exit(3);
    }
    if (write(report_fd, "R", 1) != 1)
        _exit(4);
    for (long step = 0; step < 100000000L; step++) {
        struct pollfd pf = { .fd = stop_fd, .events = POLLIN };
        if (poll(&pf, 1, 0) != 0)
            break;
        for (int i = 0; i < SEQS; i++) {
            if ((int32_t) paged_seq_len(seqs[i]) >= life[i]) {
                paged_seq_destroy(seqs[i]);
                seqs[i] = NULL;
                int other = (i + 1) % SEQS;
                if (tap_rng_below(&rng, 2) == 0 && paged_seq_len(seqs[other]) < 100
                    && (rc = paged_seq_fork(seqs[other], &seqs[i])) != PAGED_OK)
                    fail_why(&r, 0, "fork", rc);
                if (seqs[i] == NULL && (seqs[i] = seq_start(p, &mine, &r)) == NULL)
                    _exit(5);
                life[i] = (int32_t) paged_seq_len(seqs[i]) + 1 + (int32_t) tap_rng_below(&rng, 48);
            }
            if (seq_step(&rng, p, &mine, seqs[i], &r) < 0)
                _exit(6);
        }
        decode_check(&rng, p, &mine, seqs, SEQS, &r);
        r.steps++;
    }
    for (int i = 0; i < SEQS; i++)
        paged_seq_destroy(seqs[i]);
    paged_pool_detach(p);
    paged_client_close(c);
    free(mine.base);
    _exit(write(report_fd, &r, sizeof r) == (ssize_t) sizeof r ? 0 : 7);
}

/* Writes the victim's next phase marker; exits if the parent is gone. Returns nothing. */
static void mark(int fd, int phase)
{
    unsigned char ch = (unsigned char) phase;
    if (write(fd, &ch, 1) != 1)
        _exit(40);
}

/* Fails a victim step: exits with code unless rc is PAGED_OK. Returns nothing. */
static void must(int rc, int code)
{
    if (rc != PAGED_OK)
        _exit(code);
}

/*
 * A victim: connects, maps both pools, takes published blocks by LOOKUP, appends, forks,
 * publishes, holds the survivors' prompt blocks, then streams DECODE requests with
 * INFLIGHT in flight, writing a phase marker to mark_fd before each step. It never stops
 * on its own; the parent kills it at one of the markers.
 */
static void victim(int mark_fd)
{
    tap_rng rng;
    tap_rng_seed(&rng, seed ^ (uint64_t) getpid() << 20);
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = "victim", .sq_entries = 16,
                             .host_arena_size = 1 << 20 };
    paged_client *c = NULL;
    paged_pool *work = NULL, *vp = NULL;
    must(paged_client_connect(&o, &c), 20);
    must(paged_pool_attach(c, "work", &work), 21);
    must(paged_pool_attach(c, "victim", &vp), 22);
    void *base;
    must(paged_pool_map(work, &base), 23);
    must(paged_pool_map(vp, &base), 24);
    mark(mark_fd, PH_CONNECTED);

    /* Published blocks of the victim pool, found by LOOKUP. */
    paged_seq *v0 = NULL, *v1 = NULL, *w0 = NULL;
    must(paged_seq_create(vp, 1, &v0), 25);
    mark(mark_fd, PH_LOOKUP);
    if (paged_seq_adopt_prefix(v0, prompt_tokens, PROMPT) != PROMPT)
        _exit(26);

    /* A large APPEND of new tokens after them. */
    enum { NEW = 40 }; /* 72 tokens: the last block partial, so the fork copies it */
    int32_t toks[NEW], slots[NEW];
    for (int i = 0; i < NEW; i++)
        toks[i] = (int32_t) tap_rng_below(&rng, 50000);
    must(paged_seq_extend(v0, NEW, toks, slots), 27);
    static float k[L * NEW * H * D], v[L * NEW * H * D];
    hard_fill(&rng, k, sizeof k / sizeof k[0]);
    hard_fill(&rng, v, sizeof v / sizeof v[0]);
    mark(mark_fd, PH_APPEND);
    must(paged_append(vp, PAGED_ALL_LAYERS, NEW, PAGED_DTYPE_F32, k, v, slots), 28);

    /* Forked: v1 shares every block of v0; its first token copies the partial last one. */
    must(paged_seq_fork(v0, &v1), 29);
    mark(mark_fd, PH_FORKED);
    must(paged_seq_extend(v1, 1, toks, slots), 30);
    must(paged_append(vp, PAGED_ALL_LAYERS, 1, PAGED_DTYPE_F32, k, v, slots), 31);

    mark(mark_fd, PH_PUBLISH);
    if (paged_seq_publish(v0) < 0)
        _exit(32);

    /* The survivors' prompt, and a tail of our own, in the shared pool. */
    must(paged_seq_create(work, 1, &w0), 33);
    mark(mark_fd, PH_SHARED);
    if (paged_seq_adopt_prefix(w0, prompt_tokens, PROMPT) != PROMPT)
        _exit(34);
    must(paged_seq_extend(w0, 5, toks, slots), 35);
    must(paged_append(work, PAGED_ALL_LAYERS, 5, PAGED_DTYPE_F32, k, v, slots), 36);

    /* The stream: DECODE over both pools, INFLIGHT at a time. */
    paged_seq *seqs[2] = { w0, v0 };
    paged_pool *pools[2] = { work, vp };
    uint64_t bt_off[2], len_off[2], q_off, out_off;
    int32_t *host = paged_arena_base(c, PAGED_ARENA_HOST, NULL);
    float *data = paged_arena_base(c, PAGED_ARENA_DATA, NULL);
    uint32_t nbs[2];
    for (int i = 0; i < 2; i++) {
        const int32_t *b = paged_seq_blocks(seqs[i], &nbs[i]);
        must(paged_arena_alloc(c, PAGED_ARENA_HOST, nbs[i] * 4, 4, &bt_off[i]), 37);
        must(paged_arena_alloc(c, PAGED_ARENA_HOST, 4, 4, &len_off[i]), 37);
        memcpy(host + bt_off[i] / 4, b, nbs[i] * 4);
        host[len_off[i] / 4] = (int32_t) paged_seq_len(seqs[i]);
    }
    must(paged_arena_alloc(c, PAGED_ARENA_DATA, QH * D * 4, 0, &q_off), 38);
    must(paged_arena_alloc(c, PAGED_ARENA_DATA, INFLIGHT * QH * D * 4, 0, &out_off), 38);
    hard_fill(&rng, data + q_off / 4, QH * D);
    for (int round = 0; round < 1000000; round++) {
        for (int i = 0; i < INFLIGHT; i++) {
            int which = i & 1;
            paged_request rq = { .op = PAGED_OP_DECODE, .pool = pools[which], .layer = i % L,
                                 .tag = (uint64_t) i,
                                 .u.attn = { .num_seqs = 1, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32,
                                             .q_off = q_off, .out_off = out_off + (uint64_t) i * QH * D * 4,
                                             .block_tables_off = bt_off[which], .bt_stride = nbs[which],
                                             .seq_lens_off = len_off[which] } };
            must(paged_prep(c, &rq), 39);
        }
        mark(mark_fd, PH_SUBMIT);
        if (paged_submit(c) != INFLIGHT)
            _exit(41);
        mark(mark_fd, PH_INFLIGHT);
        paged_completion got[INFLIGHT];
        int have = 0;
        for (int i = 0; i < 1000 && have < INFLIGHT; i++) {
            int n = paged_wait(c, got, INFLIGHT, 10000);
            if (n < 0)
                _exit(42);
            for (int j = 0; j < n; j++)
                if (got[j].status != PAGED_OK)
                    _exit(43);
            have += n;
        }
        if (have != INFLIGHT)
            _exit(44);
    }
    _exit(45);
}

/* The pool counts and the victim's listing, polled until the victim's references are all
 * back: pool "victim" has none referenced and free + cached is whole, and no client of
 * the victim's pid is listed. Returns 1 when reclaimed, 0 if not within RECLAIM_WAIT_MS. */
static int wait_reclaimed(struct rc_client *ctl, pid_t pid, struct pcore_pool_item *last)
{
    uint64_t deadline = hard_now_ns() + (uint64_t) RECLAIM_WAIT_MS * 1000000u;
    for (int i = 0; i < 1000000; i++) {
        if (rc_pool_item(ctl, "victim", last) != 0)
            bail("LIST pools failed");
        int listed = hard_client_by_pid(ctl, pid, NULL);
        if (listed < 0)
            bail("LIST clients failed: %s", paged_strerror(listed));
        if (last->referenced == 0 && last->free + last->cached == NB && listed == 0)
            return 1;
        if (hard_now_ns() > deadline)
            return 0;
        td_pause_us(100);
    }
    return 0;
}

/* Orders uint64_t values, for qsort. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return (x > y) - (x < y);
}

/* Publishes the prompt in pool p; bails on failure. Returns nothing. */
static void publish_prompt(paged_pool *p)
{
    paged_seq *s = NULL;
    int32_t slots[PROMPT];
    if (paged_seq_create(p, 1, &s) != PAGED_OK || paged_seq_extend(s, PROMPT, prompt_tokens, slots) != PAGED_OK
        || paged_append(p, PAGED_ALL_LAYERS, PROMPT, PAGED_DTYPE_F32, prompt_k, prompt_v, slots) != PAGED_OK
        || paged_seq_publish(s) != PROMPT / B)
        bail("publishing the prompt failed");
    paged_seq_destroy(s); /* cached now: held by nobody, found by LOOKUP */
}

/* Creates the pools and publishes the prompt in both; bails on failure. Returns nothing. */
static void setup_pools(void)
{
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = "torture-setup" };
    paged_client *c = NULL;
    paged_pool *work = NULL, *vp = NULL;
    if (paged_client_connect(&o, &c) != PAGED_OK)
        bail("setup cannot connect");
    paged_pool_desc d = { .name = "work", .num_layers = L, .num_kv_heads = H, .head_dim = D,
                          .block_size = B, .dtype = PAGED_DTYPE_F32, .num_blocks = NA };
    if (paged_pool_create(c, &d, &work) != PAGED_OK)
        bail("creating pool work: %s", paged_client_error(c));
    d.name = "victim";
    d.num_blocks = NB;
    if (paged_pool_create(c, &d, &vp) != PAGED_OK)
        bail("creating pool victim: %s", paged_client_error(c));
    publish_prompt(work);
    publish_prompt(vp);
    paged_client_close(c);
}

/* Forks a child that closes the descriptors listed in fds (count n, -1 skipped) and the
 * control connection, then runs fn(a, b, cfd). Returns its pid. */
static pid_t spawn_child(const int *fds, int n, struct rc_client *ctl, void (*fn)(int, int, int),
                         int a, int b, int cfd)
{
    pid_t pid = bfork();
    if (pid == 0) {
        close(ctl->sock);
        for (int i = 0; i < n; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        fn(a, b, cfd);
        _exit(99);
    }
    return pid;
}

/* Runs survivor(a, b, c): the spawn_child adapter. Returns nothing. */
static void run_survivor(int a, int b, int c)
{
    survivor(a, b, c);
}

/* Runs victim(c): the spawn_child adapter. Returns nothing. */
static void run_victim(int a, int b, int c)
{
    (void) a;
    (void) b;
    victim(c);
}

/* Sets up the daemon and pools, runs the survivors and the kills, checks the reports. */
int main(void)
{
    seed = tap_seed();
    plan_lazy();
    int kills = hard_long() ? KILLS_LONG : KILLS_SHORT;
    tap_rng rng;
    tap_rng_seed(&rng, seed);
    for (int i = 0; i < PROMPT; i++)
        prompt_tokens[i] = (int32_t) tap_rng_below(&rng, 50000);
    size_t pn = (size_t) L * PROMPT * H * D;
    prompt_k = bmalloc(pn * sizeof *prompt_k);
    prompt_v = bmalloc(pn * sizeof *prompt_v);
    hard_fill(&rng, prompt_k, pn);
    hard_fill(&rng, prompt_v, pn);

    const char *args[] = { "--log-level=warning", NULL };
    int st;
    if (pagedd_start(&daemon_, args, NULL, &st) != 0)
        bail("pagedd did not start (status %d)", st);
    setup_pools();
    struct rc_client ctl;
    if (rc_connect(daemon_.socket, "torture-ctl", PCORE_HELLO_CONTROL, &ctl) != 0)
        bail("control connection failed: %s", ctl.errmsg);
    struct pcore_pool_item vi;
    is_int(0, rc_pool_item(&ctl, "victim", &vi), "LIST pools finds pool victim");
    ok(vi.referenced == 0 && vi.free + vi.cached == NB && vi.cached == PROMPT / B,
       "pool victim at the start: %u free, %u cached, %u referenced", vi.free, vi.cached, vi.referenced);

    /* The survivors. */
    int stop[2];
    if (pipe(stop) < 0)
        sysbail("pipe");
    int rfd[SURVIVORS];
    pid_t spid[SURVIVORS];
    int closers[SURVIVORS + 2];
    for (int i = 0; i < SURVIVORS; i++) {
        int rp[2];
        if (pipe(rp) < 0)
            sysbail("pipe");
        int n = 0;
        closers[n++] = stop[1];
        closers[n++] = rp[0];
        for (int j = 0; j < i; j++)
            closers[n++] = rfd[j];
        spid[i] = spawn_child(closers, n, &ctl, run_survivor, i, stop[0], rp[1]);
        close(rp[1]);
        rfd[i] = rp[0];
    }
    close(stop[0]);
    int ready = 0;
    for (int i = 0; i < SURVIVORS; i++) {
        char ch;
        ready += hard_read_full(rfd[i], &ch, 1, 30000) && ch == 'R';
    }
    is_int(SURVIVORS, ready, "%d survivors connected and run checked decode steps", SURVIVORS);

    /* The kills. */
    long per_phase[PH_COUNT] = { 0 };
    uint64_t *times = bcalloc((size_t) kills, sizeof *times); /* reclaim times after SIGKILL */
    int killed = 0, reclaimed = 0, victim_failures = 0;
    uint64_t worst_kill_ns = 0, worst_reap_ns = 0, sum_kill_ns = 0;
    int worst_phase = 0;
    uint64_t t_start = hard_now_ns();
    for (int k = 0; k < kills; k++) {
        int mp[2];
        if (pipe(mp) < 0)
            sysbail("pipe");
        int closers2[SURVIVORS + 2], n = 0;
        closers2[n++] = stop[1];
        closers2[n++] = mp[0];
        for (int j = 0; j < SURVIVORS; j++)
            closers2[n++] = rfd[j];
        /* Past PH_INFLIGHT the markers repeat (submit, in flight) round after round. */
        int target = (int) tap_rng_below(&rng, PH_COUNT + 4);
        pid_t vpid = spawn_child(closers2, n, &ctl, run_victim, 0, 0, mp[1]);
        close(mp[1]);
        int seen = 0, phase = -1;
        unsigned char ch;
        while (seen <= target && hard_read_full(mp[0], &ch, 1, 30000)) {
            phase = ch;
            seen++;
        }
        uint64_t t_kill = hard_now_ns();
        kill(vpid, SIGKILL);
        int vst;
        waitpid(vpid, &vst, 0);
        uint64_t t_reap = hard_now_ns();
        close(mp[0]);
        if (seen <= target || !WIFSIGNALED(vst) || WTERMSIG(vst) != SIGKILL) {
            victim_failures++;
            diag("victim %d failed on its own before marker %d (saw %d, status %d)", k, target, seen, vst);
            if (victim_failures > 5)
                break;
            continue;
        }
        killed++;
        if (phase >= 0 && phase < PH_COUNT)
            per_phase[phase]++;
        struct pcore_pool_item last;
        if (!wait_reclaimed(&ctl, vpid, &last)) {
            diag("kill %d (%s): not reclaimed within %d ms: %u free, %u cached, %u referenced", k,
                 phase >= 0 && phase < PH_COUNT ? phase_names[phase] : "?", RECLAIM_WAIT_MS, last.free,
                 last.cached, last.referenced);
            continue;
        }
        uint64_t t_back = hard_now_ns();
        times[reclaimed++] = t_back - t_kill;
        sum_kill_ns += t_back - t_kill;
        if (t_back - t_kill > worst_kill_ns) {
            worst_kill_ns = t_back - t_kill;
            worst_phase = phase;
        }
        if (t_back - t_reap > worst_reap_ns)
            worst_reap_ns = t_back - t_reap;
    }
    double secs = (double) (hard_now_ns() - t_start) / 1e9;
    is_int(kills, killed, "%d victims killed with SIGKILL at their chosen point (%.1f s)", kills, secs);
    is_int(0, victim_failures, "no victim failed before its kill");
    is_int(killed, reclaimed, "after every kill the victim's blocks were back (pool victim whole, "
           "client gone) within %d ms", RECLAIM_WAIT_MS);
    for (int p = 0; p < PH_COUNT; p++)
        diag("kills %s: %ld", phase_names[p], per_phase[p]);
    qsort(times, (size_t) reclaimed, sizeof *times, cmp_u64);
    diag("worst reclaim: %.2f ms after SIGKILL (%s), %.2f ms after waitpid; mean %.2f ms, median %.2f ms, "
         "99th percentile %.2f ms after SIGKILL", (double) worst_kill_ns / 1e6, phase_names[worst_phase],
         (double) worst_reap_ns / 1e6, reclaimed ? (double) sum_kill_ns / 1e6 / reclaimed : 0.0,
         reclaimed ? (double) times[reclaimed / 2] / 1e6 : 0.0,
         reclaimed ? (double) times[(size_t) reclaimed * 99 / 100] / 1e6 : 0.0);
    free(times);

    /* Stop the survivors and read their reports. */
    close(stop[1]);
    long steps = 0, checks = 0;
    for (int i = 0; i < SURVIVORS; i++) {
        struct report r;
        memset(&r, 0, sizeof r);
        int wst;
        int got = hard_child_report(rfd[i], spid[i], &r, sizeof r, 60000, &wst);
        ok(got && WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "survivor %d reported and exited cleanly (status %d)",
           i, wst);
        ok(r.wrong == 0 && r.errors == 0, "survivor %d: %ld steps, %ld decode checks, %ld wrong, %ld errors "
           "(max error %.2g)%s%s", i, r.steps, r.checks, r.wrong, r.errors, r.max_err, r.why[0] ? ": " : "", r.why);
        ok(r.steps > 0, "survivor %d made progress during the kills", i);
        steps += r.steps;
        checks += r.checks;
    }
    diag("survivors: %ld decode steps, %ld checked decode outputs during %d kills", steps, checks, killed);

    /* Everyone gone: both pools are whole again. */
    const char *names[2] = { "work", "victim" };
    const uint32_t sizes[2] = { NA, NB };
    for (int i = 0; i < 2; i++) {
        struct pcore_pool_item it;
        memset(&it, 0, sizeof it);
        for (int t = 0; t < 10000; t++) {
            if (rc_pool_item(&ctl, names[i], &it) != 0 || it.referenced == 0)
                break;
            td_pause_us(1000);
        }
        ok(it.referenced == 0 && it.free + it.cached == sizes[i],
           "pool %s whole at the end: %u free, %u cached, %u referenced", names[i], it.free, it.cached,
           it.referenced);
    }
    rc_close(&ctl);
    st = pagedd_stop(&daemon_);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exited cleanly on SIGTERM (status %d)", st);
    pagedd_cleanup(&daemon_);
    free(prompt_k);
    free(prompt_v);
    return 0;
}
