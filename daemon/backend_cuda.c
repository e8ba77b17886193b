/* backend_cuda.c: the cuda backend: pools and data arenas in device memory, ops on one stream. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cuda_runtime_api.h>
#include <xxhash.h>

#include "daemon/backend.h"
#include "daemon/cuda_flight.h"
#include "daemon/cuda_reaper.h"
#include "daemon/cuda_mem.h"
#include "daemon/cuda_stage.h"
#include "daemon/fuse.h"
#include "daemon/log.h"
#include "lib/shm.h"

/*
 * Everything runs on the engine thread, on one non-blocking stream. An engine pass arrives as
 * one batch: the waits for its requests' dependency words, its launches in order and the
 * writes of their signal words are queued on the stream, and the batch ends with ONE wait for
 * the device, so run_batch returns only once the GPU work is done and the completions the
 * engine posts next are never ahead of the outputs; or, when every request of the batch
 * signals a word, it returns at once (batch->early) and the words tell the clients when
 * (cuda_flight.h: the slots of the batches in flight and the watchdog over their waits). The
 * validated metadata of every op of the batch (block tables, lengths, qo_indptr, slots, block
 * ids, ALiBi slopes: private host copies made by the validator; for a merged DECODE also the
 * per-sequence query and output pointers, the padded table and, if their layers differ, the
 * per-sequence layers; for a merged APPEND the concatenated slots, the segment offsets, the
 * per-segment key and value pointers and, if their layers differ, the per-segment first
 * layers) goes to the device in one cudaMemcpyAsync from the batch's slot's pinned staging
 * buffer into a device staging buffer, which the next batch may overwrite since its copy
 * runs after this batch's kernels on the stream. The device staging and the workspace (shared
 * by the batch's DECODEs and PREFILLs, which run one after another) grow only once every
 * queued batch has finished.
 *
 * Health. A launch the kernels refuse fails its own ops (a refused merged DECODE or APPEND is
 * retried op by op on slices of its arrays); a failed synchronization fails every op of the batch
 * with PAGED_E_DEVICE, since a fault cannot be pinned on one kernel there. If
 * the error is sticky (the context is lost: an illegal address, a trap, a launch failure)
 * the backend logs it once, reports itself unhealthy in info() (pactl status shows it) and
 * refuses every later op, pool and arena with PAGED_E_DEVICE: serving from a broken context
 * would return garbage. Only a restart of pagedd recovers. A fault in a batch completed early
 * surfaces at the next wait for the device.
 *
 * DESIGN.md's interprocess CUDA event (the client's stream waiting for an event the daemon
 * records) is replaced by the dependency words: a word the worker's stream waits for and one
 * the daemon's stream waits for serve both directions, and need no handle exchange.
 */

/* Device memory kept free beyond pools and arenas, for staging, workspaces and the kernels'
 * own needs, so a large pool cannot starve every later op. */
#define PD_CUDA_HEADROOM (128ull << 20)
/* Smallest staging buffer, and the largest decode workspace the backend will allocate (the
 * kernels split less when they get less). */
#define PD_CUDA_STAGE_MIN (64u << 10)
#define PD_CUDA_WS_MAX (512ull << 20)
/* Non-sticky device errors logged as warnings before they go to the debug level. */
#define PD_CUDA_WARN_MAX 16u

struct cuda_backend {
    pd_backend *backend;          /* the table this is the private part of */
    struct pd_cu_device dev;
    cudaStream_t stream;
    uint8_t uuid[16];
    char name[64];
    unsigned char *d_stage;       /* device staging */
    size_t stage_cap;             /* bytes of d_stage */
    /* What the last upload put in d_stage (its first last_len bytes; 0: not known). A batch
     * whose metadata is the same bytes, as every layer of a decode step is, skips its upload. */
    unsigned char *last_stage;
    size_t last_len, last_cap;
    /* The batch being run: whether its APPEND launch rides in its DECODE launch (fuse.h),
     * and the scratch pf_plan decides with. PAGEDD_FUSE=0 turns it off. */
    int fuse_enabled, fused;
    struct pf_fusion fusion;
    uint32_t *partner;
    size_t partner_cap;
    struct pf_scratch fuse_scratch;
    struct pd_cu_flight flight;   /* batches queued and completed early (cuda_flight.h) */
    uint64_t dep_timeout_ns;      /* the watchdog's: the last batch's dep_timeout_ns */
    void *ws;                     /* decode/prefill workspace */
    size_t ws_cap;
    struct pd_cu_launch *launch;  /* the launches of the batch being run */
    size_t launch_cap;
    /* The batch being run carries its metadata in its DECODE launches' parameters
     * (pk_decode_args.meta_host) and has not uploaded it: meta_host, meta_len bytes, is its
     * slot's staging. PAGEDD_META_INLINE=0 turns it off. */
    int meta_inline_enabled, meta_pending;
    const unsigned char *meta_host;
    size_t meta_len;
    /* The last metadata carried so (its hash and length): the same again is uploaded instead,
     * so that the batches after it (a decode step's other layers) find it on the device. */
    uint64_t inlined_hash;
    size_t inlined_len;
    int healthy;
    char health[128];
    unsigned warned;              /* non-sticky errors logged so far */
    struct pd_cu_reaper reaper;   /* frees departed clients' arenas (cuda_reaper.h) */
};

/* Formats a message into *cause (NULL when out of memory); returns status. */
static int fail(int status, char **cause, const char *fmt, ...) PD_PRINTF(3, 4);
static int fail(int status, char **cause, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(cause, fmt, ap) < 0)
        *cause = NULL;
    va_end(ap);
    return status;
}

/* Formats a UUID as nvidia-smi prints it, "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", into
 * buf (at least 41 bytes); returns buf. */
static const char *uuid_str(const uint8_t u[16], char *buf, size_t size)
{
    snprintf(buf, size, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
             u[13], u[14], u[15]);
    return buf;
}

/* Parses a UUID: an optional "GPU-" or "MIG-" prefix, then 32 hex digits with dashes
 * anywhere between them. Returns 0 with out filled, or -1. */
static int uuid_parse(const char *s, uint8_t out[16])
{
    if (strncasecmp(s, "GPU-", 4) == 0 || strncasecmp(s, "MIG-", 4) == 0)
        s += 4;
    int n = 0;
    for (; *s != '\0'; s++) {
        if (*s == '-')
            continue;
        if (!isxdigit((unsigned char) *s) || n == 32)
            return -1;
        int v = isdigit((unsigned char) *s) ? *s - '0' : tolower((unsigned char) *s) - 'a' + 10;
        if (n % 2 == 0)
            out[n / 2] = (uint8_t) (v << 4);
        else
            out[n / 2] |= (uint8_t) v;
        n++;
    }
    return n == 32 ? 0 : -1;
}

/* Picks the runtime device that spec names among count: "" is device 0, digits an index, else a
 * UUID. Returns 0 with *ordinal, or -1 with *cause. */
static int resolve_device(const char *spec, int count, int *ordinal, char **cause)
{
    if (spec == NULL || spec[0] == '\0') {
        *ordinal = 0;
        return 0;
    }
    size_t n = strlen(spec);
    if (strspn(spec, "0123456789") == n) {
        long v = n <= 6 ? strtol(spec, NULL, 10) : -1;
        if (v < 0 || v >= count)
            return fail(-1, cause, "backend cuda: device %s does not exist (%d CUDA device%s "
                        "visible to pagedd)", spec, count, count == 1 ? "" : "s");
        *ordinal = (int) v;
        return 0;
    }
    uint8_t want[16];
    if (uuid_parse(spec, want) < 0)
        return fail(-1, cause, "backend cuda: device '%s' is neither an index nor a UUID "
                    "(GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, as nvidia-smi -L prints it)", spec);
    for (int i = 0; i < count; i++) {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess)
            continue;
        if (memcmp(prop.uuid.bytes, want, 16) == 0) {
            *ordinal = i;
            return 0;
        }
    }
    char buf[48];
    return fail(-1, cause, "backend cuda: no CUDA device visible to pagedd has UUID %s "
                "(%d device%s visible; CUDA_VISIBLE_DEVICES?)", uuid_str(want, buf, sizeof buf),
                count, count == 1 ? "" : "s");
}

/* Returns whether a CUDA error leaves the context unusable: the runtime returns it again
 * from every later call, so nothing the device computes can be trusted. */
static int is_sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
        return 1;
    default:
        return 0;
    }
}

/* Names an op for messages. */
static const char *op_name(int opcode)
{
    switch (opcode) {
    case PAGED_OP_APPEND: return "APPEND";
    case PAGED_OP_DECODE: return "DECODE";
    case PAGED_OP_PREFILL: return "PREFILL";
    case PAGED_OP_COPY: return "COPY";
    default: return "op";
    }
}

/*
 * Handles a failure of what: e is the error a call returned (cudaSuccess when the kernel
 * library only said PAGED_E_DEVICE). Clears a non-sticky error; a sticky one marks the
 * backend unhealthy and is logged once. Returns PAGED_E_DEVICE.
 */
static int device_error(struct cuda_backend *cb, const char *what, cudaError_t e)
{
    cudaError_t last = cudaGetLastError();
    if (e == cudaSuccess)
        e = last;
    /* A sticky error shows again in any call whatever cudaGetLastError did, a cleared one does
     * not. A query, not a synchronization: the stream may be waiting for a client's word. */
    cudaError_t again = cudaStreamQuery(cb->stream);
    if (again == cudaErrorNotReady)
        again = cudaSuccess;
    if (again != cudaSuccess || is_sticky(e)) {
        if (e == cudaSuccess)
            e = again;
        if (cb->healthy) {
            cb->healthy = 0;
            snprintf(cb->health, sizeof cb->health, "sticky CUDA error in %s: %s (%s)", what,
                     cudaGetErrorString(e), cudaGetErrorName(e));
            pd_log(PD_LOG_ERROR, "cuda device %d: %s; the context is lost: every request is "
                   "refused with PAGED_E_DEVICE until pagedd restarts", cb->dev.ordinal, cb->health);
        }
        return PAGED_E_DEVICE;
    }
    if (cb->warned < PD_CUDA_WARN_MAX || pd_log_enabled(PD_LOG_DEBUG)) {
        cb->warned++;
        pd_log(cb->warned <= PD_CUDA_WARN_MAX ? PD_LOG_WARNING : PD_LOG_DEBUG,
               "cuda device %d: %s failed: %s%s", cb->dev.ordinal, what,
               e != cudaSuccess ? cudaGetErrorString(e) : "the kernel launch was refused",
               cb->warned == PD_CUDA_WARN_MAX ? " (further such errors are logged at debug level)" : "");
    }
    return PAGED_E_DEVICE;
}

/* Refuses work on an unhealthy device: returns PAGED_E_DEVICE with *cause (may be NULL),
 * or PAGED_OK when the device is fine. */
static int check_health(struct cuda_backend *cb, char **cause)
{
    if (cb->healthy)
        return PAGED_OK;
    if (cause != NULL)
        return fail(PAGED_E_DEVICE, cause, "the GPU is unusable after an earlier error (%s); "
                    "restart pagedd", cb->health);
    return PAGED_E_DEVICE;
}

/* Checks that bytes more of device memory leave PD_CUDA_HEADROOM free. Returns PAGED_OK, or
 * PAGED_E_NOMEM / PAGED_E_DEVICE with *cause. */
static int room(struct cuda_backend *cb, uint64_t bytes, const char *what, char **cause)
{
    size_t free_b = 0, total = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total);
    if (e != cudaSuccess) {
        (void) device_error(cb, "cudaMemGetInfo", e);
        return fail(PAGED_E_DEVICE, cause, "%s: cudaMemGetInfo: %s", what, cudaGetErrorString(e));
    }
    if (bytes > free_b || free_b - bytes < PD_CUDA_HEADROOM)
        return fail(PAGED_E_NOMEM, cause, "%s of %llu bytes does not fit on the GPU: %llu bytes "
                    "free of %llu, and pagedd keeps %llu for its own buffers", what,
                    (unsigned long long) bytes, (unsigned long long) free_b,
                    (unsigned long long) total, (unsigned long long) PD_CUDA_HEADROOM);
    return PAGED_OK;
}

/* Returns PAGED_OK if bytes more of device memory leave the headroom free, waiting for the
 * reaper to give back departed clients' memory before it says no; else an error with *cause. */
static int check_room(struct cuda_backend *cb, uint64_t bytes, const char *what, char **cause)
{
    /* Departed clients' arenas may still be on their way back (cuda_reaper.h). */
    int rc = room(cb, bytes, what, cause);
    if (rc != PAGED_E_NOMEM)
        return rc;
    free(*cause);
    *cause = NULL;
    pd_cu_reaper_drain(&cb->reaper);
    return room(cb, bytes, what, cause);
}

/* Waits for everything queued on the stream and retires every batch in flight (reporting
 * late waits); a failed synchronization is a device error. Returns nothing. */
static void cuda_settle(pd_backend *b)
{
    struct cuda_backend *cb = b->priv;
    cudaError_t e = pd_cu_flight_settle(&cb->flight, cb->dep_timeout_ns);
    if (e != cudaSuccess) {
        device_error(cb, "queued batches", e);
        /* Nothing is in flight any more after a fault either. */
        pd_cu_flight_release_all(&cb->flight);
    }
}

/* Retires the finished batches and watches the oldest; returns whether any is in flight. */
static int cuda_tick(pd_backend *b)
{
    struct cuda_backend *cb = b->priv;
    return pd_cu_flight_poll(&cb->flight, cb->dep_timeout_ns);
}

/* Logs the device timing of the batches since the last report (PAGEDD_DEVICE_TIMING). */
static void cuda_report(pd_backend *b)
{
    struct cuda_backend *cb = b->priv;
    pd_cu_flight_report(&cb->flight);
}

/* Says whether the deferred batch with ticket has finished, retiring what has; see backend.h. */
static int cuda_done(pd_backend *b, uint64_t ticket)
{
    struct cuda_backend *cb = b->priv;
    /* A batch an earlier poll retired needs no event query. */
    int rc = pd_cu_flight_done(&cb->flight, ticket);
    if (rc == 0) {
        pd_cu_flight_poll(&cb->flight, cb->dep_timeout_ns);
        rc = pd_cu_flight_done(&cb->flight, ticket);
    }
    if (rc >= 0)
        return rc;
    /* The fault is sticky: the backend is unhealthy from now on (if it was not yet). */
    (void) device_error(cb, "batch", cb->flight.fault);
    return PAGED_E_DEVICE;
}

/* Says whether a batch could be queued now without waiting for an earlier one; see backend.h. */
static int cuda_room(pd_backend *b)
{
    struct cuda_backend *cb = b->priv;
    return pd_cu_flight_room(&cb->flight);
}

/* Allocates, zeroes and maps a pool's device memory; returns PAGED_OK or an error. The
 * zeroing synchronizes the stream, so everything queued is settled (watched) first. */
static int cuda_pool_create(pd_backend *b, pk_cache *cache, pd_pool_mem **out, char **cause)
{
    cuda_settle(b);
    struct cuda_backend *cb = b->priv;
    int rc = check_health(cb, cause);
    uint64_t bytes = pk_cache_bytes(cache);
    if (rc == PAGED_OK)
        rc = check_room(cb, bytes, "pool", cause);
    if (rc < 0)
        return rc;
    pd_pool_mem *m = calloc(1, sizeof *m);
    if (m == NULL)
        return fail(PAGED_E_NOMEM, cause, "out of memory");
    rc = pd_cu_mem_alloc(&cb->dev, bytes, "pool", &m->mem, cause);
    if (rc < 0) {
        free(m);
        return rc;
    }
    cache->base = m->mem.dptr;
    *out = m;
    return PAGED_OK;
}

/* Frees a pool's device memory once nothing queued can touch it; returns nothing. */
static void cuda_pool_destroy(pd_backend *b, pd_pool_mem *m)
{
    struct cuda_backend *cb = b->priv;
    if (m == NULL)
        return;
    cuda_settle(b);
    pd_cu_mem_free(&cb->dev, &m->mem);
    free(m);
}

/*
 * Exports a pool. A read-only attacher gets the same object as a writer: CUDA has no
 * read-only descriptor, so read-only is advisory here (the client maps it with read access
 * only, but holds what it needs to map it writable), as paged(7) says.
 */
static int cuda_pool_export(pd_backend *b, pd_pool_mem *m, int writable, struct pd_export *out,
                            char **cause)
{
    struct cuda_backend *cb = b->priv;
    (void) writable;
    memset(out, 0, sizeof *out);
    out->fd = -1;
    int rc = check_health(cb, cause);
    if (rc < 0)
        return rc;
    return pd_cu_mem_export(&cb->dev, &m->mem, out, cause);
}

/* Creates and exports a client's device data arena (settling first, as cuda_pool_create);
 * returns PAGED_OK or an error. */
static int cuda_arena_create(pd_backend *b, uint64_t size, pd_arena **out, struct pd_export *exp,
                             char **cause)
{
    cuda_settle(b);
    struct cuda_backend *cb = b->priv;
    memset(exp, 0, sizeof *exp);
    exp->fd = -1;
    int rc = check_health(cb, cause);
    if (rc == PAGED_OK)
        rc = check_room(cb, size, "data arena", cause);
    if (rc < 0)
        return rc;
    pd_arena *a = calloc(1, sizeof *a);
    if (a == NULL)
        return fail(PAGED_E_NOMEM, cause, "out of memory");
    rc = pd_cu_mem_alloc(&cb->dev, size, "data arena", &a->mem, cause);
    if (rc == PAGED_OK) {
        rc = pd_cu_mem_export(&cb->dev, &a->mem, exp, cause);
        if (rc < 0)
            pd_cu_mem_free(&cb->dev, &a->mem);
    }
    if (rc < 0) {
        free(a);
        return rc;
    }
    *out = a;
    return PAGED_OK;
}

/* Frees a client's data arena, unpins its host arena and unmaps its channel once nothing
 * queued can touch them, on the reaper's thread; returns nothing. */
static void cuda_arena_destroy(pd_backend *b, pd_arena *a, void *map, uint64_t map_size)
{
    struct cuda_backend *cb = b->priv;
    if (a == NULL) {
        if (map != NULL)
            paged_shm_unmap(map, map_size);
        return;
    }
    cuda_settle(b);
    /* Nothing queued uses them now; unpinning and freeing take tens of milliseconds, which
     * the reaper's thread spends instead of the engine. The channel is unmapped only after
     * its host arena is unpinned: a new channel mapped at the same address must not meet
     * the old registration. */
    pd_cu_reaper_put(&cb->reaper, a->host, &a->mem, map, map_size);
    free(a);
}

/* Pins and maps the client's host arena for its dependency words (settling first: no runtime
 * call that might wait for the device belongs where a stream may wait for a word); see
 * backend.h. */
static int cuda_host_register(pd_backend *b, pd_arena *a, void *host, uint64_t size, char **cause)
{
    cuda_settle(b);
    void *dev = NULL;
    cudaError_t e = cudaHostRegister(host, size, cudaHostRegisterMapped);
    if (e == cudaSuccess && (e = cudaHostGetDevicePointer(&dev, host, 0)) != cudaSuccess)
        (void) cudaHostUnregister(host);
    if (e != cudaSuccess) {
        (void) cudaGetLastError();
        return fail(PAGED_E_NOTSUP, cause, "cudaHostRegister of %llu bytes: %s", (unsigned long long) size,
                    cudaGetErrorString(e));
    }
    a->host = host;
    a->host_dev = dev;
    return PAGED_OK;
}

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
        return device_error(cb, "staging allocation", e);
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

/* Queues one prepared launch on the stream; returns the kernel library's status. */
static int launch(struct cuda_backend *cb, const struct pd_cu_launch *cl)
{
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
    return rc == PAGED_E_DEVICE ? device_error(cb, op_name(kind), cudaSuccess) : rc;
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

/* Makes the per-launch array hold n launches; returns PAGED_OK or PAGED_E_NOMEM. */
static int launch_reserve(struct cuda_backend *cb, uint32_t n)
{
    if (n <= cb->launch_cap)
        return PAGED_OK;
    size_t cap = cb->launch_cap != 0 ? cb->launch_cap : 64;
    while (cap < n)
        cap *= 2;
    struct pd_cu_launch *p = realloc(cb->launch, cap * sizeof *p);
    if (p == NULL)
        return PAGED_E_NOMEM;
    cb->launch = p;
    cb->launch_cap = cap;
    return PAGED_OK;
}

/* Makes the fusion's partner array hold n entries; returns PAGED_OK or PAGED_E_NOMEM. */
static int partner_reserve(struct cuda_backend *cb, uint32_t n)
{
    if (n <= cb->partner_cap)
        return PAGED_OK;
    uint32_t *p = realloc(cb->partner, (size_t) n * sizeof *p);
    if (p == NULL)
        return PAGED_E_NOMEM;
    cb->partner = p;
    cb->partner_cap = n;
    return PAGED_OK;
}

/* Gives every op of batch the status rc; returns nothing. */
static void fail_all(struct pd_batch *batch, int rc)
{
    for (uint32_t i = 0; i < batch->nops; i++)
        batch->ops[i].status = rc;
}

/* Returns whether op carries the dependency flag (PAGED_SQE_WAIT or _SIGNAL) on a word of
 * this backend's: its client has a device data arena. */
static int device_dep(const struct pd_batch_op *op, unsigned flag)
{
    return (op->op->flags & flag) != 0 && op->arenas.data != NULL;
}

/* Returns whether every op of batch signals a device word, so that it may complete at launch. */
static int all_signal(const struct pd_batch *batch)
{
    for (uint32_t i = 0; i < batch->nops; i++)
        if (!device_dep(&batch->ops[i], PAGED_SQE_SIGNAL))
            return 0;
    return batch->nops != 0;
}

/* Returns the device address of op's wait word (wait) or signal word: in its data arena, or
 * in its registered host arena (PAGED_SQE_HOST_WORDS). */
static uint32_t *dep_word(const struct pd_batch_op *op, int wait)
{
    unsigned char *base = (op->op->flags & PAGED_SQE_HOST_WORDS) ? op->arenas.data->host_dev : pd_cu_op_data(op);
    return (uint32_t *) (base + (wait ? op->op->wait_off : op->op->signal_off));
}

/* Stream memory operations queued per driver call. */
#define PD_CUDA_MEMOPS 64u

/*
 * Queues, PD_CUDA_MEMOPS at a time, a wait (cuStreamBatchMemOp, CU_STREAM_WAIT_VALUE_GEQ: the
 * wrapping comparison the protocol promises) for every waited word of the ops still fine,
 * recording each in slot s for the watchdog (wait 1), or a write of every signal word of them,
 * ordered after all earlier work with a memory barrier (wait 0). Returns PAGED_OK or
 * PAGED_E_DEVICE.
 */
static int queue_deps(struct cuda_backend *cb, struct pd_batch *batch, struct pd_cu_slot *s, int wait)
{
    CUstreamBatchMemOpParams p[PD_CUDA_MEMOPS];
    unsigned n = 0;
    for (uint32_t i = 0; i <= batch->nops; i++) {
        if (i < batch->nops) {
            const struct pd_batch_op *op = &batch->ops[i];
            if (op->status != PAGED_OK || !device_dep(op, wait ? PAGED_SQE_WAIT : PAGED_SQE_SIGNAL))
                continue;
            CUdeviceptr addr = (CUdeviceptr) (uintptr_t) dep_word(op, wait);
            memset(&p[n], 0, sizeof p[n]);
            if (wait) {
                p[n].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
                p[n].waitValue.address = addr;
                p[n].waitValue.value = op->op->wait_value;
                p[n].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
                s->waits[s->nwaits++] = (struct pd_cu_wait) {
                    .addr = addr, .value = op->op->wait_value, .op = i, .holder = op->holder,
                    .off = op->op->wait_off,
                };
            } else {
                p[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
                p[n].writeValue.address = addr;
                p[n].writeValue.value = op->op->signal_value;
                p[n].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
            }
            if (++n < PD_CUDA_MEMOPS)
                continue;
        }
        if (n == 0)
            continue;
        CUresult r = cb->dev.drv.stream_batch_mem_op((CUstream) cb->stream, n, p, 0);
        if (r != CUDA_SUCCESS) {
            char buf[160];
            pd_log(PD_LOG_WARNING, "cuda device %d: cuStreamBatchMemOp (%s): %s", cb->dev.ordinal,
                   wait ? "waits" : "signals", pd_cu_strerror(&cb->dev.drv, r, buf, sizeof buf));
            /* A sticky error shows in the next query of the stream: the backend turns unhealthy. */
            cudaError_t q = cudaStreamQuery(cb->stream);
            if (q != cudaSuccess && q != cudaErrorNotReady)
                return device_error(cb, "dependency words", q);
            return PAGED_E_DEVICE;
        }
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
    cudaError_t e = upload(cb, cb->meta_host, cb->meta_len);
    return e == cudaSuccess ? PAGED_OK : device_error(cb, "metadata upload", e);
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
    int rc = launch(cb, cl);
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
        rc = cb->healthy ? launch(cb, cl) : PAGED_E_DEVICE;
    }
    if (rc == PAGED_OK)
        la->merged = ok_ops(batch, la) > 1;
    else if (la->count > 1 && rc != PAGED_E_DEVICE && cl->kind == PAGED_OP_APPEND)
        launch_split_append(cb, batch, la, &cl->a.append);
    else if (la->count > 1 && rc != PAGED_E_DEVICE)
        launch_split(cb, batch, la, &cl->a.decode);
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
    uint64_t w0 = pd_now_ns();
    cudaError_t e = ended ? pd_cu_flight_wait(&cb->flight, s, cb->dep_timeout_ns)
                          : pd_cu_flight_drain(&cb->flight, s, cb->stream, cb->dep_timeout_ns);
    batch->wait_ns = pd_now_ns() - w0;
    if (e != cudaSuccess) {
        /* A fault of one kernel cannot be told from the others' here, and it is sticky. */
        fail_ok(batch, device_error(cb, "batch", e), 0);
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
    cudaError_t e = cudaMemcpyAsync(cb->d_stage, host, len, cudaMemcpyHostToDevice, cb->stream);
    if (e != cudaSuccess)
        return e;
    if (len > cb->last_cap) {
        unsigned char *p = realloc(cb->last_stage, len);
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
static void cuda_run_batch(pd_backend *b, struct pd_batch *batch)
{
    struct cuda_backend *cb = b->priv;
    uint64_t t0 = pd_now_ns();
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
    int rc = launch_reserve(cb, batch->nlaunches);
    if (rc < 0) {
        fail_all(batch, rc);
        return;
    }
    cb->fused = cb->fuse_enabled && partner_reserve(cb, batch->nops) == PAGED_OK
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
        cuda_settle(b);
    rc = stage_grow(cb, stage_need);
    uint32_t nwaits = 0;
    for (uint32_t i = 0; i < batch->nops; i++)
        nwaits += device_dep(&batch->ops[i], PAGED_SQE_WAIT);
    struct pd_cu_slot *slot = NULL;
    if (rc == PAGED_OK) {
        cudaError_t e = pd_cu_flight_begin(&cb->flight, stage_need, nwaits, cb->dep_timeout_ns, &slot);
        if (e != cudaSuccess)
            rc = e == cudaErrorMemoryAllocation ? PAGED_E_NOMEM : device_error(cb, "staging slot", e);
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

    uint64_t t1 = pd_now_ns();
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
    uint64_t t2 = pd_now_ns();
    batch->upload_ns = t2 - t1;
    if (e != cudaSuccess) {
        fail_all(batch, device_error(cb, what, e));
        finish(cb, batch, slot, 0);
        return;
    }
    rc = queue_deps(cb, batch, slot, 1);
    if (rc != PAGED_OK)
        fail_ok(batch, rc, 0);
    queue_launches(cb, batch);
    /* Every op that ran signals, also one whose wait the watchdog released: the worker's
     * stream may already wait for the word, and the completion or the disconnection says
     * what failed. */
    rc = queue_deps(cb, batch, slot, 0);
    if (rc != PAGED_OK)
        fail_ok(batch, rc, PAGED_SQE_SIGNAL);
    int early = cb->healthy && all_signal(batch);
    /* Deferred (the engine posts the completions once the slot retires): none of its ops
     * waits or signals, so neither the watchdog nor finish() has anything to read back. */
    int defer = !early && cb->healthy && batch->may_defer && nwaits == 0;
    e = pd_cu_flight_end(&cb->flight, slot, cb->stream, !early && !defer);
    batch->queue_ns = pd_now_ns() - t2;
    if (e == cudaSuccess && early) {
        batch->early = 1;
        return;
    }
    if (e == cudaSuccess && defer) {
        batch->ticket = slot->ticket;
        return;
    }
    if (e != cudaSuccess)
        (void) device_error(cb, "batch event", e);
    /* Also when every launch was refused: the metadata copy is in flight. */
    finish(cb, batch, slot, e == cudaSuccess);
}

/* Describes the backend; returns nothing. */
static void cuda_info(pd_backend *b, struct pd_backend_info *out)
{
    struct cuda_backend *cb = b->priv;
    memset(out, 0, sizeof *out);
    out->kind = PAGED_BACKEND_CUDA;
    out->device_ordinal = cb->dev.ordinal;
    memcpy(out->device_uuid, cb->uuid, sizeof out->device_uuid);
    snprintf(out->device_name, sizeof out->device_name, "%s", cb->name);
    if (cb->healthy) {
        size_t free_b = 0, total = 0;
        if (cudaMemGetInfo(&free_b, &total) == cudaSuccess)
            out->device_mem_free = free_b;
        else
            (void) cudaGetLastError();
    }
    out->healthy = cb->healthy;
    snprintf(out->health, sizeof out->health, "%s", cb->health);
}

/* Frees the backend's buffers and stream (pools and arenas are gone); returns nothing. */
static void cuda_destroy(pd_backend *b)
{
    struct cuda_backend *cb = b->priv;
    /* Errors here change nothing: the daemon is going away, or never started. */
    if (cb->stream != NULL)
        cudaStreamSynchronize(cb->stream);
    pd_cu_reaper_stop(&cb->reaper);
    pd_cu_flight_free(&cb->flight);
    if (cb->d_stage != NULL)
        cudaFree(cb->d_stage);
    free(cb->last_stage);
    free(cb->partner);
    pf_scratch_free(&cb->fuse_scratch);
    if (cb->ws != NULL)
        cudaFree(cb->ws);
    if (cb->stream != NULL)
        cudaStreamDestroy(cb->stream);
    free(cb->launch);
    free(cb);
    free(b);
}

static const struct pd_backend_ops cuda_ops = {
    .name = "cuda",
    .pool_create = cuda_pool_create,
    .pool_destroy = cuda_pool_destroy,
    .pool_export = cuda_pool_export,
    .arena_create = cuda_arena_create,
    .arena_destroy = cuda_arena_destroy,
    .host_register = cuda_host_register,
    .run_batch = cuda_run_batch,
    .settle = cuda_settle,
    .tick = cuda_tick,
    .done = cuda_done,
    .room = cuda_room,
    .report = cuda_report,
    .info = cuda_info,
    .destroy = cuda_destroy,
};

/* Counts the devices; see backend.h. */
int pd_backend_cuda_probe(char *why, size_t whylen)
{
    /* Before the runtime starts: every kernel loaded at once. A kernel loaded lazily, at its
     * first launch, may wait for the device to go idle, and a stream waiting for a client's
     * dependency word (cuda_flight.h) would then hold the daemon, unwatched, until it comes. */
    const char *loading = getenv("CUDA_MODULE_LOADING");
    if (loading == NULL || strcmp(loading, "EAGER") != 0) {
        if (loading != NULL)
            pd_log(PD_LOG_INFO, "cuda: CUDA_MODULE_LOADING=%s overridden: pagedd loads its kernels eagerly",
                   loading);
        setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        /* No driver, or no device it can use: a machine for the cpu backend. */
        snprintf(why, whylen, "no usable CUDA driver or device (%s)", cudaGetErrorString(e));
        (void) cudaGetLastError();
        return 0;
    }
    if (n <= 0) {
        snprintf(why, whylen, "no CUDA device");
        return 0;
    }
    return n;
}

/* Sets up the device, the driver entry points, the stream and the names of cb; returns
 * PAGED_OK or an error with *cause. */
static int cuda_setup(struct cuda_backend *cb, int ordinal, char **cause)
{
    char buf[160];
    cb->dev.ordinal = ordinal;
    cudaError_t e = cudaSetDevice(ordinal);
    if (e == cudaSuccess)
        e = cudaFree(NULL);   /* makes the device's primary context current on this thread */
    if (e != cudaSuccess)
        return fail(PAGED_E_DEVICE, cause, "backend cuda: cannot use device %d: %s", ordinal,
                    cudaGetErrorString(e));
    const char *inl = getenv("PAGEDD_META_INLINE");   /* a benchmarking aid */
    cb->meta_inline_enabled = inl == NULL || strcmp(inl, "0") != 0;
    if (!cb->meta_inline_enabled)
        pd_log(PD_LOG_INFO, "cuda device %d: DECODE metadata is always uploaded (PAGEDD_META_INLINE=0)", ordinal);
    const char *fuse = getenv("PAGEDD_FUSE");
    cb->fuse_enabled = fuse == NULL || strcmp(fuse, "0") != 0;
    if (!cb->fuse_enabled)
        pd_log(PD_LOG_INFO, "cuda device %d: APPENDs are not fused into DECODE launches (PAGEDD_FUSE=0)", ordinal);
    char *why = NULL;
    int rc = pd_cu_driver_load(&cb->dev.drv, &why);
    if (rc == PAGED_OK) {
        const char *force = getenv("PAGEDD_CUDA_EXPORT");
        rc = pd_cu_device_setup(&cb->dev, force != NULL && strcmp(force, "ipc") == 0, &why);
    }
    if (rc < 0) {
        fail(rc, cause, "backend cuda: device %d: %s", ordinal, why != NULL ? why : "setup failed");
        free(why);
        return rc;
    }
    CUuuid u;
    CUresult r = cb->dev.drv.device_get_uuid(&u, cb->dev.dev);
    if (r != CUDA_SUCCESS)
        return fail(PAGED_E_DEVICE, cause, "backend cuda: device %d: cuDeviceGetUuid: %s", ordinal,
                    pd_cu_strerror(&cb->dev.drv, r, buf, sizeof buf));
    memcpy(cb->uuid, u.bytes, sizeof cb->uuid);
    struct cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, ordinal);
    if (e != cudaSuccess)
        return fail(PAGED_E_DEVICE, cause, "backend cuda: device %d: cudaGetDeviceProperties: %s",
                    ordinal, cudaGetErrorString(e));
    snprintf(cb->name, sizeof cb->name, "%.63s", prop.name);
    e = cudaStreamCreateWithFlags(&cb->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        cb->stream = NULL;
        return fail(PAGED_E_DEVICE, cause, "backend cuda: device %d: cudaStreamCreateWithFlags: %s",
                    ordinal, cudaGetErrorString(e));
    }
    cb->dev.stream = cb->stream;
    e = pd_cu_flight_init(&cb->flight, cb->backend);
    if (e != cudaSuccess)
        return fail(PAGED_E_DEVICE, cause, "backend cuda: device %d: the batches' events and watchdog: %s",
                    ordinal, cudaGetErrorString(e));
    cb->dep_timeout_ns = 1000000000ull;
    cb->healthy = 1;
    snprintf(cb->health, sizeof cb->health, "ok");
    return PAGED_OK;
}

/* Opens the cuda backend; see backend.h. */
pd_backend *pd_backend_cuda_open(const char *device, char **cause)
{
    char why[160];
    int count = pd_backend_cuda_probe(why, sizeof why);
    if (count == 0) {
        fail(-1, cause, "backend cuda: %s (use --backend cpu)", why);
        return NULL;
    }
    int ordinal = 0;
    if (resolve_device(device, count, &ordinal, cause) < 0)
        return NULL;
    pd_backend *b = calloc(1, sizeof *b);
    struct cuda_backend *cb = calloc(1, sizeof *cb);
    if (b == NULL || cb == NULL) {
        free(b);
        free(cb);
        fail(-1, cause, "out of memory");
        return NULL;
    }
    b->ops = &cuda_ops;
    b->priv = cb;
    cb->backend = b;
    pd_cu_reaper_init(&cb->reaper, &cb->dev);
    if (cuda_setup(cb, ordinal, cause) < 0) {
        cuda_destroy(b);
        return NULL;
    }
    char ubuf[48];
    pd_log(PD_LOG_INFO, "cuda backend on device %d (%s, %s): memory exported as %s%s", ordinal,
           cb->name, uuid_str(cb->uuid, ubuf, sizeof ubuf),
           cb->dev.vmm ? "POSIX descriptors of VMM allocations" : "legacy CUDA IPC handles",
           cb->dev.vmm ? "" : " (the device does not export VMM memory as descriptors, or "
                              "PAGEDD_CUDA_EXPORT=ipc)");
    return b;
}
