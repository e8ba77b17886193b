/* stats.c: the daemon's counters: per op (paged_stats), per client and per pool of the prefix cache. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include "lib/client.h"
#include "lib/core/proto.h"
#include "lib/core/sock.h"
#include "paged.h"

/* Sends STATS on c's connection and copies the reply to *r; returns PAGED_OK or a negative
 * error (explained). */
static int fetch_stats(paged_client *c, struct pcore_msg_stats_reply *r)
{
    c->err[0] = '\0';
    struct pcore_msg_hdr req;
    memset(&req, 0, sizeof req);
    req.type = PCORE_MSG_STATS;
    int fds[PSOCK_MAX_FDS], nfds = 0;
    return pc_ctl_call(c, &req, sizeof req, PCORE_MSG_STATS_REPLY, r, sizeof *r, fds, 0, &nfds);
}

/* Asks the daemon for its statistics and copies up to max_ops ops' counters into out;
 * returns the number of ops the daemon counts, or a negative error (explained). */
int paged_stats(paged_client *c, paged_op_stats *out, unsigned max_ops)
{
    if (c == NULL || (out == NULL && max_ops > 0))
        return PAGED_E_INVAL;
    struct pcore_msg_stats_reply r;
    int rc = fetch_stats(c, &r);
    if (rc < 0)
        return rc;
    unsigned n = r.num_ops < PCORE_OP_COUNT_ ? r.num_ops : PCORE_OP_COUNT_;
    for (unsigned i = 0; i < n && i < max_ops; i++)
        out[i] = (paged_op_stats) {
            .requests = r.ops[i].requests, .errors = r.ops[i].errors, .tokens = r.ops[i].tokens,
            .bytes = r.ops[i].bytes, .latency_p50_ns = r.ops[i].latency_p50_ns,
            .latency_p99_ns = r.ops[i].latency_p99_ns,
        };
    return (int) n;
}

/* Asks the daemon for this client's prefix-cache figures; returns PAGED_OK or an error. */
int paged_prefix_stats(paged_client *c, paged_prefix_counts *out)
{
    if (c == NULL || out == NULL)
        return PAGED_E_INVAL;
    struct pcore_msg_stats_reply r;
    int rc = fetch_stats(c, &r);
    if (rc < 0)
        return rc;
    *out = (paged_prefix_counts) {
        .lookups = r.prefix.lookups, .lookup_tokens = r.prefix.lookup_tokens,
        .pool_hit_tokens = r.prefix.pool_hit_tokens, .host_hit_tokens = r.prefix.host_hit_tokens,
        .file_hit_tokens = r.prefix.file_hit_tokens, .reloaded_bytes = r.prefix.reloaded_bytes,
        .reload_ns = r.prefix.reload_ns, .offloaded_bytes = r.prefix.offloaded_bytes,
    };
    return PAGED_OK;
}

/* Asks the daemon for an attached pool's counters; returns PAGED_OK or an error. */
int paged_pool_stats(paged_pool *p, paged_pool_counts *out)
{
    if (p == NULL || out == NULL)
        return PAGED_E_INVAL;
    paged_client *c = p->c;
    c->err[0] = '\0';
    struct pcore_msg_pool_ref req;
    memset(&req, 0, sizeof req);
    req.hdr.type = PCORE_MSG_POOL_STATS;
    req.pool_id = p->info.id;
    struct pcore_msg_pool_stats_reply r;
    int fds[PSOCK_MAX_FDS], nfds = 0;
    int rc = pc_ctl_call(c, &req, sizeof req, PCORE_MSG_POOL_STATS_REPLY, &r, sizeof r, fds, 0, &nfds);
    if (rc < 0)
        return rc;
    const struct pcore_pool_item *it = &r.item;
    *out = (paged_pool_counts) {
        .free = it->free, .referenced = it->referenced, .cached = it->cached, .pinned = it->pinned,
        .lookups = it->lookups, .lookup_tokens = it->lookup_tokens, .pool_hit_tokens = it->hit_tokens,
        .host_hit_tokens = it->host_hit_tokens, .file_hit_tokens = it->file_hit_tokens,
        .evictions = it->evictions, .expired = it->expired, .host_units = it->host_units,
        .host_stored = it->host_stored, .file_units = it->file_units, .file_bytes = it->file_bytes,
        .offloaded_bytes = it->offloaded_bytes, .offload_ns = it->offload_ns, .written_bytes = it->written_bytes,
        .reloaded_bytes = it->reloaded_bytes, .reloads = it->reloads, .reload_ns = it->reload_ns,
        .tier_dropped = it->tier_dropped, .tier_damaged = it->tier_damaged, .tier_failures = it->tier_failures,
    };
    return PAGED_OK;
}
