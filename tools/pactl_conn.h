/* pactl_conn.h: pactl's connection to pagedd: the control-only handshake and request/reply. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_PACTL_CONN_H
#define PAGED_TOOLS_PACTL_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/core/proto.h"

/* How long pactl waits for any one reply before it gives up, in milliseconds. */
#define PACTL_REPLY_TIMEOUT_MS 10000

/*
 * Errors come back as -1 with *cause set to a malloc'd sentence (no "pactl: " prefix and
 * no newline) that the caller prints and frees: "no daemon listening on /run/paged/pagedd.sock
 * (is pagedd running?)".
 */

struct pactl_conn {
    int fd;
    uint32_t seq;                   /* number of the last request sent */
    const char *path;
    uint32_t client_id;             /* what the daemon calls us */
    char daemon_version[33];
    unsigned char *buf;             /* PCORE_MSG_MAX bytes for replies */
};

/*
 * Connects to the daemon at path and performs a control-only HELLO that marks the connection
 * as an inspection (PCORE_HELLO_CONTROL | PCORE_HELLO_INSPECT; again without INSPECT where
 * a daemon that predates it refuses the flag as malformed).
 * Returns 0, or -1 with *cause for: nobody listening, a path that is not a pagedd socket
 * (a file of another kind, a socket of another type, a peer that answers something other
 * than WELCOME or ERROR), a protocol version mismatch, a refusal the daemon explains,
 * or a system error.
 */
int pactl_conn_open(struct pactl_conn *c, const char *path, char **cause);

/* Closes the connection and frees its buffer; safe on a connection that failed to open. */
void pactl_conn_close(struct pactl_conn *c);

/*
 * Sends a request of len bytes starting with a struct pcore_msg_hdr whose type is set;
 * fills in seq and len. Returns 0 or -1 with *cause.
 */
int pactl_conn_send(struct pactl_conn *c, void *msg, size_t len, char **cause);

/*
 * Receives the next message answering the last request, waiting up to timeout_ms
 * (negative: forever), skipping unsolicited EVENTs. A reply of type ERROR becomes -1 with
 * the daemon's message as *cause, SHUTDOWN -1 with "the daemon is shutting down". Checks
 * that the header's length matches what arrived and is at least a header. Returns a
 * pointer to the message in the connection's buffer (valid until the next receive) and
 * stores its length, or NULL with *cause.
 */
const struct pcore_msg_hdr *pactl_conn_reply(struct pactl_conn *c, int timeout_ms, size_t *len,
                                             char **cause);

/*
 * Receives the next message of any kind, answered or not (subscribe uses this for events),
 * waiting up to timeout_ms. Returns it as pactl_conn_reply does, without interpreting
 * ERROR or SHUTDOWN; NULL with *cause on a timeout, hang-up or malformed packet.
 */
const struct pcore_msg_hdr *pactl_conn_recv(struct pactl_conn *c, int timeout_ms, size_t *len,
                                            char **cause);

/*
 * Sends a request and waits for its reply, which must be of type want and at least
 * min_len bytes. Returns the reply (in the connection's buffer) and its length, or NULL
 * with *cause.
 */
const struct pcore_msg_hdr *pactl_conn_call(struct pactl_conn *c, void *req, size_t req_len,
                                            uint32_t want, size_t min_len, size_t *len,
                                            char **cause);

/* Formats a cause into a fresh string (never NULL: pactl gives up if memory runs out). */
char *pactl_cause(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
