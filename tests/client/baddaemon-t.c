/* baddaemon-t.c: libpaged facing a protocol-breaking daemon: corrupt ring indices, stray completions, bad replies. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/proto.h"
#include "lib/core/ring.h"
#include "lib/core/shm.h"
#include "lib/core/sock.h"
#include "lib/core/wake.h"
#include "paged.h"
#include "tests/tap/basic.h"

/*
 * A fake daemon (a child process speaking the wire protocol with libpaged's own ring and
 * socket helpers) serves one connection per scenario, each breaking one rule a real pagedd
 * keeps: a completion ring whose tail runs past its capacity, completions naming no request,
 * the wrong generation or opcode, one request completed twice, a completion nobody asked
 * for, a positive status, a submission ring whose head runs past its tail, a hang-up
 * mid-request, replies of the wrong type or length, a shutdown. libpaged must answer each
 * with an error naming what was wrong, within a bounded time, never crash, and stay dead
 * (the same error) once its rings are broken; a bad status, opcode or reply alone leaves it
 * usable (an opcode other than the one submitted is what a client that rewrote its entry
 * in the ring gets back, so it is an error of that request only).
 */

/* The client's rings: small, so the submission ring wraps within a few requests. */
#define SQ_ENTRIES 4u
#define CQ_ENTRIES 8u
#define ARENA_SIZE (1u << 20)
/* No step of the fake or the client should come near this; it only ends a broken run. */
#define FAKE_WAIT_MS 10000
#define CALL_BOUND_MS 5000.0

enum scenario {
    SC_TAIL_BEYOND,    /* CQ tail set past head + capacity */
    SC_TAG_RANGE,      /* completion names slot cq_entries + 5 */
    SC_TAG_GEN,        /* completion names the right slot, the wrong generation */
    SC_TAG_OPCODE,     /* the right request, the wrong opcode: an error of its own, the client goes on */
    SC_DUPLICATE,      /* one request completed twice */
    SC_UNSOLICITED,    /* a completion posted before any request */
    SC_POSITIVE,       /* a positive status: an error of its own, the client goes on */
    SC_SQ_HEAD,        /* the SQ head, from the third request on, runs 100 past the tail */
    SC_HANGUP,         /* the daemon closes everything with a request in flight */
    SC_BAD_REPLIES,    /* control replies of the wrong type, error sign and length */
    SC_SHUTDOWN,       /* SHUTDOWN, then the close, with a request in flight */
    SC_COUNT
};

static const char *const sc_names[SC_COUNT] = {
    "tail beyond capacity", "tag out of range", "wrong generation", "wrong opcode",
    "duplicate completion", "unsolicited completion", "positive status", "SQ head past tail",
    "hang-up", "bad control replies", "shutdown",
};

/* Returns CLOCK_MONOTONIC in milliseconds. */
static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Reports whether s contains needle (s may be NULL). */
static int contains(const char *s, const char *needle)
{
    return s != NULL && strstr(s, needle) != NULL;
}

/* ---- The fake daemon (runs in the child; every failure ends it with _exit). */

/* One connection's channel, as the fake sees it: raw indices, so it can break them. */
struct fake {
    int sock;
    int sq_wait;       /* read end: the client writes when it publishes */
    int cq_notify;     /* write end: we write when we publish */
    unsigned char *map;
    struct pcore_channel_hdr hdr;
    struct pcore_ring_ctl *sqc, *cqc;
    uint32_t sq_head;  /* ours; stored to sqc->head (plus head_skew) after each take */
    uint32_t head_skew;
    uint32_t cq_tail;  /* ours; stored to cqc->tail after each post */
};

/* Accepts one connection on ls and answers its HELLO with a real cpu-backend WELCOME: a
 * channel memfd laid out as pagedd lays it out, and the two wake-up pipes. Stores the
 * scenario named in the client's name in *sc. Returns 0, or -1 when the peer went away. */
static int fake_accept(int ls, struct fake *f, int *sc)
{
    memset(f, 0, sizeof *f);
    struct pollfd p = { .fd = ls, .events = POLLIN };
    if (poll(&p, 1, FAKE_WAIT_MS) != 1)
        _exit(9);
    f->sock = accept(ls, NULL, NULL);
    if (f->sock < 0)
        _exit(10);
    struct pcore_msg_hello hello;
    int nfds = 0;
    if (pcore_sock_recv(f->sock, &hello, sizeof hello, NULL, 0, &nfds) != (ssize_t) sizeof hello
        || hello.hdr.type != PCORE_MSG_HELLO || sscanf(hello.name, "bad-%d", sc) != 1)
        return -1;
    if (pcore_channel_layout(hello.sq_entries, hello.cq_entries, ARENA_SIZE, &f->hdr) != PAGED_OK)
        _exit(11);
    int memfd = pcore_shm_create("fake-channel", f->hdr.total_size);
    void *map = NULL;
    if (memfd < 0 || pcore_shm_map(memfd, f->hdr.total_size, 1, &map) != PAGED_OK)
        _exit(12);
    f->map = map;
    memcpy(f->map, &f->hdr, sizeof f->hdr);
    f->sqc = (struct pcore_ring_ctl *) (f->map + f->hdr.sq_ctl_off);
    f->cqc = (struct pcore_ring_ctl *) (f->map + f->hdr.cq_ctl_off);
    pcore_ring_ctl_init(f->sqc, 0);
    pcore_ring_ctl_init(f->cqc, 0);
    int sq_notify = -1, cq_wait = -1;
    if (pcore_wake_pipe(&f->sq_wait, &sq_notify) < 0 || pcore_wake_pipe(&cq_wait, &f->cq_notify) < 0)
        _exit(13);
    struct pcore_msg_welcome w;
    memset(&w, 0, sizeof w);
    w.hdr = (struct pcore_msg_hdr) { PCORE_MSG_WELCOME, hello.hdr.seq, 0, sizeof w };
    w.version = PCORE_PROTO_VERSION;
    w.client_id = 100 + (uint32_t) *sc;
    w.backend = PAGED_BACKEND_CPU;
    w.num_fds = 3;
    w.device_ordinal = -1;
    w.data_arena_kind = PCORE_MEM_MEMFD;
    w.channel_size = f->hdr.total_size;
    snprintf(w.daemon_version, sizeof w.daemon_version, "fake");
    int fds[3] = { memfd, sq_notify, cq_wait };
    if (pcore_sock_send(f->sock, &w, sizeof w, fds, 3) != 0)
        _exit(14);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    return 0;
}

/* Closes and unmaps what fake_accept opened. */
static void fake_close(struct fake *f)
{
    if (f->map != NULL)
        munmap(f->map, f->hdr.total_size);
    close(f->sock);
    close(f->sq_wait);
    close(f->cq_notify);
    f->map = NULL;
}

/* Reads one control message into buf (at most size bytes); returns its length, or -1 when
 * the client hung up or FAKE_WAIT_MS passed. */
static ssize_t fake_recv_ctl(struct fake *f, void *buf, size_t size)
{
    struct pollfd p = { .fd = f->sock, .events = POLLIN };
    if (poll(&p, 1, FAKE_WAIT_MS) <= 0)
        return -1;
    int nfds = 0;
    ssize_t n = pcore_sock_recv(f->sock, buf, size, NULL, 0, &nfds);
    return n > 0 ? n : -1;
}

/* Takes the next submission into *out, waiting up to FAKE_WAIT_MS. Returns 1, or 0 when the
 * client hung up first, or -1 on timeout. */
static int fake_take(struct fake *f, struct pcore_sqe *out)
{
    double deadline = now_ms() + FAKE_WAIT_MS;
    while (now_ms() < deadline) {
        uint32_t tail = atomic_load_explicit(pcore_ring_word(&f->sqc->tail), memory_order_acquire);
        if (tail != f->sq_head) {
            const struct pcore_sqe *e = (const void *) (f->map + f->hdr.sq_off);
            *out = e[f->sq_head & (f->hdr.sq_entries - 1)];
            f->sq_head++;
            atomic_store_explicit(pcore_ring_word(&f->sqc->head), f->sq_head + f->head_skew,
                                  memory_order_release);
            return 1;
        }
        struct pollfd p[2] = { { .fd = f->sq_wait, .events = POLLIN }, { .fd = f->sock, .events = POLLIN } };
        if (poll(p, 2, 2) > 0) {
            pcore_wake_drain(f->sq_wait);
            if (p[1].revents != 0) {
                char byte;
                if (recv(f->sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
                    return 0;
            }
        }
    }
    return -1;
}

/* Writes the client's wake-up pipe (whether or not it sleeps: a spare wake-up is harmless). */
static void fake_wake(struct fake *f)
{
    uint64_t one = 1;
    if (write(f->cq_notify, &one, sizeof one) < 0 && errno != EAGAIN)
        _exit(15);
}

/* Publishes one completion and wakes the client. */
static void fake_post(struct fake *f, const struct pcore_cqe *cqe)
{
    struct pcore_cqe *e = (void *) (f->map + f->hdr.cq_off);
    e[f->cq_tail & (f->hdr.cq_entries - 1)] = *cqe;
    f->cq_tail++;
    atomic_store_explicit(pcore_ring_word(&f->cqc->tail), f->cq_tail, memory_order_release);
    fake_wake(f);
}

/* Returns the completion a real daemon would post for a NOP. */
static struct pcore_cqe answer(const struct pcore_sqe *s)
{
    return (struct pcore_cqe) { .tag = s->tag, .status = PAGED_OK, .opcode = s->opcode };
}

/* Answers every submission correctly until the client hangs up. */
static void fake_serve(struct fake *f)
{
    struct pcore_sqe s;
    while (fake_take(f, &s) == 1) {
        struct pcore_cqe c = answer(&s);
        fake_post(f, &c);
    }
}

/* Sends a control message of len bytes whose header says type, seq, status and claimed_len. */
static void fake_send_ctl(struct fake *f, uint32_t type, uint32_t seq, int32_t status, uint32_t claimed_len,
                          size_t len)
{
    unsigned char buf[sizeof(struct pcore_msg_error)];
    memset(buf, 0, sizeof buf);
    if (len > sizeof buf)
        len = sizeof buf;
    struct pcore_msg_hdr h = { type, seq, status, claimed_len };
    memcpy(buf, &h, sizeof h);
    if (type == PCORE_MSG_ERROR)
        snprintf((char *) buf + sizeof h, sizeof buf - sizeof h, "fake error");
    if (pcore_sock_send(f->sock, buf, len, NULL, 0) != 0)
        _exit(16);
}

/* Plays scenario sc on the accepted connection f. */
static void fake_play(struct fake *f, int sc)
{
    struct pcore_sqe s;
    struct pcore_cqe c;
    switch (sc) {
    case SC_TAIL_BEYOND:
        if (fake_take(f, &s) != 1)
            break;
        atomic_store_explicit(pcore_ring_word(&f->cqc->tail), f->cq_tail + f->hdr.cq_entries + 1,
                              memory_order_release);
        fake_wake(f);
        break;
    case SC_TAG_RANGE:
    case SC_TAG_GEN:
        if (fake_take(f, &s) != 1)
            break;
        c = answer(&s);
        if (sc == SC_TAG_RANGE)
            c.tag = (c.tag & ~(uint64_t) UINT32_MAX) | (f->hdr.cq_entries + 5);
        else
            c.tag += (uint64_t) 1 << 32;
        fake_post(f, &c);
        break;
    case SC_DUPLICATE:
        if (fake_take(f, &s) != 1)
            break;
        c = answer(&s);
        fake_post(f, &c);
        fake_post(f, &c);
        break;
    case SC_UNSOLICITED:
        c = (struct pcore_cqe) { .tag = (uint64_t) 7 << 32 | 3, .opcode = PAGED_OP_NOP };
        fake_post(f, &c);
        break;
    case SC_TAG_OPCODE:
    case SC_POSITIVE:
        /* Requests 1 and 3 get status 7, or a successful ALLOC of 5 blocks for their NOP; 2
         * and 4 are answered as pagedd would. */
        for (int i = 0; i < 4 && fake_take(f, &s) == 1; i++) {
            c = answer(&s);
            if (i % 2 == 0 && sc == SC_POSITIVE) {
                c.status = 7;
            } else if (i % 2 == 0) {
                c.opcode = PAGED_OP_ALLOC;
                c.count = 5;
            }
            fake_post(f, &c);
        }
        break;
    case SC_SQ_HEAD:
        for (int i = 0; fake_take(f, &s) == 1; i++) {
            c = answer(&s);
            fake_post(f, &c);
            if (i == 2) {
                /* From now on the head we store runs 100 ahead of every tail. */
                f->head_skew = 100;
                atomic_store_explicit(pcore_ring_word(&f->sqc->head), f->sq_head + f->head_skew,
                                      memory_order_release);
            }
        }
        return;
    case SC_HANGUP:
        fake_take(f, &s);
        return;   /* fake_close hangs up with the request in flight */
    case SC_BAD_REPLIES: {
        unsigned char msg[PCORE_MSG_MAX];
        struct pcore_msg_hdr h;
        /* Three pool attaches: a reply of the wrong type, an ERROR with a positive status, a
         * message whose header claims more bytes than came. */
        for (int i = 0; i < 3; i++) {
            if (fake_recv_ctl(f, msg, sizeof msg) < (ssize_t) sizeof h)
                return;
            memcpy(&h, msg, sizeof h);
            if (i == 0)
                fake_send_ctl(f, PCORE_MSG_STATUS_REPLY, h.seq, 0, sizeof(struct pcore_msg_hdr),
                              sizeof(struct pcore_msg_hdr));
            else if (i == 1)
                fake_send_ctl(f, PCORE_MSG_ERROR, h.seq, 3, sizeof(struct pcore_msg_error),
                              sizeof(struct pcore_msg_error));
            else
                fake_send_ctl(f, PCORE_MSG_POOL_REPLY, h.seq, 0, 4096, sizeof(struct pcore_msg_hdr) + 8);
        }
        fake_serve(f);
        return;
    }
    case SC_SHUTDOWN:
        if (fake_take(f, &s) != 1)
            break;
        fake_send_ctl(f, PCORE_MSG_SHUTDOWN, 0, 0, sizeof(struct pcore_msg_hdr), sizeof(struct pcore_msg_hdr));
        return;
    default:
        _exit(17);
    }
    /* Hold the connection until the client closes it (bounded). */
    struct pollfd p = { .fd = f->sock, .events = POLLIN };
    poll(&p, 1, FAKE_WAIT_MS);
}

/* Forks the fake daemon on path; it serves SC_COUNT connections, then exits 0. Returns its pid. */
static pid_t fake_daemon(const char *path)
{
    int ls = pcore_sock_listen(path, 0600, (gid_t) -1);
    if (ls < 0)
        bail("fake daemon: cannot listen on %s: %s", path, paged_strerror(ls));
    pid_t pid = bfork();
    if (pid > 0) {
        close(ls);
        return pid;
    }
    for (int i = 0; i < SC_COUNT; i++) {
        struct fake f;
        int sc = -1;
        if (fake_accept(ls, &f, &sc) < 0 || sc != i)
            _exit(20 + i);
        fake_play(&f, sc);
        fake_close(&f);
    }
    _exit(0);
}

/* ---- The client side. */

/* Connects to the fake as scenario sc; returns the client (bails on failure). */
static paged_client *connect_as(const char *path, int sc)
{
    char name[32], why[256];
    snprintf(name, sizeof name, "bad-%d", sc);
    paged_connect_opts o = { .socket_path = path, .name = name, .sq_entries = SQ_ENTRIES,
                             .cq_entries = CQ_ENTRIES, .host_arena_size = ARENA_SIZE, .timeout_ms = 5000 };
    paged_client *c = NULL;
    int rc = paged_client_connect_err(&o, &c, why, sizeof why);
    if (rc != PAGED_OK)
        bail("connecting to the fake daemon for %s: %s (%s)", sc_names[sc], paged_strerror(rc), why);
    return c;
}

/* Checks that c is dead with err: a further NOP fails at once with the same error. */
static void still_dead(paged_client *c, int err, const char *what)
{
    double t0 = now_ms();
    int rc = paged_nop(c);
    is_int(err, rc, "%s: a later NOP fails the same way (%s)", what, paged_strerror(rc));
    ok(now_ms() - t0 < CALL_BOUND_MS, "%s: and at once", what);
}

/* One request whose completion is broken: the call fails with PAGED_E_RING naming why. */
static void test_broken_completion(const char *path, int sc, const char *reason)
{
    paged_client *c = connect_as(path, sc);
    double t0 = now_ms();
    int rc = paged_nop(c);
    double dt = now_ms() - t0;
    is_int(PAGED_E_RING, rc, "%s: the NOP fails with PAGED_E_RING", sc_names[sc]);
    ok(dt < CALL_BOUND_MS, "%s: within %.0f ms (%.1f)", sc_names[sc], CALL_BOUND_MS, dt);
    ok(contains(paged_client_error(c), "completion ring") && contains(paged_client_error(c), reason),
       "%s: the error names it (%s)", sc_names[sc], paged_client_error(c));
    still_dead(c, PAGED_E_RING, sc_names[sc]);
    paged_client_close(c);
}

/* One request completed twice, taken asynchronously: the first completion may be delivered,
 * the second breaks the client. */
static void test_duplicate(const char *path)
{
    const char *what = sc_names[SC_DUPLICATE];
    paged_client *c = connect_as(path, SC_DUPLICATE);
    paged_request req = { .op = PAGED_OP_NOP, .tag = 42 };
    is_int(PAGED_OK, paged_prep(c, &req), "%s: NOP prepared", what);
    is_int(1, paged_submit(c), "%s: and submitted", what);
    paged_completion comp[4];
    int got = 0, rc = 0;
    double t0 = now_ms();
    /* Bounded: every call either delivers, breaks the client, or times out at 1 s. */
    for (int i = 0; i < 4 && rc >= 0; i++) {
        rc = paged_wait(c, comp, 4, 1000);
        if (rc > 0)
            got += rc;
    }
    is_int(PAGED_E_RING, rc, "%s: the second completion breaks the client", what);
    ok(got <= 1 && (got == 0 || (comp[0].tag == 42 && comp[0].status == PAGED_OK)),
       "%s: at most the first is delivered, as it was (%d)", what, got);
    ok(now_ms() - t0 < CALL_BOUND_MS, "%s: within %.0f ms", what, CALL_BOUND_MS);
    ok(contains(paged_client_error(c), "names no request in flight"), "%s: the error names it (%s)", what,
       paged_client_error(c));
    still_dead(c, PAGED_E_RING, what);
    paged_client_close(c);
}

/* A completion with a positive status (sc SC_POSITIVE) or another opcode than its request's
 * (SC_TAG_OPCODE) is an error of that request only, err (PAGED_E_PROTO, PAGED_E_OPCODE), sync
 * and async, and the client goes on. */
static void test_request_error(const char *path, int sc, int err)
{
    const char *what = sc_names[sc];
    paged_client *c = connect_as(path, sc);
    is_int(err, paged_nop(c), "%s: the sync NOP fails with %s", what, paged_strerror(err));
    is_int(PAGED_OK, paged_nop(c), "%s: the client goes on: the next NOP completes", what);
    paged_request req = { .op = PAGED_OP_NOP, .tag = 9 };
    paged_completion comp;
    int n = paged_prep(c, &req);
    if (n == PAGED_OK)
        n = paged_submit(c);
    if (n >= 0)
        n = paged_wait(c, &comp, 1, 5000);
    is_int(1, n, "%s: an async NOP completes", what);
    ok(n == 1 && comp.tag == 9 && comp.op == PAGED_OP_NOP && comp.status == err && comp.count == 0,
       "%s: as the NOP it was, with status %s, no count (%d)", what, paged_strerror(err), n == 1 ? comp.status : 0);
    is_int(PAGED_OK, paged_nop(c), "%s: and the client still goes on", what);
    paged_client_close(c);
}

/* The SQ head runs past the tail from the third request on: the producer sees it once the
 * ring's free space it knew of is used up, and stops. */
static void test_sq_head(const char *path)
{
    const char *what = sc_names[SC_SQ_HEAD];
    paged_client *c = connect_as(path, SC_SQ_HEAD);
    int ok_before = 0, rc = PAGED_OK;
    for (unsigned i = 0; i < 2 * SQ_ENTRIES && rc == PAGED_OK; i++) {
        rc = paged_nop(c);
        if (rc == PAGED_OK)
            ok_before++;
    }
    is_int(PAGED_E_RING, rc, "%s: a NOP fails with PAGED_E_RING", what);
    ok(ok_before >= 3 && ok_before <= (int) SQ_ENTRIES,
       "%s: after the requests the free space it knew of allowed (%d)", what, ok_before);
    ok(contains(paged_client_error(c), "submission ring") && contains(paged_client_error(c), "head index"),
       "%s: the error names it (%s)", what, paged_client_error(c));
    still_dead(c, PAGED_E_RING, what);
    paged_client_close(c);
}

/* The daemon goes away with a request in flight (hang-up, or SHUTDOWN first): the sync
 * call ends with err and a reason, not a wait without end. */
static void test_gone(const char *path, int sc, int err, const char *reason)
{
    paged_client *c = connect_as(path, sc);
    double t0 = now_ms();
    int rc = paged_nop(c);
    double dt = now_ms() - t0;
    is_int(err, rc, "%s: the NOP in flight fails with %s", sc_names[sc], paged_strerror(err));
    ok(dt < CALL_BOUND_MS, "%s: within %.0f ms (%.1f)", sc_names[sc], CALL_BOUND_MS, dt);
    ok(contains(paged_client_error(c), reason), "%s: the error says so (%s)", sc_names[sc],
       paged_client_error(c));
    still_dead(c, err, sc_names[sc]);
    paged_client_close(c);
}

/* Control replies of the wrong type, a positive ERROR status, a header claiming more bytes
 * than came: each call fails with PAGED_E_PROTO naming it, and the client goes on. */
static void test_bad_replies(const char *path)
{
    const char *what = sc_names[SC_BAD_REPLIES];
    static const char *const reasons[3] = { "unexpected reply", "malformed error message",
                                            "malformed control message" };
    paged_client *c = connect_as(path, SC_BAD_REPLIES);
    for (int i = 0; i < 3; i++) {
        paged_pool *p = (paged_pool *) c; /* not NULL, to see it left alone or cleared */
        int rc = paged_pool_attach(c, "fake-pool", &p);
        is_int(PAGED_E_PROTO, rc, "%s %d: the attach fails with PAGED_E_PROTO", what, i + 1);
        ok(contains(paged_client_error(c), reasons[i]), "%s %d: the error names it (%s)", what, i + 1,
           paged_client_error(c));
    }
    is_int(PAGED_OK, paged_nop(c), "%s: the client goes on: a NOP completes", what);
    paged_client_close(c);
}

/* Plays each scenario of the fake daemon against libpaged, then checks that the fake daemon
 * played them all; returns 0 (the TAP output tells the rest). */
int main(void)
{
    plan_lazy();
    char dir[] = "/tmp/paged-baddaemon-XXXXXX";
    if (mkdtemp(dir) == NULL)
        sysbail("mkdtemp");
    char path[160];
    snprintf(path, sizeof path, "%s/fake.sock", dir);
    pid_t fake = fake_daemon(path);

    test_broken_completion(path, SC_TAIL_BEYOND, "tail index is corrupt");
    test_broken_completion(path, SC_TAG_RANGE, "names no request of ours");
    test_broken_completion(path, SC_TAG_GEN, "names no request in flight");
    test_request_error(path, SC_TAG_OPCODE, PAGED_E_OPCODE);
    test_duplicate(path);
    test_broken_completion(path, SC_UNSOLICITED, "names no request in flight");
    test_request_error(path, SC_POSITIVE, PAGED_E_PROTO);
    test_sq_head(path);
    test_gone(path, SC_HANGUP, PAGED_E_DISCONNECTED, "connection to the daemon lost");
    test_bad_replies(path);
    test_gone(path, SC_SHUTDOWN, PAGED_E_SHUTDOWN, "shutting down");

    int status = 0;
    waitpid(fake, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the fake daemon played every scenario (status %d)",
       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    unlink(path);
    rmdir(dir);
    return 0;
}
