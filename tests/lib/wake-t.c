/* wake-t.c: tests of the ring wake-ups: no system call when nobody sleeps, real wake-ups, timeouts. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/ring.h"
#include "lib/core/wake.h"
#include "tests/tap/basic.h"

#define CAP 8
#define ESIZE 16
/* Upper bound on any wait in this test; reaching it is a failure, never a hang. */
#define LONG_MS 10000

/* A ring in a shared anonymous mapping (so a forked child shares it) and its wake-up. */
struct wring {
    struct pcore_ring_ctl *ctl;
    unsigned char *entries;
    struct pcore_ring_prod prod;
    struct pcore_ring_cons cons;
    int wait_fd;
    int notify_fd;
    const char *kind;
};

/* Returns CLOCK_MONOTONIC in milliseconds. */
static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Sets up a ring with an eventfd (pipe == 0) or a pipe wake-up; bails on failure. */
static void wring_open(struct wring *w, int pipe)
{
    void *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        sysbail("mmap");
    w->ctl = mem;
    w->entries = (unsigned char *) mem + sizeof(struct pcore_ring_ctl);
    pcore_ring_ctl_init(w->ctl, UINT32_MAX - 2);
    if (pcore_ring_prod_init(&w->prod, w->ctl, w->entries, CAP, ESIZE) < 0
        || pcore_ring_cons_init(&w->cons, w->ctl, w->entries, CAP, ESIZE) < 0)
        bail("cannot attach to a fresh ring");
    int err;
    if (pipe) {
        err = pcore_wake_pipe(&w->wait_fd, &w->notify_fd);
        w->kind = "pipe";
    } else {
        err = pcore_wake_eventfd(&w->wait_fd);
        w->notify_fd = w->wait_fd;
        w->kind = "eventfd";
    }
    if (err < 0)
        sysbail("cannot make a %s wake-up", pipe ? "pipe" : "eventfd");
}

/* Releases what wring_open set up; a notify end already closed is passed as -1. */
static void wring_close(struct wring *w)
{
    if (w->notify_fd >= 0 && w->notify_fd != w->wait_fd)
        close(w->notify_fd);
    close(w->wait_fd);
    munmap(w->ctl, 4096);
}

/* Returns the consumer_waiting word as the other side would read it. */
static uint32_t waiting(struct wring *w)
{
    return atomic_load_explicit(pcore_ring_word(&w->ctl->consumer_waiting), memory_order_seq_cst);
}

/* Pushes one entry holding value; bails if the ring refuses. */
static void push(struct wring *w, uint64_t value)
{
    unsigned char e[ESIZE];
    memset(e, 0x5a, sizeof e);
    memcpy(e, &value, sizeof value);
    if (pcore_ring_prod_push(&w->prod, e) != PAGED_OK)
        bail("push refused");
}

/* Returns whether fd has nothing to read (a non-blocking read fails with EAGAIN). */
static int fd_empty(int fd)
{
    uint64_t v;
    ssize_t n = read(fd, &v, sizeof v);
    return n < 0 && errno == EAGAIN;
}

/* Checks the descriptors come back non-blocking and close-on-exec. */
static void test_fds(void)
{
    int fd, rd, wr;
    is_int(PAGED_OK, pcore_wake_eventfd(&fd), "eventfd: created");
    ok((fcntl(fd, F_GETFL) & O_NONBLOCK) && (fcntl(fd, F_GETFD) & FD_CLOEXEC),
       "eventfd: non-blocking and close-on-exec");
    is_int(PAGED_OK, pcore_wake_pipe(&rd, &wr), "pipe: created");
    ok((fcntl(rd, F_GETFL) & O_NONBLOCK) && (fcntl(wr, F_GETFL) & O_NONBLOCK)
           && (fcntl(rd, F_GETFD) & FD_CLOEXEC) && (fcntl(wr, F_GETFD) & FD_CLOEXEC),
       "pipe: both ends non-blocking and close-on-exec");
    close(fd);
    close(rd);
    close(wr);
}

/* Checks notify writes only when the consumer announced it may sleep, and the pieces of a sleep. */
static void test_notify(int pipe)
{
    struct wring w;
    wring_open(&w, pipe);
    int calls = 0;
    for (int i = 0; i < 1000; i++) {
        push(&w, (uint64_t) i + 1);
        calls += pcore_wake_notify(&w.prod, w.notify_fd);
        unsigned char e[ESIZE];
        pcore_ring_cons_pop(&w.cons, e);
    }
    ok(calls == 0 && fd_empty(w.wait_fd),
       "%s: 1000 notifies with nobody waiting wrote nothing (descriptor empty)", w.kind);

    pcore_wake_prepare(&w.cons);
    is_int(1, waiting(&w), "%s: prepare sets consumer_waiting", w.kind);
    push(&w, 7);
    is_int(1, pcore_wake_notify(&w.prod, w.notify_fd), "%s: notify with a waiter writes", w.kind);
    is_int(0, waiting(&w), "%s: ... and takes the announcement back", w.kind);
    push(&w, 8);
    is_int(0, pcore_wake_notify(&w.prod, w.notify_fd),
           "%s: a second notify before the next prepare writes nothing", w.kind);
    is_int(1, pcore_wake_drain(w.wait_fd), "%s: the one wake-up is pending", w.kind);
    pcore_wake_prepare(&w.cons);
    is_int(1, pcore_wake_notify(&w.prod, w.notify_fd), "%s: after a new prepare, notify writes again", w.kind);
    is_int(PAGED_OK, pcore_wake_finish(&w.cons, w.wait_fd), "%s: finish succeeds", w.kind);
    ok(waiting(&w) == 0 && fd_empty(w.wait_fd), "%s: finish clears the flag and drains", w.kind);
    is_int(0, pcore_wake_drain(w.wait_fd), "%s: drain of an empty descriptor reports 0", w.kind);
    is_int(0, pcore_wake_notify(&w.prod, w.notify_fd), "%s: after finish, notify writes nothing", w.kind);
    pcore_wake_prepare(&w.cons);
    pcore_wake_cancel(&w.cons);
    ok(waiting(&w) == 0 && pcore_wake_notify(&w.prod, w.notify_fd) == 0,
       "%s: cancel withdraws the announcement", w.kind);
    wring_close(&w);
}

/* Checks sleeps and waits on an empty ring time out with PAGED_E_TIMEOUT after the time asked. */
static void test_timeouts(int pipe)
{
    struct wring w;
    struct pcore_waiter wt;
    wring_open(&w, pipe);
    double t0 = now_ms();
    is_int(PAGED_E_TIMEOUT, pcore_wake_sleep(w.wait_fd, 30), "%s: sleep on nothing times out", w.kind);
    double el = now_ms() - t0;
    ok(el >= 29.0, "%s: ... after at least 30 ms (%.1f)", w.kind, el);

    pcore_waiter_init(&wt, 20000);
    t0 = now_ms();
    is_int(PAGED_E_TIMEOUT, pcore_wake_wait_ring(&w.cons, w.wait_fd, &wt, 0),
           "%s: wait with timeout 0 on an empty ring times out", w.kind);
    ok(now_ms() - t0 < 1000 && wt.sleeps == 0 && waiting(&w) == 0,
       "%s: ... at once, without sleeping or announcing", w.kind);

    t0 = now_ms();
    is_int(PAGED_E_TIMEOUT, pcore_wake_wait_ring(&w.cons, w.wait_fd, &wt, 25),
           "%s: wait of 25 ms on an empty ring times out", w.kind);
    el = now_ms() - t0;
    ok(el >= 24.0 && wt.sleeps >= 1 && waiting(&w) == 0,
       "%s: ... after %.1f ms, having slept, flag cleared", w.kind, el);
    ok(wt.spin_ns < 20000 && wt.spin_ns >= 20000 / 8, "%s: sleeping shrank the spin budget to %u ns",
       w.kind, wt.spin_ns);

    push(&w, 9);
    uint64_t sleeps = wt.sleeps;
    is_int(1, pcore_wake_wait_ring(&w.cons, w.wait_fd, &wt, LONG_MS), "%s: wait on a ready ring returns 1", w.kind);
    ok(wt.sleeps == sleeps && waiting(&w) == 0 && fd_empty(w.wait_fd),
       "%s: ... without sleeping or announcing", w.kind);
    wring_close(&w);
}

/* Checks how a sleep adapts the budget: waits the ceiling covers are learnt, longer ones
 * halve it down to its floor, and a budget at the floor comes back up. */
static void test_spin_learning(void)
{
    struct pcore_waiter wt;
    pcore_waiter_init(&wt, 300000);
    pcore_waiter_slept(&wt, 2000000);
    is_int(150000, wt.spin_ns, "learn: a 2 ms wait halves a 300 us budget");
    for (int i = 0; i < 10; i++)
        pcore_waiter_slept(&wt, 2000000);
    is_int(300000 / 8, wt.spin_ns, "learn: ... down to an eighth of the ceiling, no further");
    pcore_waiter_slept(&wt, 60000);
    ok(wt.spin_ns >= 60000 && wt.spin_ns <= 80000,
       "learn: a 60 us wait that slept lifts the budget from the floor to cover it (%u ns)", wt.spin_ns);
    pcore_waiter_slept(&wt, 290000);
    is_int(300000, wt.spin_ns, "learn: a wait just under the ceiling takes the budget to the ceiling, not past");
    pcore_waiter_slept(&wt, 300001);
    is_int(150000, wt.spin_ns, "learn: a wait just over the ceiling halves it");
    uint64_t hits = wt.spin_hits;
    pcore_waiter_hit(&wt);
    ok(wt.spin_hits == hits + 1 && wt.spin_ns == 150000 + 150000 / 4 + 1000,
       "learn: a hit is counted and grows the budget by a quarter and 1 us (%u ns)", wt.spin_ns);

    struct pcore_waiter none;
    pcore_waiter_init(&none, 0);
    pcore_waiter_slept(&none, 0);
    pcore_waiter_slept(&none, 5000);
    is_int(0, none.spin_ns, "learn: a waiter that never spins keeps a zero budget");
}

/* A condition that becomes true on its n-th call; counts calls. */
struct countdown {
    int calls;
    int fire_at;
    int value;
};

/* Returns cd->value on the fire_at-th call and 0 before. */
static int countdown_ready(void *arg)
{
    struct countdown *cd = arg;
    return ++cd->calls >= cd->fire_at ? cd->value : 0;
}

/* Checks the adaptive spin: hits grow the budget, conditions' results pass through. */
static void test_spin(void)
{
    struct wring w;
    struct pcore_waiter wt;
    wring_open(&w, 0);
    pcore_waiter_init(&wt, 40000);
    wt.spin_ns = 10000;
    struct countdown cd = { 0, 5, 3 };
    is_int(3, pcore_wake_wait(&w.cons, w.wait_fd, &wt, LONG_MS, countdown_ready, &cd),
           "spin: condition true on its 5th check: its value is returned");
    ok(wt.spin_hits == 1 && wt.sleeps == 0 && waiting(&w) == 0 && cd.calls == 5,
       "spin: satisfied while spinning, no sleep, no announcement");
    ok(wt.spin_ns > 10000 && wt.spin_ns <= 40000, "spin: a hit grew the budget to %u ns", wt.spin_ns);
    for (int i = 0; i < 100; i++) {
        cd = (struct countdown) { 0, 2, 1 };
        pcore_wake_wait(&w.cons, w.wait_fd, &wt, LONG_MS, countdown_ready, &cd);
    }
    is_int(40000, wt.spin_ns, "spin: the budget never passes its ceiling");

    cd = (struct countdown) { 0, 3, PAGED_E_RING };
    is_int(PAGED_E_RING, pcore_wake_wait(&w.cons, w.wait_fd, &wt, LONG_MS, countdown_ready, &cd),
           "spin: a condition's error is returned");
    cd = (struct countdown) { 0, 1000000000, 1 };
    is_int(PAGED_E_TIMEOUT, pcore_wake_wait(&w.cons, w.wait_fd, &wt, 0, countdown_ready, &cd),
           "spin: timeout 0 checks once");
    is_int(1, cd.calls, "spin: ... exactly once");

    struct pcore_waiter none;
    pcore_waiter_init(&none, 0);
    cd = (struct countdown) { 0, 1000000000, 1 };
    is_int(PAGED_E_TIMEOUT, pcore_wake_wait(&w.cons, w.wait_fd, &none, 5, countdown_ready, &cd),
           "spin: a waiter with no spin budget times out");
    ok(none.spin_hits == 0 && none.sleeps >= 1 && cd.calls <= 2 + 2 * (int) none.sleeps,
       "spin: ... having slept at once, checking only around each sleep (%d checks)", cd.calls);
    wring_close(&w);
}

/* What a waiting thread does and what it saw. */
struct sleeper {
    struct wring *w;
    int sleep_only;       /* 1: pcore_wake_sleep for timeout_ms; 0: pcore_wake_wait_ring */
    int timeout_ms;
    _Atomic long tid;
    int result;
    double elapsed_ms;
    struct pcore_waiter waiter;
};

/* Runs one wait in a thread; returns NULL. */
static void *sleeper_main(void *arg)
{
    struct sleeper *s = arg;
    atomic_store(&s->tid, (long) syscall(SYS_gettid));
    pcore_waiter_init(&s->waiter, 0); /* no spin: go to sleep at once */
    double t0 = now_ms();
    if (s->sleep_only)
        s->result = pcore_wake_sleep(s->w->wait_fd, s->timeout_ms);
    else
        s->result = pcore_wake_wait_ring(&s->w->cons, s->w->wait_fd, &s->waiter, s->timeout_ms);
    s->elapsed_ms = now_ms() - t0;
    return NULL;
}

/* Returns the scheduler state letter in the stat file at path, or '?'. */
static char stat_state(const char *path)
{
    char buf[512];
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' ? p[2] : '?';
}

/* Returns the scheduler state letter of thread tid of this process, or '?'. */
static char thread_state(long tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
    return stat_state(path);
}

/* Returns the scheduler state letter of process pid, or '?'. */
static char process_state(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long) pid);
    return stat_state(path);
}

/* Waits, up to LONG_MS, until the sleeper is blocked in the kernel; returns whether it was seen so. */
static int await_asleep(struct sleeper *s)
{
    double deadline = now_ms() + LONG_MS;
    while (now_ms() < deadline) {
        long tid = atomic_load(&s->tid);
        if (tid != 0 && (s->sleep_only || waiting(s->w)) && thread_state(tid) == 'S')
            return 1;
        sched_yield();
    }
    return 0;
}

static volatile sig_atomic_t signals_seen;

/* Counts SIGUSR1 deliveries; returns nothing. */
static void on_usr1(int sig)
{
    (void) sig;
    signals_seen++;
}

/* Checks a thread asleep on the ring is woken by notify, also after a signal hit its poll. */
static void test_thread_wake(int pipe, int with_signal)
{
    struct wring w;
    wring_open(&w, pipe);
    struct sleeper s = { .w = &w, .timeout_ms = LONG_MS };
    pthread_t th;
    if (pthread_create(&th, NULL, sleeper_main, &s) != 0)
        bail("pthread_create");
    ok(await_asleep(&s), "%s%s: waiter seen asleep in poll", w.kind, with_signal ? " + signal" : "");
    if (with_signal) {
        pthread_kill(th, SIGUSR1);
        double deadline = now_ms() + LONG_MS;
        while (signals_seen == 0 && now_ms() < deadline)
            sched_yield();
        ok(signals_seen > 0 && await_asleep(&s), "%s + signal: signal delivered, waiter asleep again", w.kind);
        signals_seen = 0;
    }
    push(&w, 42);
    is_int(1, pcore_wake_notify(&w.prod, w.notify_fd), "%s%s: notify saw the waiter and wrote", w.kind,
           with_signal ? " + signal" : "");
    pthread_join(th, NULL);
    ok(s.result == 1 && s.waiter.sleeps >= 1 && s.elapsed_ms < LONG_MS,
       "%s%s: waiter woke with 1 entry after %.2f ms (result %d)", w.kind,
       with_signal ? " + signal" : "", s.elapsed_ms, s.result);
    ok(waiting(&w) == 0 && fd_empty(w.wait_fd), "%s%s: flag cleared and descriptor drained", w.kind,
       with_signal ? " + signal" : "");
    wring_close(&w);
}

/* Checks a signal in the middle of pcore_wake_sleep neither ends it early nor errs. */
static void test_sleep_eintr(void)
{
    struct wring w;
    wring_open(&w, 0);
    struct sleeper s = { .w = &w, .sleep_only = 1, .timeout_ms = 150 };
    pthread_t th;
    if (pthread_create(&th, NULL, sleeper_main, &s) != 0)
        bail("pthread_create");
    int asleep = await_asleep(&s);
    pthread_kill(th, SIGUSR1);
    pthread_join(th, NULL);
    ok(asleep && s.result == PAGED_E_TIMEOUT && s.elapsed_ms >= 149.0,
       "eventfd + signal: a 150 ms sleep interrupted by a signal still times out after %.1f ms",
       s.elapsed_ms);
    signals_seen = 0;
    wring_close(&w);
}

/* Checks a forked child asleep on the ring is woken by the parent's notify. */
static void test_process_wake(int pipe)
{
    struct wring w;
    wring_open(&w, pipe);
    pid_t pid = bfork();
    if (pid == 0) {
        struct pcore_waiter wt;
        pcore_waiter_init(&wt, 0);
        int n = pcore_wake_wait_ring(&w.cons, w.wait_fd, &wt, LONG_MS);
        unsigned char e[ESIZE];
        uint64_t v = 0;
        if (n == 1 && pcore_ring_cons_pop(&w.cons, e) == 1)
            memcpy(&v, e, sizeof v);
        _exit(n != 1 ? 1 : v != 0x1234 ? 2 : wt.sleeps == 0 ? 3 : 0);
    }
    /* Announced and blocked: past its last look at the ring, so only notify can wake it. */
    double deadline = now_ms() + LONG_MS;
    while ((waiting(&w) == 0 || process_state(pid) != 'S') && now_ms() < deadline)
        sched_yield();
    ok(waiting(&w) == 1 && process_state(pid) == 'S',
       "%s, two processes: child announced it sleeps and is asleep", w.kind);
    push(&w, 0x1234);
    is_int(1, pcore_wake_notify(&w.prod, w.notify_fd), "%s, two processes: notify wrote", w.kind);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "%s, two processes: child woke with the entry after sleeping (status %d)", w.kind,
       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    wring_close(&w);
}

/* Checks a pipe whose notify end is gone ends a wait with PAGED_E_DISCONNECTED, after what is left. */
static void test_hangup(void)
{
    struct wring w;
    struct pcore_waiter wt;
    wring_open(&w, 1);
    pcore_waiter_init(&wt, 1000);
    push(&w, 1);
    pcore_wake_prepare(&w.cons);
    pcore_wake_notify(&w.prod, w.notify_fd);
    pcore_wake_cancel(&w.cons);
    close(w.notify_fd);
    w.notify_fd = -1;
    is_int(1, pcore_wake_wait_ring(&w.cons, w.wait_fd, &wt, LONG_MS),
           "pipe hang-up: an entry published before the hang-up is still delivered");
    unsigned char e[ESIZE];
    pcore_ring_cons_pop(&w.cons, e);
    double t0 = now_ms();
    is_int(PAGED_E_DISCONNECTED, pcore_wake_wait_ring(&w.cons, w.wait_fd, &wt, LONG_MS),
           "pipe hang-up: then waiting reports PAGED_E_DISCONNECTED");
    ok(now_ms() - t0 < LONG_MS / 2, "pipe hang-up: ... promptly");
    wring_close(&w);
}

static volatile sig_atomic_t sigpipes_seen;

/* Counts SIGPIPE deliveries; returns nothing. */
static void on_pipe(int sig)
{
    (void) sig;
    sigpipes_seen++;
}

/* Checks notifying a pipe nobody reads reports PAGED_E_DISCONNECTED and raises no SIGPIPE. */
static void test_reader_gone(void)
{
    struct wring w;
    wring_open(&w, 1);
    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_pipe;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, &old_sa);
    sigset_t before, after, pending;
    pthread_sigmask(SIG_SETMASK, NULL, &before);

    pcore_wake_prepare(&w.cons); /* the consumer said it would sleep, then died */
    close(w.wait_fd);
    push(&w, 5);
    is_int(PAGED_E_DISCONNECTED, pcore_wake_notify(&w.prod, w.notify_fd),
           "pipe, reader gone: notify reports PAGED_E_DISCONNECTED");
    pthread_sigmask(SIG_SETMASK, NULL, &after);
    sigpending(&pending);
    ok(sigpipes_seen == 0 && !sigismember(&pending, SIGPIPE),
       "pipe, reader gone: no SIGPIPE delivered or left pending");
    ok(sigismember(&before, SIGPIPE) == sigismember(&after, SIGPIPE),
       "pipe, reader gone: the signal mask is as it was");
    sigaction(SIGPIPE, &old_sa, NULL);
    close(w.notify_fd);
    munmap(w.ctl, 4096);
}

/* Checks the daemon's variant (SIGPIPE ignored): it writes only when the consumer announced
 * a sleep, the wake-up arrives, and a pipe nobody reads reports PAGED_E_DISCONNECTED. */
static void test_notify_sigpipe_ignored(int pipe)
{
    struct wring w;
    wring_open(&w, pipe);
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    push(&w, 1);
    is_int(0, pcore_wake_notify_sigpipe_ignored(&w.prod, w.notify_fd),
           "%s, SIGPIPE ignored: notify with nobody waiting writes nothing", w.kind);
    ok(fd_empty(w.wait_fd), "%s, SIGPIPE ignored: ... the descriptor stays empty", w.kind);
    pcore_wake_prepare(&w.cons);
    push(&w, 2);
    is_int(1, pcore_wake_notify_sigpipe_ignored(&w.prod, w.notify_fd),
           "%s, SIGPIPE ignored: notify with a waiter writes", w.kind);
    ok(waiting(&w) == 0 && pcore_wake_drain(w.wait_fd) == 1,
       "%s, SIGPIPE ignored: ... takes the announcement back, and the wake-up is pending", w.kind);
    if (pipe) {
        pcore_wake_prepare(&w.cons);
        close(w.wait_fd);
        w.wait_fd = -1;
        push(&w, 3);
        is_int(PAGED_E_DISCONNECTED, pcore_wake_notify_sigpipe_ignored(&w.prod, w.notify_fd),
               "pipe, SIGPIPE ignored, reader gone: notify reports PAGED_E_DISCONNECTED");
        close(w.notify_fd);
        munmap(w.ctl, 4096);
    } else
        wring_close(&w);
    signal(SIGPIPE, old);
}

/*
 * Checks what the daemon relies on to never read a client's eventfd: under edge-triggered
 * epoll, every write to an undrained eventfd is a new event.
 */
static void test_epoll_edges(void)
{
    struct wring w;
    wring_open(&w, 0);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u32 = 7 };
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, w.wait_fd, &ev) < 0)
        sysbail("epoll");
    int edges = 0, quiet = 1;
    for (int i = 0; i < 50; i++) {
        pcore_wake_prepare(&w.cons);
        push(&w, (uint64_t) i + 1);
        pcore_wake_notify(&w.prod, w.notify_fd);
        pcore_wake_cancel(&w.cons);
        unsigned char e[ESIZE];
        pcore_ring_cons_pop(&w.cons, e);
        struct epoll_event got;
        edges += epoll_wait(ep, &got, 1, LONG_MS) == 1 && got.data.u32 == 7;
        quiet &= epoll_wait(ep, &got, 1, 0) == 0;
    }
    ok(edges == 50 && quiet, "epoll ET: 50 notifies of an undrained eventfd gave 50 events, no extra");
    close(ep);
    wring_close(&w);
}

/* Runs the wake-up tests; returns 0 (the TAP library reports failures). */
int main(void)
{
    plan_lazy();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1; /* no SA_RESTART: poll must see EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);

    test_fds();
    for (int pipe = 0; pipe <= 1; pipe++) {
        test_notify(pipe);
        test_notify_sigpipe_ignored(pipe);
        test_timeouts(pipe);
        test_thread_wake(pipe, 0);
        test_thread_wake(pipe, 1);
        test_process_wake(pipe);
    }
    test_spin();
    test_spin_learning();
    test_sleep_eintr();
    test_hangup();
    test_epoll_edges();
    test_reader_gone();
    return 0;
}
