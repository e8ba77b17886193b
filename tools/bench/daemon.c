/* daemon.c: paged-bench's own pagedd: started on a temporary socket, stopped for sure, children reaped. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/bench/daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/bench/bench.h"
#include "tools/common/spawn.h"
#include "paths.h"

/* How long the daemon may take to say READY (a GPU's first context is slow), and to exit
 * after SIGTERM. */
#define BD_READY_MS 60000
#define BD_STOP_MS 20000

/* The log lines shown when the daemon does not get ready. */
#define BD_LOG_LINES 8

/* Starts the daemon or dies. */
void bd_start(struct bd_daemon *d, const char *path, const char *backend, unsigned threads, const char *waits)
{
    bd_start_args(d, path, backend, threads, waits, NULL);
}

/* Starts the daemon with extra arguments or dies. */
void bd_start_args(struct bd_daemon *d, const char *path, const char *backend, unsigned threads, const char *waits,
                   const char *const *extra)
{
    char err[512];
    memset(d, 0, sizeof *d);
    if (access(path, X_OK) != 0)
        bench_die("cannot run the daemon %s: %s (set --pagedd)", path, strerror(errno));
    if (spawn_mkdtemp(d->dir, sizeof d->dir, NULL, "paged-bench", err, sizeof err) != 0)
        bench_die("%s", err);
    snprintf(d->socket, sizeof d->socket, "%s/pagedd.sock", d->dir);
    snprintf(d->log, sizeof d->log, "%s/pagedd.log", d->dir);

    char threadarg[32];
    snprintf(threadarg, sizeof threadarg, "--threads=%u", threads);
    char waitsarg[48];
    snprintf(waitsarg, sizeof waitsarg, "--dependency-waits=%s", waits != NULL ? waits : "");
    const char *args[BD_MAX_EXTRA + 3] = { NULL };
    int n = 0;
    if (threads)
        args[n++] = threadarg;
    if (waits != NULL)
        args[n++] = waitsarg;
    for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
        if (i == BD_MAX_EXTRA)
            bench_die("too many daemon arguments");
        args[n++] = extra[i];
    }
    /* A log kept for later (keep_log) is kept for the engine's activity lines, logged at debug
     * unless asked for: asked for, they come without the per-launch debug lines. */
    const char *dest = getenv("PAGED_BENCH_DAEMON_LOG");
    const char *const env[] = { dest != NULL && *dest != '\0' ? "PAGEDD_ACTIVITY_LOG=1" : NULL, NULL };
    const struct spawn_pagedd o = {
        .path = path, .socket = d->socket, .backend = backend, .args = args, .log = d->log, .env = env,
        .death_signal = SIGTERM, .ready_ms = BD_READY_MS,
    };
    int st;
    pid_t pid = spawn_pagedd(&o, &st, err, sizeof err);
    if (pid < 0) {
        fprintf(stderr, "paged-bench: %s --backend=%s: %s; its log:\n", path, backend, err);
        spawn_log_tail(d->log, BD_LOG_LINES, stderr, "  pagedd: ");
        spawn_rmdir(d->dir);
        bench_die("no daemon to benchmark");
    }
    d->pid = pid;
    if (spawn_track(pid, d->dir) != 0)
        bench_die("too many child processes");
}

/* Removes a trailing slash and name from path if they are there; returns whether they were. */
static int strip_dir(char *path, const char *name)
{
    size_t n = strlen(path), k = strlen(name);
    if (n <= k || path[n - k - 1] != '/' || strcmp(path + n - k, name) != 0)
        return 0;
    path[n - k - 1] = '\0';
    return 1;
}

/* Says whether self (this program's path) lies in a build tree: tools/paged-bench, or libtool's
 * tools/.libs/lt-paged-bench. Puts the tree's top directory into top. */
int bd_build_tree(const char *self, char *top, size_t size)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", self);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        return 0;
    *slash = '\0';
    strip_dir(dir, ".libs");
    if (!strip_dir(dir, "tools"))
        return 0;
    snprintf(top, size, "%s", dir);
    return 1;
}

/* Returns the pagedd to start: --pagedd, else $PAGED_BENCH_PAGEDD, else the build tree's
 * daemon/pagedd when this program runs from a build tree, else the installed one. buf holds
 * a built path. */
const char *bd_pagedd_path(const struct bench_opts *o, const char *self, char *buf, size_t size)
{
    if (o->pagedd != NULL)
        return o->pagedd;
    const char *env = getenv("PAGED_BENCH_PAGEDD");
    if (env != NULL && *env)
        return env;
    char top[1024];
    if (bd_build_tree(self, top, sizeof top)) {
        snprintf(buf, size, "%s/daemon/pagedd", top);
        if (access(buf, X_OK) == 0)
            return buf;
    }
    return PAGED_PAGEDD_PATH;
}

/* Returns the --backend the daemon gets: auto stays auto when the clients could follow
 * it to a GPU (CUDA built in), else cpu. */
const char *bd_backend(const struct bench_opts *o)
{
    switch (o->backend) {
    case BENCH_CPU: return "cpu";
    case BENCH_CUDA: return "cuda";
    default:
#ifdef HAVE_CUDA
        return "auto";
#else
        return "cpu";
#endif
    }
}

/* Appends the daemon's log to the file $PAGED_BENCH_DAEMON_LOG names, when it names one, so
 * that the engine's activity lines (batches, merges) survive the run; returns nothing. */
static void keep_log(const struct bd_daemon *d)
{
    const char *dest = getenv("PAGED_BENCH_DAEMON_LOG");
    if (dest == NULL || *dest == '\0')
        return;
    FILE *in = fopen(d->log, "r");
    FILE *out = fopen(dest, "a");
    char buf[4096];
    size_t n;
    while (in != NULL && out != NULL && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            break;
    if (in != NULL)
        fclose(in);
    if (out != NULL)
        fclose(out);
}

/* Stops the daemon and removes its directory. */
void bd_stop(struct bd_daemon *d)
{
    if (d->pid > 0) {
        int killed;
        spawn_stop(d->pid, SIGTERM, BD_STOP_MS, &killed);
        if (killed)
            fprintf(stderr, "paged-bench: pagedd ignored SIGTERM for %d s: killed it\n", BD_STOP_MS / 1000);
        d->pid = 0;
    }
    keep_log(d);
    spawn_rmdir(d->dir);
}
