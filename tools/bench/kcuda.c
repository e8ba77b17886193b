/* kcuda.c: the GPU ceilings (streaming read, copy, cuBLAS) and the pk_cuda_* kernel timing. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/cpu/dtype.h"
#include "kernels/kernels.h"
#include "tools/bench/gpu.h"
#include "tools/bench/kcase.h"
#include "tools/bench/probe.h"

/* ---- ceilings */

/* A probe's buffers and grid. */
struct probe {
    char *buf;          /* 2 * half bytes: the read probe reads all, the copies copy half */
    size_t half;
    unsigned *sink;
    int blocks;
};

/* Launches one streaming read of the whole buffer; set is ignored. */
static void read_launch(void *ctx, int set)
{
    (void) set;
    struct probe *p = ctx;
    bg_check(bp_read(p->buf, 2 * p->half, p->sink, p->blocks, bg_stream()), "launching the read probe");
}

/* Launches one copy of the first half onto the second with the copy kernel. */
static void copy_launch(void *ctx, int set)
{
    (void) set;
    struct probe *p = ctx;
    bg_check(bp_copy(p->buf + p->half, p->buf, p->half, p->blocks, bg_stream()), "launching the copy kernel");
}

/* Copies the first half onto the second with cudaMemcpyAsync. */
static void memcpy_launch(void *ctx, int set)
{
    (void) set;
    struct probe *p = ctx;
    bg_check((int) cudaMemcpyAsync(p->buf + p->half, p->buf, p->half, cudaMemcpyDeviceToDevice,
                                   (cudaStream_t) bg_stream()),
             "cudaMemcpyAsync device to device");
}

/* Returns bytes / (median run time) in GB/s for runs timed runs of launch. */
static double rate(bg_launch_fn *launch, struct probe *p, double bytes, int runs)
{
    double *us = bench_alloc((size_t) runs * sizeof *us, "run times");
    bg_time_runs(launch, p, 1, 3, runs, us);
    double med = bench_median(us, (size_t) runs);
    free(us);
    return bytes / (med * 1e3);
}

/* Measures the device's ceilings. */
void bk_cuda_ceilings(const struct bench_opts *o, struct bench_ceilings *c)
{
    bg_open();
    memset(c, 0, sizeof *c);
    c->backend = BENCH_CUDA;
    int dev = 0, sms = 0, l2 = 0;
    bg_check((int) cudaGetDevice(&dev), "cudaGetDevice");
    struct cudaDeviceProp prop;
    bg_check((int) cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
    snprintf(c->name, sizeof c->name, "%.127s", prop.name);
    bg_check((int) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "SM count");
    bg_check((int) cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "L2 size");
    c->units = sms;
    c->cache_bytes = (size_t) l2;
    /* Left out of the header where NVML does not know them (0). */
    bg_gpu_limits(dev, &c->sm_max_mhz, &c->mem_max_mhz, &c->power_limit_w);

    /* A few GB, far beyond L2, so every run streams from memory (a quarter of free memory
     * at most). */
    size_t free_b = 0, total_b = 0;
    bg_check((int) cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    size_t bytes = o->quick ? (size_t) 256 << 20 : (size_t) 4 << 30;
    if (bytes > free_b / 4)
        bytes = free_b / 4;
    size_t tile = 2 * bp_tile_bytes();
    bytes = bytes / tile * tile;
    if (bytes == 0)
        bench_die("not enough free device memory for the bandwidth probes");
    struct probe p = { .half = bytes / 2 };
    p.buf = bg_alloc(bytes, "the bandwidth probes");
    p.sink = bg_alloc(sizeof *p.sink, "the probe's sink");
    bg_fill(p.buf, bytes / 4, PAGED_DTYPE_F32, 1.0f, 1.0f, o->seed ^ 0x5eed);
    bg_check((int) cudaMemsetAsync(p.sink, 0, sizeof *p.sink, (cudaStream_t) bg_stream()), "cudaMemset");
    bg_check(bp_grid(4, &p.blocks), "sizing the probe grid");
    int runs = o->quick ? 10 : 30;
    c->read_gbps = rate(read_launch, &p, (double) bytes, runs);
    c->copy_kernel_gbps = rate(copy_launch, &p, 2.0 * (double) p.half, runs);
    c->memcpy_gbps = rate(memcpy_launch, &p, 2.0 * (double) p.half, runs);
    c->copy_gbps = c->copy_kernel_gbps > c->memcpy_gbps ? c->copy_kernel_gbps : c->memcpy_gbps;
    bg_free(p.buf);
    bg_free(p.sink);

    char why[160] = "";
    c->mma_n = o->quick ? 2048 : 8192;
    c->mma_tflops = bg_cublas_tflops(c->mma_n, o->quick ? 5 : 20, o->seed ^ 0x3a3a, why, sizeof why);
    if (isnan(c->mma_tflops))
        fprintf(stderr, "paged-bench: cuBLAS bf16 rate n/a: %s\n", why);
}

/* A read of one volume, in input sets rotated past L2: set i starts at i * stride. */
struct volume_read {
    char *buf;
    size_t stride;      /* bytes between sets: the volume rounded up to whole tiles */
    unsigned *sink;
    int blocks;
};

/* Launches one streaming read of set's volume; returns nothing. */
static void volume_launch(void *ctx, int set)
{
    struct volume_read *v = ctx;
    bg_check(bp_read(v->buf + (size_t) set * v->stride, v->stride, v->sink, v->blocks, bg_stream()),
             "launching the read probe");
}

/* Times one launch of the streaming-read probe over bytes (rounded up to its 32 KB tiles),
 * sets rotated past L2 as a kernel's inputs are, on grids of one, two and four waves, each
 * block reading the same number of tiles (to within one); returns the fastest grid's median
 * in microseconds. */
double bk_cuda_read_us(const struct bench_opts *o, const struct bench_ceilings *c, double bytes)
{
    bg_open();
    size_t free_b = 0, total_b = 0;
    bg_check((int) cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    size_t tile = bp_tile_bytes();
    struct volume_read v = { .stride = ((size_t) bytes + tile - 1) / tile * tile };
    int nsets = bk_sets((double) v.stride, c->cache_bytes, 0.5 * (double) free_b, o->quick);
    v.buf = bg_alloc((size_t) nsets * v.stride, "the same-volume read");
    v.sink = bg_alloc(sizeof *v.sink, "the probe's sink");
    bg_fill(v.buf, (size_t) nsets * v.stride / 4, PAGED_DTYPE_F32, 1.0f, 1.0f, o->seed ^ 0x7ead);
    bg_check((int) cudaMemsetAsync(v.sink, 0, sizeof *v.sink, (cudaStream_t) bg_stream()), "cudaMemset");
    int wave = 0;
    bg_check(bp_grid(1, &wave), "sizing the probe grid");
    size_t tiles = v.stride / tile;
    int runs = o->quick ? 10 : 100, warmup = o->quick ? 3 : 10;
    double *us = bench_alloc((size_t) runs * sizeof *us, "run times");
    double best = INFINITY;
    for (int waves = 1; waves <= 4; waves *= 2) {
        /* As many rounds as this many waves need, then as few blocks as that many rounds
         * need: no block reads a tile more than another, so no round runs half empty. */
        size_t rounds = (tiles + (size_t) waves * (size_t) wave - 1) / ((size_t) waves * (size_t) wave);
        v.blocks = (int) ((tiles + rounds - 1) / rounds);
        bg_time_runs(volume_launch, &v, nsets, warmup, runs, us);
        double med = bench_median(us, (size_t) runs);
        if (med < best)
            best = med;
    }
    free(us);
    bg_free(v.buf);
    bg_free(v.sink);
    return best * (bytes / (double) v.stride);
}

/* ---- kernel timing */

/* One case on the device: its memory and each set's arguments. */
struct gcase {
    struct bk_case kc;
    struct bk_mem m;
    pk_decode_args *decode;
    pk_prefill_args *prefill;
    pk_append_args *append;
};

/* Launches set i of the case; set is the input set. */
static void case_launch(void *ctx, int set)
{
    struct gcase *g = ctx;
    switch (g->kc.s->op) {
    case BK_DECODE: bg_check_kernel(pk_cuda_decode(&g->decode[set], bg_stream()), "pk_cuda_decode"); break;
    case BK_PREFILL: bg_check_kernel(pk_cuda_prefill(&g->prefill[set], bg_stream()), "pk_cuda_prefill"); break;
    default: bg_check_kernel(pk_cuda_append(&g->append[set], bg_stream()), "pk_cuda_append"); break;
    }
}

/* Returns a device copy of n int32 of host memory (NULL for none). */
static int32_t *upload_i32(const int32_t *src, size_t n)
{
    if (src == NULL || n == 0)
        return NULL;
    int32_t *d = bg_alloc(n * sizeof *d, "block tables, lengths or slots");
    bg_upload(d, src, n * sizeof *d);
    return d;
}

/* Fills every set's arguments from the case's memory; returns nothing. */
static void build_args(struct gcase *g)
{
    for (int i = 0; i < g->kc.nsets; i++)
        switch (g->kc.s->op) {
        case BK_DECODE: bk_case_decode_args(&g->kc, &g->m, i, &g->decode[i]); break;
        case BK_PREFILL: bk_case_prefill_args(&g->kc, &g->m, i, &g->prefill[i]); break;
        default: bk_case_append_args(&g->kc, &g->m, i, &g->append[i]); break;
        }
}

/* Checks that the last run of set 0 wrote every output element, finite (they were NaN
 * bytes before). Dies otherwise. */
static void check_outputs(const struct gcase *g)
{
    size_t bytes = g->kc.out_bytes;
    if (bytes == 0)
        return;
    unsigned char *h = bench_alloc(bytes, "an output copy");
    bg_check((int) cudaMemcpy(h, g->m.out, bytes, cudaMemcpyDeviceToHost), "download of the outputs");
    int32_t dt = g->kc.s->q_dtype;
    size_t n = bytes / pk_dtype_size(dt);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(pk_load(h, i, dt)))
            bench_die("%s left output element %zu of %zu unwritten or not finite",
                      g->kc.s->op == BK_DECODE ? "pk_cuda_decode" : "pk_cuda_prefill", i, n);
    free(h);
}

/* Times shape s on the GPU. */
void bk_cuda_time(const struct bench_opts *o, const struct bench_ceilings *c, const struct bk_shape *s,
                  uint64_t seed, struct bk_timing *t)
{
    bg_open();
    size_t free_b = 0, total_b = 0;
    bg_check((int) cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    struct gcase g;
    memset(&g, 0, sizeof g);
    bk_case_build(&g.kc, s, bk_sets(bk_shape_bytes(s), c->cache_bytes, 0.5 * (double) free_b, o->quick), seed);
    const struct bk_case *kc = &g.kc;
    size_t pool_bytes = pk_cache_bytes(&kc->cache);
    g.m.pool = bg_alloc(pool_bytes, "the pool");
    g.m.in = bg_alloc((size_t) kc->nsets * kc->in_bytes, "the inputs");
    g.m.out = bg_alloc((size_t) kc->nsets * kc->out_bytes, "the outputs");
    g.m.tables = upload_i32(kc->tables, (size_t) kc->nsets * kc->tables_per_set);
    g.m.lens = upload_i32(kc->lens, kc->lens != NULL ? (size_t) s->seqs : 0);
    g.m.indptr = upload_i32(kc->indptr, kc->indptr != NULL ? (size_t) s->seqs + 1 : 0);
    g.m.slots = upload_i32(kc->slots, (size_t) kc->nsets * kc->slots_per_set);

    /* Random K planes and V planes (fp8 by their scales), random inputs, NaN outputs. */
    size_t plane = pool_bytes / (size_t) (2 * kc->cache.num_layers);
    size_t esize = pk_dtype_size(s->kv_dtype);
    for (int32_t l = 0; l < 2 * kc->cache.num_layers; l++)
        bg_fill((char *) g.m.pool + (size_t) l * plane, plane / esize, s->kv_dtype, 1.0f,
                l % 2 ? kc->cache.v_scale : kc->cache.k_scale, seed + 1 + (uint64_t) l);
    bg_fill(g.m.in, (size_t) kc->nsets * kc->in_bytes / pk_dtype_size(s->q_dtype), s->q_dtype, 1.0f, 1.0f,
            seed ^ 0x1234);
    if (kc->out_bytes > 0)
        bg_check((int) cudaMemsetAsync(g.m.out, 0xff, (size_t) kc->nsets * kc->out_bytes,
                                       (cudaStream_t) bg_stream()),
                 "cudaMemset of the outputs");

    g.decode = s->op == BK_DECODE ? bench_alloc((size_t) kc->nsets * sizeof *g.decode, "arguments") : NULL;
    g.prefill = s->op == BK_PREFILL ? bench_alloc((size_t) kc->nsets * sizeof *g.prefill, "arguments") : NULL;
    g.append = s->op == BK_APPEND ? bench_alloc((size_t) kc->nsets * sizeof *g.append, "arguments") : NULL;
    build_args(&g);
    /* One workspace per shape, shared by the sets (the runs are serial on one stream). */
    size_t ws = s->op == BK_DECODE ? pk_cuda_decode_workspace(&g.decode[0])
                : s->op == BK_PREFILL ? pk_cuda_prefill_workspace(&g.prefill[0]) : 0;
    if (ws > 0) {
        g.m.workspace = bg_alloc(ws, "the kernel workspace");
        g.m.workspace_size = ws;
        build_args(&g);
    }
    bg_sync("preparing the inputs");
    t->plan[0] = '\0';
    pk_decode_plan_info plan;
    if (s->op == BK_DECODE && pk_cuda_decode_plan(&g.decode[0], &plan) == 0) {
        const char *rings = plan.small_rings ? ", small rings" : "";
        const char *wide = plan.cta_heads > 8 ? " of 16 heads" : "";     /* the two n-tiles */
        if (plan.parts > 1)
            snprintf(t->plan, sizeof t->plan, "%lld CTAs%s, %d x %d tok%s", plan.ctas, wide, plan.parts,
                     plan.part_tokens, rings);
        else
            snprintf(t->plan, sizeof t->plan, "%lld CTAs%s%s", plan.ctas, wide, rings);
    }

    int runs = o->quick ? 10 : 100, warmup = o->quick ? 3 : 10;
    double *us = bench_alloc((size_t) runs * sizeof *us, "run times");
    t->sm_mhz = bg_time_runs(case_launch, &g, kc->nsets, warmup, runs, us);
    t->median_us = bench_median(us, (size_t) runs);
    t->runs = runs;
    t->sets = kc->nsets;
    free(us);
    check_outputs(&g);

    bg_free(g.m.pool);
    bg_free(g.m.in);
    bg_free(g.m.out);
    bg_free((void *) g.m.tables);
    bg_free((void *) g.m.lens);
    bg_free((void *) g.m.indptr);
    bg_free((void *) g.m.slots);
    bg_free(g.m.workspace);
    free(g.decode);
    free(g.prefill);
    free(g.append);
    bk_case_free(&g.kc);
}
