/* service.c: paged-bench service: client processes decoding through pagedd, against the kernels in-process. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/bench/service.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/core/clock.h"
#include "paged.h"
#include "tools/bench/daemon.h"
#include "tools/common/spawn.h"
#include "paths.h"
#ifdef HAVE_CUDA
#include "tools/bench/gpu.h"
#endif

#define MAX_SCENARIOS (BENCH_MAX_CLIENT_COUNTS + 1)
#define MAX_CLIENTS 256

/* One row of the service table: n clients of batch sequences each. */
struct scenario {
    unsigned clients, batch;
};

/* What every scenario shares: the daemon, the parent's own connection, the run's sizes. */
struct svc {
    const struct bench_opts *o;
    struct bd_daemon d;
    paged_client *c;
    enum bench_backend backend;    /* what the daemon runs (the in-process run matches it) */
    struct svc_run run;
    char self[1024];               /* this program, re-executed as each client */
    int ninproc;                   /* in-process results so far, by total sequences */
    unsigned inproc_seqs[MAX_SCENARIOS];
    struct svc_inproc inproc[MAX_SCENARIOS];
};

/* Dies naming what failed with the parent's connection. */
static void svc_fail(const struct svc *s, int rc, const char *what)
{
    const char *detail = s->c != NULL ? paged_client_error(s->c) : "";
    bench_die("%s: %s%s%s%s", what, paged_strerror(rc), *detail ? " (" : "", detail, *detail ? ")" : "");
}

/* Measures NOP round trips (synchronous paged_nop, one at a time) into a table. */
static void nop_table(struct svc *s, struct br_report *r)
{
    long n = s->o->nops > 0 ? s->o->nops : s->o->quick ? 1000 : 100000;
    long warm = n / 10 < 1000 ? n / 10 : 1000;
    int64_t *lat = bench_alloc((size_t) n * sizeof *lat, "NOP latencies");
    for (long i = 0; i < warm; i++) {
        int rc = paged_nop(s->c);
        if (rc != PAGED_OK)
            svc_fail(s, rc, "NOP");
    }
    double sum = 0.0;
    for (long i = 0; i < n; i++) {
        uint64_t t0 = pcore_now_ns();
        int rc = paged_nop(s->c);
        lat[i] = (int64_t) (pcore_now_ns() - t0);
        if (rc != PAGED_OK)
            svc_fail(s, rc, "NOP");
        sum += (double) lat[i];
    }
    bench_sort_i64(lat, (size_t) n);
    struct br_table *t = br_table(r, "nop", "NOP round trips (paged_nop, one at a time, one client)");
    br_col(t, "count", "count", 0, 0);
    br_col(t, "p50_us", "p50 us", 2, 1);
    br_col(t, "p99_us", "p99 us", 2, 1);
    br_col(t, "p999_us", "p99.9 us", 2, 1);
    br_col(t, "mean_us", "mean us", 2, 1);
    int row = br_row(t);
    br_set_int(t, row, "count", n);
    br_set_num(t, row, "p50_us", (double) bench_quantile(lat, (size_t) n, 0.50) / 1e3);
    br_set_num(t, row, "p99_us", (double) bench_quantile(lat, (size_t) n, 0.99) / 1e3);
    br_set_num(t, row, "p999_us", (double) bench_quantile(lat, (size_t) n, 0.999) / 1e3);
    br_set_num(t, row, "mean_us", sum / (double) n / 1e3);
    br_print_table(t, stdout);
    free(lat);
}

/* Reads all of one client's result file; dies on a short or foreign file. Returns the
 * header and stores malloc'd latencies and step times. */
static struct svc_result read_result(const char *path, unsigned index, int64_t **lat, int64_t **steps)
{
    struct svc_result res;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        bench_die("client %u left no result (%s: %s)", index, path, strerror(errno));
    if (fread(&res, sizeof res, 1, f) != 1 || res.magic != SVC_RESULT_MAGIC)
        bench_die("client %u: %s is not a result file", index, path);
    *lat = bench_alloc((size_t) res.nlat * sizeof **lat, "latencies");
    *steps = bench_alloc((size_t) res.nsteps * sizeof **steps, "step times");
    if (fread(*lat, sizeof **lat, res.nlat, f) != res.nlat
        || fread(*steps, sizeof **steps, res.nsteps, f) != res.nsteps)
        bench_die("client %u: %s is truncated", index, path);
    fclose(f);
    unlink(path);
    return res;
}

/* Starts n client processes (this program, "_client ...") on pool; returns nothing. */
static void start_clients(struct svc *s, const struct scenario *sc, const char *pool, int ready_w, int go_r,
                          int leave_r, pid_t *pids)
{
    char a[9][64], result[400];
    for (unsigned i = 0; i < sc->clients; i++) {
        snprintf(a[0], sizeof a[0], "%u", i);
        snprintf(a[1], sizeof a[1], "%u", sc->batch);
        snprintf(a[2], sizeof a[2], "%u", s->run.context);
        snprintf(a[3], sizeof a[3], "%u", s->run.warmup);
        snprintf(a[4], sizeof a[4], "%u", s->run.steps);
        snprintf(a[5], sizeof a[5], "%d", ready_w);
        snprintf(a[6], sizeof a[6], "%d", go_r);
        snprintf(a[7], sizeof a[7], "%llu", (unsigned long long) (s->o->seed + 7919 * (uint64_t) (i + 1)));
        snprintf(a[8], sizeof a[8], "%d", leave_r);
        snprintf(result, sizeof result, "%s/client-%u.result", s->d.dir, i);
        const char *argv[] = { s->self, "_client", s->d.socket, pool, a[0], a[1], a[2], a[3], a[4],
                               a[5], a[6], result, a[7], a[8], NULL };
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0)
            bench_die("fork: %s", strerror(errno));
        if (pid == 0) {
            execv(s->self, (char *const *) argv);
            _exit(127);
        }
        if (spawn_track(pid, NULL) != 0)
            bench_die("too many child processes");
        pids[i] = pid;
    }
}

/* Waits for a client to exit 0, dying otherwise; returns nothing. */
static void reap_client(pid_t pid, unsigned index)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            bench_die("waitpid: %s", strerror(errno));
    spawn_untrack(pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        bench_die("client %u failed (%s %d)", index, WIFEXITED(st) ? "exit status" : "signal",
                  WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* Waits (up to 30 minutes) until n clients said they are ready (or done: what says which).
 * Dies if one exits first or the wait times out. Returns nothing. */
static void await_ready(int ready_r, unsigned n, const pid_t *pids, const char *what)
{
    unsigned ready = 0;
    uint64_t deadline = pcore_now_ns() + (uint64_t) 1800 * 1000000000u;
    while (ready < n) {
        struct pollfd p = { .fd = ready_r, .events = POLLIN };
        int rc = poll(&p, 1, 200);
        if (rc < 0 && errno != EINTR)
            bench_die("poll: %s", strerror(errno));
        if (rc > 0) {
            char buf[64];
            ssize_t got = read(ready_r, buf, sizeof buf);
            if (got > 0)
                ready += (unsigned) got;
        }
        for (unsigned i = 0; i < n && ready < n; i++) {
            int st;
            if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
                spawn_untrack(pids[i]);
                bench_die("client %u exited before it was %s (%s %d)", i, what,
                          WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            }
        }
        if (pcore_now_ns() > deadline)
            bench_die("the clients were not %s after 30 minutes", what);
    }
}

/* Returns how the service's title says its layers are chained (--deps). */
static const char *chain_text(enum bench_deps d)
{
    switch (d) {
    case BENCH_DEPS_HOST_STREAM:
        return "through host-arena dependency words on the client's stream (--deps=host-stream; latency: until "
               "the completion, posted when queued)";
    case BENCH_DEPS_DEVICE:
        return "through data-arena dependency words on the client's stream (--deps=device; latency: until the "
               "completion, posted when queued)";
    case BENCH_DEPS_HOST:
        return "through host-arena dependency words by the client's CPU (--deps=host; latency: until the "
               "completion, posted when queued)";
    case BENCH_DEPS_NONE:
        break;
    }
    return "by the client (each layer's completion awaited)";
}

/* Returns how a pool with mode word mode keeps its memory: "sealed" (PAGED_POOL_SEALED) or
 * "exported" (PAGED_POOL_EXPORTED, or neither bit, as a daemon older than the attribute
 * reports). */
static const char *pool_memory_name(uint32_t mode)
{
    return (mode & PAGED_POOL_SEALED) ? "sealed" : "exported";
}

/* Runs one scenario through the daemon and in-process (index: its pool's number, unique in the
 * run) and fills a table row, numbered round when that is not 0. Returns nothing. */
static void run_scenario(struct svc *s, const struct scenario *sc, int index, int round, struct br_table *t)
{
    unsigned seqs = sc->clients * sc->batch;
    char pool[64];
    snprintf(pool, sizeof pool, "paged-bench-%ld-%d", (long) getpid(), index);
    paged_pool_desc desc = {
        .name = pool, .num_layers = SVC_LAYERS, .num_kv_heads = SVC_HKV, .head_dim = SVC_D,
        .block_size = SVC_B, .dtype = PAGED_DTYPE_BF16, .num_blocks = seqs * svc_blocks_per_seq(&s->run) + 8,
        .mode = 0600 | s->o->pool_memory,
    };
    paged_pool *p = NULL;
    int rc = paged_pool_create(s->c, &desc, &p);
    if (rc != PAGED_OK)
        svc_fail(s, rc, "creating the benchmark pool");
    /* The row says what the daemon made of the pool (the bit in effect, from its reply). */
    paged_pool_info info;
    paged_pool_get_info(p, &info);
    const char *memory = pool_memory_name(info.mode);
    if (s->o->pool_memory != 0 && strcmp(memory, pool_memory_name(s->o->pool_memory)) != 0)
        bench_die("the daemon made pool %s %s, not %s as --memory asked", pool, memory,
                  pool_memory_name(s->o->pool_memory));

    /* The clients inherit only their ends: a client holding go's write end would never see
     * end of file on it. */
    int ready[2], go[2], leave[2];
    if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0 || pipe2(leave, O_CLOEXEC) < 0
        || fcntl(ready[1], F_SETFD, 0) < 0 || fcntl(go[0], F_SETFD, 0) < 0 || fcntl(leave[0], F_SETFD, 0) < 0)
        bench_die("pipe: %s", strerror(errno));
    pid_t pids[MAX_CLIENTS];
    start_clients(s, sc, pool, ready[1], go[0], leave[0], pids);
    close(ready[1]);
    close(go[0]);
    close(leave[0]);
    await_ready(ready[0], sc->clients, pids, "ready");
    close(go[1]);   /* every client reads end of file: go */
    await_ready(ready[0], sc->clients, pids, "done");
    close(leave[1]);   /* and now: leave */
    for (unsigned i = 0; i < sc->clients; i++)
        reap_client(pids[i], i);
    close(ready[0]);

    /* Merge: latencies of every request, step times of every client, the wall time from
     * the first client's start to the last one's end. */
    size_t nlat = 0, nsteps = 0;
    int64_t *all_lat = NULL, *all_steps = NULL, first = INT64_MAX, last = INT64_MIN;
    int64_t last_start = INT64_MIN, first_end = INT64_MAX;
    struct svc_result worst = { 0 };
    unsigned worst_client = 0;
    for (unsigned i = 0; i < sc->clients; i++) {
        char path[400];
        int64_t *lat, *steps;
        snprintf(path, sizeof path, "%s/client-%u.result", s->d.dir, i);
        struct svc_result res = read_result(path, i, &lat, &steps);
        all_lat = realloc(all_lat, (nlat + res.nlat) * sizeof *all_lat);
        all_steps = realloc(all_steps, (nsteps + res.nsteps) * sizeof *all_steps);
        if ((all_lat == NULL && nlat + res.nlat > 0) || (all_steps == NULL && nsteps + res.nsteps > 0))
            bench_die("out of memory merging results");
        memcpy(all_lat + nlat, lat, res.nlat * sizeof *lat);
        memcpy(all_steps + nsteps, steps, res.nsteps * sizeof *steps);
        nlat += res.nlat;
        nsteps += res.nsteps;
        first = res.start_ns < first ? res.start_ns : first;
        last = res.end_ns > last ? res.end_ns : last;
        last_start = res.start_ns > last_start ? res.start_ns : last_start;
        first_end = res.end_ns < first_end ? res.end_ns : first_end;
        if (res.worst_ns > worst.worst_ns) {
            worst = res;
            worst_client = i;
        }
        free(lat);
        free(steps);
    }
    rc = paged_pool_destroy(s->c, pool);
    if (rc == PAGED_OK)
        rc = paged_pool_detach(p);
    else
        paged_pool_detach(p);
    if (rc != PAGED_OK)
        svc_fail(s, rc, "removing the benchmark pool");

    /* Scenarios with the same total batch (16 x 1 and 1 x 16) share one yardstick. */
    struct svc_inproc ip;
    int known = -1;
    for (int i = 0; i < s->ninproc; i++)
        if (s->inproc_seqs[i] == seqs)
            known = i;
    if (known >= 0)
        ip = s->inproc[known];
    else {
        svc_inproc_run(s->o, s->backend, &s->run, seqs, &ip);
        if (s->ninproc < MAX_SCENARIOS) {
            s->inproc_seqs[s->ninproc] = seqs;
            s->inproc[s->ninproc++] = ip;
        }
    }

    bench_sort_i64(all_lat, nlat);
    bench_sort_i64(all_steps, nsteps);
    double tok_s = (double) seqs * s->run.steps / ((double) (last - first) * 1e-9);
    int row = br_row(t);
    if (round > 0)
        br_set_int(t, row, "round", round);
    br_set_int(t, row, "clients", sc->clients);
    br_set_int(t, row, "batch", sc->batch);
    br_set_str(t, row, "memory", memory);
    br_set_num(t, row, "tok_s", tok_s);
    br_set_num(t, row, "step_ms", (double) bench_quantile(all_steps, nsteps, 0.5) / 1e6);
    br_set_num(t, row, "step_p99_ms", (double) bench_quantile(all_steps, nsteps, 0.99) / 1e6);
    br_set_num(t, row, "step_max_ms", nsteps > 0 ? (double) all_steps[nsteps - 1] / 1e6 : 0.0);
    /* A stall (a request 10 ms or more) is worth a line: whose, where, and whether the
     * daemon's share of it (from taking the request to posting its completion) explains it. */
    if (worst.worst_ns >= 10000000)
        fprintf(stderr, "paged-bench: %u x %u: longest request %.1f ms (%.1f us of it in the daemon), client %u, "
                "step %u, layer %u, submitted %.3f s into the timed run\n", sc->clients, sc->batch,
                (double) worst.worst_ns / 1e6, (double) worst.worst_service_ns / 1e3, worst_client, worst.worst_step,
                worst.worst_layer, (double) (worst.worst_t0 - first) / 1e9);
    /* How far apart the clients' timed runs began plus how far apart they ended: what the
     * tokens/s (over the wall time from the first start to the last end) pays for stragglers. */
    int64_t skew = (last_start - first) + (last - first_end);
    if (skew > 0)       /* n/a for one client */
        br_set_num(t, row, "skew_ms", (double) skew / 1e6);
    br_set_num(t, row, "p50_us", (double) bench_quantile(all_lat, nlat, 0.50) / 1e3);
    br_set_num(t, row, "p99_us", (double) bench_quantile(all_lat, nlat, 0.99) / 1e3);
    br_set_num(t, row, "p999_us", (double) bench_quantile(all_lat, nlat, 0.999) / 1e3);
    br_set_num(t, row, "inproc_tok_s", ip.tokens_per_s);
    br_set_num(t, row, "inproc_step_ms", ip.step_ns / 1e6);
    br_set_num(t, row, "ratio", ip.tokens_per_s / tok_s);
    br_set_num(t, row, "awaited_step_ms", ip.awaited_step_ns / 1e6);
    br_set_num(t, row, "awaited_ratio", ip.awaited_tokens_per_s / tok_s);
    free(all_lat);
    free(all_steps);
}

/* Fills the scenario list: each client count at the batch, then one client with the
 * largest count's total batch (what merging should match). Returns the number. */
static int scenarios(const struct bench_opts *o, struct scenario *sc)
{
    int n = 0;
    unsigned most = 0;
    for (int i = 0; i < o->nclients; i++) {
        sc[n++] = (struct scenario) { o->clients[i], o->batch };
        if (o->clients[i] > most)
            most = o->clients[i];
    }
    int have = 0;
    for (int i = 0; i < n; i++)
        have |= sc[i].clients == 1 && sc[i].batch == most * o->batch;
    if (!have && most > 1)
        sc[n++] = (struct scenario) { 1, most * o->batch };
    return n;
}

/* Compares doubles for qsort; returns <0, 0 or >0. */
static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

/* Adds the merge summary: tokens/s of the most clients at the batch over one client with
 * their whole batch, in each of the rounds (the table's rows are rounds of the n scenarios),
 * their median (and with several rounds the least and the most). Returns nothing. */
static void merge_summary(const struct br_table *t, const struct scenario *sc, int n, unsigned rounds,
                          struct br_report *r)
{
    int many = -1, one = -1;
    for (int i = 0; i < n; i++)
        if (sc[i].clients > 1 && (many < 0 || sc[i].clients > sc[many].clients))
            many = i;
    if (many < 0)
        return;
    for (int i = 0; i < n; i++)
        if (sc[i].clients == 1 && sc[i].batch == sc[many].clients * sc[many].batch)
            one = i;
    if (one < 0)
        return;
    double ratio[BENCH_MAX_ROUNDS];
    for (unsigned k = 0; k < rounds; k++)
        ratio[k] = br_get_num(t, (int) k * n + many, "tok_s") / br_get_num(t, (int) k * n + one, "tok_s");
    qsort(ratio, rounds, sizeof *ratio, cmp_double);
    const double median = rounds % 2 ? ratio[rounds / 2] : (ratio[rounds / 2 - 1] + ratio[rounds / 2]) / 2;
    char label[200];
    int len = snprintf(label, sizeof label, "service: %u clients x batch %u over 1 client x batch %u, tokens/s",
                       sc[many].clients, sc[many].batch, sc[one].batch);
    if (rounds > 1)
        snprintf(label + len, sizeof label - (size_t) len, ", median of %u rounds (%.2f-%.2f)", rounds, ratio[0],
                 ratio[rounds - 1]);
    br_summary(r, "merge_ratio", label, median, "x", 2);
    if (rounds > 1) {
        br_summary(r, "merge_ratio_min", "service: the same, the least of the rounds", ratio[0], "x", 2);
        br_summary(r, "merge_ratio_max", "service: the same, the most of the rounds", ratio[rounds - 1], "x", 2);
    }
    /* How far single steps stretch with the most clients, and what the service costs the one
     * client of the whole batch over the in-process step awaited the same way: the worst round. */
    double tail = 0, awaited = 0;
    for (unsigned k = 0; k < rounds; k++) {
        const double p99 = br_get_num(t, (int) k * n + many, "step_p99_ms");
        const double med = br_get_num(t, (int) k * n + many, "step_ms");
        const double aw = br_get_num(t, (int) k * n + one, "awaited_ratio");
        tail = med > 0 && p99 / med > tail ? p99 / med : tail;
        awaited = aw > awaited ? aw : awaited;
    }
    snprintf(label, sizeof label, "service: %u clients x batch %u, p99 step over median step, the most of the rounds",
             sc[many].clients, sc[many].batch);
    br_summary(r, "step_p99_ratio_max", label, tail, "x", 2);
    if (awaited > 0) {
        snprintf(label, sizeof label, "service: 1 client x batch %u, step over the in-process step awaited the same "
                 "way, the most of the rounds", sc[one].batch);
        br_summary(r, "awaited_ratio_max", label, awaited, "x", 3);
    }
}

/* Runs the service benchmark. */
void bench_service(const struct bench_opts *o, struct br_report *r)
{
    struct svc s = { .o = o };
    ssize_t len = readlink("/proc/self/exe", s.self, sizeof s.self - 1);
    if (len <= 0 || (size_t) len >= sizeof s.self - 1)
        bench_die("cannot find this program's path (/proc/self/exe) to start the clients");
    s.self[len] = '\0';
    char built[1100];
    bd_start(&s.d, bd_pagedd_path(o, s.self, built, sizeof built), bd_backend(o), o->threads, o->waits);

    char err[256] = "";
    paged_connect_opts opts = { .socket_path = s.d.socket, .name = "paged-bench", .timeout_ms = 60000 };
    int rc = paged_client_connect_err(&opts, &s.c, err, sizeof err);
    if (rc != PAGED_OK)
        bench_die("connecting to %s: %s (%s)", s.d.socket, paged_strerror(rc), err);
    s.backend = paged_client_backend(s.c) == PAGED_BACKEND_CUDA ? BENCH_CUDA : BENCH_CPU;
    s.run = (struct svc_run) {
        .batch = o->batch,
        .context = o->context ? o->context : o->quick ? 32 : s.backend == BENCH_CUDA ? 1024 : 256,
        .warmup = o->quick ? 1 : 3,
        .steps = o->steps ? o->steps : o->quick ? 3 : s.backend == BENCH_CUDA ? 100 : 10,
    };

    nop_table(&s, r);

    struct scenario sc[MAX_SCENARIOS];
    int n = scenarios(o, sc);
#ifdef HAVE_CUDA
    if (s.backend == BENCH_CUDA) {
        /* The floor under an awaited layer, at the largest batch one client runs. */
        unsigned batch = 1;
        for (int i = 0; i < n; i++)
            if (sc[i].clients == 1 && sc[i].batch > batch)
                batch = sc[i].batch;
        double kv = (double) batch * (s.run.context + 1) * SVC_HKV * SVC_D * SVC_ELEM * 2;
        bench_dispatch(o, kv, batch, r);
    }
#endif
    char title[640], spin[48] = "libpaged's default";
    if (o->spin_us != 0) {
        /* The client processes read it at connection time (client.c). */
        char v[16];
        snprintf(v, sizeof v, "%d", o->spin_us);
        setenv("PAGED_BENCH_SPIN_US", v, 1);
        snprintf(spin, sizeof spin, o->spin_us < 0 ? "none" : "%d us", o->spin_us);
    }
    if (o->deps)   /* read by the client processes (client.c) */
        setenv("PAGED_BENCH_DEPS", bench_deps_name(o->deps), 1);
    snprintf(title, sizeof title,
             "service: %d-layer decode steps (APPEND + DECODE per layer, 32/8 heads, D 128, bf16) on "
             "%u-token contexts, %u steps per client; daemon backend %s; pools %s; client wait spin %s; daemon's "
             "dependency waits %s; layers "
             "chained %s; in-process: the same kernels called directly, layers back to back (awaited: each by "
             "the host, cuda only)",
             SVC_LAYERS, s.run.context, s.run.steps, s.backend == BENCH_CUDA ? "cuda" : "cpu",
             o->pool_memory == PAGED_POOL_SEALED     ? "sealed (--memory=sealed: no client receives their memory)"
             : o->pool_memory == PAGED_POOL_EXPORTED ? "exported (--memory=exported)"
                                                     : "as the daemon chooses (column memory)",
             spin, o->waits != NULL ? o->waits : "its default",
             chain_text(o->deps));
    struct br_table *t = br_table(r, "service", title);
    if (o->rounds > 1)
        br_col(t, "round", "round", 0, 0);
    br_col(t, "clients", "clients", 0, 0);
    br_col(t, "batch", "batch", 0, 0);
    br_col(t, "memory", "memory", 0, 0);
    br_col(t, "tok_s", "tokens/s", 1, 1);
    br_col(t, "step_ms", "step ms", 3, 1);
    br_col(t, "step_p99_ms", "p99 step ms", 3, 1);
    br_col(t, "step_max_ms", "max step ms", 3, 1);
    br_col(t, "skew_ms", "skew ms", 3, 1);
    br_col(t, "p50_us", "p50 us", 1, 1);
    br_col(t, "p99_us", "p99 us", 1, 1);
    br_col(t, "p999_us", "p99.9 us", 1, 1);
    br_col(t, "inproc_tok_s", "in-proc tok/s", 1, 1);
    br_col(t, "inproc_step_ms", "in-proc step ms", 3, 1);
    br_col(t, "ratio", "svc/in-proc time", 3, 1);
    br_col(t, "awaited_step_ms", "awaited step ms", 3, 1);
    br_col(t, "awaited_ratio", "svc/awaited time", 3, 1);
    for (int i = 0; i < n; i++)
        if (sc[i].clients > MAX_CLIENTS || sc[i].clients == 0 || sc[i].batch == 0)
            bench_die("--clients: 1 to %d clients of batch >= 1", MAX_CLIENTS);
    /* Rounds interleaved, so that a slow spell of the machine touches every scenario alike. */
    for (unsigned k = 0; k < o->rounds; k++)
        for (int i = 0; i < n; i++)
            run_scenario(&s, &sc[i], (int) k * n + i, o->rounds > 1 ? (int) k + 1 : 0, t);
    br_print_table(t, stdout);
    merge_summary(t, sc, n, o->rounds, r);

    paged_client_close(s.c);
    bd_stop(&s.d);
}
