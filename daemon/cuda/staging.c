/* staging.c: the cuda backend's part of the peers' transfers: staging buffers in device memory and their unit sums. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/cuda/staging.h"

#include "daemon/cuda/internal.h"
#include "kernels/kernels.h"

/*
 * With a UCX that moves GPU memory (cuda_ipc between the GPUs of a host, RDMA with GPUDirect
 * between hosts), the peers stage a transfer's units in device memory: the server gathers the
 * pool's blocks into them with device copies, the asker reads them straight into device
 * memory of its own and scatters them into its pool, and neither side's bytes cross the host.
 * The check of the bytes then runs on the GPU too (pk_unit_sum's kernel).
 */

/* Allocates device memory for a staging buffer; see staging.h. */
int pd_cu_dev_alloc(pd_backend *b, uint64_t size, void **out, char **cause)
{
    struct cuda_backend *cb = b->priv;
    *out = NULL;
    if (!cb->healthy)
        return pd_cu_fail(PAGED_E_DEVICE, cause, "the GPU is unusable after an earlier error");
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, size);
    if (e != cudaSuccess) {
        (void) cudaGetLastError();   /* not sticky: clear it */
        return pd_cu_fail(PAGED_E_NOMEM, cause, "a staging buffer of %llu bytes: cudaMalloc: %s",
                          (unsigned long long) size, cudaGetErrorString(e));
    }
    *out = p;
    return PAGED_OK;
}

/* Frees a staging buffer once nothing queued can use it; see staging.h. */
void pd_cu_dev_free(pd_backend *b, void *p, uint64_t size)
{
    (void) size;
    if (p == NULL)
        return;
    pd_cu_settle(b);
    cudaError_t e = cudaFree(p);
    if (e != cudaSuccess)
        (void) pd_cu_error(b->priv, "cudaFree of a staging buffer", e);
}

/* Makes the kept device array for the peers' unit sums hold n; see staging.h. */
int pd_cu_sums_room(struct cuda_backend *cb, uint32_t n, char **cause)
{
    /* The array is kept and grown, never freed per call: a cudaFree waits for the whole
     * device, the peers' gets running into other staging buffers included. */
    if (n <= cb->sums_cap)
        return PAGED_OK;
    uint64_t *grown = NULL;
    const uint32_t cap = n < 1024u ? 1024u : n;
    cudaError_t e = cudaMalloc((void **) &grown, (size_t) cap * sizeof *grown);
    if (e != cudaSuccess) {
        (void) cudaGetLastError();   /* out of memory is not sticky */
        return pd_cu_fail(PAGED_E_NOMEM, cause, "summing %u staged units: cudaMalloc: %s", n, cudaGetErrorString(e));
    }
    if (cb->sums_dev != NULL)
        (void) cudaFree(cb->sums_dev);
    cb->sums_dev = grown;
    cb->sums_cap = cap;
    return PAGED_OK;
}

/* Sums n units of device memory into host sums; see staging.h. */
int pd_cu_units_sums(pd_backend *b, const void *units, uint32_t n, uint64_t unit_bytes, uint64_t *sums,
                     char **cause)
{
    struct cuda_backend *cb = b->priv;
    if (!cb->healthy)
        return pd_cu_fail(PAGED_E_DEVICE, cause, "the GPU is unusable after an earlier error");
    if (n == 0)
        return PAGED_OK;
    cudaError_t e = pd_cu_units_stream(&cb->units);
    if (e != cudaSuccess)
        return pd_cu_fail(pd_cu_error(cb, "unit sums", e), cause, "summing %u staged units: %s", n,
                          cudaGetErrorString(e));
    int rc = pd_cu_sums_room(cb, n, cause);
    if (rc != PAGED_OK)
        return rc;
    rc = pk_cuda_unit_sums(units, n, unit_bytes, cb->sums_dev, cb->units.save_stream);
    if (rc != PAGED_OK)
        return pd_cu_fail(rc, cause, "summing %u staged units: the kernel was refused (%s)", n, paged_strerror(rc));
    e = cudaMemcpyAsync(sums, cb->sums_dev, (size_t) n * sizeof *sums, cudaMemcpyDeviceToHost, cb->units.save_stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cb->units.save_stream);
    if (e != cudaSuccess)
        return pd_cu_fail(pd_cu_error(cb, "unit sums", e), cause, "summing %u staged units: %s", n,
                          cudaGetErrorString(e));
    return PAGED_OK;
}
