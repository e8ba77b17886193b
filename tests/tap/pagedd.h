/* pagedd.h: a real pagedd for a test: started on a temporary socket, stopped and reaped for sure, its log read. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_TAP_PAGEDD_H
#define PAGED_TESTS_TAP_PAGEDD_H

/*
 * Every test that starts a daemon starts it here, as remctl's tests do with remctld_start.
 * The process work is tools/common/spawn.h's (the tools start theirs with it too); this
 * layer adds the tests' policy: the cpu backend unless $PAGED_TEST_BACKEND says otherwise,
 * $PAGED_DAEMON_WRAPPER (make check-valgrind runs each daemon under valgrind), the log in
 * the daemon's directory, a bail where the spawner reports an error, and a daemon that dies
 * with the test (SIGKILL, should the test die first, and at exit).
 */

#include <sys/types.h>

/* One daemon under test. Zero it before its first use ({ 0 } or static). */
struct pagedd {
    pid_t pid;            /* the daemon while it runs, else 0 */
    char dir[256];        /* its temporary directory: the socket, the log, the test's files */
    char socket[300];     /* dir/pagedd.sock */
    char log[300];        /* dir/pagedd.log: its standard error, over every start */
};

/* Returns the path of the pagedd under test: $top_builddir/daemon/pagedd. */
const char *pagedd_path(void);

/* Makes a fresh temporary directory for d ($TMPDIR, else /tmp) with the socket and log
 * paths in it; d->pid is 0. Bails on failure. Returns nothing. */
void pagedd_mkdir(struct pagedd *d);

/*
 * Starts pagedd --foreground on d->socket (making d's directory first when d->dir is empty;
 * a restart keeps the directory and appends to the log), with --backend
 * $PAGED_TEST_BACKEND (default cpu), --config /dev/null, then args (NULL-terminated, may be
 * NULL; a later --backend wins, a --config replaces /dev/null), and env's NAME=VALUE
 * settings added to its environment (may be NULL). Waits up to 30 s for its READY line.
 * Returns 0 with d->pid set, or -1 when it did not get ready (reaped, its wait status in
 * *status where status is not NULL).
 */
int pagedd_start(struct pagedd *d, const char *const *args, const char *const *env, int *status);

/*
 * Stops daemon d with signo (and SIGCONT, should it be frozen), waits up to 20 s for it to
 * exit, then kills it (SIGKILL, saying so as a diagnostic); reaps it and sets d->pid to 0.
 * Leaves the directory. Returns its wait status, or -1 when it had to be killed or was not
 * running.
 */
int pagedd_stop_with(struct pagedd *d, int signo);

/* pagedd_stop_with(d, SIGTERM): the daemon's orderly shutdown. Returns its wait status, or
 * -1. */
int pagedd_stop(struct pagedd *d);

/* Removes d's directory and everything in it, unless $PAGED_TEST_KEEP is set (then it says
 * where it is). When a test has failed, first shows the log's last lines as diagnostics.
 * Returns nothing. */
void pagedd_cleanup(struct pagedd *d);

/* Returns whether d's log contains needle (read now). */
int pagedd_log_contains(const struct pagedd *d, const char *needle);

/* Returns how many lines of d's log contain needle (read now). */
int pagedd_log_count(const struct pagedd *d, const char *needle);

/* Waits up to timeout_ms, reading the log every millisecond, for want of its lines to contain
 * needle. Returns 1 or 0. */
int pagedd_log_wait_count(const struct pagedd *d, const char *needle, int want, int timeout_ms);

/* Waits up to timeout_ms, reading the log every millisecond, for it to contain needle.
 * Returns 1 or 0. */
int pagedd_log_wait(const struct pagedd *d, const char *needle, int timeout_ms);

/* Shows the last lines (at most 64) of d's log as diagnostics. Returns nothing. */
void pagedd_log_diag(const struct pagedd *d, int lines);

/*
 * Runs pagedd as a command, with exactly args (NULL-terminated; nothing is added), its
 * standard output and error written to the files out and err (emptied first), no
 * descriptor of the test's open and, where nofile is not 0, at most nofile descriptors.
 * Waits up to 30 s for it to end. Returns its wait status, or -1 when it had to be killed.
 */
int pagedd_run(const char *const *args, const char *out, const char *err, unsigned long nofile);

#endif
