/* proc.h: what the service tests do to a running pagedd besides starting and stopping it. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_SERVICE_PROC_H
#define PAGED_TESTS_SERVICE_PROC_H

#include <sys/types.h>

#include "tests/tap/pagedd.h"

/* Where PAGEDD_CPU_DONE_US is set and the daemon ran the cpu backend (cpu nonzero), reports
 * as a test whether the daemon's log says it engaged the late completions; else nothing.
 * Returns nothing. */
void td_check_late_done(const struct pagedd *d, int cpu);

/* What a daemon's log says of an allocation failure planted with PAGEDD_FAIL_ALLOC_AT. */
struct td_allocfail {
    int fired;                    /* the planted failure happened */
    unsigned long long counted;   /* allocations the daemon counted (logged at its exit) */
    char site[96];                /* where it was: "408 bytes, server.c:236" */
    char logged[1600];            /* the failure's line and the two after it */
};

/* Reads daemon d's log into *o. Returns nothing. */
void td_read_allocfail(const struct pagedd *d, struct td_allocfail *o);

/* Sleeps about ms milliseconds (for bounded polling loops only). */
void td_pause_ms(int ms);

/* Sleeps about us microseconds: a bounded poll's interval. */
void td_pause_us(long us);

/* Stops daemon d with SIGSTOP and waits until it has stopped; returns 0, or -1. */
int td_freeze(struct pagedd *d);

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
int td_freeze_idle(struct pagedd *d);

#endif
