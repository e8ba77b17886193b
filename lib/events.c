/* events.c: paged_events: a subscription to the daemon's events, block events included. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "lib/client.h"

_Static_assert(PAGED_EVENTS_INSPECT == PCORE_SUBSCRIBE_INSPECT && PAGED_EVENTS_BLOCKS == PCORE_SUBSCRIBE_BLOCKS,
               "paged_events_open's flags are SUBSCRIBE's");
_Static_assert((int) PAGED_EVENT_BLOCKS == (int) PCORE_EVENT_BLOCKS && (int) PAGED_EVENT_LOST == (int) PCORE_EVENT_LOST
               && (int) PAGED_EVENT_EXPIRE == (int) PCORE_EVENT_EXPIRE, "paged_event_type is the wire's");

struct paged_events {
    paged_client *c;           /* a control-only client: the socket, its messages, errors */
    paged_block_event blocks[PCORE_EVENT_MAX_BLOCKS];  /* the last BLOCKS event's entries */
};

/* Subscribes: sends SUBSCRIBE with flags and waits for its OK. Returns PAGED_OK or an
 * error; a daemon that refuses the flags as unknown gives PAGED_E_NOTSUP. */
static int subscribe(paged_client *c, unsigned flags)
{
    struct pcore_msg_subscribe m = { .hdr.type = PCORE_MSG_SUBSCRIBE, .flags = flags };
    struct pcore_msg_hdr reply;
    int fds[1], nfds = 0;
    int rc = pc_ctl_call(c, &m, sizeof m, PCORE_MSG_OK, &reply, sizeof reply, fds, 0, &nfds);
    if (rc == PAGED_E_INVAL && flags != 0) {
        pc_set_err(c, "the daemon does not know SUBSCRIBE flags 0x%x (%s)", flags, c->err);
        return PAGED_E_NOTSUP;
    }
    return rc;
}

/* Opens a subscription; see paged.h. */
int paged_events_open(const char *socket_path, unsigned flags, paged_events **out)
{
    if (out == NULL)
        return PAGED_E_INVAL;
    *out = NULL;
    if ((flags & ~(PAGED_EVENTS_INSPECT | PAGED_EVENTS_BLOCKS)) != 0)
        return PAGED_E_INVAL;
    paged_events *ev = calloc(1, sizeof *ev);
    if (ev == NULL)
        return PAGED_E_NOMEM;
    int rc = pc_connect_control(socket_path, "paged_events", &ev->c, NULL, 0);
    if (rc == PAGED_OK)
        rc = subscribe(ev->c, flags);
    if (rc < 0) {
        paged_events_close(ev);
        return rc;
    }
    *out = ev;
    return PAGED_OK;
}

/* Copies the entries of a BLOCKS event of len bytes at msg into ev->blocks and out. Returns
 * PAGED_OK, or PAGED_E_PROTO when its count and length disagree. */
static int take_blocks(paged_events *ev, const unsigned char *msg, size_t len, paged_event *out)
{
    const size_t fixed = sizeof(struct pcore_msg_event);
    if (out->count == 0 || out->count > PCORE_EVENT_MAX_BLOCKS
        || len != fixed + (size_t) out->count * sizeof(struct pcore_block_entry)) {
        pc_set_err(ev->c, "BLOCKS event of %zu bytes with %u entries", len, out->count);
        return PAGED_E_PROTO;
    }
    for (uint32_t i = 0; i < out->count; i++) {
        struct pcore_block_entry b;
        memcpy(&b, msg + fixed + (size_t) i * sizeof b, sizeof b);
        ev->blocks[i] = (paged_block_event) { .action = b.action, .tier = b.tier, .tenant = b.tenant,
                                              .hash = b.hash };
    }
    out->blocks = ev->blocks;
    out->num_blocks = out->count;
    return PAGED_OK;
}

/* Waits for the next event; see paged.h. */
int paged_events_next(paged_events *ev, paged_event *out, int timeout_ms)
{
    if (ev == NULL || out == NULL)
        return PAGED_E_INVAL;
    ssize_t n = pc_ctl_next_event(ev->c, timeout_ms);
    if (n < 0)
        return (int) n;
    struct pcore_msg_event e;
    if ((size_t) n < sizeof e) {
        pc_set_err(ev->c, "event of %zd bytes, shorter than %zu", n, sizeof e);
        return PAGED_E_PROTO;
    }
    memcpy(&e, ev->c->msgbuf, sizeof e);
    memset(out, 0, sizeof *out);
    out->type = e.event;
    out->client_id = e.client_id;
    out->pid = e.pid;
    out->count = e.count;
    out->time_ns = e.time_ns;
    memcpy(out->client_name, e.client_name, sizeof out->client_name);
    memcpy(out->pool, e.pool, sizeof out->pool);
    out->client_name[sizeof out->client_name - 1] = '\0';
    out->pool[sizeof out->pool - 1] = '\0';
    if (e.event == PCORE_EVENT_BLOCKS)
        return take_blocks(ev, ev->c->msgbuf, (size_t) n, out);
    if ((size_t) n != sizeof e) {
        pc_set_err(ev->c, "event type %u of %zd bytes, not %zu", e.event, n, sizeof e);
        return PAGED_E_PROTO;
    }
    return PAGED_OK;
}

/* Returns the subscription's socket. */
int paged_events_fd(const paged_events *ev)
{
    return ev != NULL ? ev->c->sock : -1;
}

/* Returns the last error's reason. */
const char *paged_events_error(const paged_events *ev)
{
    return ev != NULL ? ev->c->err : "";
}

/* Closes the subscription. */
void paged_events_close(paged_events *ev)
{
    if (ev == NULL)
        return;
    paged_client_close(ev->c);
    free(ev);
}
