/* cpuwork.c: the CPU side of paged-bench: one thread pool, parallel fills, the CPU ceilings and kernel timing. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/bench/cpuwork.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "lib/core/clock.h"
#include "tools/bench/kcase.h"

static pd_workers *pool;

/* Returns the thread pool, starting it on first use. */
pd_workers *bench_workers(unsigned threads)
{
    if (pool == NULL) {
        char *cause = NULL;
        pool = pd_workers_create(threads ? threads : bench_online_cpus(), &cause);
        if (pool == NULL)
            bench_die("starting CPU worker threads: %s", cause ? cause : "failed");
    }
    return pool;
}

/* Stops the thread pool; returns nothing. */
void bench_workers_close(void)
{
    pd_workers_destroy(pool);
    pool = NULL;
}

/* ---- parallel fill */

#define FILL_CHUNK ((size_t) 1 << 16)

struct fill_job {
    void *p;
    size_t n;
    int32_t dtype;
    float amp, scale;
    uint64_t seed;
};

/* Fills chunks [begin, end) of a fill job; returns nothing. */
static void fill_work(const void *arg, size_t begin, size_t end)
{
    const struct fill_job *j = arg;
    size_t lo = begin * FILL_CHUNK, hi = end * FILL_CHUNK;
    bench_fill_host(j->p, lo, hi < j->n ? hi : j->n, j->dtype, j->amp, j->scale, j->seed);
}

/* Fills on the thread pool; returns nothing. */
void bench_fill_parallel(void *p, size_t n, int32_t dtype, float amp, float scale, uint64_t seed)
{
    struct fill_job j = { p, n, dtype, amp, scale, seed };
    pd_workers_run(bench_workers(0), fill_work, &j, (n + FILL_CHUNK - 1) / FILL_CHUNK);
}

/* ---- ceilings: a threaded streaming read and a threaded copy */

#define PROBE_CHUNK ((size_t) 1 << 20)

struct probe_job {
    const uint64_t *src;
    uint64_t *dst;
    _Atomic uint64_t sink;
};

/* Reads chunks [begin, end) with four independent sums, folded into the sink so the reads
 * cannot be dropped. Returns nothing. */
static void read_work(const void *arg, size_t begin, size_t end)
{
    struct probe_job *j = (struct probe_job *) arg;
    const size_t words = PROBE_CHUNK / sizeof(uint64_t);
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t k = begin; k < end; k++) {
        const uint64_t *p = j->src + k * words;
        for (size_t i = 0; i < words; i += 4) {
            a += p[i];
            b += p[i + 1];
            c += p[i + 2];
            d += p[i + 3];
        }
    }
    atomic_fetch_xor_explicit(&j->sink, a ^ b ^ c ^ d, memory_order_relaxed);
}

/* Copies chunks [begin, end) from src to dst; returns nothing. */
static void copy_work(const void *arg, size_t begin, size_t end)
{
    const struct probe_job *j = arg;
    const size_t words = PROBE_CHUNK / sizeof(uint64_t);
    memcpy(j->dst + begin * words, j->src + begin * words, (end - begin) * PROBE_CHUNK);
}

/* Returns the median rate in GB/s of runs of a job over items chunks moving bytes each run. */
static double probe_rate(pd_workers *w, pd_work_fn *fn, struct probe_job *j, size_t items,
                         double bytes, int runs)
{
    double *t = bench_alloc((size_t) runs * sizeof *t, "probe times");
    pd_workers_run(w, fn, j, items);   /* warm-up */
    for (int r = 0; r < runs; r++) {
        uint64_t t0 = pcore_now_ns();
        pd_workers_run(w, fn, j, items);
        t[r] = (double) (pcore_now_ns() - t0);
    }
    double med = bench_median(t, (size_t) runs);
    free(t);
    return bytes / med;
}

/* Reads the CPU's model name into buf (or "CPU"); returns nothing. */
static void cpu_model(char *buf, size_t size)
{
    snprintf(buf, size, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
            colon++;
            while (*colon == ' ' || *colon == '\t')
                colon++;
            colon[strcspn(colon, "\n")] = '\0';
            snprintf(buf, size, "%s", colon);
            break;
        }
    }
    fclose(f);
}

/* Returns the last-level cache size in bytes (32 MiB when the system does not say). */
static size_t cpu_cache_bytes(void)
{
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0)
        return (size_t) l3;
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? (size_t) l2 : (size_t) 32 << 20;
}

/* Measures the CPU ceilings. */
void bench_cpu_ceilings(const struct bench_opts *o, struct bench_ceilings *c)
{
    pd_workers *w = bench_workers(o->threads);
    memset(c, 0, sizeof *c);
    c->backend = BENCH_CPU;
    cpu_model(c->name, sizeof c->name);
    c->units = (int) pd_workers_count(w);
    c->cache_bytes = cpu_cache_bytes();
    /* Several times the cache, so the probe reads memory, not cache. */
    size_t bytes = o->quick ? (size_t) 32 << 20 : 8 * c->cache_bytes;
    if (!o->quick && bytes < ((size_t) 256 << 20))
        bytes = (size_t) 256 << 20;
    if (!o->quick && bytes > ((size_t) 2 << 30))
        bytes = (size_t) 2 << 30;
    bytes = (bytes + PROBE_CHUNK - 1) / PROBE_CHUNK * PROBE_CHUNK;
    size_t items = bytes / PROBE_CHUNK;
    uint64_t *src = bench_alloc(bytes, "the read probe"), *dst = bench_alloc(bytes, "the copy probe");
    bench_fill_parallel(src, bytes / 4, PAGED_DTYPE_F32, 1.0f, 1.0f, o->seed ^ 0x5eed);
    bench_fill_parallel(dst, bytes / 4, PAGED_DTYPE_F32, 1.0f, 1.0f, o->seed ^ 0xd57);
    struct probe_job j = { .src = src, .dst = dst };
    int runs = o->quick ? 3 : 10;
    c->read_gbps = probe_rate(w, read_work, &j, items, (double) bytes, runs);
    c->copy_kernel_gbps = probe_rate(w, copy_work, &j, items, 2.0 * (double) bytes, runs);
    c->copy_gbps = c->copy_kernel_gbps;
    c->memcpy_gbps = NAN;
    c->mma_tflops = NAN;
    free(src);
    free(dst);
}

/* ---- kernel timing */

/* One set's arguments, whichever op. */
union cpu_args {
    pk_decode_args decode;
    pk_prefill_args prefill;
    pk_append_args append;
};

/* Runs items [begin, end) of a decode; returns nothing. */
static void decode_work(const void *arg, size_t begin, size_t end)
{
    pk_cpu_decode_run(arg, begin, end);
}

/* Runs items [begin, end) of a prefill; returns nothing. */
static void prefill_work(const void *arg, size_t begin, size_t end)
{
    pk_cpu_prefill_run(arg, begin, end);
}

/* Runs items [begin, end) of an append; returns nothing. */
static void append_work(const void *arg, size_t begin, size_t end)
{
    pk_cpu_append_run(arg, begin, end);
}

/* Runs set i of a case once on the pool; returns nothing. */
static void run_set(pd_workers *w, enum bk_op op, const union cpu_args *a)
{
    switch (op) {
    case BK_DECODE: pd_workers_run(w, decode_work, &a->decode, pk_cpu_decode_items(&a->decode)); break;
    case BK_PREFILL: pd_workers_run(w, prefill_work, &a->prefill, pk_cpu_prefill_items(&a->prefill)); break;
    default: pd_workers_run(w, append_work, &a->append, pk_cpu_append_items(&a->append)); break;
    }
}

/* Times shape s on the CPU. */
void bk_cpu_time(const struct bench_opts *o, const struct bench_ceilings *c, const struct bk_shape *s,
                 uint64_t seed, struct bk_timing *t)
{
    pd_workers *w = bench_workers(o->threads);
    struct bk_case kc;
    double budget = o->quick ? 64.0 * (1 << 20) : 4.0 * (1 << 30);
    bk_case_build(&kc, s, bk_sets(bk_shape_bytes(s), c->cache_bytes, budget, o->quick), seed);
    size_t pool_bytes = pk_cache_bytes(&kc.cache);
    struct bk_mem m = {
        .pool = bench_alloc(pool_bytes, "the pool"),
        .in = bench_alloc((size_t) kc.nsets * kc.in_bytes, "the inputs"),
        .out = bench_alloc((size_t) kc.nsets * kc.out_bytes, "the outputs"),
        .tables = kc.tables,
        .lens = kc.lens,
        .indptr = kc.indptr,
        .slots = kc.slots,
    };
    /* The pool's K planes and V planes, then the inputs; outputs start as NaN bytes. */
    size_t plane = pool_bytes / (size_t) (2 * kc.cache.num_layers);
    size_t esize = pk_dtype_size(s->kv_dtype);
    for (int32_t l = 0; l < 2 * kc.cache.num_layers; l++)
        bench_fill_parallel((char *) m.pool + (size_t) l * plane, plane / esize, s->kv_dtype, 1.0f,
                            l % 2 ? kc.cache.v_scale : kc.cache.k_scale, seed + 1 + (uint64_t) l);
    bench_fill_parallel(m.in, (size_t) kc.nsets * kc.in_bytes / pk_dtype_size(s->q_dtype), s->q_dtype,
                        1.0f, 1.0f, seed ^ 0x1234);
    memset(m.out, 0xff, (size_t) kc.nsets * kc.out_bytes);

    union cpu_args *args = bench_alloc((size_t) kc.nsets * sizeof *args, "arguments");
    for (int i = 0; i < kc.nsets; i++) {
        int rc;
        switch (s->op) {
        case BK_DECODE:
            bk_case_decode_args(&kc, &m, i, &args[i].decode);
            rc = pk_cpu_decode_check(&args[i].decode);
            break;
        case BK_PREFILL:
            bk_case_prefill_args(&kc, &m, i, &args[i].prefill);
            rc = pk_cpu_prefill_check(&args[i].prefill);
            break;
        default:
            bk_case_append_args(&kc, &m, i, &args[i].append);
            rc = pk_cpu_append_check(&args[i].append);
            break;
        }
        if (rc != 0)
            bench_die("pk_cpu kernels refuse the shape: %s", paged_strerror(rc));
    }

    /* A warm-up run, then runs until enough samples or the time budget is spent: a shape
     * that takes seconds per run is not repeated 50 times on a CPU. A first run that long
     * counts as a sample (a CPU has no lazy loading to keep out, and the inputs rotate). */
    double limit_ns = o->quick ? 0.2e9 : 3e9;
    int max_runs = o->quick ? 5 : 50, min_runs = 3;
    double *times = bench_alloc((size_t) max_runs * sizeof *times, "run times");
    double spent = 0.0;
    int runs = 0;
    uint64_t t0 = pcore_now_ns();
    run_set(w, s->op, &args[0]);
    double first = (double) (pcore_now_ns() - t0);
    if (first > limit_ns / 3) {
        times[runs++] = first;
        spent = first;
        min_runs = 1;
    }
    while (runs < max_runs && (runs < min_runs || spent < limit_ns)) {
        uint64_t a = pcore_now_ns();
        run_set(w, s->op, &args[(runs + 1) % kc.nsets]);
        times[runs] = (double) (pcore_now_ns() - a);
        spent += times[runs++];
    }
    t->median_us = bench_median(times, (size_t) runs) / 1e3;
    t->runs = runs;
    t->sets = kc.nsets;
    t->plan[0] = '\0';
    t->sm_mhz = NAN;
    free(times);
    free(args);
    free(m.pool);
    free(m.in);
    free(m.out);
    bk_case_free(&kc);
}
