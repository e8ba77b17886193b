/* inproc.c: the service benchmark's yardstick: the same decode steps with the kernels called in this process. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "lib/core/clock.h"
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

/* Where an in-process run keeps its memory: host memory for the cpu kernels, device memory
 * for the cuda ones. Each function dies on failure. */
struct ip_place {
    void *(*alloc)(size_t bytes, const char *what);
    void (*fill)(void *p, size_t n, uint64_t seed);   /* n bf16 elements, uniform [-1, 1) */
    void (*put)(void *dst, const void *src, size_t bytes);
    void (*release)(void *p);
};

/* Allocates the pool, the metadata of every step and each layer's tensors where place says,
 * and fills them (random data, random block tables). Returns nothing. */
static void mem_setup(const struct ip_place *place, const struct bench_opts *o, const struct svc_run *r,
                      unsigned seqs, struct ip_mem *m)
{
    unsigned nblk = svc_blocks_per_seq(r), nsteps = r->warmup + r->steps;
    *m = (struct ip_mem) {
        .cache = { .num_layers = SVC_LAYERS, .num_blocks = (int32_t) (seqs * nblk), .num_kv_heads = SVC_HKV,
                   .head_dim = SVC_D, .block_size = SVC_B, .dtype = PAGED_DTYPE_BF16, .k_scale = 1.0f,
                   .v_scale = 1.0f },
    };
    size_t pool_bytes = pk_cache_bytes(&m->cache);
    m->cache.base = place->alloc(pool_bytes, "the in-process pool");
    place->fill(m->cache.base, pool_bytes / SVC_ELEM, o->seed ^ 0x9001);
    size_t tbytes = (size_t) seqs * nblk * 4, sbytes = (size_t) nsteps * seqs * 4;
    int32_t *tables = bench_alloc(tbytes, "block tables"), *slots = bench_alloc(sbytes, "slots"),
            *lens = bench_alloc(sbytes, "lengths");
    host_metadata(r, seqs, nblk, o->seed ^ 0x9002, tables, slots, lens);
    m->tables = place->alloc(tbytes, "block tables");
    m->slots = place->alloc(sbytes, "slots");
    m->lens = place->alloc(sbytes, "lengths");
    place->put(m->tables, tables, tbytes);
    place->put(m->slots, slots, sbytes);
    place->put(m->lens, lens, sbytes);
    free(tables);
    free(slots);
    free(lens);
    size_t qbytes = (size_t) seqs * SVC_HQ * SVC_D * SVC_ELEM, kvbytes = (size_t) seqs * SVC_HKV * SVC_D * SVC_ELEM;
    for (int l = 0; l < SVC_LAYERS; l++) {
        m->q[l] = place->alloc(qbytes, "queries");
        m->out[l] = place->alloc(qbytes, "outputs");
        m->k[l] = place->alloc(kvbytes, "new keys");
        m->v[l] = place->alloc(kvbytes, "new values");
        uint64_t s = o->seed + 16 * (uint64_t) l;
        place->fill(m->q[l], qbytes / SVC_ELEM, s + 1);
        place->fill(m->k[l], kvbytes / SVC_ELEM, s + 2);
        place->fill(m->v[l], kvbytes / SVC_ELEM, s + 3);
    }
}

/* Releases what mem_setup (and a workspace, if any) took. Returns nothing. */
static void mem_release(const struct ip_place *place, struct ip_mem *m)
{
    for (int l = 0; l < SVC_LAYERS; l++) {
        place->release(m->q[l]);
        place->release(m->out[l]);
        place->release(m->k[l]);
        place->release(m->v[l]);
    }
    place->release(m->cache.base);
    place->release(m->tables);
    place->release(m->slots);
    place->release(m->lens);
    place->release(m->workspace);
}

/* Host memory: fills n bf16 elements on the benchmark's threads. */
static void host_fill(void *p, size_t n, uint64_t seed)
{
    bench_fill_parallel(p, n, PAGED_DTYPE_BF16, 1.0f, 1.0f, seed);
}

/* Host memory: copies bytes. */
static void host_put(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
}

static const struct ip_place host_place = { bench_alloc, host_fill, host_put, free };

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
    uint64_t start = 0;
    for (unsigned s = 0; s < r->warmup + r->steps; s++) {
        uint64_t t0 = pcore_now_ns();
        if (s == r->warmup)
            start = t0;
        for (int l = 0; l < SVC_LAYERS; l++)
            layer(ctx, s, l);
        if (step_end != NULL)
            step_end(ctx);
        if (s >= r->warmup)
            ns[s - r->warmup] = (double) (pcore_now_ns() - t0);
    }
    *tok_s = (double) seqs * r->steps / ((double) (pcore_now_ns() - start) * 1e-9);
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
    struct ip_mem m;
    mem_setup(&host_place, o, r, seqs, &m);
    struct cpu_ctx c = { &m, seqs, svc_blocks_per_seq(r), bench_workers(o->threads) };
    timed_steps(r, seqs, cpu_layer, NULL, &c, &out->step_ns, &out->tokens_per_s);
    out->awaited_step_ns = out->awaited_tokens_per_s = NAN;
    mem_release(&host_place, &m);
}

#ifdef HAVE_CUDA
/* Device memory: fills n bf16 elements on the stream. */
static void device_fill(void *p, size_t n, uint64_t seed)
{
    bg_fill(p, n, PAGED_DTYPE_BF16, 1.0f, 1.0f, seed);
}

static const struct ip_place device_place = { bg_alloc, device_fill, bg_upload, bg_free };

/* How long the host waits for an awaited layer before it gives up. */
#define AWAITED_WAIT_NS 10000000000ull

/* Spins until the mapped host word reaches v, dying past AWAITED_WAIT_NS; returns nothing. */
static void await_word(const uint32_t *word, uint32_t v)
{
    uint64_t deadline = pcore_now_ns() + AWAITED_WAIT_NS;
    for (unsigned k = 0; (int32_t) (__atomic_load_n(word, __ATOMIC_ACQUIRE) - v) < 0; k++)
        if ((k & 1023) == 0 && pcore_now_ns() > deadline)
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
    struct ip_mem m;
    mem_setup(&device_place, o, r, seqs, &m);
    unsigned nblk = svc_blocks_per_seq(r);
    /* One workspace, sized at the longest context the run reaches (the last step's). */
    pk_append_args app;
    pk_decode_args dec;
    step_args(&m, seqs, nblk, r->warmup + r->steps - 1, 0, &app, &dec);
    m.workspace_size = pk_cuda_decode_workspace(&dec);
    m.workspace = m.workspace_size ? bg_alloc(m.workspace_size, "the decode workspace") : NULL;
    bg_sync("preparing the in-process run");

    struct cuda_ctx c = { &m, seqs, nblk, NULL, NULL, 0 };
    timed_steps(r, seqs, cuda_layer, cuda_step_end, &c, &out->step_ns, &out->tokens_per_s);
    c.word = bg_host_mapped(64, &c.dev_word);
    timed_steps(r, seqs, cuda_layer, cuda_step_end, &c, &out->awaited_step_ns, &out->awaited_tokens_per_s);
    bg_host_free((void *) c.word);
    mem_release(&device_place, &m);
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
