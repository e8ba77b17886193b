/* wake.h: wake-ups for the rings that cost no system call while nobody sleeps. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_CORE_WAKE_H
#define PAGED_CORE_WAKE_H

/*
 * The consumer of a ring that wants to sleep sets the ring's consumer_waiting word, issues
 * a full fence and looks at the ring once more before it blocks in poll() on a wake-up
 * descriptor. The producer, after publishing, issues a full fence and writes the descriptor
 * only if it sees the word set. The two fences make the pattern race free: either the
 * consumer's last look sees the new tail, or the producer sees the flag. While the consumer
 * is busy, a producer pays one fence and one load per publish and no system call; of the
 * publishes made while it sleeps, only the first writes (it clears the word).
 *
 * The wake-up descriptor has a wait side (polled and drained by the consumer) and a notify
 * side (written by the producer). An eventfd is both at once and is the cheapest. But an
 * eventfd's file status flags belong to its one open file description, which every holder
 * shares: a peer that holds it can clear O_NONBLOCK and fill or empty the counter, so that
 * our next write or read blocks. A pipe's two ends are separate descriptions: the side
 * that keeps one end, set non-blocking, cannot be made to block by the holder of the other.
 * Every function here works on either kind, and pcore_wake_notify never raises SIGPIPE. So a
 * process that must never block on an untrusted peer (the daemon) never reads or writes a
 * descriptor the peer shares. It uses pipes and keeps one end of each: the read end where it
 * is the consumer (the SQ), the write end where it is the producer (the CQ). (Alternatively,
 * for the SQ: an eventfd the peer writes, watched with edge-triggered epoll, where every
 * write is a new edge, and never read: then it sleeps with prepare, a last look, epoll_wait
 * and cancel, without draining.)
 *
 * Waits spin first, adaptively (struct pcore_waiter), because a wake-up through the kernel
 * costs microseconds that a busy peer makes unnecessary. The daemon sleeps on many rings at
 * once through epoll, so the pieces of a wait are public: pcore_wake_prepare before the last
 * look at the ring, then epoll, then pcore_wake_finish (or pcore_wake_cancel if the last look
 * found work).
 *
 * Results: a count or 1 for success, 0 for "nothing", or a negative paged_error. System call
 * failures are PAGED_E_SYSTEM with errno set; EINTR is retried and never reported.
 */

#include <stdint.h>

#include "lib/core/ring.h"

/* The default ceiling of the adaptive spin, in nanoseconds. */
#define PCORE_WAKE_SPIN_NS 300000u
/* The largest ceiling a client may ask for (paged_connect_opts.spin_us), in microseconds. */
#define PCORE_SPIN_US_MAX 1000000

/* Tells the CPU that the caller is spinning (lets a sibling hyperthread run, saves power);
 * every spin loop, the library's and the daemon's, calls it once per turn. Returns nothing. */
static inline void pcore_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* A waiter's adaptive spin budget and counters, owned by one waiting thread. */
struct pcore_waiter {
    uint32_t spin_max_ns; /* the most one wait spins before it sleeps; 0: never spin */
    uint32_t spin_ns;     /* the current budget: grows when spinning pays, shrinks when not */
    uint64_t spin_hits;   /* waits satisfied while spinning */
    uint64_t sleeps;      /* times a wait went into poll() */
    uint64_t nospin_waits; /* waits that slept at once, as the ring's consumer_nospin asked */
};

/* Sets up a waiter that spins at most spin_max_ns before sleeping (0: never spins). */
void pcore_waiter_init(struct pcore_waiter *w, uint32_t spin_max_ns);

/* Counts a wait that spinning served and grows w's budget by a quarter and a microsecond,
 * up to its ceiling. Returns nothing. */
void pcore_waiter_hit(struct pcore_waiter *w);

/* Adapts w's budget after a wait that slept and lasted waited_ns: to cover that wait where
 * the ceiling would have, else halved down to an eighth of the ceiling. Returns nothing. */
void pcore_waiter_slept(struct pcore_waiter *w, uint64_t waited_ns);

/*
 * Creates an eventfd wake-up, non-blocking and close-on-exec, and stores it in *fd (it is
 * both the wait and the notify side). Returns PAGED_OK or PAGED_E_SYSTEM.
 */
int pcore_wake_eventfd(int *fd);

/*
 * Creates a pipe wake-up, both ends non-blocking and close-on-exec: *wait_fd is the read
 * end, *notify_fd the write end. Returns PAGED_OK or PAGED_E_SYSTEM.
 */
int pcore_wake_pipe(int *wait_fd, int *notify_fd);

/*
 * Producer side, after pcore_ring_prod_publish: writes notify_fd if and only if the ring's
 * consumer has said it may sleep, and clears that word, so that further publishes before the
 * consumer is up again make no system call either. Returns 1 when it wrote, 0 when nobody waits (no system
 * call made), PAGED_E_DISCONNECTED when notify_fd is a pipe nobody reads any more, or
 * PAGED_E_SYSTEM. A full descriptor (a wake-up is already pending) is success. Never raises
 * SIGPIPE, whatever the caller's disposition of it.
 */
int pcore_wake_notify(struct pcore_ring_prod *p, int notify_fd);
/* pcore_wake_notify for a process whose SIGPIPE disposition is SIG_IGN (pagedd): the write
 * is not wrapped in the two signal-mask changes that keep SIGPIPE from the caller, which
 * cost as much as the write itself. Returns the same. */
int pcore_wake_notify_sigpipe_ignored(struct pcore_ring_prod *p, int notify_fd);

/*
 * Consumer side, first half of a sleep: announces that the consumer may sleep. Look at the
 * ring again afterwards; only if it is still empty is it safe to block on the wait side.
 */
void pcore_wake_prepare(struct pcore_ring_cons *c);

/* Consumer side: withdraws the announcement without touching the descriptor. */
void pcore_wake_cancel(struct pcore_ring_cons *c);

/*
 * Consumer side, after a sleep: withdraws the announcement and drains wait_fd. Returns
 * PAGED_OK or PAGED_E_SYSTEM.
 */
int pcore_wake_finish(struct pcore_ring_cons *c, int wait_fd);

/*
 * Empties wait_fd (it must be non-blocking) so the next poll blocks until a new wake-up.
 * Returns 1 when a wake-up was pending, 0 when none was, or PAGED_E_SYSTEM.
 */
int pcore_wake_drain(int wait_fd);

/*
 * Blocks until wait_fd is readable or timeout_ms milliseconds pass (negative: no limit),
 * resuming after signals with the time that is left. Returns 1 when readable,
 * PAGED_E_TIMEOUT, PAGED_E_DISCONNECTED when wait_fd is the read end of an empty pipe whose
 * write ends are all closed (the notifier is gone), or PAGED_E_SYSTEM.
 */
int pcore_wake_sleep(int wait_fd, int timeout_ms);

/*
 * A wait condition for pcore_wake_wait: returns a positive value when the waiter should stop
 * waiting, 0 to keep waiting, or a negative paged_error to give up with.
 */
typedef int pcore_wake_ready_fn(void *arg);

/*
 * Waits, as the consumer of ring c, until ready(arg) returns nonzero: checks it, spins on it
 * for up to the waiter's budget (w may be NULL: no spin), then sleeps on wait_fd through
 * prepare, a last check, pcore_wake_sleep and finish, until ready or timeout_ms milliseconds
 * (negative: no limit; 0: check once) have passed. ready may look at other rings too (a
 * producer waiting for room on a full ring waits as the consumer of its completion ring, with
 * a condition that also looks for room), provided every party that can make it true
 * notifies through c. Ready is always checked after the last wake-up, so entries published
 * just before a notifier went away are not lost. Returns what ready returned (positive or
 * negative), PAGED_E_TIMEOUT, PAGED_E_DISCONNECTED or PAGED_E_SYSTEM.
 */
int pcore_wake_wait(struct pcore_ring_cons *c, int wait_fd, struct pcore_waiter *w,
                    int timeout_ms, pcore_wake_ready_fn *ready, void *arg);

/*
 * Waits until ring c holds at least one entry: pcore_wake_wait with pcore_ring_cons_available
 * as the condition. Returns the number of entries ready, PAGED_E_TIMEOUT, PAGED_E_RING,
 * PAGED_E_DISCONNECTED or PAGED_E_SYSTEM.
 */
int pcore_wake_wait_ring(struct pcore_ring_cons *c, int wait_fd, struct pcore_waiter *w,
                         int timeout_ms);

#endif
