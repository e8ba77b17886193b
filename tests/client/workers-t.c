/* workers-t.c: several real client processes share one pool through pagedd, checked against the CPU reference. */
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
#include "tests/client/daemon_harness.h"
#include "tests/tap/basic.h"

/* A small 4-layer model with GQA 2. */
#define PL 4u
#define PH 2u
#define QH 4u
#define PD 64u
#define PB 16u
#define PN 512u
#define PROMPT 48u          /* the shared system prompt: 3 full blocks */
#define WORKERS 4           /* workers that run to the end */
#define SEQS 3              /* sequences per worker */
#define STEPS 8             /* decode steps per worker */
#define TOL 1e-4

static const char *pool_name = "workers";

/* What the parent prepared before forking: the workers see it as it was. */
static int32_t prompt_tokens[PROMPT];
static float *prompt_k, *prompt_v; /* [L][PROMPT][H][D] */
static uint64_t seed;

/* A worker's report to the parent. */
struct report {
    int setup_ok;           /* connect, attach, map */
    int prefix_ok;          /* adopted the prompt and its K/V reads back */
    int prefill_checks, decode_checks, failures;
    int publish_ok;
    double max_err;
    char why[160];
};

/* Records a failure's first explanation. */
static void fail_why(struct report *r, const char *why)
{
    r->failures++;
    if (r->why[0] == '\0')
        snprintf(r->why, sizeof r->why, "%s", why);
}

/* Compares n outputs with the reference; returns 1 when all are within tolerance. */
static int close_enough(struct report *r, const float *got, const float *want, size_t n)
{
    int good = 1;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double) got[i] - (double) want[i]);
        if (!(e <= TOL + TOL * fabs((double) want[i])))
            good = 0;
        if (e > r->max_err || isnan(e))
            r->max_err = isnan(e) ? INFINITY : e;
    }
    return good;
}

/* Fills the attention options of layer l: each layer another feature, as the kernels have. */
static void layer_opts(uint32_t l, paged_attn_args *a, pk_attn_opts *o, float *slopes)
{
    float scale = 1.0f / sqrtf((float) PD);
    a->sm_scale = l == 0 ? 0.0f : scale; /* 0 means the default, 1/sqrt(D) */
    a->soft_cap = l == 1 ? 20.0f : 0.0f;
    a->window = l == 2 ? 24 : 0;
    a->alibi_slopes = NULL;
    if (l == 3) {
        for (uint32_t h = 0; h < QH; h++)
            slopes[h] = exp2f(-(float) (h + 1));
        a->alibi_slopes = slopes;
    }
    *o = (pk_attn_opts) { .sm_scale = scale, .soft_cap = a->soft_cap, .window = a->window,
                          .alibi_slopes = a->alibi_slopes };
}

/* Builds the block-table matrix of seqs (stride = the longest table). */
static int32_t *block_tables(paged_seq **seqs, int n, uint32_t *stride)
{
    uint32_t w = 1, nb;
    for (int i = 0; i < n; i++) {
        paged_seq_blocks(seqs[i], &nb);
        if (nb > w)
            w = nb;
    }
    int32_t *bt = bcalloc((size_t) n * w, sizeof *bt);
    for (int i = 0; i < n; i++) {
        const int32_t *b = paged_seq_blocks(seqs[i], &nb);
        memcpy(bt + (size_t) i * w, b, nb * sizeof *b);
    }
    *stride = w;
    return bt;
}

/* Appends fresh random K and V for the n slots of every layer. Returns the status. */
static int append_random(tap_rng *rng, paged_pool *p, uint32_t n, const int32_t *slots)
{
    size_t count = (size_t) PL * n * PH * PD;
    float *k = bmalloc(count * sizeof *k), *v = bmalloc(count * sizeof *v);
    harness_fill(rng, k, count);
    harness_fill(rng, v, count);
    int rc = paged_append(p, PAGED_ALL_LAYERS, n, PAGED_DTYPE_F32, k, v, slots);
    free(k);
    free(v);
    return rc;
}

/* Runs PREFILL of every layer over the sequences' last qo[i] tokens and checks each output. */
static void prefill_check(tap_rng *rng, paged_pool *p, const pk_cache *cache, paged_seq **seqs,
                          int n, const int32_t *qo, struct report *r)
{
    int32_t *indptr = bcalloc((size_t) n + 1, sizeof *indptr), *lens = bcalloc((size_t) n, sizeof *lens);
    int32_t maxqo = 0;
    for (int i = 0; i < n; i++) {
        indptr[i + 1] = indptr[i] + qo[i];
        lens[i] = (int32_t) paged_seq_len(seqs[i]);
        maxqo = qo[i] > maxqo ? qo[i] : maxqo;
    }
    uint32_t stride;
    int32_t *bt = block_tables(seqs, n, &stride);
    size_t elems = (size_t) indptr[n] * QH * PD;
    float *q = bmalloc(elems * sizeof *q), *out = bmalloc(elems * sizeof *out);
    float *ref = bmalloc(elems * sizeof *ref), slopes[QH];
    for (uint32_t l = 0; l < PL; l++) {
        harness_fill(rng, q, elems);
        paged_attn_args a = { .num_seqs = (uint32_t) n, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32,
                              .q = q, .out = out, .block_tables = bt, .bt_stride = stride,
                              .seq_lens = lens, .qo_indptr = indptr };
        pk_attn_opts o;
        layer_opts(l, &a, &o, slopes);
        int rc = paged_prefill(p, (int32_t) l, &a);
        pk_prefill_args ra = { .cache = *cache, .layer = (int32_t) l, .num_seqs = n,
                               .num_q_heads = QH, .q_dtype = PAGED_DTYPE_F32, .causal = 1,
                               .total_q = indptr[n], .max_qo_len = maxqo, .q = q, .out = ref,
                               .qo_indptr = indptr, .block_tables = bt, .bt_stride = (int32_t) stride,
                               .seq_lens = lens, .opts = o };
        int rrc = pk_ref_prefill(&ra);
        r->prefill_checks++;
        if (rc != PAGED_OK || rrc != 0)
            fail_why(r, rc != PAGED_OK ? paged_strerror(rc) : "reference failed");
        else if (!close_enough(r, out, ref, elems))
            fail_why(r, "prefill output differs from the reference");
    }
    free(q);
    free(out);
    free(ref);
    free(bt);
    free(indptr);
    free(lens);
}

/* Runs DECODE of every layer for the sequences' last token and checks each output. */
static void decode_check(tap_rng *rng, paged_pool *p, const pk_cache *cache, paged_seq **seqs,
                         int n, struct report *r)
{
    int32_t *lens = bcalloc((size_t) n, sizeof *lens);
    for (int i = 0; i < n; i++)
        lens[i] = (int32_t) paged_seq_len(seqs[i]);
    uint32_t stride;
    int32_t *bt = block_tables(seqs, n, &stride);
    size_t elems = (size_t) n * QH * PD;
    float *q = bmalloc(elems * sizeof *q), *out = bmalloc(elems * sizeof *out);
    float *ref = bmalloc(elems * sizeof *ref), slopes[QH];
    for (uint32_t l = 0; l < PL; l++) {
        harness_fill(rng, q, elems);
        paged_attn_args a = { .num_seqs = (uint32_t) n, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32,
                              .q = q, .out = out, .block_tables = bt, .bt_stride = stride,
                              .seq_lens = lens };
        pk_attn_opts o;
        layer_opts(l, &a, &o, slopes);
        int rc = paged_decode(p, (int32_t) l, &a);
        pk_decode_args ra = { .cache = *cache, .layer = (int32_t) l, .num_seqs = n,
                              .num_q_heads = QH, .q_dtype = PAGED_DTYPE_F32, .q = q, .out = ref,
                              .block_tables = bt, .bt_stride = (int32_t) stride, .seq_lens = lens,
                              .opts = o };
        int rrc = pk_ref_decode(&ra);
        r->decode_checks++;
        if (rc != PAGED_OK || rrc != 0)
            fail_why(r, rc != PAGED_OK ? paged_strerror(rc) : "reference failed");
        else if (!close_enough(r, out, ref, elems))
            fail_why(r, "decode output differs from the reference");
    }
    free(q);
    free(out);
    free(ref);
    free(bt);
    free(lens);
}

/* Checks that the adopted prompt blocks hold the prompt's K and V, in every layer. */
static int prompt_reads_back(const pk_cache *cache, const paged_seq *s)
{
    uint32_t nb;
    const int32_t *b = paged_seq_blocks(s, &nb);
    const float *pool = cache->base;
    int same = nb == PROMPT / PB;
    for (uint32_t l = 0; same && l < PL; l++)
        for (uint32_t t = 0; t < PROMPT; t++)
            for (uint32_t h = 0; h < PH; h++) {
                size_t at = pk_cache_index(cache, (int32_t) l, 0, b[t / PB], (int32_t) h, (int32_t) (t % PB));
                size_t av = pk_cache_index(cache, (int32_t) l, 1, b[t / PB], (int32_t) h, (int32_t) (t % PB));
                size_t src = (((size_t) l * PROMPT + t) * PH + h) * PD;
                same &= memcmp(pool + at, prompt_k + src, PD * sizeof(float)) == 0
                        && memcmp(pool + av, prompt_v + src, PD * sizeof(float)) == 0;
            }
    return same;
}

/* Connects, attaches and maps; returns 1 on success with *c, *p and *cache set. */
static int worker_setup(const struct pagedd *h, paged_client **c, paged_pool **p, pk_cache *cache)
{
    paged_connect_opts o = { .socket_path = h->socket };
    if (paged_client_connect(&o, c) != PAGED_OK || paged_pool_attach(*c, pool_name, p) != PAGED_OK)
        return 0;
    void *base = NULL;
    if (paged_pool_map(*p, &base) != PAGED_OK)
        return 0;
    *cache = (pk_cache) { .base = base, .num_layers = PL, .num_blocks = PN, .num_kv_heads = PH,
                          .head_dim = PD, .block_size = PB, .dtype = PAGED_DTYPE_F32,
                          .k_scale = 1.0f, .v_scale = 1.0f };
    return 1;
}

/* One worker's life: sequences sharing the prompt, prefill, decode steps with a fork,
 * publish, everything checked. Fills *r. */
static void worker_run(const struct pagedd *h, int id, struct report *r)
{
    tap_rng rng;
    tap_rng_seed(&rng, seed + 1 + (uint64_t) id);
    paged_client *c = NULL;
    paged_pool *p = NULL;
    pk_cache cache;
    r->setup_ok = worker_setup(h, &c, &p, &cache);
    if (!r->setup_ok) {
        fail_why(r, "setup failed");
        paged_client_close(c);
        return;
    }
    paged_seq *seqs[SEQS + 1] = { NULL };
    int32_t qo[SEQS], slots[64], toks[64];
    r->prefix_ok = 1;
    for (int s = 0; s < SEQS; s++) {
        paged_seq_create(p, 1, &seqs[s]);
        long got = paged_seq_adopt_prefix(seqs[s], prompt_tokens, PROMPT);
        r->prefix_ok &= got == PROMPT && prompt_reads_back(&cache, seqs[s]);
        qo[s] = 1 + (int32_t) tap_rng_below(&rng, 40);
        for (int i = 0; i < qo[s]; i++)
            toks[i] = (int32_t) tap_rng_below(&rng, 50000);
        if (paged_seq_extend(seqs[s], (uint32_t) qo[s], toks, slots) != PAGED_OK
            || append_random(&rng, p, (uint32_t) qo[s], slots) != PAGED_OK)
            fail_why(r, "extend or append failed");
    }
    prefill_check(&rng, p, &cache, seqs, SEQS, qo, r);
    int n = SEQS;
    for (int step = 0; step < STEPS; step++) {
        if (step == STEPS / 2) {
            /* Beam-search style: the fork shares every block, then both write. */
            if (paged_seq_fork(seqs[0], &seqs[SEQS]) == PAGED_OK)
                n = SEQS + 1;
            else
                fail_why(r, "fork failed");
        }
        for (int s = 0; s < n; s++) {
            toks[0] = (int32_t) tap_rng_below(&rng, 50000);
            if (paged_seq_extend(seqs[s], 1, toks, slots) != PAGED_OK
                || append_random(&rng, p, 1, slots) != PAGED_OK)
                fail_why(r, "decode step: extend or append failed");
        }
        decode_check(&rng, p, &cache, seqs, n, r);
    }
    r->publish_ok = 1;
    for (int s = 0; s < n; s++)
        r->publish_ok &= paged_seq_publish(seqs[s]) >= 0;
    for (int s = 0; s < n; s++)
        paged_seq_destroy(seqs[s]);
    paged_pool_detach(p);
    paged_client_close(c);
}

/*
 * The victim: keeps several DECODE requests in flight through the async API and never
 * stops on its own (bounded, long past the kill), after writing 'R' to ready_fd once the
 * stream runs. Killed with SIGKILL by the parent.
 */
static void victim_run(const struct pagedd *h, int ready_fd)
{
    paged_client *c = NULL;
    paged_pool *p = NULL;
    pk_cache cache;
    if (!worker_setup(h, &c, &p, &cache))
        _exit(3);
    paged_seq *s = NULL;
    int32_t slots[40], toks[40];
    paged_seq_create(p, 1, &s);
    paged_seq_adopt_prefix(s, prompt_tokens, PROMPT);
    for (int i = 0; i < 40; i++)
        toks[i] = i;
    tap_rng rng;
    tap_rng_seed(&rng, seed ^ 0x5eed);
    if (paged_seq_extend(s, 40, toks, slots) != PAGED_OK || append_random(&rng, p, 40, slots) != PAGED_OK)
        _exit(4);
    uint32_t nb;
    const int32_t *bt = paged_seq_blocks(s, &nb);
    uint64_t bt_off, len_off, q_off, out_off;
    int32_t *host = paged_arena_base(c, PAGED_ARENA_HOST, NULL);
    float *data = paged_arena_base(c, PAGED_ARENA_DATA, NULL);
    paged_arena_alloc(c, PAGED_ARENA_HOST, nb * 4, 4, &bt_off);
    paged_arena_alloc(c, PAGED_ARENA_HOST, 4, 4, &len_off);
    paged_arena_alloc(c, PAGED_ARENA_DATA, QH * PD * 4, 0, &q_off);
    /* Each request in flight writes an output of its own. */
    paged_arena_alloc(c, PAGED_ARENA_DATA, 8 * QH * PD * 4, 0, &out_off);
    memcpy(host + bt_off / 4, bt, nb * 4);
    host[len_off / 4] = (int32_t) paged_seq_len(s);
    harness_fill(&rng, data + q_off / 4, QH * PD);
    int told = 0;
    for (int round = 0; round < 200000; round++) {
        for (int i = 0; i < 8; i++) {
            paged_request rq = { .op = PAGED_OP_DECODE, .pool = p, .layer = i % (int) PL,
                                 .tag = (uint64_t) i,
                                 .u.attn = { .num_seqs = 1, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32,
                                             .q_off = q_off,
                                             .out_off = out_off + (uint64_t) i * QH * PD * 4,
                                             .block_tables_off = bt_off, .bt_stride = nb,
                                             .seq_lens_off = len_off } };
            paged_prep(c, &rq);
        }
        paged_submit(c);
        if (!told) {
            if (write(ready_fd, "R", 1) != 1)
                _exit(5);
            told = 1;
        }
        paged_completion got[8];
        int have = 0;
        for (int i = 0; i < 100 && have < 8; i++) {
            int k = paged_wait(c, got, 8, 1000);
            if (k < 0)
                _exit(6);
            have += k;
        }
    }
    _exit(7);
}

/* Starts worker id (the victim when id < 0) in a child; returns its pid and the read end of
 * its report pipe. */
static pid_t spawn(const struct pagedd *h, int id, paged_client *parent_client, int *rfd)
{
    int fds[2];
    if (pipe(fds) != 0)
        sysbail("pipe");
    pid_t pid = bfork();
    if (pid == 0) {
        close(fds[0]);
        /* The parent's client is inherited: drop our copy, use a connection of our own. */
        paged_client_close(parent_client);
        if (id < 0)
            victim_run(h, fds[1]);
        struct report r;
        memset(&r, 0, sizeof r);
        worker_run(h, id, &r);
        int wrote = write(fds[1], &r, sizeof r) == (ssize_t) sizeof r;
        _exit(wrote && r.failures == 0 ? 0 : 1);
    }
    close(fds[1]);
    *rfd = fds[0];
    return pid;
}

/* Publishes the prompt, runs the workers and the victim, then checks every block came back. */
int main(void)
{
    plan_lazy();
    seed = tap_seed();
    tap_rng rng;
    tap_rng_seed(&rng, seed);
    struct pagedd h;
    harness_start(&h);
    paged_client *c = harness_client(&h);
    paged_pool_desc d = { .name = pool_name, .num_layers = PL, .num_kv_heads = PH, .head_dim = PD,
                          .block_size = PB, .dtype = PAGED_DTYPE_F32, .num_blocks = PN };
    paged_pool *p = NULL;
    if (paged_pool_create(c, &d, &p) != PAGED_OK)
        bail("creating the pool: %s", paged_client_error(c));

    /* The shared system prompt, computed once and published for every worker. */
    for (uint32_t i = 0; i < PROMPT; i++)
        prompt_tokens[i] = (int32_t) tap_rng_below(&rng, 50000);
    size_t count = (size_t) PL * PROMPT * PH * PD;
    prompt_k = bmalloc(count * sizeof *prompt_k);
    prompt_v = bmalloc(count * sizeof *prompt_v);
    harness_fill(&rng, prompt_k, count);
    harness_fill(&rng, prompt_v, count);
    paged_seq *prompt = NULL;
    int32_t slots[PROMPT];
    paged_seq_create(p, 1, &prompt);
    is_int(PAGED_OK, paged_seq_extend(prompt, PROMPT, prompt_tokens, slots), "parent: prompt of %u tokens", PROMPT);
    is_int(PAGED_OK, paged_append(p, PAGED_ALL_LAYERS, PROMPT, PAGED_DTYPE_F32, prompt_k, prompt_v, slots),
           "parent: prompt K and V appended");
    is_int(PROMPT / PB, paged_seq_publish(prompt), "parent: the prompt's %u blocks published", PROMPT / PB);
    paged_seq_destroy(prompt); /* cached now: findable, and held by nobody */

    struct harness_counts before = { 0 }, after = { 0 };
    int listed = harness_pool_counts(&h, pool_name, &before);
    ok(listed == 0, "pool counts before: free %u, referenced %u, cached %u", before.free,
       before.referenced, before.cached);

    pid_t pids[WORKERS];
    int rfds[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pids[i] = spawn(&h, i, c, &rfds[i]);
    int vfd;
    pid_t victim = spawn(&h, -1, c, &vfd);

    /* Kill the victim once its request stream runs. */
    struct pollfd pf = { .fd = vfd, .events = POLLIN };
    char ch = 0;
    int ready = poll(&pf, 1, 30000) == 1 && read(vfd, &ch, 1) == 1 && ch == 'R';
    ok(ready, "victim: its request stream started");
    kill(victim, SIGKILL);
    int status;
    waitpid(victim, &status, 0);
    ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "victim: killed with SIGKILL mid-stream");
    close(vfd);

    for (int i = 0; i < WORKERS; i++) {
        struct report r;
        memset(&r, 0, sizeof r);
        ssize_t got = read(rfds[i], &r, sizeof r);
        close(rfds[i]);
        waitpid(pids[i], &status, 0);
        ok(got == (ssize_t) sizeof r && r.setup_ok, "worker %d: connected, attached, mapped the pool", i);
        ok(r.prefix_ok, "worker %d: adopted the published prompt of every sequence, K/V read back", i);
        ok(r.prefill_checks == PL && r.decode_checks == STEPS * (int) PL,
           "worker %d: ran %d prefill and %d decode batches", i, r.prefill_checks, r.decode_checks);
        ok(r.failures == 0, "worker %d: every output matches the reference (max error %.2g)%s%s", i,
           r.max_err, r.why[0] ? ": " : "", r.why);
        ok(r.publish_ok, "worker %d: published its sequences' full blocks", i);
        ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "worker %d: exited cleanly", i);
    }

    /* The killed client's references go when the daemon sees its socket hang up. */
    int reclaimed = harness_wait_unreferenced(&h, pool_name, &after);
    ok(reclaimed == 0,
       "after: no block referenced (free %u, referenced %u, cached %u)", after.free, after.referenced,
       after.cached);
    is_int(before.free + before.cached, after.free + after.cached,
           "after: free plus cached blocks are back to their starting %u", before.free + before.cached);
    ok(after.cached >= before.cached, "after: published blocks stay cached for others");
    /* A fresh client takes every block: cached ones are evicted, none may be held. */
    paged_pool_detach(p);
    paged_client_close(c);
    c = harness_client(&h);
    if (paged_pool_attach(c, pool_name, &p) != PAGED_OK)
        bail("attach from a fresh client: %s", paged_client_error(c));
    int32_t *all = bmalloc(PN * sizeof *all);
    is_int(PAGED_OK, paged_alloc(p, PN, all), "after: a fresh client allocates all %u blocks", PN);
    int32_t one;
    is_int(PAGED_E_NOSPC, paged_alloc(p, 1, &one), "after: and one more is PAGED_E_NOSPC");
    paged_free(p, PN, all);
    free(all);
    paged_pool_detach(p);
    paged_client_close(c);
    harness_stop(&h);
    free(prompt_k);
    free(prompt_v);
    return 0;
}
