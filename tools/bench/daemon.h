/* daemon.h: paged-bench's own pagedd: started on a temporary socket, stopped for sure, children reaped. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_BENCH_DAEMON_H
#define PAGED_TOOLS_BENCH_DAEMON_H

#include <stddef.h>
#include <sys/types.h>

/* The daemon, started with the tools' spawner (tools/common/spawn.h), which also kills it
 * and the client processes paged-bench tracks there (spawn_track) should paged-bench die. */
struct bd_daemon {
    pid_t pid;
    char dir[256];        /* a fresh temporary directory, removed at stop */
    char socket[300];     /* dir/pagedd.sock */
    char log[300];        /* dir/pagedd.log: the daemon's stderr */
};

/*
 * Starts pagedd (the program at path) in the foreground with --ready-fd, on a socket in a
 * new temporary directory, with no configuration file, backend backend ("cpu", "cuda",
 * "auto"), threads CPU workers (0: its default) and dependency-waits waits (NULL: its
 * default). Waits up to a minute for READY. Dies
 * with the daemon's last log lines when it does not get ready.
 */
void bd_start(struct bd_daemon *d, const char *path, const char *backend, unsigned threads, const char *waits);

/* The most extra arguments bd_start_args passes on. */
#define BD_MAX_EXTRA 8

/* bd_start with extra arguments for the daemon (a NULL-terminated list of at most
 * BD_MAX_EXTRA, or NULL). */
void bd_start_args(struct bd_daemon *d, const char *path, const char *backend, unsigned threads, const char *waits,
                   const char *const *extra);

struct bench_opts;

/* Returns the pagedd to start: --pagedd, else $PAGED_BENCH_PAGEDD, else the build tree's
 * daemon/pagedd when self (this program's path) lies in a build tree, else the installed
 * one. buf (size bytes) holds a built path. */
const char *bd_pagedd_path(const struct bench_opts *o, const char *self, char *buf, size_t size);

/* Says whether self (this program's path) lies in a build tree (tools/paged-bench, or
 * libtool's tools/.libs/lt-paged-bench); when it does, top (size bytes) gets the tree's top
 * directory. Returns 1 or 0. */
int bd_build_tree(const char *self, char *top, size_t size);

/* Returns the --backend the daemon gets for the options: auto stays auto when CUDA is built
 * in, else cpu. */
const char *bd_backend(const struct bench_opts *o);

/* Stops the daemon (SIGTERM, then SIGKILL after 20 s) and removes the directory. */
void bd_stop(struct bd_daemon *d);

#endif
