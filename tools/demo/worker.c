/* worker.c: one paged-demo worker process: a libpaged client serving a batch of sequences. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/demo/worker.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/clock.h"
#include "paged.h"
#include "tools/demo/shadow.h"
#include "tools/demo/stage.h"

/*
 * This file is the example to copy: everything it asks of the daemon goes through the
 * public API of <paged.h>. A worker connects, creates the shared pool (or attaches to it
 * if another worker was first), builds its sequences' prompts, sharing the common prefix
 * through the prefix cache, then decodes: each step appends one new token per sequence
 * (its K and V for every layer at once) and runs DECODE layer by layer for the whole
 * batch. The outputs are kept and checked against the CPU reference afterwards, so the
 * timed loop measures the service alone. Tensors live in host memory; on the cuda backend
 * the stages (stage.h) copy them to and from the device around each call.
 */

/* How long worker 0 may take to publish the prefix before the others give up on it. */
#define DEMO_PUBLISH_WAIT_MS 60000

/* One sequence: its handle, and the token ids it will hold (prompt, then decoded tokens). */
struct demo_seq {
    paged_seq *seq;
    int32_t *tokens;
};

/* Everything one worker holds. */
struct worker {
    const struct demo_worker_args *a;
    const struct demo_model *m;
    struct demo_result *r;
    paged_client *client;
    paged_pool *pool;
    struct demo_seq *seqs;
    uint32_t total_len;          /* tokens per sequence at the end */
    struct demo_shadow shadow;   /* our own copy of the K/V, for the reference check */
    struct demo_stage k_stage, v_stage, q_stage, out_stage;
    float sm_scale;
    /* Decode history, [step][layer][seq] rows, checked once the timed loop is over. */
    unsigned char *q_hist, *out_hist;
    int32_t *lens_hist;          /* [step][seq] context lengths */
    int64_t reported_ns;         /* when the last report went, 0: none yet */
};

/* Reports the result so far to the parent (through the args' callback): at once when the
 * phase changes, else when the last report is DEMO_REPORT_MS old. Returns nothing. */
static void report(struct worker *w, enum demo_phase phase)
{
    int64_t now = (int64_t) pcore_now_ns();
    if (w->r->phase == (int32_t) phase && w->reported_ns != 0
        && now - w->reported_ns < (int64_t) DEMO_REPORT_MS * 1000000)
        return;
    w->r->phase = (int32_t) phase;
    w->reported_ns = now;
    if (w->a->report != NULL)
        w->a->report(w->a->report_ctx, w->r);
}

/* Records the first failure: what was being done and the library's explanation. Returns rc. */
__attribute__((format(printf, 3, 4)))
static int fail(struct worker *w, int rc, const char *fmt, ...)
{
    if (w->r->status != PAGED_OK)
        return rc;
    char what[120];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *detail = w->client != NULL ? paged_client_error(w->client) : "";
    snprintf(w->r->error, sizeof w->r->error, "%s: %s%s%s%s", what, paged_strerror(rc),
             *detail != '\0' ? " (" : "", detail, *detail != '\0' ? ")" : "");
    w->r->status = rc;
    return rc;
}

/* Connects and creates the pool, or attaches to it when another worker created it first.
 * Returns PAGED_OK or an error. */
static int open_pool(struct worker *w)
{
    char name[64];
    snprintf(name, sizeof name, "demo-worker-%u", w->a->index);
    paged_connect_opts opts = { .socket_path = w->a->socket, .name = name };
    int rc = paged_client_connect(&opts, &w->client);
    if (rc != PAGED_OK)
        return fail(w, rc, "connecting to %s", w->a->socket);
    w->r->client_id = paged_client_id(w->client);
    w->r->backend = (int32_t) paged_client_backend(w->client);
    /* The synchronous calls take device pointers on the cuda backend. */
    char why[160];
    int on_device = paged_client_backend(w->client) == PAGED_BACKEND_CUDA;
    struct demo_stage *stages[] = { &w->k_stage, &w->v_stage, &w->q_stage, &w->out_stage };
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++)
        if (demo_stage_init(stages[i], on_device, why, sizeof why) < 0)
            return fail(w, PAGED_E_NOTSUP, "%s", why);

    paged_pool_desc desc = {
        .name = w->a->pool_name,
        .num_layers = w->m->num_layers,
        .num_kv_heads = w->m->num_kv_heads,
        .head_dim = w->m->head_dim,
        .block_size = w->m->block_size,
        .dtype = w->m->dtype,
        .num_blocks = w->a->pool_blocks,
        .mode = 0600,
    };
    rc = paged_pool_create(w->client, &desc, &w->pool);
    w->r->created = rc == PAGED_OK;
    if (rc == PAGED_E_EXIST)
        rc = paged_pool_attach(w->client, w->a->pool_name, &w->pool);
    if (rc != PAGED_OK)
        return fail(w, rc, "opening pool '%s'", w->a->pool_name);
    paged_pool_info info;
    paged_pool_get_info(w->pool, &info);
    w->r->pool_id = info.id;
    w->r->pool_blocks = info.num_blocks;
    w->r->pool_bytes = info.bytes;
    return PAGED_OK;
}

/* Creates the sequences and makes up their token ids. Returns PAGED_OK or an error. */
static int make_sequences(struct worker *w)
{
    const struct demo_worker_args *a = w->a;
    uint64_t rng = a->seed ^ (0x5851f42d4c957f2du * (a->index + 1));
    w->seqs = calloc(a->num_seqs, sizeof *w->seqs);
    if (w->seqs == NULL)
        return fail(w, PAGED_E_NOMEM, "allocating sequences");
    for (uint32_t i = 0; i < a->num_seqs; i++) {
        struct demo_seq *s = &w->seqs[i];
        s->tokens = malloc(w->total_len * sizeof *s->tokens);
        if (s->tokens == NULL)
            return fail(w, PAGED_E_NOMEM, "allocating tokens");
        for (uint32_t t = 0; t < w->total_len; t++)
            s->tokens[t] = t < a->prefix_len ? demo_prefix_token(t)
                                             : (int32_t) (demo_rand(&rng) % 32000u);
        int rc = paged_seq_create(w->pool, w->m->salt, &s->seq);
        if (rc != PAGED_OK)
            return fail(w, rc, "creating sequence %u", i);
    }
    return PAGED_OK;
}

/* APPENDs n tokens' K and V (host tensors, every layer) to slots, through the stages.
 * Returns PAGED_OK or an error. */
static int append_kv(struct worker *w, uint32_t n, const void *k, const void *v,
                     const int32_t *slots)
{
    char why[160];
    size_t bytes = demo_kv_bytes(w->m, n);
    const void *dk = demo_stage_in(&w->k_stage, k, bytes, why, sizeof why);
    const void *dv = dk != NULL ? demo_stage_in(&w->v_stage, v, bytes, why, sizeof why) : NULL;
    if (dv == NULL)
        return fail(w, PAGED_E_DEVICE, "staging K and V: %s", why);
    return paged_append(w->pool, PAGED_ALL_LAYERS, n, w->m->dtype, dk, dv, slots);
}

/* DECODEs one layer with args->q and args->out in host memory, through the stages.
 * Returns PAGED_OK or an error. */
static int decode_layer(struct worker *w, int32_t layer, const paged_attn_args *args)
{
    char why[160];
    size_t bytes = demo_q_bytes(w->m, args->num_seqs);
    paged_attn_args a = *args;
    a.q = demo_stage_in(&w->q_stage, args->q, bytes, why, sizeof why);
    a.out = a.q != NULL ? demo_stage_out(&w->out_stage, args->out, bytes, why, sizeof why) : NULL;
    if (a.out == NULL)
        return fail(w, PAGED_E_DEVICE, "staging queries: %s", why);
    int rc = paged_decode(w->pool, layer, &a);
    if (rc == PAGED_OK && demo_stage_back(&w->out_stage, args->out, bytes, why, sizeof why) < 0)
        return fail(w, PAGED_E_DEVICE, "fetching outputs: %s", why);
    return rc;
}

/*
 * Adds tokens [from, to) of sequence i: to the pool (extend the sequence, which allocates
 * blocks and returns the slots, then APPEND their K and V for every layer) when to_pool,
 * and always to our own copy. Returns PAGED_OK or an error.
 */
static int add_tokens(struct worker *w, uint32_t i, uint32_t from, uint32_t to, int to_pool)
{
    uint32_t n = to - from;
    if (n == 0)
        return PAGED_OK;
    size_t bytes = demo_kv_bytes(w->m, n);
    void *k = malloc(bytes), *v = malloc(bytes);
    int32_t *pos = malloc(n * sizeof *pos), *slots = malloc(n * sizeof *slots);
    uint32_t *seq = malloc(n * sizeof *seq);
    int rc = PAGED_E_NOMEM;
    if (k == NULL || v == NULL || pos == NULL || slots == NULL || seq == NULL) {
        fail(w, rc, "allocating K/V");
        goto out;
    }
    for (uint32_t t = 0; t < n; t++) {
        pos[t] = (int32_t) (from + t);
        seq[t] = i;
    }
    demo_model_kv(w->m, n, w->seqs[i].tokens + from, pos, k, v);
    if (to_pool) {
        rc = paged_seq_extend(w->seqs[i].seq, n, w->seqs[i].tokens + from, slots);
        if (rc != PAGED_OK) {
            fail(w, rc, "extending sequence %u by %u tokens", i, n);
            goto out;
        }
        rc = append_kv(w, n, k, v, slots);
        if (rc != PAGED_OK) {
            fail(w, rc, "appending %u tokens to sequence %u", n, i);
            goto out;
        }
    }
    rc = demo_shadow_append(&w->shadow, n, seq, pos, k, v);
    if (rc != PAGED_OK)
        fail(w, rc, "reference append");
out:
    free(k);
    free(v);
    free(pos);
    free(slots);
    free(seq);
    return rc;
}

/*
 * Waits for worker 0 to say the prefix is published: a byte on the pipe, or its end of
 * the pipe closing if it failed (then we find nothing to adopt and compute the prefix
 * ourselves). Bounded by DEMO_PUBLISH_WAIT_MS.
 */
static void wait_for_prefix(struct worker *w)
{
    struct pollfd p = { .fd = w->a->wait_fd, .events = POLLIN };
    char byte;
    int rc;
    do
        rc = poll(&p, 1, DEMO_PUBLISH_WAIT_MS);
    while (rc < 0 && errno == EINTR);
    if (rc > 0 && read(w->a->wait_fd, &byte, 1) < 0)
        return;
}

/*
 * Builds every prompt. Worker 0 computes the shared prefix once in its first sequence and
 * publishes its full blocks; every other sequence adopts the longest published prefix
 * (taking references to those blocks, without computing or copying anything) and
 * computes only what it did not find. Then each sequence appends its own suffix.
 * Returns PAGED_OK or an error.
 */
static int build_prompts(struct worker *w)
{
    const struct demo_worker_args *a = w->a;
    uint32_t first = 0;
    int rc;
    if (a->index == 0) {
        rc = add_tokens(w, 0, 0, a->prefix_len, 1);
        if (rc != PAGED_OK)
            return rc;
        rc = paged_seq_publish(w->seqs[0].seq);
        if (rc < 0)
            return fail(w, rc, "publishing the prefix");
        w->r->published = (uint32_t) rc;
        for (uint32_t i = 1; i < a->num_workers; i++)
            if (write(a->published_fd, "P", 1) != 1)
                break;
        first = 1;
    } else
        wait_for_prefix(w);

    for (uint32_t i = first; i < a->num_seqs; i++) {
        long got = paged_seq_adopt_prefix(w->seqs[i].seq, w->seqs[i].tokens, a->prefix_len);
        if (got < 0)
            return fail(w, (int) got, "adopting the prefix for sequence %u", i);
        w->r->adopted += (uint32_t) got;
        w->r->adopted_seqs += got > 0;
        /* Our copy gets the adopted part too: that is how the check sees what we adopted. */
        rc = add_tokens(w, i, 0, (uint32_t) got, 0);
        if (rc == PAGED_OK)
            rc = add_tokens(w, i, (uint32_t) got, a->prefix_len, 1);
        if (rc != PAGED_OK)
            return rc;
    }
    for (uint32_t i = 0; i < a->num_seqs; i++) {
        rc = add_tokens(w, i, a->prefix_len, a->prefix_len + a->suffix_len, 1);
        if (rc != PAGED_OK)
            return rc;
        w->r->seqs_built = i + 1;
        report(w, DEMO_PHASE_BUILD);
    }
    return PAGED_OK;
}

/* Returns the address of one decode-history row block: step, layer, all sequences. */
static unsigned char *hist(const struct worker *w, unsigned char *base, uint32_t step,
                           uint32_t layer)
{
    return base + ((size_t) step * w->m->num_layers + layer) * demo_q_bytes(w->m, w->a->num_seqs);
}

/*
 * Fills the batch's block tables ([num_seqs][stride], stride the longest table) and
 * context lengths from the sequences. Short rows are padded with their own last block,
 * which the daemon never reads past the sequence's length anyway. Returns the stride.
 */
static uint32_t batch_tables(struct worker *w, int32_t **tables, size_t *cap, int32_t *lens)
{
    uint32_t stride = 1, n;
    for (uint32_t i = 0; i < w->a->num_seqs; i++) {
        paged_seq_blocks(w->seqs[i].seq, &n);
        if (n > stride)
            stride = n;
    }
    if ((size_t) stride * w->a->num_seqs > *cap) {
        int32_t *grown = realloc(*tables, (size_t) stride * w->a->num_seqs * sizeof **tables);
        if (grown == NULL)
            return 0;
        *tables = grown;
        *cap = (size_t) stride * w->a->num_seqs;
    }
    for (uint32_t i = 0; i < w->a->num_seqs; i++) {
        const int32_t *blocks = paged_seq_blocks(w->seqs[i].seq, &n);
        for (uint32_t b = 0; b < stride; b++)
            (*tables)[(size_t) i * stride + b] = blocks[b < n ? b : n - 1];
        lens[i] = (int32_t) paged_seq_len(w->seqs[i].seq);
    }
    return stride;
}

/*
 * The timed loop: per step, one new token per sequence (extend, then APPEND its K and V
 * for every layer in one request for the whole batch), then one DECODE per layer for the
 * whole batch. Queries and outputs go to the history for the check. Returns PAGED_OK or
 * an error.
 */
static int decode(struct worker *w)
{
    const struct demo_model *m = w->m;
    uint32_t ns = w->a->num_seqs;
    size_t kv = demo_kv_bytes(m, ns);
    void *k = malloc(kv), *v = malloc(kv);
    int32_t *tokens = malloc(ns * sizeof *tokens), *pos = malloc(ns * sizeof *pos);
    int32_t *slots = malloc(ns * sizeof *slots), *tables = NULL;
    size_t cap = 0;
    int rc = PAGED_E_NOMEM;
    if (k == NULL || v == NULL || tokens == NULL || pos == NULL || slots == NULL) {
        fail(w, rc, "allocating the batch");
        goto out;
    }
    w->r->start_ns = (int64_t) pcore_now_ns();
    for (uint32_t step = 0; step < w->a->steps; step++) {
        for (uint32_t i = 0; i < ns; i++) {
            pos[i] = (int32_t) paged_seq_len(w->seqs[i].seq);
            tokens[i] = w->seqs[i].tokens[pos[i]];
            rc = paged_seq_extend(w->seqs[i].seq, 1, &tokens[i], &slots[i]);
            if (rc != PAGED_OK) {
                fail(w, rc, "step %u: extending sequence %u", step, i);
                goto out;
            }
        }
        demo_model_kv(m, ns, tokens, pos, k, v);
        rc = append_kv(w, ns, k, v, slots);
        if (rc != PAGED_OK) {
            fail(w, rc, "step %u: append", step);
            goto out;
        }
        int32_t *lens = w->lens_hist + (size_t) step * ns;
        uint32_t stride = batch_tables(w, &tables, &cap, lens);
        if (stride == 0) {
            rc = fail(w, PAGED_E_NOMEM, "allocating block tables");
            goto out;
        }
        for (uint32_t layer = 0; layer < m->num_layers; layer++) {
            paged_attn_args args = {
                .num_seqs = ns,
                .num_q_heads = m->num_q_heads,
                .dtype = m->dtype,
                .q = hist(w, w->q_hist, step, layer),
                .out = hist(w, w->out_hist, step, layer),
                .block_tables = tables,
                .bt_stride = stride,
                .seq_lens = lens,
                .sm_scale = w->sm_scale,
            };
            rc = decode_layer(w, (int32_t) layer, &args);
            if (rc != PAGED_OK) {
                fail(w, rc, "step %u: decode layer %u", step, layer);
                goto out;
            }
        }
        w->r->decode_tokens += ns;
        w->r->steps_done = step + 1;
        report(w, DEMO_PHASE_DECODE);
    }
    w->r->end_ns = (int64_t) pcore_now_ns();
out:
    free(k);
    free(v);
    free(tokens);
    free(pos);
    free(slots);
    free(tables);
    return rc;
}

/* Checks every decode output against the reference on our own copy. Returns PAGED_OK or
 * the reference's error; mismatches are counted, not errors. */
static int check(struct worker *w)
{
    uint32_t ns = w->a->num_seqs, start = w->a->prefix_len + w->a->suffix_len;
    int rc;
    for (uint32_t i = 0; i < ns; i++) {
        rc = add_tokens(w, i, start, start + w->a->steps, 0);
        if (rc != PAGED_OK)
            return rc;
    }
    for (uint32_t step = 0; step < w->a->steps; step++)
        for (uint32_t layer = 0; layer < w->m->num_layers; layer++) {
            long bad = demo_shadow_check(&w->shadow, (int32_t) layer, ns,
                                         w->lens_hist + (size_t) step * ns, w->sm_scale,
                                         hist(w, w->q_hist, step, layer),
                                         hist(w, w->out_hist, step, layer));
            if (bad < 0)
                return fail(w, (int) bad, "reference decode");
            w->r->outputs += ns;
            w->r->mismatches += (uint64_t) bad;
            report(w, DEMO_PHASE_CHECK);
        }
    return PAGED_OK;
}

/* Allocates the decode history and makes up every query. Returns PAGED_OK or an error. */
static int make_history(struct worker *w, uint64_t *rng)
{
    uint32_t ns = w->a->num_seqs;
    size_t rows = (size_t) w->a->steps * w->m->num_layers;
    w->q_hist = malloc(rows * demo_q_bytes(w->m, ns));
    w->out_hist = malloc(rows * demo_q_bytes(w->m, ns));
    w->lens_hist = malloc((size_t) w->a->steps * ns * sizeof *w->lens_hist);
    if (w->q_hist == NULL || w->out_hist == NULL || w->lens_hist == NULL)
        return fail(w, PAGED_E_NOMEM, "allocating the decode history");
    demo_model_queries(w->m, rng, (uint32_t) (rows * ns), w->q_hist);
    return PAGED_OK;
}

/* Runs one worker from connect to close. Returns r->status. */
int demo_worker_run(const struct demo_worker_args *a, struct demo_result *r)
{
    struct worker w = { .a = a, .m = a->model, .r = r };
    uint64_t rng = a->seed + a->index;
    memset(r, 0, sizeof *r);
    r->index = a->index;
    r->pid = (int32_t) getpid();
    w.total_len = a->prefix_len + a->suffix_len + a->steps;
    w.sm_scale = 1.0f / sqrtf((float) a->model->head_dim);

    int rc = demo_shadow_init(&w.shadow, w.m, a->num_seqs, w.total_len);
    if (rc != PAGED_OK)
        fail(&w, rc, "allocating the reference copy");
    if (rc == PAGED_OK)
        rc = open_pool(&w);
    if (rc == PAGED_OK)
        rc = make_sequences(&w);
    if (rc == PAGED_OK)
        rc = make_history(&w, &rng);
    if (rc == PAGED_OK)
        rc = build_prompts(&w);
    /* Worker 0 lets the others go even when it failed: they then find nothing to adopt. */
    if (a->published_fd >= 0)
        close(a->published_fd);
    report(&w, DEMO_PHASE_DECODE);
    a->barrier(a->barrier_ctx);
    if (rc == PAGED_OK)
        rc = decode(&w);
    report(&w, DEMO_PHASE_CHECK);
    a->barrier(a->barrier_ctx);
    if (rc == PAGED_OK)
        rc = check(&w);

    for (uint32_t i = 0; w.seqs != NULL && i < a->num_seqs; i++) {
        if (w.seqs[i].seq != NULL)
            paged_seq_destroy(w.seqs[i].seq);
        free(w.seqs[i].tokens);
    }
    free(w.seqs);
    if (w.pool != NULL)
        paged_pool_detach(w.pool);
    paged_client_close(w.client);
    demo_shadow_free(&w.shadow);
    demo_stage_free(&w.k_stage);
    demo_stage_free(&w.v_stage);
    demo_stage_free(&w.q_stage);
    demo_stage_free(&w.out_stage);
    free(w.q_hist);
    free(w.out_hist);
    free(w.lens_hist);
    r->phase = DEMO_PHASE_DONE;
    return r->status;
}
