/* peers.c: paged-bench peers: paged's kernels and FlashInfer's on the same shapes, outputs compared (peers.py). */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/bench/peers.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/bench/daemon.h"
#include "tools/bench/shapes.h"
#include "tools/common/spawn.h"
#include "paths.h"

/*
 * The comparison itself is Python (tools/bench/peers.py, installed beside paged-bench): it
 * needs torch and FlashInfer. paged-bench times its own kernels first, exactly as the kernels
 * benchmark does, and hands the script the shapes, paged's times and the read ceiling as a
 * JSON document; the script starts its own pagedd, checks paged's output through the daemon
 * against a float32 reference and FlashInfer's against paged's, times FlashInfer, and writes
 * one tab-separated line per shape back, which become the peers tables here.
 */

/* FlashInfer compiles its kernels with nvcc on first use: minutes for the first shapes. */
#define BF_TIMEOUT_MS (3600 * 1000)
/* The script's exit status when the paged package or torch cannot be imported. */
#define BF_SKIP 77
/* The script's columns: op, the shape's index in its list (the row of the kernels' table),
 * shape, CUDA-core us, tensor-core us, best us, reference error, reference verdict,
 * FlashInfer error, FlashInfer verdict. */
#define BF_FIELDS 10

/* Writes x as a JSON number, or null when it is NaN. Returns nothing. */
static void json_num(FILE *f, double x)
{
    if (isnan(x) || isinf(x))
        fputs("null", f);
    else
        fprintf(f, "%.17g", x);
}

/* Writes the shape document (see bench_peers_list); dec and pre are the kernels' tables of
 * paged's times (NULL: none), c the ceilings (NULL: none). Returns 0, or -1 on a write error. */
static int write_doc(FILE *f, const struct bench_opts *o, int cpu, const struct bench_ceilings *c,
                     const struct br_table *dec, const struct br_table *pre)
{
    fprintf(f, "{\"tool\": \"paged-bench\", \"version\": \"%s\", \"backend\": \"%s\", \"quick\": %d, ",
            PACKAGE_VERSION, cpu ? "cpu" : "cuda", o->quick);
    fputs("\"read_gbps\": ", f);
    json_num(f, c != NULL ? c->read_gbps : NAN);
    fputs(", \"shapes\": [", f);
    int first = 1;
    for (int op = 0; op < 2; op++) {
        int n;
        const struct bk_shape *shapes = bk_shapes(op == 0 ? BK_DECODE : BK_PREFILL, o->quick, cpu, &n);
        const struct br_table *t = op == 0 ? dec : pre;
        for (int i = 0; i < n; i++) {
            const struct bk_shape *s = &shapes[i];
            if (s->kv_dtype != PAGED_DTYPE_BF16 || s->q_dtype != PAGED_DTYPE_BF16)
                continue;   /* the comparison is of bf16 caches: the fp8 row has no peer here */
            char name[64];
            bk_shape_name(s, name, sizeof name);
            int prefill = s->op == BK_PREFILL;
            fprintf(f, "%s\n {\"op\": \"%s\", \"index\": %d, \"name\": \"%s\", \"seqs\": %d, \"ctx\": %d, "
                    "\"qlen\": %d, \"cached\": %d, \"hq\": %d, \"hkv\": %d, \"D\": %d, \"B\": %d, "
                    "\"dtype\": \"bf16\", ",
                    first ? "" : ",", prefill ? "prefill" : "decode", i, name, (int) s->seqs,
                    prefill ? (int) (s->cached + s->qlen) : (int) s->ctx, prefill ? (int) s->qlen : 1,
                    prefill ? (int) s->cached : 0, (int) s->hq, (int) s->hkv, (int) s->D, (int) s->B);
            fputs("\"bytes\": ", f);
            json_num(f, bk_shape_bytes(s));
            fputs(", \"flops\": ", f);
            json_num(f, bk_shape_flops(s));
            fputs(", \"paged_us\": ", f);
            json_num(f, t != NULL ? br_get_num(t, i, "time_us") : NAN);
            fputs("}", f);
            first = 0;
        }
    }
    fputs("\n]}\n", f);
    return ferror(f) ? -1 : 0;
}

/* Writes the shape document without paged's times. */
int bench_peers_list(const struct bench_opts *o, int cpu, FILE *f)
{
    return write_doc(f, o, cpu, NULL, NULL, NULL);
}

/* Returns the script to run: $PAGED_BENCH_PEERS, else the one installed beside this program,
 * else the build tree's tools/bench/peers.py; NULL when none is there. buf holds a built path. */
static const char *script_path(const char *self, char *buf, size_t size)
{
    const char *env = getenv("PAGED_BENCH_PEERS");
    if (env != NULL && *env)
        return env;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", self);
    char *slash = strrchr(dir, '/');
    if (slash != NULL) {
        *slash = '\0';
        snprintf(buf, size, "%s/%s", dir, PAGED_BENCH_PEERS_NAME);
        if (access(buf, R_OK) == 0)
            return buf;
    }
    char top[1024];
    if (bd_build_tree(self, top, sizeof top)) {
        snprintf(buf, size, "%s/tools/bench/peers.py", top);
        if (access(buf, R_OK) == 0)
            return buf;
    }
    return NULL;
}

/* One line of the script's rows. */
struct bf_row {
    char op[16], shape[64];
    int index;
    double fi_cuda_us, fi_tc_us, fi_us;
    char ref_err[32], ref_ok[16], fi_err[32], fi_ok[16];
};

/* Parses a figure of the rows ("n/a": NaN). Returns it. */
static double row_num(const char *s)
{
    if (strcmp(s, "n/a") == 0)
        return NAN;
    char *end = NULL;
    double d = strtod(s, &end);
    return end != s && *end == '\0' ? d : NAN;
}

/* Parses one tab-separated line into row. Returns 0, or -1 when it has not BF_FIELDS fields. */
static int parse_row(char *line, struct bf_row *row)
{
    char *f[BF_FIELDS];
    int n = 0;
    line[strcspn(line, "\r\n")] = '\0';
    for (char *save = NULL, *tok = strtok_r(line, "\t", &save); tok != NULL && n < BF_FIELDS;
         tok = strtok_r(NULL, "\t", &save))
        f[n++] = tok;
    if (n != BF_FIELDS)
        return -1;
    snprintf(row->op, sizeof row->op, "%s", f[0]);
    char *end = NULL;
    long index = strtol(f[1], &end, 10);
    row->index = end != f[1] && *end == '\0' && index >= 0 && index < 100000 ? (int) index : -1;
    snprintf(row->shape, sizeof row->shape, "%s", f[2]);
    row->fi_cuda_us = row_num(f[3]);
    row->fi_tc_us = row_num(f[4]);
    row->fi_us = row_num(f[5]);
    snprintf(row->ref_err, sizeof row->ref_err, "%s", f[6]);
    snprintf(row->ref_ok, sizeof row->ref_ok, "%s", f[7]);
    snprintf(row->fi_err, sizeof row->fi_err, "%s", f[8]);
    snprintf(row->fi_ok, sizeof row->fi_ok, "%s", f[9]);
    return 0;
}

/* Makes the peers tables of the script's rows file (its first line the title), paged's side
 * from the kernels' tables dec and pre. Returns the rows read, or -1 when the file is bad. */
static int peer_tables(const char *path, int quick, const struct bench_ceilings *c, const struct br_table *dec,
                       const struct br_table *pre, struct br_report *r)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char line[1024], title[640], buf[700];
    if (fgets(line, sizeof line, f) == NULL || strncmp(line, "# ", 2) != 0) {
        fclose(f);
        return -1;
    }
    line[strcspn(line, "\r\n")] = '\0';
    snprintf(title, sizeof title, "%.600s", line + 2);
    snprintf(buf, sizeof buf, "peers decode: %s", title);
    struct br_table *td = br_table(r, "peers_decode", buf);
    br_col(td, "shape", "shape", 0, 0);
    br_col(td, "head_dim", "D", 0, 0);
    br_col(td, "fi_cuda_core_us", "FI CUDA-core us", 1, 1);
    br_col(td, "fi_tensor_core_us", "FI tensor-core us", 1, 1);
    br_col(td, "fi_us", "FI best us", 1, 1);
    br_col(td, "paged_us", "paged us", 1, 1);
    br_col(td, "pct_read", "paged % read", 1, 1);
    br_col(td, "fi_pct_read", "FI % read", 1, 1);
    br_col(td, "paged_over_fi", "paged/FI time", 2, 1);
    br_col(td, "reference", "paged vs ref", 0, 0);
    br_col(td, "flashinfer", "FI vs paged", 0, 0);
    snprintf(buf, sizeof buf, "peers prefill (causal): %s", title);
    struct br_table *tp = br_table(r, "peers_prefill", buf);
    br_col(tp, "shape", "shape", 0, 0);
    br_col(tp, "fi_us", "FI us", 1, 1);
    br_col(tp, "paged_us", "paged us", 1, 1);
    br_col(tp, "fi_tflops", "FI TFLOP/s", 3, 1);
    br_col(tp, "paged_tflops", "paged TFLOP/s", 3, 1);
    br_col(tp, "paged_over_fi", "paged/FI time", 2, 1);
    br_col(tp, "reference", "paged vs ref", 0, 0);
    br_col(tp, "flashinfer", "FI vs paged", 0, 0);
    int n = 0, cpu = c->backend == BENCH_CPU;
    while (fgets(line, sizeof line, f) != NULL && n < 1000) {
        struct bf_row row;
        if (parse_row(line, &row) != 0) {
            fclose(f);
            return -1;
        }
        int decode = strcmp(row.op, "decode") == 0;
        const struct br_table *kt = decode ? dec : pre;
        int nshapes, krow = row.index;
        const struct bk_shape *shapes = bk_shapes(decode ? BK_DECODE : BK_PREFILL, quick, cpu, &nshapes);
        if (krow < 0 || krow >= nshapes || krow >= kt->nrows) {
            fclose(f);
            return -1;
        }
        double paged_us = br_get_num(kt, krow, "time_us");
        double mbytes = br_get_num(kt, krow, "mbytes");
        struct br_table *t = decode ? td : tp;
        int i = br_row(t);
        br_set_str(t, i, "shape", row.shape);
        br_set_num(t, i, "fi_us", row.fi_us);
        br_set_num(t, i, "paged_us", paged_us);
        br_set_num(t, i, "paged_over_fi", paged_us / row.fi_us);
        snprintf(buf, sizeof buf, "%s %s", row.ref_ok, row.ref_err);
        br_set_str(t, i, "reference", buf);
        snprintf(buf, sizeof buf, "%s%s%s", row.fi_ok, strcmp(row.fi_ok, "n/a") == 0 ? "" : " ",
                 strcmp(row.fi_ok, "n/a") == 0 ? "" : row.fi_err);
        br_set_str(t, i, "flashinfer", buf);
        if (decode) {
            br_set_num(t, i, "fi_cuda_core_us", row.fi_cuda_us);
            br_set_num(t, i, "fi_tensor_core_us", row.fi_tc_us);
            br_set_num(t, i, "pct_read", br_get_num(kt, krow, "pct_read"));
            br_set_num(t, i, "fi_pct_read", 100.0 * mbytes * 1e6 / (row.fi_us * 1e3) / c->read_gbps);
            br_set_int(t, i, "head_dim", shapes[krow].D);
        } else {
            double tflops = br_get_num(kt, krow, "tflops");
            br_set_num(t, i, "paged_tflops", tflops);
            br_set_num(t, i, "fi_tflops", tflops * paged_us / row.fi_us);
        }
        n++;
    }
    fclose(f);
    br_print_table(td, stdout);
    br_print_table(tp, stdout);
    return n;
}

/* Runs the peers benchmark. */
int bench_peers(const struct bench_opts *o, const struct bench_ceilings *c, struct br_report *r)
{
    struct br_table *dec = bench_kernels_decode(o, c, r);
    struct br_table *pre = bench_kernels_prefill(o, c, r);

    char self[1024], built[1100], script_buf[1100], top[1024];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0 || (size_t) len >= sizeof self - 1)
        bench_die("cannot find this program's path (/proc/self/exe)");
    self[len] = '\0';
    const char *script = script_path(self, script_buf, sizeof script_buf);
    if (script == NULL)
        bench_die("peers: peers.py is neither beside this program nor in a build tree (set PAGED_BENCH_PEERS)");
    const char *pagedd = bd_pagedd_path(o, self, built, sizeof built);

    char dir[512], err[512], doc[600], rows[600];
    if (spawn_mkdtemp(dir, sizeof dir, NULL, "paged-bench-peers", err, sizeof err) != 0)
        bench_die("peers: %s", err);
    snprintf(doc, sizeof doc, "%s/shapes.json", dir);
    snprintf(rows, sizeof rows, "%s/rows.tsv", dir);
    FILE *f = fopen(doc, "w");
    int cpu = c->backend == BENCH_CPU;
    if (f == NULL || write_doc(f, o, cpu, c, dec, pre) != 0 || fclose(f) != 0)
        bench_die("peers: writing %s: %s", doc, strerror(errno));

    /* From a build tree the staged package and the built libpaged come first. */
    char pypath[2200], ldpath[2200];
    const char *env[3] = { NULL };
    int nenv = 0;
    if (bd_build_tree(self, top, sizeof top)) {
        const char *old = getenv("PYTHONPATH");
        snprintf(pypath, sizeof pypath, "PYTHONPATH=%s/python/staged%s%s", top, old != NULL && *old ? ":" : "",
                 old != NULL ? old : "");
        old = getenv("LD_LIBRARY_PATH");
        snprintf(ldpath, sizeof ldpath, "LD_LIBRARY_PATH=%s/lib/.libs%s%s", top, old != NULL && *old ? ":" : "",
                 old != NULL ? old : "");
        env[nenv++] = pypath;
        env[nenv++] = ldpath;
    }
    const char *python = getenv("PAGED_BENCH_PYTHON");
    if (python == NULL || *python == '\0')
        python = "python3";
    char seed[32];
    snprintf(seed, sizeof seed, "--seed=%llu", (unsigned long long) o->seed);
    const char *argv[] = { python, script, "--shapes", doc, "--rows", rows, "--pagedd", pagedd,
                           cpu ? "--backend=cpu" : "--backend=cuda", seed, "--no-table",
                           o->quick ? "--runs=10" : "--runs=100", o->quick ? "--warmup=3" : "--warmup=10", NULL };
    const struct spawn_cmd cmd = { .argv = argv, .env = env, .death_signal = SIGTERM };
    fflush(stdout);
    fflush(stderr);
    int st = spawn_run(&cmd, BF_TIMEOUT_MS, err, sizeof err);
    int status = 0;
    if (st == -1)
        bench_die("peers: %s %s: %s", python, script, err);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        printf("peers: no %s to run %s: nothing to compare\n", python, script);
    else if (WIFEXITED(st) && WEXITSTATUS(st) == BF_SKIP)
        printf("peers: %s cannot import the paged package or torch: nothing to compare\n", python);
    else {
        char what[64];
        int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (rc != 0 && rc != 1)
            bench_die("peers: %s ended with %s", script, spawn_describe(what, sizeof what, st));
        if (peer_tables(rows, o->quick, c, dec, pre, r) < 0)
            bench_die("peers: %s wrote no rows, or rows that do not match the shapes", script);
        if (rc != 0) {
            fprintf(stderr, "paged-bench: peers: an output differs (see above)\n");
            status = -1;
        }
    }
    spawn_rmdir(dir);
    return status;
}
