/* mem.c: the cuda backend's device memory: driver entry points and exportable allocations. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/cuda/mem.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "daemon/util/log.h"
#include "paged.h"

/*
 * The driver version whose entry points we ask for: every call used here has had its
 * present signature since CUDA 11.4 (cuDeviceGetUuid answers as _v2 does, the UUID of a MIG
 * instance itself, like libpaged's lookup of the device), and a driver for CUDA 12 or later
 * is what the kernels need anyway.
 */
#define PD_CU_DRIVER_VERSION 12000

/* Formats a message into *cause; see mem.h. */
int pd_cu_fail(int status, char **cause, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(cause, fmt, ap) < 0)
        *cause = NULL;
    va_end(ap);
    return status;
}

/* Returns the driver's words for r; see mem.h. */
const char *pd_cu_strerror(const struct pd_cu_driver *d, CUresult r, char *buf, size_t size)
{
    const char *name = NULL, *text = NULL;
    if (d->get_error_name == NULL || d->get_error_name(r, &name) != CUDA_SUCCESS)
        name = NULL;
    if (d->get_error_string == NULL || d->get_error_string(r, &text) != CUDA_SUCCESS)
        text = NULL;
    if (name != NULL && text != NULL)
        snprintf(buf, size, "%s: %s", name, text);
    else
        snprintf(buf, size, "CUDA driver error %d", (int) r);
    return buf;
}

/* Returns the paged_error for a failed driver call: out of memory or a device failure. */
static int cu_status(CUresult r)
{
    return r == CUDA_ERROR_OUT_OF_MEMORY ? PAGED_E_NOMEM : PAGED_E_DEVICE;
}

/* Returns the paged_error for a failed runtime call. */
static int rt_status(cudaError_t e)
{
    return e == cudaErrorMemoryAllocation ? PAGED_E_NOMEM : PAGED_E_DEVICE;
}

/* Looks one driver symbol up through the runtime into *slot (a function pointer's storage).
 * Returns PAGED_OK or PAGED_E_DEVICE with *cause. */
static int entry_point(const char *name, void *slot, char **cause)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, PD_CU_DRIVER_VERSION,
                                                     cudaEnableDefault, &q);
#else
    cudaError_t e = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &q);
#endif
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || fn == NULL) {
        const char *why = e != cudaSuccess ? cudaGetErrorString(e)
                          : q == cudaDriverEntryPointVersionNotSufficent
                              ? "the driver is older than CUDA 12.0"
                              : "symbol not found";
        return pd_cu_fail(PAGED_E_DEVICE, cause, "cudaGetDriverEntryPoint(%s): %s", name, why);
    }
    /* POSIX lets a data pointer to a function be converted back; memcpy says so plainly. */
    memcpy(slot, &fn, sizeof fn);
    return PAGED_OK;
}

/* Resolves the driver entry points; see mem.h. */
int pd_cu_driver_load(struct pd_cu_driver *d, char **cause)
{
    const struct {
        const char *name;
        void *slot;
    } syms[] = {
        { "cuGetErrorName", &d->get_error_name },
        { "cuGetErrorString", &d->get_error_string },
        { "cuCtxGetDevice", &d->ctx_get_device },
        { "cuDeviceGetAttribute", &d->device_get_attribute },
        { "cuDeviceGetUuid", &d->device_get_uuid },
        { "cuMemGetAllocationGranularity", &d->mem_get_granularity },
        { "cuMemCreate", &d->mem_create },
        { "cuMemRelease", &d->mem_release },
        { "cuMemExportToShareableHandle", &d->mem_export },
        { "cuMemAddressReserve", &d->address_reserve },
        { "cuMemAddressFree", &d->address_free },
        { "cuMemMap", &d->mem_map },
        { "cuMemUnmap", &d->mem_unmap },
        { "cuMemSetAccess", &d->mem_set_access },
        { "cuStreamBatchMemOp", &d->stream_batch_mem_op },
    };
    memset(d, 0, sizeof *d);
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        int rc = entry_point(syms[i].name, syms[i].slot, cause);
        if (rc < 0)
            return rc;
    }
    return PAGED_OK;
}

/* Fills the allocation properties of a pinned VMM allocation on d, exportable as a POSIX
 * descriptor; returns nothing. */
static void vmm_prop(const struct pd_cu_device *d, CUmemAllocationProp *prop)
{
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = (int) d->dev;
}

/* Finds the device and its export method; see mem.h. */
int pd_cu_device_setup(struct pd_cu_device *d, int force_ipc, char **cause)
{
    char buf[160];
    CUresult r = d->drv.ctx_get_device(&d->dev);
    if (r != CUDA_SUCCESS)
        return pd_cu_fail(PAGED_E_DEVICE, cause, "cuCtxGetDevice: %s",
                          pd_cu_strerror(&d->drv, r, buf, sizeof buf));
    int vmm = 0, posix_fd = 0;
    r = d->drv.device_get_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                    d->dev);
    if (r == CUDA_SUCCESS)
        r = d->drv.device_get_attribute(&posix_fd,
                                        CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                                        d->dev);
    if (r != CUDA_SUCCESS)
        return pd_cu_fail(PAGED_E_DEVICE, cause, "cuDeviceGetAttribute: %s",
                          pd_cu_strerror(&d->drv, r, buf, sizeof buf));
    d->vmm = vmm && posix_fd && !force_ipc;
    d->granularity = 0;
    if (d->vmm) {
        CUmemAllocationProp prop;
        vmm_prop(d, &prop);
        size_t g = 0;
        r = d->drv.mem_get_granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        if (r != CUDA_SUCCESS)
            return pd_cu_fail(PAGED_E_DEVICE, cause, "cuMemGetAllocationGranularity: %s",
                              pd_cu_strerror(&d->drv, r, buf, sizeof buf));
        if (g == 0 || (g & (g - 1)) != 0)
            return pd_cu_fail(PAGED_E_DEVICE, cause, "cuMemGetAllocationGranularity: %zu is not a power of two",
                              g);
        d->granularity = g;
    }
    return PAGED_OK;
}

/* Zeroes a fresh allocation on the backend's stream and waits. Returns PAGED_OK or an error
 * with *cause. */
static int zero(struct pd_cu_device *d, struct pd_cu_mem *m, const char *what, char **cause)
{
    cudaStream_t st = (cudaStream_t) d->stream;
    cudaError_t e = cudaMemsetAsync(m->dptr, 0, (size_t) m->alloc, st);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(st);
    if (e != cudaSuccess)
        return pd_cu_fail(rt_status(e), cause, "%s: zeroing %llu bytes: cudaMemsetAsync: %s", what,
                          (unsigned long long) m->alloc, cudaGetErrorString(e));
    return PAGED_OK;
}

/* Makes a VMM allocation of m->alloc bytes and maps it read-write here. Returns PAGED_OK or
 * an error with *cause; on failure nothing is left allocated. */
static int vmm_alloc(struct pd_cu_device *d, struct pd_cu_mem *m, const char *what, char **cause)
{
    char buf[160];
    CUmemAllocationProp prop;
    vmm_prop(d, &prop);
    CUdeviceptr p = 0;
    const char *step = "cuMemCreate";
    int have = 0, reserved = 0, mapped = 0;
    CUresult r = d->drv.mem_create(&m->handle, (size_t) m->alloc, &prop, 0);
    if (r == CUDA_SUCCESS) {
        have = 1;
        step = "cuMemAddressReserve";
        r = d->drv.address_reserve(&p, (size_t) m->alloc, d->granularity, 0, 0);
    }
    if (r == CUDA_SUCCESS) {
        reserved = 1;
        step = "cuMemMap";
        r = d->drv.mem_map(p, (size_t) m->alloc, 0, m->handle, 0);
    }
    if (r == CUDA_SUCCESS) {
        mapped = 1;
        step = "cuMemSetAccess";
        CUmemAccessDesc acc[1 + PD_CU_MAX_PEERS];
        memset(acc, 0, sizeof acc);
        for (int i = 0; i <= d->npeers; i++) {
            acc[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            acc[i].location.id = (int) (i == 0 ? d->dev : d->peers[i - 1]);
            acc[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        }
        r = d->drv.mem_set_access(p, (size_t) m->alloc, acc, (size_t) d->npeers + 1);
    }
    if (r == CUDA_SUCCESS) {
        m->dptr = (void *) (uintptr_t) p;
        return PAGED_OK;
    }
    int status = pd_cu_fail(cu_status(r), cause, "%s of %llu bytes: %s: %s", what,
                            (unsigned long long) m->alloc, step, pd_cu_strerror(&d->drv, r, buf, sizeof buf));
    if (mapped)
        d->drv.mem_unmap(p, (size_t) m->alloc);
    if (reserved)
        d->drv.address_free(p, (size_t) m->alloc);
    if (have)
        d->drv.mem_release(m->handle);
    m->handle = 0;
    return status;
}

/* Makes a cudaMalloc allocation of m->alloc bytes and its IPC handle. Returns PAGED_OK or an
 * error with *cause; on failure nothing is left allocated. */
static int ipc_alloc(struct pd_cu_device *d, struct pd_cu_mem *m, const char *what, char **cause)
{
    (void) d;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, (size_t) m->alloc);
    if (e != cudaSuccess) {
        /* An out-of-memory error is not sticky: clear it so the next call does not see it. */
        (void) cudaGetLastError();
        return pd_cu_fail(rt_status(e), cause, "%s of %llu bytes: cudaMalloc: %s", what,
                          (unsigned long long) m->alloc, cudaGetErrorString(e));
    }
    cudaIpcMemHandle_t h;
    _Static_assert(sizeof h == sizeof m->ipc, "cudaIpcMemHandle_t is 64 bytes");
    e = cudaIpcGetMemHandle(&h, p);
    if (e != cudaSuccess) {
        cudaFree(p);
        return pd_cu_fail(PAGED_E_DEVICE, cause, "%s: cudaIpcGetMemHandle: %s", what, cudaGetErrorString(e));
    }
    memcpy(m->ipc, &h, sizeof m->ipc);
    m->dptr = p;
    return PAGED_OK;
}

/* Allocates, maps and zeroes; see mem.h. */
int pd_cu_mem_alloc(struct pd_cu_device *d, uint64_t size, const char *what, struct pd_cu_mem *m,
                    char **cause)
{
    memset(m, 0, sizeof *m);
    if (size == 0 || size > SIZE_MAX / 2)
        return pd_cu_fail(PAGED_E_NOMEM, cause, "%s of %llu bytes: cannot be allocated", what,
                          (unsigned long long) size);
    m->size = size;
    m->vmm = d->vmm;
    if (d->vmm) {
        uint64_t g = d->granularity;
        m->alloc = (size + g - 1) & ~(g - 1);
    } else {
        /* Whole 2 MiB pages, as the driver hands them out anyway. */
        m->alloc = (size + (2u << 20) - 1) & ~(uint64_t) ((2u << 20) - 1);
    }
    int rc = d->vmm ? vmm_alloc(d, m, what, cause) : ipc_alloc(d, m, what, cause);
    if (rc < 0) {
        memset(m, 0, sizeof *m);
        return rc;
    }
    rc = zero(d, m, what, cause);
    if (rc < 0) {
        pd_cu_mem_free(d, m);
        return rc;
    }
    return PAGED_OK;
}

/* Unmaps and frees; see mem.h. */
void pd_cu_mem_free(struct pd_cu_device *d, struct pd_cu_mem *m)
{
    if (m->dptr == NULL)
        return;
    char buf[160];
    if (m->vmm) {
        CUdeviceptr p = (CUdeviceptr) (uintptr_t) m->dptr;
        /* Clients that mapped it keep the memory alive until they unmap: the driver counts
         * their mappings, so releasing our handle here takes nothing from them. */
        CUresult r = d->drv.mem_unmap(p, (size_t) m->alloc);
        if (r == CUDA_SUCCESS)
            r = d->drv.address_free(p, (size_t) m->alloc);
        CUresult r2 = d->drv.mem_release(m->handle);
        if (r != CUDA_SUCCESS || r2 != CUDA_SUCCESS)
            pd_log(PD_LOG_WARNING, "cuda: freeing %llu bytes of device memory: %s",
                   (unsigned long long) m->alloc,
                   pd_cu_strerror(&d->drv, r != CUDA_SUCCESS ? r : r2, buf, sizeof buf));
    } else {
        cudaError_t e = cudaFree(m->dptr);
        if (e != cudaSuccess)
            pd_log(PD_LOG_WARNING, "cuda: freeing %llu bytes of device memory: cudaFree: %s",
                   (unsigned long long) m->alloc, cudaGetErrorString(e));
    }
    memset(m, 0, sizeof *m);
}

/* Exports an allocation; see mem.h. */
int pd_cu_mem_export(struct pd_cu_device *d, const struct pd_cu_mem *m, struct pd_export *out,
                     char **cause)
{
    memset(out, 0, sizeof *out);
    out->fd = -1;
    out->alloc_bytes = m->alloc;
    if (!m->vmm) {
        out->mem_kind = PCORE_MEM_CUDA_IPC;
        memcpy(out->ipc_handle, m->ipc, sizeof out->ipc_handle);
        return PAGED_OK;
    }
    char buf[160];
    int fd = -1;
    /* For a POSIX descriptor the "shareable handle" is an int written at the address given. */
    CUresult r = d->drv.mem_export(&fd, m->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r != CUDA_SUCCESS || fd < 0)
        return pd_cu_fail(PAGED_E_DEVICE, cause, "cuMemExportToShareableHandle: %s",
                          r != CUDA_SUCCESS ? pd_cu_strerror(&d->drv, r, buf, sizeof buf)
                                      : "no descriptor returned");
    /* The daemon never execs, but a descriptor of device memory should not leak if it did. */
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0) {
        close(fd);
        return pd_cu_fail(PAGED_E_SYSTEM, cause, "cannot mark the exported descriptor close-on-exec");
    }
    out->mem_kind = PCORE_MEM_CUDA_VMM;
    out->fd = fd;
    return PAGED_OK;
}
