/* client.c: one client process of the service benchmark: a libpaged client running decode steps of the model. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paged.h"
#include "lib/core/clock.h"
#include "lib/core/wake.h"
#include "tools/bench/bench.h"
#include "tools/bench/service.h"
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>

#include "tools/bench/gpu.h"
#endif

/*
 * paged-bench re-executes itself as "paged-bench _client ..." for each client, so a client
 * starts with a clean process (a CUDA context does not survive fork) and uses only the
 * public API of <paged.h>. It attaches to the pool the parent created, takes its blocks,
 * fills its sequences' contexts, says it is ready and waits for the start, then runs the
 * timed loop: per step and layer, APPEND one token per sequence and DECODE the batch,
 * prepared together, submitted together, both completions awaited before the next layer
 * (the next layer's queries depend on this one's output). The tensors live in the client's
 * data arena (device memory on the cuda backend), where a worker would produce them, so
 * nothing is copied per request.
 *
 * With --deps (PAGED_BENCH_DEPS) the dependency between layers goes through dependency words
 * instead: layer l's APPEND waits for word W to reach l's number and signals word Y, its
 * DECODE signals word X, and before submitting layer l the client waits for X to reach layer
 * l-1's number (the output the next layer's queries would be computed from) and then writes
 * W. It submits every layer of a step without waiting for completions (posted when the daemon
 * queues the work, reaped as they come) and awaits the step's last X. With --deps=host the
 * words are in the host arena (PAGED_DEP_HOST) and the client waits and writes from its CPU,
 * as a worker chaining from the host, or one whose GPU work runs under MPS, would; with
 * --deps=device they are in the data arena and the client queues the wait and the write on a
 * stream of its own with paged_stream_wait and paged_stream_signal, as a worker chaining its
 * own GPU work would (by kernels under MPS, by stream operations otherwise, which costs GPU
 * context switches between it and the daemon).
 */

/* Everything one client holds. */
struct client {
    unsigned index;
    struct svc_run run;
    paged_client *c;
    paged_pool *pool;
    int cuda;                      /* the daemon's backend is cuda: the data arena is device memory */
    unsigned char *host;           /* host arena base */
    unsigned char *data;           /* data arena base (host or device pointer) */
    unsigned nblk;                 /* blocks per sequence */
    int32_t *ids;                  /* [batch][nblk] our blocks */
    uint64_t tables_off, lens_off, slots_off, pslots_off;  /* host arena */
    uint64_t q_off[SVC_LAYERS], out_off[SVC_LAYERS], k_off[SVC_LAYERS], v_off[SVC_LAYERS];
    uint64_t pk_off, pv_off;       /* prompt chunk K and V, [layers][chunk][H][D] */
    enum bench_deps deps;          /* --deps */
    uint64_t words_off;            /* --deps: W, X, Y in the arena deps says */
    uint32_t *words;               /* their host address (host words, or the cpu backend) */
    void *stream;                  /* --deps=device on cuda: the client's own stream */
    unsigned word_flags;           /* --deps=device on cuda: how the stream reaches the words (PAGED_STREAM_*) */
    unsigned step, layer;          /* where the loop is, for the longest request */
    struct svc_result *res;        /* where the longest request is noted */
};

/* Maps client c's arenas for who (a name for messages); see bench.h. */
int bench_client_arenas(paged_client *c, const char *who, int *cuda, unsigned char **host, unsigned char **data)
{
    *cuda = paged_client_backend(c) == PAGED_BACKEND_CUDA;
#ifndef HAVE_CUDA
    if (*cuda)
        bench_die("%s: the daemon runs the cuda backend, but this paged-bench was built without CUDA and "
                  "cannot fill device memory", who);
#endif
    size_t hsize = 0, dsize = 0;
    *host = paged_arena_base(c, PAGED_ARENA_HOST, &hsize);
    *data = paged_arena_base(c, PAGED_ARENA_DATA, &dsize);
    if (*host == NULL || *data == NULL)
        return PAGED_E_NOMEM;
#ifdef HAVE_CUDA
    if (*cuda) {
        /* Work on the device the daemon exported the arena from. */
        struct cudaPointerAttributes attr;
        bg_check((int) cudaPointerGetAttributes(&attr, *data), "%s: locating the device arena", who);
        bg_use_device(attr.device);
    }
#endif
    return PAGED_OK;
}

/* Dies naming the client, what failed, the error and the library's explanation. */
static void fail(const struct client *cl, int rc, const char *what)
{
    const char *detail = cl->c != NULL ? paged_client_error(cl->c) : "";
    bench_die("client %u: %s: %s%s%s%s", cl->index, what, paged_strerror(rc), *detail ? " (" : "", detail,
              *detail ? ")" : "");
}

#ifdef HAVE_CUDA
/* --deps=device: how a client's stream waits for and writes its words: by kernels or by stream
 * operations as PAGED_BENCH_DEP_KERNELS says (1 or 0), else as libpaged decides (kernels under
 * MPS). Returns the PAGED_STREAM_* flags. */
static unsigned stream_word_flags(void)
{
    const char *force = getenv("PAGED_BENCH_DEP_KERNELS");
    if (force != NULL && strcmp(force, "1") == 0)
        return PAGED_STREAM_KERNEL;
    if (force != NULL && strcmp(force, "0") == 0)
        return PAGED_STREAM_MEMOP;
    return PAGED_STREAM_AUTO;
}
#endif

/* Returns an arena offset of size bytes, or dies. */
static uint64_t carve(struct client *cl, paged_arena_kind kind, size_t size)
{
    uint64_t off = 0;
    int rc = paged_arena_alloc(cl->c, kind, size, 256, &off);
    if (rc != PAGED_OK)
        fail(cl, rc, kind == PAGED_ARENA_HOST ? "carving the host arena" : "carving the data arena");
    return off;
}

/* Copies n bytes of host memory into the data arena at off; returns nothing. */
static void put_data(struct client *cl, uint64_t off, const void *src, size_t n)
{
#ifdef HAVE_CUDA
    if (cl->cuda) {
        bg_check((int) cudaMemcpy(cl->data + off, src, n, cudaMemcpyHostToDevice),
                 "client %u: copying into the device arena", cl->index);
        return;
    }
#endif
    memcpy(cl->data + off, src, n);
}

/* Fills n bf16 elements of the data arena at off with random values; returns nothing. */
static void fill_data(struct client *cl, uint64_t off, size_t n, uint64_t seed)
{
    uint16_t *h = bench_alloc(n * SVC_ELEM, "random data");
    bench_fill_host(h, 0, n, PAGED_DTYPE_BF16, 1.0f, 1.0f, seed);
    put_data(cl, off, h, n * SVC_ELEM);
    free(h);
}

/* Waits for n completions, dying on any failure; stores each one's latency from t0 in lat
 * (when lat is not NULL) and notes the longest in cl->res (when set). Returns nothing. */
static void await(struct client *cl, unsigned n, int64_t t0, int64_t *lat)
{
    paged_completion comp[4];
    unsigned got = 0;
    while (got < n) {
        int k = paged_wait(cl->c, comp, n - got < 4 ? n - got : 4, 60000);
        if (k < 0)
            fail(cl, k, "waiting for completions");
        int64_t now = (int64_t) pcore_now_ns();
        for (int i = 0; i < k; i++) {
            if (comp[i].status != PAGED_OK) {
                char what[128];
                snprintf(what, sizeof what, "request %s (field %s, element %u)",
                         paged_op_name(comp[i].op) != NULL ? paged_op_name(comp[i].op) : "?",
                         paged_field_name(comp[i].err_field), comp[i].err_index);
                fail(cl, comp[i].status, what);
            }
            if (lat != NULL) {
                lat[got] = now - t0;
                if (cl->res != NULL && now - t0 > cl->res->worst_ns) {
                    cl->res->worst_ns = now - t0;
                    cl->res->worst_service_ns = (int64_t) comp[i].service_ns;
                    cl->res->worst_t0 = t0;
                    cl->res->worst_step = cl->step;
                    cl->res->worst_layer = cl->layer;
                }
            }
            got++;
        }
    }
}

/* Prepares one request, dying on failure; returns nothing. */
static void prep(struct client *cl, const paged_request *req)
{
    int rc = paged_prep(cl->c, req);
    if (rc != PAGED_OK)
        fail(cl, rc, "preparing a request");
}

/* Submits what was prepared, dying on failure; returns nothing. */
static void submit(struct client *cl)
{
    int rc = paged_submit(cl->c);
    if (rc < 0)
        fail(cl, rc, "submitting");
}

/* Connects, attaches, carves the arenas and fills the inputs. Returns nothing. */
static void setup(struct client *cl, const char *socket, const char *pool_name, uint64_t seed)
{
    const struct svc_run *r = &cl->run;
    size_t qrow = (size_t) SVC_HQ * SVC_D * SVC_ELEM, kvrow = (size_t) SVC_HKV * SVC_D * SVC_ELEM;
    size_t chunk = (size_t) SVC_LAYERS * SVC_PROMPT_CHUNK * kvrow;
    size_t data_need = SVC_LAYERS * (size_t) r->batch * 2 * (qrow + kvrow) + 2 * chunk + (1u << 20);
    cl->nblk = svc_blocks_per_seq(r);
    size_t host_need = (size_t) r->batch * (cl->nblk + 2) * 4 + SVC_PROMPT_CHUNK * 4 + (1u << 20);
    char name[64], err[256] = "";
    snprintf(name, sizeof name, "paged-bench-client-%u", cl->index);
    paged_connect_opts opts = {
        .socket_path = socket,
        .name = name,
        .host_arena_size = host_need + data_need,   /* the data arena on the cpu backend */
        .data_arena_size = data_need,
        .timeout_ms = 60000,
    };
    const char *spin = getenv("PAGED_BENCH_SPIN_US");   /* --spin-us, set by the parent */
    if (spin != NULL)
        opts.spin_us = atoi(spin);
    int rc = paged_client_connect_err(&opts, &cl->c, err, sizeof err);
    if (rc != PAGED_OK)
        bench_die("client %u: connecting to %s: %s (%s)", cl->index, socket, paged_strerror(rc), err);
    rc = paged_pool_attach(cl->c, pool_name, &cl->pool);
    if (rc != PAGED_OK)
        fail(cl, rc, "attaching the pool");
    char who[32];
    snprintf(who, sizeof who, "client %u", cl->index);
    if (bench_client_arenas(cl->c, who, &cl->cuda, &cl->host, &cl->data) != PAGED_OK)
        fail(cl, PAGED_E_NOMEM, "mapping the arenas");

    /* Our blocks, all at once: the loop then never waits for the allocator. */
    size_t nids = (size_t) r->batch * cl->nblk;
    cl->ids = bench_alloc(nids * sizeof *cl->ids, "block ids");
    rc = paged_alloc(cl->pool, (uint32_t) nids, cl->ids);
    if (rc != PAGED_OK)
        fail(cl, rc, "allocating blocks");
    cl->tables_off = carve(cl, PAGED_ARENA_HOST, nids * 4);
    cl->lens_off = carve(cl, PAGED_ARENA_HOST, (size_t) r->batch * 4);
    cl->slots_off = carve(cl, PAGED_ARENA_HOST, (size_t) r->batch * 4);
    cl->pslots_off = carve(cl, PAGED_ARENA_HOST, SVC_PROMPT_CHUNK * 4);
    memcpy(cl->host + cl->tables_off, cl->ids, nids * 4);

    for (int l = 0; l < SVC_LAYERS; l++) {
        cl->q_off[l] = carve(cl, PAGED_ARENA_DATA, (size_t) r->batch * qrow);
        cl->out_off[l] = carve(cl, PAGED_ARENA_DATA, (size_t) r->batch * qrow);
        cl->k_off[l] = carve(cl, PAGED_ARENA_DATA, (size_t) r->batch * kvrow);
        cl->v_off[l] = carve(cl, PAGED_ARENA_DATA, (size_t) r->batch * kvrow);
        uint64_t s = seed + 16 * (uint64_t) l;
        fill_data(cl, cl->q_off[l], (size_t) r->batch * qrow / SVC_ELEM, s + 1);
        fill_data(cl, cl->k_off[l], (size_t) r->batch * kvrow / SVC_ELEM, s + 2);
        fill_data(cl, cl->v_off[l], (size_t) r->batch * kvrow / SVC_ELEM, s + 3);
    }
    const char *deps = getenv("PAGED_BENCH_DEPS");   /* --deps, set by the parent */
    cl->deps = deps == NULL ? BENCH_DEPS_NONE : bench_deps_parse(deps);
    const int host_words = cl->deps == BENCH_DEPS_HOST || cl->deps == BENCH_DEPS_HOST_STREAM;
    if (host_words) {
        cl->words_off = carve(cl, PAGED_ARENA_HOST, 64);
        cl->words = (uint32_t *) (cl->host + cl->words_off);
        memset(cl->words, 0, 64);
    } else {
        cl->words_off = carve(cl, PAGED_ARENA_DATA, 64);
        uint32_t zero[3] = { 0, 0, 0 };
        put_data(cl, cl->words_off, zero, sizeof zero);
        cl->words = cl->cuda ? NULL : (uint32_t *) (cl->data + cl->words_off);
    }
#ifdef HAVE_CUDA
    if (cl->cuda && (cl->deps == BENCH_DEPS_DEVICE || cl->deps == BENCH_DEPS_HOST_STREAM)) {
        cudaStream_t st;
        bg_check((int) cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "client %u: a stream", cl->index);
        cl->stream = st;
        cl->word_flags = stream_word_flags() | (host_words ? PAGED_STREAM_HOST : 0);
        if (host_words)
            cl->words = NULL;   /* reached through the stream, like data-arena words */
    }
#endif
    cl->pk_off = carve(cl, PAGED_ARENA_DATA, chunk);
    cl->pv_off = carve(cl, PAGED_ARENA_DATA, chunk);
    fill_data(cl, cl->pk_off, chunk / SVC_ELEM, seed + 1001);
    fill_data(cl, cl->pv_off, chunk / SVC_ELEM, seed + 1002);
#ifdef HAVE_CUDA
    /* A copy from pageable memory may return before its DMA is done: the daemon reads these. */
    if (cl->cuda)
        bg_check((int) cudaDeviceSynchronize(), "client %u: finishing the arena's uploads", cl->index);
#endif
}

/* Fills every sequence's context with chunks of prompt K and V for all layers at once.
 * Returns nothing. */
static void fill_contexts(struct client *cl)
{
    const struct svc_run *r = &cl->run;
    int32_t *pslots = (int32_t *) (cl->host + cl->pslots_off);
    for (unsigned b = 0; b < r->batch; b++)
        for (unsigned t0 = 0; t0 < r->context; t0 += SVC_PROMPT_CHUNK) {
            unsigned n = r->context - t0 < SVC_PROMPT_CHUNK ? r->context - t0 : SVC_PROMPT_CHUNK;
            for (unsigned i = 0; i < n; i++) {
                unsigned pos = t0 + i;
                pslots[i] = cl->ids[(size_t) b * cl->nblk + pos / SVC_B] * SVC_B + (int32_t) (pos % SVC_B);
            }
            paged_request req = {
                .op = PAGED_OP_APPEND,
                .pool = cl->pool,
                .layer = PAGED_ALL_LAYERS,
                .u.append = { .num_tokens = n, .dtype = PAGED_DTYPE_BF16, .k_off = cl->pk_off,
                              .v_off = cl->pv_off, .slots_off = cl->pslots_off },
            };
            prep(cl, &req);
            submit(cl);
            await(cl, 1, 0, NULL);
        }
}

/* Writes byte mark on fd (what: for the error) and blocks until wait_fd reaches end of file
 * (the parent closes it once every client has written its mark). Closes wait_fd; returns
 * nothing. */
static void rendezvous(const struct client *cl, int fd, char mark, int wait_fd, const char *what)
{
    ssize_t w;
    do
        w = write(fd, &mark, 1);
    while (w < 0 && errno == EINTR);
    if (w != 1)
        bench_die("client %u: telling the parent it is %s: %s", cl->index, what, strerror(errno));
    char byte;
    ssize_t got;
    do
        got = read(wait_fd, &byte, 1);
    while (got < 0 && errno == EINTR);
    close(wait_fd);
}

/* Starts step number step: notes the start of the timed steps in res, points every sequence's
 * slot and length at its next token (host arena). Returns the step's start time. */
static int64_t step_begin(struct client *cl, unsigned step, struct svc_result *res)
{
    const struct svc_run *r = &cl->run;
    int32_t *lens = (int32_t *) (cl->host + cl->lens_off), *slots = (int32_t *) (cl->host + cl->slots_off);
    int64_t t_step = (int64_t) pcore_now_ns();
    if (step == r->warmup)
        res->start_ns = t_step;
    unsigned pos = r->context + step;
    for (unsigned b = 0; b < r->batch; b++) {
        slots[b] = cl->ids[(size_t) b * cl->nblk + pos / SVC_B] * SVC_B + (int32_t) (pos % SVC_B);
        lens[b] = (int32_t) pos + 1;
    }
    return t_step;
}

/* Fills *app and *dec with layer l's APPEND (tag 2l) and DECODE (tag 2l + 1) of the batch, no
 * dependencies. Returns nothing. */
static void layer_requests(const struct client *cl, int l, paged_request *app, paged_request *dec)
{
    const struct svc_run *r = &cl->run;
    *app = (paged_request) {
        .op = PAGED_OP_APPEND,
        .pool = cl->pool,
        .layer = l,
        .tag = 2 * (uint64_t) l,
        .u.append = { .num_tokens = r->batch, .dtype = PAGED_DTYPE_BF16, .k_off = cl->k_off[l],
                      .v_off = cl->v_off[l], .slots_off = cl->slots_off },
    };
    *dec = (paged_request) {
        .op = PAGED_OP_DECODE,
        .pool = cl->pool,
        .layer = l,
        .tag = 2 * (uint64_t) l + 1,
        .u.attn = { .num_seqs = r->batch, .num_q_heads = SVC_HQ, .dtype = PAGED_DTYPE_BF16,
                    .q_off = cl->q_off[l], .out_off = cl->out_off[l],
                    .block_tables_off = cl->tables_off, .bt_stride = cl->nblk,
                    .seq_lens_off = cl->lens_off, .opts = { .sm_scale = 1.0f / sqrtf((float) SVC_D) } },
    };
}

/* How long a --deps client waits for a word before it gives up (a request that failed, or a
 * daemon that went away, never writes it). */
#define DEPS_WAIT_NS 60000000000ull

/* --deps: spins until the host word x reaches v, dying past DEPS_WAIT_NS; returns nothing. */
static void spin_word(const struct client *cl, const uint32_t *x, uint32_t v)
{
    uint64_t deadline = pcore_now_ns() + DEPS_WAIT_NS;
    for (unsigned k = 0; (int32_t) (__atomic_load_n(x, __ATOMIC_ACQUIRE) - v) < 0; k++) {
        if ((k & 1023) == 0 && pcore_now_ns() > deadline)
            bench_die("client %u: dependency word still short of %u after 60 s (%s)", cl->index, v,
                      paged_client_error(cl->c));
        pcore_cpu_relax();
    }
}

/* --deps: before layer number v is submitted, waits for the word X of number v - 1 (the last
 * layer's output) and writes W = v: on the client's stream (device words) or from the host.
 * Returns nothing. */
static void chain_layer(struct client *cl, uint32_t v)
{
#ifdef HAVE_CUDA
    if (cl->words == NULL) {
        int rc = paged_stream_wait(cl->c, cl->stream, cl->words_off + 4, v - 1, cl->word_flags);
        if (rc == PAGED_OK)
            rc = paged_stream_signal(cl->c, cl->stream, cl->words_off, v, cl->word_flags);
        if (rc != PAGED_OK)
            fail(cl, rc, "chaining a layer on the client's stream");
        return;
    }
#endif
    spin_word(cl, cl->words + 1, v - 1);
    __atomic_store_n(cl->words, v, __ATOMIC_RELEASE);
}

/* --deps: waits until word X reaches v (the step's last layer is done), dying past
 * DEPS_WAIT_NS; returns nothing. */
static void await_layer(struct client *cl, uint32_t v)
{
#ifdef HAVE_CUDA
    if (cl->words == NULL) {
        int rc = paged_stream_wait(cl->c, cl->stream, cl->words_off + 4, v,
                                   PAGED_STREAM_MEMOP | (cl->word_flags & PAGED_STREAM_HOST));
        if (rc != PAGED_OK)
            fail(cl, rc, "queueing the wait for the step's last word");
        uint64_t deadline = pcore_now_ns() + DEPS_WAIT_NS;
        cudaError_t e;
        while ((e = cudaStreamQuery(cl->stream)) == cudaErrorNotReady) {
            if (pcore_now_ns() > deadline)
                bench_die("client %u: the step's last word still short of %u after 60 s (%s)", cl->index, v,
                          paged_client_error(cl->c));
            pcore_cpu_relax();
        }
        bg_check((int) e, "client %u: waiting for the step", cl->index);
        return;
    }
#endif
    spin_word(cl, cl->words + 1, v);
}

/* Reaps whatever completions have come (at most want), dying on any failure; stores their
 * latencies from t_sub[tag] in lat when timed. Returns how many. */
static unsigned reap(struct client *cl, unsigned want, int block, const int64_t *t_sub, int64_t *lat, size_t *nlat)
{
    paged_completion comp[16];
    int k = paged_wait(cl->c, comp, want < 16 ? want : 16, block ? 60000 : 0);
    if (k == PAGED_E_TIMEOUT && !block)
        return 0;
    if (k < 0)
        fail(cl, k, "waiting for completions");
    int64_t now = (int64_t) pcore_now_ns();
    for (int i = 0; i < k; i++) {
        if (comp[i].status != PAGED_OK)
            fail(cl, comp[i].status, "a request of a chained step");
        if (lat != NULL)
            lat[(*nlat)++] = now - t_sub[comp[i].tag];
    }
    return (unsigned) k;
}

/* --deps: the warm-up and timed steps with every layer chained on the device; fills what
 * decode_loop fills (the latencies: from submission to completion, i.e. until the daemon had
 * queued the work). Returns nothing. */
static void deps_loop(struct client *cl, int64_t *lat, int64_t *step_ns, struct svc_result *res)
{
    const struct svc_run *r = &cl->run;
    int64_t t_sub[2 * SVC_LAYERS];
    size_t nlat = 0;
    const unsigned hostw = cl->deps == BENCH_DEPS_HOST || cl->deps == BENCH_DEPS_HOST_STREAM ? PAGED_DEP_HOST : 0;
    uint32_t v = 0;
    for (unsigned step = 0; step < r->warmup + r->steps; step++) {
        int timed = step >= r->warmup;
        /* The previous step is done (its last X was awaited), so the host arrays are free. */
        int64_t t_step = step_begin(cl, step, res);
        unsigned pending = 2 * SVC_LAYERS;
        for (int l = 0; l < SVC_LAYERS; l++) {
            v++;
            chain_layer(cl, v);
            paged_request app, dec;
            layer_requests(cl, l, &app, &dec);
            app.dep = (paged_dep) { .flags = hostw | PAGED_DEP_WAIT | PAGED_DEP_SIGNAL, .wait_off = cl->words_off,
                                    .wait_value = v, .signal_off = cl->words_off + 8, .signal_value = v };
            dec.dep = (paged_dep) { .flags = hostw | PAGED_DEP_SIGNAL, .signal_off = cl->words_off + 4,
                                    .signal_value = v };
            prep(cl, &app);
            prep(cl, &dec);
            t_sub[2 * l] = t_sub[2 * l + 1] = (int64_t) pcore_now_ns();
            submit(cl);
            pending -= reap(cl, pending, 0, t_sub, timed ? lat : NULL, &nlat);
        }
        await_layer(cl, v);
        while (pending > 0)
            pending -= reap(cl, pending, 1, t_sub, timed ? lat : NULL, &nlat);
        if (timed)
            step_ns[step - r->warmup] = (int64_t) pcore_now_ns() - t_step;
    }
    res->end_ns = (int64_t) pcore_now_ns();
    res->nlat = (uint32_t) nlat;
    res->nsteps = r->steps;
}

/* Runs the warm-up and timed steps; fills lat (2 * layers per timed step), step times and
 * the start and end. Returns nothing. */
static void decode_loop(struct client *cl, int64_t *lat, int64_t *step_ns, struct svc_result *res)
{
    const struct svc_run *r = &cl->run;
    size_t nlat = 0;
    cl->res = res;
    for (unsigned step = 0; step < r->warmup + r->steps; step++) {
        int timed = step >= r->warmup;
        int64_t t_step = step_begin(cl, step, res);
        for (int l = 0; l < SVC_LAYERS; l++) {
            cl->step = step;
            cl->layer = (unsigned) l;
            paged_request app, dec;
            layer_requests(cl, l, &app, &dec);
            prep(cl, &app);
            prep(cl, &dec);
            uint64_t t0 = pcore_now_ns();
            submit(cl);
            await(cl, 2, t0, timed ? lat + nlat : NULL);
            if (timed)
                nlat += 2;
        }
        if (timed)
            step_ns[step - r->warmup] = (int64_t) pcore_now_ns() - t_step;
    }
    res->end_ns = (int64_t) pcore_now_ns();
    res->nlat = (uint32_t) nlat;
    res->nsteps = r->steps;
}

/* Writes the result file; dies on failure. Returns nothing. */
static void write_result(const struct client *cl, const char *path, const struct svc_result *res,
                         const int64_t *lat, const int64_t *step_ns)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        bench_die("client %u: %s: %s", cl->index, path, strerror(errno));
    int ok = fwrite(res, sizeof *res, 1, f) == 1
             && fwrite(lat, sizeof *lat, res->nlat, f) == res->nlat
             && fwrite(step_ns, sizeof *step_ns, res->nsteps, f) == res->nsteps;
    if (fclose(f) != 0 || !ok)
        bench_die("client %u: writing %s failed", cl->index, path);
}

/* Parses an unsigned argument or dies; returns it. */
static unsigned long long arg_u(const char *s, const char *what)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0')
        bench_die("_client: bad %s '%s'", what, s);
    return v;
}

/* The client's main: _client SOCKET POOL INDEX BATCH CONTEXT WARMUP STEPS READY_FD GO_FD
 * RESULT SEED LEAVE_FD. Returns 0 (it dies on any failure). */
int bench_client_main(int argc, char **argv)
{
    if (argc != 13)
        bench_die("_client: expected 12 arguments, got %d (this command is paged-bench's own)", argc - 1);
    struct client cl;
    memset(&cl, 0, sizeof cl);
    cl.index = (unsigned) arg_u(argv[3], "index");
    cl.run = (struct svc_run) {
        .batch = (unsigned) arg_u(argv[4], "batch"),
        .context = (unsigned) arg_u(argv[5], "context"),
        .warmup = (unsigned) arg_u(argv[6], "warm-up"),
        .steps = (unsigned) arg_u(argv[7], "steps"),
    };
    int ready_fd = (int) arg_u(argv[8], "ready fd"), go_fd = (int) arg_u(argv[9], "go fd");
    int leave_fd = (int) arg_u(argv[12], "leave fd");
    uint64_t seed = arg_u(argv[11], "seed");
    if (cl.run.batch == 0 || cl.run.steps == 0)
        bench_die("_client: batch and steps must be positive");

    setup(&cl, argv[1], argv[2], seed);
    fill_contexts(&cl);
    int64_t *lat = bench_alloc((size_t) cl.run.steps * 2 * SVC_LAYERS * sizeof *lat, "latencies");
    int64_t *step_ns = bench_alloc((size_t) cl.run.steps * sizeof *step_ns, "step times");
    struct svc_result res = { .magic = SVC_RESULT_MAGIC };
    rendezvous(&cl, ready_fd, 'R', go_fd, "ready");
    if (cl.deps)
        deps_loop(&cl, lat, step_ns, &res);
    else
        decode_loop(&cl, lat, step_ns, &res);
    /* Nobody leaves before everyone is done: a departure costs the daemon work that must
     * not land in another client's timed steps. */
    rendezvous(&cl, ready_fd, 'D', leave_fd, "done");
    close(ready_fd);
    write_result(&cl, argv[10], &res, lat, step_ns);
    free(lat);
    free(step_ns);
    free(cl.ids);
    paged_client_close(cl.c);
    return 0;
}
