/* engine.c: the request engine: takes every client's submissions into a pass, runs it as one batch, completes. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/engine/internal.h"
#include "daemon/util/knobs.h"
#include "daemon/util/heap.h"
#include "lib/core/clock.h"
#include "lib/core/names.h"
#include "lib/core/wake.h"

/*
 * One pass: for each ready client in turn, copy its submissions out of the ring in order
 * (up to the budget and the room in its completion ring), validate each, run the allocator
 * ops at once, and keep the rest for the backend, as long as daemon/engine/batch.h's rules let the
 * client's requests join; then hand the kept ops to the backend as one batch (non-DECODEs in
 * order, mergeable APPENDs as one launch each, then the DECODEs, mergeable ones as one
 * launch each), which returns once every
 * output is visible; then post every completion, each client's in its ring order, and wake
 * each client once. Nothing a client can do kills another client's requests in the pass: a
 * corrupt ring is acted on (the client disconnected) only once the pass is over, and so are
 * eviction events, whose sending may drop a subscriber.
 *
 * Gathering. Clients that decode in lock step (a layer each, waiting for its completion)
 * resubmit a few microseconds after a pass posts their completions; a pass that starts at
 * once catches only some of them, and the rest would run in a second batch of their own. So
 * a pass holding a DECODE waits, briefly, for the clients that had a DECODE in the last such
 * pass and have not submitted yet: at most PD_GATHER_MAX_NS, and at most a
 * 1/PD_GATHER_SHARE of how long the previous batch took in the backend, so a client that no
 * longer comes costs little. A pass without a DECODE (NOPs, allocator ops) never waits.
 * With deferred batches (below) the clients to wait for are those whose DECODE completions a
 * retired batch just posted (engine_awaited): the last pass's clients are still withheld.
 * While another deferred batch keeps the device busy, waiting up to PD_GATHER_MAX_NS for
 * them costs the device nothing, and a retired batch's clients come back as one batch
 * instead of one or two at a time behind whichever pass happened to see them first; once
 * that batch is done, the device idles while we wait, so the wait ends within the window a
 * pass with an idle device would have had. A client is waited for once per posted
 * completion.
 *
 * Dependencies. A request with PCORE_SQE_WAIT joins a pass only once its word is reached
 * (dep_gate): the engine reads a word of the host arena itself and looks at one of a device
 * data arena through the backend's probe, which copies it without making any device queue
 * wait; until then the request stays at the head of its ring, holding up its own client and
 * nobody else, and after dependency-timeout ms it fails with PAGED_E_TIMEOUT, a strike
 * against its uid (strikes.h). Only under dependency-waits = inline does the cuda backend
 * gate the batch on the device instead, where a word that never comes holds every client
 * queued behind it until the watchdog releases it. Either way a pass's waits come before all
 * of its work and its signals after it, so a waiting
 * request never joins a pass that holds an earlier request of the same client for the
 * backend (the word it waits for may be one the worker writes once that one is done). A
 * batch the backend completed early may still be running: a FREE, FORK or PUBLISH of a
 * client that had requests in one, and the release of such a client's blocks, first settle
 * it (pd_engine_settle); a wait that timed out in one disconnects its client (on_late,
 * kill_late).
 *
 * Deferred batches. A pass whose backend requests neither wait nor signal may hand its
 * batch to a backend that runs it in the background (batch.may_defer): the backend queues it
 * and returns a ticket instead of waiting for it. The completions of the pass's clients that
 * had backend requests are then withheld (def), and those clients are left out of later
 * passes until their completions are posted, so each client's completions stay in its ring
 * order; the passes after it post them as soon as the backend says the ticket is done, and
 * may meanwhile queue other clients' batches behind it. So the device runs one group of
 * clients' work while the engine takes, checks and queues the next group's, instead of
 * idling through every pass's host work. A withheld client counts as one with work in
 * flight (early_inflight): its disconnection settles the device first. The clients a pass
 * posts that sleep are woken only once its own batch is queued (pd_eng_wake_retired), and a
 * pass that finds the device idle for the second time in a row with many decoding clients
 * queues them as two batches, so that they settle into two groups (split_point).
 */

/* Grows *p (an array of *cap elements of size bytes) to hold want; returns 0 or -1. */
int pd_eng_grow(void **p, uint32_t *cap, uint32_t want, size_t size)
{
    if (want <= *cap)
        return 0;
    uint32_t n = *cap != 0 ? *cap : 16;
    while (n < want)
        n *= 2;
    void *q = pd_realloc(*p, (size_t) n * size);
    if (q == NULL)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* Reallocates *p to n elements of size bytes; returns 0, or -1 with *p as it was. */
static int resize(void **p, uint32_t n, size_t size)
{
    void *q = pd_realloc(*p, (size_t) n * size);
    if (q == NULL)
        return -1;
    *p = q;
    return 0;
}

/* Makes room for want items and the batch arrays that go with them. Returns 0 or -1. */
static int reserve_items(struct pd_engine *e, uint32_t want)
{
    if (want <= e->citems)
        return 0;
    uint32_t n = e->citems != 0 ? e->citems : 16;
    while (n < want)
        n *= 2;
    /* An array grown before a later one failed is merely larger than citems says. */
    if (resize((void **) &e->items, n, sizeof *e->items) < 0
        || resize((void **) &e->in, n, sizeof *e->in) < 0
        || resize((void **) &e->out, n, sizeof *e->out) < 0
        || resize((void **) &e->launches, n, sizeof *e->launches) < 0
        || resize((void **) &e->groups, n, sizeof *e->groups) < 0
        || resize((void **) &e->next, n, sizeof *e->next) < 0)
        return -1;
    e->citems = n;
    return 0;
}

/* The backend's late_fn (ctx: the engine): marks the client whose waited word (off, value)
 * timed out after its completion was posted, for kill_late. Returns nothing. */
static void on_late(void *ctx, uint32_t holder, uint64_t off, uint32_t value)
{
    const struct pd_engine *e = ctx;
    for (struct pd_conn *c = eng_conns(e); c != NULL; c = c->next)
        if (c->id == holder && c->state == PD_CONN_READY && !c->dep_late) {
            c->dep_late = 1;
            c->dep_off = off;
            c->dep_value = value;
        }
}

/* Disconnects every client marked by on_late, telling it which word was late; returns nothing. */
static void kill_late(const struct pd_engine *e)
{
    for (struct pd_conn *c = eng_conns(e); c != NULL; c = c->next) {
        if (!c->dep_late || c->state != PD_CONN_READY)
            continue;
        c->dep_late = 0;
        pd_conn_error(c, 0, PAGED_E_TIMEOUT, "a request's dep.wait_off word (offset %llu) did not reach %u within "
                      "%u ms after its completion was posted; its work ran on whatever was there",
                      (unsigned long long) c->dep_off, c->dep_value, e->env->dependency_timeout_ms);
        e->env->kill(e->env->ctx, c, PD_LOG_WARNING, "dependency wait timed out (PAGED_E_TIMEOUT)");
    }
}

/* Creates the engine over env and makes it the backend's late_fn; returns it or NULL when
 * out of memory. */
struct pd_engine *pd_engine_create(const struct pd_engine_env *env)
{
    struct pd_engine *e = pd_calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    e->env = env;
    e->gather_share = (uint32_t) pd_knob_part(PD_KNOB_GATHER, 0);
    e->gather_max_ns = pd_knob_part(PD_KNOB_GATHER, 1) * 1000u;
    if (pd_knob_is_set(PD_KNOB_GATHER))
        pd_log(PD_LOG_INFO, "engine: gathering for 1/%u of the last batch, at most %llu us (PAGEDD_GATHER)",
               e->gather_share, (unsigned long long) e->gather_max_ns / 1000u);
    e->split_clients = (uint32_t) pd_knob_part(PD_KNOB_SPLIT, 0);
    e->split_after = (uint32_t) pd_knob_part(PD_KNOB_SPLIT, 1);
    if (pd_knob_is_set(PD_KNOB_SPLIT))
        pd_log(PD_LOG_INFO, "engine: a pass splits in two once %u in a row found the device idle with %u "
               "decoding clients or more (PAGEDD_SPLIT; 0 clients: never)", e->split_after, e->split_clients);
    e->defer_enabled = pd_knob(PD_KNOB_DEFER) != 0;
    if (!e->defer_enabled)
        pd_log(PD_LOG_INFO, "engine: every batch's completions wait for its device work (PAGEDD_DEFER=0)");
    if (reserve_items(e, 64) < 0
        || pd_eng_grow((void **) &e->clients, &e->cclients, 16, sizeof *e->clients) < 0) {
        pd_engine_destroy(e);
        return NULL;
    }
    env->backend->late_fn = on_late;
    env->backend->late_ctx = e;
    return e;
}

/* Frees the engine; returns nothing. */
void pd_engine_destroy(struct pd_engine *e)
{
    if (e == NULL)
        return;
    const struct pcore_engine_stats *t = &e->total;
    if (t->merged_decode_launches != 0)
        pd_log(PD_LOG_DEBUG, "engine: %llu merged DECODE launches served %llu requests",
               (unsigned long long) t->merged_decode_launches,
               (unsigned long long) t->merged_decode_requests);
    if (t->merged_append_launches != 0)
        pd_log(PD_LOG_DEBUG, "engine: %llu merged APPEND launches served %llu requests",
               (unsigned long long) t->merged_append_launches,
               (unsigned long long) t->merged_append_requests);
    free(e->items);
    free(e->clients);
    free(e->in);
    free(e->out);
    free(e->launches);
    free(e->groups);
    free(e->next);
    free(e->def);
    pd_strikes_free(&e->strikes);
    free(e);
}

/* The validator's pool lookup over a connection's attachments; returns the view or NULL. */
static const struct pv_pool *find_pool(void *ctx, uint32_t id)
{
    struct pd_attach *a = pd_conn_attach_find(ctx, id);
    return a != NULL ? &a->view : NULL;
}

/* Names the request field (and element) an allocator op failed on in cqe, unless it failed
 * for want of memory, which is no field's fault; returns rc. */
static int blame(struct pcore_cqe *cqe, int rc, uint32_t field, uint32_t index)
{
    if (rc != PAGED_E_NOMEM) {
        cqe->err_field = field;
        cqe->err_index = index;
    }
    return rc;
}

/* Adds a LOOKUP of asked blocks of pool p that found found, got of them reloaded from the
 * tiers, to client c's figures. Returns nothing. */
static void count_lookup(struct pd_conn *c, const struct pd_pool *p, uint32_t asked, uint32_t found,
                         const struct pd_tier_reload *got)
{
    const uint64_t bs = p->geom.block_size;
    c->prefix.lookups++;
    c->prefix.lookup_tokens += asked * bs;
    c->prefix.pool_hit_tokens += (found - got->host - got->file) * bs;
    c->prefix.host_hit_tokens += got->host * bs;
    c->prefix.file_hit_tokens += got->file * bs;
    c->prefix.reloaded_bytes += (uint64_t) (got->host + got->file) * p->geom.block_bytes;
    c->prefix.reload_ns += got->ns;
}

/* Runs a validated allocator op (NOP, ALLOC, FREE, FORK, PUBLISH, LOOKUP) now. Returns the
 * status and sets cqe's count and error fields. */
static int execute(struct pd_engine *e, struct pd_conn *c, const struct pv_op *op,
                   struct pcore_cqe *cqe)
{
    struct pd_pool *p = op->pool != NULL ? op->pool->user : NULL;
    uint32_t bad = 0;
    int rc = PAGED_OK;
    switch (op->opcode) {
    case PAGED_OP_NOP:
        return PAGED_OK;
    case PAGED_OP_ALLOC:
    case PAGED_OP_LOOKUP: {
        int32_t *ids = pd_malloc((size_t) op->count * 4 + 4);
        if (ids == NULL)
            return PAGED_E_NOMEM;
        if (op->opcode == PAGED_OP_ALLOC) {
            uint64_t offloaded = 0;
            rc = pd_pool_alloc_blocks(p, op->pool->holder, op->count, ids, &offloaded);
            c->prefix.offloaded_bytes += offloaded * p->geom.block_bytes;
            if (rc == PAGED_OK)
                cqe->count = op->count;
            else
                blame(cqe, rc, PCORE_FIELD_COUNT, 0);
        } else {
            uint32_t found = pa_lookup(p->alloc, op->pool->holder, op->pool->tenant, op->count, op->hashes, ids);
            struct pd_tier_reload got;
            cqe->count = pd_tiers_lookup(p->tiers, op->pool->holder, op->pool->tenant, op->count, op->hashes, ids,
                                         found, &got);
            count_lookup(c, p, op->count, cqe->count, &got);
        }
        if (rc == PAGED_OK && cqe->count != 0)
            memcpy(c->ch->arena + op->out_ids_off, ids, (size_t) cqe->count * 4);
        free(ids);
        e->flush_evictions = 1;
        return rc;
    }
    case PAGED_OP_FREE:
    case PAGED_OP_FORK:
        /* Early-completed work of the client (of any rank of its group) may still write or
         * read these blocks. */
        pd_engine_settle(e, p->tp != NULL ? NULL : c);
        rc = op->opcode == PAGED_OP_FREE ? pa_free_blocks(p->alloc, op->pool->holder, op->count, op->ids, &bad)
                                         : pa_fork_blocks(p->alloc, op->pool->holder, op->count, op->ids, &bad);
        if (rc < 0)
            return blame(cqe, rc, PCORE_FIELD_IDS, bad);
        cqe->count = op->count;
        return rc;
    case PAGED_OP_PUBLISH:
        pd_engine_settle(e, p->tp != NULL ? NULL : c);
        if (p->tp != NULL)
            rc = pd_shards_publish(p->tp, p->alloc, op->pool->holder, op->pool->shard, op->pool->tenant, op->count,
                                   op->ids, op->hashes, &bad);
        else
            rc = pa_publish(p->alloc, op->pool->holder, op->pool->tenant, op->count, op->ids, op->hashes, &bad);
        if (rc < 0)
            return blame(cqe, rc, PCORE_FIELD_IDS, bad);
        cqe->count = (uint32_t) rc;
        return PAGED_OK;
    default:
        return PAGED_E_NOTSUP;
    }
}

/* Returns whether the validated DECODE op (entry sqe) of client r must wait for the next pass
 * because of one of r's ops already waiting for the backend. */
static int decode_conflicts(const struct pd_engine *e, const struct eng_client *r,
                            const struct pv_op *op, const struct pcore_sqe *sqe)
{
    for (uint32_t j = r->first; j != NONE; j = e->items[j].next)
        if (e->items[j].status == ITEM_WAITS && pb_decode_conflicts(&r->rules, &e->items[j].op, op, sqe))
            return 1;
    return 0;
}

/* Adds a record for c to the pass; returns it, or NULL when out of memory. */
static struct eng_client *add_client(struct pd_engine *e, struct pd_conn *c)
{
    if (pd_eng_grow((void **) &e->clients, &e->cclients, e->nclients + 1, sizeof *e->clients) < 0)
        return NULL;
    struct eng_client *r = &e->clients[e->nclients++];
    memset(r, 0, sizeof *r);
    r->c = c;
    r->first = r->last = NONE;
    r->rules.host_is_data = c->ch->data == NULL;
    return r;
}

/* A device word still short this long after its request began waiting is looked at (a copy
 * from the device, backend.h's probe) at most once per PD_LOOK_GAP_NS: a word that comes late
 * costs its client that much more, and the engine's passes stop issuing copies for it. */
#define PD_LOOK_SLOW_NS 1000000u
#define PD_LOOK_GAP_NS 100000u

/*
 * Refuses op's wait: its word is short and c's uid is struck out (strikes.h); logs it once per
 * strike. Returns PAGED_E_LIMIT.
 */
static int refuse_struck(struct pd_engine *e, struct pd_conn *c, uint32_t strikes)
{
    if (pd_strikes_warn(&e->strikes, c->uid))
        pd_clog(c, PD_LOG_WARNING, "uid %u: %u dependency waits timed out less than a minute apart "
                "(dependency-strikes %u): its waits on words not yet reached are refused for a minute",
                (unsigned) c->uid, strikes, e->env->dependency_strikes);
    return PAGED_E_LIMIT;
}

/*
 * Looks whether op's PCORE_SQE_WAIT word is reached, without waiting: a word in the host arena
 * (the cpu backend's data, or PCORE_SQE_HOST_WORDS) by reading it, one in a device data arena
 * through the backend's probe. Returns 1 when it is (with the flag cleared: nothing is left
 * for the backend to wait for), 0 while it is not (the request stays in the ring and c's
 * later ones behind it), or a negative paged_error that fails the request: PAGED_E_TIMEOUT
 * once it has not been for dependency-timeout since the engine first found it waiting (a
 * strike against c's uid), PAGED_E_LIMIT when it is short and c's uid is struck out.
 * Returns 1 leaving the flag for a backend that waits on its device (dependency-waits =
 * inline, or no probe), for every word of a client with a data arena of its own.
 */
static int dep_gate(struct pd_engine *e, struct pd_conn *c, struct pv_op *op)
{
    const struct pd_backend *b = e->env->backend;
    if (c->ch->data != NULL && (e->env->dependency_inline || b->ops->probe == NULL))
        return 1;
    const int host = c->ch->data == NULL || (op->flags & PCORE_SQE_HOST_WORDS);
    int seen;
    if (host) {
        const uint32_t *word = (const uint32_t *) (c->ch->arena + op->wait_off);
        seen = (int32_t) (__atomic_load_n(word, __ATOMIC_ACQUIRE) - op->wait_value) >= 0 ? PD_PROBE_REACHED
                                                                                        : PD_PROBE_SHORT;
    } else {
        const uint64_t t = pcore_now_ns();
        if (c->dep_since_ns != 0 && t - c->dep_since_ns > PD_LOOK_SLOW_NS && t - c->dep_looked_ns < PD_LOOK_GAP_NS) {
            seen = PD_PROBE_PENDING;    /* a slow word: looked at no more often than every PD_LOOK_GAP_NS */
        } else {
            c->dep_looked_ns = t;
            seen = b->ops->probe(e->env->backend, c->ch->data, op->wait_off, op->wait_value, c->dep_since_ns == 0);
            if (seen < 0) {
                c->dep_since_ns = 0;
                return seen;
            }
        }
    }
    if (seen == PD_PROBE_REACHED) {
        c->dep_since_ns = 0;
        op->flags &= ~(uint32_t) PCORE_SQE_WAIT;
        return 1;
    }
    uint64_t now = pcore_now_ns();
    const uint32_t limit = e->env->dependency_strikes;
    if (seen == PD_PROBE_SHORT && limit != 0) {
        const uint32_t n = pd_strikes_count(&e->strikes, c->uid, now);
        if (n >= limit) {
            c->dep_since_ns = 0;
            return refuse_struck(e, c, n);
        }
    }
    if (c->dep_since_ns == 0) {
        c->dep_since_ns = now;
        return 0;
    }
    if (now - c->dep_since_ns < (uint64_t) e->env->dependency_timeout_ms * 1000000u)
        return 0;
    c->dep_since_ns = 0;
    pd_strikes_add(&e->strikes, c->uid, now);
    return PAGED_E_TIMEOUT;
}

/*
 * Decides whether LOOKUP op of c, at the head of its ring, waits for the peers: when its
 * pool has PAGED_POOL_PEERS and the pool and its tiers hold only part of the chain, the
 * peers are asked for the rest (env->remote_start) and the LOOKUP stays in the ring until
 * pd_engine_remote_done; then it runs, once, finding what they sent. Returns 1 when it waits.
 */
static int remote_gate(struct pd_engine *e, struct pd_conn *c, const struct pv_op *op)
{
    struct pd_pool *p = op->pool->user;
    if (c->remote_wait)
        return 1;
    if (c->remote_tried) {
        c->remote_tried = 0;
        return 0;
    }
    if (!p->geom.peers || e->env->remote_start == NULL)
        return 0;
    const uint32_t have = pd_pool_chain(p, op->pool->tenant, op->count, op->hashes);
    if (have >= op->count
        || !e->env->remote_start(e->env->remote_ctx, p, c->id, op->pool->tenant, op->count - have, op->hashes + have))
        return 0;
    c->remote_wait = 1;
    return 1;
}

/* Lets the LOOKUP of client conn_id run; see engine.h. */
void pd_engine_remote_done(struct pd_engine *e, uint32_t conn_id)
{
    for (struct pd_conn *c = eng_conns(e); c != NULL; c = c->next)
        if (c->id == conn_id && c->remote_wait) {
            c->remote_wait = 0;
            c->remote_tried = 1;
        }
}

/*
 * Takes up to budget requests of c into the pass, in ring order, while batch.h's rules let
 * them join; runs the allocator ops among them now. Returns the number taken.
 */
static uint32_t collect(struct pd_engine *e, struct pd_conn *c, unsigned budget)
{
    struct pd_channel *ch = c->ch;
    c->cq_blocked = 0;
    int avail = pcore_ring_cons_available(&ch->sq, 1);
    if (avail == 0)
        return 0;
    int space = 0;
    if (avail > 0) {
        space = pcore_ring_prod_space(&ch->cq, 1);
        if (space == 0) {
            /* Backpressure: the client must reap before it gets more completions. */
            c->cq_blocked = 1;
            return 0;
        }
    }
    struct eng_client *r = add_client(e, c);
    if (r == NULL)
        return 0;   /* out of memory: the requests wait in the ring */
    c->engine_pass = e->pass;
    c->engine_awaited = 0;
    uint32_t ri = (uint32_t) (r - e->clients);
    if (avail < 0 || space < 0) {
        r->corrupt = 1;
        return 0;
    }
    uint32_t n = avail < space ? (uint32_t) avail : (uint32_t) space;
    if (n > budget)
        n = budget;
    if (reserve_items(e, e->nitems + n) < 0)
        return 0;
    r->t0 = pcore_now_ns();
    uint64_t t_collect = r->t0;
    for (uint32_t i = 0; i < n; i++) {
        struct pcore_sqe sqe;
        memcpy(&sqe, pcore_ring_cons_entry(&ch->sq, i), sizeof sqe);
        if (!pb_may_join(&r->rules, sqe.opcode))
            break;
        struct eng_item *it = &e->items[e->nitems];
        struct pv_env env = {
            .host = ch->arena, .host_size = ch->arena_size,
            .data_size = ch->data_size, .held_total = pd_conn_held(c),
            .max_blocks = e->env->max_blocks_per_client, .host_words = ch->host_words,
            .device = ch->device, .find_pool = find_pool, .ctx = c,
        };
        struct pv_error err;
        memset(&it->cqe, 0, sizeof it->cqe);
        it->cqe.tag = sqe.tag;
        it->cqe.opcode = sqe.opcode;
        int status = pv_validate(&sqe, &env, &it->op, &err);
        /* Its word may be what the worker writes once an earlier request of its is done (seen
         * by its signal or its completion): a pass holds its waits before all its work. */
        if (status >= 0 && (sqe.flags & PCORE_SQE_WAIT) && r->backend_ops) {
            pv_op_free(&it->op);
            break;
        }
        if (status >= 0 && (sqe.flags & PCORE_SQE_WAIT)) {
            int met = dep_gate(e, c, &it->op);
            if (met <= 0)
                pv_op_free(&it->op);
            if (met == 0)
                break;
            if (met < 0) {
                status = met;
                err.field = PCORE_FIELD_WAIT;
                err.index = 0;
            }
        }
        if (status >= 0 && sqe.opcode == PAGED_OP_LOOKUP && remote_gate(e, c, &it->op)) {
            pv_op_free(&it->op);
            break;
        }
        if (status < 0) {
            it->cqe.err_field = err.field;
            it->cqe.err_index = err.index;
        } else if (pv_backend_op(sqe.opcode)) {
            if (sqe.opcode == PAGED_OP_DECODE && decode_conflicts(e, r, &it->op, &sqe)) {
                pv_op_free(&it->op);
                break;
            }
            pb_taken(&r->rules, &it->op);
            r->backend_ops = 1;
            if (sqe.opcode == PAGED_OP_DECODE) {
                e->decode_in_pass = 1;
                c->engine_decode_pass = e->pass;
            }
            status = ITEM_WAITS;
        } else {
            status = execute(e, c, &it->op, &it->cqe);
        }
        it->status = status;
        it->client = ri;
        it->next = NONE;
        if (r->last != NONE)
            e->items[r->last].next = e->nitems;
        else
            r->first = e->nitems;
        r->last = e->nitems++;
        r->taken++;
    }
    if (r->taken != 0 && pcore_ring_cons_release(&ch->sq, r->taken) < 0)
        r->corrupt = 1;
    e->pass_collect_ns += pcore_now_ns() - t_collect;
    return r->taken;
}

/* Returns whether a pass may take c's requests: ready, with a channel, no completions withheld,
 * its next request not waiting for the peers. */
static int takeable(const struct pd_conn *c)
{
    return c->state == PD_CONN_READY && c->ch != NULL && !c->deferred && !c->remote_wait;
}

/* Returns whether gather waits for c: ready, not in this pass yet, no completions withheld,
 * and in the last pass with a DECODE or just posted a deferred DECODE's completion. */
static int awaited(const struct pd_engine *e, const struct pd_conn *c)
{
    return takeable(c) && c->engine_pass != e->pass
           && (c->engine_decode_pass == e->last_decode_pass || c->engine_awaited);
}

/*
 * Waits (bounded; see the top of this file) for the clients that had a DECODE in the last
 * pass that had one, or whose deferred DECODE's completion was just posted, and have nothing
 * in this one, taking their requests as they come. Returns how many requests it took.
 */
static uint32_t gather(struct pd_engine *e, unsigned budget)
{
    if (!e->decode_in_pass || e->last_decode_pass == 0)
        return 0;
    /* A deferred batch still queued keeps the device busy while we wait. */
    uint64_t window = e->ndef != 0 ? e->gather_max_ns : e->last_batch_ns / e->gather_share;
    if (window == 0)
        return 0;
    if (window > e->gather_max_ns)
        window = e->gather_max_ns;
    uint64_t deadline = 0;
    uint32_t took = 0;
    /* Once the deferred batches are done the device idles while we wait: from then on wait
     * no longer than a pass with an idle device would. */
    int busy = e->ndef != 0;
    for (;;) {
        unsigned missing = 0;
        for (struct pd_conn *c = eng_conns(e); c != NULL; c = c->next)
            if (awaited(e, c))
                pcore_ring_cons_prefetch(&c->ch->sq);   /* see pass() */
        for (struct pd_conn *c = eng_conns(e); c != NULL; c = c->next) {
            if (!awaited(e, c))
                continue;
            if (pcore_ring_cons_available(&c->ch->sq, 1) != 0)
                took += collect(e, c, budget);
            else
                missing++;
        }
        if (missing == 0)
            return took;
        uint64_t now = pcore_now_ns();
        if (deadline == 0)
            deadline = now + window;
        else if (now >= deadline)
            break;
        if (busy && e->env->backend->ops->done(e->env->backend, e->def[e->ndef - 1].ticket) != 0) {
            busy = 0;
            uint64_t idle_window = e->last_batch_ns / e->gather_share;
            if (now + idle_window < deadline)
                deadline = now + idle_window;
        }
        pcore_cpu_relax();
    }
    /* Those that did not come are not waited for again until their next completion. */
    for (struct pd_conn *c = eng_conns(e); c != NULL; c = c->next)
        if (c->engine_pass != e->pass)
            c->engine_awaited = 0;
    return took;
}

/* Returns whether a request of the pass for the backend waits for or signals a word. */
static int pass_has_deps(const struct pd_engine *e)
{
    for (uint32_t i = 0; i < e->nitems; i++)
        if (e->items[i].status == ITEM_WAITS && (e->items[i].op.flags & (PCORE_SQE_WAIT | PCORE_SQE_SIGNAL)))
            return 1;
    return 0;
}

/*
 * Where the pass's clients split into two batches queued back to back: the record index the
 * second starts at, or e->nclients for one batch. Clients that decode in lock step keep the
 * device fed when they come as two groups, each group's clients coming back while the
 * other's batch runs; when they come as one, the device idles while all of them come back,
 * pass after pass. So the second pass in a row that finds the device idle with the DECODEs
 * of at least PD_SPLIT_CLIENTS clients is split in two halves by those clients: the first
 * half's completions are posted while the second half runs, and the next passes find the
 * device busy. Only where the backend runs batches behind the engine's back (runs_behind).
 */
static uint32_t split_point(struct pd_engine *e)
{
    uint32_t decoding = 0;
    for (uint32_t c = 0; c < e->nclients; c++)
        decoding += e->clients[c].rules.decode_taken != 0;
    /* The device is asked (an event query) only for a pass that could split. */
    pd_backend *b = e->env->backend;
    const struct pd_backend_ops *ops = b->ops;
    if (e->split_clients == 0 || decoding < e->split_clients || !b->runs_behind || e->ndef != 0
        || ops->room == NULL || !ops->room(b) || (ops->tick != NULL && ops->tick(b))) {
        e->idle_big = 0;
        return e->nclients;
    }
    if (++e->idle_big < e->split_after)
        return e->nclients;
    e->idle_big = 0;
    uint32_t seen = 0;
    for (uint32_t c = 0; c < e->nclients; c++) {
        seen += e->clients[c].rules.decode_taken != 0;
        if (seen == decoding / 2)
            return c + 1;
    }
    return e->nclients;
}

/* Counts the clients among the n ops of a launch starting at first; returns it. */
static unsigned launch_clients(const struct pd_engine *e, uint32_t first, uint32_t n)
{
    unsigned k = 0;
    uint32_t prev = NONE;
    /* Members follow the order they were taken in, which is client by client. */
    for (uint32_t i = first; i < first + n; i++) {
        uint32_t cl = e->items[e->out[i].user].client;
        if (cl != prev)
            k++;
        prev = cl;
    }
    return k;
}

/* Stores in *lo and *hi the lowest and highest layer the n ops of a launch starting at first
 * touch (each op's layers [layer_begin, + num_layers)); returns nothing. */
static void launch_layers(const struct pd_engine *e, uint32_t first, uint32_t n, int32_t *lo,
                          int32_t *hi)
{
    *lo = INT32_MAX;
    *hi = INT32_MIN;
    for (uint32_t i = first; i < first + n; i++) {
        const struct pv_op *op = e->out[i].op;
        if (op->layer_begin < *lo)
            *lo = op->layer_begin;
        if (op->layer_begin + op->num_layers - 1 > *hi)
            *hi = op->layer_begin + op->num_layers - 1;
    }
}

/*
 * Logs merged launch la, the number-th of its kind (APPEND or DECODE), at debug level: its
 * requests, their clients, their tokens (APPEND) or sequences (DECODE), the pool and the
 * layers it touches, and for APPEND the layers per request. Returns nothing.
 */
static void log_merged_launch(const struct pd_engine *e, const struct pd_launch *la, uint64_t number)
{
    if (!pd_log_enabled(PD_LOG_DEBUG))
        return;
    const struct pv_op *op = e->out[la->first].op;
    int append = op->opcode == PAGED_OP_APPEND;
    uint64_t units = 0;
    for (uint32_t i = la->first; i < la->first + la->count; i++)
        units += append ? e->out[i].op->num_tokens : e->out[i].op->count;
    int32_t lo, hi;
    launch_layers(e, la->first, la->count, &lo, &hi);
    char per_request[32] = "";
    if (append)
        snprintf(per_request, sizeof per_request, ", %d per request", op->num_layers);
    pd_log(PD_LOG_DEBUG, "engine: merged %s launch %llu: %u requests of %u clients, %llu %s, "
           "pool '%s' layers %d..%d%s", pcore_op_name(op->opcode), (unsigned long long) number, la->count,
           launch_clients(e, la->first, la->count), (unsigned long long) units,
           append ? "tokens" : "sequences", ((struct pd_pool *) op->pool->user)->name, lo, hi,
           per_request);
}

/* Hands every op of client records [lo, hi) waiting for the backend to it as one batch
 * (deferred where may_defer, which no pass with dependency words sets, and the backend can),
 * and stores their statuses; returns the backend's ticket when it deferred the batch, else 0. */
static uint64_t run_batch(struct pd_engine *e, int may_defer, uint32_t lo, uint32_t hi)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < e->nitems; i++) {
        struct eng_item *it = &e->items[i];
        if (it->status != ITEM_WAITS || it->client < lo || it->client >= hi)
            continue;
        struct pd_pool *p = it->op.pool->user;
        struct pd_channel *ch = e->clients[it->client].c->ch;
        e->in[n++] = (struct pd_batch_op) {
            .cache = pd_pool_shard_cache(p, it->op.pool->shard), .mem = pd_pool_shard_mem(p, it->op.pool->shard),
            .dst_cache = it->op.pool2 != NULL ? pd_pool_shard_cache(it->op.pool2->user, it->op.pool2->shard) : NULL,
            .dst_mem = it->op.pool2 != NULL ? pd_pool_shard_mem(it->op.pool2->user, it->op.pool2->shard) : NULL,
            .arenas = { ch->arena, ch->arena_size, ch->data, ch->data_size },
            .op = &it->op, .user = i, .client = it->client, .holder = e->clients[it->client].c->id,
            .status = PAGED_E_INVAL,
        };
    }
    if (n == 0)
        return 0;
    /* Deferred only where every withheld completion can be made room for now. */
    may_defer = may_defer && e->env->backend->ops->done != NULL
                    && pd_eng_grow((void **) &e->def, &e->cdef, e->ndef + e->nitems, sizeof *e->def) == 0;
    struct pd_batch batch = { .ops = e->out, .nops = n, .launches = e->launches,
                              .dep_timeout_ns = (uint64_t) e->env->dependency_timeout_ms * 1000000u,
                              .may_defer = may_defer };
    batch.nlaunches = pb_plan(e->in, n, e->out, e->launches, e->groups, e->next);
    uint64_t t0 = pcore_now_ns();
    e->env->backend->ops->run_batch(e->env->backend, &batch);
    uint64_t spent = pcore_now_ns() - t0;
    /* A batch that holds up every client for this long is worth a line (one a second). */
    if (spent >= 20000000u && t0 >= e->slow_logged + 1000000000u) {
        e->slow_logged = t0;
        pd_log(PD_LOG_INFO, "engine: a batch of %u requests took %.1f ms in the backend (%.1f waiting for the device)",
               n, (double) spent / 1e6, (double) batch.wait_ns / 1e6);
    }
    struct pcore_engine_stats *t = &e->total;
    t->batches++;
    t->launches += batch.nlaunches - (batch.fused_appends != 0);   /* a fused APPEND launch is not made */
    t->backend_ns += spent;
    t->device_wait_ns += batch.wait_ns;
    e->host.stage_ns += batch.stage_ns;
    e->host.upload_ns += batch.upload_ns;
    e->host.queue_ns += batch.queue_ns;
    e->host.uploads_skipped += batch.upload_skipped != 0;
    e->host.meta_inline += batch.meta_inline != 0;
    e->host.fused_appends += batch.fused_appends;
    if (batch.fused_appends != 0 && pd_log_enabled(PD_LOG_DEBUG))
        pd_log(PD_LOG_DEBUG, "engine: %u APPENDs fused into their DECODEs' launch", batch.fused_appends);
    if (e->decode_in_pass) {
        e->last_batch_ns = spent;
        e->last_decode_pass = e->pass;
        t->decode_batches++;
        for (uint32_t c = lo; c < hi; c++)
            if (e->clients[c].rules.decode_taken)
                t->decode_clients++;
        for (uint32_t i = 0; i < n; i++)
            if (e->out[i].op->opcode == PAGED_OP_DECODE)
                t->decode_requests++;
    }
    e->host.deferred += batch.ticket != 0;
    if (batch.early) {
        t->early_batches++;
        for (uint32_t c = lo; c < hi; c++)
            e->clients[c].c->early_inflight = 1;
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct pd_batch_op *bop = &e->out[i];
        e->items[bop->user].status = bop->status;
        if (bop->status == PAGED_E_TIMEOUT && (bop->op->flags & PCORE_SQE_WAIT))
            e->items[bop->user].cqe.err_field = PCORE_FIELD_WAIT;   /* the backend's watchdog */
        if (bop->op->opcode == PAGED_OP_APPEND)
            t->append_requests++;
    }
    /* The host side of PCORE_SQE_SIGNAL (the backend writes the words of its own arenas), in
     * ring order: two requests may name one word. */
    for (uint32_t i = 0; i < e->nitems; i++) {
        const struct eng_item *it = &e->items[i];
        if (it->client < lo || it->client >= hi)
            continue;
        struct pd_channel *ch = e->clients[it->client].c->ch;
        if (it->status == PAGED_OK && (it->op.flags & PCORE_SQE_SIGNAL) && pv_backend_op(it->op.opcode)
            && ch->data == NULL)
            __atomic_store_n((uint32_t *) (ch->arena + it->op.signal_off), it->op.signal_value, __ATOMIC_RELEASE);
    }
    for (uint32_t l = 0; l < batch.nlaunches; l++) {
        const struct pd_launch *la = &e->launches[l];
        if (!la->merged)
            continue;
        if (e->out[la->first].op->opcode == PAGED_OP_APPEND) {
            t->merged_append_launches++;
            t->merged_append_requests += la->count;
            log_merged_launch(e, la, t->merged_append_launches);
        } else {
            t->merged_decode_launches++;
            t->merged_decode_requests += la->count;
            log_merged_launch(e, la, t->merged_decode_launches);
        }
    }
    return batch.ticket;
}

/* Posts the completions of client record r, in its ring order (pass() wakes it afterwards).
 * Returns the number posted. */
static uint32_t complete_client(struct pd_engine *e, struct eng_client *r, uint64_t t1)
{
    struct pd_conn *c = r->c;
    struct pd_channel *ch = c->ch;
    uint32_t k = 0;
    for (uint32_t j = r->first; j != NONE; j = e->items[j].next) {
        struct eng_item *it = &e->items[j];
        struct pcore_cqe *cqe = &it->cqe;
        int status = it->status;
        if (status >= 0 && pv_backend_op(it->op.opcode))
            cqe->count = it->op.count;
        cqe->status = status;
        cqe->value = t1 - r->t0;
        c->requests++;
        if (status < 0) {
            c->errors++;
            if (pd_log_enabled(PD_LOG_DEBUG)) {
                const char *opname = pcore_op_name(cqe->opcode), *field = pcore_field_name(cqe->err_field);
                pd_clog(c, PD_LOG_DEBUG, "request tag %llu %s: %s (%s[%u])",
                        (unsigned long long) cqe->tag, opname != NULL ? opname : "unknown opcode",
                        paged_strerror(status), field != NULL ? field : "?", cqe->err_index);
            }
        }
        pd_stats_record(e->env->stats, cqe->opcode, status, it->op.tokens, it->op.kv_bytes, t1 - r->t0);
        pv_op_free(&it->op);
        void *slot = r->corrupt ? NULL : pcore_ring_prod_slot(&ch->cq, k);
        if (slot != NULL) {
            memcpy(slot, cqe, sizeof *cqe);
            k++;
        } else
            r->corrupt = 1;
    }
    if (k != 0 && pcore_ring_prod_publish(&ch->cq, k) < 0)
        r->corrupt = 1;
    r->posted = k;
    return k;
}

/*
 * Runs one pass: over every ready client, or over only (gathering nobody else) when it is not
 * NULL. Returns how many requests completed, or were taken when none could complete.
 */
static unsigned pass(struct pd_engine *e, struct pd_conn *only, unsigned budget)
{
    pd_backend *b = e->env->backend;
    const struct pd_backend_ops *ops = b->ops;
    /* With deferred batches, pd_eng_retire_deferred's done() looks at the device itself: one event
     * query per pass instead of two (each costs 1.3-1.6 us on an H100 host). */
    if (e->ndef != 0)
        e->inflight = 1;
    else if (ops->tick != NULL)
        e->inflight = ops->tick(b);
    kill_late(e);   /* the watchdog may have found one while nothing else happened */
    unsigned retired = pd_eng_retire_deferred(e, 0);
    /* Deferred batches fill the backend's queue: a batch made now would wait in the backend
     * for the oldest to finish, and that one's withheld completions would be posted only
     * after it. Take nothing until there is room; the requests wait in their rings, and the
     * clients posted meanwhile join the same pass. */
    if (only == NULL && e->ndef != 0 && ops->room != NULL && !ops->room(b))
        return retired;
    e->nitems = 0;
    e->nclients = 0;
    e->decode_in_pass = 0;
    e->flush_evictions = 0;
    /* Numbered before it takes anything, so a client's marks say which pass saw it. */
    e->pass++;
    e->pass_collect_ns = 0;
    uint32_t took = 0;
    /* A client whose completions are withheld waits for them before it joins a pass. */
    if (only != NULL) {
        if (takeable(only))
            took = collect(e, only, budget);
    } else {
        /* Every ring's tail and next request on their way at once: the clients wrote them
         * from other CPUs, and one miss after another would cost each its own trip. */
        for (struct pd_conn *c = eng_conns(e); c != NULL; c = c->next)
            if (takeable(c))
                pcore_ring_cons_prefetch(&c->ch->sq);
        for (struct pd_conn *c = eng_conns(e); c != NULL; c = c->next)
            if (takeable(c))
                took += collect(e, c, budget);
    }
    if (e->nclients == 0)
        return retired;
    if (only == NULL) {
        uint64_t g0 = e->decode_in_pass ? pcore_now_ns() : 0;
        took += gather(e, budget);
        if (g0 != 0)
            e->total.gather_ns += pcore_now_ns() - g0;
    }
    if (e->nitems != 0 && e->woke_at != 0) {
        uint64_t gap = pcore_now_ns() - e->woke_at;
        if (gap < 10000000u) {          /* not an idle spell */
            e->host.between_ns += gap;
            e->host.betweens++;
        }
        e->woke_at = 0;
    }
    uint64_t batches = e->total.batches;
    /* Batches that finished while this pass took its requests: post them before this one
     * queues, so that their clients come back sooner; but wake those that sleep only once
     * it is queued (each wake-up is a system call of a few microseconds, and the device may
     * be idle until the launch), unless the batch may make the backend wait for the device:
     * a sleeping client may be what writes the word it waits for. */
    const int may_defer = only == NULL && e->defer_enabled && !pass_has_deps(e);
    retired += pd_eng_retire_deferred(e, may_defer);
    const uint32_t half = may_defer ? split_point(e) : e->nclients;
    uint64_t ticket[2] = { run_batch(e, may_defer, 0, half), 0 };
    if (half < e->nclients) {
        ticket[1] = run_batch(e, may_defer, half, e->nclients);
        e->host.splits++;
        pd_log(PD_LOG_DEBUG, "engine: pass split in two batches on an idle device: %u and %u clients", half,
               e->nclients - half);
    }
    pd_eng_wake_retired(e);
    uint64_t t1 = pcore_now_ns();
    unsigned done = 0;
    for (uint32_t i = 0; i < e->nclients; i++) {
        struct eng_client *r = &e->clients[i];
        const uint64_t t = ticket[i >= half];
        if (t != 0 && r->backend_ops && !r->corrupt)
            pd_eng_defer_client(e, r, t);        /* run_batch made room in def */
        else
            done += complete_client(e, r, t1);
    }
    /* Every completion is visible before the first wake-up's system call: clients that spin
     * go on at once instead of after the sleepers' wake-ups. */
    uint64_t w0 = pcore_now_ns();
    uint64_t wakes = 0;
    for (uint32_t i = 0; i < e->nclients; i++)
        if (e->clients[i].posted != 0)
            wakes += pd_eng_wake_client(e, e->clients[i].c);
    if (e->total.batches != batches) {      /* counted per batch: passes without backend work left out */
        e->host.collect_ns += e->pass_collect_ns;
        e->woke_at = pcore_now_ns();
        e->host.wakes += wakes;
        e->host.wake_ns += e->woke_at - w0;
    }
    e->nitems = 0;
    /* Only now may a connection go away: nothing of the pass refers to it any more. */
    if (e->flush_evictions && e->env->flush_evictions != NULL)
        e->env->flush_evictions(e->env->ctx);
    for (uint32_t i = 0; i < e->nclients; i++) {
        struct pd_conn *c = e->clients[i].c;
        if (e->clients[i].corrupt && c->state != PD_CONN_DEAD)
            pd_eng_kill_corrupt(e, c);
    }
    e->nclients = 0;
    kill_late(e);
    done += retired;
    return done != 0 ? done : took;
}

/* Runs one pass over every ready client; see engine.h. */
unsigned pd_engine_pass(struct pd_engine *e, unsigned budget)
{
    return pass(e, NULL, budget);
}

/* Runs one pass over c alone; see engine.h. */
unsigned pd_engine_drain(struct pd_engine *e, struct pd_conn *c, unsigned budget)
{
    return pass(e, c, budget);
}

/* Waits for the device work of every early-completed batch, where c (or NULL: anyone) had
 * requests in one; see engine.h. */
void pd_engine_settle(struct pd_engine *e, struct pd_conn *c)
{
    if (e == NULL || (c != NULL && !c->early_inflight))
        return;
    pd_backend *b = e->env->backend;
    if (b->ops->settle != NULL)
        b->ops->settle(b);
    for (struct pd_conn *x = eng_conns(e); x != NULL; x = x->next)
        x->early_inflight = 0;
}

/* Returns whether the backend had work queued when the engine last looked; see engine.h. */
int pd_engine_inflight(const struct pd_engine *e)
{
    return e->inflight;
}

/* Returns whether c has a submission it could run now. */
int pd_engine_pending(struct pd_conn *c)
{
    if (c->ch == NULL || c->state != PD_CONN_READY || c->deferred)
        return 0;
    int n = pcore_ring_cons_available(&c->ch->sq, 1);
    if (n == 0)
        return 0;
    if (n < 0)
        return 1; /* corrupt: the next pass finds it and disconnects the client */
    if (c->dep_since_ns != 0)
        return 0; /* its first request waits for a host word: next_timeout looks again soon */
    if (c->remote_wait)
        return 0; /* its first request waits for the peers: pd_engine_remote_done ends that */
    return pcore_ring_prod_space(&c->ch->cq, 1) != 0;
}

/* Returns whether completions are withheld until the device finishes their batches; see engine.h. */
int pd_engine_withheld(const struct pd_engine *e)
{
    return e->ndef != 0;
}

/* Completes c's queued submissions with PAGED_E_SHUTDOWN, after its withheld completions;
 * returns nothing. */
void pd_engine_cancel(struct pd_engine *e, struct pd_conn *c)
{
    if (pd_engine_withheld(e)) {
        pd_engine_settle(e, NULL);
        pd_eng_retire_deferred(e, 0);
    }
    struct pd_channel *ch = c->ch;
    if (ch == NULL || c->state != PD_CONN_READY)
        return;
    for (unsigned i = 0; i < ch->hdr.sq_entries; i++) {
        if (pcore_ring_cons_available(&ch->sq, 1) <= 0 || pcore_ring_prod_space(&ch->cq, 1) <= 0)
            break;
        struct pcore_sqe sqe;
        if (pcore_ring_cons_pop(&ch->sq, &sqe) <= 0)
            break;
        struct pcore_cqe cqe = { .tag = sqe.tag, .status = PAGED_E_SHUTDOWN, .opcode = sqe.opcode };
        void *slot = pcore_ring_prod_slot(&ch->cq, 0);
        if (slot == NULL)
            break;
        memcpy(slot, &cqe, sizeof cqe);
        if (pcore_ring_prod_publish(&ch->cq, 1) < 0)
            break;
    }
    /* Wake it whether or not it says it sleeps, so that it looks at the socket. */
    uint64_t one = 1;
    if (write(ch->cq_notify, &one, sizeof one) < 0) {
        /* A full pipe already holds a wake-up. */
    }
}
