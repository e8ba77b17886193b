/* events.c: EVENT messages to subscribers: announcements, the count of those missed, evictions. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/events.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "daemon/server.h"

/* Fills *e as an event of type event about client c (may be NULL) and pool, now; returns
 * nothing. */
static void make_event(struct pcore_msg_event *e, uint32_t event, const struct pd_conn *c, const char *pool,
                       uint32_t count)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(e, 0, sizeof *e);
    e->hdr.type = PCORE_MSG_EVENT;
    e->hdr.len = sizeof *e;
    e->event = event;
    e->count = count;
    e->time_ns = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
    if (c != NULL) {
        e->client_id = c->id;
        e->pid = (uint32_t) c->pid;
        memcpy(e->client_name, c->name, sizeof e->client_name);
    }
    snprintf(e->pool, sizeof e->pool, "%s", pool != NULL ? pool : "");
}

/* Tells subscriber k how many events it missed since it was last told, if any and if its
 * queue has room (the LOST event itself is never dropped). Returns 0, or -1 when k was
 * killed. */
static int report_lost(struct pd_server *srv, struct pd_conn *k)
{
    if (k->events_unreported == 0 || !pd_conn_has_room(k))
        return 0;
    struct pcore_msg_event e;
    make_event(&e, PCORE_EVENT_LOST, NULL, "", k->events_unreported);
    k->events_unreported = 0;
    int rc = pd_conn_send(k, &e, sizeof e, NULL, 0, 0);
    if (rc == PAGED_E_DISCONNECTED || rc == PAGED_E_NOMEM || rc == PAGED_E_SYSTEM) {
        pd_server_kill(srv, k, PD_LOG_INFO, "hung up");
        return -1;
    }
    return 0;
}

/* Tells c of the events it missed once its queue has drained; see events.h. */
void pd_events_report_lost(struct pd_server *srv, struct pd_conn *c)
{
    if (c->subscribed && c->state == PD_CONN_READY && c->out_head == NULL)
        (void) report_lost(srv, c);
}

/* Returns whether subscriber k wants event about client c: the comings and goings of an
 * inspection connection only where k asked for them. */
static int wanted(const struct pd_conn *k, uint32_t event, const struct pd_conn *c)
{
    if (c == NULL || !c->inspect || (k->subscribe_flags & PCORE_SUBSCRIBE_INSPECT) != 0)
        return 1;
    return event != PCORE_EVENT_CONNECT && event != PCORE_EVENT_DISCONNECT;
}

/* Announces an event to every subscriber that wants it; returns nothing. */
void pd_events_announce(struct pd_server *srv, uint32_t event, const struct pd_conn *c,
                        const char *pool, uint32_t count)
{
    struct pcore_msg_event e;
    int made = 0;
    for (struct pd_conn *k = srv->conns; k != NULL; k = k->next) {
        if (!k->subscribed || k->state != PD_CONN_READY || !wanted(k, event, c))
            continue;
        if (!made) {
            make_event(&e, event, c, pool, count);
            made = 1;
        }
        /* What it missed comes first, so that it reads the gap where the gap is. */
        if (report_lost(srv, k) < 0)
            continue;
        int rc = pd_conn_send(k, &e, sizeof e, NULL, 0, 1);
        if (rc == PAGED_E_DISCONNECTED || rc == PAGED_E_NOMEM)
            pd_server_kill(srv, k, PD_LOG_INFO, "hung up");
        else
            pd_server_watch(srv, k);   /* a queue started here drains when k can take it */
    }
}

/* Announces a pool's evictions since the last call; returns nothing. */
void pd_events_flush_evictions(struct pd_server *srv, struct pd_pool *p)
{
    if (p->evicted_pending == 0)
        return;
    uint32_t n = p->evicted_pending;
    p->evicted_pending = 0;
    pd_log(PD_LOG_DEBUG, "pool '%s': %u cached blocks evicted", p->name, n);
    pd_events_announce(srv, PCORE_EVENT_EVICT, NULL, p->name, n);
}
