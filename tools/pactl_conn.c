/* pactl_conn.c: pactl's connection to pagedd: the control-only handshake and request/reply. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/pactl_conn.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/clock.h"
#include "lib/core/sock.h"
#include "paged.h"
#include "tools/pactl_fmt.h"

/* Formats a cause; pactl is a command-line tool, so running out of memory ends it here. */
char *pactl_cause(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) {
        fputs("pactl: out of memory\n", stderr);
        exit(1);
    }
    return s;
}

/* Returns the cause for a path where something other than pagedd answers. */
static char *not_ours(const char *path)
{
    return pactl_cause("%s is not a pagedd socket", path);
}

/* Returns the cause for a failed pcore_sock_connect, telling a missing daemon from a wrong file. */
static char *connect_cause(const char *path, int err)
{
    struct stat st;
    switch (err) {
    case PAGED_E_NOTCONN:
        /* connect() to a regular file is refused just like a dead socket: look at the file. */
        if (stat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
            return not_ours(path);
        return pactl_cause("no daemon listening on %s (is pagedd running?)", path);
    case PAGED_E_PROTO:
        return not_ours(path);
    case PAGED_E_PERM:
        return pactl_cause("cannot connect to %s: permission denied", path);
    case PAGED_E_INVAL:
        return pactl_cause("socket path is too long: %s", path);
    default:
        return pactl_cause("cannot connect to %s: %s", path, strerror(errno));
    }
}

/* Returns the monotonic clock (pcore_now_ns) in milliseconds. */
static int64_t now_ms(void)
{
    return (int64_t) (pcore_now_ns() / 1000000u);
}

/* Receives one packet into the connection's buffer; returns it or NULL with *cause. */
const struct pcore_msg_hdr *pactl_conn_recv(struct pactl_conn *c, int timeout_ms, size_t *len,
                                            char **cause)
{
    int fds[PSOCK_MAX_FDS];
    int nfds = 0;
    int rc = pcore_sock_wait_readable(c->fd, timeout_ms);
    if (rc == PAGED_E_TIMEOUT) {
        *cause = pactl_cause("no reply from the daemon within %d s", timeout_ms / 1000);
        return NULL;
    }
    if (rc < 0) {
        *cause = pactl_cause("waiting for the daemon: %s", strerror(errno));
        return NULL;
    }
    ssize_t n = pcore_sock_recv(c->fd, c->buf, PCORE_MSG_MAX, fds, PSOCK_MAX_FDS, &nfds);
    /* A control connection has no use for descriptors; never leak one a peer sends. */
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    if (n == PAGED_E_DISCONNECTED) {
        *cause = pactl_cause("the daemon closed the connection");
        return NULL;
    }
    if (n == PAGED_E_PROTO) {
        *cause = pactl_cause("the daemon sent a message too large to be one of ours");
        return NULL;
    }
    if (n < 0) {
        *cause = pactl_cause("reading from the daemon: %s", strerror(errno));
        return NULL;
    }
    const struct pcore_msg_hdr *h = (const struct pcore_msg_hdr *) c->buf;
    if ((size_t) n < sizeof *h || h->len != (uint32_t) n) {
        *cause = pactl_cause("malformed message from the daemon (%zd bytes)", n);
        return NULL;
    }
    *len = (size_t) n;
    return h;
}

/* Copies the message of an ERROR packet of len bytes into a cause, or names its code. */
static char *error_cause(const struct pcore_msg_hdr *h, size_t len)
{
    char text[PCORE_ERRMSG_MAX];
    const struct pcore_msg_error *e = (const struct pcore_msg_error *) h;
    size_t off = offsetof(struct pcore_msg_error, message);
    fmt_safe(text, sizeof text, len > off ? e->message : "", len > off ? len - off : 0);
    if (text[0] == '\0')
        return pactl_cause("%s", paged_strerror(h->status));
    return pactl_cause("%s", text);
}

/* Receives the answer to the last request; returns it or NULL with *cause. */
const struct pcore_msg_hdr *pactl_conn_reply(struct pactl_conn *c, int timeout_ms, size_t *len,
                                             char **cause)
{
    int64_t deadline = timeout_ms < 0 ? 0 : now_ms() + timeout_ms;
    /* Events queued before the reply are skipped; the deadline bounds the loop. */
    for (;;) {
        int left = -1;
        if (timeout_ms >= 0) {
            int64_t d = deadline - now_ms();
            left = d > 0 ? (int) d : 0;
        }
        const struct pcore_msg_hdr *h = pactl_conn_recv(c, left, len, cause);
        if (h == NULL)
            return NULL;
        if (h->type == PCORE_MSG_EVENT)
            continue;
        if (h->type == PCORE_MSG_SHUTDOWN) {
            *cause = pactl_cause("the daemon is shutting down");
            return NULL;
        }
        /* pactl has one request outstanding at a time, so any error is about it. */
        if (h->type == PCORE_MSG_ERROR) {
            *cause = error_cause(h, *len);
            return NULL;
        }
        if (h->seq != c->seq) {
            *cause = pactl_cause("the daemon answered request %u while pactl waited for %u",
                                 (unsigned) h->seq, (unsigned) c->seq);
            return NULL;
        }
        return h;
    }
}

/* Sends a request with the next sequence number; returns 0 or -1 with *cause. */
int pactl_conn_send(struct pactl_conn *c, void *msg, size_t len, char **cause)
{
    struct pcore_msg_hdr *h = msg;
    h->seq = ++c->seq;
    h->len = (uint32_t) len;
    h->status = 0;
    int rc = pcore_sock_send(c->fd, msg, len, NULL, 0);
    if (rc == PAGED_E_DISCONNECTED) {
        *cause = pactl_cause("the daemon closed the connection");
        return -1;
    }
    if (rc < 0) {
        *cause = pactl_cause("writing to the daemon: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Sends a request and checks its reply's type and size; returns it or NULL with *cause. */
const struct pcore_msg_hdr *pactl_conn_call(struct pactl_conn *c, void *req, size_t req_len,
                                            uint32_t want, size_t min_len, size_t *len,
                                            char **cause)
{
    if (pactl_conn_send(c, req, req_len, cause) < 0)
        return NULL;
    const struct pcore_msg_hdr *h = pactl_conn_reply(c, PACTL_REPLY_TIMEOUT_MS, len, cause);
    if (h == NULL)
        return NULL;
    if (h->type != want || *len < min_len) {
        *cause = pactl_cause("unexpected reply from the daemon (type %u, %zu bytes)",
                             (unsigned) h->type, *len);
        return NULL;
    }
    return h;
}

/* What handshake_reply returns for a refusal an older daemon gives a HELLO flag it does not
 * know (PAGED_E_PROTO): pactl_conn_open then says HELLO again without the flag. */
#define HANDSHAKE_RETRY (-2)

/* Interprets the daemon's answer to a HELLO with flags; returns 0, HANDSHAKE_RETRY, or -1
 * with *cause. */
static int handshake_reply(struct pactl_conn *c, const struct pcore_msg_hdr *h, size_t len,
                           uint32_t flags, char **cause)
{
    /* The first answer on a connection can only be to HELLO: a refusal may not echo its
     * sequence number (the daemon may refuse a HELLO it could not even parse). */
    if (h->type == PCORE_MSG_ERROR) {
        if (h->status == PAGED_E_PROTO && (flags & PCORE_HELLO_INSPECT) != 0)
            return HANDSHAKE_RETRY;
        char *why = error_cause(h, len);
        if (h->status == PAGED_E_VERSION)
            *cause = pactl_cause("protocol version mismatch: %s", why);
        else
            *cause = pactl_cause("the daemon refused the connection (%s): %s", paged_strerror(h->status), why);
        free(why);
        return -1;
    }
    if (h->type != PCORE_MSG_WELCOME || len < sizeof(struct pcore_msg_welcome)) {
        *cause = not_ours(c->path);
        return -1;
    }
    const struct pcore_msg_welcome *w = (const struct pcore_msg_welcome *) h;
    if (h->status == PAGED_E_VERSION || w->version != PCORE_PROTO_VERSION) {
        *cause = pactl_cause("protocol version mismatch: the daemon speaks version %u, "
                             "pactl version %u", (unsigned) w->version, PCORE_PROTO_VERSION);
        return -1;
    }
    if (h->status < 0) {
        *cause = pactl_cause("the daemon refused the connection: %s", paged_strerror(h->status));
        return -1;
    }
    c->client_id = w->client_id;
    fmt_safe(c->daemon_version, sizeof c->daemon_version, w->daemon_version,
             sizeof w->daemon_version);
    return 0;
}

/* Connects to c->path and says HELLO with flags; returns 0, HANDSHAKE_RETRY (the socket
 * closed), or -1 with *cause. */
static int hello(struct pactl_conn *c, uint32_t flags, char **cause)
{
    int fd = pcore_sock_connect(c->path);
    if (fd < 0) {
        *cause = connect_cause(c->path, fd);
        return -1;
    }
    c->fd = fd;

    struct pcore_msg_hello hello;
    memset(&hello, 0, sizeof hello);
    hello.hdr.type = PCORE_MSG_HELLO;
    hello.magic = PCORE_HELLO_MAGIC;
    hello.version = PCORE_PROTO_VERSION;
    hello.flags = flags;
    hello.pid = (uint32_t) getpid();
    snprintf(hello.name, sizeof hello.name, "pactl");
    /* A daemon that refuses a connection at once (a limit) may have closed before the HELLO
     * went: its ERROR is still there to read, at once. */
    int timeout_ms = PACTL_REPLY_TIMEOUT_MS;
    if (pactl_conn_send(c, &hello, sizeof hello, cause) < 0) {
        free(*cause);
        *cause = NULL;
        timeout_ms = 0;
    }
    size_t len;
    const struct pcore_msg_hdr *h = pactl_conn_recv(c, timeout_ms, &len, cause);
    if (h == NULL) {
        /* Silence, a hang-up or a malformed packet: whatever listens there is not pagedd. */
        free(*cause);
        *cause = not_ours(c->path);
        return -1;
    }
    int rc = handshake_reply(c, h, len, flags, cause);
    if (rc == HANDSHAKE_RETRY) {
        close(c->fd);
        c->fd = -1;
        c->seq = 0;
    }
    return rc;
}

/* Connects and says HELLO as an inspection connection, or as a plain control connection to
 * a daemon that predates the flag; returns 0 or -1 with *cause. */
int pactl_conn_open(struct pactl_conn *c, const char *path, char **cause)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->path = path;
    c->buf = malloc(PCORE_MSG_MAX);
    if (c->buf == NULL) {
        *cause = pactl_cause("out of memory");
        return -1;
    }
    int rc = hello(c, PCORE_HELLO_CONTROL | PCORE_HELLO_INSPECT, cause);
    if (rc == HANDSHAKE_RETRY)
        rc = hello(c, PCORE_HELLO_CONTROL, cause);
    return rc;
}

/* Closes the socket and frees the buffer. */
void pactl_conn_close(struct pactl_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
}
