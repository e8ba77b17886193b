/* serve.c: a peer's FETCH answered: the published blocks staged in a mapped buffer, checksummed, released. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "daemon/peer/internal.h"
#include "daemon/tier/tiers.h"
#include "daemon/util/heap.h"
#include "daemon/util/log.h"

/* The allocator holder the blocks being staged are held by, for the copy's length: client ids
 * start at 1, so none is 0. */
#define PD_PEER_HOLDER 0u

/* Frees stage s, its buffer kept as a spare where there is room; returns nothing. */
static void stage_free(struct pd_peers *ps, struct pd_peer_stage *s)
{
    pd_peer_buf_put(ps, &s->b, pd_peer_now_ns());
    memset(s, 0, sizeof *s);
}

/* Frees the stages of ep (all: every one) and those expired before now (0: none). */
void pd_peer_stages_drop(struct pd_peers *ps, ucp_ep_h ep, int all, uint64_t now)
{
    for (uint32_t i = 0; i < PD_PEER_MAX_STAGES; i++) {
        struct pd_peer_stage *s = &ps->stages[i];
        if (s->b.buf == NULL)
            continue;
        if (all || (ep != NULL && s->ep == ep) || (now != 0 && now >= s->expires_ns))
            stage_free(ps, s);
    }
}

/* Returns p's pool called name if peers may read it (PAGED_POOL_PEERS, not destroyed), else NULL. */
static struct pd_pool *exportable(struct pd_peers *ps, const char *name)
{
    for (struct pd_pool *p = *ps->pools; p != NULL; p = p->next)
        if (!p->destroyed && p->geom.peers && strcmp(p->name, name) == 0)
            return p;
    return NULL;
}

/* Sends p a REPLY with status and no blocks; returns nothing. */
static void refuse(struct pd_peers *ps, struct pd_peer *p, uint64_t req, int status)
{
    struct pd_peer_reply r = { .req = req, .status = status };
    pd_peer_send(ps, p, PD_PEER_AM_REPLY, &r, sizeof r);
}

/* Checks FETCH f of len bytes: its size, name, count and that pool matches it. Returns PAGED_OK
 * or the status to refuse with. */
static int check_fetch(const struct pd_peer_fetch *f, size_t len)
{
    if (f->n == 0 || f->n > PD_PEER_MAX_ASK || len != sizeof *f + (size_t) f->n * sizeof(paged_hash))
        return PAGED_E_INVAL;
    if ((f->flags & ~PD_PEER_FETCH_DEVICE) != 0)
        return PAGED_E_INVAL;
    if (memchr(f->pool, '\0', sizeof f->pool) == NULL)
        return PAGED_E_INVAL;
    return PAGED_OK;
}

/* Returns whether pool q has the geometry and prefix scope f asks for. */
static int matches(const struct pd_pool *q, const struct pd_peer_fetch *f)
{
    const struct pd_pool_geom *g = &q->geom;
    return g->num_layers == f->num_layers && g->num_kv_heads == f->num_kv_heads && g->head_dim == f->head_dim
           && g->block_size == f->block_size && g->dtype == f->dtype && g->block_bytes == f->unit_bytes
           && (g->shared_prefixes != 0) == (f->tenant == PD_TENANT_SHARED);
}

/* Takes a free stage slot; returns it or NULL. */
static struct pd_peer_stage *free_stage(struct pd_peers *ps)
{
    for (uint32_t i = 0; i < PD_PEER_MAX_STAGES; i++)
        if (ps->stages[i].b.buf == NULL)
            return &ps->stages[i];
    return NULL;
}

/* Copies the n blocks ids of q into s's buffer as units and sums each into sums: into device
 * memory, summed in the same pass where the device can (s->b.device); else on the cpu backend
 * a few units at a time, each summed while the copy left it in the cache. Returns PAGED_OK or
 * an error. */
static int stage_blocks(struct pd_peers *ps, struct pd_pool *q, uint32_t n, const int32_t *ids,
                        struct pd_peer_stage *s, uint64_t *sums)
{
    const uint64_t unit = q->geom.block_bytes;
    int rc = PAGED_OK;
    char *cause = NULL;
    if (s->b.device) {
        rc = pd_peer_units_move(ps, q, 1, n, ids, s->b.buf, sums, &cause);
    } else {
        /* Host copies in rounds of about 8 MiB (a device pool's in one call). */
        const int pool_on_device = ps->backend->ops->units_copy != NULL;
        const uint32_t round = pool_on_device ? n : (uint32_t) (unit >= (8u << 20) ? 1 : (8u << 20) / unit);
        for (uint32_t first = 0; rc == PAGED_OK && first < n; first += round) {
            const uint32_t k = n - first < round ? n - first : round;
            unsigned char *at = s->b.buf + (size_t) first * unit;
            rc = pd_peer_units_copy(ps, q, 1, k, ids + first, at, &cause);
            for (uint32_t i = 0; rc == PAGED_OK && i < k; i++)
                sums[first + i] = XXH3_64bits(at + (size_t) i * unit, unit);
        }
    }
    if (rc != PAGED_OK) {
        pd_log(PD_LOG_WARNING, "peers: staging %u blocks of pool %s: %s", n, q->name, cause ? cause : "failed");
        free(cause);
    }
    return rc;
}

/* Packs the remote key of s's (mapped) buffer; returns PAGED_OK with *rkey (to release) or an
 * error. */
static int map_stage(struct pd_peers *ps, struct pd_peer_stage *s, void **rkey, size_t *rkey_len)
{
    ucs_status_t st = ucp_rkey_pack(ps->ctx, s->b.memh, rkey, rkey_len);
    if (st != UCS_OK) {
        pd_log(PD_LOG_WARNING, "peers: ucp_rkey_pack: %s", ucs_status_string(st));
        return PAGED_E_NOMEM;
    }
    if (*rkey_len > PD_PEER_MAX_RKEY) {
        ucp_rkey_buffer_release(*rkey);
        pd_log(PD_LOG_WARNING, "peers: a packed remote key of %zu bytes", *rkey_len);
        return PAGED_E_NOMEM;
    }
    return PAGED_OK;
}

/* Sends the REPLY for stage s of count units with sums; returns nothing (a failure frees s). */
static void reply(struct pd_peers *ps, struct pd_peer *p, struct pd_peer_stage *s, uint32_t count,
                  uint64_t unit, const uint64_t *sums)
{
    void *rkey = NULL;
    size_t rkey_len = 0;
    if (map_stage(ps, s, &rkey, &rkey_len) != PAGED_OK) {
        refuse(ps, p, s->req, PAGED_E_NOMEM);
        stage_free(ps, s);
        return;
    }
    const size_t len = sizeof(struct pd_peer_reply) + rkey_len + (size_t) count * sizeof *sums;
    unsigned char *msg = pd_malloc(len);
    if (msg == NULL) {
        ucp_rkey_buffer_release(rkey);
        refuse(ps, p, s->req, PAGED_E_NOMEM);
        stage_free(ps, s);
        return;
    }
    struct pd_peer_reply r = { .req = s->req, .status = PAGED_OK, .count = count, .unit_bytes = unit,
                               .addr = (uint64_t) (uintptr_t) s->b.buf, .rkey_len = (uint32_t) rkey_len,
                               .device = (uint32_t) s->b.device };
    memcpy(msg, &r, sizeof r);
    memcpy(msg + sizeof r, rkey, rkey_len);
    memcpy(msg + sizeof r + rkey_len, sums, (size_t) count * sizeof *sums);
    ucp_rkey_buffer_release(rkey);
    if (pd_peer_send(ps, p, PD_PEER_AM_REPLY, msg, len) < 0)
        stage_free(ps, s);
    else
        p->served_blocks += count;
    free(msg);
}

/* Answers p's FETCH m; returns nothing. */
void pd_peer_serve_fetch(struct pd_peers *ps, struct pd_peer *p, const struct pd_peer_msg *m)
{
    struct pd_peer_fetch f;
    if (m->len < sizeof f) {
        pd_peer_fail(ps, p, "a request of %zu bytes", m->len);
        return;
    }
    memcpy(&f, m->data, sizeof f);
    if (ps->stall) {
        pd_log(PD_LOG_INFO, "peer %s: request %llu left unanswered (PAGEDD_PEER_STALL)", p->addr,
               (unsigned long long) f.req);
        return;
    }
    if (check_fetch(&f, m->len) != PAGED_OK) {
        pd_peer_fail(ps, p, "a malformed request (%u hashes in %zu bytes)", f.n, m->len);
        return;
    }
    struct pd_pool *q = exportable(ps, f.pool);
    if (q == NULL || !matches(q, &f)) {
        refuse(ps, p, f.req, PAGED_E_NOENT);
        return;
    }
    paged_hash *hashes = pd_malloc((size_t) f.n * sizeof *hashes);
    int32_t *ids = pd_malloc((size_t) f.n * sizeof *ids + 4);
    uint64_t *sums = pd_malloc((size_t) f.n * sizeof *sums);
    struct pd_peer_stage *s = free_stage(ps);
    if (hashes == NULL || ids == NULL || sums == NULL || s == NULL) {
        refuse(ps, p, f.req, PAGED_E_NOMEM);
        goto out;
    }
    memcpy(hashes, m->data + sizeof f, (size_t) f.n * sizeof *hashes);
    uint32_t found = pa_lookup(q->alloc, PD_PEER_HOLDER, f.tenant, f.n, hashes, ids);
    found = pd_tiers_lookup(q->tiers, PD_PEER_HOLDER, f.tenant, f.n, hashes, ids, found, NULL);
    if (found == 0) {
        refuse(ps, p, f.req, PAGED_OK);
        goto out;
    }
    const uint64_t unit = q->geom.block_bytes;
    s->len = (size_t) found * unit;
    /* In device memory where the asker takes it and this daemon can (not with the corruption
     * hook, which flips a byte from the host). */
    const int device = ps->device_staging && (f.flags & PD_PEER_FETCH_DEVICE) != 0 && !ps->corrupt;
    int got = pd_peer_buf_get(ps, s->len, device, &s->b);
    if (got < 0 && device)
        got = pd_peer_buf_get(ps, s->len, 0, &s->b);   /* no device memory to be had: host units */
    int rc = got == 0 ? stage_blocks(ps, q, found, ids, s, sums) : PAGED_E_NOMEM;
    uint32_t bad = 0;
    pa_free_blocks(q->alloc, PD_PEER_HOLDER, found, ids, &bad);
    if (rc != PAGED_OK) {
        stage_free(ps, s);
        refuse(ps, p, f.req, rc);
        goto out;
    }
    if (ps->corrupt)
        s->b.buf[s->len / 2] ^= 0x5a;
    s->req = f.req;
    s->ep = p->ep;
    s->expires_ns = pd_peer_now_ns() + (uint64_t) ps->timeout_ms * 4000000u + 1000000000u;
    reply(ps, p, s, found, unit, sums);
out:
    free(hashes);
    free(ids);
    free(sums);
}

/* Frees the stage p's RELEASE m names; returns nothing. */
void pd_peer_serve_release(struct pd_peers *ps, struct pd_peer *p, const struct pd_peer_msg *m)
{
    struct pd_peer_release r;
    if (m->len != sizeof r) {
        pd_peer_fail(ps, p, "a release of %zu bytes", m->len);
        return;
    }
    memcpy(&r, m->data, sizeof r);
    for (uint32_t i = 0; i < PD_PEER_MAX_STAGES; i++)
        if (ps->stages[i].b.buf != NULL && ps->stages[i].ep == p->ep && ps->stages[i].req == r.req)
            stage_free(ps, &ps->stages[i]);
}
