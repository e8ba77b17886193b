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

#include "daemon/backend.h"
#include "daemon/cuda_mem.h"
#include "daemon/log.h"

/*
 * Everything runs on the engine thread, on one non-blocking stream, and every op ends with
 * a cudaStreamSynchronize: run() returns only once the GPU work is done, so the completion
 * the engine posts next is never ahead of the outputs. The validated metadata of an op
 * (block tables, lengths, qo_indptr, slots, block ids, ALiBi slopes: private host copies
 * made by the validator) goes to the device in one cudaMemcpyAsync from a pinned staging
 * buffer into a device staging buffer, both grown as needed and reused, which is safe
 * because the previous op has finished by then.
 *
 * Health. A failed launch or a failed synchronization fails the op with PAGED_E_DEVICE. If
 * the error is sticky (the context is lost: an illegal address, a trap, a launch failure)
 * the backend logs it once, reports itself unhealthy in info() (pactl status shows it) and
 * refuses every later op, pool and arena with PAGED_E_DEVICE: serving from a broken context
 * would return garbage. Only a restart of pagedd recovers.
 *
 * Not done: a client asking to be signalled through an interprocess CUDA event instead of
 * the daemon synchronizing (DESIGN.md's option). The engine would record an event made with
 * cudaEventInterprocess on the stream, hand its cudaIpcEventHandle_t to the client once (a
 * WELCOME field), and post the completion at launch; the client would cudaStreamWaitEvent.
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
    struct pd_cu_device dev;
    cudaStream_t stream;
    uint8_t uuid[16];
    char name[64];
    unsigned char *h_stage;       /* pinned host staging */
    unsigned char *d_stage;       /* device staging */
    size_t stage_cap;             /* bytes of each */
    void *ws;                     /* decode/prefill workspace */
    size_t ws_cap;
    int healthy;
    char health[128];
    unsigned warned;              /* non-sticky errors logged so far */
};

struct pd_pool_mem {
    struct pd_cu_mem mem;
};

struct pd_arena {
    struct pd_cu_mem mem;
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
    /* A sticky error shows again here whatever cudaGetLastError did; a cleared one does not. */
    cudaError_t again = cudaDeviceSynchronize();
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
static int check_room(struct cuda_backend *cb, uint64_t bytes, const char *what, char **cause)
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

/* Allocates, zeroes and maps a pool's device memory; returns PAGED_OK or an error. */
static int cuda_pool_create(pd_backend *b, pk_cache *cache, pd_pool_mem **out, char **cause)
{
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

/* Frees a pool's device memory; returns nothing. */
static void cuda_pool_destroy(pd_backend *b, pd_pool_mem *m)
{
    struct cuda_backend *cb = b->priv;
    if (m == NULL)
        return;
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

/* Creates and exports a client's device data arena; returns PAGED_OK or an error. */
static int cuda_arena_create(pd_backend *b, uint64_t size, pd_arena **out, struct pd_export *exp,
                             char **cause)
{
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

/* Frees a client's data arena; returns nothing. */
static void cuda_arena_destroy(pd_backend *b, pd_arena *a)
{
    struct cuda_backend *cb = b->priv;
    if (a == NULL)
        return;
    pd_cu_mem_free(&cb->dev, &a->mem);
    free(a);
}

/* The metadata arrays of one op, laid out in the staging buffers. */
#define STAGE_MAX 5
struct staging {
    const void *src[STAGE_MAX];
    size_t bytes[STAGE_MAX];
    size_t off[STAGE_MAX];
    int n;
    size_t total;
};

/* Adds an array (NULL src: none) to s; returns its index, or -1 for NULL. */
static int stage_add(struct staging *s, const void *src, size_t bytes)
{
    if (src == NULL || s->n == STAGE_MAX)
        return -1;
    /* 256-byte alignment: whatever vector width a kernel reads the array with. */
    size_t off = (s->total + 255) & ~(size_t) 255;
    s->src[s->n] = src;
    s->bytes[s->n] = bytes;
    s->off[s->n] = off;
    s->total = off + bytes;
    return s->n++;
}

/* Returns the device address of array i of s after stage_upload, or NULL for -1. */
static void *stage_dev(const struct cuda_backend *cb, const struct staging *s, int i)
{
    return i < 0 || cb->d_stage == NULL ? NULL : cb->d_stage + s->off[i];
}

/* Makes both staging buffers hold at least need bytes. Returns PAGED_OK, PAGED_E_NOMEM, or
 * PAGED_E_DEVICE (through device_error when the runtime reports more than a lack of memory). */
static int stage_grow(struct cuda_backend *cb, size_t need)
{
    if (need <= cb->stage_cap)
        return PAGED_OK;
    size_t cap = PD_CUDA_STAGE_MIN;
    while (cap < need)
        cap *= 2;
    /* The previous op has finished (every run synchronizes), so nothing reads the old ones. */
    cudaFreeHost(cb->h_stage);
    cudaFree(cb->d_stage);
    cb->h_stage = NULL;
    cb->d_stage = NULL;
    cb->stage_cap = 0;
    cudaError_t e = cudaHostAlloc((void **) &cb->h_stage, cap, cudaHostAllocDefault);
    if (e == cudaSuccess)
        e = cudaMalloc((void **) &cb->d_stage, cap);
    if (e != cudaSuccess) {
        cudaFreeHost(cb->h_stage);
        cb->h_stage = NULL;
        cb->d_stage = NULL;
        if (e == cudaErrorMemoryAllocation) {
            (void) cudaGetLastError();
            pd_log(PD_LOG_WARNING, "cuda device %d: no memory for %zu bytes of staging buffers",
                   cb->dev.ordinal, cap);
            return PAGED_E_NOMEM;
        }
        return device_error(cb, "staging allocation", e);
    }
    cb->stage_cap = cap;
    return PAGED_OK;
}

/* Copies every array of s to the device in one transfer, queued on the stream. Returns
 * PAGED_OK or an error. */
static int stage_upload(struct cuda_backend *cb, const struct staging *s)
{
    if (s->total == 0)
        return PAGED_OK;
    int rc = stage_grow(cb, s->total);
    if (rc < 0)
        return rc;
    for (int i = 0; i < s->n; i++)
        memcpy(cb->h_stage + s->off[i], s->src[i], s->bytes[i]);
    cudaError_t e = cudaMemcpyAsync(cb->d_stage, cb->h_stage, s->total, cudaMemcpyHostToDevice,
                                    cb->stream);
    if (e != cudaSuccess)
        return device_error(cb, "metadata upload", e);
    return PAGED_OK;
}

/* Returns a workspace of up to need bytes (the cached one, grown when it can be) and stores
 * its size; NULL with 0 when there is none. */
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

/* Waits for the op's GPU work and turns the launch's status rc and the synchronization's
 * into the op's status; returns it. */
static int finish(struct cuda_backend *cb, int opcode, int rc)
{
    cudaError_t e = cudaStreamSynchronize(cb->stream);
    if (e != cudaSuccess || rc == PAGED_E_DEVICE)
        return device_error(cb, op_name(opcode), e);
    return rc;
}

/* Runs one validated op on the device and waits for it; returns PAGED_OK or an error. */
static int cuda_run(pd_backend *b, const pk_cache *cache, pd_pool_mem *m,
                    const struct pd_arenas *ar, const struct pv_op *op)
{
    struct cuda_backend *cb = b->priv;
    (void) m;
    if (!cb->healthy)
        return PAGED_E_DEVICE;
    if (ar->data == NULL)
        return PAGED_E_INVAL;   /* every client of this backend has a device arena */
    unsigned char *data = ar->data->mem.dptr;
    struct staging st;
    memset(&st, 0, sizeof st);
    int i0 = -1, i1 = -1, i2 = -1, i3 = -1;
    size_t nseq = op->count;
    switch (op->opcode) {
    case PAGED_OP_APPEND:
        i0 = stage_add(&st, op->slots, (size_t) op->num_tokens * 4);
        break;
    case PAGED_OP_DECODE:
    case PAGED_OP_PREFILL:
        i0 = stage_add(&st, op->block_tables, nseq * op->bt_stride * 4);
        i1 = stage_add(&st, op->seq_lens, nseq * 4);
        i2 = stage_add(&st, op->alibi, (size_t) op->num_q_heads * 4);
        if (op->opcode == PAGED_OP_PREFILL)
            i3 = stage_add(&st, op->qo_indptr, (nseq + 1) * 4);
        break;
    case PAGED_OP_COPY:
        i0 = stage_add(&st, op->ids, nseq * 4);
        i1 = stage_add(&st, op->ids2, nseq * 4);
        break;
    default:
        return PAGED_E_NOTSUP;
    }
    int rc = stage_upload(cb, &st);
    if (rc < 0)
        return rc;
    pk_attn_opts opts = { op->sm_scale, op->soft_cap, op->window, stage_dev(cb, &st, i2) };
    size_t ws_size = 0;
    switch (op->opcode) {
    case PAGED_OP_APPEND: {
        pk_append_args a = {
            .cache = *cache, .layer_begin = op->layer_begin, .num_layers = op->num_layers,
            .num_tokens = (int32_t) op->num_tokens, .src_dtype = op->dtype,
            .k = data + op->k_off, .v = data + op->v_off, .slot_mapping = stage_dev(cb, &st, i0),
        };
        rc = pk_cuda_append(&a, cb->stream);
        break;
    }
    case PAGED_OP_DECODE: {
        pk_decode_args a = {
            .cache = *cache, .layer = op->layer_begin, .num_seqs = (int32_t) op->count,
            .num_q_heads = (int32_t) op->num_q_heads, .q_dtype = op->dtype,
            .q = data + op->q_off, .out = data + op->out_off,
            .block_tables = stage_dev(cb, &st, i0), .bt_stride = (int32_t) op->bt_stride,
            .seq_lens = stage_dev(cb, &st, i1), .opts = opts,
        };
        size_t need = pk_cuda_decode_workspace(&a);
        if (need > 0) {
            a.workspace = workspace(cb, need, &ws_size);
            a.workspace_size = ws_size;
        }
        rc = pk_cuda_decode(&a, cb->stream);
        break;
    }
    case PAGED_OP_PREFILL: {
        pk_prefill_args a = {
            .cache = *cache, .layer = op->layer_begin, .num_seqs = (int32_t) op->count,
            .num_q_heads = (int32_t) op->num_q_heads, .q_dtype = op->dtype, .causal = 1,
            .total_q = op->total_q, .max_qo_len = op->max_qo_len,
            .q = data + op->q_off, .out = data + op->out_off, .qo_indptr = stage_dev(cb, &st, i3),
            .block_tables = stage_dev(cb, &st, i0), .bt_stride = (int32_t) op->bt_stride,
            .seq_lens = stage_dev(cb, &st, i1), .opts = opts,
        };
        size_t need = pk_cuda_prefill_workspace(&a);
        if (need > 0) {
            a.workspace = workspace(cb, need, &ws_size);
            a.workspace_size = ws_size;
        }
        rc = pk_cuda_prefill(&a, cb->stream);
        break;
    }
    case PAGED_OP_COPY: {
        pk_copy_args a = {
            .cache = *cache, .num_pairs = (int32_t) op->count,
            .src_blocks = stage_dev(cb, &st, i0), .dst_blocks = stage_dev(cb, &st, i1),
        };
        rc = pk_cuda_copy(&a, cb->stream);
        break;
    }
    }
    /* Synchronize even when the launch was refused: the metadata copy may be in flight. */
    return finish(cb, op->opcode, rc);
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
    if (cb->h_stage != NULL)
        cudaFreeHost(cb->h_stage);
    if (cb->d_stage != NULL)
        cudaFree(cb->d_stage);
    if (cb->ws != NULL)
        cudaFree(cb->ws);
    if (cb->stream != NULL)
        cudaStreamDestroy(cb->stream);
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
    .run = cuda_run,
    .info = cuda_info,
    .destroy = cuda_destroy,
};

/* Counts the devices; see backend.h. */
int pd_backend_cuda_probe(char *why, size_t whylen)
{
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
