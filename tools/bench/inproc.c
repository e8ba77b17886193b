/* inproc.c: the service benchmark's yardstick: the same decode steps with the kernels called in this process. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "tools/bench/cpuwork.h"
#include "tools/bench/service.h"
#ifdef HAVE_CUDA
#include "tools/bench/gpu.h"
#endif

/*
 * A worker that runs the best kernels itself does, per step and layer, what the service
 * does for it: append one token per sequence, then decode the batch (on the GPU in one
 * launch, the decode kernel writing the tokens). It needs no request, no validation and no
 * completion; on the GPU it also need not wait between layers (the next layer's work
 * follows on the stream), so one synchronization ends each step. The service has to beat
 * this, not a library.
 */

/* The memory of one in-process run: host or device pointers alike. */
struct ip_mem {
    pk_cache cache;
    int32_t *tables;           /* [seqs][nblk] */
    int32_t *slots, *lens;     /* [warmup + steps][seqs] each */
    char *q[SVC_LAYERS], *out[SVC_LAYERS], *k[SVC_LAYERS], *v[SVC_LAYERS];
    void *workspace;
    size_t workspace_size;
};

/* Fills the host tables, slots and lengths of every step: tables from a random permutation
 * of the pool's blocks. Returns nothing. */
static void host_metadata(const struct svc_run *r, unsigned seqs, unsigned nblk, uint64_t seed, int32_t *tables,
                          int32_t *slots, int32_t *lens)
{
    int32_t *perm = bench_permutation((int32_t) (seqs * nblk), seed);
    memcpy(tables, perm, (size_t) seqs * nblk * sizeof *tables);
    free(perm);
    for (unsigned step = 0; step < r->warmup + r->steps; step++)
        for (unsigned b = 0; b < seqs; b++) {
            unsigned pos = r->context + step;
            slots[(size_t) step * seqs + b] = tables[(size_t) b * nblk + pos / SVC_B] * SVC_B + (int32_t) (pos % SVC_B);
            lens[(size_t) step * seqs + b] = (int32_t) pos + 1;
        }
}

/* Returns the step's arguments: the append and the decode of layer l at step. */
static void step_args(const struct ip_mem *m, unsigned seqs, unsigned nblk, unsigned step, int l,
                      pk_append_args *app, pk_decode_args *dec)
{
    *app = (pk_append_args) {
        .cache = m->cache,
        .layer_begin = l,
        .num_layers = 1,
        .num_tokens = (int32_t) seqs,
        .src_dtype = PAGED_DTYPE_BF16,
        .k = m->k[l],
        .v = m->v[l],
        .slot_mapping = m->slots + (size_t) step * seqs,
    };
    *dec = (pk_decode_args) {
        .cache = m->cache,
        .layer = l,
        .num_seqs = (int32_t) seqs,
        .num_q_heads = SVC_HQ,
        .q_dtype = PAGED_DTYPE_BF16,
        .q = m->q[l],
        .out = m->out[l],
        .block_tables = m->tables,
        .bt_stride = (int32_t) nblk,
        .seq_lens = m->lens + (size_t) step * seqs,
        .opts = { .sm_scale = 1.0f / sqrtf((float) SVC_D) },
        .workspace = m->workspace,
        .workspace_size = m->workspace_size,
    };
}

/* Runs items [begin, end) of an append; returns nothing. */
static void append_work(const void *arg, size_t begin, size_t end)
{
    pk_cpu_append_run(arg, begin, end);
}

/* Runs items [begin, end) of a decode; returns nothing. */
static void decode_work(const void *arg, size_t begin, size_t end)
{
    pk_cpu_decode_run(arg, begin, end);
}

/* Runs one layer of a step (ctx says how); returns nothing. */
typedef void ip_layer_fn(void *ctx, unsigned step, int layer);

/*
 * Runs r's warm-up and timed steps, each its layers through layer(ctx, step, l), then
 * step_end(ctx) unless NULL. Stores the median timed step in *step_ns and seqs tokens a step
 * over the timed loop's wall time in *tok_s. Returns nothing.
 */
static void timed_steps(const struct svc_run *r, unsigned seqs, ip_layer_fn *layer, void (*step_end)(void *),
                        void *ctx, double *step_ns, double *tok_s)
{
    double *ns = bench_alloc(r->steps * sizeof *ns, "step times");
    int64_t start = 0;
    for (unsigned s = 0; s < r->warmup + r->steps; s++) {
        int64_t t0 = bench_now_ns();
        if (s == r->warmup)
            start = t0;
        for (int l = 0; l < SVC_LAYERS; l++)
            layer(ctx, s, l);
        if (step_end != NULL)
            step_end(ctx);
        if (s >= r->warmup)
            ns[s - r->warmup] = (double) (bench_now_ns() - t0);
    }
    *tok_s = (double) seqs * r->steps / ((double) (bench_now_ns() - start) * 1e-9);
    *step_ns = bench_median(ns, r->steps);
    free(ns);
}

/* What a CPU layer needs. */
struct cpu_ctx {
    const struct ip_mem *m;
    unsigned seqs, nblk;
    pd_workers *w;
};

/* Runs layer l of step s with pk_cpu_* on the thread pool (checking the shape once);
 * returns nothing. */
static void cpu_layer(void *ctx, unsigned s, int l)
{
    const struct cpu_ctx *c = ctx;
    pk_append_args app;
    pk_decode_args dec;
    step_args(c->m, c->seqs, c->nblk, s, l, &app, &dec);
    if (s == 0 && l == 0 && (pk_cpu_append_check(&app) != 0 || pk_cpu_decode_check(&dec) != 0))
        bench_die("pk_cpu kernels refuse the service's model shape");
    pd_workers_run(c->w, append_work, &app, pk_cpu_append_items(&app));
    pd_workers_run(c->w, decode_work, &dec, pk_cpu_decode_items(&dec));
}

/* The CPU version: pk_cpu_* on the daemon's kind of thread pool. Returns nothing. */
static void run_cpu(const struct bench_opts *o, const struct svc_run *r, unsigned seqs, struct svc_inproc *out)
{
    pd_workers *w = bench_workers(o->threads);
    unsigned nblk = svc_blocks_per_seq(r), nsteps = r->warmup + r->steps;
    struct ip_mem m = {
        .cache = { .num_layers = SVC_LAYERS, .num_blocks = (int32_t) (seqs * nblk), .num_kv_heads = SVC_HKV,
                   .head_dim = SVC_D, .block_size = SVC_B, .dtype = PAGED_DTYPE_BF16, .k_scale = 1.0f,
                   .v_scale = 1.0f },
    };
    size_t pool_bytes = pk_cache_bytes(&m.cache);
    m.cache.base = bench_alloc(pool_bytes, "the in-process pool");
    bench_fill_parallel(m.cache.base, pool_bytes / SVC_ELEM, PAGED_DTYPE_BF16, 1.0f, 1.0f, o->seed ^ 0x9001);
    m.tables = bench_alloc((size_t) seqs * nblk * 4, "block tables");
    m.slots = bench_alloc((size_t) nsteps * seqs * 4, "slots");
    m.lens = bench_alloc((size_t) nsteps * seqs * 4, "lengths");
    host_metadata(r, seqs, nblk, o->seed ^ 0x9002, m.tables, m.slots, m.lens);
    size_t qbytes = (size_t) seqs * SVC_HQ * SVC_D * SVC_ELEM, kvbytes = (size_t) seqs * SVC_HKV * SVC_D * SVC_ELEM;
    for (int l = 0; l < SVC_LAYERS; l++) {
        m.q[l] = bench_alloc(qbytes, "queries");
        m.out[l] = bench_alloc(qbytes, "outputs");
        m.k[l] = bench_alloc(kvbytes, "new keys");
        m.v[l] = bench_alloc(kvbytes, "new values");
        uint64_t s = o->seed + 16 * (uint64_t) l;
        bench_fill_host(m.q[l], 0, qbytes / SVC_ELEM, PAGED_DTYPE_BF16, 1.0f, 1.0f, s + 1);
        bench_fill_host(m.k[l], 0, kvbytes / SVC_ELEM, PAGED_DTYPE_BF16, 1.0f, 1.0f, s + 2);
        bench_fill_host(m.v[l], 0, kvbytes / SVC_ELEM, PAGED_DTYPE_BF16, 1.0f, 1.0f, s + 3);
    }
    struct cpu_ctx c = { &m, seqs, nblk, w };
    timed_steps(r, seqs, cpu_layer, NULL, &c, &out->step_ns, &out->tokens_per_s);
    out->awaited_step_ns = out->awaited_tokens_per_s = NAN;
    for (int l = 0; l < SVC_LAYERS; l++) {
        free(m.q[l]);
        free(m.out[l]);
        free(m.k[l]);
        free(m.v[l]);
    }
    free(m.cache.base);
    free(m.tables);
    free(m.slots);
    free(m.lens);
}

#ifdef HAVE_CUDA
/* Returns a device copy of n int32. */
static int32_t *device_i32(const int32_t *src, size_t n)
{
    int32_t *d = bg_alloc(n * sizeof *d, "block tables, slots or lengths");
    bg_upload(d, src, n * sizeof *d);
    return d;
}

/* How long the host waits for an awaited layer before it gives up. */
#define AWAITED_WAIT_NS 10000000000ll

/* Spins until the mapped host word reaches v, dying past AWAITED_WAIT_NS; returns nothing. */
static void await_word(const uint32_t *word, uint32_t v)
{
    int64_t deadline = bench_now_ns() + AWAITED_WAIT_NS;
    for (unsigned k = 0; (int32_t) (__atomic_load_n(word, __ATOMIC_ACQUIRE) - v) < 0; k++)
        if ((k & 1023) == 0 && bench_now_ns() > deadline)
            bench_die("in-process run: layer %u not done after %lld s", v, AWAITED_WAIT_NS / 1000000000ll);
}

/* What a CUDA layer needs: with word, each layer is awaited through it. */
struct cuda_ctx {
    const struct ip_mem *m;
    unsigned seqs, nblk;
    const uint32_t *word;      /* NULL: layers back to back; else zeroed mapped host memory */
    void *dev_word;            /* its device address */
    uint32_t seq;              /* the value the word was last set to */
};

/* Queues layer l of step s (the fused append and decode launch) and, with a word, has the
 * stream write it after the layer and spins until it does. Returns nothing. */
static void cuda_layer(void *ctx, unsigned s, int l)
{
    struct cuda_ctx *c = ctx;
    pk_append_args app;
    pk_decode_args dec;
    step_args(c->m, c->seqs, c->nblk, s, l, &app, &dec);
    /* The newest tokens go in with the decode's own launch (pk_decode_args.new_k), as the
     * daemon's fused launches do: the best this worker could do itself. */
    dec.new_k = app.k;
    dec.new_v = app.v;
    bg_check_kernel(pk_cuda_decode(&dec, bg_stream()), "pk_cuda_decode with the newest tokens");
    if (c->word != NULL) {
        bg_stream_write_word(bg_stream(), c->dev_word, ++c->seq);
        await_word(c->word, c->seq);
    }
}

/* Waits for the step's work on the stream; returns nothing. */
static void cuda_step_end(void *ctx)
{
    (void) ctx;
    bg_sync("an in-process decode step");
}

/* The CUDA version: pk_cuda_* on one stream, one synchronization per step (and again with
 * every layer awaited). Returns nothing. */
static void run_cuda(const struct bench_opts *o, const struct svc_run *r, unsigned seqs, struct svc_inproc *out)
{
    bg_open();
    unsigned nblk = svc_blocks_per_seq(r), nsteps = r->warmup + r->steps;
    struct ip_mem m = {
        .cache = { .num_layers = SVC_LAYERS, .num_blocks = (int32_t) (seqs * nblk), .num_kv_heads = SVC_HKV,
                   .head_dim = SVC_D, .block_size = SVC_B, .dtype = PAGED_DTYPE_BF16, .k_scale = 1.0f,
                   .v_scale = 1.0f },
    };
    size_t pool_bytes = pk_cache_bytes(&m.cache);
    m.cache.base = bg_alloc(pool_bytes, "the in-process pool");
    bg_fill(m.cache.base, pool_bytes / SVC_ELEM, PAGED_DTYPE_BF16, 1.0f, 1.0f, o->seed ^ 0x9001);
    int32_t *tables = bench_alloc((size_t) seqs * nblk * 4, "block tables");
    int32_t *slots = bench_alloc((size_t) nsteps * seqs * 4, "slots");
    int32_t *lens = bench_alloc((size_t) nsteps * seqs * 4, "lengths");
    host_metadata(r, seqs, nblk, o->seed ^ 0x9002, tables, slots, lens);
    m.tables = device_i32(tables, (size_t) seqs * nblk);
    m.slots = device_i32(slots, (size_t) nsteps * seqs);
    m.lens = device_i32(lens, (size_t) nsteps * seqs);
    free(tables);
    free(slots);
    free(lens);
    size_t qbytes = (size_t) seqs * SVC_HQ * SVC_D * SVC_ELEM, kvbytes = (size_t) seqs * SVC_HKV * SVC_D * SVC_ELEM;
    for (int l = 0; l < SVC_LAYERS; l++) {
        m.q[l] = bg_alloc(qbytes, "queries");
        m.out[l] = bg_alloc(qbytes, "outputs");
        m.k[l] = bg_alloc(kvbytes, "new keys");
        m.v[l] = bg_alloc(kvbytes, "new values");
        uint64_t s = o->seed + 16 * (uint64_t) l;
        bg_fill(m.q[l], qbytes / SVC_ELEM, PAGED_DTYPE_BF16, 1.0f, 1.0f, s + 1);
        bg_fill(m.k[l], kvbytes / SVC_ELEM, PAGED_DTYPE_BF16, 1.0f, 1.0f, s + 2);
        bg_fill(m.v[l], kvbytes / SVC_ELEM, PAGED_DTYPE_BF16, 1.0f, 1.0f, s + 3);
    }
    /* One workspace, sized at the longest context the run reaches (the last step's). */
    pk_append_args app;
    pk_decode_args dec;
    step_args(&m, seqs, nblk, nsteps - 1, 0, &app, &dec);
    m.workspace_size = pk_cuda_decode_workspace(&dec);
    m.workspace = m.workspace_size ? bg_alloc(m.workspace_size, "the decode workspace") : NULL;
    bg_sync("preparing the in-process run");

    struct cuda_ctx c = { &m, seqs, nblk, NULL, NULL, 0 };
    timed_steps(r, seqs, cuda_layer, cuda_step_end, &c, &out->step_ns, &out->tokens_per_s);
    c.word = bg_host_mapped(64, &c.dev_word);
    timed_steps(r, seqs, cuda_layer, cuda_step_end, &c, &out->awaited_step_ns, &out->awaited_tokens_per_s);
    bg_host_free((void *) c.word);
    for (int l = 0; l < SVC_LAYERS; l++) {
        bg_free(m.q[l]);
        bg_free(m.out[l]);
        bg_free(m.k[l]);
        bg_free(m.v[l]);
    }
    bg_free(m.cache.base);
    bg_free(m.tables);
    bg_free(m.slots);
    bg_free(m.lens);
    bg_free(m.workspace);
}
#endif

/* Runs the in-process steps on backend be. */
void svc_inproc_run(const struct bench_opts *o, enum bench_backend be, const struct svc_run *r,
                    unsigned seqs, struct svc_inproc *out)
{
#ifdef HAVE_CUDA
    if (be == BENCH_CUDA) {
        run_cuda(o, r, seqs, out);
        return;
    }
#else
    if (be == BENCH_CUDA)
        bench_die("the in-process comparison needs CUDA, which this paged-bench was built without");
#endif
    run_cpu(o, r, seqs, out);
}
