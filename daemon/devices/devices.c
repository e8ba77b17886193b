/* devices.c: a device set: one backend per device behind one backend table. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/devices/devices.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/util/heap.h"
#include "daemon/util/log.h"

/* How many of the set's deferred batches are remembered: more than the devices' queues hold. */
#define SET_TICKETS 1024u

/* The set's record of a pool's memory: its device and that device's record. */
struct pd_pool_mem {
    uint32_t device;
    pd_pool_mem *sub;
};

/* The set's record of a client's data arena. */
struct pd_arena {
    uint32_t device;
    pd_arena *sub;
};

/* One deferred batch of the set: each device's latest ticket up to and including it, and
 * which devices' tickets are its own. */
struct set_ticket {
    uint64_t id;
    uint64_t sub[PD_MAX_DEVICES];
    uint32_t own;                /* bit d: sub[d] was issued for this batch */
};

/* One device's part of a batch being split. */
struct set_part {
    struct pd_batch_op *ops;
    uint32_t *where;             /* [i]: the index in the whole batch of the part's op i */
    uint32_t nops;
    struct pd_launch *launches;
    uint32_t *launch_of;         /* [i]: the whole batch's launch of the part's launch i */
    uint32_t nlaunches;
};

/* The set. */
struct devset {
    struct pd_backend_ops ops;   /* the set's table: NULL where the devices' backends have none */
    pd_backend *sub[PD_MAX_DEVICES];
    uint32_t n;
    uint8_t reach[PD_MAX_DEVICES][PD_MAX_DEVICES]; /* [s][t]: s's kernels reach t's memory */
    struct set_ticket tickets[SET_TICKETS];
    uint64_t next_ticket;
    uint64_t last[PD_MAX_DEVICES];   /* each device's latest ticket */
    struct set_part part[PD_MAX_DEVICES];
    uint32_t cap_ops, cap_launches;  /* what each part's arrays hold */
    uint32_t *device_of;             /* [cap_launches]: the device of each launch of a batch */
};

/* Returns the set of b. */
static struct devset *set_of(pd_backend *b)
{
    return b->priv;
}

/* Makes device d's backend current (its enter) and returns it, logging a failure (the call
 * that follows then fails on its own). */
static pd_backend *use(struct devset *s, uint32_t d)
{
    pd_backend *sub = s->sub[d];
    if (sub->ops->enter != NULL) {
        char *cause = NULL;
        if (sub->ops->enter(sub, &cause) < 0) {
            pd_log(PD_LOG_ERROR, "device %u: %s", d, cause != NULL ? cause : "cannot be made current");
            free(cause);
        }
    }
    return sub;
}

/* Stores a cause for a device index out of range; returns PAGED_E_INVAL. */
static int no_device(const struct devset *s, uint32_t device, char **cause)
{
    if (asprintf(cause, "no device %u: this daemon serves %u (0 to %u)", device, s->n, s->n - 1) < 0)
        *cause = NULL;
    return PAGED_E_INVAL;
}

/* Creates a pool's memory on device; see backend.h. */
static int set_pool_create(pd_backend *b, uint32_t device, pk_cache *cache, pd_pool_mem **out, char **cause)
{
    struct devset *s = set_of(b);
    if (device >= s->n)
        return no_device(s, device, cause);
    pd_pool_mem *m = pd_calloc(1, sizeof *m);
    if (m == NULL) {
        *cause = strdup("out of memory");
        return PAGED_E_NOMEM;
    }
    pd_backend *sub = use(s, device);
    int rc = sub->ops->pool_create(sub, 0, cache, &m->sub, cause);
    if (rc < 0) {
        free(m);
        return rc;
    }
    m->device = device;
    *out = m;
    return PAGED_OK;
}

/* Frees a pool's memory on its device; see backend.h. */
static void set_pool_destroy(pd_backend *b, pd_pool_mem *m)
{
    if (m == NULL)
        return;
    pd_backend *sub = use(set_of(b), m->device);
    sub->ops->pool_destroy(sub, m->sub);
    free(m);
}

/* Exports a pool's memory from its device; see backend.h. */
static int set_pool_export(pd_backend *b, pd_pool_mem *m, int writable, struct pd_export *out, char **cause)
{
    pd_backend *sub = use(set_of(b), m->device);
    return sub->ops->pool_export(sub, m->sub, writable, out, cause);
}

/* Creates a client's data arena on device; see backend.h. */
static int set_arena_create(pd_backend *b, uint32_t device, uint64_t size, pd_arena **out, struct pd_export *exp,
                            char **cause)
{
    struct devset *s = set_of(b);
    if (device >= s->n)
        return no_device(s, device, cause);
    pd_arena *a = pd_calloc(1, sizeof *a);
    if (a == NULL) {
        *cause = strdup("out of memory");
        return PAGED_E_NOMEM;
    }
    pd_backend *sub = use(s, device);
    int rc = sub->ops->arena_create(sub, 0, size, &a->sub, exp, cause);
    if (rc < 0) {
        free(a);
        return rc;
    }
    a->device = device;
    *out = a;
    return PAGED_OK;
}

/* Frees a client's data arena on its device; see backend.h. */
static void set_arena_destroy(pd_backend *b, pd_arena *a, void *map, uint64_t map_size)
{
    struct devset *s = set_of(b);
    pd_backend *sub = use(s, a != NULL ? a->device : 0);
    sub->ops->arena_destroy(sub, a != NULL ? a->sub : NULL, map, map_size);
    free(a);
}

/* Registers a client's host arena with its data arena's device; see backend.h. */
static int set_host_register(pd_backend *b, pd_arena *a, void *host, uint64_t size, char **cause)
{
    pd_backend *sub = use(set_of(b), a->device);
    return sub->ops->host_register(sub, a->sub, host, size, cause);
}

/* Looks at a word of a client's data arena on its device; see backend.h. */
static int set_probe(pd_backend *b, pd_arena *a, uint64_t off, uint32_t value, int fresh)
{
    pd_backend *sub = use(set_of(b), a->device);
    return sub->ops->probe(sub, a->sub, off, value, fresh);
}

/* Returns the device of launch l of batch (its first op's pool). */
static uint32_t launch_device(const struct pd_batch *batch, const struct pd_launch *l)
{
    return batch->ops[l->first].mem->device;
}

/* Returns whether launch li of batch is a COPY into a pool of another device (a COPY is a
 * launch of its own: only DECODEs and APPENDs merge). */
static int crosses(const struct pd_batch *batch, uint32_t li)
{
    const struct pd_batch_op *op = &batch->ops[batch->launches[li].first];
    return op->dst_mem != NULL && op->dst_mem->device != op->mem->device;
}

/* Makes *p hold n elements of size bytes (kept as they were when it cannot). Returns 0, or -1
 * out of memory. */
static int grow(void *p, uint32_t n, size_t size)
{
    void *q = realloc(*(void **) p, (size_t) n * size);
    if (q == NULL)
        return -1;
    *(void **) p = q;
    return 0;
}

/* Makes each part's arrays hold nops ops and nlaunches launches. Returns 0, or -1 out of
 * memory. */
static int reserve(struct devset *s, uint32_t nops, uint32_t nlaunches)
{
    for (uint32_t d = 0; nops > s->cap_ops && d < s->n; d++)
        if (grow(&s->part[d].ops, nops, sizeof *s->part[d].ops) < 0
            || grow(&s->part[d].where, nops, sizeof *s->part[d].where) < 0)
            return -1;
    if (nops > s->cap_ops)
        s->cap_ops = nops;
    for (uint32_t d = 0; nlaunches > s->cap_launches && d < s->n; d++)
        if (grow(&s->part[d].launches, nlaunches, sizeof *s->part[d].launches) < 0
            || grow(&s->part[d].launch_of, nlaunches, sizeof *s->part[d].launch_of) < 0)
            return -1;
    if (nlaunches > s->cap_launches) {
        if (grow(&s->device_of, nlaunches, sizeof *s->device_of) < 0)
            return -1;
        s->cap_launches = nlaunches;
    }
    return 0;
}

/* Appends launch li of batch to device d's part, its ops with the devices' own records. */
static void add_launch(struct devset *s, uint32_t d, const struct pd_batch *batch, uint32_t li)
{
    struct set_part *p = &s->part[d];
    const struct pd_launch *l = &batch->launches[li];
    p->launch_of[p->nlaunches] = li;
    p->launches[p->nlaunches++] = (struct pd_launch) { .first = p->nops, .count = l->count };
    for (uint32_t i = l->first; i < l->first + l->count; i++) {
        struct pd_batch_op *op = &p->ops[p->nops];
        *op = batch->ops[i];
        op->mem = batch->ops[i].mem->sub;
        op->dst_mem = batch->ops[i].dst_mem != NULL ? batch->ops[i].dst_mem->sub : NULL;
        op->arenas.data = batch->ops[i].arenas.data != NULL ? batch->ops[i].arenas.data->sub : NULL;
        p->where[p->nops++] = i;
    }
}

/* Runs device d's part of batch (may_defer as given) and folds its results into batch;
 * returns the device's ticket (0: not deferred). */
static uint64_t run_part(struct devset *s, uint32_t d, struct pd_batch *batch, int may_defer)
{
    struct set_part *p = &s->part[d];
    struct pd_batch part = {
        .ops = p->ops, .nops = p->nops, .launches = p->launches, .nlaunches = p->nlaunches,
        .dep_timeout_ns = batch->dep_timeout_ns, .may_defer = may_defer,
    };
    pd_backend *sub = use(s, d);
    sub->ops->run_batch(sub, &part);
    for (uint32_t i = 0; i < p->nops; i++)
        batch->ops[p->where[i]].status = p->ops[i].status;
    for (uint32_t i = 0; i < p->nlaunches; i++)
        batch->launches[p->launch_of[i]].merged = p->launches[i].merged;
    batch->wait_ns += part.wait_ns;
    batch->stage_ns += part.stage_ns;
    batch->upload_ns += part.upload_ns;
    batch->queue_ns += part.queue_ns;
    batch->early |= part.early;
    batch->upload_skipped &= part.upload_skipped;
    batch->meta_inline |= part.meta_inline;
    batch->fused_appends += part.fused_appends;
    p->nops = 0;
    p->nlaunches = 0;
    return part.ticket;
}

/* Waits for everything queued on every device. */
static void settle_all(struct devset *s)
{
    for (uint32_t d = 0; d < s->n; d++)
        if (s->sub[d]->ops->settle != NULL) {
            pd_backend *sub = use(s, d);
            sub->ops->settle(sub);
        }
}

/* Runs a batch that holds a COPY into another device's pool: in launch order, a part at a
 * time (consecutive launches of one device), every device settled before and after each
 * such COPY; nothing deferred. */
static void run_in_order(struct devset *s, struct pd_batch *batch)
{
    uint32_t li = 0;
    while (li < batch->nlaunches) {
        const uint32_t d = s->device_of[li];
        if (crosses(batch, li)) {
            struct pd_batch_op *op = &batch->ops[batch->launches[li].first];
            if (!s->reach[d][op->dst_mem->device]) {
                op->status = PAGED_E_NOTSUP;
                li++;
                continue;
            }
            settle_all(s);
            add_launch(s, d, batch, li++);
            (void) run_part(s, d, batch, 0);
            settle_all(s);
            continue;
        }
        while (li < batch->nlaunches && s->device_of[li] == d && !crosses(batch, li))
            add_launch(s, d, batch, li++);
        (void) run_part(s, d, batch, 0);
    }
    settle_all(s);
    batch->early = 0;
}

/* Runs a batch: one part per device; see backend.h and devices.h. */
static void set_run_batch(pd_backend *b, struct pd_batch *batch)
{
    struct devset *s = set_of(b);
    batch->wait_ns = batch->stage_ns = batch->upload_ns = batch->queue_ns = 0;
    batch->early = 0;
    batch->upload_skipped = 1;
    batch->meta_inline = 0;
    batch->fused_appends = 0;
    batch->ticket = 0;
    if (reserve(s, batch->nops, batch->nlaunches) < 0) {
        pd_log(PD_LOG_ERROR, "device set: out of memory for a batch of %u ops", batch->nops);
        for (uint32_t i = 0; i < batch->nops; i++)
            batch->ops[i].status = PAGED_E_NOMEM;
        return;
    }
    int cross = 0;
    uint32_t used = 0;       /* bit d: device d has launches */
    for (uint32_t li = 0; li < batch->nlaunches; li++) {
        s->device_of[li] = launch_device(batch, &batch->launches[li]);
        used |= 1u << s->device_of[li];
        cross |= crosses(batch, li);
    }
    if (cross) {
        run_in_order(s, batch);
        return;
    }
    for (uint32_t li = 0; li < batch->nlaunches; li++)
        add_launch(s, s->device_of[li], batch, li);
    uint32_t own = 0;
    for (uint32_t d = 0; d < s->n; d++)
        if (used & (1u << d)) {
            const uint64_t ticket = run_part(s, d, batch, batch->may_defer);
            if (ticket != 0) {
                s->last[d] = ticket;
                own |= 1u << d;
            }
        }
    if (own == 0)
        return;
    struct set_ticket *t = &s->tickets[s->next_ticket % SET_TICKETS];
    t->id = s->next_ticket;
    t->own = own;
    memcpy(t->sub, s->last, sizeof t->sub);
    batch->ticket = s->next_ticket++;
}

/* Waits for everything queued on every device; see backend.h. */
static void set_settle(pd_backend *b)
{
    settle_all(set_of(b));
}

/* Ticks every device; returns whether any has work queued; see backend.h. */
static int set_tick(pd_backend *b)
{
    struct devset *s = set_of(b);
    int busy = 0;
    for (uint32_t d = 0; d < s->n; d++)
        if (s->sub[d]->ops->tick != NULL) {
            pd_backend *sub = use(s, d);
            busy |= sub->ops->tick(sub);
        }
    return busy;
}

/* Says whether the set's deferred batch ticket (and every earlier one) is done: each device's
 * latest ticket up to it. A device's fault fails only the batch whose own part it lost (an
 * earlier batch's ticket of a device reported it then); see backend.h. */
static int set_done(pd_backend *b, uint64_t ticket)
{
    struct devset *s = set_of(b);
    const struct set_ticket *t = &s->tickets[ticket % SET_TICKETS];
    if (t->id != ticket)
        return 1;            /* long retired: its slot was reused */
    int done = 1;
    for (uint32_t d = 0; d < s->n; d++) {
        if (t->sub[d] == 0)
            continue;
        pd_backend *sub = use(s, d);
        int r = sub->ops->done(sub, t->sub[d]);
        if (r < 0 && (t->own & (1u << d)))
            return r;
        done &= r != 0;
    }
    return done;
}

/* Returns whether every device could queue another batch now; see backend.h. */
static int set_room(pd_backend *b)
{
    struct devset *s = set_of(b);
    for (uint32_t d = 0; d < s->n; d++)
        if (s->sub[d]->ops->room != NULL && !s->sub[d]->ops->room(s->sub[d]))
            return 0;
    return 1;
}

/* Logs every device's own measurements; see backend.h. */
static void set_report(pd_backend *b, enum pd_log_level level)
{
    struct devset *s = set_of(b);
    for (uint32_t d = 0; d < s->n; d++)
        if (s->sub[d]->ops->report != NULL) {
            pd_backend *sub = use(s, d);
            sub->ops->report(sub, level);
        }
}

/* Allocates host memory through the first device; see backend.h. */
static int set_host_alloc(pd_backend *b, uint64_t size, void **out, char **cause)
{
    pd_backend *sub = use(set_of(b), 0);
    return sub->ops->host_alloc(sub, size, out, cause);
}

/* Frees what set_host_alloc gave; see backend.h. */
static void set_host_free(pd_backend *b, void *p, uint64_t size)
{
    pd_backend *sub = use(set_of(b), 0);
    sub->ops->host_free(sub, p, size);
}

/* Copies blocks of a pool and units on the pool's device; see backend.h. */
static int set_units_copy(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, int to_units, uint32_t n,
                          const int32_t *blocks, unsigned char *const *units, char **cause)
{
    pd_backend *sub = use(set_of(b), mem->device);
    return sub->ops->units_copy(sub, mem->sub, cache, to_units, n, blocks, units, cause);
}

/* Swaps blocks of a pool with units on the pool's device; see backend.h. */
static int set_units_swap(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, uint32_t n, const int32_t *blocks,
                          unsigned char *const *save, unsigned char *const *load, char **cause)
{
    pd_backend *sub = use(set_of(b), mem->device);
    return sub->ops->units_swap(sub, mem->sub, cache, n, blocks, save, load, cause);
}

/* Allocates the peers' staging memory on the first device; see backend.h. */
static int set_dev_alloc(pd_backend *b, uint64_t size, void **out, char **cause)
{
    pd_backend *sub = use(set_of(b), 0);
    return sub->ops->dev_alloc(sub, size, out, cause);
}

/* Frees what set_dev_alloc gave; see backend.h. */
static void set_dev_free(pd_backend *b, void *p, uint64_t size)
{
    pd_backend *sub = use(set_of(b), 0);
    sub->ops->dev_free(sub, p, size);
}

/* Sums units of the first device's staging memory there; see backend.h. */
static int set_units_sums(pd_backend *b, const void *units, uint32_t n, uint64_t unit_bytes, uint64_t *sums,
                          char **cause)
{
    pd_backend *sub = use(set_of(b), 0);
    return sub->ops->units_sums(sub, units, n, unit_bytes, sums, cause);
}

/* Moves and sums units on the pool's device; see backend.h. */
static int set_units_move(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, int to_units, uint32_t n,
                          const int32_t *blocks, unsigned char *units, uint64_t *sums, char **cause)
{
    pd_backend *sub = use(set_of(b), mem->device);
    return sub->ops->units_move(sub, mem->sub, cache, to_units, n, blocks, units, sums, cause);
}

/* Describes device device of the set; see backend.h. */
static void set_info(pd_backend *b, uint32_t device, struct pd_backend_info *out)
{
    struct devset *s = set_of(b);
    pd_backend *sub = use(s, device < s->n ? device : 0);
    sub->ops->info(sub, 0, out);
}

/* Makes the first device current; see backend.h. */
static int set_enter(pd_backend *b, char **cause)
{
    pd_backend *sub = set_of(b)->sub[0];
    return sub->ops->enter(sub, cause);
}

/* Frees the set and its devices' backends; see backend.h. */
static void set_destroy(pd_backend *b)
{
    struct devset *s = set_of(b);
    for (uint32_t d = 0; d < s->n; d++) {
        pd_backend *sub = use(s, d);
        sub->ops->destroy(sub);
        free(s->part[d].ops);
        free(s->part[d].where);
        free(s->part[d].launches);
        free(s->part[d].launch_of);
    }
    free(s->device_of);
    free(s);
    free(b);
}

/* A device's late_fn: passes a late waited word on to the engine's (ctx: the set's backend). */
static void set_late(void *ctx, uint32_t holder, uint64_t off, uint32_t value)
{
    pd_backend *b = ctx;
    if (b->late_fn != NULL)
        b->late_fn(b->late_ctx, holder, off, value);
}

/* The set's table before open leaves out what its devices' backends lack. */
static const struct pd_backend_ops set_ops = {
    .name = NULL,   /* the devices' */
    .pool_create = set_pool_create,
    .pool_destroy = set_pool_destroy,
    .pool_export = set_pool_export,
    .arena_create = set_arena_create,
    .arena_destroy = set_arena_destroy,
    .host_register = set_host_register,
    .probe = set_probe,
    .run_batch = set_run_batch,
    .settle = set_settle,
    .tick = set_tick,
    .done = set_done,
    .room = set_room,
    .report = set_report,
    .host_alloc = set_host_alloc,
    .host_free = set_host_free,
    .units_copy = set_units_copy,
    .units_swap = set_units_swap,
    .dev_alloc = set_dev_alloc,
    .dev_free = set_dev_free,
    .units_sums = set_units_sums,
    .units_move = set_units_move,
    .info = set_info,
    .enter = set_enter,
    .reach = NULL,
    .destroy = set_destroy,
};

/* Copies set_ops into s->ops, leaving out each op the devices' backend (sub) lacks. */
static void fit_ops(struct devset *s, const struct pd_backend_ops *sub)
{
    s->ops = set_ops;
    s->ops.name = sub->name;
#define KEEP_IF(f) do { if (sub->f == NULL) s->ops.f = NULL; } while (0)
    KEEP_IF(arena_create);
    KEEP_IF(arena_destroy);
    KEEP_IF(host_register);
    KEEP_IF(probe);
    KEEP_IF(settle);
    KEEP_IF(tick);
    KEEP_IF(done);
    KEEP_IF(room);
    KEEP_IF(report);
    KEEP_IF(host_alloc);
    KEEP_IF(host_free);
    KEEP_IF(units_copy);
    KEEP_IF(units_swap);
    KEEP_IF(dev_alloc);
    KEEP_IF(dev_free);
    KEEP_IF(units_sums);
    KEEP_IF(units_move);
    KEEP_IF(enter);
#undef KEEP_IF
}

/* Lets every device reach every other's memory where it can, recording which can. */
static void reach_all(struct devset *s)
{
    for (uint32_t a = 0; a < s->n; a++)
        for (uint32_t t = 0; t < s->n; t++) {
            if (a == t || s->sub[a]->ops->reach == NULL) {
                s->reach[a][t] = 1;
                continue;
            }
            char *cause = NULL;
            (void) use(s, a);
            s->reach[a][t] = s->sub[a]->ops->reach(s->sub[a], s->sub[t], &cause) == PAGED_OK;
            if (!s->reach[a][t])
                pd_log(PD_LOG_WARNING, "device %u cannot reach device %u's memory: a COPY between their pools "
                       "fails (%s)", a, t, cause != NULL ? cause : "no peer access");
            free(cause);
        }
}

/* Makes the set; see devices.h. */
pd_backend *pd_devices_open(pd_backend *const *subs, uint32_t n, char **cause)
{
    pd_backend *b = pd_calloc(1, sizeof *b);
    struct devset *s = pd_calloc(1, sizeof *s);
    if (b == NULL || s == NULL || n < 2 || n > PD_MAX_DEVICES) {
        if (asprintf(cause, n < 2 || n > PD_MAX_DEVICES ? "a device set of %u devices (2 to %u)" : "out of memory",
                     n, PD_MAX_DEVICES) < 0)
            *cause = NULL;
        free(b);
        free(s);
        for (uint32_t d = 0; d < n; d++)
            pd_backend_close(subs[d]);
        return NULL;
    }
    s->n = n;
    s->next_ticket = 1;
    for (uint32_t d = 0; d < n; d++) {
        s->sub[d] = subs[d];
        subs[d]->late_fn = set_late;
        subs[d]->late_ctx = b;
        b->runs_behind |= subs[d]->runs_behind;
    }
    fit_ops(s, subs[0]->ops);
    b->ops = &s->ops;
    b->priv = s;
    b->ndevices = n;
    reach_all(s);
    (void) use(s, 0);
    pd_log(PD_LOG_INFO, "serving %u devices of the %s backend", n, subs[0]->ops->name);
    return b;
}
