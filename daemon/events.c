/* events.c: EVENT messages to subscribers: announcements, the count of those missed, evictions. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/events.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "daemon/server.h"

_Static_assert(PD_BLOCK_STORED == PAGED_BLOCK_STORED && PD_BLOCK_OFFLOADED == PAGED_BLOCK_OFFLOADED
               && PD_BLOCK_RELOADED == PAGED_BLOCK_RELOADED && PD_BLOCK_REMOVED == PAGED_BLOCK_REMOVED,
               "the daemon's block actions are paged.h's");
_Static_assert(PD_TIER_POOL == PAGED_TIER_POOL && PD_TIER_HOST == PAGED_TIER_HOST && PD_TIER_FILE == PAGED_TIER_FILE,
               "the daemon's tiers are paged.h's");

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

/* Adds n to the events k missed, saturating; returns nothing. */
static void count_unreported(struct pd_conn *k, uint64_t n)
{
    uint64_t sum = (uint64_t) k->events_unreported + n;
    k->events_unreported = sum > UINT32_MAX ? UINT32_MAX : (uint32_t) sum;
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

/* Returns whether k is a subscriber that asked for block events. */
static int block_subscriber(const struct pd_conn *k)
{
    return k->subscribed && k->state == PD_CONN_READY && (k->subscribe_flags & PCORE_SUBSCRIBE_BLOCKS) != 0;
}

/* Returns whether some subscriber asked for block events; see events.h. */
int pd_events_blocks_wanted(const struct pd_server *srv)
{
    for (const struct pd_conn *k = srv->conns; k != NULL; k = k->next)
        if (block_subscriber(k))
            return 1;
    return 0;
}

/* Turns every pool's block log on or off as the subscribers ask; see events.h. */
void pd_events_blocks_update(struct pd_server *srv)
{
    const int want = pd_events_blocks_wanted(srv);
    if (want == srv->block_events)
        return;
    srv->block_events = want;
    for (struct pd_pool *p = srv->pools; p != NULL; p = p->next) {
        p->blocklog.enabled = want;
        if (!want)
            pd_blocklog_clear(&p->blocklog);
    }
    pd_log(PD_LOG_DEBUG, "block events: recording %s", want ? "on" : "off");
}

/* A BLOCKS event with room for the most entries one message carries. */
struct blocks_msg {
    struct pcore_msg_event e;
    struct pcore_block_entry b[PCORE_EVENT_MAX_BLOCKS];
};

_Static_assert(offsetof(struct blocks_msg, b) == sizeof(struct pcore_msg_event),
               "block entries follow the event with no padding");

/* Sends k the n entries in m (of pool p, made already); a message k cannot queue counts each
 * of its entries as missed. Returns 0, or -1 when k was killed. */
static int send_blocks(struct pd_server *srv, struct pd_conn *k, struct blocks_msg *m, uint32_t n)
{
    m->e.count = n;
    m->e.hdr.len = (uint32_t) (sizeof m->e + (size_t) n * sizeof m->b[0]);
    int rc = pd_conn_send(k, m, m->e.hdr.len, NULL, 0, 1);
    if (rc == PAGED_E_DISCONNECTED || rc == PAGED_E_NOMEM) {
        pd_server_kill(srv, k, PD_LOG_INFO, "hung up");
        return -1;
    }
    if (rc == PAGED_E_AGAIN)
        count_unreported(k, n - 1);    /* pd_conn_send counted the message as one */
    pd_server_watch(srv, k);
    return 0;
}

/* Sends block subscriber k the entries of p's log that it may see, in order, in messages of
 * at most PCORE_EVENT_MAX_BLOCKS entries, after a LOST event for what it missed. Returns
 * nothing. */
static void flush_blocks_to(struct pd_server *srv, struct pd_conn *k, struct pd_pool *p, struct blocks_msg *m)
{
    const struct pd_blocklog *log = &p->blocklog;
    count_unreported(k, log->lost);
    if (report_lost(srv, k) < 0)
        return;
    uint32_t n = 0;
    for (uint32_t i = 0; i < log->n; i++) {
        const struct pd_block_event *ev = &log->ev[i];
        if (!pd_pool_may_see_tenant(p, k->uid, ev->tenant))
            continue;
        m->b[n++] = (struct pcore_block_entry) {
            .action = ev->action, .tier = ev->tier, .tenant = ev->tenant, .hash = ev->hash,
        };
        if (n == PCORE_EVENT_MAX_BLOCKS) {
            if (send_blocks(srv, k, m, n) < 0)
                return;
            n = 0;
        }
    }
    if (n > 0)
        (void) send_blocks(srv, k, m, n);
}

/* Sends a pool's recorded block events to the block subscribers and clears its log; see
 * events.h. */
void pd_events_flush_blocks(struct pd_server *srv, struct pd_pool *p)
{
    /* A subscriber killed while its events are sent may release pools, which flush: the
     * log being sent is sent once. */
    static const struct pd_pool *flushing;
    struct pd_blocklog *log = &p->blocklog;
    if ((log->n == 0 && log->lost == 0) || flushing == p)
        return;
    static struct blocks_msg m;
    const struct pd_pool *outer = flushing;
    flushing = p;
    make_event(&m.e, PCORE_EVENT_BLOCKS, NULL, p->name, 0);
    for (struct pd_conn *k = srv->conns; k != NULL; k = k->next)
        if (block_subscriber(k))
            flush_blocks_to(srv, k, p, &m);
    pd_blocklog_clear(log);
    flushing = outer;
}
