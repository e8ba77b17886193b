/* units.c: the cuda backend's part of the tiers: pinned host memory and unit copies. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/cuda/units.h"

#include <string.h>

#include "daemon/cuda/internal.h"

/* Allocates zeroed page-locked host memory; see units.h. */
int pd_cu_host_alloc(pd_backend *b, uint64_t size, void **out, char **cause)
{
    (void) b;
    *out = NULL;
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, size, cudaHostAllocDefault);
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

/* Copies n blocks to or from units on the stream and waits; see units.h. */
int pd_cu_units_copy(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, int to_units, uint32_t n,
                     const int32_t *blocks, unsigned char *const *units, char **cause)
{
    struct cuda_backend *cb = b->priv;
    if (!cb->healthy)
        return pd_cu_fail(PAGED_E_DEVICE, cause, "the GPU is unusable after an earlier error");
    const size_t piece = (size_t) cache->num_kv_heads * (size_t) cache->block_size * (size_t) cache->head_dim
                         * pk_dtype_size(cache->dtype);
    const size_t pitch = piece * (size_t) cache->num_blocks;   /* from one layer's K (or V) to the next */
    const size_t rows = (size_t) cache->num_layers * 2;
    unsigned char *base = mem->mem.dptr;
    for (uint32_t i = 0; i < n; i++) {
        unsigned char *dev = base + (size_t) blocks[i] * piece;
        cudaError_t e;
        if (to_units)
            e = cudaMemcpy2DAsync(units[i], piece, dev, pitch, piece, rows, cudaMemcpyDeviceToHost, cb->stream);
        else
            e = cudaMemcpy2DAsync(dev, pitch, units[i], piece, piece, rows, cudaMemcpyHostToDevice, cb->stream);
        if (e != cudaSuccess) {
            int rc = pd_cu_error(cb, to_units ? "offload copy" : "reload copy", e);
            pd_cu_settle(b);
            return pd_cu_fail(rc, cause, "cudaMemcpy2DAsync of block %d: %s", blocks[i], cudaGetErrorString(e));
        }
    }
    /* The batches queued before first (settle watches their waits and retires them), then the
     * copies, which wait for nothing. */
    pd_cu_settle(b);
    cudaError_t e = cudaStreamSynchronize(cb->stream);
    if (e != cudaSuccess)
        return pd_cu_fail(pd_cu_error(cb, "tier copies", e), cause, "the copies failed: %s", cudaGetErrorString(e));
    if (!cb->healthy)
        return pd_cu_fail(PAGED_E_DEVICE, cause, "the GPU failed during the copies");
    return PAGED_OK;
}
