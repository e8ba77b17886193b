/* wake.c: wake-ups for the rings that cost no system call while nobody sleeps. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/wake.h"
#include "lib/core/clock.h"

/* How many ring checks a spin makes between two looks at the clock. */
#define SPIN_CLOCK_EVERY 16u
/* Drain reads at most this many times, so a flooded pipe cannot keep us here. */
#define DRAIN_MAX_READS 16

/* Returns the poll() timeout covering the nanoseconds left until deadline, rounded up. */
static int ms_left(uint64_t deadline)
{
    uint64_t now = pcore_now_ns();
    if (now >= deadline)
        return 0;
    uint64_t ms = (deadline - now + 999999u) / 1000000u;
    return ms > INT32_MAX ? INT32_MAX : (int) ms;
}

/* Sets up a waiter; the budget starts at its ceiling. */
void pcore_waiter_init(struct pcore_waiter *w, uint32_t spin_max_ns)
{
    w->spin_max_ns = spin_max_ns;
    w->spin_ns = spin_max_ns;
    w->spin_hits = 0;
    w->sleeps = 0;
    w->nospin_waits = 0;
}

/* Counts a wait that spinning served and edges the budget up towards its ceiling. */
void pcore_waiter_hit(struct pcore_waiter *w)
{
    w->spin_hits++;
    uint64_t grown = (uint64_t) w->spin_ns + w->spin_ns / 4 + 1000u;
    w->spin_ns = grown > w->spin_max_ns ? w->spin_max_ns : (uint32_t) grown;
}

/*
 * Adapts w's budget after a wait that slept and took waited_ns in all. A wait the ceiling
 * would have covered sets the budget to cover it with a quarter to spare: the budget follows
 * the waits it could serve, and cannot get stuck below a steady wait it only learns from
 * hits. A longer wait halves the budget, down to an eighth of the ceiling. Returns nothing.
 */
void pcore_waiter_slept(struct pcore_waiter *w, uint64_t waited_ns)
{
    if (waited_ns <= w->spin_max_ns) {
        uint64_t cover = waited_ns + waited_ns / 4 + 1000u;
        w->spin_ns = cover > w->spin_max_ns ? w->spin_max_ns : (uint32_t) cover;
        return;
    }
    uint32_t floor = w->spin_max_ns / 8;
    w->spin_ns = w->spin_ns / 2 > floor ? w->spin_ns / 2 : floor;
}

/* Creates an eventfd wake-up. */
int pcore_wake_eventfd(int *fd)
{
    int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd < 0)
        return PAGED_E_SYSTEM;
    *fd = efd;
    return PAGED_OK;
}

/* Sets O_NONBLOCK and FD_CLOEXEC on fd; returns PAGED_OK or PAGED_E_SYSTEM. */
static int set_nonblock_cloexec(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return PAGED_E_SYSTEM;
    int fdfl = fcntl(fd, F_GETFD);
    if (fdfl < 0 || fcntl(fd, F_SETFD, fdfl | FD_CLOEXEC) < 0)
        return PAGED_E_SYSTEM;
    return PAGED_OK;
}

/* Creates a pipe wake-up. */
int pcore_wake_pipe(int *wait_fd, int *notify_fd)
{
    int fds[2];
    if (pipe(fds) < 0)
        return PAGED_E_SYSTEM;
    if (set_nonblock_cloexec(fds[0]) < 0 || set_nonblock_cloexec(fds[1]) < 0) {
        int saved = errno;
        close(fds[0]);
        close(fds[1]);
        errno = saved;
        return PAGED_E_SYSTEM;
    }
    *wait_fd = fds[0];
    *notify_fd = fds[1];
    return PAGED_OK;
}

/*
 * Writes the 8-byte wake-up v to fd, retrying on EINTR, without ever raising SIGPIPE: a
 * library must not kill its host process because the peer reading a pipe died. SIGPIPE from
 * write is directed at the writing thread, so blocking it here and taking back the one our
 * write raised leaves everything else as it was. Returns write's result with errno set.
 * Only reached when the consumer sleeps, so the extra mask changes are small next to the
 * wake-up itself.
 */
static ssize_t write_no_sigpipe(int fd, const uint64_t *v)
{
    sigset_t pipe_only, old;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    int masked = pthread_sigmask(SIG_BLOCK, &pipe_only, &old) == 0;
    ssize_t n;
    do
        n = write(fd, v, sizeof *v);
    while (n < 0 && errno == EINTR);
    int saved = errno;
    /* If the caller had SIGPIPE blocked already, a pending one is its own business. */
    if (n < 0 && saved == EPIPE && masked && !sigismember(&old, SIGPIPE)) {
        const struct timespec zero = { 0, 0 };
        while (sigtimedwait(&pipe_only, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    if (masked)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    return n;
}

/* pcore_wake_notify and pcore_wake_notify_sigpipe_ignored: writes notify_fd when the
 * consumer has announced it may sleep, guarding against SIGPIPE unless sigpipe_ignored.
 * Returns what they return. */
static int notify(struct pcore_ring_prod *p, int notify_fd, int sigpipe_ignored)
{
    /* Pairs with the fence in pcore_wake_prepare: our tail store is ordered before this
     * load, the consumer's flag store before its last look at the tail. */
    atomic_thread_fence(memory_order_seq_cst);
    _Atomic uint32_t *waiting = pcore_ring_word(&p->ctl->consumer_waiting);
    if (atomic_load_explicit(waiting, memory_order_relaxed) == 0)
        return 0;
    /* Take the announcement back: the one write below wakes the consumer, and the publishes
     * that follow before it is up again must not each pay a system call. The plain load
     * first keeps the word's cache line shared while nobody sleeps. */
    if (atomic_exchange_explicit(waiting, 0, memory_order_relaxed) == 0)
        return 0;
    /* Eight bytes holding 1: what an eventfd requires, and fine for a pipe. */
    const uint64_t one = 1;
    ssize_t n;
    if (sigpipe_ignored)
        do
            n = write(notify_fd, &one, sizeof one);
        while (n < 0 && errno == EINTR);
    else
        n = write_no_sigpipe(notify_fd, &one);
    if (n == (ssize_t) sizeof one)
        return 1;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 1; /* saturated counter or full pipe: a wake-up is pending anyway */
    if (n < 0 && errno == EPIPE)
        return PAGED_E_DISCONNECTED; /* the pipe's reader, our consumer, is gone */
    if (n >= 0)
        errno = EIO;
    return PAGED_E_SYSTEM;
}

/* Writes notify_fd when the consumer has announced it may sleep, never raising SIGPIPE. */
int pcore_wake_notify(struct pcore_ring_prod *p, int notify_fd)
{
    return notify(p, notify_fd, 0);
}

/* The same for a process that ignores SIGPIPE: one system call instead of three. */
int pcore_wake_notify_sigpipe_ignored(struct pcore_ring_prod *p, int notify_fd)
{
    return notify(p, notify_fd, 1);
}

/* Announces that the consumer may sleep. */
void pcore_wake_prepare(struct pcore_ring_cons *c)
{
    atomic_store_explicit(pcore_ring_word(&c->ctl->consumer_waiting), 1, memory_order_relaxed);
    /* Pairs with the fence in pcore_wake_notify; see there. */
    atomic_thread_fence(memory_order_seq_cst);
}

/* Withdraws the announcement. */
void pcore_wake_cancel(struct pcore_ring_cons *c)
{
    /* Relaxed is enough: a producer that still sees the old 1 only writes a spare wake-up. */
    atomic_store_explicit(pcore_ring_word(&c->ctl->consumer_waiting), 0, memory_order_relaxed);
}

/* Empties the wait side of a wake-up descriptor. */
int pcore_wake_drain(int wait_fd)
{
    /* An eventfd hands over its whole counter in one 8-byte read; a pipe, up to the buffer. */
    uint64_t buf[64];
    int drained = 0;
    for (int i = 0; i < DRAIN_MAX_READS; i++) {
        ssize_t n = read(wait_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return drained;
        if (n < 0)
            return PAGED_E_SYSTEM;
        if (n == 0)
            return drained; /* a pipe whose write end is gone: nothing more will come */
        drained = 1;
        if ((size_t) n < sizeof buf)
            return drained;
    }
    return drained;
}

/* Withdraws the announcement and drains the descriptor. */
int pcore_wake_finish(struct pcore_ring_cons *c, int wait_fd)
{
    pcore_wake_cancel(c);
    int err = pcore_wake_drain(wait_fd);
    return err < 0 ? err : PAGED_OK;
}

/* Blocks in poll() until wait_fd is readable or the timeout passes. */
int pcore_wake_sleep(int wait_fd, int timeout_ms)
{
    uint64_t deadline = timeout_ms >= 0 ? pcore_now_ns() + (uint64_t) timeout_ms * 1000000u : 0;
    int left = timeout_ms;
    for (;;) {
        struct pollfd pfd = { .fd = wait_fd, .events = POLLIN };
        int n = poll(&pfd, 1, timeout_ms >= 0 ? left : -1);
        if (n > 0) {
            if (pfd.revents & POLLNVAL) {
                errno = EBADF;
                return PAGED_E_SYSTEM;
            }
            /* A pipe whose every writer is gone hangs up once it is empty: the peer
             * will never notify again. Pending data is reported first. */
            if ((pfd.revents & (POLLIN | POLLHUP)) == POLLHUP)
                return PAGED_E_DISCONNECTED;
            return 1;
        }
        if (n == 0)
            return PAGED_E_TIMEOUT;
        if (errno != EINTR)
            return PAGED_E_SYSTEM;
        if (timeout_ms >= 0) {
            left = ms_left(deadline);
            if (left == 0)
                return PAGED_E_TIMEOUT;
        }
    }
}

/*
 * Spins on ready(arg) for up to budget_ns. Returns what ready returned when it became
 * nonzero, or 0 when the budget ran out first.
 */
static int spin_for(uint32_t budget_ns, pcore_wake_ready_fn *ready, void *arg)
{
    uint64_t start = pcore_now_ns();
    /* The iteration cap bounds the loop even if the clock stood still; a pause instruction
     * takes at least a few nanoseconds on every CPU we run on. */
    for (uint64_t i = 1; i <= budget_ns; i++) {
        pcore_cpu_relax();
        int r = ready(arg);
        if (r != 0)
            return r;
        if (i % SPIN_CLOCK_EVERY == 0 && pcore_now_ns() - start >= budget_ns)
            break;
    }
    return 0;
}

/* Waits as the consumer of c until ready(arg) is nonzero or the timeout passes. */
int pcore_wake_wait(struct pcore_ring_cons *c, int wait_fd, struct pcore_waiter *w,
                    int timeout_ms, pcore_wake_ready_fn *ready, void *arg)
{
    int r = ready(arg);
    if (r != 0)
        return r;
    if (timeout_ms == 0)
        return PAGED_E_TIMEOUT;
    uint64_t start = pcore_now_ns();
    uint64_t deadline = timeout_ms > 0 ? start + (uint64_t) timeout_ms * 1000000u : UINT64_MAX;

    if (w != NULL && w->spin_ns > 0) {
        uint64_t budget = w->spin_ns;
        if (budget > deadline - start)
            budget = deadline - start;
        r = spin_for((uint32_t) budget, ready, arg);
        if (r != 0) {
            pcore_waiter_hit(w);
            return r;
        }
    }

    int slept = 0;
    for (;;) {
        pcore_wake_prepare(c);
        r = ready(arg);
        if (r != 0) {
            pcore_wake_cancel(c);
            break;
        }
        int left = -1;
        if (timeout_ms > 0) {
            left = ms_left(deadline);
            if (left == 0) {
                pcore_wake_cancel(c);
                r = PAGED_E_TIMEOUT;
                break;
            }
        }
        int s = pcore_wake_sleep(wait_fd, left);
        int f = pcore_wake_finish(c, wait_fd);
        slept = 1;
        if (w != NULL)
            w->sleeps++;
        if (s == PAGED_E_DISCONNECTED) {
            /* The notifier is gone, but what it published before it went still counts. */
            r = ready(arg);
            if (r == 0)
                r = s;
            break;
        }
        if (s < 0 && s != PAGED_E_TIMEOUT) {
            r = s;
            break;
        }
        if (f < 0) {
            r = f;
            break;
        }
        /* Loop: the wake-up may be stale (left from an earlier round) or the deadline may
         * have passed; the next check of ready and of the clock tells. */
    }
    if (slept && w != NULL)
        pcore_waiter_slept(w, pcore_now_ns() - start);
    return r;
}

/* Returns the ready count of the ring passed as arg, the condition of pcore_wake_wait_ring. */
static int ring_ready(void *arg)
{
    return pcore_ring_cons_available(arg, 1);
}

/* Waits until ring c holds at least one entry. */
int pcore_wake_wait_ring(struct pcore_ring_cons *c, int wait_fd, struct pcore_waiter *w,
                         int timeout_ms)
{
    return pcore_wake_wait(c, wait_fd, w, timeout_ms, ring_ready, c);
}
