/* spawn.h: start a pagedd of one's own, wait until it serves, stop it and reap it: for the tools and the tests. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_COMMON_SPAWN_H
#define PAGED_TOOLS_COMMON_SPAWN_H

/*
 * The one spawner of pagedd. paged-bench and paged-demo start their daemon through it, and
 * the tests through tests/tap/pagedd.h, which adds only the tests' policy on top (it bails
 * where this returns -1, reads $PAGED_TEST_BACKEND and $PAGED_DAEMON_WRAPPER, reads the
 * log). It lives here rather than in tests/tap because installed programs link it, and it
 * never exits, prints or calls the TAP library: every failure comes back as -1 with the
 * reason in the caller's buffer, so that a tool dies its own way and a test bails.
 *
 * Every wait is bounded by a deadline on pcore_now_ns(). Readiness is pagedd's --ready-fd
 * line, not a poll of its socket; an exit is waited for on a pidfd where the kernel has
 * them (else by a poll every millisecond until the deadline).
 */

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* The most words a command, its wrapper included, may have. */
#define SPAWN_MAX_ARGS 128

/* A program to run in a child, and how the child is set up between fork and exec. */
struct spawn_cmd {
    const char *const *argv;     /* the program's path and its arguments, NULL-terminated */
    const char *const *wrapper;  /* a program and its words to run it under (valgrind ...),
                                  * found on PATH, NULL-terminated; NULL for none */
    const char *const *env;      /* NAME=VALUE settings that replace or add to the
                                  * environment, NULL-terminated; NULL for none */
    const char *out;             /* file its standard output is appended to; NULL: ours */
    const char *err;             /* file its standard error is appended to; NULL: ours */
    unsigned long nofile;        /* its descriptor limit (RLIMIT_NOFILE); 0 keeps ours */
    int death_signal;            /* the signal it gets should we die first (Linux); 0: none */
};

/*
 * Starts cmd in a child: standard input /dev/null, no descriptor of ours but keep_fd
 * (-1 for none), which becomes its descriptor 3; an empty signal mask and SIGPIPE at its
 * default, whatever ours are. Returns the child's pid, or -1 with the reason in err. A
 * program that cannot be run makes the child exit 127, naming it on its standard error.
 */
pid_t spawn_cmd(const struct spawn_cmd *cmd, int keep_fd, char *err, size_t errsize);

/*
 * Runs cmd as spawn_cmd starts it and waits up to timeout_ms for it to end, killing it
 * (SIGKILL) when it is still running then. Returns its wait status, or -1 with the reason
 * in err when it could not be started or had to be killed.
 */
int spawn_run(const struct spawn_cmd *cmd, int timeout_ms, char *err, size_t errsize);

/* A pagedd to start. */
struct spawn_pagedd {
    const char *path;            /* the program */
    const char *socket;          /* the socket it listens on (--socket) */
    const char *backend;         /* --backend; NULL leaves it to args or the daemon */
    const char *const *args;     /* further options, after the spawner's (so that a later
                                  * one wins), NULL-terminated; NULL for none. A --config
                                  * among them replaces the spawner's --config /dev/null. */
    const char *const *wrapper;  /* as in struct spawn_cmd */
    const char *const *env;      /* as in struct spawn_cmd */
    const char *log;             /* file its standard error is appended to; NULL: ours */
    int death_signal;            /* as in struct spawn_cmd */
    int ready_ms;                /* how long it may take to say READY */
};

/*
 * Starts pagedd --foreground --ready-fd=3 --socket o->socket --config /dev/null (no system
 * configuration file changes a private daemon), with --backend and o->args, its standard
 * output on /dev/null, and waits up to o->ready_ms for its READY line. Returns its pid. When
 * it does not get ready, it is reaped (killed first if it still runs, after up to 5 s
 * more for it to exit) and the call returns -1 with the reason in err and the wait status
 * in *status (status may be NULL).
 */
pid_t spawn_pagedd(const struct spawn_pagedd *o, int *status, char *err, size_t errsize);

/*
 * Waits up to timeout_ms for child pid to end, and reaps it. Returns its wait status, or
 * -1 when it still runs at the deadline (or is no child of ours).
 */
int spawn_wait(pid_t pid, int timeout_ms);

/*
 * Stops child pid: sends it SIGCONT (so that a stopped child wakes), then signo, waits up
 * to timeout_ms for it to end, then kills it with SIGKILL; reaps it and forgets it (see
 * spawn_track). Returns its wait status, or -1 when it is no child of ours; *killed (may be
 * NULL) says whether it had to be killed.
 */
int spawn_stop(pid_t pid, int signo, int timeout_ms, int *killed);

/* Describes a wait status into buf ("exit status 1", "killed by signal 9", "not reaped"
 * for -1); returns buf. */
char *spawn_describe(char *buf, size_t size, int status);

/*
 * Remembers child pid, and a directory to remove after it (dir may be NULL), for the exit
 * hook: should this process exit while the child runs, the hook kills it (SIGKILL), reaps
 * it and removes the directory and the files in it. Only the process that tracked a child
 * does so; its forked children, exiting, leave it alone. Returns 0, or -1 when 64 children
 * are tracked already.
 */
int spawn_track(pid_t pid, const char *dir);

/* Forgets child pid (reaped, or left to run). Returns nothing. */
void spawn_untrack(pid_t pid);

/*
 * Makes a fresh directory parent/prefix-XXXXXX (parent NULL or empty: $TMPDIR, else /tmp)
 * into dir, of size bytes. Returns 0, or -1 with the reason in err.
 */
int spawn_mkdtemp(char *dir, size_t size, const char *parent, const char *prefix, char *err,
                  size_t errsize);

/* Removes the files in dir and then dir (one level: what pagedd and its clients leave).
 * Returns 0, or -1 when dir is still there. */
int spawn_rmdir(const char *dir);

/*
 * Writes the last lines (at most 64) of file path to out, each after prefix; a file that
 * cannot be read writes nothing. Returns the number of lines written.
 */
int spawn_log_tail(const char *path, int lines, FILE *out, const char *prefix);

#endif
