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

/* How long the daemon may take to say READY (a GPU's first context is slow), and to exit
 * after SIGTERM. */
#define BD_READY_MS 60000
#define BD_STOP_MS 20000

/* The log lines shown when the daemon does not get ready. */
#define BD_LOG_LINES 8

/* Starts the daemon or dies. */
void bd_start(struct bd_daemon *d, const char *path, const char *backend, unsigned threads, const char *waits)
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
    const char *args[3] = { NULL, NULL, NULL };
    int n = 0;
    if (threads)
        args[n++] = threadarg;
    if (waits != NULL)
        args[n++] = waitsarg;
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
