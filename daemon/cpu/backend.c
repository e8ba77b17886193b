/* backend.c: the cpu backend: pools in sealed memfds, kernels on a thread pool. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon/cpu/cpu.h"
#include "daemon/util/knobs.h"
#include "daemon/util/heap.h"
#include "daemon/util/log.h"
#include "daemon/engine/merged.h"
#include "daemon/cpu/workers.h"
#include "lib/core/clock.h"
#include "lib/core/shm.h"

/* Deferred batches whose emulated completion (PAGEDD_CPU_DONE_US) may be pending at once;
 * past it a batch is not deferred. */
#define CPU_PENDING_MAX 256u
/* Emulated batches reported queued at once, like the cuda backend's PD_CU_DEPTH. */
#define CPU_DEPTH 2u

struct cpu_backend {
    pd_workers *workers;
    uint64_t tickets;             /* deferred batches so far (their work is done when run_batch returns) */
    /* PAGEDD_CPU_DONE_US=N (for tests): a deferred batch is reported done only N us after it
     * ran, and at most CPU_DEPTH are reported queued at once, as a GPU's batches are, so
     * that the engine's withholding and its room rule run without a GPU. */
    uint64_t done_delay_ns;       /* 0: done when run_batch returns */
    int refuse_merged;            /* PAGEDD_REFUSE_MERGED (backend.h): a test aid */
    uint64_t retired;             /* the last ticket reported done */
    uint64_t due[CPU_PENDING_MAX]; /* ticket % CPU_PENDING_MAX: when it is reported done */
    /* A merged DECODE's arrays, grown as needed and reused. */
    const void **q_seq;
    void **out_seq;
    int32_t *lens;
    int32_t *seq_layer;
    size_t cap_seqs;
    int32_t *tables;
    size_t cap_tables;
    /* A merged APPEND's arrays, grown as needed and reused. */
    const void **k_seg, **v_seg;
    int32_t *seg_layer;
    int32_t *seg_indptr;
    size_t cap_segs;              /* of k_seg, v_seg and seg_layer; seg_indptr holds one more */
    int32_t *slots;
    size_t cap_slots;
};

struct pd_pool_mem {
    int fd;                 /* the memfd: read-write, kept to export */
    void *base;             /* the daemon's read-write mapping */
    uint64_t bytes;
};

/* One job for the workers: which kernel and its arguments. */
struct cpu_job {
    int op;                 /* enum paged_op */
    union {
        pk_append_args append;
        pk_decode_args decode;
        pk_prefill_args prefill;
        pk_copy_args copy;
    } u;
};

/* Runs items [begin, end) of a job on a worker; returns nothing. */
static void cpu_work(const void *arg, size_t begin, size_t end)
{
    const struct cpu_job *j = arg;
    switch (j->op) {
    case PAGED_OP_APPEND: pk_cpu_append_run(&j->u.append, begin, end); break;
    case PAGED_OP_DECODE: pk_cpu_decode_run(&j->u.decode, begin, end); break;
    case PAGED_OP_PREFILL: pk_cpu_prefill_run(&j->u.prefill, begin, end); break;
    case PAGED_OP_COPY: pk_cpu_copy_run(&j->u.copy, begin, end); break;
    default: break;
    }
}

/* Allocates a pool in a new sealed memfd, mapped read-write; returns PAGED_OK or an error. */
static int cpu_pool_create(pd_backend *b, uint32_t device, pk_cache *cache, pd_pool_mem **out, char **cause)
{
    (void) b;
    (void) device;   /* one device: 0 */
    uint64_t bytes = pk_cache_bytes(cache);
    pd_pool_mem *m = pd_calloc(1, sizeof *m);
    if (m == NULL) {
        *cause = strdup("out of memory");
        return PAGED_E_NOMEM;
    }
    m->bytes = bytes;
    m->fd = pcore_shm_create("paged-pool", bytes);
    if (m->fd < 0) {
        int rc = m->fd;
        free(m);
        if (asprintf(cause, "cannot create %llu bytes of shared memory: %s",
                     (unsigned long long) bytes, paged_strerror(rc)) < 0)
            *cause = NULL;
        return rc;
    }
    /* Only the daemon's uid may open the object again through /proc, so a read-only
     * descriptor cannot be turned into a writable one by another user. */
    (void) fchmod(m->fd, 0600);
    int rc = pcore_shm_map(m->fd, bytes, 1, &m->base);
    if (rc < 0) {
        close(m->fd);
        free(m);
        if (asprintf(cause, "cannot map %llu bytes of shared memory: %s",
                     (unsigned long long) bytes, paged_strerror(rc)) < 0)
            *cause = NULL;
        return rc;
    }
    cache->base = m->base;
    *out = m;
    return PAGED_OK;
}

/* Frees a pool's memory; returns nothing. */
static void cpu_pool_destroy(pd_backend *b, pd_pool_mem *m)
{
    (void) b;
    if (m == NULL)
        return;
    pcore_shm_unmap(m->base, m->bytes);
    close(m->fd);
    free(m);
}

/* Exports a pool: the memfd itself for writers, a read-only reopen for readers. */
static int cpu_pool_export(pd_backend *b, pd_pool_mem *m, int writable, struct pd_export *out,
                           char **cause)
{
    (void) b;
    memset(out, 0, sizeof *out);
    out->mem_kind = PCORE_MEM_MEMFD;
    out->alloc_bytes = m->bytes;
    out->fd = writable ? fcntl(m->fd, F_DUPFD_CLOEXEC, 0) : pcore_shm_reopen_ro(m->fd);
    if (out->fd < 0) {
        int rc = writable ? PAGED_E_SYSTEM : out->fd;
        if (asprintf(cause, "cannot export pool memory: %s", paged_strerror(rc)) < 0)
            *cause = NULL;
        out->fd = -1;
        return rc;
    }
    return PAGED_OK;
}

/* Runs one validated op on the workers, to its end (dst: a COPY's destination pool, or
 * NULL); returns PAGED_OK or the kernel's error. */
static int cpu_run(pd_backend *b, const pk_cache *cache, pd_pool_mem *m, const pk_cache *dst,
                   const struct pd_arenas *ar, const struct pv_op *op)
{
    struct cpu_backend *cb = b->priv;
    (void) m;
    /* On this backend the data arena is the host arena. */
    unsigned char *data = ar->host;
    struct cpu_job j;
    memset(&j, 0, sizeof j);
    j.op = op->opcode;
    pk_attn_opts opts = { op->sm_scale, op->soft_cap, op->window, op->alibi };
    int rc;
    size_t items;
    switch (op->opcode) {
    case PAGED_OP_APPEND:
        j.u.append = (pk_append_args) {
            .cache = *cache, .layer_begin = op->layer_begin, .num_layers = op->num_layers,
            .num_tokens = (int32_t) op->num_tokens, .src_dtype = op->dtype,
            .k = data + op->k_off, .v = data + op->v_off, .slot_mapping = op->slots,
        };
        if ((rc = pk_cpu_append_check(&j.u.append)) < 0)
            return rc;
        items = pk_cpu_append_items(&j.u.append);
        break;
    case PAGED_OP_DECODE:
        j.u.decode = (pk_decode_args) {
            .cache = *cache, .layer = op->layer_begin, .num_seqs = (int32_t) op->count,
            .num_q_heads = (int32_t) op->num_q_heads, .q_dtype = op->dtype,
            .q = data + op->q_off, .out = data + op->out_off,
            .block_tables = op->block_tables, .bt_stride = (int32_t) op->bt_stride,
            .seq_lens = op->seq_lens, .opts = opts,
        };
        if ((rc = pk_cpu_decode_check(&j.u.decode)) < 0)
            return rc;
        items = pk_cpu_decode_items(&j.u.decode);
        break;
    case PAGED_OP_PREFILL:
        j.u.prefill = (pk_prefill_args) {
            .cache = *cache, .layer = op->layer_begin, .num_seqs = (int32_t) op->count,
            .num_q_heads = (int32_t) op->num_q_heads, .q_dtype = op->dtype, .causal = 1,
            .total_q = op->total_q, .max_qo_len = op->max_qo_len,
            .q = data + op->q_off, .out = data + op->out_off, .qo_indptr = op->qo_indptr,
            .block_tables = op->block_tables, .bt_stride = (int32_t) op->bt_stride,
            .seq_lens = op->seq_lens, .opts = opts,
        };
        if ((rc = pk_cpu_prefill_check(&j.u.prefill)) < 0)
            return rc;
        items = pk_cpu_prefill_items(&j.u.prefill);
        break;
    case PAGED_OP_COPY:
        j.u.copy = (pk_copy_args) {
            .cache = *cache, .num_pairs = (int32_t) op->count,
            .src_blocks = op->ids, .dst_blocks = op->ids2,
            .dst_base = dst != NULL ? dst->base : NULL,
            .dst_num_blocks = dst != NULL ? dst->num_blocks : 0,
        };
        if ((rc = pk_cpu_copy_check(&j.u.copy)) < 0)
            return rc;
        items = pk_cpu_copy_items(&j.u.copy);
        break;
    default:
        return PAGED_E_NOTSUP;
    }
    pd_workers_run(cb->workers, cpu_work, &j, items);
    return PAGED_OK;
}

/* Makes the merged-DECODE arrays of cb hold seqs sequences and entries table entries.
 * Returns PAGED_OK or PAGED_E_NOMEM (the arrays kept as they were). */
static int merge_reserve(struct cpu_backend *cb, size_t seqs, size_t entries)
{
    if (seqs > cb->cap_seqs) {
        const void **q = pd_realloc(cb->q_seq, seqs * sizeof *q);
        if (q == NULL)
            return PAGED_E_NOMEM;
        cb->q_seq = q;
        void **o = pd_realloc(cb->out_seq, seqs * sizeof *o);
        if (o == NULL)
            return PAGED_E_NOMEM;
        cb->out_seq = o;
        int32_t *l = pd_realloc(cb->lens, seqs * sizeof *l);
        if (l == NULL)
            return PAGED_E_NOMEM;
        cb->lens = l;
        int32_t *ly = pd_realloc(cb->seq_layer, seqs * sizeof *ly);
        if (ly == NULL)
            return PAGED_E_NOMEM;
        cb->seq_layer = ly;
        cb->cap_seqs = seqs;
    }
    if (entries > cb->cap_tables) {
        int32_t *t = pd_realloc(cb->tables, entries * sizeof *t);
        if (t == NULL)
            return PAGED_E_NOMEM;
        cb->tables = t;
        cb->cap_tables = entries;
    }
    return PAGED_OK;
}

/* On this backend the data arena is the host arena: returns its base (never NULL). */
static unsigned char *host_data(const struct pd_batch_op *op)
{
    return op->arenas.host;
}

/*
 * Runs count mergeable DECODEs (batch.h says which) as one job with per-sequence query and
 * output pointers, a block table padded to the largest stride, the lengths side by side,
 * and each sequence's layer if the ops' layers differ (daemon/engine/merged.h). Returns PAGED_OK,
 * or an error when the merged job cannot run (nothing ran then).
 */
static int cpu_run_merged(struct cpu_backend *cb, const struct pd_batch_op *ops, uint32_t count)
{
    struct pm_shape sh;
    pm_shape(ops, count, host_data, 1, &sh);
    int rc = merge_reserve(cb, sh.items, sh.items * sh.stride);
    if (rc < 0)
        return rc;
    pm_decode_fill(ops, count, host_data, &sh, cb->q_seq, cb->out_seq, cb->tables, cb->lens,
                   cb->seq_layer);
    const struct pv_op *first = ops[0].op;
    struct cpu_job j;
    memset(&j, 0, sizeof j);
    j.op = PAGED_OP_DECODE;
    j.u.decode = (pk_decode_args) {
        .cache = *ops[0].cache, .layer = sh.layer, .num_seqs = (int32_t) sh.items,
        .num_q_heads = (int32_t) first->num_q_heads, .q_dtype = first->dtype,
        .q_seq = cb->q_seq, .out_seq = cb->out_seq,
        .block_tables = cb->tables, .bt_stride = (int32_t) sh.stride, .seq_lens = cb->lens,
        .opts = { first->sm_scale, first->soft_cap, first->window, first->alibi },
        .seq_layer = sh.layers_differ ? cb->seq_layer : NULL,
    };
    if ((rc = pk_cpu_decode_check(&j.u.decode)) < 0)
        return rc;
    pd_workers_run(cb->workers, cpu_work, &j, pk_cpu_decode_items(&j.u.decode));
    return PAGED_OK;
}

/* Makes the merged-APPEND arrays of cb hold segs segments and tokens slots. Returns PAGED_OK
 * or PAGED_E_NOMEM (the arrays kept as they were). */
static int append_reserve(struct cpu_backend *cb, size_t segs, size_t tokens)
{
    if (segs > cb->cap_segs) {
        const void **k = pd_realloc(cb->k_seg, segs * sizeof *k);
        if (k == NULL)
            return PAGED_E_NOMEM;
        cb->k_seg = k;
        const void **v = pd_realloc(cb->v_seg, segs * sizeof *v);
        if (v == NULL)
            return PAGED_E_NOMEM;
        cb->v_seg = v;
        int32_t *ly = pd_realloc(cb->seg_layer, segs * sizeof *ly);
        if (ly == NULL)
            return PAGED_E_NOMEM;
        cb->seg_layer = ly;
        int32_t *p = pd_realloc(cb->seg_indptr, (segs + 1) * sizeof *p);
        if (p == NULL)
            return PAGED_E_NOMEM;
        cb->seg_indptr = p;
        cb->cap_segs = segs;
    }
    if (tokens > cb->cap_slots) {
        int32_t *s = pd_realloc(cb->slots, tokens * sizeof *s);
        if (s == NULL)
            return PAGED_E_NOMEM;
        cb->slots = s;
        cb->cap_slots = tokens;
    }
    return PAGED_OK;
}

/*
 * Runs count mergeable APPENDs (batch.h says which) as one job of the segmented form: one
 * segment per op with its own key and value sources (and its own first layer if the ops'
 * layers differ), the slots side by side. Returns PAGED_OK, or an error when the merged
 * job cannot run (nothing ran then).
 */
static int cpu_run_merged_append(struct cpu_backend *cb, const struct pd_batch_op *ops, uint32_t count)
{
    struct pm_shape sh;
    pm_shape(ops, count, host_data, 0, &sh);
    if (sh.tokens > INT32_MAX)
        return PAGED_E_INVAL;
    int rc = append_reserve(cb, count, sh.tokens != 0 ? sh.tokens : 1);
    if (rc < 0)
        return rc;
    pm_append_fill(ops, count, host_data, cb->slots, cb->seg_indptr, cb->k_seg, cb->v_seg,
                   cb->seg_layer);
    const struct pv_op *first = ops[0].op;
    struct cpu_job j;
    memset(&j, 0, sizeof j);
    j.op = PAGED_OP_APPEND;
    j.u.append = (pk_append_args) {
        .cache = *ops[0].cache, .layer_begin = sh.layer, .num_layers = first->num_layers,
        .num_tokens = (int32_t) sh.tokens, .src_dtype = first->dtype, .slot_mapping = cb->slots,
        .num_segments = (int32_t) count, .seg_indptr = cb->seg_indptr,
        .k_seg = cb->k_seg, .v_seg = cb->v_seg, .seg_layer = sh.layers_differ ? cb->seg_layer : NULL,
    };
    if ((rc = pk_cpu_append_check(&j.u.append)) < 0)
        return rc;
    pd_workers_run(cb->workers, cpu_work, &j, pk_cpu_append_items(&j.u.append));
    return PAGED_OK;
}

/* Runs a batch's launches in order, each to the end before the next (a merged one as one
 * job, whose items the workers share); returns nothing. */
static void cpu_run_batch(pd_backend *b, struct pd_batch *batch)
{
    struct cpu_backend *cb = b->priv;
    for (uint32_t l = 0; l < batch->nlaunches; l++) {
        struct pd_launch *la = &batch->launches[l];
        struct pd_batch_op *ops = batch->ops + la->first;
        la->merged = 0;
        if (la->count > 1) {
            const int opcode = ops[0].op->opcode;
            /* PAGEDD_REFUSE_MERGED, the test aid: refused as the kernels may refuse a job. */
            int rc = cb->refuse_merged ? PAGED_E_GEOMETRY
                     : opcode == PAGED_OP_APPEND ? cpu_run_merged_append(cb, ops, la->count)
                                                 : cpu_run_merged(cb, ops, la->count);
            if (rc == PAGED_OK) {
                la->merged = 1;
                for (uint32_t i = 0; i < la->count; i++)
                    ops[i].status = PAGED_OK;
                continue;
            }
            pm_log_unmerged("cpu", opcode, la->count, rc);
        }
        /* One op, or a merged job that could not run: each op by itself, on its own layers. */
        for (uint32_t i = 0; i < la->count; i++)
            ops[i].status = cpu_run(b, ops[i].cache, ops[i].mem, ops[i].dst_cache, &ops[i].arenas, ops[i].op);
    }
    /* The work is done, but a batch the engine may defer is reported deferred all the same:
     * its completions then take the engine's deferred path, as on the cuda backend. */
    batch->ticket = 0;
    if (!batch->may_defer || (cb->done_delay_ns != 0 && cb->tickets - cb->retired >= CPU_PENDING_MAX))
        return;
    batch->ticket = ++cb->tickets;
    if (cb->done_delay_ns != 0) {
        /* In order, as on a stream: never due before the batch queued ahead of it. */
        uint64_t due = pcore_now_ns() + cb->done_delay_ns;
        uint64_t ahead = cb->tickets - 1 > cb->retired ? cb->due[(cb->tickets - 1) % CPU_PENDING_MAX] : 0;
        cb->due[cb->tickets % CPU_PENDING_MAX] = due > ahead ? due : ahead;
    }
}

/* Moves the emulated completions that are due; returns nothing. */
static void cpu_retire_due(struct cpu_backend *cb)
{
    uint64_t now = pcore_now_ns();
    while (cb->retired < cb->tickets && cb->due[(cb->retired + 1) % CPU_PENDING_MAX] <= now)
        cb->retired++;
}

/* Returns 1 when the batch with ticket is done: at once, or once its emulated completion is due. */
static int cpu_done(pd_backend *b, uint64_t ticket)
{
    struct cpu_backend *cb = b->priv;
    if (cb->done_delay_ns == 0)
        return 1;
    cpu_retire_due(cb);
    return ticket <= cb->retired;
}

/* Returns once every deferred batch is reported done: under PAGEDD_CPU_DONE_US it waits for
 * the last emulated completion to come due, as a GPU's settle waits for its stream (shutdown
 * and the settling FREE, FORK and PUBLISH then post the withheld completions); otherwise
 * everything is done already. */
static void cpu_settle(pd_backend *b)
{
    struct cpu_backend *cb = b->priv;
    if (cb->done_delay_ns == 0)
        return;
    /* Bounded: every due time is at most CPU_PENDING_MAX delays of at most 1 s ahead. */
    for (int i = 0; i < 100000 && cb->retired < cb->tickets; i++) {
        uint64_t due = cb->due[cb->tickets % CPU_PENDING_MAX], now = pcore_now_ns();
        if (due > now) {
            struct timespec ts = { (time_t) ((due - now) / 1000000000u), (long) ((due - now) % 1000000000u) };
            nanosleep(&ts, NULL);
        }
        cpu_retire_due(cb);
    }
}

/* Says whether another batch may be queued: always, but under PAGEDD_CPU_DONE_US only while
 * fewer than CPU_DEPTH emulated completions are pending. */
static int cpu_room(pd_backend *b)
{
    struct cpu_backend *cb = b->priv;
    if (cb->done_delay_ns == 0)
        return 1;
    cpu_retire_due(cb);
    return cb->tickets - cb->retired < CPU_DEPTH;
}

/* Describes the backend; returns nothing. */
static void cpu_info(pd_backend *b, uint32_t device, struct pd_backend_info *out)
{
    (void) device;   /* one device: 0 */
    struct cpu_backend *cb = b->priv;
    memset(out, 0, sizeof *out);
    out->kind = PAGED_BACKEND_CPU;
    out->device_ordinal = -1;
    snprintf(out->device_name, sizeof out->device_name, "host memory, %u worker threads",
             pd_workers_count(cb->workers));
    out->healthy = 1;
    snprintf(out->health, sizeof out->health, "ok");
}

/* Frees the backend; returns nothing. */
static void cpu_destroy(pd_backend *b)
{
    struct cpu_backend *cb = b->priv;
    pd_workers_destroy(cb->workers);
    free(cb->q_seq);
    free(cb->out_seq);
    free(cb->lens);
    free(cb->seq_layer);
    free(cb->tables);
    free(cb->k_seg);
    free(cb->v_seg);
    free(cb->seg_layer);
    free(cb->seg_indptr);
    free(cb->slots);
    free(cb);
    free(b);
}

static const struct pd_backend_ops cpu_ops = {
    .name = "cpu",
    .pool_create = cpu_pool_create,
    .pool_destroy = cpu_pool_destroy,
    .pool_export = cpu_pool_export,
    .arena_create = NULL,
    .arena_destroy = NULL,
    .run_batch = cpu_run_batch,
    .settle = cpu_settle,
    .done = cpu_done,
    .room = cpu_room,
    .info = cpu_info,
    .destroy = cpu_destroy,
};

/* Opens the cpu backend; returns it or NULL with *cause. */
pd_backend *pd_backend_cpu_open(unsigned threads, char **cause)
{
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned) n : 1;
    }
    pd_backend *b = pd_calloc(1, sizeof *b);
    struct cpu_backend *cb = pd_calloc(1, sizeof *cb);
    if (b == NULL || cb == NULL) {
        free(b);
        free(cb);
        *cause = strdup("out of memory");
        return NULL;
    }
    cb->workers = pd_workers_create(threads, cause);
    if (cb->workers == NULL) {
        free(b);
        free(cb);
        return NULL;
    }
    const unsigned us = (unsigned) pd_knob(PD_KNOB_CPU_DONE_US);
    if (us > 0) {
        cb->done_delay_ns = (uint64_t) us * 1000u;
        pd_log(PD_LOG_INFO, "cpu: deferred batches report done %u us after they ran (PAGEDD_CPU_DONE_US)", us);
    }
    cb->refuse_merged = pm_refuse_merged("cpu");
    b->ops = &cpu_ops;
    b->priv = cb;
    b->runs_behind = cb->done_delay_ns != 0;
    b->ndevices = 1;
    return b;
}
