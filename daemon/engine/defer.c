/* defer.c: the engine's withheld completions: a deferred batch's, posted once the device has run it. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include "daemon/engine/internal.h"
#include "lib/core/clock.h"
#include "lib/core/wake.h"

/* Returns the live, ready connection deferred completion d is for, or NULL. */
static struct pd_conn *deferred_conn(const struct pd_engine *e, const struct eng_deferred *d)
{
    for (struct pd_conn *c = eng_conns(e); c != NULL; c = c->next)
        if (c == d->c && c->id == d->conn_id)
            return c->state == PD_CONN_READY && c->ch != NULL ? c : NULL;
    return NULL;
}

/* Disconnects c, whose completion ring's indices are corrupt; returns nothing. */
void pd_eng_kill_corrupt(const struct pd_engine *e, struct pd_conn *c)
{
    pd_conn_error(c, 0, PAGED_E_RING, "ring indices corrupt: the submission tail is more "
                  "than the ring's capacity ahead, or the completion head moved wrongly");
    e->env->kill(e->env->ctx, c, PD_LOG_WARNING, "corrupt ring indices (PAGED_E_RING)");
}

/* Wakes c's completion waiter if it sleeps; returns 1 when that took a system call. */
int pd_eng_wake_client(const struct pd_engine *e, struct pd_conn *c)
{
    return (e->env->sigpipe_ignored ? pcore_wake_notify_sigpipe_ignored : pcore_wake_notify)(&c->ch->cq,
                                                                                          c->ch->cq_notify) == 1;
}

/*
 * Posts the completions withheld in def[first, end), which belong to connection c (NULL: gone,
 * they are only counted) and one batch whose device status is rc (PAGED_OK or a paged_error
 * that fails its backend ops), in their order; at now. Returns how many it posted, and sets
 * *corrupt when c's completion ring turned out corrupt.
 */
static uint32_t post_deferred(struct pd_engine *e, struct pd_conn *c, uint32_t first, uint32_t end, int rc,
                              uint64_t now, int *corrupt)
{
    uint32_t k = 0;
    int decoded = 0;
    *corrupt = 0;
    for (uint32_t i = first; i < end; i++) {
        struct eng_deferred *d = &e->def[i];
        decoded |= d->cqe.opcode == PAGED_OP_DECODE;
        if (d->backend_op && d->cqe.status >= 0) {
            d->cqe.status = rc;
            if (rc >= 0)
                d->cqe.count = d->count;
        }
        d->cqe.value = now - d->t0;
        pd_stats_record(e->env->stats, d->cqe.opcode, d->cqe.status, d->tokens, d->kv_bytes, now - d->t0);
        if (c == NULL)
            continue;
        c->requests++;
        c->errors += d->cqe.status < 0;
        void *slot = *corrupt ? NULL : pcore_ring_prod_slot(&c->ch->cq, k);
        if (slot != NULL) {
            memcpy(slot, &d->cqe, sizeof d->cqe);
            k++;
        } else
            *corrupt = 1;
    }
    if (c == NULL)
        return 0;
    c->deferred = 0;
    c->engine_awaited = decoded;
    if (k != 0 && pcore_ring_prod_publish(&c->ch->cq, k) < 0) {
        *corrupt = 1;
        return 0;
    }
    return k;
}

/* Posts the withheld completions whose batches the backend has finished (or lost to a device
 * fault), oldest first, each client's in its ring order, then wakes each of those clients
 * once, or (later) leaves the wake-ups to pd_eng_wake_retired. Returns how many completions
 * it posted. */
unsigned pd_eng_retire_deferred(struct pd_engine *e, int later)
{
    if (e->ndef == 0)
        return 0;
    uint64_t now = pcore_now_ns();
    uint32_t n = 0;
    unsigned posted = 0;
    struct pd_conn **wake = e->wake;
    unsigned nwake = e->nwake;
    while (n < e->ndef) {
        const uint64_t ticket = e->def[n].ticket;
        int rc = e->env->backend->ops->done(e->env->backend, ticket);
        if (rc == 0)
            break;                  /* still running, and every later batch queued behind it */
        if (rc > 0)
            rc = PAGED_OK;
        uint32_t end = n;
        while (end < e->ndef && e->def[end].ticket == ticket)
            end++;
        for (uint32_t i = n; i < end;) {
            uint32_t j = i + 1;     /* a client's completions lie together, in ring order */
            while (j < end && e->def[j].c == e->def[i].c && e->def[j].conn_id == e->def[i].conn_id)
                j++;
            int corrupt = 0;
            struct pd_conn *c = deferred_conn(e, &e->def[i]);
            uint32_t k = post_deferred(e, c, i, j, rc, now, &corrupt);
            posted += k;
            if (k != 0 && nwake < PD_ENG_WAKES)
                wake[nwake++] = c;
            else if (k != 0)
                e->host.retire_wakes += pd_eng_wake_client(e, c);
            if (corrupt)
                pd_eng_kill_corrupt(e, c);
            i = j;
        }
        n = end;
    }
    memmove(e->def, e->def + n, (size_t) (e->ndef - n) * sizeof *e->def);
    e->ndef -= n;
    e->nwake = nwake;
    if (!later)
        pd_eng_wake_retired(e);
    return posted;
}

/* Wakes the clients whose withheld completions were posted since the last call, once each;
 * returns nothing. */
void pd_eng_wake_retired(struct pd_engine *e)
{
    if (e->nwake == 0)
        return;
    /* Every completion is visible before the first wake-up's system call (as in pass()). */
    uint64_t w0 = pcore_now_ns();
    for (unsigned i = 0; i < e->nwake; i++)
        if (e->wake[i]->state == PD_CONN_READY && e->wake[i]->ch != NULL)
            e->host.retire_wakes += pd_eng_wake_client(e, e->wake[i]);
    e->host.retire_wake_ns += pcore_now_ns() - w0;
    e->nwake = 0;
}

/*
 * Withholds the completions of client record r of a pass whose batch the backend deferred
 * with ticket, in its ring order, and marks the client as having work in flight. The caller
 * has made room in def. Returns nothing.
 */
void pd_eng_defer_client(struct pd_engine *e, struct eng_client *r, uint64_t ticket)
{
    for (uint32_t j = r->first; j != NONE; j = e->items[j].next) {
        struct eng_item *it = &e->items[j];
        struct eng_deferred *d = &e->def[e->ndef++];
        *d = (struct eng_deferred) {
            .cqe = it->cqe, .c = r->c, .conn_id = r->c->id,
            .backend_op = pv_backend_op(it->op.opcode), .count = it->op.count,
            .ticket = ticket, .t0 = r->t0, .tokens = it->op.tokens, .kv_bytes = it->op.kv_bytes,
        };
        d->cqe.status = it->status;
        pv_op_free(&it->op);
    }
    r->posted = 0;
    r->c->deferred = 1;
    r->c->early_inflight = 1;
}
