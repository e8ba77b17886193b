/* spawn.h: paged-demo's child processes: the daemon it starts and stops, and pactl. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_DEMO_SPAWN_H
#define PAGED_TOOLS_DEMO_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

/*
 * The caller blocks SIGCHLD before it starts anything (demo_block_sigchld), so that waits
 * for a child with a time limit are sigtimedwait calls, not polling; every child gets the
 * signal mask back before it runs a program.
 */

/* Blocks SIGCHLD in the calling process; children started here unblock it again. */
void demo_block_sigchld(void);

/*
 * Starts pagedd (path pagedd) in the foreground on socket with the given backend, an empty
 * configuration (/dev/null, so no system paged.conf changes the demo) and --ready-fd, and
 * waits up to timeout_ms for it to say READY. verbose keeps its log at info, else warning.
 * Returns its pid, or -1 with the reason in err (the daemon stopped, if it had started).
 */
pid_t demo_daemon_start(const char *pagedd, const char *socket, const char *backend,
                        int verbose, int timeout_ms, char *err, size_t errsize);

/*
 * Waits up to timeout_ms for child pid to exit, reaping it. Returns its wait status, or -1
 * if it is still running when the time is up.
 */
int demo_wait_child(pid_t pid, int timeout_ms);

/*
 * Stops the daemon: SIGTERM, then up to timeout_ms for it to exit, then SIGKILL. Returns
 * its wait status.
 */
int demo_daemon_stop(pid_t pid, int timeout_ms);

/* Runs argv[0] with arguments argv (NULL-terminated) and waits for it. Returns its wait
 * status, or -1 if it could not be started. */
int demo_run(char *const argv[]);

/* Describes a wait status ("exit status 1", "killed by signal 9") into buf; returns buf. */
char *demo_describe_status(char *buf, size_t size, int status);

#endif
