/* units.c: the cuda backend's part of the tiers: pinned host memory and unit copies. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/cuda/units.h"

#include <string.h>

#include "daemon/cuda/internal.h"
#include "daemon/cuda/staging.h"

/* Allocates zeroed page-locked host memory; see units.h. */
int pd_cu_host_alloc(pd_backend *b, uint64_t size, void **out, char **cause)
{
    (void) b;
    *out = NULL;
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, size, cudaHostAllocPortable);   /* pinned for every device's copies */
    if (e != cudaSuccess) {
        (void) cudaGetLastError();   /* not sticky: clear it */
        return pd_cu_fail(PAGED_E_NOMEM, cause, "host tier of %llu bytes: cudaHostAlloc: %s",
                          (unsigned long long) size, cudaGetErrorString(e));
    }
    memset(p, 0, size);
    *out = p;
    return PAGED_OK;
}

/* Frees page-locked host memory once nothing queued can use it; see units.h. */
void pd_cu_host_free(pd_backend *b, void *p, uint64_t size)
{
    (void) size;
    if (p == NULL)
        return;
    pd_cu_settle(b);
    cudaError_t e = cudaFreeHost(p);
    if (e != cudaSuccess)
        (void) pd_cu_error(b->priv, "cudaFreeHost of the host tier", e);
}

/* Returns the bytes of one block's piece of one layer's K or V. */
static size_t piece_bytes(const pk_cache *cache)
{
    return (size_t) cache->num_kv_heads * (size_t) cache->block_size * (size_t) cache->head_dim
           * pk_dtype_size(cache->dtype);
}

/* Queues the copy of block into unit (to_unit) or back on stream; returns the runtime's error. */
static cudaError_t copy_block(const pd_pool_mem *mem, const pk_cache *cache, int32_t block, unsigned char *unit,
                              int to_unit, cudaStream_t stream)
{
    const size_t piece = piece_bytes(cache);
    const size_t pitch = piece * (size_t) cache->num_blocks;   /* from one layer's K (or V) to the next */
    const size_t rows = (size_t) cache->num_layers * 2;
    unsigned char *dev = (unsigned char *) mem->mem.dptr + (size_t) block * piece;
    /* The unit is host memory (a tier, a host staging buffer) or device memory (a peers'
     * staging buffer in device memory): the address tells which (unified addressing). */
    if (to_unit)
        return cudaMemcpy2DAsync(unit, piece, dev, pitch, piece, rows, cudaMemcpyDefault, stream);
    return cudaMemcpy2DAsync(dev, pitch, unit, piece, piece, rows, cudaMemcpyDefault, stream);
}

/* Returns whether p is device memory of cb's device. */
static int on_this_device(const struct cuda_backend *cb, const void *p)
{
    struct cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        (void) cudaGetLastError();
        return 0;
    }
    return attr.type == cudaMemoryTypeDevice && attr.device == cb->dev.ordinal;
}

/* Returns whether n units can move in one kernel launch (pk_cuda_units_copy): they lie one
 * after another in device memory of this device (a peers' staging buffer), and there are few
 * enough. Else each block is a 2D copy of its own (host units: the tiers). */
static int one_launch(struct cuda_backend *cb, const pd_pool_mem *mem, const pk_cache *cache, uint32_t n,
                      unsigned char *const *units)
{
    if (n == 0 || n > PK_UNITS_MAX || mem == NULL)
        return 0;
    const size_t unit = piece_bytes(cache) * (size_t) cache->num_layers * 2;
    for (uint32_t i = 1; i < n; i++)
        if (units[i] != units[0] + (size_t) i * unit)
            return 0;
    return on_this_device(cb, units[0]);
}

/* Waits for the batches queued before the copies (settle watches their waits and retires
 * them), then for the copies on the backend's stream and, with both, the tiers' stream.
 * Returns PAGED_OK or an error with *cause. */
static int wait_copies(pd_backend *b, int both, char **cause)
{
    struct cuda_backend *cb = b->priv;
    pd_cu_settle(b);
    cudaError_t e = cudaStreamSynchronize(cb->stream);
    if (e == cudaSuccess && both)
        e = cudaStreamSynchronize(cb->units.save_stream);
    if (e != cudaSuccess)
        return pd_cu_fail(pd_cu_error(cb, "tier copies", e), cause, "the copies failed: %s", cudaGetErrorString(e));
    if (!cb->healthy)
        return pd_cu_fail(PAGED_E_DEVICE, cause, "the GPU failed during the copies");
    return PAGED_OK;
}

/* Makes the tiers' stream and events at first use; see units.h. */
cudaError_t pd_cu_units_stream(struct pd_cu_units *u)
{
    cudaError_t e = cudaSuccess;
    if (u->save_stream == NULL)
        e = cudaStreamCreateWithFlags(&u->save_stream, cudaStreamNonBlocking);
    if (e == cudaSuccess && u->saved == NULL)
        e = cudaEventCreateWithFlags(&u->saved, cudaEventDisableTiming);
    if (e == cudaSuccess && u->queued == NULL)
        e = cudaEventCreateWithFlags(&u->queued, cudaEventDisableTiming);
    return e;
}

/* Frees the tiers' stream and events; see units.h. */
void pd_cu_units_free(struct pd_cu_units *u)
{
    if (u->save_stream != NULL) {
        (void) cudaStreamSynchronize(u->save_stream);
        (void) cudaStreamDestroy(u->save_stream);
    }
    if (u->saved != NULL)
        (void) cudaEventDestroy(u->saved);
    if (u->queued != NULL)
        (void) cudaEventDestroy(u->queued);
    u->save_stream = NULL;
    u->saved = u->queued = NULL;
}

/* Saves and loads n blocks, the two directions overlapped; see units.h. */
int pd_cu_units_swap(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, uint32_t n, const int32_t *blocks,
                     unsigned char *const *save, unsigned char *const *load, char **cause)
{
    struct cuda_backend *cb = b->priv;
    if (!cb->healthy)
        return pd_cu_fail(PAGED_E_DEVICE, cause, "the GPU is unusable after an earlier error");
    struct pd_cu_units *u = &cb->units;
    cudaError_t e = pd_cu_units_stream(u);
    /* The saves start after everything queued before them, as the loads do on the stream. */
    if (e == cudaSuccess)
        e = cudaEventRecord(u->queued, cb->stream);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(u->save_stream, u->queued, 0);
    for (uint32_t i = 0; i < n && e == cudaSuccess; i++) {
        if (save[i] != NULL) {
            e = copy_block(mem, cache, blocks[i], save[i], 1, u->save_stream);
            /* A wait takes the event as last recorded, so one event serves every block. */
            if (e == cudaSuccess)
                e = cudaEventRecord(u->saved, u->save_stream);
            if (e == cudaSuccess)
                e = cudaStreamWaitEvent(cb->stream, u->saved, 0);
        }
        if (e == cudaSuccess)
            e = copy_block(mem, cache, blocks[i], load[i], 0, cb->stream);
    }
    if (e != cudaSuccess) {
        int rc = pd_cu_error(cb, "tier swap", e);
        (void) wait_copies(b, u->save_stream != NULL, cause);
        free(*cause);
        return pd_cu_fail(rc, cause, "queueing the tier copies: %s", cudaGetErrorString(e));
    }
    return wait_copies(b, 1, cause);
}

/* Launches pk_cuda_units_copy of n blocks and the units at units (sums_dev: NULL, or where
 * their sums go) on the backend's stream. Returns PAGED_OK, or the error with *cause once what
 * was queued is done. */
static int launch_units(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, int to_units, uint32_t n,
                        const int32_t *blocks, unsigned char *units, uint64_t *sums_dev, char **cause)
{
    struct cuda_backend *cb = b->priv;
    pk_cache c = *cache;
    c.base = mem->mem.dptr;
    const pk_units_args a = { .cache = c, .n = (int32_t) n, .blocks = blocks, .units = units, .to_units = to_units,
                              .sums = sums_dev };
    int rc = pk_cuda_units_copy(&a, cb->stream);
    if (rc == PAGED_OK)
        return PAGED_OK;
    int st = pd_cu_error(cb, to_units ? "gather of units" : "scatter of units", cudaGetLastError());
    (void) wait_copies(b, 0, cause);
    free(*cause);
    return pd_cu_fail(st < 0 ? st : rc, cause, "the units copy of %u blocks was refused (%s)", n, paged_strerror(rc));
}

/* Copies n blocks to or from units on the stream and waits; see units.h. */
int pd_cu_units_copy(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, int to_units, uint32_t n,
                     const int32_t *blocks, unsigned char *const *units, char **cause)
{
    struct cuda_backend *cb = b->priv;
    if (!cb->healthy)
        return pd_cu_fail(PAGED_E_DEVICE, cause, "the GPU is unusable after an earlier error");
    if (one_launch(cb, mem, cache, n, units)) {
        int rc = launch_units(b, mem, cache, to_units, n, blocks, units[0], NULL, cause);
        return rc != PAGED_OK ? rc : wait_copies(b, 0, cause);
    }
    for (uint32_t i = 0; i < n; i++) {
        cudaError_t e = copy_block(mem, cache, blocks[i], units[i], to_units, cb->stream);
        if (e != cudaSuccess) {
            int rc = pd_cu_error(cb, to_units ? "offload copy" : "reload copy", e);
            (void) wait_copies(b, 0, cause);
            free(*cause);
            return pd_cu_fail(rc, cause, "cudaMemcpy2DAsync of block %d: %s", blocks[i], cudaGetErrorString(e));
        }
    }
    return wait_copies(b, 0, cause);
}

/* Moves n blocks to or from the units at units and sums them in the same launch; see units.h. */
int pd_cu_units_move(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, int to_units, uint32_t n,
                     const int32_t *blocks, unsigned char *units, uint64_t *sums, char **cause)
{
    struct cuda_backend *cb = b->priv;
    if (!cb->healthy)
        return pd_cu_fail(PAGED_E_DEVICE, cause, "the GPU is unusable after an earlier error");
    if (n == 0)
        return PAGED_OK;
    if (n > PK_UNITS_MAX || !on_this_device(cb, units))
        return pd_cu_fail(PAGED_E_NOTSUP, cause, "%u units at %p are not one launch's on device %d", n, (void *) units,
                          cb->dev.ordinal);
    int rc = pd_cu_sums_room(cb, n, cause);
    if (rc != PAGED_OK)
        return rc;
    rc = launch_units(b, mem, cache, to_units, n, blocks, units, cb->sums_dev, cause);
    if (rc != PAGED_OK)
        return rc;
    cudaError_t e = cudaMemcpyAsync(sums, cb->sums_dev, (size_t) n * sizeof *sums, cudaMemcpyDeviceToHost, cb->stream);
    if (e != cudaSuccess) {
        int st = pd_cu_error(cb, "unit sums", e);
        (void) wait_copies(b, 0, cause);
        free(*cause);
        return pd_cu_fail(st, cause, "the sums of %u units: %s", n, cudaGetErrorString(e));
    }
    return wait_copies(b, 0, cause);
}
