/* prefixctl.c: PREFIX, the prefix cache's controls: pin, unpin, evict by prefix, time to live. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/prefixctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/control.h"
#include "daemon/events.h"
#include "daemon/server.h"
#include "daemon/util/heap.h"

/* Returns the op's name as the log and errors say it. */
static const char *op_name(uint32_t op)
{
    switch (op) {
    case PCORE_PREFIX_PIN: return "pin";
    case PCORE_PREFIX_UNPIN: return "unpin";
    case PCORE_PREFIX_EVICT: return "evict";
    case PCORE_PREFIX_TTL: return "ttl";
    default: return "unknown";
    }
}

/* Finds the pool m names (pd_control_find_pool). */
static struct pd_pool *find_pool(struct pd_server *srv, struct pd_conn *c, const struct pcore_msg_prefix *m)
{
    return pd_control_find_pool(srv, c, m->hdr.seq, m->name, m->pool_id);
}

/* Checks the fixed fields against the op and the hashes' count against len; sends the error
 * and returns -1, or returns 0. */
static int check_fields(struct pd_conn *c, const struct pcore_msg_prefix *m, size_t len)
{
    uint32_t seq = m->hdr.seq;
    if (m->op < PCORE_PREFIX_PIN || m->op > PCORE_PREFIX_TTL)
        return pd_conn_error(c, seq, PAGED_E_INVAL, "PREFIX op %u unknown (pin 1, unpin 2, evict 3, ttl 4)",
                             m->op), -1;
    if (m->reserved != 0)
        return pd_conn_error(c, seq, PAGED_E_INVAL, "PREFIX reserved is %u, not 0", m->reserved), -1;
    if (strnlen(m->name, sizeof m->name) == sizeof m->name)
        return pd_conn_error(c, seq, PAGED_E_PROTO, "PREFIX name is not NUL-terminated"), -1;
    size_t hashes = (len - sizeof *m) / sizeof(paged_hash);
    if ((len - sizeof *m) % sizeof(paged_hash) != 0 || hashes != m->count)
        return pd_conn_error(c, seq, PAGED_E_PROTO, "PREFIX count %u does not match its %zu bytes of hashes",
                             m->count, len - sizeof *m), -1;
    if (m->op == PCORE_PREFIX_TTL) {
        if (m->count != 0)
            return pd_conn_error(c, seq, PAGED_E_INVAL, "PREFIX ttl: count %u, not 0", m->count), -1;
        if (m->ttl_ms > PCORE_PREFIX_MAX_TTL_MS)
            return pd_conn_error(c, seq, PAGED_E_INVAL, "PREFIX ttl_ms %llu is over %llu (30 days)",
                                 (unsigned long long) m->ttl_ms,
                                 (unsigned long long) PCORE_PREFIX_MAX_TTL_MS), -1;
        return 0;
    }
    if (m->ttl_ms != 0)
        return pd_conn_error(c, seq, PAGED_E_INVAL, "PREFIX %s: ttl_ms is %llu, not 0", op_name(m->op),
                             (unsigned long long) m->ttl_ms), -1;
    if ((m->count == 0 && m->op != PCORE_PREFIX_UNPIN) || m->count > PCORE_PREFIX_MAX_HASHES)
        return pd_conn_error(c, seq, PAGED_E_INVAL, "PREFIX %s: count %u not from 1 to %u", op_name(m->op),
                             m->count, PCORE_PREFIX_MAX_HASHES), -1;
    return 0;
}

/* TTL: the pool's owner or root sets its time to live; replies OK 0. */
static void set_ttl(struct pd_conn *c, struct pd_pool *p, const struct pcore_msg_prefix *m)
{
    if (c->uid != 0 && c->uid != p->owner_uid) {
        pd_conn_error(c, m->hdr.seq, PAGED_E_PERM, "pool '%s' belongs to uid %u: uid %u may not set its ttl",
                      p->name, (unsigned) p->owner_uid, (unsigned) c->uid);
        return;
    }
    p->ttl_ns = m->ttl_ms * 1000000u;
    pd_clog(c, PD_LOG_INFO, "pool '%s': prefix ttl %llu ms%s", p->name, (unsigned long long) m->ttl_ms,
            m->ttl_ms == 0 ? " (none)" : "");
    pd_conn_reply(c, PCORE_MSG_OK, m->hdr.seq, 0);
}

/* Sends the error of a refused PIN, UNPIN or EVICT (rc) on p; returns nothing. */
static void refuse(struct pd_conn *c, struct pd_pool *p, const struct pcore_msg_prefix *m, int rc,
                   uint32_t found, uint32_t bad, uint32_t limit, uint32_t pool_limit)
{
    const char *op = op_name(m->op);
    pa_counts counts;
    pa_get_counts(p->alloc, &counts);
    if (rc == PAGED_E_LIMIT)
        pd_conn_error(c, m->hdr.seq, PAGED_E_LIMIT,
                      "pool '%s': pinning %u blocks passes a limit: uid %u has %u pinned of %u "
                      "(pin-limit-uid), the pool %u of %u (pin-limit-pool)", p->name, found, (unsigned) c->uid,
                      pa_pinned_by(p->alloc, (uint32_t) c->uid), limit, counts.pinned, pool_limit);
    else if (rc == PAGED_E_PERM)
        pd_conn_error(c, m->hdr.seq, PAGED_E_PERM,
                      "pool '%s': %s: hashes[%u] is pinned by another uid; only it, the pool's owner "
                      "(uid %u) or root may drop that pin", p->name, op, bad, (unsigned) p->owner_uid);
    else
        pd_conn_error(c, m->hdr.seq, rc, "pool '%s': %s failed", p->name, op);
}

/* Handles PREFIX; returns nothing. */
void pd_prefixctl_handle(struct pd_server *srv, struct pd_conn *c, const void *buf, size_t len)
{
    struct pcore_msg_prefix m;
    memcpy(&m, buf, sizeof m);
    if (check_fields(c, &m, len) < 0)
        return;
    struct pd_pool *p = find_pool(srv, c, &m);
    if (p == NULL)
        return;
    if (m.op == PCORE_PREFIX_TTL) {
        set_ttl(c, p, &m);
        return;
    }
    if (!pd_pool_may(p, c->uid, c->gid, 1)) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_PERM, "pool '%s' (owner uid %u, mode %04o) is not writable by uid %u",
                      p->name, (unsigned) p->owner_uid, p->geom.mode, (unsigned) c->uid);
        return;
    }
    const uint32_t tenant = pd_pool_tenant(p, c->uid);
    const int any = c->uid == 0 || c->uid == p->owner_uid;
    if (m.op == PCORE_PREFIX_UNPIN && m.count == 0) {
        uint32_t n = pa_unpin_all(p->alloc, (uint32_t) c->uid, any);
        pd_clog(c, PD_LOG_INFO, "pool '%s': unpinned %u blocks (%s pins)", p->name, n, any ? "every" : "its own");
        pd_conn_reply(c, PCORE_MSG_OK, m.hdr.seq, (int32_t) (n > INT32_MAX ? INT32_MAX : n));
        return;
    }
    /* A private copy: the packet buffer's alignment is not paged_hash's. */
    paged_hash *hashes = pd_malloc((size_t) m.count * sizeof *hashes);
    if (hashes == NULL) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_NOMEM, "pool '%s': no memory for %u hashes", p->name, m.count);
        return;
    }
    memcpy(hashes, (const unsigned char *) buf + sizeof m, (size_t) m.count * sizeof *hashes);
    const uint32_t limit = c->uid == 0 ? UINT32_MAX : pd_pool_share(p, srv->cfg.pin_limit_uid);
    const uint32_t pool_limit = pd_pool_share(p, srv->cfg.pin_limit_pool);
    uint32_t found = 0, bad = 0, evicted_before = p->evicted_pending;
    int rc;
    switch (m.op) {
    case PCORE_PREFIX_PIN:
        rc = pa_pin(p->alloc, tenant, m.count, hashes, (uint32_t) c->uid, limit, pool_limit, &found);
        break;
    case PCORE_PREFIX_UNPIN:
        rc = pa_unpin(p->alloc, tenant, m.count, hashes, (uint32_t) c->uid, any, &bad);
        break;
    default:
        rc = pd_tiers_evict_prefix(p->tiers, p->alloc, &p->blocklog, tenant, m.count, hashes, (uint32_t) c->uid,
                                   any, &bad);
        break;
    }
    free(hashes);
    if (rc < 0) {
        refuse(c, p, &m, rc, found, bad, limit, pool_limit);
        return;
    }
    pd_clog(c, PD_LOG_INFO, "pool '%s': %s of a prefix of %u blocks: %d found", p->name, op_name(m.op), m.count,
            rc);
    if (p->evicted_pending != evicted_before) {
        uint32_t n = p->evicted_pending - evicted_before;
        p->evicted_pending = evicted_before;
        pd_events_announce(srv, PCORE_EVENT_EVICT, c, p->name, n);
    }
    pd_events_flush_blocks(srv, p);
    pd_conn_reply(c, PCORE_MSG_OK, m.hdr.seq, rc);
}
