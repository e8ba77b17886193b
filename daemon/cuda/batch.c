/* batch.c: the cuda backend runs a batch: metadata staged and uploaded, gates, launches, signals. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "daemon/cuda/internal.h"
#include "daemon/engine/merged.h"
#include "daemon/util/heap.h"
#include "daemon/util/log.h"
#include "lib/core/clock.h"
#include "lib/core/names.h"

/* Makes the device staging buffer hold at least need bytes (nothing queued reads it: the
 * caller has settled). Returns PAGED_OK, PAGED_E_NOMEM, or PAGED_E_DEVICE (through
 * device_error when the runtime reports more than a lack of memory). */
static int stage_grow(struct cuda_backend *cb, size_t need)
{
    if (need <= cb->stage_cap)
        return PAGED_OK;
    size_t cap = PD_CUDA_STAGE_MIN;
    while (cap < need)
        cap *= 2;
    cudaFree(cb->d_stage);
    cb->d_stage = NULL;
    cb->stage_cap = 0;
    cb->last_len = 0;
    cudaError_t e = cudaMalloc((void **) &cb->d_stage, cap);
    if (e != cudaSuccess) {
        cb->d_stage = NULL;
        if (e == cudaErrorMemoryAllocation) {
            (void) cudaGetLastError();
            pd_log(PD_LOG_WARNING, "cuda device %d: no memory for %zu bytes of staging", cb->dev.ordinal, cap);
            return PAGED_E_NOMEM;
        }
        return pd_cu_error(cb, "staging allocation", e);
    }
    cb->stage_cap = cap;
    return PAGED_OK;
}

/* Returns a workspace of up to need bytes (the cached one, grown when it can be) and stores
 * its size; NULL with 0 when there is none. Grows only once everything queued has settled
 * (cuda_run_batch), since growing frees the old one. */
static void *workspace(struct cuda_backend *cb, size_t need, size_t *size)
{
    if (need > PD_CUDA_WS_MAX)
        need = PD_CUDA_WS_MAX;
    if (need > cb->ws_cap) {
        size_t cap = (need + (1u << 20) - 1) & ~(size_t) ((1u << 20) - 1);
        void *p = NULL;
        if (cudaMalloc(&p, cap) == cudaSuccess) {
            cudaFree(cb->ws);
            cb->ws = p;
            cb->ws_cap = cap;
        } else {
            /* Not sticky: the kernels make do with the smaller workspace (fewer splits). */
            (void) cudaGetLastError();
        }
    }
    *size = cb->ws_cap;
    return cb->ws;
}

/* Queues one prepared launch of nops requests on the stream; returns the kernel library's
 * status (under PAGEDD_REFUSE_MERGED, the test aid, PAGED_E_GEOMETRY for several requests, as
 * the kernels may refuse a merged launch). */
static int launch(struct cuda_backend *cb, const struct pd_cu_launch *cl, uint32_t nops)
{
    if (cb->refuse_merged && nops > 1)
        return PAGED_E_GEOMETRY;
    switch (cl->kind) {
    case PAGED_OP_APPEND: return pk_cuda_append(&cl->a.append, cb->stream);
    case PAGED_OP_DECODE: return pk_cuda_decode(&cl->a.decode, cb->stream);
    case PAGED_OP_PREFILL: return pk_cuda_prefill(&cl->a.prefill, cb->stream);
    case PAGED_OP_COPY: return pk_cuda_copy(&cl->a.copy, cb->stream);
    default: return PAGED_E_NOTSUP;
    }
}

/* Returns how many ops of a launch are still fine. */
static uint32_t ok_ops(const struct pd_batch *batch, const struct pd_launch *la)
{
    uint32_t n = 0;
    for (uint32_t i = la->first; i < la->first + la->count; i++)
        n += batch->ops[i].status == PAGED_OK;
    return n;
}

/* Gives every op of a launch that is still fine the status rc; returns nothing. */
static void launch_status(struct pd_batch *batch, const struct pd_launch *la, int rc)
{
    for (uint32_t i = la->first; i < la->first + la->count; i++)
        if (batch->ops[i].status == PAGED_OK)
            batch->ops[i].status = rc;
}

/* Handles a launch the kernel library refused with rc: a device error is looked at (and may
 * turn the backend unhealthy); returns rc. */
static int refused(struct cuda_backend *cb, int kind, int rc)
{
    return rc == PAGED_E_DEVICE ? pd_cu_error(cb, pcore_op_name((uint32_t) kind), cudaSuccess) : rc;
}

/*
 * Runs a merged DECODE launch that the kernels refused op by op, each on its own layer and
 * its own slice of the merged arrays (already on the device); sets each op's status.
 * Returns nothing.
 */
static void launch_split(struct cuda_backend *cb, struct pd_batch *batch, const struct pd_launch *la,
                         const pk_decode_args *m)
{
    size_t s = 0;
    for (uint32_t i = la->first; i < la->first + la->count; i++) {
        struct pd_batch_op *bop = &batch->ops[i];
        if (bop->status < 0)
            continue;
        pk_decode_args a = *m;
        a.layer = bop->op->layer_begin;
        a.seq_layer = NULL;
        a.num_seqs = (int32_t) bop->op->count;
        a.q_seq = m->q_seq + s;
        a.out_seq = m->out_seq + s;
        a.block_tables = m->block_tables + s * (size_t) m->bt_stride;
        a.seq_lens = m->seq_lens + s;
        s += bop->op->count;
        int rc = cb->healthy ? pk_cuda_decode(&a, cb->stream) : PAGED_E_DEVICE;
        if (rc != PAGED_OK)
            bop->status = refused(cb, PAGED_OP_DECODE, rc);
    }
}

/*
 * Runs a merged APPEND launch that the kernels refused op by op in the contiguous form, each
 * on its own layers and its own slice of the merged slots (already on the device); sets
 * each op's status. Returns nothing.
 */
static void launch_split_append(struct cuda_backend *cb, struct pd_batch *batch,
                                const struct pd_launch *la, const pk_append_args *m)
{
    size_t t = 0;
    for (uint32_t i = la->first; i < la->first + la->count; i++) {
        struct pd_batch_op *bop = &batch->ops[i];
        if (bop->status < 0)
            continue;
        const struct pv_op *op = bop->op;
        unsigned char *data = bop->arenas.data->mem.dptr;
        pk_append_args a = *m;
        a.layer_begin = op->layer_begin;
        a.seg_layer = NULL;
        a.num_tokens = (int32_t) op->num_tokens;
        a.k = data + op->k_off;
        a.v = data + op->v_off;
        a.slot_mapping = m->slot_mapping + t;
        a.num_segments = 0;
        a.seg_indptr = NULL;
        a.k_seg = a.v_seg = NULL;
        t += op->num_tokens;
        int rc = cb->healthy ? pk_cuda_append(&a, cb->stream) : PAGED_E_DEVICE;
        if (rc != PAGED_OK)
            bop->status = refused(cb, PAGED_OP_APPEND, rc);
    }
}

/* Makes *p, an array of *cap elements of size bytes, hold n (growing it to a power of two of at
 * least 64); returns PAGED_OK or PAGED_E_NOMEM with *p as it was. */
static int reserve(void **p, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap)
        return PAGED_OK;
    size_t c = *cap != 0 ? *cap : 64;
    while (c < n)
        c *= 2;
    void *q = pd_realloc(*p, c * size);
    if (q == NULL)
        return PAGED_E_NOMEM;
    *p = q;
    *cap = c;
    return PAGED_OK;
}

/* Gives every op of batch the status rc; returns nothing. */
static void fail_all(struct pd_batch *batch, int rc)
{
    for (uint32_t i = 0; i < batch->nops; i++)
        batch->ops[i].status = rc;
}

/* Returns whether op carries the dependency flag (PCORE_SQE_WAIT or _SIGNAL) on a word of
 * this backend's: its client has a device data arena. */
static int device_dep(const struct pd_batch_op *op, unsigned flag)
{
    return (op->op->flags & flag) != 0 && op->arenas.data != NULL;
}

/* Returns whether every op of batch signals a device word, so that it may complete at launch. */
static int all_signal(const struct pd_batch *batch)
{
    for (uint32_t i = 0; i < batch->nops; i++)
        if (!device_dep(&batch->ops[i], PCORE_SQE_SIGNAL))
            return 0;
    return batch->nops != 0;
}

/* Returns the device address of op's wait word (wait) or signal word: in its data arena, or
 * in its registered host arena (PCORE_SQE_HOST_WORDS). */
static uint32_t *dep_word(const struct pd_batch_op *op, int wait)
{
    unsigned char *base = (op->op->flags & PCORE_SQE_HOST_WORDS) ? op->arenas.data->host_dev : pd_cu_op_data(op);
    return (uint32_t *) (base + (wait ? op->op->wait_off : op->op->signal_off));
}

/*
 * Queues the waits (wait 1) or writes (wait 0) of the n words w on the stream by kernels
 * (kernels/dep.cu): a gate that ends once every word is reached, or gives up by itself long
 * after the watchdog would have released it, or a signal launched behind the last kernel.
 * Returns PAGED_OK or PAGED_E_DEVICE.
 */
static int queue_dep_kernels(struct cuda_backend *cb, const pk_dep_word *w, unsigned n, int wait)
{
    const unsigned long long bound_ns = 2ull * cb->dep_timeout_ns + 1000000000ull;
    int rc = wait ? pk_cuda_dep_wait(w, n, bound_ns, cb->stream) : pk_cuda_dep_signal(w, n, cb->stream);
    if (rc != PAGED_OK)
        return pd_cu_error(cb, wait ? "dependency gate kernel" : "dependency signal kernel", cudaSuccess);
    return PAGED_OK;
}

/*
 * Queues the waits (wait 1: CU_STREAM_WAIT_VALUE_GEQ, the wrapping comparison the protocol
 * promises) or writes (wait 0: ordered after all earlier work with a memory barrier) of the n
 * words w on the stream in one cuStreamBatchMemOp. Returns PAGED_OK or PAGED_E_DEVICE.
 */
static int queue_dep_memops(struct cuda_backend *cb, const pk_dep_word *w, unsigned n, int wait)
{
    CUstreamBatchMemOpParams p[PK_DEP_WORDS_MAX];
    for (unsigned k = 0; k < n; k++) {
        memset(&p[k], 0, sizeof p[k]);
        const CUdeviceptr addr = (CUdeviceptr) (uintptr_t) w[k].addr;
        if (wait) {
            p[k].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
            p[k].waitValue.address = addr;
            p[k].waitValue.value = w[k].value;
            p[k].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
        } else {
            p[k].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
            p[k].writeValue.address = addr;
            p[k].writeValue.value = w[k].value;
            p[k].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
        }
    }
    CUresult r = cb->dev.drv.stream_batch_mem_op((CUstream) cb->stream, n, p, 0);
    if (r == CUDA_SUCCESS)
        return PAGED_OK;
    char buf[160];
    pd_log(PD_LOG_WARNING, "cuda device %d: cuStreamBatchMemOp (%s): %s", cb->dev.ordinal, wait ? "waits" : "signals",
           pd_cu_strerror(&cb->dev.drv, r, buf, sizeof buf));
    /* A sticky error shows in the next query of the stream: the backend turns unhealthy. */
    cudaError_t q = cudaStreamQuery(cb->stream);
    if (q != cudaSuccess && q != cudaErrorNotReady)
        return pd_cu_error(cb, "dependency words", q);
    return PAGED_E_DEVICE;
}

/* Attention sequences from which a pass of one client's dependency words goes by kernels under
 * MPS: its layers are long enough that the kernels' launches stay off the critical path. */
#define PD_DEP_KERNEL_MIN_SEQS 8

/*
 * Counts the batch's waited device words into *nwaits and returns whether its dependency
 * words go by kernels: never (cb->dep_kernels 0), always (2, PAGEDD_DEP_KERNELS=2), or, under
 * MPS (1), where they are words of more than one client or the pass attends over at least
 * PD_DEP_KERNEL_MIN_SEQS sequences. One client's short layers pay more for the kernels'
 * launches than they save (HACKING.md).
 */
static int dep_census(const struct cuda_backend *cb, const struct pd_batch *batch, uint32_t *nwaits)
{
    int several = 0, seen = 0;
    uint32_t first = 0, seqs = 0;
    *nwaits = 0;
    for (uint32_t i = 0; i < batch->nops; i++) {
        const struct pd_batch_op *op = &batch->ops[i];
        if (op->op->opcode == PAGED_OP_DECODE || op->op->opcode == PAGED_OP_PREFILL)
            seqs += op->op->count;
        const int waits = device_dep(op, PCORE_SQE_WAIT);
        *nwaits += (uint32_t) waits;
        if (!waits && !device_dep(op, PCORE_SQE_SIGNAL))
            continue;
        several |= seen && op->holder != first;
        seen = 1;
        first = op->holder;
    }
    return cb->dep_kernels == 2
           || (cb->dep_kernels == 1 && seen && (several || seqs >= PD_DEP_KERNEL_MIN_SEQS));
}

/*
 * Queues, PK_DEP_WORDS_MAX at a time, a wait for every waited word of the ops still fine,
 * recording each in slot s for the watchdog (wait 1; its write of a late word releases a
 * stream wait and a gate kernel alike), or a write of every signal word of them after the
 * batch's work (wait 0): by kernels (by_kernels; dep_census says when), else by stream
 * memory operations. Returns PAGED_OK or PAGED_E_DEVICE.
 */
static int queue_deps(struct cuda_backend *cb, struct pd_batch *batch, struct pd_cu_slot *s, int wait, int by_kernels)
{
    pk_dep_word w[PK_DEP_WORDS_MAX];
    unsigned n = 0;
    for (uint32_t i = 0; i <= batch->nops; i++) {
        if (i < batch->nops) {
            const struct pd_batch_op *op = &batch->ops[i];
            if (op->status != PAGED_OK || !device_dep(op, wait ? PCORE_SQE_WAIT : PCORE_SQE_SIGNAL))
                continue;
            w[n] = (pk_dep_word) {
                .addr = dep_word(op, wait), .value = wait ? op->op->wait_value : op->op->signal_value,
            };
            if (wait)
                s->waits[s->nwaits++] = (struct pd_cu_wait) {
                    .addr = (CUdeviceptr) (uintptr_t) w[n].addr, .value = w[n].value, .op = i,
                    .holder = op->holder, .off = op->op->wait_off,
                };
            if (++n < PK_DEP_WORDS_MAX)
                continue;
        }
        if (n == 0)
            continue;
        int rc = by_kernels ? queue_dep_kernels(cb, w, n, wait) : queue_dep_memops(cb, w, n, wait);
        if (rc != PAGED_OK)
            return rc;
        n = 0;
    }
    return PAGED_OK;
}

/* Returns the workspace launch cl (its arguments built) asks for: a DECODE's or a PREFILL's, else 0. */
static size_t launch_workspace(const struct pd_cu_launch *cl)
{
    if (cl->kind == PAGED_OP_DECODE)
        return pk_cuda_decode_workspace(&cl->a.decode);
    if (cl->kind == PAGED_OP_PREFILL)
        return pk_cuda_prefill_workspace(&cl->a.prefill);
    return 0;
}

/* Returns the largest workspace a launch of the batch (its arguments built) asks for. */
static size_t workspace_need(struct cuda_backend *cb, const struct pd_batch *batch)
{
    size_t need = 0;
    for (uint32_t l = 0; l < batch->nlaunches; l++) {
        size_t n = launch_workspace(&cb->launch[l]);
        if (n > need)
            need = n;
    }
    return need;
}

static cudaError_t upload(struct cuda_backend *cb, const unsigned char *host, size_t len);

/* Makes every DECODE launch of batch read its metadata on the device again; returns nothing. */
static void meta_drop(struct cuda_backend *cb, const struct pd_batch *batch)
{
    for (uint32_t l = 0; l < batch->nlaunches; l++)
        if (cb->launch[l].kind == PAGED_OP_DECODE)
            cb->launch[l].a.decode.meta_host = NULL;
}

/*
 * Makes sure the batch's metadata is on its way to the device before a launch that reads it
 * there: a batch whose DECODEs carried it in their parameters (cb->meta_pending) uploads it
 * now, and its launches carry it no more. Returns PAGED_OK or an error.
 */
static int ensure_uploaded(struct cuda_backend *cb, struct pd_batch *batch)
{
    if (!cb->meta_pending)
        return PAGED_OK;
    cb->meta_pending = 0;
    meta_drop(cb, batch);
    pd_log(PD_LOG_DEBUG, "%s: a refused launch carried the batch's metadata (%zu bytes): uploading it", cb->who,
           cb->meta_len);
    cudaError_t e = upload(cb, cb->meta_host, cb->meta_len);
    return e == cudaSuccess ? PAGED_OK : pd_cu_error(cb, "metadata upload", e);
}

/* Runs the ops of launch la, refused with rc as a whole, one by one; returns nothing. */
static void split(struct cuda_backend *cb, struct pd_batch *batch, const struct pd_launch *la,
                  const struct pd_cu_launch *cl, int rc)
{
    pm_log_unmerged(cb->who, cl->kind, ok_ops(batch, la), rc);
    if (cl->kind == PAGED_OP_APPEND)
        launch_split_append(cb, batch, la, &cl->a.append);
    else
        launch_split(cb, batch, la, &cl->a.decode);
}

/* Queues launch l of batch, a refused one failing its own ops (a merged one refused as a
 * whole is tried op by op); returns nothing. */
static void queue_one(struct cuda_backend *cb, struct pd_batch *batch, uint32_t l)
{
    struct pd_launch *la = &batch->launches[l];
    struct pd_cu_launch *cl = &cb->launch[l];
    la->merged = 0;
    if (ok_ops(batch, la) == 0)
        return;
    if (!cb->healthy) {
        launch_status(batch, la, PAGED_E_DEVICE);
        return;
    }
    int rc = launch(cb, cl, ok_ops(batch, la));
    if (rc != PAGED_OK && rc != PAGED_E_DEVICE) {
        /* What runs instead reads the metadata on the device. */
        int up = ensure_uploaded(cb, batch);
        if (up != PAGED_OK) {
            launch_status(batch, la, up);
            return;
        }
    }
    if (rc != PAGED_OK && rc != PAGED_E_DEVICE && cb->fused && l == cb->fusion.decode) {
        /* Refused with the newest tokens: their APPENDs run apart after all, first. */
        cb->fused = 0;
        queue_one(cb, batch, cb->fusion.append);
        cl->a.decode.new_k = cl->a.decode.new_v = NULL;
        cl->a.decode.new_k_seq = cl->a.decode.new_v_seq = NULL;
        rc = cb->healthy ? launch(cb, cl, ok_ops(batch, la)) : PAGED_E_DEVICE;
    }
    if (rc == PAGED_OK)
        la->merged = ok_ops(batch, la) > 1;
    else if (la->count > 1 && rc != PAGED_E_DEVICE)
        split(cb, batch, la, cl, rc);
    else
        launch_status(batch, la, refused(cb, cl->kind, rc));
}

/* Queues every launch of batch in order; a fused APPEND launch goes with its DECODE launch,
 * and its ops share their fate. Returns nothing. */
static void queue_launches(struct cuda_backend *cb, struct pd_batch *batch)
{
    for (uint32_t l = 0; l < batch->nlaunches; l++) {
        if (cb->fused && l == cb->fusion.append) {
            batch->launches[l].merged = 0;
            continue;
        }
        queue_one(cb, batch, l);
    }
    if (!cb->fused)
        return;
    const struct pd_launch *ld = &batch->launches[cb->fusion.decode];
    for (uint32_t i = ld->first; i < ld->first + ld->count; i++) {
        struct pd_batch_op *a = &batch->ops[cb->fusion.partner[i]];
        if (a->status == PAGED_OK && batch->ops[i].status < 0)
            a->status = batch->ops[i].status;
    }
    batch->fused_appends = batch->launches[cb->fusion.append].count;
}

/* Gives every op of batch still fine (and, with flag, carrying that dependency flag) the
 * status rc; returns nothing. */
static void fail_ok(struct pd_batch *batch, int rc, unsigned flag)
{
    for (uint32_t i = 0; i < batch->nops; i++)
        if (batch->ops[i].status == PAGED_OK && (flag == 0 || device_dep(&batch->ops[i], flag)))
            batch->ops[i].status = rc;
}

/* Waits for batch (queued with slot s, ended: its event recorded) to finish and sets what it
 * learns: a fault fails every op still fine, a waited word that timed out fails its op with
 * PAGED_E_TIMEOUT. Returns nothing. */
static void finish(struct cuda_backend *cb, struct pd_batch *batch, struct pd_cu_slot *s, int ended)
{
    uint64_t w0 = pcore_now_ns();
    cudaError_t e = ended ? pd_cu_flight_wait(&cb->flight, s, cb->dep_timeout_ns)
                          : pd_cu_flight_drain(&cb->flight, s, cb->stream, cb->dep_timeout_ns);
    batch->wait_ns = pcore_now_ns() - w0;
    if (e != cudaSuccess) {
        /* A fault of one kernel cannot be told from the others' here, and it is sticky. */
        fail_ok(batch, pd_cu_error(cb, "batch", e), 0);
        for (uint32_t l = 0; l < batch->nlaunches; l++)
            batch->launches[l].merged = 0;
        pd_cu_flight_release_all(&cb->flight);
        return;
    }
    for (uint32_t i = 0; i < s->nwaits; i++)
        if (s->waits[i].late && batch->ops[s->waits[i].op].status == PAGED_OK)
            batch->ops[s->waits[i].op].status = PAGED_E_TIMEOUT;
    pd_cu_flight_release(s);
}

/* Returns whether d_stage already holds the len bytes at host (see upload). */
static int stage_current(const struct cuda_backend *cb, const unsigned char *host, size_t len)
{
    return len == 0 || (len <= cb->last_len && memcmp(cb->last_stage, host, len) == 0);
}

/*
 * Queues the upload of the staged metadata (len bytes at host) into d_stage and remembers
 * them, so that a later batch with the same bytes skips its upload (stage_current: a decode
 * step's layers stage the same tables, lengths and slots; nothing else writes d_stage, and
 * the stream orders the earlier upload before that batch's kernels). Returns the runtime's
 * status.
 */
static cudaError_t upload(struct cuda_backend *cb, const unsigned char *host, size_t len)
{
    cb->last_len = 0;
    if (cb->fail_upload_at != 0 && ++cb->uploads == cb->fail_upload_at) {
        pd_log(PD_LOG_WARNING, "%s: metadata upload %llu fails on purpose (PAGEDD_FAIL_UPLOAD_AT)", cb->who,
               (unsigned long long) cb->uploads);
        return cudaErrorInvalidValue;
    }
    cudaError_t e = cudaMemcpyAsync(cb->d_stage, host, len, cudaMemcpyHostToDevice, cb->stream);
    if (e != cudaSuccess)
        return e;
    if (len > cb->last_cap) {
        unsigned char *p = pd_realloc(cb->last_stage, len);
        if (p == NULL)
            return cudaSuccess;    /* the next batch uploads whatever it has */
        cb->last_stage = p;
        cb->last_cap = len;
    }
    memcpy(cb->last_stage, host, len);
    cb->last_len = len;
    return cudaSuccess;
}

/*
 * Decides whether the batch's metadata (len bytes staged at host) travels in its launches'
 * parameters instead of an upload: only where every launch that runs is a DECODE that
 * pk_cuda_decode_meta_inline accepts (on the tensor-core kernel, len small enough).
 * Sets the launches' meta_* either way; returns 1 when they carry it.
 */
static int meta_inline(struct cuda_backend *cb, const struct pd_batch *batch, const unsigned char *host, size_t len)
{
    int ok = len <= PK_CUDA_DECODE_META_MAX;
    for (uint32_t l = 0; l < batch->nlaunches && ok; l++) {
        if ((cb->fused && l == cb->fusion.append) || ok_ops(batch, &batch->launches[l]) == 0)
            continue;
        struct pd_cu_launch *cl = &cb->launch[l];
        if (cl->kind != PAGED_OP_DECODE) {
            ok = 0;
            break;
        }
        cl->a.decode.meta_host = host;
        cl->a.decode.meta_dev = cb->d_stage;
        cl->a.decode.meta_bytes = len;
        ok = pk_cuda_decode_meta_inline(&cl->a.decode) == 1;
    }
    if (!ok)
        meta_drop(cb, batch);
    return ok;
}

/*
 * Runs a batch: stages all its metadata (growing the device staging and the workspace only
 * once everything queued has finished), uploads it in one copy from the batch's slot, queues
 * the gates of its waited words, every launch in order, and the signals of its signal words
 * on the one stream; then returns at once when every op signals (batch->early), else
 * synchronizes; see backend.h. Returns nothing.
 */
void pd_cu_run_batch(pd_backend *b, struct pd_batch *batch)
{
    struct cuda_backend *cb = b->priv;
    uint64_t t0 = pcore_now_ns();
    batch->early = 0;
    batch->ticket = 0;
    batch->wait_ns = 0;
    batch->stage_ns = batch->upload_ns = batch->queue_ns = 0;
    batch->upload_skipped = 0;
    batch->meta_inline = 0;
    batch->fused_appends = 0;
    cb->dep_timeout_ns = batch->dep_timeout_ns;
    if (!cb->healthy) {
        fail_all(batch, PAGED_E_DEVICE);
        return;
    }
    pd_cu_flight_poll(&cb->flight, cb->dep_timeout_ns);
    int rc = reserve((void **) &cb->launch, &cb->launch_cap, batch->nlaunches, sizeof *cb->launch);
    if (rc < 0) {
        fail_all(batch, rc);
        return;
    }
    cb->fused = cb->fuse_enabled
                && reserve((void **) &cb->partner, &cb->partner_cap, batch->nops, sizeof *cb->partner) == PAGED_OK
                && pf_plan(batch, cb->partner, &cb->fuse_scratch, &cb->fusion);
    const struct pf_fusion *fusion = cb->fused ? &cb->fusion : NULL;
    struct pd_cu_stage st = { 0, NULL, NULL };
    pd_cu_stage_batch(&st, batch, cb->launch, fusion);
    /* Never empty, so that a device address is never computed from a NULL buffer. */
    size_t stage_need = st.total != 0 ? st.total : 1;
    size_t need = workspace_need(cb, batch);
    if (need > PD_CUDA_WS_MAX)
        need = PD_CUDA_WS_MAX;
    if (stage_need > cb->stage_cap || need > cb->ws_cap)
        pd_cu_settle(b);
    rc = stage_grow(cb, stage_need);
    uint32_t nwaits;
    const int by_kernels = dep_census(cb, batch, &nwaits);
    struct pd_cu_slot *slot = NULL;
    if (rc == PAGED_OK) {
        cudaError_t e = pd_cu_flight_begin(&cb->flight, stage_need, nwaits, cb->dep_timeout_ns, &slot);
        if (e != cudaSuccess)
            rc = e == cudaErrorMemoryAllocation ? PAGED_E_NOMEM : pd_cu_error(cb, "staging slot", e);
    }
    if (rc < 0) {
        (void) cudaGetLastError();
        fail_all(batch, rc);
        return;
    }
    st = (struct pd_cu_stage) { 0, slot->h_stage, cb->d_stage };
    pd_cu_stage_batch(&st, batch, cb->launch, fusion);

    /* One workspace for every DECODE and PREFILL: they run one after another on the stream. */
    size_t ws_size = 0;
    void *ws = need > 0 ? workspace(cb, need, &ws_size) : NULL;
    for (uint32_t l = 0; l < batch->nlaunches; l++) {
        struct pd_cu_launch *cl = &cb->launch[l];
        if (launch_workspace(cl) == 0)
            continue;
        if (cl->kind == PAGED_OP_DECODE) {
            cl->a.decode.workspace = ws;
            cl->a.decode.workspace_size = ws_size;
        } else {
            cl->a.prefill.workspace = ws;
            cl->a.prefill.workspace_size = ws_size;
        }
    }

    uint64_t t1 = pcore_now_ns();
    batch->stage_ns = t1 - t0;
    const char *what = "batch start event";
    cudaError_t e = pd_cu_flight_mark_start(&cb->flight, slot, cb->stream);
    cb->meta_host = slot->h_stage;
    cb->meta_len = st.total;
    /* Metadata the device holds already is read faster there than from the parameters. */
    const int skipped = stage_current(cb, slot->h_stage, st.total);
    cb->meta_pending = 0;
    if (e == cudaSuccess && cb->meta_inline_enabled && !skipped) {
        const uint64_t h = XXH3_64bits(slot->h_stage, st.total);
        const int repeated = h == cb->inlined_hash && st.total == cb->inlined_len;
        if (!repeated && meta_inline(cb, batch, slot->h_stage, st.total)) {
            cb->meta_pending = 1;
            cb->inlined_hash = h;
            cb->inlined_len = st.total;
        }
    }
    batch->meta_inline = cb->meta_pending;
    if (e == cudaSuccess && !skipped && !cb->meta_pending) {
        what = "metadata upload";
        e = upload(cb, slot->h_stage, st.total);
    }
    batch->upload_skipped = skipped && e == cudaSuccess;
    uint64_t t2 = pcore_now_ns();
    batch->upload_ns = t2 - t1;
    if (e != cudaSuccess) {
        fail_all(batch, pd_cu_error(cb, what, e));
        finish(cb, batch, slot, 0);
        return;
    }
    rc = queue_deps(cb, batch, slot, 1, by_kernels);
    if (rc != PAGED_OK)
        fail_ok(batch, rc, 0);
    if (cb->fault_after != 0 && ++cb->batches == cb->fault_after) {
        pd_log(PD_LOG_WARNING, "%s: batch %llu faults on purpose (PAGEDD_FAULT_AFTER)", cb->who,
               (unsigned long long) cb->batches);
        if (pk_cuda_fault(cb->stream) != PAGED_OK)
            (void) cudaGetLastError();
    }
    queue_launches(cb, batch);
    /* Every op that ran signals, also one whose wait the watchdog released: the worker's
     * stream may already wait for the word, and the completion or the disconnection says
     * what failed. */
    rc = queue_deps(cb, batch, slot, 0, by_kernels);
    if (rc != PAGED_OK)
        fail_ok(batch, rc, PCORE_SQE_SIGNAL);
    int early = cb->healthy && all_signal(batch);
    /* Deferred (the engine posts the completions once the slot retires): none of its ops
     * waits or signals, so neither the watchdog nor finish() has anything to read back. */
    int defer = !early && cb->healthy && batch->may_defer && nwaits == 0;
    e = pd_cu_flight_end(&cb->flight, slot, cb->stream, !early && !defer);
    batch->queue_ns = pcore_now_ns() - t2;
    if (e == cudaSuccess && early) {
        batch->early = 1;
        return;
    }
    if (e == cudaSuccess && defer) {
        batch->ticket = slot->ticket;
        return;
    }
    if (e != cudaSuccess)
        (void) pd_cu_error(cb, "batch event", e);
    /* Also when every launch was refused: the metadata copy is in flight. */
    finish(cb, batch, slot, e == cudaSuccess);
}
