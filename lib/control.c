/* control.c: libpaged's side of the control socket: request/reply with timeouts, unsolicited messages. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/client.h"
#include "lib/core/clock.h"
#include "lib/core/sock.h"

/* Sets c->err from a format. */
void pc_set_err(paged_client *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

/* Returns the deadline timeout_ms from now, or UINT64_MAX for none. */
uint64_t pc_deadline(int timeout_ms)
{
    if (timeout_ms < 0)
        return UINT64_MAX;
    return pcore_now_ns() + (uint64_t) timeout_ms * 1000000u;
}

/* Returns the milliseconds left until deadline, rounded up, or -1 for no deadline. */
int pc_ms_left(uint64_t deadline)
{
    if (deadline == UINT64_MAX)
        return -1;
    uint64_t now = pcore_now_ns();
    if (now >= deadline)
        return 0;
    uint64_t ms = (deadline - now + 999999u) / 1000000u;
    return ms > INT32_MAX ? INT32_MAX : (int) ms;
}

/* Closes n received descriptors. */
static void close_fds(const int *fds, int n)
{
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

/* Records that the connection is gone (or going) with err, keeping the first reason. */
static int mark_dead(paged_client *c, int err)
{
    if (c->dead == 0)
        c->dead = err;
    return c->dead;
}

/*
 * Handles a message nobody asked for, or a late reply: SHUTDOWN marks the client, an ERROR
 * without a request number keeps its text, the rest is dropped. Returns c->dead.
 */
static int handle_unsolicited(paged_client *c, const struct pcore_msg_hdr *h, size_t n)
{
    if (h->type == PCORE_MSG_SHUTDOWN) {
        pc_set_err(c, "the daemon is shutting down");
        return mark_dead(c, PAGED_E_SHUTDOWN);
    }
    if (h->type == PCORE_MSG_ERROR && h->seq == 0 && n >= sizeof(struct pcore_msg_error)) {
        /* An error answering no request: the daemon refusing the connection (a HELLO it
         * will not take, corrupt rings). It closes next; its reason is what we report. */
        const struct pcore_msg_error *e = (const void *) h;
        pc_set_err(c, "%.*s", (int) sizeof e->message, e->message);
        if (h->status < 0)
            c->refused = h->status;
    }
    return c->dead;
}

/*
 * Receives one message into c->msgbuf without blocking. Returns its length (at least a
 * header whose len matches), PAGED_E_AGAIN when nothing waits, or an error (the
 * connection error is recorded). Descriptors received go to fds (up to maxfds).
 */
static ssize_t recv_one(paged_client *c, int *fds, int maxfds, int *nfds)
{
    ssize_t n = pcore_sock_recv(c->sock, c->msgbuf, PCORE_MSG_MAX, fds, maxfds, nfds);
    if (n == PAGED_E_AGAIN)
        return n;
    if (n == PAGED_E_DISCONNECTED || n == PAGED_E_SYSTEM) {
        if (c->dead == 0 && c->refused == 0)
            pc_set_err(c, "connection to the daemon lost");
        return mark_dead(c, c->refused != 0 ? c->refused : PAGED_E_DISCONNECTED);
    }
    if (n < 0)
        return n;
    const struct pcore_msg_hdr *h = (const void *) c->msgbuf;
    if ((size_t) n < sizeof *h || h->len != (uint32_t) n) {
        close_fds(fds, *nfds);
        *nfds = 0;
        pc_set_err(c, "malformed control message from the daemon (%zd bytes)", n);
        return PAGED_E_PROTO;
    }
    return n;
}

/* Drains the socket without blocking; see client.h. */
int pc_conn_check(paged_client *c)
{
    /* Bounded: a daemon flooding events cannot keep us here. */
    for (int i = 0; i < 64 && c->dead == 0; i++) {
        int fds[PSOCK_MAX_FDS], nfds = 0;
        ssize_t n = recv_one(c, fds, PSOCK_MAX_FDS, &nfds);
        if (n == PAGED_E_AGAIN)
            break;
        if (n < 0) {
            if (c->dead != 0)
                break;
            continue; /* one malformed message: drop it */
        }
        close_fds(fds, nfds);
        handle_unsolicited(c, (const void *) c->msgbuf, (size_t) n);
    }
    return c->dead;
}

/* Sends one message, waiting for room until deadline. Returns PAGED_OK or an error. */
static int send_until(paged_client *c, const void *msg, size_t len, uint64_t deadline)
{
    for (;;) {
        int rc = pcore_sock_send(c->sock, msg, len, NULL, 0);
        if (rc != PAGED_E_AGAIN) {
            if (rc == PAGED_E_DISCONNECTED) {
                /* A daemon that shut down said so before it closed: read what it left, so
                 * that the caller learns PAGED_E_SHUTDOWN rather than a lost connection. */
                pc_conn_check(c);
                if (c->dead == 0)
                    pc_set_err(c, "connection to the daemon lost");
                return mark_dead(c, rc);
            }
            return rc;
        }
        struct pollfd p = { .fd = c->sock, .events = POLLOUT };
        int left = pc_ms_left(deadline);
        if (left == 0)
            return PAGED_E_TIMEOUT;
        if (poll(&p, 1, left) < 0 && errno != EINTR)
            return PAGED_E_SYSTEM;
    }
}

/* Sends a control request and waits for its reply; see client.h. */
int pc_ctl_call(paged_client *c, void *msg, size_t len, uint32_t want, void *reply,
                size_t reply_size, int *fds, int maxfds, int *nfds)
{
    *nfds = 0;
    if (c->dead != 0)
        return c->dead;
    struct pcore_msg_hdr *h = msg;
    if (++c->ctl_seq == 0)
        c->ctl_seq = 1; /* 0 marks messages that answer nothing */
    h->seq = c->ctl_seq;
    h->status = 0;
    h->len = (uint32_t) len;
    uint64_t deadline = pc_deadline(c->timeout_ms);
    int rc = send_until(c, msg, len, deadline);
    if (rc < 0)
        return rc;
    for (;;) {
        int left = pc_ms_left(deadline);
        rc = pcore_sock_wait_readable(c->sock, left);
        if (rc == PAGED_E_TIMEOUT) {
            pc_set_err(c, "no reply from the daemon within %d ms", c->timeout_ms);
            return PAGED_E_TIMEOUT;
        }
        if (rc < 0)
            return rc;
        int got[PSOCK_MAX_FDS], ngot = 0;
        ssize_t n = recv_one(c, got, PSOCK_MAX_FDS, &ngot);
        if (n == PAGED_E_AGAIN)
            continue;
        if (n < 0) {
            if (c->dead != 0)
                return c->dead;
            return (int) n;
        }
        const struct pcore_msg_hdr *r = (const void *) c->msgbuf;
        if (r->seq != h->seq || r->type == PCORE_MSG_SHUTDOWN || r->type == PCORE_MSG_EVENT) {
            close_fds(got, ngot);
            if (handle_unsolicited(c, r, (size_t) n) != 0)
                return c->dead;
            continue;
        }
        if (r->type == PCORE_MSG_ERROR) {
            close_fds(got, ngot);
            const struct pcore_msg_error *e = (const void *) r;
            if ((size_t) n < sizeof *e || r->status >= 0) {
                pc_set_err(c, "malformed error message from the daemon");
                return PAGED_E_PROTO;
            }
            pc_set_err(c, "%.*s", (int) sizeof e->message, e->message);
            if (c->err[0] == '\0')
                pc_set_err(c, "%s", paged_strerror(r->status));
            return r->status;
        }
        if (r->type != want || (size_t) n < reply_size || ngot > maxfds) {
            close_fds(got, ngot);
            pc_set_err(c, "unexpected reply (type %u, %zd bytes) from the daemon", r->type, n);
            return PAGED_E_PROTO;
        }
        memcpy(reply, c->msgbuf, reply_size);
        memcpy(fds, got, sizeof(int) * (size_t) ngot);
        *nfds = ngot;
        return PAGED_OK;
    }
}

/* Waits for the next EVENT; see client.h. */
ssize_t pc_ctl_next_event(paged_client *c, int timeout_ms)
{
    uint64_t deadline = pc_deadline(timeout_ms);
    /* Bounded by the deadline: each turn either returns or reads a message. */
    for (;;) {
        if (c->dead != 0)
            return c->dead;
        int fds[PSOCK_MAX_FDS], nfds = 0;
        ssize_t n = recv_one(c, fds, PSOCK_MAX_FDS, &nfds);
        if (n == PAGED_E_AGAIN) {
            int rc = pcore_sock_wait_readable(c->sock, pc_ms_left(deadline));
            if (rc == PAGED_E_TIMEOUT)
                return PAGED_E_TIMEOUT;
            if (rc < 0)
                return rc;
            continue;
        }
        if (n < 0) {
            if (c->dead != 0)
                return c->dead;
            return n;
        }
        close_fds(fds, nfds);
        const struct pcore_msg_hdr *h = (const void *) c->msgbuf;
        if (h->type == PCORE_MSG_EVENT)
            return n;
        handle_unsolicited(c, h, (size_t) n);
    }
}
