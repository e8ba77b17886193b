/* fetch.c: a LOOKUP's remote part: ask the peers in order, pull the staged units, check, publish here. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "daemon/peer/internal.h"
#include "daemon/tier/tiers.h"
#include "daemon/util/heap.h"
#include "daemon/util/log.h"
#include "kernels/kernels.h"

/*
 * Each fetch is a small state machine that pd_peer_fetch_step moves on at every poll of the
 * peers (and so never inside the engine's pass): ASK sends a FETCH for the next at most
 * PD_PEER_MAX_ASK hashes of the chain to the next connected outgoing peer; ASKED waits for its
 * REPLY (routed here by pd_peer_fetch_reply), checks it and starts the get of the staged units;
 * PULLING waits for the get, checks every unit's sum and publishes the units in the pool. A peer
 * that sent all it was asked for is asked for the chain's next part; one that has none, refuses,
 * fails or sends what does not check sends the fetch back to ASK for the next peer, from where
 * the chain stopped. Each request gets peer-timeout (its answer and its get); the last peer, or
 * the end of the chain, ends the fetch. A get still running when the fetch gives up is cancelled,
 * and its buffer is freed only once UCX has called back (CANCELLING).
 */

/* The fetch's pool when it is still there under the same name, or NULL. */
static struct pd_pool *fetch_pool(const struct pd_peers *ps, const struct pd_peer_fetchop *f)
{
    for (struct pd_pool *p = *ps->pools; p != NULL; p = p->next)
        if (p->id == f->pool_id && !p->destroyed && strcmp(p->name, f->pool) == 0)
            return p;
    return NULL;
}

/* Forgets the part f asked ahead, if any: tells its peer to free what it staged for it (unless
 * the connection failed) and frees its REPLY. Returns nothing. */
static void drop_ahead(struct pd_peers *ps, struct pd_peer_fetchop *f)
{
    if (f->ahead_req == 0)
        return;
    if (f->peer != NULL && !f->peer_failed) {
        struct pd_peer_release rel = { .req = f->ahead_req };
        pd_peer_send(ps, f->peer, PD_PEER_AM_RELEASE, &rel, sizeof rel);
    }
    free(f->ahead_reply);
    f->ahead_reply = NULL;
    f->ahead_req = 0;
    f->ahead_n = 0;
}

/* Frees f's get, reply and buffer and makes its slot free, telling the done function.
 * Returns nothing. */
static void fetch_end(struct pd_peers *ps, struct pd_peer_fetchop *f)
{
    drop_ahead(ps, f);
    if (f->rkey != NULL)
        ucp_rkey_destroy(f->rkey);
    pd_peer_buf_put(ps, &f->local, pd_peer_now_ns());
    free(f->reply);
    free(f->sums);
    free(f->hashes);
    const uint32_t conn_id = f->conn_id;
    const int started = f->started;
    memset(f, 0, sizeof *f);
    if (started && ps->done_fn != NULL)
        ps->done_fn(ps->done_ctx, conn_id);
}

/* Forgets f's request to its peer (its REPLY, sums and remote key) and makes f ask again.
 * Returns nothing. */
static void forget_request(struct pd_peer_fetchop *f)
{
    free(f->reply);
    f->reply = NULL;
    free(f->sums);
    f->sums = NULL;
    if (f->rkey != NULL) {
        ucp_rkey_destroy(f->rkey);
        f->rkey = NULL;
    }
    f->peer = NULL;
    f->peer_failed = 0;
    f->device = 0;
    f->state = PD_FETCH_ASK;
}

/* Records that asking f's peer failed for why, releases what it staged when release, and
 * sends f on to the next peer. Returns nothing. */
static void peer_failed(struct pd_peers *ps, struct pd_peer_fetchop *f, const char *why, int release)
{
    struct pd_peer *q = f->peer;
    if (release && !f->peer_failed) {
        struct pd_peer_release rel = { .req = f->req };
        pd_peer_send(ps, q, PD_PEER_AM_RELEASE, &rel, sizeof rel);
    }
    drop_ahead(ps, f);
    q->fetches++;
    q->failures++;
    pd_log(PD_LOG_WARNING, "peer %s: fetching %u blocks of pool %s: %s", q->addr, f->n, f->pool, why);
    forget_request(f);
}

/* Makes f's local buffer at least len bytes of the kind (device: device memory), mapped.
 * Returns 0 or -1. */
static int local_room(struct pd_peers *ps, struct pd_peer_fetchop *f, size_t len, int device)
{
    if (f->local.cap >= len && f->local.device == device)
        return 0;
    pd_peer_buf_put(ps, &f->local, pd_peer_now_ns());
    return pd_peer_buf_get(ps, len, device, &f->local);
}

/* A get's completion (user_data: the fetch). Returns nothing. */
static void got_cb(void *request, ucs_status_t status, void *user_data)
{
    struct pd_peer_fetchop *f = user_data;
    f->get_status = status;
    f->get_req = NULL;
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

/* Sends f's FETCH to the next connected outgoing peer, or ends f when none is left. Returns
 * nothing. */
static void ask_next(struct pd_peers *ps, struct pd_peer_fetchop *f, struct pd_pool *p)
{
    while (f->next_peer < ps->npeers) {
        struct pd_peer *q = ps->peers[f->next_peer++];
        if (!q->outgoing || q->state != PD_PEER_AUTHENTICATED || q->ep == NULL || q->ep_failed)
            continue;
        f->n = f->total - f->off < PD_PEER_MAX_ASK ? f->total - f->off : PD_PEER_MAX_ASK;
        int sent = send_fetch(ps, f, q, p, f->off, f->n, &f->req);
        if (sent == -2)
            break;
        f->peer = q;
        f->asked_ns = pd_peer_now_ns();
        f->deadline_ns = f->asked_ns + (uint64_t) ps->timeout_ms * 1000000u;
        if (sent < 0) {
            peer_failed(ps, f, "the request could not be sent", 0);
            continue;
        }
        f->state = PD_FETCH_ASKED;
        return;
    }
    fetch_end(ps, f);
}

/* Asks f's peer for the chain's part after the one whose get just started, so that the peer
 * gathers it while this get runs: only where the peer had the whole part asked and more of the
 * chain is left. A request that cannot be sent is simply not asked ahead (the part is asked once
 * this one is published). Returns nothing. */
static void ask_ahead(struct pd_peers *ps, struct pd_peer_fetchop *f, const struct pd_pool *p)
{
    const uint32_t next = f->off + f->n;
    if (f->ahead_req != 0 || f->count < f->n || next >= f->total || f->peer == NULL || f->peer_failed)
        return;
    const uint32_t n = f->total - next < PD_PEER_MAX_ASK ? f->total - next : PD_PEER_MAX_ASK;
    uint64_t req = 0;
    if (send_fetch(ps, f, f->peer, p, next, n, &req) != 0)
        return;
    f->ahead_req = req;
    f->ahead_n = n;
    f->ahead_asked_ns = pd_peer_now_ns();
}

/* Checks f's REPLY against pool p and starts the get of what it staged; a reply with nothing
 * sends f to the next peer. Returns nothing. */
static void start_get(struct pd_peers *ps, struct pd_peer_fetchop *f, struct pd_pool *p)
{
    const struct pd_peer_msg *m = f->reply;
    struct pd_peer_reply r;
    const char *why = NULL;
    if (m->len < sizeof r) {
        peer_failed(ps, f, "a reply too short", 0);
        return;
    }
    memcpy(&r, m->data, sizeof r);
    if (r.status != PAGED_OK && r.status != PAGED_E_NOENT)
        why = "it refused";
    else if (r.count > f->n)
        why = "more blocks than asked";
    else if (r.count != 0 && r.unit_bytes != p->geom.block_bytes)
        why = "units of another size";
    else if (r.device > 1 || (r.device && !ps->device_staging))
        why = "units in device memory, not asked for";
    else if (r.rkey_len > PD_PEER_MAX_RKEY || m->len != sizeof r + r.rkey_len + (size_t) r.count * sizeof(uint64_t))
        why = "a reply whose length does not add up";
    if (why != NULL || r.status == PAGED_E_NOENT || r.count == 0) {
        if (why != NULL) {
            peer_failed(ps, f, why, r.count != 0);
            return;
        }
        /* It has none of the chain: not a failure; the next peer may. */
        f->peer->fetches++;
        forget_request(f);
        return;
    }
    f->count = r.count;
    f->device = (int) r.device;
    f->replied_ns = pd_peer_now_ns();
    const size_t bytes = (size_t) r.count * p->geom.block_bytes;
    f->sums = pd_malloc((size_t) r.count * sizeof(uint64_t));
    /* Device units land in device memory; where none is to be had, in host memory, checked
     * there with the unit sum's C twin and copied into the pool from the host. */
    int room = f->sums != NULL ? local_room(ps, f, bytes, f->device) : -1;
    if (room < 0 && f->sums != NULL && f->device)
        room = local_room(ps, f, bytes, 0);
    if (room < 0) {
        peer_failed(ps, f, "no memory for the local staging buffer", 1);
        return;
    }
    memcpy(f->sums, m->data + sizeof r + r.rkey_len, (size_t) r.count * sizeof(uint64_t));
    if (ucp_ep_rkey_unpack(f->peer->ep, m->data + sizeof r, &f->rkey) != UCS_OK) {
        f->rkey = NULL;
        peer_failed(ps, f, "its remote key does not unpack", 1);
        return;
    }
    f->get_status = UCS_INPROGRESS;
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH,
        .cb.send = got_cb, .user_data = f, .memh = f->local.memh,
    };
    ucs_status_ptr_t q = ucp_get_nbx(f->peer->ep, f->local.buf, bytes, r.addr, f->rkey, &rp);
    if (q == NULL) {
        f->get_status = UCS_OK;
    } else if (UCS_PTR_IS_ERR(q)) {
        peer_failed(ps, f, "the get failed", 1);
        return;
    } else {
        f->get_req = q;
    }
    f->state = PD_FETCH_PULLING;
    ask_ahead(ps, f, p);
}

/* Fills f->count new blocks of p from the pulled units and publishes them under f's tenant
 * and hashes as cached blocks (held by nobody). Returns NULL, or what failed with nothing
 * kept. */
static const char *publish(struct pd_peers *ps, struct pd_peer_fetchop *f, struct pd_pool *p)
{
    const uint32_t count = f->count;
    int32_t *ids = pd_malloc((size_t) count * sizeof *ids);
    unsigned char **units = pd_malloc((size_t) count * sizeof *units);
    if (ids == NULL || units == NULL) {
        free(ids);
        free(units);
        return "out of memory";
    }
    const char *why = NULL;
    uint32_t bad = 0;
    if (pd_pool_alloc_blocks(p, PD_PEER_FETCH_HOLDER, count, ids, NULL) != PAGED_OK) {
        why = "no room for the blocks in the pool";
    } else {
        for (uint32_t i = 0; i < count; i++)
            units[i] = f->local.buf + (size_t) i * p->geom.block_bytes;
        char *cause = NULL;
        int rc = pd_units_copy(ps->backend, p->mem, &p->cache, 0, count, ids, units, &cause);
        free(cause);
        if (rc == PAGED_OK
            && pa_publish(p->alloc, PD_PEER_FETCH_HOLDER, f->tenant, count, ids, f->hashes + f->off, &bad) < 0)
            rc = PAGED_E_INVAL;
        if (rc != PAGED_OK)
            why = "the blocks could not be filled or published";
        pa_free_blocks(p->alloc, PD_PEER_FETCH_HOLDER, count, ids, &bad);
    }
    free(ids);
    free(units);
    return why;
}

/* Checks each of f's pulled units against the sum its REPLY gave: XXH3-64 for host units, the
 * unit sum for device units (pk_unit_sum: on the GPU where they landed in device memory, else
 * its C twin). Returns NULL, or what failed. */
static const char *check_sums(struct pd_peers *ps, struct pd_peer_fetchop *f, const struct pd_pool *p)
{
    const uint64_t unit = p->geom.block_bytes;
    uint64_t *mine = NULL;
    if (f->device && f->local.device) {
        mine = pd_malloc((size_t) f->count * sizeof *mine);
        char *cause = NULL;
        int rc = mine == NULL ? PAGED_E_NOMEM
                              : ps->backend->ops->units_sums(ps->backend, f->local.buf, f->count, unit, mine, &cause);
        free(cause);
        if (rc != PAGED_OK) {
            free(mine);
            return "the blocks could not be summed on the device";
        }
    }
    const char *why = NULL;
    for (uint32_t i = 0; why == NULL && i < f->count; i++) {
        uint64_t sum;
        memcpy(&sum, f->sums + (size_t) i * sizeof sum, sizeof sum);
        const unsigned char *u = f->local.buf + (size_t) i * unit;
        const uint64_t got = mine != NULL ? mine[i] : f->device ? pk_unit_sum(u, unit) : XXH3_64bits(u, unit);
        if (got != sum)
            why = "a block's checksum does not match";
    }
    free(mine);
    return why;
}

/* Makes the chain's next part, of f's peer, the one in hand once this part is published: the
 * part asked ahead (its REPLY perhaps here already; its peer-timeout counted from now), else a
 * request to ask the same peer now. Returns nothing. */
static void next_part(struct pd_peers *ps, struct pd_peer_fetchop *f, uint64_t now)
{
    struct pd_peer *q = f->peer;
    if (f->peer_failed)
        drop_ahead(ps, f);
    const uint64_t req = f->ahead_req, asked = f->ahead_asked_ns;
    const uint32_t n = f->ahead_n;
    struct pd_peer_msg *reply = f->ahead_reply;
    f->ahead_req = 0;
    f->ahead_n = 0;
    f->ahead_reply = NULL;
    forget_request(f);
    if (req == 0) {
        f->next_peer--;
        return;
    }
    f->peer = q;
    f->req = req;
    f->n = n;
    f->asked_ns = asked;
    f->deadline_ns = now + (uint64_t) ps->timeout_ms * 1000000u;
    f->reply = reply;
    f->state = PD_FETCH_ASKED;
}

/* Checks f's pulled units and publishes them in p, then ends f. Returns nothing. */
static void finish_get(struct pd_peers *ps, struct pd_peer_fetchop *f, struct pd_pool *p)
{
    struct pd_peer *q = f->peer;
    if (f->get_status != UCS_OK) {
        peer_failed(ps, f, "the get failed", 1);
        return;
    }
    f->got_ns = pd_peer_now_ns();
    const char *why = check_sums(ps, f, p);
    struct pd_peer_release rel = { .req = f->req };
    pd_peer_send(ps, q, PD_PEER_AM_RELEASE, &rel, sizeof rel);
    if (why == NULL)
        why = publish(ps, f, p);
    if (why != NULL) {
        peer_failed(ps, f, why, 0);
        return;
    }
    q->fetches++;
    q->blocks += f->count;
    q->bytes += (uint64_t) f->count * p->geom.block_bytes;
    const uint64_t now = pd_peer_now_ns();
    q->fetch_ns += now - f->asked_ns;
    pd_log(PD_LOG_DEBUG, "peer %s: fetched %u blocks of pool %s (%llu bytes) in %.2f ms: answer %.2f, get %.2f, "
           "check and publish %.2f", q->addr, f->count, f->pool, (unsigned long long) f->count * p->geom.block_bytes,
           (double) (now - f->asked_ns) / 1e6, (double) (f->replied_ns - f->asked_ns) / 1e6,
           (double) (f->got_ns - f->replied_ns) / 1e6, (double) (now - f->got_ns) / 1e6);
    f->off += f->count;
    if (f->count < f->n || f->off >= f->total) {
        fetch_end(ps, f);
        return;
    }
    /* It had all it was asked for: the chain's next part is its too. */
    next_part(ps, f, now);
}

/* Cancels f's running get for why; the fetch goes on once UCX has called back. Returns
 * nothing. */
static void cancel_get(struct pd_peers *ps, struct pd_peer_fetchop *f, const char *why)
{
    f->cancel_why = why;
    f->state = PD_FETCH_CANCELLING;
    ucp_request_cancel(ps->worker, f->get_req);
}

/* Ends f for why (its deadline, or its pool gone), counting a failure of the peer it was
 * asking and releasing what that peer staged; a running get is cancelled first. Returns
 * nothing. */
static void give_up(struct pd_peers *ps, struct pd_peer_fetchop *f, const char *why)
{
    if (f->state == PD_FETCH_PULLING && f->get_req != NULL) {
        cancel_get(ps, f, why);
        return;
    }
    if (f->peer != NULL && f->state != PD_FETCH_ASK)
        peer_failed(ps, f, why, f->state != PD_FETCH_ASKED);
    fetch_end(ps, f);
}

/* Moves fetch f on; returns nothing. */
static void step_one(struct pd_peers *ps, struct pd_peer_fetchop *f, uint64_t now)
{
    struct pd_pool *p = fetch_pool(ps, f);
    if (f->state == PD_FETCH_CANCELLING) {
        if (f->get_req != NULL)
            return;
        /* The get is over: its buffer is ours again. */
        f->state = PD_FETCH_PULLING;
        f->get_status = UCS_ERR_CANCELED;
        if (p == NULL || now >= f->deadline_ns) {
            give_up(ps, f, f->cancel_why);
            return;
        }
        peer_failed(ps, f, f->cancel_why, 1);
    }
    if (p == NULL) {
        give_up(ps, f, "its pool is gone");
        return;
    }
    /* Each request has its own deadline: one about to be asked has none yet. */
    if (f->state != PD_FETCH_ASK && now >= f->deadline_ns) {
        give_up(ps, f, f->state == PD_FETCH_ASKED ? "no answer within peer-timeout" : "the get timed out");
        return;
    }
    for (int moves = 0; moves < 4 * (int) PD_PEER_MAX && f->state != PD_FETCH_FREE; moves++) {
        switch (f->state) {
        case PD_FETCH_ASK:
            ask_next(ps, f, p);
            continue;
        case PD_FETCH_ASKED:
            if (f->reply != NULL) {
                start_get(ps, f, p);
                continue;
            }
            if (f->peer_failed)
                peer_failed(ps, f, "the connection failed", 0);
            else
                return;
            continue;
        case PD_FETCH_PULLING:
            if (f->get_status != UCS_INPROGRESS) {
                finish_get(ps, f, p);
                continue;
            }
            if (f->peer_failed)
                cancel_get(ps, f, "the connection failed during the get");
            return;
        default:
            return;
        }
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

/* Hands a REPLY to its fetch; see internal.h. */
int pd_peer_fetch_reply(struct pd_peers *ps, struct pd_peer_msg *m)
{
    uint64_t req;
    if (m->len < sizeof req)
        return 0;
    memcpy(&req, m->data, sizeof req);
    for (uint32_t i = 0; i < PD_PEER_MAX_FETCHES; i++) {
        struct pd_peer_fetchop *f = &ps->fetches[i];
        if (f->state == PD_FETCH_ASKED && f->reply == NULL && f->req == req && f->peer != NULL
            && f->peer->ep == m->ep) {
            f->reply = m;
            return 1;
        }
        if (f->ahead_req != 0 && f->ahead_reply == NULL && f->ahead_req == req && f->peer != NULL
            && f->peer->ep == m->ep) {
            f->ahead_reply = m;
            return 1;
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

/* Returns the ms until the earliest deadline, or -1. */
int pd_peer_fetch_timeout_ms(const struct pd_peers *ps)
{
    const uint64_t now = pd_peer_now_ns();
    int best = -1;
    for (uint32_t i = 0; i < PD_PEER_MAX_FETCHES; i++) {
        const struct pd_peer_fetchop *f = &ps->fetches[i];
        if (f->state == PD_FETCH_FREE)
            continue;
        /* A cancelled get waits for UCX: look again soon. */
        uint64_t left = f->state == PD_FETCH_CANCELLING || f->deadline_ns <= now ? 0 : f->deadline_ns - now;
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
        if (f->get_req != NULL) {
            ucp_request_cancel(ps->worker, f->get_req);
            for (unsigned k = 0; k < 100000u && f->get_req != NULL; k++)
                pd_peer_progress(ps);
            if (f->get_req != NULL)
                pd_log(PD_LOG_WARNING, "peers: a cancelled get did not complete");
        }
        if (f->get_req == NULL)
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
