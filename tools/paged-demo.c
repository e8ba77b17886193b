/* paged-demo.c: starts pagedd, runs worker processes that share a KV cache through it, checks them. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paged.h"
#include "tools/demo/barrier.h"
#include "tools/demo/crew.h"
#include "tools/demo/live.h"
#include "tools/demo/model.h"
#include "tools/demo/story.h"
#include "tools/demo/worker.h"
#include "tools/common/spawn.h"

#include "paths.h" /* PAGED_PAGEDD_PATH, PAGED_PACTL_PATH: the installed programs */

/* Time limits: the daemon's start and stop (and a worker's exit). */
#define DEMO_READY_MS 30000
#define DEMO_STOP_MS 10000

/* The pool the workers share. */
#define DEMO_POOL "demo"

/* The test aids (paged-demo(1), ENVIRONMENT): kill a worker; time the progress lines. */
#define DEMO_KILL_ENV "PAGED_DEMO_KILL_WORKER"
#define DEMO_PROGRESS_ENV "PAGED_DEMO_PROGRESS_MS"

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
    long kill_worker;           /* the worker DEMO_KILL_ENV names, -1: none */
    uint32_t progress_ms;       /* DEMO_PROGRESS_ENV: when a stage's first progress line comes */
};

/* Prints the usage text to fp. */
static void usage(FILE *fp)
{
    fputs("usage: paged-demo [-v] [--workers N] [--seqs N] [--steps N] [--backend cpu|cuda|auto]\n"
          "                  [--socket-dir DIR] [--pagedd PATH] [--pactl PATH]\n"
          "       paged-demo -h | -V\n"
          "\n"
          "Starts pagedd on a temporary socket, runs worker processes that share one KV cache\n"
          "through it (a common prompt prefix published once and adopted by the others), shows\n"
          "pactl's view of the pool while they hold it, checks every decode output against the\n"
          "CPU reference, prints tokens per second, and stops the daemon. Exits 0 only if every\n"
          "worker finished and every output matched.\n"
          "\n"
          "  -h, --help        print this help and exit\n"
          "  -V, --version     print paged-demo's version and exit\n"
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

/* Reads environment variable name, when set, as a number from 0 to max into *out; returns
 * 1 when it was set, 0 when not, or -1 after complaining. */
static int parse_env(const char *name, unsigned long max, unsigned long *out)
{
    const char *s = getenv(name);
    char *end;
    if (s == NULL || *s == '\0')
        return 0;
    errno = 0;
    *out = strtoul(s, &end, 10);
    if (*s < '0' || *s > '9' || *end != '\0' || errno != 0 || *out > max) {
        fprintf(stderr, "paged-demo: %s wants a number from 0 to %lu, not '%s'\n", name, max, s);
        return -1;
    }
    return 1;
}

/* Reads the test aids' environment into *o; returns 0 or -1 after complaining. */
static int parse_test_env(struct demo_opts *o)
{
    unsigned long v;
    int rc = parse_env(DEMO_KILL_ENV, o->workers - 1, &v);
    o->kill_worker = rc > 0 ? (long) v : -1;
    if (rc < 0)
        return -1;
    rc = parse_env(DEMO_PROGRESS_ENV, 3600000, &v);
    o->progress_ms = rc > 0 ? (uint32_t) v : DEMO_PROGRESS_FIRST_MS;
    return rc < 0 ? -1 : 0;
}

/* Parses the command line into *o; returns 0, 1 for --help, 2 for --version, or -1 on a
 * usage error. */
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
        { "version", no_argument, NULL, 'V' },
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
    while ((c = getopt_long(argc, argv, "vhV", longopts, NULL)) != -1) {
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
        case 'V': return 2;
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

/* Kills the worker DEMO_KILL_ENV names, saying so. Returns nothing. */
static void kill_asked_worker(struct demo_crew *crew, uint32_t i)
{
    printf("paged-demo: killing worker %u (pid %ld), as %s asks\n", (unsigned) i,
           (long) crew->pids[i], DEMO_KILL_ENV);
    if (demo_crew_kill(crew, i) != 0)
        printf("paged-demo: worker %u is not running\n", (unsigned) i);
}

/*
 * Runs the workers against the daemon on socket: tells who opened the pool and shares the
 * prefix, shows pactl's view while every worker holds the pool (held at the first barrier,
 * prompts built and decoding not started), and reports. pactl's output goes through a file
 * in dir. Returns 1 if every worker finished and every output matched.
 */
static int run_workers(const struct demo_opts *o, const char *socket, const char *dir)
{
    const struct demo_model *m = &demo_model_default;
    const struct demo_plan plan = { .seqs = o->seqs, .steps = o->steps, .layers = m->num_layers };
    char out[PATH_MAX];
    if (snprintf(out, sizeof out, "%s/pactl.out", dir) >= (int) sizeof out) {
        fprintf(stderr, "paged-demo: %s/pactl.out: path too long\n", dir);
        return 0;
    }
    const struct demo_live live = { .pactl = o->pactl, .socket = socket, .out = out };
    struct demo_crew crew;
    struct demo_barrier barriers[2]; /* before and after the decode loop */
    int published[2];
    if (demo_crew_init(&crew, o->workers, &plan, o->progress_ms) != 0) {
        fprintf(stderr, "paged-demo: %s\n", strerror(errno));
        return 0;
    }
    if (pipe(published) != 0 || demo_barrier_init(&barriers[0]) != 0
        || demo_barrier_init(&barriers[1]) != 0) {
        fprintf(stderr, "paged-demo: pipe: %s\n", strerror(errno));
        demo_crew_free(&crew);
        return 0;
    }
    for (uint32_t i = 0; i < o->workers; i++) {
        /* Each worker gets its own copy: the child fills in the callbacks. */
        struct demo_worker_args a = {
            .socket = socket,
            .pool_name = DEMO_POOL,
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
        if (demo_crew_start(&crew, &a, i == 0 ? published[0] : published[1], barriers, 2) < 0)
            fprintf(stderr, "paged-demo: fork: %s\n", strerror(errno));
    }
    close(published[0]);
    close(published[1]);
    demo_crew_started(&crew, barriers, 2);

    uint32_t holding = demo_crew_wait(&crew, &barriers[0]);
    demo_story_pool(&crew, DEMO_POOL, m, o->prefix);
    printf("live view from pactl -s %s, while %u worker%s hold%s the pool:\n", socket,
           (unsigned) holding, holding == 1 ? "" : "s", holding == 1 ? "s" : "");
    demo_live_show(&live, DEMO_POOL);
    printf("\n");
    if (o->kill_worker >= 0)
        kill_asked_worker(&crew, (uint32_t) o->kill_worker);
    demo_barrier_open(&barriers[0]);
    demo_crew_wait(&crew, &barriers[1]);
    demo_barrier_open(&barriers[1]);
    demo_crew_collect(&crew);
    demo_crew_reap(&crew, DEMO_STOP_MS);
    int ok = demo_story_results(&crew);
    demo_crew_free(&crew);
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
    if (rc == 2) {
        printf("paged-demo (paged) %s\n", PACKAGE_VERSION);
        return 0;
    }
    if (rc != 0) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? 0 : 2;
    }
    if (parse_test_env(&o) != 0)
        return 2;
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

    int ok = run_workers(&o, socket, dir);

    int killed;
    int status = spawn_stop(daemon, SIGTERM, DEMO_STOP_MS, &killed);
    if (killed)
        fprintf(stderr, "paged-demo: pagedd did not stop within %d s; killed it\n",
                DEMO_STOP_MS / 1000);
    if (status != 0) {
        fprintf(stderr, "paged-demo: pagedd ended with %s\n",
                spawn_describe(why, sizeof why, status));
        ok = 0;
    } else
        printf("paged-demo: pagedd stopped\n");
    spawn_rmdir(dir);
    printf("paged-demo: %s\n", ok ? "success" : "FAILED");
    return ok ? 0 : 1;
}
