/* pactl_fetch.c: the requests pactl's commands make: status, lists of items, statistics, pool requests. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/pactl_fetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* No listing pactl asks for is larger; the bound keeps a runaway peer from exhausting memory. */
#define PACTL_LIST_MAX_ITEMS (1u << 24)

/* Sends STATUS and copies the reply; returns 0 or -1 with *cause. */
int pactl_fetch_status(struct pactl_conn *c, struct pcore_msg_status_reply *out, char **cause)
{
    struct pcore_msg_hdr req = { .type = PCORE_MSG_STATUS };
    size_t len;
    const struct pcore_msg_hdr *h = pactl_conn_call(c, &req, sizeof req, PCORE_MSG_STATUS_REPLY,
                                                    sizeof *out, &len, cause);
    if (h == NULL)
        return -1;
    memcpy(out, h, sizeof *out);
    return 0;
}

/* Sends STATUS and takes its devices, 0 read as 1; returns 0 or -1 with *cause. */
int pactl_fetch_ndevices(struct pactl_conn *c, uint32_t *n, char **cause)
{
    struct pcore_msg_status_reply s;
    if (pactl_fetch_status(c, &s, cause) < 0)
        return -1;
    *n = s.devices > 0 ? s.devices : 1;
    return 0;
}

/* Sends a pool_ref request by name and reads its OK's count; returns 0 or -1 with *cause. */
int pactl_fetch_pool_ref(struct pactl_conn *c, uint32_t type, const char *pool, uint32_t *count,
                         char **cause)
{
    struct pcore_msg_pool_ref req;
    size_t len;
    memset(&req, 0, sizeof req);
    req.hdr.type = type;
    snprintf(req.name, sizeof req.name, "%s", pool);
    const struct pcore_msg_hdr *h = pactl_conn_call(c, &req, sizeof req, PCORE_MSG_OK, sizeof *h,
                                                    &len, cause);
    if (h == NULL)
        return -1;
    *count = h->status > 0 ? (uint32_t) h->status : 0;
    return 0;
}

/* Sends PREFIX op with hashes and reads its OK's count; returns 0 or -1 with *cause. */
int pactl_fetch_prefix(struct pactl_conn *c, uint32_t op, const char *pool, const paged_hash *hashes, uint32_t n,
                       uint64_t ttl_ms, uint32_t *count, char **cause)
{
    static unsigned char buf[sizeof(struct pcore_msg_prefix) + PCORE_PREFIX_MAX_HASHES * sizeof(paged_hash)];
    struct pcore_msg_prefix req;
    size_t len;
    if (n > PCORE_PREFIX_MAX_HASHES) {
        *cause = pactl_cause("%u hashes: at most %u", (unsigned) n, PCORE_PREFIX_MAX_HASHES);
        return -1;
    }
    memset(&req, 0, sizeof req);
    req.hdr.type = PCORE_MSG_PREFIX;
    req.op = op;
    req.count = n;
    req.ttl_ms = ttl_ms;
    snprintf(req.name, sizeof req.name, "%s", pool);
    memcpy(buf, &req, sizeof req);
    if (n > 0)
        memcpy(buf + sizeof req, hashes, (size_t) n * sizeof *hashes);
    const struct pcore_msg_hdr *h = pactl_conn_call(c, buf, sizeof req + (size_t) n * sizeof *hashes,
                                                    PCORE_MSG_OK, sizeof *h, &len, cause);
    if (h == NULL)
        return -1;
    *count = h->status > 0 ? (uint32_t) h->status : 0;
    return 0;
}

/* Sends STATS and copies the reply; returns 0 or -1 with *cause. */
int pactl_fetch_stats(struct pactl_conn *c, struct pcore_msg_stats_reply *out, char **cause)
{
    struct pcore_msg_hdr req = { .type = PCORE_MSG_STATS };
    size_t len;
    /* An older daemon may know fewer ops: accept a reply as long as its ops are all there. */
    const struct pcore_msg_hdr *h = pactl_conn_call(c, &req, sizeof req, PCORE_MSG_STATS_REPLY,
                                                    offsetof(struct pcore_msg_stats_reply, ops),
                                                    &len, cause);
    if (h == NULL)
        return -1;
    memset(out, 0, sizeof *out);
    memcpy(out, h, len < sizeof *out ? len : sizeof *out);
    size_t have = (len - offsetof(struct pcore_msg_stats_reply, ops)) / sizeof out->ops[0];
    if (out->num_ops > have) {
        *cause = pactl_cause("statistics reply holds %zu ops but says %u", have,
                             (unsigned) out->num_ops);
        return -1;
    }
    if (out->num_ops > PCORE_OP_COUNT_)
        out->num_ops = PCORE_OP_COUNT_;
    return 0;
}

/* Returns the item size of a listing, 0 for a kind pactl does not know. */
static size_t list_item_size(uint32_t what)
{
    switch (what) {
    case PCORE_LIST_POOLS: return sizeof(struct pcore_pool_item);
    case PCORE_LIST_CLIENTS: return sizeof(struct pcore_client_item);
    case PCORE_LIST_BLOCKS: return sizeof(struct pcore_block_item);
    case PCORE_LIST_PEERS: return sizeof(struct pcore_peer_item);
    case PCORE_LIST_DEVICES: return sizeof(struct pcore_device_item);
    default: return 0;
    }
}

/* Appends the items of one LIST_ITEMS packet to l; returns 0 or -1 with *cause. */
static int list_take(struct pactl_list *l, const struct pcore_msg_hdr *h, size_t len,
                     char **cause)
{
    const struct pcore_msg_list_items *li = (const struct pcore_msg_list_items *) h;
    if (len < sizeof *li || li->what != l->what
        || (len - sizeof *li) / l->item_size != li->count
        || (len - sizeof *li) % l->item_size != 0) {
        *cause = pactl_cause("malformed list reply from the daemon");
        return -1;
    }
    if (li->count > PACTL_LIST_MAX_ITEMS - l->count) {
        *cause = pactl_cause("the daemon's list is longer than %u items", PACTL_LIST_MAX_ITEMS);
        return -1;
    }
    if (li->count == 0)
        return 0;
    void *grown = realloc(l->items, (l->count + li->count) * l->item_size);
    if (grown == NULL) {
        *cause = pactl_cause("out of memory");
        return -1;
    }
    l->items = grown;
    memcpy((char *) l->items + l->count * l->item_size, (const char *) h + sizeof *li,
           li->count * l->item_size);
    l->count += li->count;
    return 0;
}

/* Sends LIST and gathers the items until LIST_END; returns 0 or -1 with *cause. */
int pactl_fetch_list(struct pactl_conn *c, uint32_t what, const char *name,
                     struct pactl_list *out, char **cause)
{
    struct pcore_msg_list req;
    memset(&req, 0, sizeof req);
    memset(out, 0, sizeof *out);
    out->what = what;
    out->item_size = list_item_size(what);
    if (out->item_size == 0) {
        *cause = pactl_cause("cannot list items of kind %u", (unsigned) what);
        return -1;
    }
    req.hdr.type = PCORE_MSG_LIST;
    req.what = what;
    if (name != NULL)
        snprintf(req.name, sizeof req.name, "%s", name);
    if (pactl_conn_send(c, &req, sizeof req, cause) < 0)
        return -1;
    for (;;) {
        size_t len;
        const struct pcore_msg_hdr *h = pactl_conn_reply(c, PACTL_REPLY_TIMEOUT_MS, &len, cause);
        if (h == NULL)
            break;
        if (h->type == PCORE_MSG_LIST_END)
            return 0;
        if (h->type != PCORE_MSG_LIST_ITEMS) {
            *cause = pactl_cause("unexpected reply from the daemon (type %u)", (unsigned) h->type);
            break;
        }
        if (list_take(out, h, len, cause) < 0)
            break;
    }
    pactl_list_free(out);
    return -1;
}

/* Frees a list's items. */
void pactl_list_free(struct pactl_list *l)
{
    free(l->items);
    l->items = NULL;
    l->count = 0;
}

/* Finds a pool's name by id. */
const char *pactl_pool_name(const struct pactl_list *pools, uint32_t id)
{
    const struct pcore_pool_item *p = pools->items;
    for (size_t i = 0; i < pools->count; i++)
        if (p[i].id == id)
            return p[i].name;
    return NULL;
}
