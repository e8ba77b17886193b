/* pagedd.c: a real pagedd for a test: started on a temporary socket, stopped and reaped for sure, its log read. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tests/tap/pagedd.h"

#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/clock.h"
#include "tests/tap/basic.h"
#include "tools/common/spawn.h"

/* How long a daemon may take to say READY, to exit after SIGTERM, and to run as a command. */
#define PAGEDD_READY_MS 30000
#define PAGEDD_STOP_MS 20000
#define PAGEDD_RUN_MS 30000

/* The lines of the log a failed test shows at cleanup. */
#define PAGEDD_FAIL_LINES 20

/* Returns the pagedd path. */
const char *pagedd_path(void)
{
    static char path[1024];
    const char *top = getenv("top_builddir");
    snprintf(path, sizeof path, "%s/daemon/pagedd", top != NULL ? top : "..");
    return path;
}

/* Makes the temporary directory; returns nothing. */
void pagedd_mkdir(struct pagedd *d)
{
    char err[512];
    memset(d, 0, sizeof *d);
    if (spawn_mkdtemp(d->dir, sizeof d->dir, NULL, "paged-test", err, sizeof err) != 0)
        bail("%s", err);
    snprintf(d->socket, sizeof d->socket, "%s/pagedd.sock", d->dir);
    snprintf(d->log, sizeof d->log, "%s/pagedd.log", d->dir);
}

/* Splits $PAGED_DAEMON_WRAPPER at blanks (no quoting) into words, NULL-terminated; returns
 * words, or NULL when it is not set. */
static const char *const *wrapper_words(const char *words[], int max)
{
    static char copy[1024];
    const char *w = getenv("PAGED_DAEMON_WRAPPER");
    if (w == NULL || *w == '\0')
        return NULL;
    snprintf(copy, sizeof copy, "%s", w);
    int n = 0;
    char *save = NULL;
    for (char *word = strtok_r(copy, " \t", &save); word != NULL && n < max - 1;
         word = strtok_r(NULL, " \t", &save))
        words[n++] = word;
    words[n] = NULL;
    return words;
}

/* Starts the daemon; returns 0 or -1. */
int pagedd_start(struct pagedd *d, const char *const *args, const char *const *env, int *status)
{
    if (d->dir[0] == '\0')
        pagedd_mkdir(d);
    /* The cpu backend unless the test run says otherwise: "auto" would pick cuda on a GPU
     * machine, and most tests speak to the host arena. */
    const char *backend = getenv("PAGED_TEST_BACKEND");
    const char *wrapper[32];
    const struct spawn_pagedd o = {
        .path = pagedd_path(),
        .socket = d->socket,
        .backend = backend != NULL && *backend != '\0' ? backend : "cpu",
        .args = args,
        .wrapper = wrapper_words(wrapper, 32),
        .env = env,
        .log = d->log,
        .death_signal = SIGKILL,
        .ready_ms = PAGEDD_READY_MS,
    };
    char err[512];
    pid_t pid = spawn_pagedd(&o, status, err, sizeof err);
    if (pid < 0) {
        diag("%s: %s", o.path, err);
        d->pid = 0;
        return -1;
    }
    if (spawn_track(pid, NULL) != 0)
        bail("too many daemons to kill at exit (pid %ld)", (long) pid);
    d->pid = pid;
    return 0;
}

/* Stops the daemon with a signal; returns its wait status or -1. */
int pagedd_stop_with(struct pagedd *d, int signo)
{
    if (d->pid <= 0)
        return -1;
    int killed;
    int st = spawn_stop(d->pid, signo, PAGEDD_STOP_MS, &killed);
    if (killed)
        diag("pagedd %ld ignored signal %d for %d s: killed it", (long) d->pid, signo,
             PAGEDD_STOP_MS / 1000);
    d->pid = 0;
    return killed ? -1 : st;
}

/* Stops the daemon with SIGTERM; returns its wait status or -1. */
int pagedd_stop(struct pagedd *d)
{
    return pagedd_stop_with(d, SIGTERM);
}

/* Removes the directory; returns nothing. */
void pagedd_cleanup(struct pagedd *d)
{
    if (d->dir[0] == '\0')
        return;
    if (tap_failures() > 0 && access(d->log, R_OK) == 0) {
        diag("the last lines of %s:", d->log);
        pagedd_log_diag(d, PAGEDD_FAIL_LINES);
    }
    if (getenv("PAGED_TEST_KEEP") != NULL) {
        diag("kept %s", d->dir);
        return;
    }
    if (spawn_rmdir(d->dir) != 0)
        diag("could not remove %s", d->dir);
    d->dir[0] = '\0';
}

/* Returns how many lines of the log contain needle, counting up to most. */
static int count_lines(const struct pagedd *d, const char *needle, int most)
{
    FILE *f = fopen(d->log, "r");
    if (f == NULL)
        return 0;
    char line[4096];
    int n = 0;
    while (n < most && fgets(line, sizeof line, f) != NULL)
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* Returns whether the log contains needle. */
int pagedd_log_contains(const struct pagedd *d, const char *needle)
{
    return count_lines(d, needle, 1) > 0;
}

/* Returns how many lines of the log contain needle. */
int pagedd_log_count(const struct pagedd *d, const char *needle)
{
    return count_lines(d, needle, INT_MAX);
}

/* Waits for want lines of the log to contain needle; returns 1 or 0. */
int pagedd_log_wait_count(const struct pagedd *d, const char *needle, int want, int timeout_ms)
{
    uint64_t deadline = pcore_now_ns() + (uint64_t) (timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
    /* A bounded poll: nothing tells when a line is written. */
    while (pcore_now_ns() < deadline) {
        if (count_lines(d, needle, want) >= want)
            return 1;
        (void) poll(NULL, 0, 1);
    }
    return count_lines(d, needle, want) >= want;
}

/* Waits for the log to contain needle; returns 1 or 0. */
int pagedd_log_wait(const struct pagedd *d, const char *needle, int timeout_ms)
{
    return pagedd_log_wait_count(d, needle, 1, timeout_ms);
}

/* Shows the log's last lines as diagnostics; returns nothing. */
void pagedd_log_diag(const struct pagedd *d, int lines)
{
    fflush(stdout);
    spawn_log_tail(d->log, lines, stdout, "#   ");
}

/* Runs pagedd as a command; returns its wait status or -1. */
int pagedd_run(const char *const *args, const char *out, const char *err, unsigned long nofile)
{
    const char *argv[SPAWN_MAX_ARGS + 1];
    int n = 0;
    argv[n++] = pagedd_path();
    for (int i = 0; args[i] != NULL && n < SPAWN_MAX_ARGS; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    /* Each run's output alone in the files. */
    const char *files[] = { out, err };
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(files[i], "w");
        if (f == NULL)
            sysbail("emptying %s", files[i]);
        fclose(f);
    }
    const struct spawn_cmd cmd = { .argv = argv, .out = out, .err = err, .nofile = nofile,
                                   .death_signal = SIGKILL };
    char why[512];
    int st = spawn_run(&cmd, PAGEDD_RUN_MS, why, sizeof why);
    if (st == -1)
        diag("%s", why);
    return st;
}
