/* rawclient.c: a raw test client of pagedd: HELLO, the channel, raw SQEs and CQEs. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tests/service/rawclient.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/shm.h"
#include "lib/core/sock.h"
#include "lib/core/wake.h"
#include "tests/tap/basic.h"

/* Fills a valid HELLO; returns nothing. */
void rc_fill_hello(struct pcore_msg_hello *h, const char *name, uint32_t flags)
{
    memset(h, 0, sizeof *h);
    h->hdr.type = PCORE_MSG_HELLO;
    h->hdr.len = sizeof *h;
    h->hdr.seq = 1;
    h->magic = PCORE_HELLO_MAGIC;
    h->version = PCORE_PROTO_VERSION;
    h->flags = flags;
    h->pid = (uint32_t) getpid();
    h->sq_entries = 64;
    h->cq_entries = 128;
    h->host_arena_size = 4u << 20;
    snprintf(h->name, sizeof h->name, "%s", name);
}

/* Receives one packet with up to 4 fds within timeout_ms; returns its length or an error. */
static long recv_msg(int sock, void *buf, size_t size, int *fds, int *nfds, int timeout_ms)
{
    int rc = pcore_sock_wait_readable(sock, timeout_ms);
    if (rc < 0)
        return rc;
    int got = 0;
    long n = pcore_sock_recv(sock, buf, size, fds, 4, &got);
    if (nfds != NULL)
        *nfds = got;
    else
        for (int i = 0; i < got; i++)
            close(fds[i]);
    return n;
}

/* Connects and sends a first packet; see rawclient.h. */
int rc_raw_hello(const char *path, const void *msg, size_t len, char *errmsg, int *closed)
{
    static unsigned char buf[PCORE_MSG_MAX];
    int sock = pcore_sock_connect(path);
    *closed = 0;
    errmsg[0] = '\0';
    if (sock < 0)
        return sock;
    int rc = pcore_sock_send(sock, msg, len, NULL, 0);
    if (rc < 0) {
        close(sock);
        return rc;
    }
    int fds[4], nfds = 0;
    long n = recv_msg(sock, buf, sizeof buf, fds, &nfds, 10000);
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    if (n < 0) {
        close(sock);
        return (int) n;
    }
    struct pcore_msg_hdr h;
    memcpy(&h, buf, sizeof h);
    if (h.type == PCORE_MSG_WELCOME)
        rc = 1;
    else if (h.type == PCORE_MSG_ERROR && (size_t) n == sizeof(struct pcore_msg_error)) {
        struct pcore_msg_error *e = (struct pcore_msg_error *) buf;
        memcpy(errmsg, e->message, PCORE_ERRMSG_MAX);
        errmsg[PCORE_ERRMSG_MAX - 1] = '\0';
        rc = e->hdr.status;
    } else
        rc = PAGED_E_PROTO;
    if (rc != 1) {
        n = recv_msg(sock, buf, sizeof buf, fds, NULL, 5000);
        *closed = n == PAGED_E_DISCONNECTED;
    }
    close(sock);
    return rc;
}

/* Connects a client; see rawclient.h. */
int rc_connect(const char *path, const char *name, uint32_t flags, struct rc_client *c)
{
    struct pcore_msg_hello h;
    rc_fill_hello(&h, name, flags);
    return rc_connect_hello(path, &h, c);
}

/* Connects a client with the given HELLO; see rawclient.h. */
int rc_connect_hello(const char *path, const struct pcore_msg_hello *hello, struct rc_client *c)
{
    memset(c, 0, sizeof *c);
    c->sq_notify = c->cq_wait = -1;
    c->seq = 100;
    c->sock = pcore_sock_connect(path);
    if (c->sock < 0)
        return c->sock;
    uint32_t flags = hello->flags;
    /* A daemon that refuses a connection at once (an ERROR, then the close) may have closed
     * before the HELLO went: its ERROR is still there to read, as libpaged reads it. */
    int rc = pcore_sock_send(c->sock, hello, sizeof *hello, NULL, 0);
    if (rc < 0 && rc != PAGED_E_DISCONNECTED)
        return rc;
    union {
        struct pcore_msg_welcome w;
        struct pcore_msg_error e;
        unsigned char raw[1024];
    } u;
    int fds[4], nfds = 0;
    long n = recv_msg(c->sock, &u, sizeof u, fds, &nfds, 10000);
    if (n < 0)
        return (int) n;
    if (u.w.hdr.type == PCORE_MSG_ERROR) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        memcpy(c->errmsg, u.e.message, sizeof c->errmsg);
        c->errmsg[sizeof c->errmsg - 1] = '\0';
        return u.e.hdr.status;
    }
    if (u.w.hdr.type != PCORE_MSG_WELCOME || n != sizeof u.w) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        return PAGED_E_PROTO;
    }
    c->welcome = u.w;
    c->id = u.w.client_id;
    if (flags & PCORE_HELLO_CONTROL)
        return nfds == 0 ? 0 : PAGED_E_PROTO;
    if (nfds != 3)
        return PAGED_E_PROTO;
    c->sq_notify = fds[1];
    c->cq_wait = fds[2];
    c->map_size = u.w.channel_size;
    rc = pcore_shm_map(fds[0], c->map_size, 1, &c->map);
    close(fds[0]);
    if (rc < 0)
        return rc;
    memcpy(&c->hdr, c->map, sizeof c->hdr);
    if ((rc = pcore_channel_check(&c->hdr, c->map_size)) < 0)
        return rc;
    unsigned char *base = c->map;
    if ((rc = pcore_ring_prod_init(&c->sq, (struct pcore_ring_ctl *) (base + c->hdr.sq_ctl_off),
                                   base + c->hdr.sq_off, c->hdr.sq_entries, sizeof(struct pcore_sqe))) < 0
        || (rc = pcore_ring_cons_init(&c->cq, (struct pcore_ring_ctl *) (base + c->hdr.cq_ctl_off),
                                      base + c->hdr.cq_off, c->hdr.cq_entries, sizeof(struct pcore_cqe))) < 0)
        return rc;
    c->arena = base + c->hdr.arena_off;
    c->arena_size = c->hdr.arena_size;
    return 0;
}

/* Closes the client; returns nothing. */
void rc_close(struct rc_client *c)
{
    if (c->map != NULL)
        pcore_shm_unmap(c->map, c->map_size);
    if (c->sock >= 0)
        close(c->sock);
    if (c->sq_notify >= 0)
        close(c->sq_notify);
    if (c->cq_wait >= 0)
        close(c->cq_wait);
    memset(c, 0, sizeof *c);
    c->sock = c->sq_notify = c->cq_wait = -1;
}

/* Sends a control message and waits for its reply; see rawclient.h. */
long rc_control(struct rc_client *c, void *msg, size_t len, void *reply, size_t replymax, int *fd)
{
    static unsigned char buf[PCORE_MSG_MAX];
    struct pcore_msg_hdr *h = msg;
    uint32_t seq = ++c->seq;
    h->seq = seq;
    if (fd != NULL)
        *fd = -1;
    int rc = pcore_sock_send(c->sock, msg, len, NULL, 0);
    if (rc < 0)
        return rc;
    for (int i = 0; i < 1000; i++) {
        int fds[4], nfds = 0;
        long n = recv_msg(c->sock, buf, sizeof buf, fds, &nfds, 10000);
        if (n < 0)
            return n;
        struct pcore_msg_hdr r;
        memcpy(&r, buf, sizeof r);
        if (r.type == PCORE_MSG_SHUTDOWN)
            c->got_shutdown = 1;
        if (r.type == PCORE_MSG_EVENT || r.type == PCORE_MSG_SHUTDOWN || r.seq != seq) {
            for (int k = 0; k < nfds; k++)
                close(fds[k]);
            continue;
        }
        for (int k = 0; k < nfds; k++) {
            if (k == 0 && fd != NULL)
                *fd = fds[k];
            else
                close(fds[k]);
        }
        if (r.type == PCORE_MSG_ERROR) {
            memcpy(c->errmsg, ((struct pcore_msg_error *) buf)->message, sizeof c->errmsg);
            c->errmsg[sizeof c->errmsg - 1] = '\0';
            return r.status < 0 ? r.status : PAGED_E_PROTO;
        }
        memcpy(reply, buf, (size_t) n < replymax ? (size_t) n : replymax);
        return n;
    }
    return PAGED_E_PROTO;
}

/* Creates a pool; returns 0 or the error. */
int rc_pool_create(struct rc_client *c, const char *name, uint32_t layers, uint32_t heads,
                   uint32_t head_dim, uint32_t block_size, uint32_t dtype, uint32_t num_blocks,
                   uint32_t mode, uint32_t flags, struct pcore_msg_pool_reply *r, int *fd)
{
    struct pcore_msg_pool_create m;
    struct pcore_msg_pool_reply tmp;
    memset(&m, 0, sizeof m);
    m.hdr.type = PCORE_MSG_POOL_CREATE;
    m.hdr.len = sizeof m;
    snprintf(m.name, sizeof m.name, "%s", name);
    m.num_layers = layers;
    m.num_kv_heads = heads;
    m.head_dim = head_dim;
    m.block_size = block_size;
    m.dtype = dtype;
    m.num_blocks = num_blocks;
    m.mode = mode;
    m.flags = flags;
    long n = rc_control(c, &m, sizeof m, r != NULL ? r : &tmp, sizeof tmp, fd);
    if (n < 0)
        return (int) n;
    return (r != NULL ? r : &tmp)->hdr.type == PCORE_MSG_POOL_REPLY ? 0 : PAGED_E_PROTO;
}

/* Attaches to a pool; returns 0 or the error. */
int rc_pool_attach(struct rc_client *c, const char *name, uint32_t flags,
                   struct pcore_msg_pool_reply *r, int *fd)
{
    struct pcore_msg_pool_attach m;
    struct pcore_msg_pool_reply tmp;
    memset(&m, 0, sizeof m);
    m.hdr.type = PCORE_MSG_POOL_ATTACH;
    m.hdr.len = sizeof m;
    snprintf(m.name, sizeof m.name, "%s", name);
    m.flags = flags;
    long n = rc_control(c, &m, sizeof m, r != NULL ? r : &tmp, sizeof tmp, fd);
    if (n < 0)
        return (int) n;
    return (r != NULL ? r : &tmp)->hdr.type == PCORE_MSG_POOL_REPLY ? 0 : PAGED_E_PROTO;
}

/* Sends STATS and copies the whole reply into out; see rawclient.h. */
int rc_stats(struct rc_client *c, struct pcore_msg_stats_reply *out)
{
    struct pcore_msg_hdr req = { .type = PCORE_MSG_STATS, .len = sizeof req };
    long n = rc_control(c, &req, sizeof req, out, sizeof *out, NULL);
    if (n < 0)
        return (int) n;
    return n == (long) sizeof *out && out->hdr.type == PCORE_MSG_STATS_REPLY ? 0 : PAGED_E_PROTO;
}

/* Runs a LIST and collects its items; see rawclient.h. */
long rc_list(struct rc_client *c, uint32_t what, const char *name, void *items, size_t isize, long max)
{
    static unsigned char buf[PCORE_MSG_MAX];
    struct pcore_msg_list m;
    memset(&m, 0, sizeof m);
    m.hdr.type = PCORE_MSG_LIST;
    m.hdr.len = sizeof m;
    m.what = what;
    snprintf(m.name, sizeof m.name, "%s", name);
    long n = rc_control(c, &m, sizeof m, buf, sizeof buf, NULL), got = 0;
    /* Bounded: every packet holds at least one item, and no test lists 2^31 of them. */
    for (int i = 0; i < 100000 && n >= 0; i++) {
        struct pcore_msg_list_items *li = (struct pcore_msg_list_items *) buf;
        if (li->hdr.type == PCORE_MSG_LIST_END)
            return li->hdr.status == got ? got : PAGED_E_PROTO;
        if (li->hdr.type != PCORE_MSG_LIST_ITEMS || li->what != what
            || (size_t) n != sizeof *li + li->count * isize)
            return PAGED_E_PROTO;
        for (uint32_t k = 0; k < li->count; k++, got++)
            if (got < max)
                memcpy((char *) items + (size_t) got * isize, buf + sizeof *li + k * isize, isize);
        int fds[4], nfds = 0;
        n = recv_msg(c->sock, buf, sizeof buf, fds, &nfds, 10000);
        for (int k = 0; k < nfds; k++)
            close(fds[k]);
    }
    return n < 0 ? n : PAGED_E_PROTO;
}

/* Finds a pool in LIST pools; returns 0, PAGED_E_NOENT or an error. */
int rc_pool_item(struct rc_client *c, const char *name, struct pcore_pool_item *out)
{
    enum { MAXP = 256 };
    static struct pcore_pool_item pools[MAXP];
    long n = rc_list(c, PCORE_LIST_POOLS, name, pools, sizeof pools[0], MAXP);
    if (n < 0)
        return (int) n;
    int found = 0;
    for (long k = 0; k < n && k < MAXP; k++)
        if (strcmp(pools[k].name, name) == 0 && !pools[k].destroyed) {
            *out = pools[k];
            found = 1;
        }
    return found ? 0 : PAGED_E_NOENT;
}

/* Says whether the pool has want blocks free; see rawclient.h. */
int rc_pool_free_is(const struct pcore_pool_item *it, uint32_t want)
{
    return it->free == want;
}

/* Waits for the pool to reach a state; see rawclient.h. */
int rc_pool_item_until(struct rc_client *c, const char *name, int (*met)(const struct pcore_pool_item *, uint32_t),
                       uint32_t want, int timeout_ms, struct pcore_pool_item *out)
{
    for (int i = 0; i <= timeout_ms; i++) {
        int rc = rc_pool_item(c, name, out);
        if (rc != 0)
            return rc;
        if (met(out, want))
            return 0;
        poll(NULL, 0, 1);
    }
    return 1;
}

/* Carves arena bytes; returns the offset. */
uint64_t rc_alloc(struct rc_client *c, uint64_t size)
{
    uint64_t off = (c->arena_used + 63) & ~(uint64_t) 63;
    if (off + size > c->arena_size)
        bail("test arena exhausted (%llu + %llu > %llu)", (unsigned long long) off,
             (unsigned long long) size, (unsigned long long) c->arena_size);
    c->arena_used = off + size;
    return off;
}

/* Returns a pointer into the host arena. */
void *rc_ptr(struct rc_client *c, uint64_t off)
{
    return c->arena + off;
}

/* Pushes one SQE and wakes the daemon; returns 0 or an error. */
int rc_submit(struct rc_client *c, const struct pcore_sqe *sqe)
{
    int rc = pcore_ring_prod_push(&c->sq, sqe);
    if (rc < 0)
        return rc;
    rc = pcore_wake_notify(&c->sq, c->sq_notify);
    return rc < 0 ? rc : 0;
}

/* Waits for one CQE; returns 1 or an error. */
int rc_reap(struct rc_client *c, struct pcore_cqe *cqe, int timeout_ms)
{
    int rc = pcore_wake_wait_ring(&c->cq, c->cq_wait, NULL, timeout_ms);
    if (rc < 0)
        return rc;
    rc = pcore_ring_cons_pop(&c->cq, cqe);
    return rc == 1 ? 1 : rc == 0 ? PAGED_E_PROTO : rc;
}

/* Submits and waits; returns the CQE's status or a transport error. */
int rc_call(struct rc_client *c, const struct pcore_sqe *sqe, struct pcore_cqe *cqe)
{
    memset(cqe, 0, sizeof *cqe);
    cqe->status = 1;
    int rc = rc_submit(c, sqe);
    if (rc < 0)
        return rc;
    rc = rc_reap(c, cqe, 10000);
    if (rc < 0)
        return rc;
    if (cqe->tag != sqe->tag)
        return PAGED_E_PROTO;
    return cqe->status;
}

/* A NOP round trip; returns its status. */
int rc_nop(struct rc_client *c)
{
    struct pcore_sqe s;
    struct pcore_cqe q;
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_NOP;
    s.tag = 0x4e4f50u + c->seq++;
    return rc_call(c, &s, &q);
}

/* Waits for an unsolicited message of type; returns 1, 0 on timeout, or an error. */
int rc_wait_msg(struct rc_client *c, uint32_t type, int timeout_ms, void *out, size_t outmax)
{
    static unsigned char buf[PCORE_MSG_MAX];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 10000; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long spent = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        if (spent >= timeout_ms)
            return 0;
        int fds[4], nfds = 0;
        long n = recv_msg(c->sock, buf, sizeof buf, fds, &nfds, (int) (timeout_ms - spent));
        for (int k = 0; k < nfds; k++)
            close(fds[k]);
        if (n == PAGED_E_TIMEOUT)
            return 0;
        if (n < 0)
            return (int) n;
        struct pcore_msg_hdr h;
        memcpy(&h, buf, sizeof h);
        if (h.type == PCORE_MSG_SHUTDOWN)
            c->got_shutdown = 1;
        if (h.type == type) {
            if (out != NULL)
                memcpy(out, buf, (size_t) n < outmax ? (size_t) n : outmax);
            return 1;
        }
    }
    return 0;
}
