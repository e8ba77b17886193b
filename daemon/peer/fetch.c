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

/* What one fetch from one peer got: the reply's fields, checked. */
struct got {
    uint32_t count;
    uint64_t addr;
    const unsigned char *rkey;
    uint32_t rkey_len;
    const unsigned char *sums;     /* count uint64_t, unaligned */
};

/* Waits, progressing the worker, until the wait is done or deadline passes. Returns 1 when done. */
static int wait_reply(struct pd_peers *ps, uint64_t deadline)
{
    while (!ps->wait.done) {
        if (pd_peer_now_ns() >= deadline)
            return 0;
        pd_peer_progress(ps);
    }
    return 1;
}

/* Makes the asker's staging buffer at least len bytes, mapped. Returns 0 or -1. */
static int local_room(struct pd_peers *ps, size_t len)
{
    if (ps->local_len >= len)
        return 0;
    if (ps->local_memh != NULL) {
        ucs_status_t st = ucp_mem_unmap(ps->ctx, ps->local_memh);
        if (st != UCS_OK)
            pd_log(PD_LOG_WARNING, "peers: ucp_mem_unmap: %s", ucs_status_string(st));
        ps->local_memh = NULL;
    }
    free(ps->local);
    ps->local_len = 0;
    ps->local = pd_malloc(len);
    if (ps->local == NULL)
        return -1;
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        .address = ps->local, .length = len,
    };
    ucs_status_t st = ucp_mem_map(ps->ctx, &mp, &ps->local_memh);
    if (st != UCS_OK) {
        pd_log(PD_LOG_WARNING, "peers: ucp_mem_map of %zu bytes: %s", len, ucs_status_string(st));
        ps->local_memh = NULL;
        free(ps->local);
        ps->local = NULL;
        return -1;
    }
    ps->local_len = len;
    return 0;
}

/* Checks reply m (asked: the hashes asked, unit: the pool's unit size) into *g. Returns NULL
 * or what is wrong. */
static const char *check_reply(const struct pd_peer_msg *m, uint32_t asked, uint64_t unit, struct got *g)
{
    struct pd_peer_reply r;
    if (m->len < sizeof r)
        return "a reply too short";
    memcpy(&r, m->data, sizeof r);
    if (r.status != PAGED_OK)
        return r.status == PAGED_E_NOENT ? "no exportable pool of that name, geometry and prefix scope"
                                         : "it refused";
    if (r.count > asked)
        return "more blocks than asked";
    if (r.count != 0 && r.unit_bytes != unit)
        return "units of another size";
    if (r.rkey_len > PD_PEER_MAX_RKEY
        || m->len != sizeof r + r.rkey_len + (size_t) r.count * sizeof(uint64_t))
        return "a reply whose length does not add up";
    g->count = r.count;
    g->addr = r.addr;
    g->rkey = m->data + sizeof r;
    g->rkey_len = r.rkey_len;
    g->sums = m->data + sizeof r + r.rkey_len;
    return NULL;
}

/* A get's completion (user_data: its status word). Returns nothing. */
static void got_cb(void *request, ucs_status_t status, void *user_data)
{
    (void) request;
    *(ucs_status_t *) user_data = status;
}

/* Pulls len bytes from the peer's staging (g) into the local buffer over p's endpoint, waiting
 * until deadline. Returns NULL or what failed. */
static const char *pull(struct pd_peers *ps, struct pd_peer *p, const struct got *g, size_t len,
                        uint64_t deadline)
{
    ucp_rkey_h rkey = NULL;
    ucs_status_t st = ucp_ep_rkey_unpack(p->ep, g->rkey, &rkey);
    if (st != UCS_OK)
        return "its remote key does not unpack";
    ucs_status_t done = UCS_INPROGRESS;
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH,
        .cb.send = got_cb, .user_data = &done, .memh = ps->local_memh,
    };
    ucs_status_ptr_t r = ucp_get_nbx(p->ep, ps->local, len, g->addr, rkey, &rp);
    const char *why = NULL;
    if (r == NULL) {
        done = UCS_OK;
    } else if (UCS_PTR_IS_ERR(r)) {
        why = "the get failed";
    } else {
        while (done == UCS_INPROGRESS && !p->ep_failed && pd_peer_now_ns() < deadline)
            pd_peer_progress(ps);
        if (done == UCS_INPROGRESS) {
            ucp_request_cancel(ps->worker, r);
            for (unsigned i = 0; i < 100000u && done == UCS_INPROGRESS; i++)
                pd_peer_progress(ps);
            why = "the get timed out";
        } else if (done != UCS_OK) {
            why = "the get failed";
        }
        if (done != UCS_INPROGRESS)
            ucp_request_free(r);
        else
            pd_log(PD_LOG_WARNING, "peer %s: a cancelled get did not complete", p->addr);
    }
    ucp_rkey_destroy(rkey);
    return why;
}

/* Fills count new blocks for holder from the local buffer, publishes them under tenant, hashes and
 * writes their ids to ids. Returns NULL, or what failed with nothing taken. */
static const char *publish(struct pd_peers *ps, struct pd_pool *p, uint32_t holder, uint32_t tenant,
                           uint32_t count, const paged_hash *hashes, int32_t *ids)
{
    if (pa_alloc_blocks(p->alloc, holder, count, ids) != PAGED_OK)
        return "no room for the blocks in the pool";
    pd_tiers_flush(p->tiers);
    unsigned char **units = pd_malloc((size_t) count * sizeof *units);
    int rc = PAGED_E_NOMEM;
    char *cause = NULL;
    if (units != NULL) {
        for (uint32_t i = 0; i < count; i++)
            units[i] = ps->local + (size_t) i * p->geom.block_bytes;
        if (ps->backend->ops->units_copy != NULL)
            rc = ps->backend->ops->units_copy(ps->backend, p->mem, &p->cache, 0, count, ids, units, &cause);
        else
            rc = pd_tiers_copy_host(&p->cache, 0, count, ids, units);
        free(units);
    }
    uint32_t bad = 0;
    if (rc == PAGED_OK)
        rc = pa_publish(p->alloc, holder, tenant, count, ids, hashes, &bad) < 0 ? PAGED_E_INVAL : PAGED_OK;
    free(cause);
    if (rc != PAGED_OK) {
        pa_free_blocks(p->alloc, holder, count, ids, &bad);
        return "the blocks could not be filled or published";
    }
    return NULL;
}

/* Asks peer q for hashes[0..n) of pool p under tenant, for holder; on success the blocks are
 * held and published with their ids in ids. Returns how many (0: none, failures counted). */
static uint32_t fetch_from(struct pd_peers *ps, struct pd_peer *q, struct pd_pool *p, uint32_t holder,
                           uint32_t tenant, uint32_t n, const paged_hash *hashes, int32_t *ids, uint64_t deadline)
{
    const uint64_t t0 = pd_peer_now_ns();
    const uint32_t ask = n < PD_PEER_MAX_ASK ? n : PD_PEER_MAX_ASK;
    const size_t len = sizeof(struct pd_peer_fetch) + (size_t) ask * sizeof(paged_hash);
    struct pd_peer_fetch *f = pd_calloc(1, len);
    if (f == NULL)
        return 0;
    const uint64_t req = ps->next_req++;
    f->req = req;
    snprintf(f->pool, sizeof f->pool, "%s", p->name);
    f->tenant = tenant;
    f->num_layers = p->geom.num_layers;
    f->num_kv_heads = p->geom.num_kv_heads;
    f->head_dim = p->geom.head_dim;
    f->block_size = p->geom.block_size;
    f->dtype = p->geom.dtype;
    f->unit_bytes = p->geom.block_bytes;
    f->n = ask;
    memcpy(f->hashes, hashes, (size_t) ask * sizeof(paged_hash));
    ps->wait = (struct pd_peer_wait) { .active = 1, .req = req, .ep = q->ep };
    int sent = pd_peer_send(ps, q, PD_PEER_AM_FETCH, f, len);
    free(f);
    const char *why = NULL;
    int release = 0;
    uint32_t count = 0;
    if (sent < 0)
        why = "the request could not be sent";
    else if (!wait_reply(ps, deadline))
        why = "no answer within peer-timeout";
    else if (ps->wait.msg == NULL)
        why = "the connection failed";
    struct got g = { 0 };
    if (why == NULL) {
        why = check_reply(ps->wait.msg, ask, p->geom.block_bytes, &g);
        release = why == NULL && g.count != 0;
        count = why == NULL ? g.count : 0;
    }
    const size_t bytes = (size_t) count * p->geom.block_bytes;
    if (why == NULL && count != 0 && local_room(ps, bytes) < 0)
        why = "no memory for the local staging buffer";
    if (why == NULL && count != 0)
        why = pull(ps, q, &g, bytes, deadline);
    for (uint32_t i = 0; why == NULL && i < count; i++) {
        uint64_t sum;
        memcpy(&sum, g.sums + (size_t) i * sizeof sum, sizeof sum);
        if (XXH3_64bits(ps->local + (size_t) i * p->geom.block_bytes, p->geom.block_bytes) != sum)
            why = "a block's checksum does not match";
    }
    if (release) {
        struct pd_peer_release rel = { .req = req };
        pd_peer_send(ps, q, PD_PEER_AM_RELEASE, &rel, sizeof rel);
    }
    if (why == NULL && count != 0)
        why = publish(ps, p, holder, tenant, count, hashes, ids);
    free(ps->wait.msg);
    ps->wait = (struct pd_peer_wait) { 0 };
    q->fetches++;
    if (why != NULL) {
        q->failures++;
        pd_log(PD_LOG_WARNING, "peer %s: fetching %u blocks of pool %s: %s", q->addr, ask, p->name, why);
        return 0;
    }
    q->blocks += count;
    q->bytes += bytes;
    q->fetch_ns += pd_peer_now_ns() - t0;
    if (count != 0)
        pd_log(PD_LOG_DEBUG, "peer %s: fetched %u blocks of pool %s", q->addr, count, p->name);
    return count;
}

/* The engine's remote lookup; returns the length of the prefix now held. */
uint32_t pd_peers_lookup(void *ctx, struct pd_pool *p, uint32_t holder, uint32_t tenant, uint32_t n,
                         const paged_hash *hashes, int32_t *ids, uint32_t found)
{
    struct pd_peers *ps = ctx;
    if (ps == NULL || !p->geom.peers || found >= n)
        return found;
    const uint64_t deadline = pd_peer_now_ns() + (uint64_t) ps->timeout_ms * 1000000u;
    for (uint32_t i = 0; i < ps->npeers && pd_peer_now_ns() < deadline; i++) {
        struct pd_peer *q = ps->peers[i];
        if (!q->outgoing || q->state != PD_PEER_AUTHENTICATED || q->ep == NULL || q->ep_failed)
            continue;
        uint32_t got = fetch_from(ps, q, p, holder, tenant, n - found, hashes + found, ids + found, deadline);
        if (got != 0)
            return found + got;
    }
    return found;
}
