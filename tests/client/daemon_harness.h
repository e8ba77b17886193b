/* daemon_harness.h: start a real pagedd on a temporary socket for a test, and stop it whatever happens. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_CLIENT_DAEMON_HARNESS_H
#define PAGED_TESTS_CLIENT_DAEMON_HARNESS_H

#include <stdint.h>
#include <sys/types.h>

#include "paged.h"

/* One daemon: its temporary directory, socket and process. */
struct harness {
    char dir[64];          /* mkdtemp directory holding the socket and config */
    char socket[128];
    char config[128];
    pid_t pid;             /* the daemon, 0 once stopped */
    pid_t owner;           /* the process that started it (forked workers never stop it) */
};

/*
 * Starts $top_builddir/daemon/pagedd --foreground on a socket in a fresh mkdtemp
 * directory, with the cpu backend (or $PAGED_TEST_BACKEND) and an empty config file, and
 * waits until it accepts connections: at most a few hundred connect attempts, a short
 * poll() between them. Skips the whole test when pagedd is not built; bails when it does
 * not come up. The daemon is killed at exit (atexit, and PR_SET_PDEATHSIG should the test
 * crash), so a failing test never leaves it behind.
 */
void harness_start(struct harness *h);

/* Stops the daemon: SIGTERM, a bounded wait, then SIGKILL; removes the directory. Returns
 * the daemon's wait status, or -1 if it was not running. */
int harness_stop(struct harness *h);

/* Connects a client to the harness's daemon with default options; bails on failure. */
paged_client *harness_client(const struct harness *h);

/* A pool's block counts as the daemon reports them (LIST pools). */
struct harness_counts {
    uint32_t num_blocks, free, referenced, cached, attached;
};

/*
 * Asks the daemon for pool name's block counts through a control-only connection (the
 * raw protocol, as pactl speaks it). Returns 0, or -1 when the daemon does not answer or
 * has no such pool.
 */
int harness_pool_counts(const struct harness *h, const char *name, struct harness_counts *out);

/*
 * Waits, a bounded number of times with a short poll() between, until pool name has no
 * referenced block (clients that just died are reclaimed by the daemon asynchronously).
 * Returns 0 when it got there, -1 otherwise; *out holds the last counts seen.
 */
int harness_wait_unreferenced(const struct harness *h, const char *name, struct harness_counts *out);

/* Fills n floats with uniform random values in [-1, 1) from the test's generator. */
struct tap_rng;
void harness_fill(struct tap_rng *rng, float *x, size_t n);

#endif
