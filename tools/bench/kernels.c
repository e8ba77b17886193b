/* kernels.c: paged-bench kernels: every shape timed on the resolved backend, as tables of time, bytes and rates. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <math.h>
#include <stdio.h>

#include "kernels/kernels.h"
#include "tools/bench/bench.h"
#include "tools/bench/cpuwork.h"
#include "tools/bench/shapes.h"
#ifdef HAVE_CUDA
#include "tools/bench/gpu.h"
#endif

/* Times one shape on the backend the ceilings were measured on; returns nothing. */
static void time_shape(const struct bench_opts *o, const struct bench_ceilings *c, const struct bk_shape *s,
                       uint64_t seed, struct bk_timing *t)
{
#ifdef HAVE_CUDA
    if (c->backend == BENCH_CUDA) {
        bk_cuda_time(o, c, s, seed, t);
        return;
    }
#endif
    bk_cpu_time(o, c, s, seed, t);
}

/* Writes the table's title line (what, and how it was timed) to buf; returns nothing. */
static void title(char *buf, size_t size, const char *what, const struct bench_ceilings *c)
{
    if (c->backend == BENCH_CUDA)
        snprintf(buf, size, "%s (pk_cuda_*: median of CUDA-event times, runs queued back to back, "
                            "input sets rotated past L2)", what);
    else
        snprintf(buf, size, "%s (pk_cpu_* on %d threads: median of wall-clock times, input sets "
                            "rotated past the last-level cache)", what, c->units);
}

/* Returns the name of a dtype for the tables. */
static const char *dtype_name(int32_t dt)
{
    return dt == PAGED_DTYPE_FP8_E4M3 ? "fp8" : dt == PAGED_DTYPE_F16 ? "f16" : dt == PAGED_DTYPE_F32 ? "f32" : "bf16";
}

/* Times the decode shapes into a table; adds the fp8 speedup to the summary. Returns the table. */
struct br_table *bench_kernels_decode(const struct bench_opts *o, const struct bench_ceilings *c, struct br_report *r)
{
    char buf[320];
    title(buf, sizeof buf, "decode: batch x context x q heads/KV heads, block 16", c);
    struct br_table *t = br_table(r, "decode", buf);
    br_col(t, "shape", "shape", 0, 0);
    br_col(t, "head_dim", "D", 0, 0);
    br_col(t, "cache", "cache", 0, 0);
    br_col(t, "time_us", "time us", 1, 1);
    br_col(t, "mbytes", "MB moved", 1, 1);
    br_col(t, "gbps", "GB/s", 1, 1);
    br_col(t, "pct_read", "% read bw", 1, 1);
    br_col(t, "runs", "runs", 0, 0);
    br_col(t, "sets", "sets", 0, 0);
    if (c->backend == BENCH_CUDA) {
        br_col(t, "read_us", "1-launch read us", 1, 1);
        br_col(t, "pct_read_same", "% of it", 1, 1);
        br_col(t, "sm_mhz", "SM MHz", 0, 1);
        br_col(t, "plan", "plan", 0, 0);
    }
    int n;
    const struct bk_shape *shapes = bk_shapes(BK_DECODE, o->quick, c->backend == BENCH_CPU, &n);
    double bf16_us = NAN, fp8_us = NAN;
    const struct bk_shape *fp8 = NULL;
    for (int i = 0; i < n; i++)
        if (shapes[i].kv_dtype == PAGED_DTYPE_FP8_E4M3)
            fp8 = &shapes[i];
    for (int i = 0; i < n; i++) {
        const struct bk_shape *s = &shapes[i];
        struct bk_timing tm;
        time_shape(o, c, s, o->seed + 1000 + (uint64_t) i, &tm);
        double bytes = bk_shape_bytes(s), gbps = bytes / (tm.median_us * 1e3);
        int row = br_row(t);
        bk_shape_name(s, buf, sizeof buf);
        br_set_str(t, row, "shape", buf);
        br_set_int(t, row, "head_dim", s->D);
        br_set_str(t, row, "cache", dtype_name(s->kv_dtype));
        br_set_num(t, row, "time_us", tm.median_us);
        br_set_num(t, row, "mbytes", bytes / 1e6);
        br_set_num(t, row, "gbps", gbps);
        br_set_num(t, row, "pct_read", 100.0 * gbps / c->read_gbps);
        br_set_int(t, row, "runs", tm.runs);
        br_set_int(t, row, "sets", tm.sets);
#ifdef HAVE_CUDA
        if (c->backend == BENCH_CUDA) {
            /* A plain contiguous read of the same bytes in one launch, timed the same way. */
            double read_us = bk_cuda_read_us(o, c, bytes);
            br_set_num(t, row, "read_us", read_us);
            br_set_num(t, row, "pct_read_same", 100.0 * read_us / tm.median_us);
            br_set_num(t, row, "sm_mhz", tm.sm_mhz);
            br_set_str(t, row, "plan", tm.plan[0] != '\0' ? tm.plan : "n/a");
        }
#endif
        if (fp8 != NULL && s == fp8)
            fp8_us = tm.median_us;
        else if (fp8 != NULL && s->seqs == fp8->seqs && s->ctx == fp8->ctx && s->hq == fp8->hq
                 && s->hkv == fp8->hkv && s->D == fp8->D && s->kv_dtype == PAGED_DTYPE_BF16)
            bf16_us = tm.median_us;
    }
    br_print_table(t, stdout);
    if (fp8 != NULL && !isnan(bf16_us)) {
        char name[64], label[160];
        bk_shape_name(fp8, name, sizeof name);
        snprintf(label, sizeof label, "decode %s D%d: fp8 cache speed over bf16", name, (int) fp8->D);
        br_summary(r, "fp8_speedup", label, bf16_us / fp8_us, "x", 2);
    }
    return t;
}

/* Times the prefill shapes into a table; returns the table. */
struct br_table *bench_kernels_prefill(const struct bench_opts *o, const struct bench_ceilings *c, struct br_report *r)
{
    char buf[320];
    title(buf, sizeof buf, "prefill: sequences x new tokens + cached tokens, 32/8 heads, D 128, causal, block 16", c);
    struct br_table *t = br_table(r, "prefill", buf);
    br_col(t, "shape", "shape", 0, 0);
    br_col(t, "time_us", "time us", 1, 1);
    br_col(t, "mbytes", "MB moved", 1, 1);
    br_col(t, "gbps", "GB/s", 1, 1);
    br_col(t, "tflops", "TFLOP/s", 3, 1);
    br_col(t, "pct_mma", "% bf16 mma", 1, 1);
    br_col(t, "runs", "runs", 0, 0);
    br_col(t, "sets", "sets", 0, 0);
    if (c->backend == BENCH_CUDA)
        br_col(t, "sm_mhz", "SM MHz", 0, 1);
    int n;
    const struct bk_shape *shapes = bk_shapes(BK_PREFILL, o->quick, c->backend == BENCH_CPU, &n);
    for (int i = 0; i < n; i++) {
        const struct bk_shape *s = &shapes[i];
        struct bk_timing tm;
        time_shape(o, c, s, o->seed + 2000 + (uint64_t) i, &tm);
        double bytes = bk_shape_bytes(s), tflops = bk_shape_flops(s) / (tm.median_us * 1e6);
        int row = br_row(t);
        bk_shape_name(s, buf, sizeof buf);
        br_set_str(t, row, "shape", buf);
        br_set_num(t, row, "time_us", tm.median_us);
        br_set_num(t, row, "mbytes", bytes / 1e6);
        br_set_num(t, row, "gbps", bytes / (tm.median_us * 1e3));
        br_set_num(t, row, "tflops", tflops);
        br_set_num(t, row, "pct_mma", 100.0 * tflops / c->mma_tflops);   /* NAN (n/a) without cuBLAS */
        br_set_int(t, row, "runs", tm.runs);
        br_set_int(t, row, "sets", tm.sets);
        if (c->backend == BENCH_CUDA)
            br_set_num(t, row, "sm_mhz", tm.sm_mhz);
    }
    br_print_table(t, stdout);
    return t;
}

/* Times the append shapes into a table; returns nothing. */
static void append_table(const struct bench_opts *o, const struct bench_ceilings *c, struct br_report *r)
{
    char buf[320];
    title(buf, sizeof buf, "append: tokens x layers in one request, 8 KV heads, D 128", c);
    struct br_table *t = br_table(r, "append", buf);
    br_col(t, "shape", "shape", 0, 0);
    br_col(t, "time_us", "time us", 1, 1);
    br_col(t, "mbytes", "MB moved", 1, 1);
    br_col(t, "gbps", "GB/s", 1, 1);
    br_col(t, "pct_copy", "% copy bw", 1, 1);
    br_col(t, "runs", "runs", 0, 0);
    br_col(t, "sets", "sets", 0, 0);
    if (c->backend == BENCH_CUDA)
        br_col(t, "sm_mhz", "SM MHz", 0, 1);
    int n;
    const struct bk_shape *shapes = bk_shapes(BK_APPEND, o->quick, c->backend == BENCH_CPU, &n);
    for (int i = 0; i < n; i++) {
        const struct bk_shape *s = &shapes[i];
        struct bk_timing tm;
        time_shape(o, c, s, o->seed + 3000 + (uint64_t) i, &tm);
        double bytes = bk_shape_bytes(s), gbps = bytes / (tm.median_us * 1e3);
        int row = br_row(t);
        bk_shape_name(s, buf, sizeof buf);
        br_set_str(t, row, "shape", buf);
        br_set_num(t, row, "time_us", tm.median_us);
        br_set_num(t, row, "mbytes", bytes / 1e6);
        br_set_num(t, row, "gbps", gbps);
        br_set_num(t, row, "pct_copy", 100.0 * gbps / c->copy_gbps);
        br_set_int(t, row, "runs", tm.runs);
        br_set_int(t, row, "sets", tm.sets);
        if (c->backend == BENCH_CUDA)
            br_set_num(t, row, "sm_mhz", tm.sm_mhz);
    }
    br_print_table(t, stdout);
}

/* Runs the kernels benchmark. */
void bench_kernels(const struct bench_opts *o, const struct bench_ceilings *c, struct br_report *r)
{
    bench_kernels_decode(o, c, r);
    bench_kernels_prefill(o, c, r);
    append_table(o, c, r);
}
