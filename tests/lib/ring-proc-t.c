/* ring-proc-t.c: two processes pass millions of checked entries through a ring in a sealed memfd. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "lib/core/ring.h"
#include "lib/core/shm.h"
#include "lib/core/wake.h"
#include "tests/tap/basic.h"

/*
 * The parent plays the daemon, the child a client. The child produces data entries on the
 * SQ ring of a real channel layout (woken through an eventfd); the parent consumes and
 * checks them, and answers on the CQ ring with cumulative acks (woken through a pipe whose
 * write end only the parent holds). Both wake-up kinds are thus exercised. The child sleeps
 * on the CQ when the SQ is full, the parent on the SQ when it is empty.
 *
 * Phase 1 (PING entries) is a strict ping-pong with no spinning, so both sides go through
 * the sleep path on nearly every entry. Phase 2 (BULK entries) streams in random batches
 * with the adaptive spin. Waits are sliced (SLICE_MS) and between slices each side checks
 * that its peer lives; a phase that overruns PHASE_S seconds fails.
 */

#define SQ_ENTRIES 512u
#define CQ_ENTRIES 1024u
#define PING 2000u
#define BULK 10000000u
#define BATCH_MAX 64u
#define SLICE_MS 100
#define PHASE_S 60.0
#define START (UINT32_MAX - 777u) /* both rings' indices wrap early in phase 1 */

/* A data entry: exactly an SQE's size, a sequence number, payload and a checksum. */
struct data {
    uint64_t seq;
    uint64_t word[14];
    uint64_t check; /* XXH3-64 of everything before it */
};
_Static_assert(sizeof(struct data) == sizeof(struct pcore_sqe), "data entries fill SQ slots");

/* Why a side stopped, beyond the paged_error codes. */
#define PEER_GONE (-1000)
#define BAD_DATA (-1001)
#define BAD_ACK (-1002)

/* What the child leaves in the host arena for the parent to report. */
struct report {
    int32_t status;         /* 0, or what went wrong */
    uint32_t pad;
    uint64_t ping_sleeps;   /* phase 1: times the child slept waiting for an ack */
    uint64_t bulk_sleeps;   /* phase 2: times it slept on a full SQ */
    uint64_t bulk_spin_hits;
    uint64_t notifies;      /* eventfd writes it made */
    uint64_t acks;          /* acks it read */
    char why[160];
};

/* One side's view of the channel. */
struct side {
    unsigned char *base;
    struct pcore_channel_hdr hdr; /* its own copy of the layout */
    struct pcore_ring_prod prod;  /* child: SQ; parent: CQ */
    struct pcore_ring_cons cons;  /* child: CQ; parent: SQ */
    int wait_fd;                  /* child: CQ pipe read end; parent: SQ eventfd */
    int notify_fd;                /* child: SQ eventfd; parent: CQ pipe write end */
    struct pcore_waiter waiter;
    uint64_t seed;
    pid_t peer;                   /* child: the parent's pid; parent: the child's */
    int peer_status;              /* parent: the child's wait status once reaped */
    int reaped;
    uint64_t sent;                /* child: entries published */
    uint64_t acked;               /* child: highest cumulative ack seen */
    uint64_t notifies;
    uint64_t acks;
    char why[160];
};

/* Returns CLOCK_MONOTONIC in seconds. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Returns a payload word for (seed, seq, j): splitmix64 of their mix, never constant. */
static uint64_t payload(uint64_t seed, uint64_t seq, unsigned j)
{
    uint64_t x = seed ^ (seq * 0x9e3779b97f4a7c15u) ^ ((uint64_t) j << 56);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* Fills a data entry for seq in place; returns nothing. */
static void fill(struct data *d, uint64_t seed, uint64_t seq)
{
    d->seq = seq;
    for (unsigned j = 0; j < 14; j++)
        d->word[j] = payload(seed, seq, j);
    d->check = XXH3_64bits(d, offsetof(struct data, check));
}

/* Returns whether the peer is still there; the parent reaps a dead child here. */
static int peer_alive(struct side *s, int is_parent)
{
    if (!is_parent)
        return getppid() == s->peer;
    if (s->reaped)
        return 0;
    pid_t r = waitpid(s->peer, &s->peer_status, WNOHANG);
    if (r == s->peer) {
        s->reaped = 1;
        return 0;
    }
    return 1;
}

/*
 * Waits as the consumer of s->cons until ready(s) is nonzero, in slices, checking the peer
 * between them. Returns ready's value, PEER_GONE, PAGED_E_TIMEOUT at the phase deadline,
 * or another negative error.
 */
static int side_wait(struct side *s, int is_parent, double deadline, pcore_wake_ready_fn *ready)
{
    for (;;) {
        int r = pcore_wake_wait(&s->cons, s->wait_fd, &s->waiter, SLICE_MS, ready, s);
        if (r == PAGED_E_DISCONNECTED)
            return PEER_GONE;
        if (r != PAGED_E_TIMEOUT)
            return r;
        if (!peer_alive(s, is_parent))
            return PEER_GONE;
        if (now_s() > deadline)
            return PAGED_E_TIMEOUT;
    }
}

/* Child's condition: acks arrived (positive), or room on the SQ. */
static int child_ready(void *arg)
{
    struct side *s = arg;
    int a = pcore_ring_cons_available(&s->cons, 1);
    if (a != 0)
        return a;
    return pcore_ring_prod_space(&s->prod, 1);
}

/* Child's condition in phase 1: an ack arrived. */
static int child_ack_ready(void *arg)
{
    struct side *s = arg;
    return pcore_ring_cons_available(&s->cons, 1);
}

/* Parent's condition: data arrived. */
static int parent_ready(void *arg)
{
    struct side *s = arg;
    return pcore_ring_cons_available(&s->cons, 1);
}

/* Child: reads every ack on the CQ, checking they only grow and never pass what was sent.
 * Returns 0 or BAD_ACK / PAGED_E_RING. */
static int child_read_acks(struct side *s)
{
    struct pcore_cqe cqe;
    int r;
    while ((r = pcore_ring_cons_pop(&s->cons, &cqe)) == 1) {
        s->acks++;
        if (cqe.tag < s->acked || cqe.tag > s->sent || cqe.opcode != PAGED_OP_NOP
            || cqe.status != PAGED_OK) {
            snprintf(s->why, sizeof s->why, "ack %llu (opcode %u) after %llu with %llu sent",
                     (unsigned long long) cqe.tag, cqe.opcode, (unsigned long long) s->acked,
                     (unsigned long long) s->sent);
            return BAD_ACK;
        }
        s->acked = cqe.tag;
    }
    return r;
}

/* Child: publishes n entries from s->sent in one batch and notifies; returns 0 or an error. */
static int child_publish(struct side *s, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        fill(pcore_ring_prod_slot(&s->prod, i), s->seed, s->sent + i);
    int err = pcore_ring_prod_publish(&s->prod, n);
    if (err < 0)
        return err;
    s->sent += n;
    int w = pcore_wake_notify(&s->prod, s->notify_fd);
    if (w < 0)
        return w;
    s->notifies += (uint64_t) w;
    return 0;
}

/* Child, phase 1: one entry at a time, each waiting for its ack. Returns 0 or an error. */
static int child_ping(struct side *s)
{
    double deadline = now_s() + PHASE_S;
    pcore_waiter_init(&s->waiter, 0);
    for (uint32_t i = 0; i < PING; i++) {
        if (pcore_ring_prod_space(&s->prod, 1) < 1)
            return PAGED_E_RING; /* everything was acked, so the ring must have room */
        int err = child_publish(s, 1);
        while (err == 0 && s->acked < s->sent) {
            err = side_wait(s, 0, deadline, child_ack_ready);
            if (err > 0)
                err = child_read_acks(s);
        }
        if (err < 0)
            return err;
    }
    return 0;
}

/* Child, phase 2: random batches as fast as the ring allows. Returns 0 or an error. */
static int child_bulk(struct side *s)
{
    double deadline = now_s() + PHASE_S;
    tap_rng rng;
    tap_rng_seed(&rng, s->seed ^ 0x5eed);
    pcore_waiter_init(&s->waiter, PCORE_WAKE_SPIN_NS);
    uint64_t end = (uint64_t) PING + BULK;
    while (s->sent < end) {
        uint64_t left = end - s->sent;
        uint32_t want = left < BATCH_MAX ? (uint32_t) left : BATCH_MAX;
        int space = pcore_ring_prod_space(&s->prod, want);
        if (space < 0)
            return space;
        if (space == 0) {
            int r = side_wait(s, 0, deadline, child_ready);
            if (r < 0)
                return r;
        } else {
            uint32_t max = (uint32_t) space < want ? (uint32_t) space : want;
            int err = child_publish(s, 1 + (uint32_t) tap_rng_below(&rng, max));
            if (err < 0)
                return err;
        }
        int err = child_read_acks(s);
        if (err < 0)
            return err;
    }
    return 0;
}

/* Child: maps the channel on its own, checks the header, runs both phases, reports; never returns. */
static void child_main(int fd, uint64_t size, int sq_fd, int cq_rd, uint64_t seed, pid_t parent)
{
    struct side s;
    memset(&s, 0, sizeof s);
    void *base;
    int err = pcore_shm_map(fd, size, 1, &base);
    if (err < 0)
        _exit(10);
    s.base = base;
    memcpy(&s.hdr, base, sizeof s.hdr); /* copy it out before trusting it */
    if (pcore_channel_check(&s.hdr, size) < 0 || s.hdr.sq_entries != SQ_ENTRIES)
        _exit(11);
    struct report *rep = (struct report *) (s.base + s.hdr.arena_off);
    if (pcore_ring_prod_init(&s.prod, (struct pcore_ring_ctl *) (s.base + s.hdr.sq_ctl_off),
                             s.base + s.hdr.sq_off, s.hdr.sq_entries, sizeof(struct pcore_sqe)) < 0
        || pcore_ring_cons_init(&s.cons, (struct pcore_ring_ctl *) (s.base + s.hdr.cq_ctl_off),
                                s.base + s.hdr.cq_off, s.hdr.cq_entries, sizeof(struct pcore_cqe)) < 0)
        _exit(12);
    s.wait_fd = cq_rd;
    s.notify_fd = sq_fd;
    s.seed = seed;
    s.peer = parent;
    s.sent = 0;

    err = child_ping(&s);
    rep->ping_sleeps = s.waiter.sleeps;
    if (err == 0)
        err = child_bulk(&s);
    rep->bulk_sleeps = s.waiter.sleeps;
    rep->bulk_spin_hits = s.waiter.spin_hits;
    rep->notifies = s.notifies;
    rep->acks = s.acks;
    if (err < 0 && s.why[0] == '\0')
        snprintf(s.why, sizeof s.why, "child stopped with %d after %llu sent", err,
                 (unsigned long long) s.sent);
    memcpy(rep->why, s.why, sizeof rep->why);
    rep->status = err;
    _exit(err < 0 ? 1 : 0);
}

/* Parent: copies out and checks n entries, releases them, acks. Returns 0 or an error. */
static int parent_take(struct side *s, uint64_t *next, uint32_t n, int pop)
{
    struct data d;
    for (uint32_t i = 0; i < n; i++) {
        if (pop) {
            if (pcore_ring_cons_pop(&s->cons, &d) != 1)
                return PAGED_E_RING;
        } else {
            memcpy(&d, pcore_ring_cons_entry(&s->cons, i), sizeof d);
        }
        uint64_t want = XXH3_64bits(&d, offsetof(struct data, check));
        if (d.seq != *next + i || d.check != want || d.word[13] != payload(s->seed, d.seq, 13)) {
            snprintf(s->why, sizeof s->why, "entry %llu: seq %llu, checksum %s",
                     (unsigned long long) (*next + i), (unsigned long long) d.seq,
                     d.check == want ? "right" : "wrong");
            return BAD_DATA;
        }
    }
    if (!pop) {
        int err = pcore_ring_cons_release(&s->cons, n);
        if (err < 0)
            return err;
    }
    *next += n;
    /* A full CQ drops this ack: a later one carries a larger count anyway. */
    struct pcore_cqe ack = { .tag = *next, .status = PAGED_OK, .count = n,
                             .opcode = PAGED_OP_NOP, .value = *next };
    int err = pcore_ring_prod_push(&s->prod, &ack);
    if (err < 0 && err != PAGED_E_AGAIN)
        return err;
    /* Notify even without an ack: the child may be waiting for room on the SQ. */
    int w = pcore_wake_notify(&s->prod, s->notify_fd);
    if (w == PAGED_E_DISCONNECTED)
        return PEER_GONE;
    if (w < 0)
        return w;
    s->notifies += (uint64_t) w;
    return 0;
}

/* Parent: consumes entries up to end, spinning up to spin_ns. Returns 0 or an error. */
static int parent_consume(struct side *s, uint64_t *next, uint64_t end, uint32_t spin_ns, tap_rng *rng)
{
    double deadline = now_s() + PHASE_S;
    pcore_waiter_init(&s->waiter, spin_ns);
    while (*next < end) {
        int n = side_wait(s, 1, deadline, parent_ready);
        if (n < 0)
            return n;
        if ((uint64_t) n > end - *next)
            n = (int) (end - *next);
        int err = parent_take(s, next, (uint32_t) n, tap_rng_below(rng, 8) == 0);
        if (err < 0)
            return err;
    }
    return 0;
}

/* Parent: attaches to the channel it created; bails on failure. */
static void parent_attach(struct side *s)
{
    if (pcore_ring_cons_init(&s->cons, (struct pcore_ring_ctl *) (s->base + s->hdr.sq_ctl_off),
                             s->base + s->hdr.sq_off, s->hdr.sq_entries, sizeof(struct pcore_sqe)) < 0
        || pcore_ring_prod_init(&s->prod, (struct pcore_ring_ctl *) (s->base + s->hdr.cq_ctl_off),
                                s->base + s->hdr.cq_off, s->hdr.cq_entries, sizeof(struct pcore_cqe)) < 0)
        bail("cannot attach to the channel");
}

/* Parent: reaps the child if that has not happened, killing it when it must stop. */
static void reap(struct side *s, int kill_it)
{
    if (s->reaped)
        return;
    if (kill_it)
        kill(s->peer, SIGKILL);
    while (waitpid(s->peer, &s->peer_status, 0) < 0 && errno == EINTR)
        ;
    s->reaped = 1;
}

/* Makes a fresh channel in a sealed memfd with its wake-ups; bails on failure. */
static void make_channel(struct side *s, int *fd, int *sq_efd, int *cq_rd, int *cq_wr)
{
    if (pcore_channel_layout(SQ_ENTRIES, CQ_ENTRIES, sizeof(struct report), &s->hdr) < 0)
        bail("layout refused");
    *fd = pcore_shm_create("paged-ring-proc-t", s->hdr.total_size);
    if (*fd < 0)
        bail("cannot create the channel: %s", paged_strerror(*fd));
    void *base;
    if (pcore_shm_map(*fd, s->hdr.total_size, 1, &base) < 0)
        bail("cannot map the channel");
    s->base = base;
    memcpy(s->base, &s->hdr, sizeof s->hdr);
    pcore_ring_ctl_init((struct pcore_ring_ctl *) (s->base + s->hdr.sq_ctl_off), START);
    pcore_ring_ctl_init((struct pcore_ring_ctl *) (s->base + s->hdr.cq_ctl_off), START);
    if (pcore_wake_eventfd(sq_efd) < 0 || pcore_wake_pipe(cq_rd, cq_wr) < 0)
        sysbail("cannot make wake-ups");
}

/* Runs both phases against a real child and reports. */
static void test_stream(uint64_t seed)
{
    struct side s;
    memset(&s, 0, sizeof s);
    int fd, sq_efd, cq_rd, cq_wr;
    make_channel(&s, &fd, &sq_efd, &cq_rd, &cq_wr);
    s.seed = seed;
    pid_t pid = bfork();
    if (pid == 0) {
        close(cq_wr); /* so the parent's death hangs the pipe up */
        child_main(fd, s.hdr.total_size, sq_efd, cq_rd, seed, getppid());
    }
    close(cq_rd);
    s.peer = pid;
    s.wait_fd = sq_efd;
    s.notify_fd = cq_wr;
    parent_attach(&s);
    tap_rng rng;
    tap_rng_seed(&rng, seed ^ 0xc0ffee);

    uint64_t next = 0;
    int err = parent_consume(&s, &next, PING, 0, &rng);
    uint64_t ping_sleeps = s.waiter.sleeps;
    ok(err == 0 && next == PING, "ping-pong: %u entries arrived in order with good checksums (%d%s%s)",
       PING, err, s.why[0] ? ": " : "", s.why);
    double t0 = now_s();
    if (err == 0)
        err = parent_consume(&s, &next, (uint64_t) PING + BULK, PCORE_WAKE_SPIN_NS, &rng);
    double el = now_s() - t0;
    ok(err == 0 && next == (uint64_t) PING + BULK,
       "stream: %u entries in random batches, none lost, duplicated, reordered or corrupt (%d%s%s)",
       BULK, err, s.why[0] ? ": " : "", s.why);
    reap(&s, err != 0);

    const struct report *rep = (const struct report *) (s.base + s.hdr.arena_off);
    ok(WIFEXITED(s.peer_status) && WEXITSTATUS(s.peer_status) == 0 && rep->status == 0,
       "child: produced everything, every ack in order (status %d, report %d%s%s)",
       WIFEXITED(s.peer_status) ? WEXITSTATUS(s.peer_status) : -1, rep->status,
       rep->why[0] ? ": " : "", rep->why);
    ok(ping_sleeps > 0, "ping-pong: the consumer slept on an empty ring (%llu times)",
       (unsigned long long) ping_sleeps);
    ok(rep->ping_sleeps > 0, "ping-pong: the producer slept waiting on its CQ (%llu times)",
       (unsigned long long) rep->ping_sleeps);
    ok(rep->notifies > 0 && s.notifies > 0, "wake-ups written both ways (SQ %llu, CQ %llu)",
       (unsigned long long) rep->notifies, (unsigned long long) s.notifies);
    if (el > 0)
        diag("stream: %.2f M entries/s (%.3f s); consumer slept %llu, spin hits %llu; producer "
             "slept %llu, spin hits %llu; acks read %llu",
             BULK / el / 1e6, el, (unsigned long long) (s.waiter.sleeps),
             (unsigned long long) s.waiter.spin_hits,
             (unsigned long long) rep->bulk_sleeps,
             (unsigned long long) rep->bulk_spin_hits, (unsigned long long) rep->acks);
    pcore_shm_unmap(s.base, s.hdr.total_size);
    close(fd);
    close(sq_efd);
    close(cq_wr);
}

/* Checks a consumer whose producer dies finds out within a few slices instead of hanging. */
static void test_dead_peer(void)
{
    struct side s;
    memset(&s, 0, sizeof s);
    int fd, sq_efd, cq_rd, cq_wr;
    make_channel(&s, &fd, &sq_efd, &cq_rd, &cq_wr);
    pid_t pid = bfork();
    if (pid == 0)
        _exit(0); /* a client that dies before producing anything */
    close(cq_rd);
    s.peer = pid;
    s.wait_fd = sq_efd;
    s.notify_fd = cq_wr;
    parent_attach(&s);
    pcore_waiter_init(&s.waiter, PCORE_WAKE_SPIN_NS);
    double t0 = now_s();
    int r = side_wait(&s, 1, t0 + PHASE_S, parent_ready);
    double el = now_s() - t0;
    is_int(PEER_GONE, r, "dead producer: the consumer's wait reports it gone");
    ok(el < 5.0, "dead producer: ... after %.2f s, not at the phase deadline", el);
    /* Stand in for the dead consumer of the CQ, which had said it would sleep. */
    struct pcore_ring_cons cq;
    if (pcore_ring_cons_init(&cq, s.prod.ctl, s.base + s.hdr.cq_off, s.hdr.cq_entries,
                             sizeof(struct pcore_cqe)) < 0)
        bail("cannot attach to the CQ");
    pcore_wake_prepare(&cq);
    struct pcore_cqe ack = { .tag = 1 };
    pcore_ring_prod_push(&s.prod, &ack);
    is_int(PAGED_E_DISCONNECTED, pcore_wake_notify(&s.prod, s.notify_fd),
           "dead consumer: notifying its pipe reports PAGED_E_DISCONNECTED and raises no SIGPIPE");
    reap(&s, 0);
    pcore_shm_unmap(s.base, s.hdr.total_size);
    close(fd);
    close(sq_efd);
    close(cq_wr);
}

/* Runs the two-process tests; returns 0 (the TAP library reports failures). */
int main(void)
{
    plan_lazy();
    /* SIGPIPE keeps its default, deadly disposition: notify must not raise it. */
    uint64_t seed = tap_seed();
    test_stream(seed);
    test_dead_peer();
    return 0;
}
