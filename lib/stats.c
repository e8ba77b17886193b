/* stats.c: the daemon's request statistics, per op, as paged_stats(3) reports them. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include "lib/client.h"
#include "lib/core/proto.h"
#include "lib/core/sock.h"
#include "paged.h"

/* Asks the daemon for its statistics and copies up to max_ops ops' counters into out;
 * returns the number of ops the daemon counts, or a negative error (explained). */
int paged_stats(paged_client *c, paged_op_stats *out, unsigned max_ops)
{
    if (c == NULL || (out == NULL && max_ops > 0))
        return PAGED_E_INVAL;
    c->err[0] = '\0';
    struct pcore_msg_hdr req;
    memset(&req, 0, sizeof req);
    req.type = PCORE_MSG_STATS;
    struct pcore_msg_stats_reply r;
    int fds[PSOCK_MAX_FDS], nfds = 0;
    int rc = pc_ctl_call(c, &req, sizeof req, PCORE_MSG_STATS_REPLY, &r, sizeof r, fds, 0, &nfds);
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
