/* hard.h: what the hardening tests share: long mode, clocks, /proc figures, daemon listings. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_HARD_HARD_H
#define PAGED_TESTS_HARD_HARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/core/proto.h"
#include "tests/service/rawclient.h"
#include "tests/tap/basic.h"

/* Returns whether $PAGED_TEST_LONG asks for the full-length run (make check-long). */
int hard_long(void);

/* Returns the monotonic clock in nanoseconds. */
uint64_t hard_now_ns(void);

/* Returns field ("VmRSS", "RssAnon") of /proc/PID/status in KiB, or -1. */
long hard_status_kb(pid_t pid, const char *field);

/* Looks for the client connected from process pid in LIST clients. Returns 1 with *out
 * filled (out may be NULL), 0 when there is none, or a negative paged_error. */
int hard_client_by_pid(struct rc_client *c, pid_t pid, struct pcore_client_item *out);

/* Reads exactly n bytes from fd, waiting at most timeout_ms for the whole. Returns 1, or 0
 * on end of file, timeout or error. */
int hard_read_full(int fd, void *buf, size_t n, int timeout_ms);

/* Collects the report of child pid: reads exactly n bytes from fd into report (waiting at
 * most timeout_ms, as hard_read_full), closes fd, then waits for the child to end and stores
 * its wait status in *status (-1 if it cannot be had). Returns 1 when the whole report
 * came, else 0. */
int hard_child_report(int fd, pid_t pid, void *report, size_t n, int timeout_ms, int *status);

/*
 * Forks a second tenant: where drop_to is not -1 it first drops to that uid and gid (exiting
 * 77 when it may not), then runs steps(go, res, ctx) with go the read end of the pipe *go
 * writes to and res nres ints set to -999, and writes res to the pipe *report reads, which
 * hard_child_report collects. Returns its pid.
 */
pid_t hard_fork_tenant(int drop_to, void (*steps)(int go, int *res, void *ctx), void *ctx, int nres, int *go,
                       int *report);

/* Fills n floats with random values in [-1, 1), never all zero. */
void hard_fill(tap_rng *rng, float *x, size_t n);

#endif
