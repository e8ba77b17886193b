/* fetch.c: a LOOKUP's remote part: ask the peers in order, pull the staged units, check, publish here. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "daemon/peer/internal.h"
#include "daemon/util/heap.h"
#include "daemon/util/log.h"
#include "kernels/kernels.h"

/*
 * Each fetch is a small state machine that pd_peer_fetch_step moves on at every poll of the
 * peers (and so never inside the engine's pass). ASK sends a FETCH for the chain's next at most
 * PD_PEER_MAX_ASK hashes (a part) to the next connected outgoing peer; RUNNING keeps up to
 * PAGEDD_PEER_PARTS (4) parts of that peer in flight: a part's REPLY (routed here by
 * pd_peer_fetch_reply) is checked and its get started at once; the oldest part, once pulled,
 * goes into new blocks of the pool with every unit's sum checked (device units: as the device
 * copies them, in one pass) and is published; and while the last part asked was staged whole,
 * the next is asked, so that the peer stages it while earlier parts are pulled and published.
 * A peer whose first part has none of the chain, or that refuses, fails or sends what does not
 * check, sends the fetch back to ASK for the next peer, from where the chain stopped (what was
 * published stays); a part that comes short ends the chain there. Each part's answer and each
 * part's get get peer-timeout; the last peer, or the end of the chain, ends the fetch. Gets
 * still running when the fetch gives up or moves on are cancelled, and their buffers are
 * reused or freed only once UCX has called back (CANCELLING).
 */

/* The fetch's pool when it is still there under the same name, or NULL. */
static struct pd_pool *fetch_pool(const struct pd_peers *ps, const struct pd_peer_fetchop *f)
{
    for (struct pd_pool *p = *ps->pools; p != NULL; p = p->next)
        if (p->id == f->pool_id && !p->destroyed && strcmp(p->name, f->pool) == 0)
            return p;
    return NULL;
}

/* Returns f's i-th part in flight, 0 the oldest. */
static struct pd_peer_part *part_at(struct pd_peer_fetchop *f, uint32_t i)
{
    return &f->part[(f->head + i) % PD_PEER_PIPE];
}

/* Returns f's i-th part in flight, read only. */
static const struct pd_peer_part *part_seen(const struct pd_peer_fetchop *f, uint32_t i)
{
    return &f->part[(f->head + i) % PD_PEER_PIPE];
}

/* Tells f's peer to free what it staged (or will stage) for part t, unless the connection
 * failed. Returns nothing. */
static void release_part(struct pd_peers *ps, struct pd_peer_fetchop *f, const struct pd_peer_part *t)
{
    if (f->peer == NULL || f->peer_failed || t->state == PD_PART_FREE || t->req == 0)
        return;
    struct pd_peer_release rel = { .req = t->req };
    pd_peer_send(ps, f->peer, PD_PEER_AM_RELEASE, &rel, sizeof rel);
}

/* Frees what part t holds of its request (REPLY, sums, remote key, block ids), keeping its
 * local buffer for the next part, and makes it free. Its get must be over and its blocks let
 * go (drop_blocks, publish_blocks). Returns nothing. */
static void part_clear(struct pd_peer_part *t)
{
    free(t->reply);
    free(t->sums);
    free(t->ids);
    if (t->rkey != NULL)
        ucp_rkey_destroy(t->rkey);
    const struct pd_peer_buf local = t->local;
    memset(t, 0, sizeof *t);
    t->local = local;
}

/* Lets go of the new blocks part t holds unpublished in pool p (NULL: gone, and its blocks with
 * it). Returns nothing. */
static void drop_blocks(struct pd_peer_part *t, struct pd_pool *p)
{
    uint32_t bad = 0;
    if (t->ids != NULL && p != NULL)
        pa_free_blocks(p->alloc, PD_PEER_FETCH_HOLDER, t->count, t->ids, &bad);
    free(t->ids);
    t->ids = NULL;
}

/* Drops f's parts from the i-th on (releasing what the peer staged for them when release),
 * none of whose gets may run. Returns nothing. */
static void drop_parts_from(struct pd_peers *ps, struct pd_peer_fetchop *f, uint32_t i, int release)
{
    while (f->nparts > i) {
        struct pd_peer_part *t = part_at(f, f->nparts - 1);
        if (release)
            release_part(ps, f, t);
        drop_blocks(t, fetch_pool(ps, f));
        part_clear(t);
        f->nparts--;
    }
    if (f->nparts == 0)
        f->head = 0;
}

/* Logs what f fetched, if anything. Returns nothing. */
static void log_fetch(const struct pd_peer_fetchop *f)
{
    if (f->parts_done == 0)
        return;
    const double ms = (double) (pd_peer_now_ns() - f->began_ns) / 1e6;
    pd_log(PD_LOG_INFO, "peers: fetched %llu bytes of pool %s in %u part%s and %.2f ms (%.1f GB/s), of which "
           "%.2f ms filling and checking and %.2f ms publishing here", (unsigned long long) f->fetched_bytes, f->pool,
           f->parts_done, f->parts_done == 1 ? "" : "s", ms, ms > 0 ? (double) f->fetched_bytes / ms / 1e6 : 0.0,
           (double) f->check_ns / 1e6, (double) f->publish_ns / 1e6);
}

/* Frees f's parts and buffers and makes its slot free, telling the done function. No get of
 * its may run. Returns nothing. */
static void fetch_end(struct pd_peers *ps, struct pd_peer_fetchop *f)
{
    drop_parts_from(ps, f, 0, 1);
    log_fetch(f);
    const uint64_t now = pd_peer_now_ns();
    for (uint32_t i = 0; i < PD_PEER_PIPE; i++)
        pd_peer_buf_put(ps, &f->part[i].local, now);
    free(f->hashes);
    const uint32_t conn_id = f->conn_id;
    const int started = f->started;
    memset(f, 0, sizeof *f);
    if (started && ps->done_fn != NULL)
        ps->done_fn(ps->done_ctx, conn_id);
}

/* Counts f's time with its peer up to now in the peer's fetch time. Returns nothing. */
static void count_time(struct pd_peer_fetchop *f, uint64_t now)
{
    if (f->peer != NULL && now > f->counted_ns)
        f->peer->fetch_ns += now - f->counted_ns;
    f->counted_ns = now;
}

/* Records that fetching from f's peer failed for why: releases what it staged, drops every
 * part (none of whose gets may run) and sends f on to the next peer, from the first block not
 * published. Returns nothing. */
static void peer_failed(struct pd_peers *ps, struct pd_peer_fetchop *f, const char *why)
{
    struct pd_peer *q = f->peer;
    drop_parts_from(ps, f, 0, 1);
    count_time(f, pd_peer_now_ns());
    q->fetches++;
    q->failures++;
    pd_log(PD_LOG_WARNING, "peer %s: fetching blocks %u to %u of pool %s: %s", q->addr, f->off, f->total - 1,
           f->pool, why);
    f->peer = NULL;
    f->peer_failed = 0;
    f->ends = 0;
    f->state = PD_FETCH_ASK;
}

/* Returns whether a get of f's runs. */
static int gets_run(struct pd_peer_fetchop *f)
{
    for (uint32_t i = 0; i < f->nparts; i++)
        if (part_at(f, i)->get_req != NULL)
            return 1;
    return 0;
}

/* Something about f's peer failed for why: cancels the gets that run, ending f once they
 * called back when abandon, else then asking the next peer; with none running, does either at
 * once. Returns nothing. */
static void fail(struct pd_peers *ps, struct pd_peer_fetchop *f, const char *why, int abandon)
{
    if (gets_run(f)) {
        f->cancel_why = why;
        f->abandon = abandon;
        f->state = PD_FETCH_CANCELLING;
        for (uint32_t i = 0; i < f->nparts; i++)
            if (part_at(f, i)->get_req != NULL)
                ucp_request_cancel(ps->worker, part_at(f, i)->get_req);
        return;
    }
    if (f->peer != NULL)
        peer_failed(ps, f, why);
    if (abandon)
        fetch_end(ps, f);
}

/* Makes part t's local buffer at least len bytes of the kind (device: device memory), mapped.
 * Returns 0 or -1. */
static int local_room(struct pd_peers *ps, struct pd_peer_part *t, size_t len, int device)
{
    if (t->local.cap >= len && t->local.device == device)
        return 0;
    pd_peer_buf_put(ps, &t->local, pd_peer_now_ns());
    return pd_peer_buf_get(ps, len, device, &t->local);
}

/* A get's completion (user_data: the part). Returns nothing. */
static void got_cb(void *request, ucs_status_t status, void *user_data)
{
    struct pd_peer_part *t = user_data;
    t->get_status = status;
    t->get_req = NULL;
    ucp_request_free(request);
}

/* Sends q a FETCH of f's hashes [off, off + n) in pool p under a new request number, stored in
 * *req. Returns 0, -1 when it could not be sent (q is then marked failed), or -2 without
 * memory. */
static int send_fetch(struct pd_peers *ps, const struct pd_peer_fetchop *f, struct pd_peer *q, const struct pd_pool *p,
                      uint32_t off, uint32_t n, uint64_t *req)
{
    const size_t len = sizeof(struct pd_peer_fetch) + (size_t) n * sizeof(paged_hash);
    struct pd_peer_fetch *m = pd_calloc(1, len);
    if (m == NULL)
        return -2;
    *req = ps->next_req++;
    m->req = *req;
    snprintf(m->pool, sizeof m->pool, "%s", f->pool);
    m->tenant = f->tenant;
    m->num_layers = p->geom.num_layers;
    m->num_kv_heads = p->geom.num_kv_heads;
    m->head_dim = p->geom.head_dim;
    m->block_size = p->geom.block_size;
    m->dtype = p->geom.dtype;
    m->unit_bytes = p->geom.block_bytes;
    m->n = n;
    m->flags = ps->device_staging ? PD_PEER_FETCH_DEVICE : 0;
    memcpy(m->hashes, f->hashes + off, (size_t) n * sizeof(paged_hash));
    int sent = pd_peer_send(ps, q, PD_PEER_AM_FETCH, m, len);
    free(m);
    return sent < 0 ? -1 : 0;
}

/* Asks f's peer for the chain's next part (from next_off) in a new part. Returns 0, -1 when
 * it could not be sent (the peer is then marked failed), or -2 without memory. */
static int ask_part(struct pd_peers *ps, struct pd_peer_fetchop *f, const struct pd_pool *p)
{
    struct pd_peer_part *t = part_at(f, f->nparts);
    const uint32_t n = f->total - f->next_off < PD_PEER_MAX_ASK ? f->total - f->next_off : PD_PEER_MAX_ASK;
    uint64_t req = 0;
    int sent = send_fetch(ps, f, f->peer, p, f->next_off, n, &req);
    if (sent != 0)
        return sent;
    t->state = PD_PART_ASKED;
    t->req = req;
    t->off = f->next_off;
    t->n = n;
    t->asked_ns = pd_peer_now_ns();
    t->deadline_ns = t->asked_ns + (uint64_t) ps->timeout_ms * 1000000u;
    f->may_ask = 0;
    f->nparts++;
    f->next_off += n;
    return 0;
}

/* Sends f's first part to the next connected outgoing peer, or ends f when none is left.
 * Returns nothing. */
static void ask_next(struct pd_peers *ps, struct pd_peer_fetchop *f, struct pd_pool *p)
{
    while (f->next_peer < ps->npeers) {
        struct pd_peer *q = ps->peers[f->next_peer++];
        if (!q->outgoing || q->state != PD_PEER_AUTHENTICATED || q->ep == NULL || q->ep_failed)
            continue;
        f->peer = q;
        f->peer_failed = 0;
        f->ends = 0;
        f->next_off = f->off;
        f->counted_ns = pd_peer_now_ns();
        f->state = PD_FETCH_RUNNING;
        int sent = ask_part(ps, f, p);
        if (sent == -2)
            break;
        if (sent < 0) {
            peer_failed(ps, f, "the request could not be sent");
            continue;
        }
        return;
    }
    fetch_end(ps, f);
}

/* Asks f's peer for more of the chain while parts are free and the last part asked was staged
 * whole (may_ask: so that the peer has the chain's next part too, likely; only the last part
 * asked can be unanswered, since each is asked once the one before it was staged). A request
 * that cannot be sent is not asked now (a failed connection is noted for the next step).
 * Returns whether it asked. */
static int fill(struct pd_peers *ps, struct pd_peer_fetchop *f, const struct pd_pool *p)
{
    int asked = 0;
    while (!f->peer_failed && !f->ends && f->may_ask && f->nparts < ps->parts && f->next_off < f->total) {
        if (ask_part(ps, f, p) != 0)
            break;
        asked = 1;
    }
    return asked;
}

/* Checks part i's REPLY against pool p and starts the get of what it staged. A head part with
 * nothing sends f to the next peer; a later one with nothing, or one that came short, ends the
 * chain there (the parts after it dropped). Returns NULL, or why the peer failed. */
static const char *start_get(struct pd_peers *ps, struct pd_peer_fetchop *f, uint32_t i, struct pd_pool *p)
{
    struct pd_peer_part *t = part_at(f, i);
    const struct pd_peer_msg *m = t->reply;
    struct pd_peer_reply r;
    if (m->len < sizeof r)
        return "a reply too short";
    memcpy(&r, m->data, sizeof r);
    const char *why = NULL;
    if (r.status != PAGED_OK && r.status != PAGED_E_NOENT)
        why = "it refused";
    else if (r.count > t->n)
        why = "more blocks than asked";
    else if (r.count != 0 && r.unit_bytes != p->geom.block_bytes)
        why = "units of another size";
    else if (r.device > 1 || (r.device && !ps->device_staging))
        why = "units in device memory, not asked for";
    else if (r.rkey_len > PD_PEER_MAX_RKEY || m->len != sizeof r + r.rkey_len + (size_t) r.count * sizeof(uint64_t))
        why = "a reply whose length does not add up";
    if (why != NULL)
        return why;
    if (r.status == PAGED_E_NOENT || r.count == 0) {
        if (i == 0) {
            /* It has none of the chain from here: not a failure; the next peer may. */
            drop_parts_from(ps, f, 0, 1);
            count_time(f, pd_peer_now_ns());
            f->peer->fetches++;
            f->peer = NULL;
            f->state = PD_FETCH_ASK;
        } else {
            f->ends = 1;
            drop_parts_from(ps, f, i, 1);
        }
        return NULL;
    }
    if (r.count < t->n) {
        f->ends = 1;
        drop_parts_from(ps, f, i + 1, 1);
    } else if (i == f->nparts - 1) {
        f->may_ask = 1;      /* staged whole: the peer likely has the next part too */
    }
    t->count = r.count;
    t->device = (int) r.device;
    t->replied_ns = pd_peer_now_ns();
    const size_t bytes = (size_t) r.count * p->geom.block_bytes;
    t->sums = pd_malloc((size_t) r.count * sizeof(uint64_t));
    /* Device units land in device memory; where none is to be had, in host memory, checked
     * there with the unit sum's C twin and copied into the pool from the host. */
    int room = t->sums != NULL ? local_room(ps, t, bytes, t->device) : -1;
    if (room < 0 && t->sums != NULL && t->device)
        room = local_room(ps, t, bytes, 0);
    if (room < 0)
        return "no memory for the local staging buffer";
    memcpy(t->sums, m->data + sizeof r + r.rkey_len, (size_t) r.count * sizeof(uint64_t));
    if (ucp_ep_rkey_unpack(f->peer->ep, m->data + sizeof r, &t->rkey) != UCS_OK) {
        t->rkey = NULL;
        return "its remote key does not unpack";
    }
    t->get_status = UCS_INPROGRESS;
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH,
        .cb.send = got_cb, .user_data = t, .memh = t->local.memh,
    };
    ucs_status_ptr_t q = ucp_get_nbx(f->peer->ep, t->local.buf, bytes, r.addr, t->rkey, &rp);
    if (UCS_PTR_IS_ERR(q))
        return "the get failed";
    t->posted_ns = pd_peer_now_ns();
    t->get_status = q == NULL ? UCS_OK : UCS_INPROGRESS;
    t->get_req = q;
    t->state = PD_PART_PULLING;
    t->deadline_ns = t->replied_ns + (uint64_t) ps->timeout_ms * 1000000u;
    return NULL;
}

/* Returns whether t's units were pulled into device memory and are summed there, in the
 * pass that fills the blocks. */
static int device_units(const struct pd_peer_part *t)
{
    return t->device && t->local.device;
}

/* Returns NULL when each of t's count sums equals the one its REPLY gave, else why not. */
static const char *compare_sums(const struct pd_peer_part *t, const uint64_t *mine)
{
    for (uint32_t i = 0; i < t->count; i++) {
        uint64_t sum;
        memcpy(&sum, t->sums + (size_t) i * sizeof sum, sizeof sum);
        if (mine[i] != sum)
            return "a block's checksum does not match";
    }
    return NULL;
}

/* Checks each of t's pulled units of host memory against the sum its REPLY gave: XXH3-64, or
 * pk_unit_sum's C twin for device units that landed in host memory. Returns NULL, or what
 * failed. */
static const char *check_host_sums(const struct pd_peer_part *t, const struct pd_pool *p)
{
    const uint64_t unit = p->geom.block_bytes;
    uint64_t mine[PD_PEER_MAX_ASK];          /* a part is at most that many units */
    for (uint32_t i = 0; i < t->count; i++) {
        const unsigned char *u = t->local.buf + (size_t) i * unit;
        mine[i] = t->device ? pk_unit_sum(u, unit) : XXH3_64bits(u, unit);
    }
    return compare_sums(t, mine);
}

/* Copies t's units of host memory (checked before) into its new blocks of p. Returns NULL, or
 * what failed. */
static const char *copy_host_units(struct pd_peers *ps, const struct pd_peer_part *t, struct pd_pool *p)
{
    char *cause = NULL;
    int rc = pd_peer_units_copy(ps, p, 0, t->count, t->ids, t->local.buf, &cause);
    if (rc == PAGED_E_NOMEM && cause == NULL)
        return "out of memory";
    if (rc != PAGED_OK)
        pd_log(PD_LOG_WARNING, "peers: filling %u blocks of pool %s: %s", t->count, p->name, cause ? cause : "failed");
    free(cause);
    return rc == PAGED_OK ? NULL : "the blocks could not be filled";
}

/* Copies t's units of device memory into its new blocks of p, summing them in the same pass
 * (pd_peer_units_move), and checks the sums. Returns NULL, or what failed. */
static const char *fill_device_units(struct pd_peers *ps, const struct pd_peer_part *t, struct pd_pool *p)
{
    uint64_t mine[PD_PEER_MAX_ASK];          /* a part is at most that many units */
    char *cause = NULL;
    int rc = pd_peer_units_move(ps, p, 0, t->count, t->ids, t->local.buf, mine, &cause);
    if (rc != PAGED_OK)
        pd_log(PD_LOG_WARNING, "peers: filling %u blocks of pool %s: %s", t->count, p->name, cause ? cause : "failed");
    free(cause);
    return rc == PAGED_OK ? compare_sums(t, mine) : "the blocks could not be filled";
}

/* Publishes t's new blocks of p, filled and checked, under f's tenant and hashes as cached
 * blocks (held by nobody), letting them go. Returns NULL, or what failed (the blocks then
 * still held). */
static const char *publish_blocks(struct pd_peer_fetchop *f, struct pd_peer_part *t, struct pd_pool *p)
{
    uint32_t bad = 0;
    if (pa_publish(p->alloc, PD_PEER_FETCH_HOLDER, f->tenant, t->count, t->ids, f->hashes + t->off, &bad) < 0)
        return "the blocks could not be published";
    pa_free_blocks(p->alloc, PD_PEER_FETCH_HOLDER, t->count, t->ids, &bad);
    free(t->ids);
    t->ids = NULL;
    return NULL;
}

/* Counts f's oldest part, published in p, moves the head on and ends f at the chain's end.
 * Returns nothing. */
static void head_done(struct pd_peers *ps, struct pd_peer_fetchop *f, const struct pd_pool *p)
{
    struct pd_peer_part *t = part_at(f, 0);
    struct pd_peer *q = f->peer;
    const uint64_t now = pd_peer_now_ns();
    f->check_ns += t->filled_ns - t->got_ns;
    f->publish_ns += now - t->filled_ns;
    q->fetches++;
    q->blocks += t->count;
    q->bytes += (uint64_t) t->count * p->geom.block_bytes;
    count_time(f, now);
    f->fetched_bytes += (uint64_t) t->count * p->geom.block_bytes;
    f->parts_done++;
    pd_log(PD_LOG_DEBUG, "peer %s: fetched %u blocks of pool %s (%llu bytes) by %.2f ms into the fetch: asked %.2f ms "
           "ago, answered after %.2f, pulled after %.2f more (the get posted in %.2f), filled and checked in %.2f, "
           "published in %.2f", q->addr, t->count, f->pool, (unsigned long long) t->count * p->geom.block_bytes,
           (double) (now - f->began_ns) / 1e6, (double) (now - t->asked_ns) / 1e6,
           (double) (t->replied_ns - t->asked_ns) / 1e6, (double) (t->got_ns - t->replied_ns) / 1e6,
           (double) (t->posted_ns - t->replied_ns) / 1e6, (double) (t->filled_ns - t->got_ns) / 1e6,
           (double) (now - t->filled_ns) / 1e6);
    f->off += t->count;
    const int short_part = t->count < t->n;
    part_clear(t);
    f->head = (f->head + 1) % PD_PEER_PIPE;
    f->nparts--;
    if (short_part || f->off >= f->total || (f->nparts == 0 && (f->ends || f->next_off >= f->total)))
        fetch_end(ps, f);
}

/* Takes f's oldest part, pulled, into new blocks of p and publishes them: host units are
 * checked, then copied; device units are copied and summed by the device in one pass
 * (pd_peer_units_move), the sums then checked. Returns NULL, or why the peer failed (the
 * blocks then still held). */
static const char *fill_head(struct pd_peers *ps, struct pd_peer_fetchop *f, struct pd_pool *p)
{
    struct pd_peer_part *t = part_at(f, 0);
    if (t->get_status != UCS_OK)
        return "the get failed";
    t->got_ns = pd_peer_now_ns();
    const char *why = device_units(t) ? NULL : check_host_sums(t, p);
    release_part(ps, f, t);
    t->req = 0;                    /* released: a failure below releases it no more */
    if (why != NULL)
        return why;
    int32_t *ids = pd_malloc((size_t) t->count * sizeof *ids);
    if (ids == NULL)
        return "out of memory";
    if (pd_pool_alloc_blocks(p, PD_PEER_FETCH_HOLDER, t->count, ids, NULL) != PAGED_OK) {
        free(ids);
        return "no room for the blocks in the pool";
    }
    t->ids = ids;
    why = device_units(t) ? fill_device_units(ps, t, p) : copy_host_units(ps, t, p);
    t->filled_ns = pd_peer_now_ns();
    return why != NULL ? why : publish_blocks(f, t, p);
}

/* Moves a RUNNING fetch f on by one thing: a REPLY taken, the oldest part published, or more
 * asked. Returns 1 when it did one, else 0. */
static int run_one(struct pd_peers *ps, struct pd_peer_fetchop *f, struct pd_pool *p)
{
    if (f->peer_failed) {
        fail(ps, f, gets_run(f) ? "the connection failed during a get" : "the connection failed", 0);
        return 1;
    }
    for (uint32_t i = 0; i < f->nparts; i++) {
        struct pd_peer_part *t = part_at(f, i);
        if (t->state == PD_PART_ASKED && t->reply != NULL) {
            const char *why = start_get(ps, f, i, p);
            if (why != NULL)
                fail(ps, f, why, 0);
            return 1;
        }
    }
    if (f->nparts > 0 && part_at(f, 0)->state == PD_PART_PULLING && part_at(f, 0)->get_req == NULL) {
        const char *why = fill_head(ps, f, p);
        if (why != NULL)
            fail(ps, f, why, 0);
        else
            head_done(ps, f, p);
        return 1;
    }
    return fill(ps, f, p);
}

/* Moves fetch f on; returns nothing. */
static void step_one(struct pd_peers *ps, struct pd_peer_fetchop *f, uint64_t now)
{
    struct pd_pool *p = fetch_pool(ps, f);
    if (f->state == PD_FETCH_CANCELLING) {
        if (gets_run(f))
            return;
        /* The gets are over: their buffers are ours again. */
        f->state = PD_FETCH_RUNNING;
        fail(ps, f, f->cancel_why, f->abandon || p == NULL);
        if (f->state == PD_FETCH_FREE)
            return;
    }
    if (p == NULL) {
        fail(ps, f, "its pool is gone", 1);   /* ends f */
        return;
    }
    /* Each part's answer and get have their own deadline. */
    for (uint32_t i = 0; f->state == PD_FETCH_RUNNING && i < f->nparts; i++) {
        const struct pd_peer_part *t = part_at(f, i);
        if (now >= t->deadline_ns && (t->state == PD_PART_ASKED || t->get_req != NULL)) {
            fail(ps, f, t->state == PD_PART_ASKED ? "no answer within peer-timeout" : "the get timed out", 1);
            return;
        }
    }
    for (int moves = 0; moves < 16 * (int) PD_PEER_MAX; moves++) {
        if (f->state == PD_FETCH_ASK)
            ask_next(ps, f, p);
        else if (f->state != PD_FETCH_RUNNING || !run_one(ps, f, p))
            return;
    }
}

/* Moves every fetch on; see internal.h. */
void pd_peer_fetch_step(struct pd_peers *ps)
{
    const uint64_t now = pd_peer_now_ns();
    for (uint32_t i = 0; i < PD_PEER_MAX_FETCHES; i++)
        if (ps->fetches[i].state != PD_FETCH_FREE)
            step_one(ps, &ps->fetches[i], now);
}

/* Hands a REPLY to its fetch's part; see internal.h. */
int pd_peer_fetch_reply(struct pd_peers *ps, struct pd_peer_msg *m)
{
    uint64_t req;
    if (m->len < sizeof req)
        return 0;
    memcpy(&req, m->data, sizeof req);
    for (uint32_t i = 0; i < PD_PEER_MAX_FETCHES; i++) {
        struct pd_peer_fetchop *f = &ps->fetches[i];
        if (f->state != PD_FETCH_RUNNING || f->peer == NULL || f->peer->ep != m->ep)
            continue;
        for (uint32_t k = 0; k < f->nparts; k++) {
            struct pd_peer_part *t = part_at(f, k);
            if (t->state == PD_PART_ASKED && t->reply == NULL && t->req == req) {
                t->reply = m;
                return 1;
            }
        }
    }
    return 0;
}

/* Notes a failed connection for its fetches; see internal.h. */
void pd_peer_fetch_peer_failed(struct pd_peers *ps, const struct pd_peer *p)
{
    for (uint32_t i = 0; i < PD_PEER_MAX_FETCHES; i++)
        if (ps->fetches[i].state != PD_FETCH_FREE && ps->fetches[i].peer == p)
            ps->fetches[i].peer_failed = 1;
}

/* Returns the ms until the earliest deadline, or -1; 0 while a get into device memory runs,
 * whose completion does not wake the worker's descriptor. */
int pd_peer_fetch_timeout_ms(const struct pd_peers *ps)
{
    const uint64_t now = pd_peer_now_ns();
    int best = -1;
    for (uint32_t i = 0; i < PD_PEER_MAX_FETCHES; i++) {
        const struct pd_peer_fetchop *f = &ps->fetches[i];
        if (f->state == PD_FETCH_FREE)
            continue;
        /* Cancelled gets wait for UCX: look again soon. */
        uint64_t left = f->state == PD_FETCH_CANCELLING || f->state == PD_FETCH_ASK ? 0 : UINT64_MAX;
        for (uint32_t k = 0; k < f->nparts; k++) {
            const struct pd_peer_part *t = part_seen(f, k);
            const int polled = t->get_req != NULL && t->local.device;
            const uint64_t l = polled || t->deadline_ns <= now ? 0 : t->deadline_ns - now;
            if (l < left)
                left = l;
        }
        if (left == UINT64_MAX)
            left = 0;
        int ms = (int) ((left + 999999u) / 1000000u);
        if (best < 0 || ms < best)
            best = ms;
    }
    return best;
}

/* Ends every fetch at close; returns nothing. */
void pd_peer_fetch_drop_all(struct pd_peers *ps)
{
    for (uint32_t i = 0; i < PD_PEER_MAX_FETCHES; i++) {
        struct pd_peer_fetchop *f = &ps->fetches[i];
        if (f->state == PD_FETCH_FREE)
            continue;
        for (uint32_t k = 0; k < f->nparts; k++)
            if (part_at(f, k)->get_req != NULL)
                ucp_request_cancel(ps->worker, part_at(f, k)->get_req);
        for (unsigned k = 0; k < 100000u && gets_run(f); k++)
            pd_peer_progress(ps);
        if (gets_run(f))
            pd_log(PD_LOG_WARNING, "peers: a cancelled get did not complete");
        else
            fetch_end(ps, f);
    }
}

/* Sets the done function; returns nothing. */
void pd_peers_set_done(struct pd_peers *ps, pd_peers_done_fn fn, void *ctx)
{
    ps->done_fn = fn;
    ps->done_ctx = ctx;
}

/* The engine's remote start; returns 1 when a fetch started. */
int pd_peers_prefetch(void *ctx, struct pd_pool *p, uint32_t conn_id, uint32_t tenant, uint32_t n,
                      const paged_hash *hashes)
{
    struct pd_peers *ps = ctx;
    if (ps == NULL || !p->geom.peers || n == 0)
        return 0;
    int any = 0;
    for (uint32_t i = 0; i < ps->npeers && !any; i++) {
        const struct pd_peer *q = ps->peers[i];
        any = q->outgoing && q->state == PD_PEER_AUTHENTICATED && q->ep != NULL && !q->ep_failed;
    }
    if (!any)
        return 0;
    for (uint32_t i = 0; i < PD_PEER_MAX_FETCHES; i++) {
        struct pd_peer_fetchop *f = &ps->fetches[i];
        if (f->state != PD_FETCH_FREE)
            continue;
        memset(f, 0, sizeof *f);
        f->state = PD_FETCH_ASK;
        f->conn_id = conn_id;
        f->pool_id = p->id;
        snprintf(f->pool, sizeof f->pool, "%s", p->name);
        f->tenant = tenant;
        f->total = n < PD_PEER_MAX_CHAIN ? n : PD_PEER_MAX_CHAIN;
        f->began_ns = pd_peer_now_ns();
        f->hashes = pd_malloc((size_t) f->total * sizeof(paged_hash));
        if (f->hashes == NULL) {
            memset(f, 0, sizeof *f);
            return 0;
        }
        memcpy(f->hashes, hashes, (size_t) f->total * sizeof(paged_hash));
        ask_next(ps, f, p);
        /* Ended at once (no peer took the request): the LOOKUP runs now, unheld. */
        f->started = f->state != PD_FETCH_FREE;
        return f->started;
    }
    pd_log(PD_LOG_DEBUG, "peers: %u fetches run already: pool %s's LOOKUP does not ask", PD_PEER_MAX_FETCHES,
           p->name);
    return 0;
}
