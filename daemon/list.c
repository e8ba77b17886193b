/* list.c: replies that describe the daemon: STATUS, STATS and LIST packets. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/server.h"
#ifdef HAVE_UCX
#include "daemon/peer/peer.h"
#endif
#include "lib/core/clock.h"

/* Replies STATUS_REPLY; returns nothing. */
void pd_reply_status(struct pd_server *srv, struct pd_conn *c, uint32_t seq)
{
    struct pcore_msg_status_reply r;
    memset(&r, 0, sizeof r);
    r.hdr.type = PCORE_MSG_STATUS_REPLY;
    r.hdr.seq = seq;
    r.hdr.len = sizeof r;
    srv->backend->ops->info(srv->backend, 0, &srv->binfo);
    snprintf(r.version, sizeof r.version, "%s", PACKAGE_VERSION);
    r.backend = srv->binfo.kind;
    r.device_ordinal = srv->binfo.device_ordinal;
    memcpy(r.device_name, srv->binfo.device_name, sizeof r.device_name);
    r.uptime_ns = pcore_now_ns() - srv->start_ns;
    r.clients = srv->tally.total[PD_TALLY_CLIENT] + srv->tally.total[PD_TALLY_CONTROL];
    r.pools = srv->n_pools;
    for (struct pd_pool *p = srv->pools; p != NULL; p = p->next) {
        pa_counts pc;
        pa_get_counts(p->alloc, &pc);
        r.mem_total += p->geom.bytes;
        r.mem_used += ((uint64_t) pc.referenced + pc.cached) * p->geom.block_bytes;
    }
    r.device_mem_free = srv->binfo.device_mem_free;
    r.healthy = (uint32_t) srv->binfo.healthy;
    r.pid = (uint32_t) getpid();
    memcpy(r.health, srv->binfo.health, sizeof r.health);
    r.devices = srv->backend->ndevices;
    pd_conn_send(c, &r, sizeof r, NULL, 0, 0);
}

/* Replies STATS_REPLY; returns nothing. */
void pd_reply_stats(struct pd_server *srv, struct pd_conn *c, uint32_t seq)
{
    struct pcore_msg_stats_reply r;
    memset(&r, 0, sizeof r);
    r.hdr.type = PCORE_MSG_STATS_REPLY;
    r.hdr.seq = seq;
    r.hdr.len = sizeof r;
    r.num_ops = PCORE_OP_COUNT_;
    pd_stats_fill(&srv->stats, r.ops);
    pd_engine_stats(srv->engine, &r.engine);
    r.prefix = c->prefix;
    pd_conn_send(c, &r, sizeof r, NULL, 0, 0);
}

/* Starts a LIST; its packets follow as the socket takes them. Returns nothing. */
void pd_list_start(struct pd_server *srv, struct pd_conn *c, const struct pcore_msg_list *m)
{
    memset(&c->list, 0, sizeof c->list);
    c->list.active = 1;
    c->list.seq = m->hdr.seq;
    c->list.what = m->what;
    memcpy(c->list.name, m->name, sizeof c->list.name);
    pd_list_continue(srv, c);
}

/* Returns the pool with the smallest id >= id that the list's filter keeps, or NULL. */
static struct pd_pool *next_pool(struct pd_server *srv, const struct pd_list_cursor *l, uint32_t id)
{
    struct pd_pool *best = NULL;
    for (struct pd_pool *p = srv->pools; p != NULL; p = p->next)
        if (p->id >= id && (best == NULL || p->id < best->id)
            && (l->name[0] == '\0' || strcmp(l->name, p->name) == 0))
            best = p;
    return best;
}

/* Returns the ready connection with the smallest id >= id, or NULL. */
static struct pd_conn *next_client(struct pd_server *srv, uint32_t id)
{
    struct pd_conn *best = NULL;
    for (struct pd_conn *k = srv->conns; k != NULL; k = k->next)
        if (k->state == PD_CONN_READY && k->id >= id && (best == NULL || k->id < best->id))
            best = k;
    return best;
}

/* Collects up to 4 holders of a block into an item. */
struct holders_ctx {
    struct pcore_block_item *it;
};

/* Records one holder of a block; the allocator's callback. */
static void add_holder(void *ctx, uint32_t holder, uint32_t refs)
{
    (void) refs;
    struct holders_ctx *h = ctx;
    if (h->it->num_holders < 4)
        h->it->holders[h->it->num_holders] = holder;
    h->it->num_holders++;
}

/* Returns whether the lister c may see the hash of a block of p published as bi
 * (pd_pool_may_see_tenant). */
static int may_see_hash(const struct pd_conn *c, const struct pd_pool *p, const pa_block_info *bi)
{
    return pd_pool_may_see_tenant(p, c->uid, bi->tenant);
}

/* Fills it with what device d of srv serves: the backend's description, the pools and
 * shards with memory there and the clients whose data arena is there. */
static void device_item(struct pd_server *srv, uint32_t d, struct pcore_device_item *it)
{
    struct pd_backend_info bi;
    srv->backend->ops->info(srv->backend, d, &bi);
    memset(it, 0, sizeof *it);
    it->index = d;
    it->ordinal = bi.device_ordinal;
    memcpy(it->name, bi.device_name, sizeof it->name);
    memcpy(it->uuid, bi.device_uuid, sizeof it->uuid);
    it->mem_free = bi.device_mem_free;
    it->healthy = (uint32_t) bi.healthy;
    memcpy(it->health, bi.health, sizeof it->health);
    for (struct pd_pool *p = srv->pools; p != NULL; p = p->next)
        for (uint32_t r = 0; r < p->geom.shards; r++)
            if (pd_pool_shard_device(p, r) == d) {
                it->pools++;
                it->pool_bytes += p->geom.bytes / p->geom.shards;
            }
    for (const struct pd_conn *k = srv->conns; k != NULL; k = k->next)
        if (k->state == PD_CONN_READY && k->ch != NULL && k->ch->device == d)
            it->clients++;
}

/* Fills up to max items of the list at c's cursor into items, advancing it. Returns the
 * number filled; the cursor is inactive once everything was listed. */
static uint32_t fill(struct pd_server *srv, struct pd_conn *c, void *items, uint32_t max)
{
    struct pd_list_cursor *l = &c->list;
    uint32_t n = 0;
    while (n < max) {
        if (l->what == PCORE_LIST_POOLS) {
            struct pd_pool *p = next_pool(srv, l, l->next_id);
            if (p == NULL)
                break;
            pd_pool_item(p, (struct pcore_pool_item *) items + n++);
            l->next_id = p->id + 1;
        } else if (l->what == PCORE_LIST_DEVICES) {
            if (l->next_id >= srv->backend->ndevices)
                break;
            device_item(srv, l->next_id++, (struct pcore_device_item *) items + n++);
        } else if (l->what == PCORE_LIST_PEERS) {
#ifdef HAVE_UCX
            if (srv->peers == NULL || l->next_id >= pd_peers_count(srv->peers))
                break;
            pd_peers_item(srv->peers, l->next_id++, (struct pcore_peer_item *) items + n++);
#else
            break;
#endif
        } else if (l->what == PCORE_LIST_CLIENTS) {
            struct pd_conn *k = next_client(srv, l->next_id);
            if (k == NULL)
                break;
            struct pcore_client_item *it = (struct pcore_client_item *) items + n++;
            memset(it, 0, sizeof *it);
            it->id = k->id;
            it->pid = (uint32_t) k->pid;
            it->uid = (uint32_t) k->uid;
            it->pools = k->natt;
            it->blocks = pd_conn_held(k);
            it->requests = k->requests;
            it->errors = k->errors;
            it->prefix = k->prefix;
            it->connected_ns = pcore_now_ns() - k->connected_ns;
            it->control_only = (uint32_t) k->control_only;
            it->nospin = (uint32_t) k->nospin;
            memcpy(it->name, k->name, sizeof it->name);
            l->next_id = k->id + 1;
        } else {
            struct pd_pool *p = next_pool(srv, l, l->next_id);
            if (p == NULL)
                break;
            if ((uint32_t) l->next_block >= p->geom.num_blocks) {
                l->next_id = p->id + 1;
                l->next_block = 0;
                continue;
            }
            int32_t b = l->next_block++;
            pa_block_info bi;
            if (pa_block_info_get(p->alloc, b, &bi) < 0 || (bi.refcount == 0 && !bi.published))
                continue;
            struct pcore_block_item *it = (struct pcore_block_item *) items + n++;
            memset(it, 0, sizeof *it);
            it->pool_id = p->id;
            it->block = b;
            it->refcount = bi.refcount;
            if (bi.published) {
                it->tenant = bi.tenant;
                it->published = may_see_hash(c, p, &bi) ? PCORE_BLOCK_PUBLISHED : PCORE_BLOCK_WITHHELD;
                if (it->published == PCORE_BLOCK_PUBLISHED)
                    it->hash = bi.hash;
            }
            it->pinned = (uint32_t) bi.pinned;
            it->pinner_uid = bi.pinned && it->published == PCORE_BLOCK_PUBLISHED ? bi.pinner : UINT32_MAX;
            struct holders_ctx hc = { it };
            pa_block_holders(p->alloc, b, add_holder, &hc);
        }
    }
    return n;
}

/* Sends LIST_ITEMS packets while c's queue is empty, then LIST_END. Returns nothing. */
void pd_list_continue(struct pd_server *srv, struct pd_conn *c)
{
    static unsigned char buf[PCORE_MSG_MAX];
    struct pd_list_cursor *l = &c->list;
    size_t isize = l->what == PCORE_LIST_POOLS ? sizeof(struct pcore_pool_item)
                   : l->what == PCORE_LIST_CLIENTS ? sizeof(struct pcore_client_item)
                   : l->what == PCORE_LIST_PEERS ? sizeof(struct pcore_peer_item)
                   : l->what == PCORE_LIST_DEVICES ? sizeof(struct pcore_device_item)
                   : sizeof(struct pcore_block_item);
    uint32_t max = (uint32_t) ((PCORE_MSG_MAX - sizeof(struct pcore_msg_list_items)) / isize);
    while (l->active && c->out_head == NULL && c->state == PD_CONN_READY) {
        struct pcore_msg_list_items *h = (struct pcore_msg_list_items *) buf;
        uint32_t n = fill(srv, c, buf + sizeof *h, max);
        if (n == 0) {
            struct pcore_msg_hdr end = { PCORE_MSG_LIST_END, l->seq,
                                         (int32_t) (l->total > INT32_MAX ? INT32_MAX : l->total),
                                         sizeof end };
            l->active = 0;
            if (pd_conn_send(c, &end, sizeof end, NULL, 0, 0) < 0)
                pd_server_kill(srv, c, PD_LOG_INFO, "hung up");
            return;
        }
        memset(h, 0, sizeof *h);
        h->hdr.type = PCORE_MSG_LIST_ITEMS;
        h->hdr.seq = l->seq;
        h->hdr.len = (uint32_t) (sizeof *h + n * isize);
        h->what = l->what;
        h->count = n;
        l->total += n;
        if (pd_conn_send(c, buf, h->hdr.len, NULL, 0, 0) < 0) {
            pd_server_kill(srv, c, PD_LOG_INFO, "hung up");
            return;
        }
    }
}
