/* conn.c: one client connection: logging, the outgoing queue, the channel, attachments. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/util/heap.h"
#include "lib/core/shm.h"
#include "lib/core/sock.h"
#include "lib/core/utf8.h"
#include "lib/core/wake.h"

/* An event is dropped rather than queued once this much waits for a slow subscriber. */
#define OUTQ_DROP_BYTES (256u * 1024u)

/* Writes a log line about c; returns nothing. */
void pd_clog(const struct pd_conn *c, enum pd_log_level level, const char *fmt, ...)
{
    if (!pd_log_enabled(level))
        return;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* The name is the client's own text: escaped, so it can forge no line and no terminal escape. */
    char name[4 * PCORE_NAME_MAX];
    pcore_utf8_escape(name, sizeof name, c->name, sizeof c->name, 1);
    pd_log(level, "client %u (pid %ld, \"%s\"): %s", c->id, (long) c->pid, name, msg);
}

/* Closes a message's descriptors and frees it; returns nothing. */
static void outmsg_free(struct pd_outmsg *m)
{
    for (int i = 0; i < m->nfds; i++)
        close(m->fds[i]);
    free(m);
}

/* Frees the queue; returns nothing. */
void pd_conn_drop_queue(struct pd_conn *c)
{
    struct pd_outmsg *m = c->out_head;
    while (m != NULL) {
        struct pd_outmsg *next = m->next;
        outmsg_free(m);
        m = next;
    }
    c->out_head = c->out_tail = NULL;
    c->out_count = c->out_bytes = 0;
}

/* Sends queued messages while the socket takes them; returns PAGED_OK or DISCONNECTED. */
int pd_conn_flush(struct pd_conn *c)
{
    while (c->out_head != NULL) {
        struct pd_outmsg *m = c->out_head;
        int rc = pcore_sock_send(c->fd, m->data, m->len, m->fds, m->nfds);
        if (rc == PAGED_E_AGAIN)
            return PAGED_OK;
        if (rc < 0)
            return PAGED_E_DISCONNECTED;
        c->out_head = m->next;
        if (c->out_head == NULL)
            c->out_tail = NULL;
        c->out_count--;
        c->out_bytes -= m->len;
        outmsg_free(m);
    }
    return PAGED_OK;
}

/* Says whether the queue is below the mark where events are dropped; see conn.h. */
int pd_conn_has_room(const struct pd_conn *c)
{
    return c->out_bytes < OUTQ_DROP_BYTES;
}

/* Records that a message for c could not be queued (rc: why): an event counts as dropped;
 * a reply marks c reply_lost, once with a log line. Returns rc. */
static int unqueued(struct pd_conn *c, int droppable, int rc)
{
    if (droppable) {
        if (c->events_unreported < UINT32_MAX)
            c->events_unreported++;
    } else if (!c->reply_lost) {
        c->reply_lost = 1;
        pd_clog(c, PD_LOG_WARNING, "a reply could not be queued (%s): disconnecting it rather than leaving it "
                "waiting", rc == PAGED_E_NOMEM ? "out of memory" : "no descriptor for its file descriptors");
    }
    return rc;
}

/* Queues or sends a message; returns as documented in conn.h. */
int pd_conn_send(struct pd_conn *c, const void *msg, size_t len, const int *fds, int nfds,
                 int droppable)
{
    /* Once a reply is lost, nothing more goes out: a later one sent straight into a socket the
     * client has meanwhile drained would arrive in the lost one's place. */
    if (c->state == PD_CONN_DEAD || c->reply_lost)
        return PAGED_E_DISCONNECTED;
    if (nfds > 4)
        return PAGED_E_INVAL;
    if (c->out_head == NULL) {
        int rc = pcore_sock_send(c->fd, msg, len, fds, nfds);
        if (rc == 0)
            return PAGED_OK;
        if (rc != PAGED_E_AGAIN)
            return PAGED_E_DISCONNECTED;
    }
    if (droppable && !pd_conn_has_room(c)) {
        if (c->events_unreported < UINT32_MAX)
            c->events_unreported++;
        return PAGED_E_AGAIN;
    }
    if (c->out_head == NULL)
        pd_clog(c, PD_LOG_DEBUG, "its socket is full: messages wait in pagedd, and its requests in its socket");
    struct pd_outmsg *m = pd_malloc(sizeof *m + len);
    if (m == NULL)
        return unqueued(c, droppable, PAGED_E_NOMEM);
    m->next = NULL;
    m->len = len;
    m->nfds = 0;
    memcpy(m->data, msg, len);
    for (int i = 0; i < nfds; i++) {
        int fd = fcntl(fds[i], F_DUPFD_CLOEXEC, 0);
        if (fd < 0) {
            outmsg_free(m);
            return unqueued(c, droppable, PAGED_E_SYSTEM);
        }
        m->fds[m->nfds++] = fd;
    }
    if (c->out_tail != NULL)
        c->out_tail->next = m;
    else
        c->out_head = m;
    c->out_tail = m;
    c->out_count++;
    c->out_bytes += len;
    return PAGED_OK;
}

/* Sends an ERROR message; returns as pd_conn_send. */
int pd_conn_error(struct pd_conn *c, uint32_t seq, int status, const char *fmt, ...)
{
    struct pcore_msg_error e;
    memset(&e, 0, sizeof e);
    e.hdr.type = PCORE_MSG_ERROR;
    e.hdr.seq = seq;
    e.hdr.status = status;
    e.hdr.len = sizeof e;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    pd_clog(c, PD_LOG_DEBUG, "error %s: %s", paged_strerror(status), e.message);
    return pd_conn_send(c, &e, sizeof e, NULL, 0, 0);
}

/* Sends a bare header; returns as pd_conn_send. */
int pd_conn_reply(struct pd_conn *c, uint32_t type, uint32_t seq, int32_t status)
{
    struct pcore_msg_hdr h = { .type = type, .seq = seq, .status = status, .len = sizeof h };
    return pd_conn_send(c, &h, sizeof h, NULL, 0, 0);
}

/* Returns c's attachment to pool_id, or NULL. */
struct pd_attach *pd_conn_attach_find(struct pd_conn *c, uint32_t pool_id)
{
    for (uint32_t i = 0; i < c->natt; i++)
        if (c->att[i].pool->id == pool_id)
            return &c->att[i];
    return NULL;
}

/* Returns the references c holds in all its pools. */
uint64_t pd_conn_held(const struct pd_conn *c)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < c->natt; i++)
        n += pa_held_total(c->att[i].pool->alloc, c->att[i].view.holder);
    return n;
}

/* Makes room in c's attachments for one more; returns 0, or -1 when memory ran out. */
int pd_conn_attach_room(struct pd_conn *c)
{
    if (c->natt < c->catt)
        return 0;
    uint32_t n = c->catt ? c->catt * 2 : 4;
    struct pd_attach *a = pd_realloc(c->att, sizeof *a * n);
    if (a == NULL)
        return -1;
    c->att = a;
    c->catt = n;
    return 0;
}

/* Attaches c to p in the room pd_conn_attach_room made; returns the attachment. */
struct pd_attach *pd_conn_attach_add(struct pd_conn *c, struct pd_pool *p, int writable)
{
    struct pd_attach *a = &c->att[c->natt++];
    a->pool = p;
    a->view = (struct pv_pool) {
        .id = p->id, .num_layers = p->geom.num_layers, .num_kv_heads = p->geom.num_kv_heads,
        .head_dim = p->geom.head_dim, .block_size = p->geom.block_size,
        .num_blocks = p->geom.num_blocks, .dtype = p->geom.dtype, .alloc = p->alloc,
        .writable = writable, .tenant = pd_pool_tenant(p, c->uid), .holder = c->id, .user = p,
    };
    p->attached++;
    return a;
}

/* Returns the smallest power of two >= v within [lo, hi]. */
static uint32_t pow2_clamp(uint32_t v, uint32_t lo, uint32_t hi)
{
    uint32_t p = lo;
    while (p < v && p < hi)
        p <<= 1;
    return p;
}

/* Clamps the requested geometry; returns nothing. */
void pd_channel_clamp(uint32_t *sq, uint32_t *cq, uint64_t *arena)
{
    if (*sq == 0)
        *sq = 256;
    *sq = pow2_clamp(*sq, 8, 4096);
    if (*cq == 0)
        *cq = *sq * 2;
    *cq = pow2_clamp(*cq, 8, 4096);
    if (*cq < *sq)
        *cq = *sq;
    if (*arena == 0)
        *arena = 64u << 20;
    if (*arena < (64u << 10))
        *arena = 64u << 10;
    if (*arena > (1u << 30))
        *arena = 1u << 30;
    *arena = (*arena + PCORE_CHANNEL_PAGE - 1) & ~(uint64_t) (PCORE_CHANNEL_PAGE - 1);
}

/* Creates a channel; returns PAGED_OK and the fds to send, or an error with *cause. */
int pd_channel_create(uint32_t sq_entries, uint32_t cq_entries, uint64_t arena_size,
                      struct pd_channel **out, int fds[3], char **cause)
{
    struct pd_channel *ch = pd_calloc(1, sizeof *ch);
    int memfd = -1, sq_notify = -1, cq_wait = -1;
    int rc;
    if (ch == NULL) {
        *cause = strdup("out of memory");
        return PAGED_E_NOMEM;
    }
    ch->sq_wait = ch->cq_notify = -1;
    rc = pcore_channel_layout(sq_entries, cq_entries, arena_size, &ch->hdr);
    if (rc < 0) {
        if (asprintf(cause, "bad channel geometry (sq %u, cq %u, arena %llu)", sq_entries,
                     cq_entries, (unsigned long long) arena_size) < 0)
            *cause = NULL;
        goto fail;
    }
    ch->size = ch->hdr.total_size;
    memfd = pcore_shm_create("paged-channel", ch->size);
    if (memfd < 0) {
        rc = memfd;
        if (asprintf(cause, "cannot create the channel memory (%llu bytes): %s",
                     (unsigned long long) ch->size, rc == PAGED_E_SYSTEM ? strerror(errno) : paged_strerror(rc)) < 0)
            *cause = NULL;
        goto fail;
    }
    rc = pcore_shm_map(memfd, ch->size, 1, &ch->map);
    if (rc < 0) {
        ch->map = NULL;
        if (asprintf(cause, "cannot map the channel memory: %s",
                     rc == PAGED_E_SYSTEM ? strerror(errno) : paged_strerror(rc)) < 0)
            *cause = NULL;
        goto fail;
    }
    unsigned char *base = ch->map;
    memcpy(base, &ch->hdr, sizeof ch->hdr);
    struct pcore_ring_ctl *sqc = (struct pcore_ring_ctl *) (base + ch->hdr.sq_ctl_off);
    struct pcore_ring_ctl *cqc = (struct pcore_ring_ctl *) (base + ch->hdr.cq_ctl_off);
    pcore_ring_ctl_init(sqc, 0);
    pcore_ring_ctl_init(cqc, 0);
    if ((rc = pcore_ring_cons_init(&ch->sq, sqc, base + ch->hdr.sq_off, ch->hdr.sq_entries,
                                   sizeof(struct pcore_sqe))) < 0
        || (rc = pcore_ring_prod_init(&ch->cq, cqc, base + ch->hdr.cq_off, ch->hdr.cq_entries,
                                      sizeof(struct pcore_cqe))) < 0) {
        if (asprintf(cause, "cannot set up the rings: %s", paged_strerror(rc)) < 0)
            *cause = NULL;
        goto fail;
    }
    ch->arena = base + ch->hdr.arena_off;
    ch->arena_size = ch->hdr.arena_size;
    ch->data_size = ch->arena_size;
    ch->host_words = 1;   /* the engine's own, until a backend data arena says otherwise */
    /* Pipes, not eventfds: the daemon's ends are open file descriptions of its own, so a
     * client cannot make them blocking (see lib/core/wake.h). */
    if ((rc = pcore_wake_pipe(&ch->sq_wait, &sq_notify)) < 0
        || (rc = pcore_wake_pipe(&cq_wait, &ch->cq_notify)) < 0) {
        if (asprintf(cause, "cannot create wake-up pipes: %s", strerror(errno)) < 0)
            *cause = NULL;
        goto fail;
    }
    fds[0] = memfd;
    fds[1] = sq_notify;
    fds[2] = cq_wait;
    *out = ch;
    return PAGED_OK;
fail:
    if (memfd >= 0)
        close(memfd);
    if (sq_notify >= 0)
        close(sq_notify);
    if (cq_wait >= 0)
        close(cq_wait);
    pd_channel_destroy(ch);
    return rc < 0 ? rc : PAGED_E_SYSTEM;
}

/* Creates the channel's device data arena; returns PAGED_OK or an error with *cause. */
int pd_channel_add_data_arena(struct pd_channel *ch, pd_backend *b, uint64_t size,
                              struct pd_export *ex, char **cause)
{
    const uint64_t unit = 64u << 10;
    if (size == 0)
        size = 256u << 20;
    if (size < (1u << 20))
        size = 1u << 20;
    if (size > (4ull << 30))
        size = 4ull << 30;
    size = (size + unit - 1) & ~(unit - 1);
    int rc = b->ops->arena_create(b, ch->device, size, &ch->data, ex, cause);
    if (rc < 0) {
        ch->data = NULL;
        return rc;
    }
    ch->backend = b;
    ch->data_size = size;
    ch->host_words = 0;
    if (b->ops->host_register != NULL) {
        /* Not fatal: without it, requests with host-arena words are refused (validate.c). */
        char *why = NULL;
        if (b->ops->host_register(b, ch->data, ch->arena, ch->arena_size, &why) == PAGED_OK)
            ch->host_words = 1;
        else
            pd_log(PD_LOG_WARNING, "a client's host arena cannot hold dependency words: %s",
                   why != NULL ? why : "out of memory");
        free(why);
    }
    return PAGED_OK;
}

/* Unmaps and closes a channel; returns nothing. */
void pd_channel_destroy(struct pd_channel *ch)
{
    if (ch == NULL)
        return;
    if (ch->data != NULL)
        ch->backend->ops->arena_destroy(ch->backend, ch->data, ch->map, ch->size);   /* unmaps too */
    else if (ch->map != NULL)
        pcore_shm_unmap(ch->map, ch->size);
    if (ch->sq_wait >= 0)
        close(ch->sq_wait);
    if (ch->cq_notify >= 0)
        close(ch->cq_notify);
    free(ch);
}
