/* submit.c: the asynchronous API: prepare, submit, reap and wait, over the client's two rings. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <string.h>

#include "lib/client.h"
#include "lib/core/clock.h"
#include "lib/core/names.h"

/* Polls the clock only every this many spin iterations. */
#define PC_SPIN_CLOCK_EVERY 64u

/* Returns the name of an opcode from the core's table, or "op?" for an unknown one. */
const char *pc_op_name(unsigned op)
{
    const char *name = pcore_op_name(op);
    return name != NULL ? name : "op?";
}

/* Marks the client's ring traffic as broken for good; returns PAGED_E_RING. */
static int ring_broken(paged_client *c, const char *what)
{
    if (c->dead == 0) {
        c->dead = PAGED_E_RING;
        pc_set_err(c, "completion ring: %s", what);
    }
    return PAGED_E_RING;
}

/* Returns whether one more request may take a slot. */
int pc_slot_room(const paged_client *c)
{
    uint32_t used = c->cq_entries - c->nfree;
    return c->nfree > 0 && used + c->q_len < c->cq_entries;
}

/* Frees a slot. */
void pc_slot_put(paged_client *c, uint32_t idx)
{
    c->slots[idx].state = PC_SLOT_FREE;
    c->free_slots[c->nfree++] = idx;
}

/* Takes a slot and writes sqe into the SQ unpublished; see client.h. */
int pc_prep_sqe(paged_client *c, struct pcore_sqe *sqe, int state, uint64_t user_tag)
{
    if (c->dead != 0)
        return c->dead;
    if (!pc_slot_room(c))
        return PAGED_E_AGAIN;
    int space = pcore_ring_prod_space(&c->sq, c->prepared + 1);
    if (space < 0) {
        c->dead = PAGED_E_RING;
        pc_set_err(c, "submission ring: the daemon's head index is corrupt");
        return PAGED_E_RING;
    }
    if ((uint32_t) space < c->prepared + 1)
        return PAGED_E_AGAIN;
    uint32_t idx = c->free_slots[--c->nfree];
    struct pc_slot *s = &c->slots[idx];
    s->gen++;
    s->state = (uint8_t) state;
    s->op = sqe->opcode;
    s->published = 0;
    s->done = 0;
    s->user_tag = user_tag;
    sqe->tag = (uint64_t) s->gen << 32 | idx;
    memcpy(pcore_ring_prod_slot(&c->sq, c->prepared), sqe, sizeof *sqe);
    c->prep_slots[c->prepared++] = idx;
    return (int) idx;
}

/* Publishes the prepared entries and wakes the daemon if it sleeps. */
int pc_submit(paged_client *c)
{
    uint32_t n = c->prepared;
    if (n == 0)
        return c->dead != 0 ? c->dead : 0;
    if (pcore_ring_prod_publish(&c->sq, n) < 0) {
        c->dead = PAGED_E_RING;
        pc_set_err(c, "submission ring: the daemon's head index is corrupt");
        return PAGED_E_RING;
    }
    for (uint32_t i = 0; i < n; i++) {
        struct pc_slot *s = &c->slots[c->prep_slots[i]];
        s->published = 1;
        if (s->state == PC_SLOT_USER)
            c->user_published++;
    }
    c->prepared = 0;
    int rc = pcore_wake_notify(&c->sq, c->sq_notify_fd);
    if (rc == PAGED_E_DISCONNECTED && c->dead == 0) {
        /* The daemon's end of its wake-up is closed: it died before we noticed. */
        c->dead = PAGED_E_DISCONNECTED;
        pc_set_err(c, "connection to the daemon lost");
    }
    if (rc < 0)
        return rc;
    return (int) n;
}

/*
 * Makes the completion e of a request submitted as opcode op, whose own opcode differs, that
 * request's PAGED_E_OPCODE: the daemon echoes the opcode it read, so the entry changed in the
 * shared ring after it was written, and whatever ran is not what the caller asked for. The
 * tag already names the request in flight, so the rings are sound. Returns nothing.
 */
static void opcode_changed(struct pcore_cqe *e, unsigned op)
{
    e->status = PAGED_E_OPCODE;
    e->opcode = (uint16_t) op;
    e->count = 0;
    e->err_field = PCORE_FIELD_OPCODE;
    e->err_index = 0;
}

/* Files one completion copied out of the CQ; returns PAGED_OK or PAGED_E_RING. */
static int file_cqe(paged_client *c, struct pcore_cqe *e)
{
    uint32_t idx = (uint32_t) e->tag;
    uint32_t gen = (uint32_t) (e->tag >> 32);
    if (idx >= c->cq_entries)
        return ring_broken(c, "a completion names no request of ours");
    struct pc_slot *s = &c->slots[idx];
    if (s->state == PC_SLOT_FREE || !s->published || s->gen != gen
        || (s->state == PC_SLOT_SYNC && s->done))
        return ring_broken(c, "a completion names no request in flight");
    if (s->op != e->opcode)
        opcode_changed(e, s->op);
    if (s->state == PC_SLOT_SYNC) {
        s->cqe = *e;
        s->done = 1;
        return PAGED_OK;
    }
    if (c->q_len >= c->cq_entries)
        return ring_broken(c, "more completions than requests");
    paged_completion *out = &c->queue[(c->q_head + c->q_len) % c->cq_entries];
    *out = (paged_completion) {
        .tag = s->user_tag,
        .status = e->status <= 0 ? e->status : PAGED_E_PROTO,
        .op = (paged_op) e->opcode,
        .count = e->count,
        .err_field = e->err_field,
        .err_index = e->err_index,
        .service_ns = e->value,
    };
    c->q_len++;
    c->user_published--;
    pc_slot_put(c, idx);
    return PAGED_OK;
}

/* Moves the completions ready in the CQ to their slots or the queue; see client.h. */
int pc_pump(paged_client *c)
{
    if (c->dead == PAGED_E_RING)
        return PAGED_E_RING;
    int avail = pcore_ring_cons_available(&c->cq, 1);
    if (avail < 0)
        return ring_broken(c, "the daemon's tail index is corrupt");
    for (int i = 0; i < avail; i++) {
        struct pcore_cqe e;
        /* Copied out first: the daemon's memory, read once. */
        memcpy(&e, pcore_ring_cons_entry(&c->cq, (uint32_t) i), sizeof e);
        int rc = file_cqe(c, &e);
        if (rc < 0)
            return rc;
    }
    if (avail > 0 && pcore_ring_cons_release(&c->cq, (uint32_t) avail) < 0)
        return ring_broken(c, "cannot release entries");
    return avail;
}

/* Copies up to max queued completions to out; returns how many. */
static int take_queue(paged_client *c, paged_completion *out, unsigned max)
{
    unsigned n = 0;
    while (n < max && c->q_len > 0) {
        out[n++] = c->queue[c->q_head];
        c->q_head = (c->q_head + 1) % c->cq_entries;
        c->q_len--;
    }
    return (int) n;
}

/* Sleeps (spinning first) until done(c, arg); see client.h. */
int pc_wait_until(paged_client *c, int timeout_ms, int (*done)(paged_client *, void *), void *arg)
{
    int rc = pc_pump(c);
    if (rc < 0)
        return rc;
    if (done(c, arg))
        return 1;
    if (c->dead != 0)
        return c->dead;
    uint64_t start = pcore_now_ns();
    uint64_t deadline = pc_deadline(timeout_ms);

    /* Spin: a completion a few microseconds away is not worth two system calls; unless the
     * daemon asks us not to (we are beyond the clients its CPUs can spare a spin for). */
    uint64_t budget = c->waiter.spin_ns;
    if (atomic_load_explicit(pcore_ring_word(&c->cq.ctl->consumer_nospin), memory_order_relaxed) != 0) {
        budget = 0;
        c->waiter.nospin_waits++;
    }
    if (deadline != UINT64_MAX && budget > deadline - start)
        budget = deadline - start;
    for (uint64_t i = 1; i <= budget; i++) {
        pcore_cpu_relax();
        rc = pc_pump(c);
        if (rc < 0)
            return rc;
        if (rc > 0 && done(c, arg)) {
            pcore_waiter_hit(&c->waiter);
            return 1;
        }
        if (i % PC_SPIN_CLOCK_EVERY == 0 && pcore_now_ns() - start >= budget)
            break;
    }

    for (;;) {
        if (c->dead != 0)
            return c->dead;
        pcore_wake_prepare(&c->cq);
        rc = pc_pump(c);
        if (rc < 0 || done(c, arg)) {
            pcore_wake_cancel(&c->cq);
            return rc < 0 ? rc : 1;
        }
        int left = pc_ms_left(deadline);
        if (left == 0) {
            pcore_wake_cancel(&c->cq);
            return PAGED_E_TIMEOUT;
        }
        /* The socket too: a daemon that dies or shuts down must end the wait. */
        struct pollfd p[2] = {
            { .fd = c->cq_wait_fd, .events = POLLIN },
            { .fd = c->sock, .events = POLLIN },
        };
        int n = poll(p, 2, left);
        int fin = pcore_wake_finish(&c->cq, c->cq_wait_fd);
        c->waiter.sleeps++;
        pcore_waiter_slept(&c->waiter, pcore_now_ns() - start);
        if (n < 0 && errno != EINTR)
            return PAGED_E_SYSTEM;
        if (fin < 0)
            return fin;
        if (n > 0 && ((p[0].revents | p[1].revents) & POLLNVAL))
            return PAGED_E_SYSTEM;
        if (n > 0 && p[1].revents != 0)
            pc_conn_check(c);
        rc = pc_pump(c);
        if (rc < 0)
            return rc;
        if (done(c, arg))
            return 1;
        /* A wake-up pipe whose writer is gone says hang-up for ever: the socket tells why. */
        if (n > 0 && (p[0].revents & POLLHUP) && c->dead == 0 && pc_conn_check(c) == 0) {
            c->dead = PAGED_E_DISCONNECTED;
            pc_set_err(c, "the daemon closed the completion wake-up");
        }
    }
}

/* Writes one request into the submission ring without waking the daemon. */
int paged_prep(paged_client *c, const paged_request *req)
{
    if (c == NULL || req == NULL)
        return PAGED_E_INVAL;
    struct pcore_sqe e;
    int rc = pc_encode_sqe(c, req, &e);
    if (rc < 0)
        return rc;
    rc = pc_prep_sqe(c, &e, PC_SLOT_USER, req->tag);
    return rc < 0 ? rc : PAGED_OK;
}

/* Publishes every prepared request; returns their number or an error. */
int paged_submit(paged_client *c)
{
    if (c == NULL)
        return PAGED_E_INVAL;
    return pc_submit(c);
}

/* Copies ready completions without blocking. */
int paged_reap(paged_client *c, paged_completion *out, unsigned max)
{
    if (c == NULL || (out == NULL && max > 0))
        return PAGED_E_INVAL;
    int rc = pc_pump(c);
    if (rc < 0)
        return rc;
    int n = take_queue(c, out, max);
    if (n > 0 || max == 0) {
        pcore_wake_cancel(&c->cq);
        return n;
    }
    if (pc_conn_check(c) != 0)
        return c->dead;
    /* Nothing: arm the wake-up so that paged_client_fd turns readable when something
     * comes (drained first, or a stale wake-up would make it readable for nothing). */
    if (pcore_wake_drain(c->cq_wait_fd) < 0)
        return PAGED_E_SYSTEM;
    pcore_wake_prepare(&c->cq);
    rc = pc_pump(c);
    if (rc < 0)
        return rc;
    n = take_queue(c, out, max);
    if (n > 0)
        pcore_wake_cancel(&c->cq);
    return n;
}

/* Returns whether the user queue holds a completion: paged_wait's condition. */
static int queue_ready(paged_client *c, void *arg)
{
    (void) arg;
    return c->q_len > 0;
}

/* Waits for at least one completion, then reaps up to max. */
int paged_wait(paged_client *c, paged_completion *out, unsigned max, int timeout_ms)
{
    if (c == NULL || out == NULL || max == 0)
        return PAGED_E_INVAL;
    int rc = pc_wait_until(c, timeout_ms, queue_ready, NULL);
    /* Completions the daemon posted before it went still count. */
    if (c->q_len > 0)
        return take_queue(c, out, max);
    return rc < 0 ? rc : 0;
}

/* Returns the submitted requests whose completions the caller has not reaped. */
unsigned paged_inflight(const paged_client *c)
{
    return c != NULL ? c->user_published + c->q_len : 0;
}
