/* control.c: HELLO and the control messages of the socket: pools, listings, kill, evict. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/control.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "daemon/events.h"
#include "daemon/list.h"
#include "daemon/prefixctl.h"
#include "daemon/server.h"
#include "lib/core/ring.h"
#include "lib/core/utf8.h"

/* Refuses a connection: sends the error, then closes once it is out. Returns nothing. */
void pd_control_refuse(struct pd_server *srv, struct pd_conn *c, int status, const char *msg)
{
    if (status == PAGED_E_LIMIT)
        pd_server_log_refusal(srv, c, msg);     /* a uid over its share may try again and again */
    else
        pd_clog(c, PD_LOG_WARNING, "refused: %s", msg);
    if (pd_conn_error(c, 0, status, "%s", msg) < 0) {
        pd_server_kill(srv, c, PD_LOG_DEBUG, "refused");
        return;
    }
    c->close_after_flush = 1;
    if (c->out_head == NULL)
        pd_server_kill(srv, c, PD_LOG_DEBUG, "refused");
}

/* Handles a connection's first message, which must be a HELLO; returns nothing. */
void pd_control_hello(struct pd_server *srv, struct pd_conn *c, const void *buf, size_t len)
{
    char why[PCORE_ERRMSG_MAX];
    struct pcore_msg_hdr h;
    if (len < sizeof h) {
        snprintf(why, sizeof why, "truncated HELLO: %zu bytes, less than a message header", len);
        pd_control_refuse(srv, c, PAGED_E_PROTO, why);
        return;
    }
    memcpy(&h, buf, sizeof h);
    if (h.type != PCORE_MSG_HELLO) {
        snprintf(why, sizeof why, "first message has type %u, expected HELLO (%u)", h.type, PCORE_MSG_HELLO);
        pd_control_refuse(srv, c, PAGED_E_PROTO, why);
        return;
    }
    /* Magic and version sit first so that any version's HELLO can be refused clearly. */
    uint32_t mv[2];
    if (len < sizeof h + sizeof mv) {
        snprintf(why, sizeof why, "truncated HELLO: %zu bytes, expected %zu", len,
                 sizeof(struct pcore_msg_hello));
        pd_control_refuse(srv, c, PAGED_E_PROTO, why);
        return;
    }
    memcpy(mv, (const unsigned char *) buf + sizeof h, sizeof mv);
    if (mv[0] != PCORE_HELLO_MAGIC) {
        snprintf(why, sizeof why, "HELLO magic 0x%08x is not 0x%08x: not a paged client", mv[0],
                 PCORE_HELLO_MAGIC);
        pd_control_refuse(srv, c, PAGED_E_PROTO, why);
        return;
    }
    if (mv[1] != PCORE_PROTO_VERSION) {
        snprintf(why, sizeof why, "client speaks protocol version %u, this daemon speaks version %u",
                 mv[1], PCORE_PROTO_VERSION);
        pd_control_refuse(srv, c, PAGED_E_VERSION, why);
        return;
    }
    struct pcore_msg_hello m;
    if (len != sizeof m || h.len != len) {
        snprintf(why, sizeof why, "HELLO is %zu bytes (header says %u), expected %zu", len, h.len,
                 sizeof m);
        pd_control_refuse(srv, c, PAGED_E_PROTO, why);
        return;
    }
    memcpy(&m, buf, sizeof m);
    if (strnlen(m.name, sizeof m.name) == sizeof m.name) {
        pd_control_refuse(srv, c, PAGED_E_PROTO, "HELLO name is not NUL-terminated");
        return;
    }
    if ((m.flags & ~(PCORE_HELLO_CONTROL | PCORE_HELLO_INSPECT)) != 0) {
        snprintf(why, sizeof why, "HELLO flags 0x%x unknown", m.flags);
        pd_control_refuse(srv, c, PAGED_E_PROTO, why);
        return;
    }
    if ((m.flags & PCORE_HELLO_INSPECT) != 0 && (m.flags & PCORE_HELLO_CONTROL) == 0) {
        pd_control_refuse(srv, c, PAGED_E_PROTO, "HELLO flag INSPECT without CONTROL: a worker is no inspection");
        return;
    }
    /* Kept as given, made well-formed UTF-8; the log escapes it (pd_clog), pactl shows it. */
    pcore_utf8_clean(c->name, sizeof c->name, m.name, sizeof m.name);
    c->control_only = (m.flags & PCORE_HELLO_CONTROL) != 0;
    c->inspect = (m.flags & PCORE_HELLO_INSPECT) != 0;
    const enum pd_tally_kind kind = c->control_only ? PD_TALLY_CONTROL : PD_TALLY_CLIENT;
    if (pd_server_admit(srv, c->uid, kind, why, sizeof why) < 0) {
        pd_control_refuse(srv, c, PAGED_E_LIMIT, why);
        return;
    }
    const uint32_t ndev = srv->backend->ndevices;
    if (!c->control_only && m.device >= ndev) {
        snprintf(why, sizeof why, "HELLO asks for device %u: this daemon serves %u device%s (0 to %u; pactl devices)",
                 m.device, ndev, ndev == 1 ? "" : "s", ndev - 1);
        pd_control_refuse(srv, c, PAGED_E_INVAL, why);
        return;
    }
    struct pd_backend_info dinfo;
    srv->backend->ops->info(srv->backend, c->control_only ? 0 : m.device, &dinfo);

    struct pcore_msg_welcome w;
    memset(&w, 0, sizeof w);
    w.hdr.type = PCORE_MSG_WELCOME;
    w.hdr.seq = h.seq;
    w.hdr.len = sizeof w;
    w.version = PCORE_PROTO_VERSION;
    w.client_id = c->id;
    w.backend = dinfo.kind;
    w.device_ordinal = dinfo.device_ordinal;
    memcpy(w.device_uuid, dinfo.device_uuid, sizeof w.device_uuid);
    w.device = c->control_only ? 0 : m.device;
    w.devices = ndev;
    snprintf(w.daemon_version, sizeof w.daemon_version, "%s", PACKAGE_VERSION);
    int fds[4] = { -1, -1, -1, -1 };
    uint32_t sq = m.sq_entries, cq = m.cq_entries;
    uint64_t arena = m.host_arena_size;
    if (!c->control_only) {
        char *cause = NULL;
        pd_channel_clamp(&sq, &cq, &arena);
        int rc = pd_channel_create(sq, cq, arena, &c->ch, fds, &cause);
        if (rc < 0) {
            snprintf(why, sizeof why, "cannot create the channel: %s", cause != NULL ? cause : "?");
            free(cause);
            pd_control_refuse(srv, c, rc, why);
            return;
        }
        c->ch->device = m.device;
        w.num_fds = 3;
        w.data_arena_kind = PCORE_MEM_MEMFD;
        w.channel_size = c->ch->size;
        if (srv->backend->ops->arena_create != NULL) {
            /* The device data arena: a 4th descriptor, or an IPC handle in the message. */
            struct pd_export ex;
            rc = pd_channel_add_data_arena(c->ch, srv->backend, m.data_arena_size, &ex, &cause);
            if (rc < 0) {
                snprintf(why, sizeof why, "cannot create the data arena: %s", cause != NULL ? cause : "?");
                free(cause);
                for (int i = 0; i < 3; i++)
                    close(fds[i]);
                pd_channel_destroy(c->ch);
                c->ch = NULL;
                pd_control_refuse(srv, c, rc, why);
                return;
            }
            w.data_arena_kind = ex.mem_kind;
            w.data_arena_size = c->ch->data_size;
            w.data_arena_alloc = ex.alloc_bytes;
            memcpy(w.ipc_handle, ex.ipc_handle, sizeof w.ipc_handle);
            if (ex.fd >= 0)
                fds[w.num_fds++] = ex.fd;
        }
        c->sq_watch = (struct pd_watch) { PD_W_SQ, c };
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &c->sq_watch };
        if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, c->ch->sq_wait, &ev) < 0) {
            for (int i = 0; i < 4; i++)
                if (fds[i] >= 0)
                    close(fds[i]);
            pd_channel_destroy(c->ch);
            c->ch = NULL;
            pd_control_refuse(srv, c, PAGED_E_SYSTEM, "cannot watch the submission wake-up");
            return;
        }
    }
    /* Ready before the WELCOME goes out, so that the client finds its spin hint set. */
    c->state = PD_CONN_READY;
    pd_tally_move(&srv->tally, c->uid, PD_TALLY_PENDING, kind);
    pd_server_spin_hint(srv);
    int rc = pd_conn_send(c, &w, sizeof w, fds, (int) w.num_fds, 0);
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (rc < 0) {
        pd_server_kill(srv, c, PD_LOG_INFO, "gone before WELCOME");
        return;
    }
    if (c->control_only)
        pd_clog(c, PD_LOG_DEBUG, "connected for %s (uid %u)", c->inspect ? "inspection" : "control",
                (unsigned) c->uid);
    else
        pd_clog(c, PD_LOG_INFO, "connected (uid %u, gid %u, sq %u, cq %u, arena %llu bytes)",
                (unsigned) c->uid, (unsigned) c->gid, sq, cq, (unsigned long long) arena);
    pd_events_announce(srv, PCORE_EVENT_CONNECT, c, "", 0);
}

/* Finds a live (not destroyed) pool by name; returns it or NULL. */
static struct pd_pool *pool_by_name(struct pd_server *srv, const char *name)
{
    for (struct pd_pool *p = srv->pools; p != NULL; p = p->next)
        if (!p->destroyed && strcmp(p->name, name) == 0)
            return p;
    return NULL;
}

/* An attachment on its way: what attach_prepare made ready for attach_commit. */
struct attaching {
    int writable;
    uint32_t shard;              /* of a sharded pool; 0 otherwise */
    uint32_t holder;             /* its group's holder in a sharded pool; c->id otherwise */
    struct pd_export ex;
};

/* Makes room for an attachment of c to p as shard as->shard (of as->group's workers, in a
 * sharded pool), and exports that memory into a->ex; a sealed pool's memory is never
 * exported: a->ex then says PCORE_MEM_NONE, with no descriptor. Returns 0; or, when it could
 * not, the error c was sent (nothing kept). */
static int attach_prepare(struct pd_server *srv, struct pd_conn *c, uint32_t seq, struct pd_pool *p,
                          int writable, const struct pcore_shard_ref *as, struct attaching *a)
{
    memset(a, 0, sizeof *a);
    a->writable = writable;
    a->holder = c->id;
    a->ex.fd = -1;
    if (pd_conn_attach_room(c) < 0) {
        pd_conn_error(c, seq, PAGED_E_NOMEM, "pool '%s': out of memory for the attachment", p->name);
        return PAGED_E_NOMEM;
    }
    char why[PCORE_ERRMSG_MAX];
    int rc = pd_pool_check_shard_ref(as, p->geom.shards, why, sizeof why);
    if (rc == PAGED_OK && p->tp != NULL)
        rc = pd_shards_join(p->tp, c->uid, as->group, as->shard, &a->holder, why, sizeof why);
    if (rc < 0) {
        pd_conn_error(c, seq, rc, "pool '%s': %s", p->name, why);
        return rc;
    }
    a->shard = as->shard;
    if (p->geom.sealed) {
        a->ex.mem_kind = PCORE_MEM_NONE;
        return 0;
    }
    char *cause = NULL;
    rc = srv->backend->ops->pool_export(srv->backend, pd_pool_shard_mem(p, a->shard), writable, &a->ex, &cause);
    if (rc < 0) {
        pd_conn_error(c, seq, rc, "pool '%s': %s", p->name, cause != NULL ? cause : "export failed");
        free(cause);
        if (p->tp != NULL)
            pd_shards_leave(p->tp, a->holder, a->shard);
    }
    return rc < 0 ? rc : 0;
}

/* Adds the attachment of c to p that attach_prepare made ready in a and sends POOL_REPLY with
 * the memory exported into a->ex (whose descriptor it closes). Returns nothing. */
static void attach_commit(struct pd_server *srv, struct pd_conn *c, uint32_t seq, struct pd_pool *p,
                          const struct attaching *a)
{
    const int writable = a->writable;
    const struct pd_export ex = a->ex;
    struct pd_attach *att = pd_conn_attach_add(c, p, writable);
    const pk_cache *shard = pd_pool_shard_cache(p, a->shard);
    att->view.holder = a->holder;
    att->view.shard = a->shard;
    att->view.device = pd_pool_shard_device(p, a->shard);
    att->view.num_kv_heads = (uint32_t) shard->num_kv_heads;

    struct pcore_msg_pool_reply r;
    memset(&r, 0, sizeof r);
    r.hdr.type = PCORE_MSG_POOL_REPLY;
    r.hdr.seq = seq;
    r.hdr.len = sizeof r;
    r.pool_id = p->id;
    r.num_layers = p->geom.num_layers;
    r.num_kv_heads = (uint32_t) shard->num_kv_heads;
    r.head_dim = p->geom.head_dim;
    r.block_size = p->geom.block_size;
    r.dtype = (uint32_t) p->geom.dtype;
    r.num_blocks = p->geom.num_blocks;
    r.writable = (uint32_t) writable;
    r.owner_uid = (uint32_t) p->owner_uid;
    r.mode = pd_pool_mode_word(p);
    r.k_scale = p->geom.k_scale;
    r.v_scale = p->geom.v_scale;
    r.mem_kind = ex.mem_kind;
    r.num_fds = ex.fd >= 0 ? 1 : 0;
    r.bytes = p->geom.bytes / p->geom.shards;
    r.alloc_bytes = ex.alloc_bytes;
    r.shards = p->geom.shards;
    r.shard = a->shard;
    r.kv_head_offset = a->shard * r.num_kv_heads;
    memcpy(r.ipc_handle, ex.ipc_handle, sizeof r.ipc_handle);
    struct pd_backend_info dinfo;
    r.device = pd_pool_shard_device(p, a->shard);
    srv->backend->ops->info(srv->backend, r.device, &dinfo);
    memcpy(r.device_uuid, dinfo.device_uuid, sizeof r.device_uuid);
    int rc = pd_conn_send(c, &r, sizeof r, &ex.fd, (int) r.num_fds, 0);
    if (ex.fd >= 0)
        close(ex.fd);
    if (p->tp != NULL)
        pd_clog(c, PD_LOG_INFO, "attached to shard %u of %u of pool '%s' (id %u, %s, %s, group '%s')", a->shard,
                p->geom.shards, p->name, p->id, writable ? "read-write" : "read-only", pd_pool_memory_name(p),
                pd_shards_group(p->tp, a->holder)->name);
    else
        pd_clog(c, PD_LOG_INFO, "attached to pool '%s' (id %u, %s, %s)", p->name, p->id,
                writable ? "read-write" : "read-only", pd_pool_memory_name(p));
    pd_events_announce(srv, PCORE_EVENT_ATTACH, c, p->name, 0);
    if (rc < 0)
        pd_server_kill(srv, c, PD_LOG_INFO, "gone before its POOL_REPLY");
}

/* Gives new pool p the host tier its creation message m asks for (or paged.conf's
 * host-tier-mb) and the file tier behind it. Returns PAGED_OK or an error with *cause. */
static int add_tiers(struct pd_server *srv, struct pd_pool *p, const struct pcore_msg_pool_create *m,
                     char **cause)
{
    const uint64_t mib = 1024u * 1024u;
    if (p->tp != NULL)
        return PAGED_OK;       /* no tiers behind a sharded pool (pd_pool_check_create) */
    uint64_t bytes = m->host_tier_bytes != 0 ? m->host_tier_bytes : srv->cfg.host_tier_mb * mib;
    if (bytes > srv->cfg.host_tier_max_mb * mib) {
        char buf[160];
        snprintf(buf, sizeof buf, "host tier of %llu bytes exceeds host-tier-max-mb (%llu MiB)",
                 (unsigned long long) bytes, (unsigned long long) srv->cfg.host_tier_max_mb);
        *cause = strdup(buf);
        return PAGED_E_LIMIT;
    }
    uint64_t units = bytes / p->geom.block_bytes;
    const struct pd_tiers_spec spec = {
        .host_units = units > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t) units,
        .file_dir = srv->cfg.file_tier, .file_bytes = srv->cfg.file_tier_mb * mib,
        .owner_uid = (uint32_t) p->owner_uid, .pool_name = p->name,
        .k_scale = p->geom.k_scale, .v_scale = p->geom.v_scale,
    };
    int rc = pd_pool_add_tiers(srv->backend, p, &spec, cause);
    if (rc == PAGED_OK && p->tiers != NULL)
        pd_log(PD_LOG_INFO, "pool '%s': host tier of %u units of %llu bytes%s%s", p->name, spec.host_units,
               (unsigned long long) p->geom.block_bytes, p->tiers->file != NULL ? ", file tier in " : "",
               p->tiers->file != NULL ? srv->cfg.file_tier : "");
    return rc;
}

/* POOL_CREATE: checks, creates, attaches the creator. Returns nothing. */
static void on_pool_create(struct pd_server *srv, struct pd_conn *c, const void *buf)
{
    struct pcore_msg_pool_create m;
    memcpy(&m, buf, sizeof m);
    char why[PCORE_ERRMSG_MAX];
    struct pd_pool_geom g;
    int rc = pd_pool_check_create(&m, srv->mem_limit, (enum pd_pool_memory) srv->cfg.pool_memory, &g, why,
                                  sizeof why);
    if (rc < 0) {
        pd_conn_error(c, m.hdr.seq, rc, "pool '%.63s': %s", m.name, why);
        return;
    }
    const uint32_t ndev = srv->backend->ndevices;
    if (m.device > ndev) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_INVAL, "pool '%s': no device %u: this daemon serves %u device%s "
                      "(0 to %u; pactl devices)", m.name, m.device - 1, ndev, ndev == 1 ? "" : "s", ndev - 1);
        return;
    }
    g.device = m.device != 0 ? m.device - 1 : c->ch != NULL ? c->ch->device : 0;
    if (pool_by_name(srv, m.name) != NULL) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_EXIST, "pool '%s' already exists", m.name);
        return;
    }
    if (srv->n_pools >= srv->cfg.max_pools) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_LIMIT, "pool '%s': too many pools (max-pools %u)", m.name,
                      srv->cfg.max_pools);
        return;
    }
    if (c->natt >= srv->cfg.max_pools) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_LIMIT, "pool '%s': attached to too many pools", m.name);
        return;
    }
    struct pd_pool *p;
    char *cause = NULL;
    rc = pd_pool_create(srv->backend, srv->next_pool_id, m.name, &g, c->uid, c->gid, &p, &cause);
    if (rc < 0) {
        pd_conn_error(c, m.hdr.seq, rc, "pool '%s': %s", m.name, cause != NULL ? cause : "cannot create");
        free(cause);
        return;
    }
    p->ttl_ns = (uint64_t) srv->cfg.prefix_ttl_ms * 1000000u;
    rc = add_tiers(srv, p, &m, &cause);
    if (rc < 0) {
        pd_conn_error(c, m.hdr.seq, rc, "pool '%s': %s", m.name, cause != NULL ? cause : "no tiers");
        free(cause);
        pd_pool_free(srv->backend, p);
        return;
    }
    p->blocklog.enabled = srv->block_events;
    /* A pool its creator cannot be attached to is not made at all. */
    const int writable = (m.flags & PCORE_ATTACH_WRITE) != 0 && pd_pool_may(p, c->uid, c->gid, 1);
    struct attaching a;
    if (attach_prepare(srv, c, m.hdr.seq, p, writable, &m.as, &a) < 0) {
        pd_pool_free(srv->backend, p);
        return;
    }
    srv->next_pool_id++;
    char shards[32] = "", device[40] = "";
    if (g.shards > 1)
        snprintf(shards, sizeof shards, ", %u shards", g.shards);
    if (ndev > 1)
        snprintf(device, sizeof device, g.shards > 1 ? ", shard 0 on device %u" : ", device %u", g.device);
    p->next = srv->pools;
    srv->pools = p;
    srv->n_pools++;
    pd_clog(c, PD_LOG_INFO, "created pool '%s' (id %u: %u layers, %u kv heads, head_dim %u, "
            "block_size %u, %s, %u blocks, %llu bytes, mode %04o, prefixes %s%s, memory %s%s)", p->name,
            p->id, g.num_layers, g.num_kv_heads, g.head_dim, g.block_size,
            paged_dtype_name((paged_dtype) g.dtype), g.num_blocks, (unsigned long long) g.bytes, g.mode,
            pd_pool_prefixes_name(p), device, pd_pool_memory_name(p), shards);
    pd_events_announce(srv, PCORE_EVENT_POOL_CREATE, c, p->name, p->geom.num_blocks);
    attach_commit(srv, c, m.hdr.seq, p, &a);
}

/* POOL_ATTACH: by name, read-only unless write was asked for and the mode allows it. */
static void on_pool_attach(struct pd_server *srv, struct pd_conn *c, const void *buf)
{
    struct pcore_msg_pool_attach m;
    memcpy(&m, buf, sizeof m);
    char why[PCORE_ERRMSG_MAX];
    if (pd_pool_check_name(m.name, why, sizeof why) < 0) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_INVAL, "%s", why);
        return;
    }
    if ((m.flags & ~PCORE_ATTACH_WRITE) != 0 || m.reserved != 0) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_INVAL, m.reserved != 0 ? "attach reserved field 0x%x is not 0"
                      : "attach flags 0x%x unknown", m.reserved != 0 ? m.reserved : m.flags);
        return;
    }
    struct pd_pool *p = pool_by_name(srv, m.name);
    if (p == NULL) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_NOENT, "no such pool '%s'", m.name);
        return;
    }
    if (pd_conn_attach_find(c, p->id) != NULL) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_EXIST, "already attached to pool '%s' (id %u)", p->name, p->id);
        return;
    }
    if (!pd_pool_may(p, c->uid, c->gid, 0)) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_PERM, "pool '%s' (owner uid %u, mode %04o) is not readable by uid %u",
                      p->name, (unsigned) p->owner_uid, p->geom.mode, (unsigned) c->uid);
        return;
    }
    if (c->natt >= srv->cfg.max_pools) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_LIMIT, "attached to too many pools");
        return;
    }
    const int writable = (m.flags & PCORE_ATTACH_WRITE) != 0 && pd_pool_may(p, c->uid, c->gid, 1);
    struct attaching a;
    if (attach_prepare(srv, c, m.hdr.seq, p, writable, &m.as, &a) == 0)
        attach_commit(srv, c, m.hdr.seq, p, &a);
}

/* Detaches c from the pool of attachment index i: releases its block references and frees a
 * destroyed pool at its last detach. Returns nothing. */
static void detach(struct pd_server *srv, struct pd_conn *c, uint32_t i)
{
    struct pd_pool *p = c->att[i].pool;
    pd_engine_settle(srv->engine, c);   /* early-completed work may still use its blocks */
    uint32_t released = pd_pool_detach_holder(p, c->att[i].view.holder, c->att[i].view.shard);
    c->att[i] = c->att[--c->natt];
    p->attached--;
    pd_clog(c, PD_LOG_INFO, "detached from pool '%s' (id %u), %u block references released", p->name,
            p->id, released);
    pd_events_announce(srv, PCORE_EVENT_DETACH, c, p->name, released);
    pd_events_flush_blocks(srv, p);
    if (p->destroyed && p->attached == 0)
        pd_pool_release(&srv->pools, &srv->n_pools, srv->backend, p);
}

/* POOL_DETACH: by pool id. */
static void on_pool_detach(struct pd_server *srv, struct pd_conn *c, const void *buf)
{
    struct pcore_msg_pool_ref m;
    memcpy(&m, buf, sizeof m);
    for (uint32_t i = 0; i < c->natt; i++)
        if (c->att[i].pool->id == m.pool_id) {
            detach(srv, c, i);
            pd_conn_reply(c, PCORE_MSG_OK, m.hdr.seq, 0);
            return;
        }
    pd_conn_error(c, m.hdr.seq, PAGED_E_NOENT, "not attached to a pool with id %u", m.pool_id);
}

/* Finds the pool a request names: by name when name is not empty, else by id. Sends the
 * error (answering seq) and returns NULL when there is none. */
struct pd_pool *pd_control_find_pool(struct pd_server *srv, struct pd_conn *c, uint32_t seq, const char *name,
                                     uint32_t pool_id)
{
    char why[PCORE_ERRMSG_MAX];
    if (name[0] == '\0') {
        for (struct pd_pool *p = srv->pools; p != NULL; p = p->next)
            if (!p->destroyed && p->id == pool_id)
                return p;
        pd_conn_error(c, seq, PAGED_E_NOENT, "no such pool with id %u", pool_id);
        return NULL;
    }
    if (pd_pool_check_name(name, why, sizeof why) < 0) {
        pd_conn_error(c, seq, PAGED_E_INVAL, "%s", why);
        return NULL;
    }
    struct pd_pool *p = pool_by_name(srv, name);
    if (p == NULL)
        pd_conn_error(c, seq, PAGED_E_NOENT, "no such pool '%s'", name);
    return p;
}

/* Finds the pool a pool_ref names, for DESTROY and EVICT (pd_control_find_pool). */
static struct pd_pool *ref_pool(struct pd_server *srv, struct pd_conn *c,
                                const struct pcore_msg_pool_ref *m)
{
    return pd_control_find_pool(srv, c, m->hdr.seq, m->name, m->pool_id);
}

/* POOL_STATS: one pool's counters, for a client that may read the pool. Returns nothing. */
static void on_pool_stats(struct pd_server *srv, struct pd_conn *c, const void *buf)
{
    struct pcore_msg_pool_ref m;
    memcpy(&m, buf, sizeof m);
    struct pd_pool *p = ref_pool(srv, c, &m);
    if (p == NULL)
        return;
    if (!pd_pool_may(p, c->uid, c->gid, 0)) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_PERM, "pool '%s' (owner uid %u, mode %04o) is not readable by uid %u",
                      p->name, (unsigned) p->owner_uid, p->geom.mode, (unsigned) c->uid);
        return;
    }
    struct pcore_msg_pool_stats_reply r;
    memset(&r, 0, sizeof r);
    r.hdr.type = PCORE_MSG_POOL_STATS_REPLY;
    r.hdr.seq = m.hdr.seq;
    r.hdr.len = sizeof r;
    pd_pool_item(p, &r.item);
    pd_conn_send(c, &r, sizeof r, NULL, 0, 0);
}

/* POOL_DESTROY: owner or root; the name goes now, the memory at the last detach. The OK's
 * status is the number of clients still attached. */
static void on_pool_destroy(struct pd_server *srv, struct pd_conn *c, const void *buf)
{
    struct pcore_msg_pool_ref m;
    memcpy(&m, buf, sizeof m);
    struct pd_pool *p = ref_pool(srv, c, &m);
    if (p == NULL)
        return;
    if (c->uid != 0 && c->uid != p->owner_uid) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_PERM, "pool '%s' belongs to uid %u: uid %u may not destroy it",
                      p->name, (unsigned) p->owner_uid, (unsigned) c->uid);
        return;
    }
    p->destroyed = 1;
    const uint32_t attached = p->attached;
    pd_clog(c, PD_LOG_INFO, "destroyed pool '%s' (id %u, %u clients still attached)", p->name, p->id,
            attached);
    pd_events_announce(srv, PCORE_EVENT_POOL_DESTROY, c, p->name, attached);
    pd_events_flush_blocks(srv, p);
    if (attached == 0)
        pd_pool_release(&srv->pools, &srv->n_pools, srv->backend, p);
    pd_conn_reply(c, PCORE_MSG_OK, m.hdr.seq, (int32_t) (attached > INT32_MAX ? INT32_MAX : attached));
}

/* EVICT: drops a pool's cached blocks; needs write permission on it. */
static void on_evict(struct pd_server *srv, struct pd_conn *c, const void *buf)
{
    struct pcore_msg_pool_ref m;
    memcpy(&m, buf, sizeof m);
    struct pd_pool *p = ref_pool(srv, c, &m);
    if (p == NULL)
        return;
    if (!pd_pool_may(p, c->uid, c->gid, 1)) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_PERM, "pool '%s' (owner uid %u, mode %04o) is not writable by uid %u",
                      p->name, (unsigned) p->owner_uid, p->geom.mode, (unsigned) c->uid);
        return;
    }
    p->evicted_pending = 0;
    uint32_t n = pd_pool_evict_cached(p);
    p->evicted_pending = 0;
    pd_clog(c, PD_LOG_INFO, "evicted %u cached blocks of pool '%s'", n, p->name);
    pd_events_announce(srv, PCORE_EVENT_EVICT, c, p->name, n);
    pd_events_flush_blocks(srv, p);
    pd_conn_reply(c, PCORE_MSG_OK, m.hdr.seq, (int32_t) (n > INT32_MAX ? INT32_MAX : n));
}

/* KILL_CLIENT: root or the same uid. */
static void on_kill(struct pd_server *srv, struct pd_conn *c, const void *buf)
{
    struct pcore_msg_kill m;
    memcpy(&m, buf, sizeof m);
    struct pd_conn *t = srv->conns;
    while (t != NULL && !(t->id == m.client_id && t->state == PD_CONN_READY))
        t = t->next;
    if (t == NULL) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_NOENT, "no client %u", m.client_id);
        return;
    }
    if (c->uid != 0 && c->uid != t->uid) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_PERM, "client %u runs as uid %u: uid %u may not kill it",
                      t->id, (unsigned) t->uid, (unsigned) c->uid);
        return;
    }
    char reason[128];
    snprintf(reason, sizeof reason, "killed on request of client %u (pid %ld)", c->id, (long) c->pid);
    pd_server_kill(srv, t, PD_LOG_INFO, reason);
    if (t != c)
        pd_conn_reply(c, PCORE_MSG_OK, m.hdr.seq, 0);
}

/* SUBSCRIBE: events from now on; a bare header has flags 0. Returns nothing. */
static void on_subscribe(struct pd_server *srv, struct pd_conn *c, const void *buf)
{
    struct pcore_msg_subscribe m;
    memset(&m, 0, sizeof m);
    memcpy(&m.hdr, buf, sizeof m.hdr);
    if (m.hdr.len == sizeof m)
        memcpy(&m, buf, sizeof m);
    if ((m.flags & ~(PCORE_SUBSCRIBE_INSPECT | PCORE_SUBSCRIBE_BLOCKS)) != 0) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_INVAL, "SUBSCRIBE flags 0x%x unknown (inspect 0x%x, blocks 0x%x)",
                      m.flags, PCORE_SUBSCRIBE_INSPECT, PCORE_SUBSCRIBE_BLOCKS);
        return;
    }
    if (m.reserved != 0) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_INVAL, "SUBSCRIBE reserved is %u, not 0", m.reserved);
        return;
    }
    c->subscribed = 1;
    c->subscribe_flags = m.flags;
    pd_events_blocks_update(srv);
    pd_conn_reply(c, PCORE_MSG_OK, m.hdr.seq, 0);
}

/* STATUS, STATS and LIST: replies made in list.c. */
static void on_status(struct pd_server *srv, struct pd_conn *c, const void *buf)
{
    struct pcore_msg_hdr h;
    memcpy(&h, buf, sizeof h);
    pd_reply_status(srv, c, h.seq);
}

/* Replies STATS_REPLY; returns nothing. */
static void on_stats(struct pd_server *srv, struct pd_conn *c, const void *buf)
{
    struct pcore_msg_hdr h;
    memcpy(&h, buf, sizeof h);
    pd_reply_stats(srv, c, h.seq);
}

/* Starts a LIST; returns nothing. */
static void on_list(struct pd_server *srv, struct pd_conn *c, const void *buf)
{
    struct pcore_msg_list m;
    memcpy(&m, buf, sizeof m);
    if (m.what < PCORE_LIST_POOLS || m.what > PCORE_LIST_DEVICES) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_INVAL,
                      "LIST what %u unknown (pools 1, clients 2, blocks 3, peers 4, devices 5)", m.what);
        return;
    }
    if (strnlen(m.name, sizeof m.name) == sizeof m.name) {
        pd_conn_error(c, m.hdr.seq, PAGED_E_PROTO, "LIST name is not NUL-terminated");
        return;
    }
    pd_list_start(srv, c, &m);
}

/* PREFIX: its length and count are checked in prefixctl.c. Returns nothing. */
static void on_prefix(struct pd_server *srv, struct pd_conn *c, const void *buf)
{
    struct pcore_msg_hdr h;
    memcpy(&h, buf, sizeof h);
    pd_prefixctl_handle(srv, c, buf, h.len);
}

/* One control message type: its name, exact length (or an older, shorter form's: 0 for none;
 * with trailing items, the length of the fixed part and the item's size), and handler. */
struct control_entry {
    uint32_t type;
    const char *name;
    size_t len;
    size_t short_len;
    void (*fn)(struct pd_server *srv, struct pd_conn *c, const void *buf);
    size_t item;              /* a trailing array's element size; 0: none */
};

static const struct control_entry table[] = {
    { PCORE_MSG_POOL_CREATE, "POOL_CREATE", sizeof(struct pcore_msg_pool_create), 0, on_pool_create, 0 },
    { PCORE_MSG_POOL_ATTACH, "POOL_ATTACH", sizeof(struct pcore_msg_pool_attach), 0, on_pool_attach, 0 },
    { PCORE_MSG_POOL_DETACH, "POOL_DETACH", sizeof(struct pcore_msg_pool_ref), 0, on_pool_detach, 0 },
    { PCORE_MSG_POOL_DESTROY, "POOL_DESTROY", sizeof(struct pcore_msg_pool_ref), 0, on_pool_destroy, 0 },
    { PCORE_MSG_POOL_STATS, "POOL_STATS", sizeof(struct pcore_msg_pool_ref), 0, on_pool_stats, 0 },
    { PCORE_MSG_STATUS, "STATUS", sizeof(struct pcore_msg_hdr), 0, on_status, 0 },
    { PCORE_MSG_LIST, "LIST", sizeof(struct pcore_msg_list), 0, on_list, 0 },
    { PCORE_MSG_STATS, "STATS", sizeof(struct pcore_msg_hdr), 0, on_stats, 0 },
    { PCORE_MSG_SUBSCRIBE, "SUBSCRIBE", sizeof(struct pcore_msg_subscribe), sizeof(struct pcore_msg_hdr),
      on_subscribe, 0 },
    { PCORE_MSG_KILL_CLIENT, "KILL_CLIENT", sizeof(struct pcore_msg_kill), 0, on_kill, 0 },
    { PCORE_MSG_EVICT, "EVICT", sizeof(struct pcore_msg_pool_ref), 0, on_evict, 0 },
    { PCORE_MSG_PREFIX, "PREFIX", sizeof(struct pcore_msg_prefix), 0, on_prefix, sizeof(paged_hash) },
};

/* Checks and dispatches one control message; returns nothing. */
void pd_control_handle(struct pd_server *srv, struct pd_conn *c, const void *buf, size_t len)
{
    struct pcore_msg_hdr h;
    if (len < sizeof h) {
        pd_conn_error(c, 0, PAGED_E_PROTO, "message of %zu bytes is shorter than a header (%zu)", len,
                      sizeof h);
        return;
    }
    memcpy(&h, buf, sizeof h);
    if (h.len != len) {
        pd_conn_error(c, h.seq, PAGED_E_PROTO, "message type %u: header says %u bytes, packet has %zu",
                      h.type, h.len, len);
        return;
    }
    if (h.type == PCORE_MSG_HELLO) {
        pd_conn_error(c, h.seq, PAGED_E_PROTO, "HELLO already received");
        return;
    }
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (table[i].type != h.type)
            continue;
        if (table[i].item != 0 && len >= table[i].len) {
            table[i].fn(srv, c, buf);
            return;
        }
        if (len != table[i].len && (table[i].short_len == 0 || len != table[i].short_len)) {
            pd_conn_error(c, h.seq, PAGED_E_PROTO, "%s is %zu bytes, expected %zu", table[i].name, len,
                          table[i].len);
            return;
        }
        table[i].fn(srv, c, buf);
        return;
    }
    pd_conn_error(c, h.seq, PAGED_E_PROTO, "unknown message type %u", h.type);
}
