/* daemon_harness.h: what the client tests share: their pagedd, clients of it, its pool counts, test data. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_CLIENT_DAEMON_HARNESS_H
#define PAGED_TESTS_CLIENT_DAEMON_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "paged.h"
#include "tests/tap/pagedd.h"

/*
 * Starts a real pagedd for a client test into *d (tests/tap/pagedd.h), with its socket open
 * to everyone (--socket-mode 0666, the directory 0755: a test may drop privileges) and
 * --log-level info. Skips the whole test when pagedd is not built; bails, showing the log's
 * last lines, when it does not come up. Returns nothing.
 */
void harness_start(struct pagedd *d);

/* Stops the daemon (pagedd_stop) and removes its directory. Returns the daemon's wait
 * status, or -1 if it was not running or had to be killed. */
int harness_stop(struct pagedd *d);

/* Connects a client to the harness's daemon with default options; bails on failure. */
paged_client *harness_client(const struct pagedd *h);

/* A pool's block counts as the daemon reports them (LIST pools). */
struct harness_counts {
    uint32_t num_blocks, free, referenced, cached, attached;
};

/*
 * Asks the daemon for pool name's block counts through a control-only connection (the
 * raw protocol, as pactl speaks it). Returns 0, or -1 when the daemon does not answer or
 * has no such pool.
 */
int harness_pool_counts(const struct pagedd *h, const char *name, struct harness_counts *out);

/*
 * Waits, a bounded number of times with a short poll() between, until pool name has no
 * referenced block (clients that just died are reclaimed by the daemon asynchronously).
 * Returns 0 when it got there, -1 otherwise; *out holds the last counts seen.
 */
int harness_wait_unreferenced(const struct pagedd *h, const char *name, struct harness_counts *out);

/*
 * Returns a pointer the synchronous calls of a client take for bytes of data (data NULL: an
 * output): data itself when cuda is 0 (the cpu backend), else a device copy of it (cudaMalloc;
 * only in a build with CUDA). Bails on failure.
 */
void *harness_arg_in(int cuda, const void *data, size_t bytes);

/* Copies bytes at arg (what harness_arg_in gave, or pool memory mapped here) to host memory dst
 * (NULL: none) and frees arg when it is harness_arg_in's device copy (owned). Bails on failure.
 * Returns nothing. */
void harness_arg_out(int cuda, void *dst, const void *arg, size_t bytes, int owned);

/* On a cuda daemon, makes the device of c's data arena (the daemon's GPU) this thread's
 * current one, so that the test's own device memory lives there too; nothing on cpu. Bails
 * when it cannot. Returns nothing. */
void harness_use_arena_device(paged_client *c);

/* A decode of one sequence through every layer: f32 queries q [layers][q_heads][head_dim] of
 * one token, against len tokens over block table ids (bt_stride entries), outputs into out of
 * the same shape; tensors through device memory when cuda (harness_arg_in). */
struct harness_decode {
    uint32_t layers, q_heads, head_dim, bt_stride;
    const int32_t *ids;
    int32_t len;
};

/* Runs d on p (cuda: the daemon runs cuda). Returns PAGED_OK or the first error. */
int harness_decode_layers(paged_pool *p, int cuda, const struct harness_decode *d, const float *q, float *out);

/* Fills n floats with uniform random values in [-1, 1) from the test's generator. */
struct tap_rng;
void harness_fill(struct tap_rng *rng, float *x, size_t n);

#endif
