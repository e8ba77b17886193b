/* spawn.h: start a real pagedd for a test on a temporary socket, and stop it for sure. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_SERVICE_SPAWN_H
#define PAGED_TESTS_SERVICE_SPAWN_H

#include <sys/types.h>

struct td_daemon {
    pid_t pid;
    char dir[256];        /* temporary directory, removed at stop */
    char socket[300];     /* dir/pagedd.sock */
    char log[300];        /* dir/pagedd.log: the daemon's stderr */
};

/* Returns the path of the pagedd under test: $top_builddir/daemon/pagedd. */
const char *td_pagedd_path(void);

/* Makes a fresh temporary directory into d->dir (and the socket and log paths). Bails on
 * failure. */
void td_mkdir(struct td_daemon *d);

/*
 * Starts pagedd --foreground --ready-fd with --socket d->socket, --backend
 * $PAGED_TEST_BACKEND (default cpu), stderr to d->log, and the extra arguments
 * (NULL-terminated, may be NULL; a --backend among them wins). Waits (bounded) for READY. Returns 0, or
 * -1 if it did not get ready (its exit status in *status when it exited). The daemon is
 * killed at exit even when the test bails. With $PAGED_DAEMON_WRAPPER set ("valgrind
 * --error-exitcode=99"), the daemon runs under that command (words split at blanks).
 */
int td_start(struct td_daemon *d, const char *const *extra, int *status);

/* Sends SIGTERM and waits (bounded, then SIGKILL). Returns the exit status as waitpid
 * reports it, or -1. Leaves the directory. */
int td_stop(struct td_daemon *d);

/* In a forked child: forgets the daemons, so that the child's exit never kills them. */
void td_forget_all(void);

/* Removes the temporary directory and everything in it. */
void td_cleanup(struct td_daemon *d);

/* Returns whether the daemon's log contains needle (read now). */
int td_log_contains(const struct td_daemon *d, const char *needle);

/* Where PAGEDD_CPU_DONE_US is set and the daemon ran the cpu backend (cpu nonzero), reports
 * as a test whether the daemon's log says it engaged the late completions; else nothing.
 * Returns nothing. */
void td_check_late_done(const struct td_daemon *d, int cpu);

/* What a daemon's log says of an allocation failure planted with PAGEDD_FAIL_ALLOC_AT. */
struct td_allocfail {
    int fired;                    /* the planted failure happened */
    unsigned long long counted;   /* allocations the daemon counted (logged at its exit) */
    char site[96];                /* where it was: "408 bytes, server.c:236" */
    char logged[1600];            /* the failure's line and the two after it */
};

/* Reads daemon d's log into *o. Returns nothing. */
void td_read_allocfail(const struct td_daemon *d, struct td_allocfail *o);

/* Waits up to timeout_ms, polling every millisecond, for the log to contain needle. Returns 1 or 0. */
int td_log_wait(const struct td_daemon *d, const char *needle, int timeout_ms);

/* Sleeps about ms milliseconds (for bounded polling loops only). */
void td_pause_ms(int ms);

/* Sleeps about us microseconds: a bounded poll's interval. */
void td_pause_us(long us);

/* Stops daemon d with SIGSTOP and waits until it has stopped; returns 0, or -1. */
int td_freeze(struct td_daemon *d);

/* Returns the number of descriptors process pid holds (its /proc/PID/fd entries), or -1. */
int td_fd_count(pid_t pid);

/* Returns pid's descriptor count once 20 reads a millisecond apart agree (a daemon closes
 * the descriptors it sent a client, or reported readiness on, just after), or the last read
 * after 5 s. */
int td_fd_count_stable(pid_t pid);

/* Sets pid's soft limit of resource (RLIMIT_NOFILE, RLIMIT_AS) to n with prlimit; returns 0
 * or -1 with errno set. */
int td_limit(pid_t pid, int resource, unsigned long long n);

/* Returns whether process pid's main thread is blocked in epoll_wait, per /proc/PID/wchan;
 * where the kernel hides wchan, whether it sleeps at all (/proc/PID/stat). */
int td_in_epoll_wait(pid_t pid);

/*
 * Freezes daemon d as td_freeze does, once it has gone to sleep in epoll_wait (waiting up to
 * ~10 s): a daemon frozen while it still polls its rings may be in the middle of a pass, and
 * take only the later clients' requests when it goes on. Returns 0, or -1.
 */
int td_freeze_idle(struct td_daemon *d);

#endif
