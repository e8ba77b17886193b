/* engine.c: drains a client's submission ring: copy, validate, run, complete, wake. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/server.h"
#include "daemon/validate.h"
#include "lib/wake.h"

/* Names of the request fields for log lines, in enum paged_field order. */
static const char *const field_names[PAGED_FIELD_COUNT_] = {
    "none", "opcode", "pool", "layer", "count", "dtype", "heads", "ids", "k", "v", "slots",
    "q", "out", "block_tables", "seq_lens", "qo_indptr", "alibi", "src", "dst", "tokens",
    "window", "scale", "flags",
};

static const char *const op_names[PAGED_OP_COUNT_] = {
    "NOP", "ALLOC", "FREE", "APPEND", "DECODE", "PREFILL", "FORK", "COPY", "PUBLISH", "LOOKUP",
};

/* The validator's pool lookup over a connection's attachments; returns the view or NULL. */
static const struct pv_pool *find_pool(void *ctx, uint32_t id)
{
    struct pd_attach *a = pd_conn_attach_find(ctx, id);
    return a != NULL ? &a->view : NULL;
}

/* Runs the allocator part of a validated op, or hands it to the backend. Returns the
 * status and sets cqe's count and error fields. */
static int execute(struct pd_server *srv, struct pd_conn *c, const struct pv_op *op,
                   struct paged_cqe *cqe)
{
    struct pd_pool *p = op->pool != NULL ? op->pool->user : NULL;
    uint32_t bad = 0;
    int rc = PAGED_OK;
    switch (op->opcode) {
    case PAGED_OP_NOP:
        return PAGED_OK;
    case PAGED_OP_ALLOC:
    case PAGED_OP_LOOKUP: {
        int32_t *ids = malloc((size_t) op->count * 4 + 4);
        if (ids == NULL)
            return PAGED_E_NOMEM;
        if (op->opcode == PAGED_OP_ALLOC) {
            rc = pa_alloc_blocks(p->alloc, c->id, op->count, ids);
            if (rc == PAGED_OK)
                cqe->count = op->count;
            else
                cqe->err_field = PAGED_FIELD_COUNT;
        } else
            cqe->count = pa_lookup(p->alloc, c->id, op->count, op->hashes, ids);
        if (rc == PAGED_OK && cqe->count != 0)
            memcpy(c->ch->arena + op->out_ids_off, ids, (size_t) cqe->count * 4);
        free(ids);
        pd_server_flush_evictions(srv, p);
        return rc;
    }
    case PAGED_OP_FREE:
    case PAGED_OP_FORK:
        rc = op->opcode == PAGED_OP_FREE ? pa_free_blocks(p->alloc, c->id, op->count, op->ids, &bad)
                                         : pa_fork_blocks(p->alloc, c->id, op->count, op->ids, &bad);
        if (rc < 0) {
            cqe->err_field = PAGED_FIELD_IDS;
            cqe->err_index = bad;
        } else
            cqe->count = op->count;
        return rc;
    case PAGED_OP_PUBLISH:
        rc = pa_publish(p->alloc, c->id, op->count, op->ids, op->hashes, &bad);
        if (rc < 0) {
            cqe->err_field = PAGED_FIELD_IDS;
            cqe->err_index = bad;
            return rc;
        }
        cqe->count = (uint32_t) rc;
        return PAGED_OK;
    default: {
        struct pd_arenas ar = { c->ch->arena, c->ch->arena_size, c->ch->data, c->ch->data_size };
        rc = srv->backend->ops->run(srv->backend, &p->cache, p->mem, &ar, op);
        if (rc >= 0)
            cqe->count = op->count;
        return rc;
    }
    }
}

/* Posts one completion (room was checked); returns PAGED_OK or PAGED_E_RING. */
static int post(struct pd_conn *c, const struct paged_cqe *cqe)
{
    void *slot = paged_ring_prod_slot(&c->ch->cq, 0);
    if (slot == NULL)
        return PAGED_E_RING;
    memcpy(slot, cqe, sizeof *cqe);
    return paged_ring_prod_publish(&c->ch->cq, 1);
}

/* Returns whether c has a submission it could run now. */
int pd_engine_pending(struct pd_conn *c)
{
    if (c->ch == NULL || c->state != PD_CONN_READY)
        return 0;
    int n = paged_ring_cons_available(&c->ch->sq, 1);
    if (n == 0)
        return 0;
    if (n < 0)
        return 1; /* corrupt: the next drain finds it and disconnects the client */
    return paged_ring_prod_space(&c->ch->cq, 1) != 0;
}

/* Runs up to budget submissions of c; returns how many. */
unsigned pd_engine_drain(struct pd_server *srv, struct pd_conn *c, unsigned budget)
{
    struct pd_channel *ch = c->ch;
    unsigned done = 0;
    int rc = PAGED_OK;
    c->cq_blocked = 0;
    while (done < budget) {
        int avail = paged_ring_cons_available(&ch->sq, 1);
        if (avail <= 0) {
            rc = avail;
            break;
        }
        int space = paged_ring_prod_space(&ch->cq, 1);
        if (space <= 0) {
            /* Backpressure: the client must reap before it gets more completions. */
            if (space == 0)
                c->cq_blocked = 1;
            rc = space;
            break;
        }
        struct paged_sqe sqe;
        if ((rc = paged_ring_cons_pop(&ch->sq, &sqe)) <= 0)
            break;
        uint64_t t0 = pd_now_ns();
        struct pv_env env = {
            .holder = c->id, .host = ch->arena, .host_size = ch->arena_size,
            .data_size = ch->data_size, .held_total = pd_conn_held(c),
            .max_blocks = srv->cfg.max_blocks_per_client, .find_pool = find_pool, .ctx = c,
        };
        struct pv_op op;
        struct pv_error err;
        struct paged_cqe cqe;
        memset(&cqe, 0, sizeof cqe);
        cqe.tag = sqe.tag;
        cqe.opcode = sqe.opcode;
        int status = pv_validate(&sqe, &env, &op, &err);
        if (status < 0) {
            cqe.err_field = err.field;
            cqe.err_index = err.index;
        } else {
            status = execute(srv, c, &op, &cqe);
        }
        cqe.status = status;
        uint64_t t1 = pd_now_ns();
        cqe.value = t1 - t0;
        c->requests++;
        if (status < 0) {
            c->errors++;
            if (pd_log_enabled(PD_LOG_DEBUG))
                pd_clog(c, PD_LOG_DEBUG, "request tag %llu %s: %s (%s[%u])",
                        (unsigned long long) sqe.tag,
                        sqe.opcode < PAGED_OP_COUNT_ ? op_names[sqe.opcode] : "unknown opcode",
                        paged_strerror(status),
                        cqe.err_field < PAGED_FIELD_COUNT_ ? field_names[cqe.err_field] : "?",
                        cqe.err_index);
        }
        pd_stats_record(&srv->stats, sqe.opcode, status, op.tokens, op.kv_bytes, t1 - t0);
        pv_op_free(&op);
        if ((rc = post(c, &cqe)) < 0)
            break;
        done++;
    }
    if (done != 0)
        paged_wake_notify(&ch->cq, ch->cq_notify);
    if (rc == PAGED_E_RING) {
        pd_conn_error(c, 0, PAGED_E_RING, "ring indices corrupt: the submission tail is more "
                      "than the ring's capacity ahead, or the completion head moved wrongly");
        pd_server_kill(srv, c, PD_LOG_WARNING, "corrupt ring indices (PAGED_E_RING)");
    }
    return done;
}

/* Completes c's queued submissions with PAGED_E_SHUTDOWN; returns nothing. */
void pd_engine_cancel(struct pd_server *srv, struct pd_conn *c)
{
    (void) srv;
    struct pd_channel *ch = c->ch;
    unsigned done = 0;
    if (ch == NULL || c->state != PD_CONN_READY)
        return;
    for (unsigned i = 0; i < ch->hdr.sq_entries; i++) {
        if (paged_ring_cons_available(&ch->sq, 1) <= 0 || paged_ring_prod_space(&ch->cq, 1) <= 0)
            break;
        struct paged_sqe sqe;
        if (paged_ring_cons_pop(&ch->sq, &sqe) <= 0)
            break;
        struct paged_cqe cqe = { .tag = sqe.tag, .status = PAGED_E_SHUTDOWN, .opcode = sqe.opcode };
        if (post(c, &cqe) < 0)
            break;
        done++;
    }
    /* Wake it whether or not it says it sleeps, so that it looks at the socket. */
    uint64_t one = 1;
    if (write(ch->cq_notify, &one, sizeof one) < 0) {
        /* A full pipe already holds a wake-up. */
    }
}
