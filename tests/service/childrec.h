/* childrec.h: the record pipe between a service test's client processes and its parent. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_SERVICE_CHILDREC_H
#define PAGED_TESTS_SERVICE_CHILDREC_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "tests/tap/basic.h"

/*
 * A child reports each check as one fixed-size record on a pipe (atomic, being under
 * PIPE_BUF) and only the parent prints TAP: several processes writing TAP lines would
 * interleave them. Kind CR_RESULT is a check; a test numbers its other kinds from
 * CR_FIRST_KIND (ready, submitted, done, ...), with a phase where it has several.
 */

#define CR_RESULT 1
#define CR_FIRST_KIND 2

/* One record. */
struct cr_rec {
    int32_t kind;
    int32_t who;
    int32_t ok;
    int32_t phase;
    char msg[240];
};
_Static_assert(sizeof(struct cr_rec) <= PIPE_BUF, "records are written atomically");

/* In a child: sends its records on fd, as client who. Returns nothing. */
void cr_child(int fd, int who);

/* Sends one record; a child that cannot report exits (90). Returns nothing. */
void cr_send(int kind, int ok, int phase, const char *msg);

/* Reports one check; returns cond. */
int cr_check(int cond, const char *fmt, ...) TAP_PRINTF(2, 3);

/* Reports a failed check that leaves the child nothing to do, and exits (1). */
void cr_fatal(const char *fmt, ...) TAP_PRINTF(1, 2);

/* Blocks until the parent writes a byte on fd (its go); exits (2) if it never will. */
void cr_await_go(int fd);

/*
 * In the parent: reads records from fd until count records of kind and phase (0: any) came,
 * printing each check on the way, for at most wait_ms of silence in all. Returns 1, or 0 when
 * the children went away or the wait took too long.
 */
int cr_await(int fd, int kind, int phase, int count, int wait_ms);

/* The clients of a test: their pids, the write ends of their command pipes (a byte is a
 * go, end of file says leave) and the read end of the record pipe. */
struct cr_clients {
    int n;
    pid_t pids[64];
    int cmd[64];
    int rec_fd;
};

/*
 * Forks n (at most 64) clients; client w keeps only its own command pipe's read end and
 * runs run(w, that fd), which must not return (a return exits 3). Fills *c in the parent;
 * returns nothing, bails on failure.
 */
void cr_spawn(struct cr_clients *c, int n, void (*run)(int who, int cmd_fd));

/* Closes every client's command pipe, waits for each and checks that it exited 0, then
 * closes the record pipe. Returns nothing. */
void cr_reap(struct cr_clients *c);

/* Returns the size of the file at path now (0 if it cannot be read): where a daemon's log
 * stands before a phase. */
long cr_file_size(const char *path);

#endif
