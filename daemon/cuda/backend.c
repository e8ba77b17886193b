/* backend.c: the cuda backend: the device, its health, pools and data arenas in its memory. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "daemon/cuda/cuda.h"
#include "daemon/cuda/internal.h"
#include "daemon/cuda/staging.h"
#include "daemon/cuda/units.h"
#include "daemon/engine/merged.h"
#include "daemon/util/knobs.h"
#include "daemon/util/heap.h"
#include "daemon/util/log.h"
#include "lib/core/shm.h"

/*
 * Everything runs on the engine thread, on one non-blocking stream. An engine pass arrives as
 * one batch: the waits for its requests' dependency words, its launches in order and the
 * writes of their signal words are queued on the stream, and the batch ends with ONE wait for
 * the device, so run_batch returns only once the GPU work is done and the completions the
 * engine posts next are never ahead of the outputs; or, when every request of the batch
 * signals a word, it returns at once (batch->early) and the words tell the clients when
 * (flight.h: the slots of the batches in flight and the watchdog over their waits). The
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
 * Dependency words, not interprocess CUDA events (the client's stream waiting for an event the
 * daemon records): a word the worker's stream waits for and one the daemon's stream waits for
 * serve both directions, and need no handle exchange.
 */

/* Device memory kept free beyond pools and arenas, for staging, workspaces and the kernels'
 * own needs, so a large pool cannot starve every later op. */
#define PD_CUDA_HEADROOM (128ull << 20)
/* Non-sticky device errors logged as warnings before they go to the debug level. */
#define PD_CUDA_WARN_MAX 16u
/* Reads the test aid knob (a count N > 0: the Nth thing of its kind goes wrong on purpose)
 * and logs it as "who: thing N will verb on purpose (PAGEDD_...)"; returns N, or 0 when
 * unset. */
static uint64_t test_aid(enum pd_knob knob, const char *who, const char *thing, const char *verb)
{
    const unsigned long long n = pd_knob(knob);
    if (n == 0)
        return 0;
    pd_log(PD_LOG_INFO, "%s: %s %llu will %s on purpose (%s)", who, thing, n, verb, pd_knob_name(knob));
    return n;
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

/* Picks the runtime device that one item of a device list names among count: digits an
 * index, else a UUID. Returns 0 with *ordinal, or -1 with *cause. */
static int resolve_device(const char *spec, int count, int *ordinal, char **cause)
{
    size_t n = strlen(spec);
    if (n > 0 && strspn(spec, "0123456789") == n) {
        long v = n <= 6 ? strtol(spec, NULL, 10) : -1;
        if (v < 0 || v >= count)
            return pd_cu_fail(-1, cause, "backend cuda: device %s does not exist (%d CUDA device%s "
                              "visible to pagedd)", spec, count, count == 1 ? "" : "s");
        *ordinal = (int) v;
        return 0;
    }
    uint8_t want[16];
    if (uuid_parse(spec, want) < 0)
        return pd_cu_fail(-1, cause, "backend cuda: device '%s' is neither an index nor a UUID "
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
    return pd_cu_fail(-1, cause, "backend cuda: no CUDA device visible to pagedd has UUID %s "
                      "(%d device%s visible; CUDA_VISIBLE_DEVICES?)", uuid_str(want, buf, sizeof buf),
                      count, count == 1 ? "" : "s");
}

/* Resolves a device list (cuda.h) among count devices into ordinals[0..*n) (at most max),
 * each once. Returns 0, or -1 with *cause. */
static int resolve_devices(const char *spec, int count, int *ordinals, int max, int *n, char **cause)
{
    *n = 0;
    if (spec == NULL || spec[0] == '\0' || strcmp(spec, "all") == 0) {
        for (int i = 0; i < count && i < max; i++)
            ordinals[(*n)++] = i;
        return 0;
    }
    const char *p = spec;
    while (*p != '\0') {
        size_t len = strcspn(p, ",");
        char item[64];
        if (len == 0 || len >= sizeof item)
            return pd_cu_fail(-1, cause, "backend cuda: device list '%s': an empty or overlong item", spec);
        memcpy(item, p, len);
        item[len] = '\0';
        int ordinal = 0;
        if (resolve_device(item, count, &ordinal, cause) < 0)
            return -1;
        for (int i = 0; i < *n; i++)
            if (ordinals[i] == ordinal)
                return pd_cu_fail(-1, cause, "backend cuda: device list '%s' names device %d twice", spec, ordinal);
        if (*n == max)
            return pd_cu_fail(-1, cause, "backend cuda: device list '%s' names more than %d devices", spec, max);
        ordinals[(*n)++] = ordinal;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
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

/*
 * Handles a failure of what: e is the error a call returned (cudaSuccess when the kernel
 * library only said PAGED_E_DEVICE). Clears a non-sticky error; a sticky one marks the
 * backend unhealthy and is logged once. Returns PAGED_E_DEVICE.
 */
int pd_cu_error(struct cuda_backend *cb, const char *what, cudaError_t e)
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
        return pd_cu_fail(PAGED_E_DEVICE, cause, "the GPU is unusable after an earlier error (%s); "
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
        (void) pd_cu_error(cb, "cudaMemGetInfo", e);
        return pd_cu_fail(PAGED_E_DEVICE, cause, "%s: cudaMemGetInfo: %s", what, cudaGetErrorString(e));
    }
    if (bytes > free_b || free_b - bytes < PD_CUDA_HEADROOM)
        return pd_cu_fail(PAGED_E_NOMEM, cause, "%s of %llu bytes does not fit on the GPU: %llu bytes "
                          "free of %llu, and pagedd keeps %llu for its own buffers", what,
                          (unsigned long long) bytes, (unsigned long long) free_b,
                          (unsigned long long) total, (unsigned long long) PD_CUDA_HEADROOM);
    return PAGED_OK;
}

/* Returns PAGED_OK if bytes more of device memory leave the headroom free, waiting for the
 * reaper to give back departed clients' memory before it says no; else an error with *cause. */
static int check_room(struct cuda_backend *cb, uint64_t bytes, const char *what, char **cause)
{
    /* Departed clients' arenas may still be on their way back (reaper.h). */
    int rc = room(cb, bytes, what, cause);
    if (rc != PAGED_E_NOMEM)
        return rc;
    free(*cause);
    *cause = NULL;
    pd_log(PD_LOG_DEBUG, "%s: a %s of %llu bytes waits for departed clients' memory to be freed", cb->who, what,
           (unsigned long long) bytes);
    pd_cu_reaper_drain(&cb->reaper);
    return room(cb, bytes, what, cause);
}

/* Waits for everything queued on the stream and retires every batch in flight (reporting
 * late waits); a failed synchronization is a device error. Returns nothing. */
void pd_cu_settle(pd_backend *b)
{
    struct cuda_backend *cb = b->priv;
    cudaError_t e = pd_cu_flight_settle(&cb->flight, cb->dep_timeout_ns);
    if (e != cudaSuccess) {
        pd_cu_error(cb, "queued batches", e);
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

/* Logs the device timing of the batches since the last report (PAGEDD_DEVICE_TIMING) at
 * level; returns nothing. */
static void cuda_report(pd_backend *b, enum pd_log_level level)
{
    struct cuda_backend *cb = b->priv;
    pd_cu_flight_report(&cb->flight, level);
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
    (void) pd_cu_error(cb, "batch", cb->flight.fault);
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
static int cuda_pool_create(pd_backend *b, uint32_t device, pk_cache *cache, pd_pool_mem **out, char **cause)
{
    (void) device;   /* one device: 0 */
    pd_cu_settle(b);
    struct cuda_backend *cb = b->priv;
    int rc = check_health(cb, cause);
    uint64_t bytes = pk_cache_bytes(cache);
    if (rc == PAGED_OK)
        rc = check_room(cb, bytes, "pool", cause);
    if (rc < 0)
        return rc;
    pd_pool_mem *m = pd_calloc(1, sizeof *m);
    if (m == NULL)
        return pd_cu_fail(PAGED_E_NOMEM, cause, "out of memory");
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
    pd_cu_settle(b);
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
static int cuda_arena_create(pd_backend *b, uint32_t device, uint64_t size, pd_arena **out, struct pd_export *exp,
                             char **cause)
{
    (void) device;   /* one device: 0 */
    pd_cu_settle(b);
    struct cuda_backend *cb = b->priv;
    memset(exp, 0, sizeof *exp);
    exp->fd = -1;
    int rc = check_health(cb, cause);
    if (rc == PAGED_OK)
        rc = check_room(cb, size, "data arena", cause);
    if (rc < 0)
        return rc;
    pd_arena *a = pd_calloc(1, sizeof *a);
    if (a == NULL)
        return pd_cu_fail(PAGED_E_NOMEM, cause, "out of memory");
    pd_cu_look_init(&a->look);
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
            pcore_shm_unmap(map, map_size);
        return;
    }
    pd_cu_settle(b);
    pd_cu_look_free(&cb->prober, &a->look);
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
    pd_cu_settle(b);
    void *dev = NULL;
    cudaError_t e = cudaHostRegister(host, size, cudaHostRegisterMapped);
    if (e == cudaSuccess && (e = cudaHostGetDevicePointer(&dev, host, 0)) != cudaSuccess)
        (void) cudaHostUnregister(host);
    if (e != cudaSuccess) {
        (void) cudaGetLastError();
        return pd_cu_fail(PAGED_E_NOTSUP, cause, "cudaHostRegister of %llu bytes: %s", (unsigned long long) size,
                          cudaGetErrorString(e));
    }
    a->host = host;
    a->host_dev = dev;
    return PAGED_OK;
}

/* Describes the backend; returns nothing. */
static void cuda_info(pd_backend *b, uint32_t device, struct pd_backend_info *out)
{
    (void) device;   /* one device: 0 */
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

/* Makes the backend's device current on this thread; see backend.h. */
static int cuda_enter(pd_backend *b, char **cause)
{
    struct cuda_backend *cb = b->priv;
    cudaError_t e = cudaSetDevice(cb->dev.ordinal);
    if (e != cudaSuccess)
        return pd_cu_fail(PAGED_E_DEVICE, cause, "cuda device %d: cudaSetDevice: %s", cb->dev.ordinal,
                          cudaGetErrorString(e));
    return PAGED_OK;
}

/* Enables peer access from b's device to other's, so that a COPY on b writes other's pools
 * and the peers' staging copies reach them; see backend.h. */
static int cuda_reach(pd_backend *b, pd_backend *other, char **cause)
{
    struct cuda_backend *cb = b->priv;
    const struct cuda_backend *ob = other->priv;
    int can = 0;
    cudaError_t e = cudaSetDevice(cb->dev.ordinal);
    if (e == cudaSuccess)
        e = cudaDeviceCanAccessPeer(&can, cb->dev.ordinal, ob->dev.ordinal);
    if (e == cudaSuccess && !can)
        return pd_cu_fail(PAGED_E_NOTSUP, cause, "cuda device %d cannot access device %d's memory (no peer access)",
                          cb->dev.ordinal, ob->dev.ordinal);
    if (e == cudaSuccess) {
        e = cudaDeviceEnablePeerAccess(ob->dev.ordinal, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) {
            (void) cudaGetLastError();
            e = cudaSuccess;
        }
    }
    if (e != cudaSuccess) {
        (void) cudaGetLastError();
        return pd_cu_fail(PAGED_E_DEVICE, cause, "cuda device %d: peer access to device %d: %s", cb->dev.ordinal,
                          ob->dev.ordinal, cudaGetErrorString(e));
    }
    /* A VMM allocation is reached only by the devices its mapping names: other's new pools
     * and arenas name b's device from now on (mem.c's vmm_alloc). */
    struct cuda_backend *om = other->priv;
    if (om->dev.npeers >= PD_CU_MAX_PEERS)
        return pd_cu_fail(PAGED_E_NOTSUP, cause, "cuda device %d: more than %d other devices", ob->dev.ordinal,
                          PD_CU_MAX_PEERS);
    om->dev.peers[om->dev.npeers++] = cb->dev.dev;
    return PAGED_OK;
}

/* Frees the backend's buffers and stream (pools and arenas are gone); returns nothing. */
static void cuda_destroy(pd_backend *b)
{
    struct cuda_backend *cb = b->priv;
    /* Errors here change nothing: the daemon is going away, or never started. */
    if (cb->stream != NULL)
        cudaStreamSynchronize(cb->stream);
    pd_cu_reaper_stop(&cb->reaper);
    pd_cu_units_free(&cb->units);
    if (cb->sums_dev != NULL)
        cudaFree(cb->sums_dev);
    pd_cu_flight_free(&cb->flight);
    pd_cu_prober_free(&cb->prober);
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

/* Looks at a client's dependency word without waiting on the device (probe.h); see backend.h. */
static int cuda_probe(pd_backend *b, pd_arena *a, uint64_t off, uint32_t value, int fresh)
{
    struct cuda_backend *cb = b->priv;
    if (!cb->healthy)
        return PAGED_E_DEVICE;
    cudaError_t e = cudaSuccess;
    int seen = pd_cu_look(&cb->prober, &a->look, a->mem.dptr, off, value, fresh, &e);
    if (seen < 0)
        return e == cudaErrorMemoryAllocation ? PAGED_E_NOMEM : pd_cu_error(cb, "dependency word look", e);
    return seen == 1 ? PD_PROBE_REACHED : seen == 0 ? PD_PROBE_SHORT : PD_PROBE_PENDING;
}

static const struct pd_backend_ops cuda_ops = {
    .name = "cuda",
    .pool_create = cuda_pool_create,
    .pool_destroy = cuda_pool_destroy,
    .pool_export = cuda_pool_export,
    .arena_create = cuda_arena_create,
    .arena_destroy = cuda_arena_destroy,
    .host_register = cuda_host_register,
    .probe = cuda_probe,
    .run_batch = pd_cu_run_batch,
    .settle = pd_cu_settle,
    .tick = cuda_tick,
    .done = cuda_done,
    .room = cuda_room,
    .report = cuda_report,
    .host_alloc = pd_cu_host_alloc,
    .host_free = pd_cu_host_free,
    .units_copy = pd_cu_units_copy,
    .units_swap = pd_cu_units_swap,
    .dev_alloc = pd_cu_dev_alloc,
    .dev_free = pd_cu_dev_free,
    .units_sums = pd_cu_units_sums,
    .units_move = pd_cu_units_move,
    .info = cuda_info,
    .enter = cuda_enter,
    .reach = cuda_reach,
    .destroy = cuda_destroy,
};

/*
 * Writes into why (whylen bytes) what cudaGetDeviceCount's error e says is missing. The
 * runtime reports a machine with no driver at all as cudaErrorInsufficientDriver, whose text
 * suggests an upgrade: without libcuda (the driver version reads 0) or its device node
 * /dev/nvidiactl there is no driver to upgrade. Returns nothing.
 */
static void no_device_cause(cudaError_t e, char *why, size_t whylen)
{
    int drv = 0, rt = 0;
    if (e == cudaErrorInsufficientDriver) {
        if (cudaDriverGetVersion(&drv) != cudaSuccess)
            drv = 0;
        if (drv == 0 || access("/dev/nvidiactl", F_OK) != 0) {
            snprintf(why, whylen, "no CUDA driver on this machine (%s)",
                     drv == 0 ? "no libcuda.so.1" : "no /dev/nvidiactl");
            return;
        }
        if (cudaRuntimeGetVersion(&rt) != cudaSuccess)
            rt = 0;
        snprintf(why, whylen, "the CUDA driver (for CUDA %d.%d) is older than this pagedd's runtime (CUDA %d.%d): "
                 "upgrade the driver", drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
        return;
    }
    if (e == cudaErrorNoDevice) {
        snprintf(why, whylen, "no CUDA device on this machine");
        return;
    }
    snprintf(why, whylen, "no usable CUDA driver or device (%s)", cudaGetErrorString(e));
}

/* Counts the devices; see backend.h. */
int pd_backend_cuda_probe(char *why, size_t whylen)
{
    /* Before the runtime starts: every kernel loaded at once. A kernel loaded lazily, at its
     * first launch, may wait for the device to go idle, and a stream waiting for a client's
     * dependency word (flight.h) would then hold the daemon, unwatched, until it comes.
     * The CUDA runtime's variable, not one of pagedd's knobs (daemon/util/knobs.h). */
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
        no_device_cause(e, why, whylen);
        (void) cudaGetLastError();
        return 0;
    }
    if (n <= 0) {
        snprintf(why, whylen, "no CUDA device on this machine");
        return 0;
    }
    return n;
}

/*
 * Returns when device ordinal's backend waits for and writes dependency words by kernels
 * (pk_cuda_dep_wait): 0 never, 1 in batches holding several clients' words or attending over
 * many sequences (batch.c, dep_census), 2 always.
 * PAGEDD_DEP_KERNELS=0, 1 or 2 says, else 1 under MPS and 0 without. Under MPS a stream's
 * memory operations cost the most where many clients' streams wait on the device at once
 * (HACKING.md has the figures), while one client's chain of short layers pays more for the
 * kernels' launches than it saves; without MPS a kernel that polls holds the GPU until the
 * context's time slice ends, while the worker's context that would write the word waits for
 * it, and the stream operations are the fast way.
 */
static int dep_by_kernels(int ordinal)
{
    if (pd_knob_is_set(PD_KNOB_DEP_KERNELS)) {
        static const char *const how[] = { "stream memory operations",
                                           "kernels where a batch holds several clients' words or many sequences",
                                           "kernels" };
        const int force = (int) pd_knob(PD_KNOB_DEP_KERNELS);
        pd_log(PD_LOG_INFO, "cuda device %d: dependency words by %s (PAGEDD_DEP_KERNELS=%d)", ordinal,
               how[force], force);
        return force;
    }
    int mps = 0;
    if (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, ordinal) != cudaSuccess) {
        (void) cudaGetLastError();
        mps = 0;
    }
    if (mps)
        pd_log(PD_LOG_INFO, "cuda device %d: under MPS: dependency words are waited for and written by kernels "
               "in batches that hold several clients' words or many sequences", ordinal);
    return mps != 0;
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
        return pd_cu_fail(PAGED_E_DEVICE, cause, "backend cuda: cannot use device %d: %s", ordinal,
                          cudaGetErrorString(e));
    cb->meta_inline_enabled = pd_knob(PD_KNOB_META_INLINE) != 0;
    if (!cb->meta_inline_enabled)
        pd_log(PD_LOG_INFO, "cuda device %d: DECODE metadata is always uploaded (PAGEDD_META_INLINE=0)", ordinal);
    cb->fuse_enabled = pd_knob(PD_KNOB_FUSE) != 0;
    if (!cb->fuse_enabled)
        pd_log(PD_LOG_INFO, "cuda device %d: APPENDs are not fused into DECODE launches (PAGEDD_FUSE=0)", ordinal);
    snprintf(cb->who, sizeof cb->who, "cuda device %d", ordinal);
    cb->refuse_merged = pm_refuse_merged(cb->who);
    cb->fault_after = test_aid(PD_KNOB_FAULT_AFTER, cb->who, "batch", "fault");
    cb->fail_upload_at = test_aid(PD_KNOB_FAIL_UPLOAD_AT, cb->who, "metadata upload", "fail");
    char *why = NULL;
    int rc = pd_cu_driver_load(&cb->dev.drv, &why);
    if (rc == PAGED_OK) {
        rc = pd_cu_device_setup(&cb->dev, pd_knob(PD_KNOB_CUDA_EXPORT) == PD_KNOB_EXPORT_IPC, &why);
    }
    if (rc < 0) {
        pd_cu_fail(rc, cause, "backend cuda: device %d: %s", ordinal, why != NULL ? why : "setup failed");
        free(why);
        return rc;
    }
    CUuuid u;
    CUresult r = cb->dev.drv.device_get_uuid(&u, cb->dev.dev);
    if (r != CUDA_SUCCESS)
        return pd_cu_fail(PAGED_E_DEVICE, cause, "backend cuda: device %d: cuDeviceGetUuid: %s", ordinal,
                          pd_cu_strerror(&cb->dev.drv, r, buf, sizeof buf));
    memcpy(cb->uuid, u.bytes, sizeof cb->uuid);
    struct cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, ordinal);
    if (e != cudaSuccess)
        return pd_cu_fail(PAGED_E_DEVICE, cause, "backend cuda: device %d: cudaGetDeviceProperties: %s",
                          ordinal, cudaGetErrorString(e));
    snprintf(cb->name, sizeof cb->name, "%.63s", prop.name);
    cb->dep_kernels = dep_by_kernels(ordinal);
    if (cb->dep_kernels && pk_cuda_dep_load() != 0) {
        pd_log(PD_LOG_WARNING, "cuda device %d: the dependency kernels did not load: dependency words by stream "
               "memory operations", ordinal);
        cb->dep_kernels = 0;
    }
    e = cudaStreamCreateWithFlags(&cb->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        cb->stream = NULL;
        return pd_cu_fail(PAGED_E_DEVICE, cause, "backend cuda: device %d: cudaStreamCreateWithFlags: %s",
                          ordinal, cudaGetErrorString(e));
    }
    cb->dev.stream = cb->stream;
    e = pd_cu_flight_init(&cb->flight, cb->backend);
    if (e != cudaSuccess)
        return pd_cu_fail(PAGED_E_DEVICE, cause, "backend cuda: device %d: the batches' events and watchdog: %s",
                          ordinal, cudaGetErrorString(e));
    cb->flight.fail_event_at = test_aid(PD_KNOB_FAIL_EVENT_AT, cb->who, "the event of batch", "fail");
    cb->dep_timeout_ns = 1000000000ull;
    cb->healthy = 1;
    snprintf(cb->health, sizeof cb->health, "ok");
    return PAGED_OK;
}

/* Resolves the device list spec into runtime ordinals; see cuda.h. */
int pd_backend_cuda_devices(const char *spec, int *ordinals, int max, char **cause)
{
    char why[160];
    int count = pd_backend_cuda_probe(why, sizeof why);
    if (count == 0) {
        pd_cu_fail(-1, cause, "backend cuda: %s; -b cpu runs pagedd without a GPU", why);
        return -1;
    }
    int n = 0;
    if (resolve_devices(spec, count, ordinals, max, &n, cause) < 0)
        return -1;
    return n;
}

/* Opens the cuda backend on one device; see cuda.h. */
pd_backend *pd_backend_cuda_open(int ordinal, char **cause)
{
    pd_backend *b = pd_calloc(1, sizeof *b);
    struct cuda_backend *cb = pd_calloc(1, sizeof *cb);
    if (b == NULL || cb == NULL) {
        free(b);
        free(cb);
        pd_cu_fail(-1, cause, "out of memory");
        return NULL;
    }
    b->ops = &cuda_ops;
    b->priv = cb;
    b->runs_behind = 1;
    b->ndevices = 1;
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
