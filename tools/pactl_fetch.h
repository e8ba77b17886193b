/* pactl_fetch.h: the requests pactl's commands make: status, lists of items, statistics, pool requests. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_PACTL_FETCH_H
#define PAGED_TOOLS_PACTL_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/proto.h"
#include "tools/pactl_conn.h"

/* Items of one LIST request, gathered from every LIST_ITEMS packet until LIST_END. */
struct pactl_list {
    uint32_t what;               /* enum pcore_list_what */
    size_t count;
    size_t item_size;            /* sizeof the item struct for what */
    void *items;                 /* count items, malloc'd */
};

/* Asks for the daemon's status into *out. Returns 0 or -1 with *cause. */
int pactl_fetch_status(struct pactl_conn *c, struct pcore_msg_status_reply *out, char **cause);

/* Asks for the daemon's status for the devices it serves into *n: 1 from a daemon older than
 * several devices (which reports 0). Returns 0 or -1 with *cause. */
int pactl_fetch_ndevices(struct pactl_conn *c, uint32_t *n, char **cause);

/* Asks for the per-op statistics into *out. Returns 0 or -1 with *cause. */
int pactl_fetch_stats(struct pactl_conn *c, struct pcore_msg_stats_reply *out, char **cause);

/*
 * Lists pools, clients, blocks, peers or devices (enum pcore_list_what); name is the pool to restrict the
 * list to, or NULL. Returns 0 with *out filled (free it with pactl_list_free), or -1 with
 * *cause.
 */
int pactl_fetch_list(struct pactl_conn *c, uint32_t what, const char *name,
                     struct pactl_list *out, char **cause);

/*
 * Sends a request of type (POOL_DESTROY, EVICT) naming pool and waits for its OK. Returns 0
 * with the OK's count in *count (clients still attached, blocks evicted), or -1 with *cause
 * (the daemon's own words where it refused).
 */
/* Sends PREFIX op for pool by name with n hashes (ttl_ms for the TTL op) and reads its OK's
 * count; returns 0 or -1 with *cause. */
int pactl_fetch_prefix(struct pactl_conn *c, uint32_t op, const char *pool, const paged_hash *hashes, uint32_t n,
                       uint64_t ttl_ms, uint32_t *count, char **cause);

int pactl_fetch_pool_ref(struct pactl_conn *c, uint32_t type, const char *pool, uint32_t *count,
                         char **cause);

/* Frees the items of a list. */
void pactl_list_free(struct pactl_list *l);

/* Returns the name of pool id in a list of pools, or NULL if it is not there. */
const char *pactl_pool_name(const struct pactl_list *pools, uint32_t id);

#endif
