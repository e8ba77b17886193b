/* paged-demo.c: starts pagedd, runs worker processes that share a KV cache through it, checks them. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paged.h"
#include "tools/demo/barrier.h"
#include "tools/demo/model.h"
#include "tools/demo/worker.h"
#include "tools/common/spawn.h"

#include "paths.h" /* PAGED_PAGEDD_PATH, PAGED_PACTL_PATH: the installed programs */

/* Time limits: the daemon's start and stop, and how long a worker may take in all. */
#define DEMO_READY_MS 30000
#define DEMO_STOP_MS 10000
#define DEMO_WORKER_MS 600000

/* The synthetic model: small enough to run in seconds on two CPU cores. */
static const struct demo_model demo_model_default = {
    .num_layers = 4,
    .num_kv_heads = 8,
    .num_q_heads = 32,
    .head_dim = 128,
    .block_size = 16,
    .dtype = PAGED_DTYPE_BF16,
    .salt = 0x64656d6f6d6f646cu, /* "demomodl" */
};

/* The command line. */
struct demo_opts {
    uint32_t workers, steps, seqs, prefix, suffix;
    const char *backend;
    const char *socket_dir;
    const char *pagedd;
    const char *pactl;
    int verbose;
};

/* Prints the usage text to fp. */
static void usage(FILE *fp)
{
    fputs("usage: paged-demo [-v] [--workers N] [--seqs N] [--steps N] [--backend cpu|cuda|auto]\n"
          "                  [--socket-dir DIR] [--pagedd PATH] [--pactl PATH]\n"
          "\n"
          "Starts pagedd on a temporary socket, runs worker processes that share one KV cache\n"
          "through it (a common prompt prefix published once and adopted by the others), checks\n"
          "every decode output against the CPU reference, prints tokens per second and\n"
          "'pactl status', and stops the daemon. Exits 0 only if every output matched.\n"
          "\n"
          "  --workers N       worker processes (default 4)\n"
          "  --seqs N          sequences per worker, decoded as one batch (default 4)\n"
          "  --steps N         decode steps (default 16)\n"
          "  --backend NAME    pagedd's backend (default auto)\n"
          "  --socket-dir DIR  where the temporary socket directory goes (default $TMPDIR or /tmp)\n"
          "  --pagedd PATH     the daemon to run (default " PAGED_PAGEDD_PATH ")\n"
          "  --pactl PATH      the pactl to run (default " PAGED_PACTL_PATH ")\n"
          "  -v, --verbose     show the daemon's log\n", fp);
}

/* Parses a count in [1, max] for option name; returns 0 or -1 after complaining. */
static int parse_count(const char *name, const char *s, uint32_t max, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (*s < '0' || *s > '9' || *end != '\0' || errno != 0 || v < 1 || v > max) {
        fprintf(stderr, "paged-demo: --%s wants a number from 1 to %u, not '%s'\n", name,
                (unsigned) max, s);
        return -1;
    }
    *out = (uint32_t) v;
    return 0;
}

/* Parses the command line into *o; returns 0, 1 for --help, or -1 on a usage error. */
static int parse_options(int argc, char **argv, struct demo_opts *o)
{
    static const struct option longopts[] = {
        { "workers", required_argument, NULL, 'w' },
        { "seqs", required_argument, NULL, 'n' },
        { "steps", required_argument, NULL, 't' },
        { "backend", required_argument, NULL, 'b' },
        { "socket-dir", required_argument, NULL, 'd' },
        { "pagedd", required_argument, NULL, 'D' },
        { "pactl", required_argument, NULL, 'P' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *tmp = getenv("TMPDIR");
    *o = (struct demo_opts) {
        .workers = 4, .steps = 16, .seqs = 4, .prefix = 64, .suffix = 16,
        .backend = "auto",
        .socket_dir = tmp != NULL && *tmp != '\0' ? tmp : "/tmp",
        .pagedd = PAGED_PAGEDD_PATH,
        .pactl = PAGED_PACTL_PATH,
    };
    int c;
    while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'w': rc = parse_count("workers", optarg, 64, &o->workers); break;
        case 'n': rc = parse_count("seqs", optarg, 256, &o->seqs); break;
        case 't': rc = parse_count("steps", optarg, 4096, &o->steps); break;
        case 'b': o->backend = optarg; break;
        case 'd': o->socket_dir = optarg; break;
        case 'D': o->pagedd = optarg; break;
        case 'P': o->pactl = optarg; break;
        case 'v': o->verbose = 1; break;
        case 'h': return 1;
        default: return -1;
        }
        if (rc < 0)
            return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "paged-demo: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return 0;
}

/*
 * Returns the pool size in blocks: every sequence's own blocks (its whole length, as if
 * nothing were shared) plus a quarter more, so the demo never runs out whatever the cache
 * does.
 */
static uint32_t pool_blocks(const struct demo_opts *o, const struct demo_model *m)
{
    uint64_t per_seq = (o->prefix + o->suffix + o->steps + m->block_size - 1) / m->block_size;
    uint64_t n = (uint64_t) o->workers * o->seqs * per_seq;
    n += n / 4 + 8;
    return n > INT32_MAX ? INT32_MAX : (uint32_t) n;
}

/* Forks one worker; the child keeps its ends of the barriers, runs the worker, writes its
 * result to result_fd and exits. Returns the child's pid or -1. */
static pid_t start_worker(struct demo_worker_args *a, int result_fd, int other_fd,
                          struct demo_barrier *barriers, int nbarriers)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    struct demo_result r;
    struct demo_barrier *next = barriers;
    if (other_fd >= 0)
        close(other_fd);
    demo_barrier_child(barriers, nbarriers);
    a->barrier = demo_barrier_cross;
    a->barrier_ctx = &next;
    demo_worker_run(a, &r);
    /* One write below PIPE_BUF is atomic, so results of workers never interleave. */
    ssize_t n = write(result_fd, &r, sizeof r);
    _exit(n == (ssize_t) sizeof r && r.status == PAGED_OK ? 0 : 1);
}

/*
 * Reads one result per worker from fd into results (indexed by worker), each read bounded
 * by DEMO_WORKER_MS. Returns how many arrived.
 */
static uint32_t collect_results(int fd, uint32_t workers, struct demo_result *results,
                                unsigned char *seen)
{
    uint32_t got = 0;
    while (got < workers) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int rc = poll(&p, 1, DEMO_WORKER_MS);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            break;
        struct demo_result r;
        ssize_t n = read(fd, &r, sizeof r);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != (ssize_t) sizeof r)
            break; /* every worker is gone (end of file) or a short read */
        if (r.index < workers && !seen[r.index]) {
            seen[r.index] = 1;
            results[r.index] = r;
            got++;
        }
    }
    return got;
}

/* Prints one worker's line; returns its tokens per second. */
static double report_worker(const struct demo_result *r)
{
    double secs = (double) (r->end_ns - r->start_ns) / 1e9;
    double tps = secs > 0 ? (double) r->decode_tokens / secs : 0.0;
    printf("worker %u: ", (unsigned) r->index);
    if (r->published > 0)
        printf("published %u prefix blocks, ", (unsigned) r->published);
    printf("adopted %u prefix tokens; ", (unsigned) r->adopted);
    printf("%llu tokens in %.3f s (%.1f tokens/s); %llu outputs checked, %llu mismatches\n",
           (unsigned long long) r->decode_tokens, secs, tps, (unsigned long long) r->outputs,
           (unsigned long long) r->mismatches);
    return tps;
}

/* Runs the workers against the daemon on socket and reports; returns 1 if all matched. */
static int run_workers(const struct demo_opts *o, const char *socket)
{
    const struct demo_model *m = &demo_model_default;
    int results[2], published[2];
    struct demo_barrier barriers[2]; /* before and after the decode loop */
    pid_t *pids = calloc(o->workers, sizeof *pids);
    struct demo_result *res = calloc(o->workers, sizeof *res);
    unsigned char *seen = calloc(o->workers, 1);
    int ok = 0;
    uint32_t started = 0;
    if (pids == NULL || res == NULL || seen == NULL || pipe(results) != 0) {
        fprintf(stderr, "paged-demo: %s\n", strerror(errno));
        goto out;
    }
    if (pipe(published) != 0 || demo_barrier_init(&barriers[0]) != 0
        || demo_barrier_init(&barriers[1]) != 0) {
        fprintf(stderr, "paged-demo: pipe: %s\n", strerror(errno));
        exit(1);
    }
    for (uint32_t i = 0; i < o->workers; i++) {
        /* Each worker gets its own copy: the child fills in the barrier callback. */
        struct demo_worker_args a = {
            .socket = socket,
            .pool_name = "demo",
            .model = m,
            .pool_blocks = pool_blocks(o, m),
            .index = i,
            .num_seqs = o->seqs,
            .prefix_len = o->prefix,
            .suffix_len = o->suffix,
            .steps = o->steps,
            .seed = 0x243f6a8885a308d3u,
            .published_fd = i == 0 ? published[1] : -1,
            .wait_fd = i == 0 ? -1 : published[0],
            .num_workers = o->workers,
        };
        /* Only worker 0 keeps the write end: the others see end of file if it dies. */
        pids[i] = start_worker(&a, results[1], i == 0 ? published[0] : published[1], barriers,
                               2);
        if (pids[i] < 0)
            fprintf(stderr, "paged-demo: fork: %s\n", strerror(errno));
        else
            started++;
    }
    close(published[0]);
    close(published[1]);
    close(results[1]);
    demo_barrier_release(&barriers[0], pids, o->workers, started);
    demo_barrier_release(&barriers[1], pids, o->workers, started);
    uint32_t got = collect_results(results[0], o->workers, res, seen);
    close(results[0]);

    uint64_t tokens = 0, outputs = 0, mismatches = 0;
    int64_t first = 0, last = 0;
    int failed = 0;
    for (uint32_t i = 0; i < o->workers; i++) {
        char why[64];
        int status = pids[i] > 0 ? spawn_wait(pids[i], DEMO_STOP_MS) : -1;
        if (!seen[i]) {
            printf("worker %u: no result (%s)\n", (unsigned) i,
                   spawn_describe(why, sizeof why, status));
            failed = 1;
            continue;
        }
        if (res[i].status != PAGED_OK) {
            printf("worker %u: failed: %s\n", (unsigned) i, res[i].error);
            failed = 1;
            continue;
        }
        report_worker(&res[i]);
        tokens += res[i].decode_tokens;
        outputs += res[i].outputs;
        mismatches += res[i].mismatches;
        if (first == 0 || res[i].start_ns < first)
            first = res[i].start_ns;
        if (res[i].end_ns > last)
            last = res[i].end_ns;
    }
    double secs = (double) (last - first) / 1e9;
    printf("total: %llu decode tokens in %.3f s: %.1f tokens/s over %u workers\n",
           (unsigned long long) tokens, secs, secs > 0 ? (double) tokens / secs : 0.0,
           (unsigned) got);
    ok = !failed && got == o->workers && outputs > 0 && mismatches == 0;
    if (ok)
        printf("all %llu outputs match the CPU reference\n", (unsigned long long) outputs);
    else if (mismatches > 0)
        printf("%llu of %llu outputs differ from the CPU reference\n",
               (unsigned long long) mismatches, (unsigned long long) outputs);
out:
    free(pids);
    free(res);
    free(seen);
    return ok;
}

/* Makes path absolute against the working directory into buf; returns buf or NULL. */
static char *absolute(const char *path, char *buf, size_t size)
{
    char cwd[PATH_MAX];
    if (path[0] == '/')
        return snprintf(buf, size, "%s", path) < (int) size ? buf : NULL;
    if (getcwd(cwd, sizeof cwd) == NULL)
        return NULL;
    return snprintf(buf, size, "%s/%s", cwd, path) < (int) size ? buf : NULL;
}

/* Starts the daemon, runs the workers and pactl, stops the daemon; returns the exit status. */
int main(int argc, char **argv)
{
    struct demo_opts o;
    char base[PATH_MAX], dir[PATH_MAX], socket[PATH_MAX], err[256], why[64];
    const struct demo_model *m = &demo_model_default;

    int rc = parse_options(argc, argv, &o);
    if (rc != 0) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? 0 : 2;
    }
    /* The daemon does not share our working directory's meaning: hand it absolute paths. */
    if (absolute(o.socket_dir, base, sizeof base) == NULL) {
        fprintf(stderr, "paged-demo: socket directory path too long\n");
        return 1;
    }
    if (spawn_mkdtemp(dir, sizeof dir, base, "paged-demo", err, sizeof err) != 0) {
        fprintf(stderr, "paged-demo: %s\n", err);
        return 1;
    }
    if (snprintf(socket, sizeof socket, "%s/pagedd.sock", dir) >= 108) {
        fprintf(stderr, "paged-demo: %s/pagedd.sock is too long for a socket path "
                "(use --socket-dir)\n", dir);
        rmdir(dir);
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* A reader that goes away (paged-demo | head) must not keep us from stopping the daemon. */
    signal(SIGPIPE, SIG_IGN);

    /* Its log on our stderr, at info with --verbose; it dies with us, however we end. */
    const char *const args[] = { "--log-level", o.verbose ? "info" : "warning", NULL };
    const struct spawn_pagedd start = {
        .path = o.pagedd, .socket = socket, .backend = o.backend, .args = args,
        .death_signal = SIGTERM, .ready_ms = DEMO_READY_MS,
    };
    pid_t daemon = spawn_pagedd(&start, NULL, err, sizeof err);
    if (daemon < 0) {
        fprintf(stderr, "paged-demo: %s: %s\n", o.pagedd, err);
        rmdir(dir);
        return 1;
    }
    printf("paged-demo: pagedd (pid %ld) is serving on %s\n", (long) daemon, socket);
    printf("paged-demo: %u workers x %u sequences; model: %u layers, %u query heads, "
           "%u KV heads, head dim %u, %s, %u-token blocks; prompts: %u shared + %u own "
           "tokens; %u decode steps\n", (unsigned) o.workers, (unsigned) o.seqs,
           (unsigned) m->num_layers, (unsigned) m->num_q_heads, (unsigned) m->num_kv_heads,
           (unsigned) m->head_dim, paged_dtype_name(m->dtype), (unsigned) m->block_size,
           (unsigned) o.prefix, (unsigned) o.suffix, (unsigned) o.steps);

    int ok = run_workers(&o, socket);

    printf("\n$ pactl -s %s status\n", socket);
    const char *const pactl[] = { o.pactl, "-s", socket, "status", NULL };
    const struct spawn_cmd pactl_status = { .argv = pactl };
    int status = spawn_run(&pactl_status, DEMO_STOP_MS, err, sizeof err);
    if (status != 0)
        fprintf(stderr, "paged-demo: pactl status failed (%s)\n",
                status == -1 ? err : spawn_describe(why, sizeof why, status));
    printf("\n");

    int killed;
    status = spawn_stop(daemon, SIGTERM, DEMO_STOP_MS, &killed);
    if (killed)
        fprintf(stderr, "paged-demo: pagedd did not stop within %d s; killed it\n",
                DEMO_STOP_MS / 1000);
    if (status != 0) {
        fprintf(stderr, "paged-demo: pagedd ended with %s\n",
                spawn_describe(why, sizeof why, status));
        ok = 0;
    } else
        printf("paged-demo: pagedd stopped\n");
    unlink(socket);
    rmdir(dir);
    printf("paged-demo: %s\n", ok ? "success" : "FAILED");
    return ok ? 0 : 1;
}
