/* buffers.c: the peers' staging buffers (host or device memory) mapped with UCX, kept, and units moved through them. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/peer/internal.h"
#include "daemon/tier/tiers.h"
#include "daemon/util/heap.h"
#include "daemon/util/log.h"

/*
 * A transfer's staging buffer (the server's, which the asker reads, and the asker's, which it
 * reads into) is hundreds of MiB for a long prefix. Allocated and mapped anew for each
 * request, it costs a page fault per page and a registration (a pin, over RDMA) before any
 * byte moves: more than the copy into it. So a buffer let go is kept, mapped, as a spare, and
 * the next request takes the smallest spare that fits; spares above PD_PEER_SPARE_BYTES in
 * all, or idle for PD_PEER_SPARE_IDLE_NS, are freed.
 */

/* Unmaps and frees b's memory. Returns nothing. */
static void buf_free(struct pd_peers *ps, const struct pd_peer_buf *b)
{
    if (b->memh != NULL) {
        ucs_status_t st = ucp_mem_unmap(ps->ctx, b->memh);
        if (st != UCS_OK)
            pd_log(PD_LOG_WARNING, "peers: ucp_mem_unmap: %s", ucs_status_string(st));
    }
    if (b->device)
        ps->backend->ops->dev_free(ps->backend, b->buf, b->cap);
    else
        free(b->buf);
}

/* Returns the bytes the spares hold. */
static size_t spare_bytes(const struct pd_peers *ps)
{
    size_t n = 0;
    for (uint32_t i = 0; i < PD_PEER_SPARES; i++)
        n += ps->spares[i].cap;
    return n;
}

/* Takes a mapped buffer of at least len bytes; see internal.h. */
int pd_peer_buf_get(struct pd_peers *ps, size_t len, int device, struct pd_peer_buf *out)
{
    struct pd_peer_buf *best = NULL;
    for (uint32_t i = 0; i < PD_PEER_SPARES; i++) {
        struct pd_peer_buf *s = &ps->spares[i];
        if (s->buf != NULL && s->device == device && s->cap >= len && (best == NULL || s->cap < best->cap))
            best = s;
    }
    if (best != NULL) {
        *out = *best;
        memset(best, 0, sizeof *best);
        return 0;
    }
    const size_t cap = (len + PD_PEER_BUF_ROUND - 1) / PD_PEER_BUF_ROUND * PD_PEER_BUF_ROUND;
    memset(out, 0, sizeof *out);
    out->device = device;
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        .length = cap,
    };
    if (device) {
        char *cause = NULL;
        void *p = NULL;
        if (ps->backend->ops->dev_alloc(ps->backend, cap, &p, &cause) != PAGED_OK) {
            pd_log(PD_LOG_WARNING, "peers: %s", cause != NULL ? cause : "no device memory for a staging buffer");
            free(cause);
            return -1;
        }
        out->buf = p;
        mp.field_mask |= UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
        mp.memory_type = UCS_MEMORY_TYPE_CUDA;
    } else {
        out->buf = pd_malloc(cap);
        if (out->buf == NULL)
            return -1;
    }
    mp.address = out->buf;
    out->cap = cap;
    ucs_status_t st = ucp_mem_map(ps->ctx, &mp, &out->memh);
    if (st != UCS_OK) {
        pd_log(PD_LOG_WARNING, "peers: ucp_mem_map of %zu bytes of %s memory: %s", cap, device ? "device" : "host",
               ucs_status_string(st));
        out->memh = NULL;
        buf_free(ps, out);
        memset(out, 0, sizeof *out);
        return -1;
    }
    return 0;
}

/* Gives a buffer back as a spare, or frees it; see internal.h. */
void pd_peer_buf_put(struct pd_peers *ps, struct pd_peer_buf *b, uint64_t now)
{
    if (b->buf == NULL)
        return;
    struct pd_peer_buf *slot = NULL;
    for (uint32_t i = 0; i < PD_PEER_SPARES && slot == NULL; i++)
        if (ps->spares[i].buf == NULL)
            slot = &ps->spares[i];
    if (slot == NULL || spare_bytes(ps) + b->cap > PD_PEER_SPARE_BYTES) {
        buf_free(ps, b);
    } else {
        *slot = *b;
        slot->idle_since = now;
    }
    memset(b, 0, sizeof *b);
}

/* Frees the spares idle too long (all: every one); see internal.h. */
void pd_peer_buf_trim(struct pd_peers *ps, uint64_t now, int all)
{
    for (uint32_t i = 0; i < PD_PEER_SPARES; i++) {
        struct pd_peer_buf *s = &ps->spares[i];
        if (s->buf != NULL && (all || now - s->idle_since >= PD_PEER_SPARE_IDLE_NS)) {
            buf_free(ps, s);
            memset(s, 0, sizeof *s);
        }
    }
}

/* Returns whether a spare waits to be trimmed. */
int pd_peer_buf_spares(const struct pd_peers *ps)
{
    for (uint32_t i = 0; i < PD_PEER_SPARES; i++)
        if (ps->spares[i].buf != NULL)
            return 1;
    return 0;
}

/* Copies blocks of q to or from the units lying one after another from units; see internal.h. */
int pd_peer_units_copy(struct pd_peers *ps, struct pd_pool *q, int to_units, uint32_t n, const int32_t *ids,
                       unsigned char *units, char **cause)
{
    unsigned char **each = pd_malloc((size_t) n * sizeof *each);
    if (each == NULL)
        return PAGED_E_NOMEM;
    for (uint32_t i = 0; i < n; i++)
        each[i] = units + (size_t) i * q->geom.block_bytes;
    int rc = pd_units_copy(ps->backend, q->mem, &q->cache, to_units, n, ids, each, cause);
    free(each);
    return rc;
}

/* Moves blocks of q to or from device units and sums the units; see internal.h. */
int pd_peer_units_move(struct pd_peers *ps, struct pd_pool *q, int to_units, uint32_t n, const int32_t *ids,
                       unsigned char *units, uint64_t *sums, char **cause)
{
    pd_backend *b = ps->backend;
    if (b->ops->units_move != NULL) {
        int rc = b->ops->units_move(b, q->mem, &q->cache, to_units, n, ids, units, sums, cause);
        if (rc != PAGED_E_NOTSUP)
            return rc;
        free(*cause);
        *cause = NULL;
    }
    /* No one pass: the copy, and the sums of the units (gathered, or still to scatter). */
    int rc = pd_peer_units_copy(ps, q, to_units, n, ids, units, cause);
    return rc != PAGED_OK ? rc : b->ops->units_sums(b, units, n, q->geom.block_bytes, sums, cause);
}
