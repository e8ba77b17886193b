/* tpactl.h: what the pactl tests share: pactl and holder runs, their output, subscriber lines. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_TOOLS_TPACTL_H
#define PAGED_TESTS_TOOLS_TPACTL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tests/tap/pagedd.h"
#include "tests/tools/tjson.h"

/* Every wait of these tests is bounded by one of these, in milliseconds. */
#define TP_READY_MS 20000
#define TP_RUN_MS 20000
#define TP_EVENT_MS 3000

/* The build tree's pactl and pactl-holder (tp_init finds them). */
extern char tp_pactl[PATH_MAX], tp_holder[PATH_MAX];

/* A child with pipes to its standard input and from its standard output. */
struct tp_child {
    pid_t pid;
    int in;   /* write end of its stdin, or -1 */
    int out;  /* read end of its stdout, or -1 */
};

/* What a finished command printed, and how it ended. */
struct tp_run {
    int status;       /* exit status, or 128 + signal, or -1 if it had to be killed */
    char *out, *err;
    size_t out_len, err_len;
};

/* Finds pactl and pactl-holder under $top_builddir and pagedd (skip_all when one is not
 * built), ignores SIGPIPE and blocks SIGCHLD (children get the old mask back), makes d's
 * directory and plans lazily. Returns nothing. */
void tp_init(struct pagedd *d);

/* Starts daemon d (made by tp_init) with args (NULL-terminated; the cpu backend unless
 * $PAGED_TEST_BACKEND says otherwise) and waits for its READY; bails if it does not come.
 * Returns nothing. */
void tp_start_daemon(struct pagedd *d, const char *const *args);

/* Stops daemon d, checks that it exits 0, and removes its directory. Returns nothing. */
void tp_stop_daemon(struct pagedd *d);

/* Returns CLOCK_MONOTONIC in milliseconds. */
long long tp_now_ms(void);

/* Starts argv (pactl, a holder) with its stdin and stdout piped to us, its stderr shared.
 * Bails on failure; returns the child. */
struct tp_child tp_spawn(char *const argv[]);

/* tp_spawn as user uid (its only group the one of the same number); (uid_t) -1: the test's
 * user. A child that cannot switch exits 77. Returns the child. */
struct tp_child tp_spawn_as(uid_t uid, char *const argv[]);

/* Waits up to ms for pid; kills it if it is still there. Returns its exit status, 128 +
 * signal, or -1 when it had to be killed. */
int tp_reap(pid_t pid, int ms);

/* Reads one line (without its newline) from fd into buf within ms. Returns its length, or
 * -1 on timeout or end of file. */
long tp_read_line(int fd, char *buf, size_t size, int ms);

/* Runs pactl with the given arguments (NULL-terminated, at most 14) and collects its output
 * into *r. Returns nothing. */
void tp_run_pactl(struct tp_run *r, ...);

/* Runs argv (argv[0] a path) as user uid (with that uid as its only group), or as the test's
 * user where uid is (uid_t) -1, and collects its output into *r; status 77 says the switch
 * was not possible here. Returns nothing. */
void tp_run_as(struct tp_run *r, uid_t uid, char *const argv[]);

/* Frees a run's output. */
void tp_run_free(struct tp_run *r);

/* Returns whether user uid can run pactl here at all (`pactl -V`): not where it cannot switch
 * to uid, nor where a directory above the build tree is closed to that uid. */
int tp_pactl_runs_as(uid_t uid);

/* Parses a run's standard output as one JSON document; returns it or NULL (with a
 * diagnostic). */
struct tj *tp_run_json(const struct tp_run *r);

/* Returns whether text is exactly one line, ending with a newline. */
int tp_one_line(const char *text);

/* Starts a holder client (see pactl-holder.c) of the daemon at socket, named name, on pool,
 * holding hold and caching cache blocks, and waits for its "ready ID"; bails if it does not
 * come. Returns it, its client id in *id. */
struct tp_child tp_start_holder(const char *socket, const char *name, const char *pool,
                                const char *hold, const char *cache, uint32_t *id);

/* tp_start_holder as user uid, as tp_spawn_as switches. Returns it. */
struct tp_child tp_start_holder_as(uid_t uid, const char *socket, const char *name, const char *pool,
                                   const char *hold, const char *cache, uint32_t *id);

/* Tells a holder to finish and waits for it; returns its exit status. */
int tp_stop_holder(struct tp_child *h);

/* Reads JSON subscriber lines from fd until an event of type for client id arrives (or
 * TP_EVENT_MS pass). *bad counts the lines that are not JSON. Returns 1 if found. */
int tp_await_event(int fd, const char *type, uint32_t id, int *bad);

/*
 * Starts holders named prefix-N at socket until the JSON subscriber whose output is fd
 * shows one's connect event: the subscription starts a moment after pactl does, and a probe
 * that comes too early is simply missed, so up to five. With disconnected, also waits for
 * that probe's disconnect event and says in *disconnected whether it came. *bad counts
 * lines that are not JSON. Returns whether a connect event came.
 */
int tp_probe_subscription(const char *socket, int fd, const char *prefix, int *bad, int *disconnected);

#endif
