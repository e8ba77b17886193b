/* mem.h: the cuda backend's device memory: driver entry points and exportable allocations. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_CUDA_MEM_H
#define PAGED_DAEMON_CUDA_MEM_H

/*
 * Every pool and every client's data arena is one device allocation of its own, so that
 * exporting it exposes nothing else. Where the device can, it is a VMM allocation
 * (cuMemCreate, pinned on the device, with a POSIX file descriptor as its shareable handle),
 * reserved, mapped and made read-write in the daemon's own address space; each export is a
 * new descriptor (cuMemExportToShareableHandle). Where it cannot, it is a cudaMalloc
 * allocation exported as a legacy IPC handle (cudaIpcGetMemHandle). The client's side of
 * both is lib/cuda_driver.c.
 *
 * The driver API is reached only through the runtime's cudaGetDriverEntryPoint, so pagedd
 * links the static runtime and never libcuda: a pagedd built with CUDA starts on a machine
 * without a driver. Only the cuda backend's files include this header (it needs <cuda.h>).
 * Everything here runs on the engine thread, with the backend's device current.
 */

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "daemon/backend.h"
#include "daemon/cuda/probe.h"
#include "daemon/util/log.h"

/* The driver entry points the backend uses. */
struct pd_cu_driver {
    CUresult (*get_error_name)(CUresult, const char **);
    CUresult (*get_error_string)(CUresult, const char **);
    CUresult (*ctx_get_device)(CUdevice *);
    CUresult (*device_get_attribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*device_get_uuid)(CUuuid *, CUdevice);
    CUresult (*mem_get_granularity)(size_t *, const CUmemAllocationProp *,
                                    CUmemAllocationGranularity_flags);
    CUresult (*mem_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                           unsigned long long);
    CUresult (*mem_release)(CUmemGenericAllocationHandle);
    CUresult (*mem_export)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                           unsigned long long);
    CUresult (*address_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                        unsigned long long);
    CUresult (*mem_unmap)(CUdeviceptr, size_t);
    CUresult (*mem_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*stream_batch_mem_op)(CUstream, unsigned int, CUstreamBatchMemOpParams *, unsigned int);
};

/* The most other devices one device's allocations are mapped for. */
#define PD_CU_MAX_PEERS 15

/* The device allocations are made on, and how they are exported. */
struct pd_cu_device {
    struct pd_cu_driver drv;
    int ordinal;                 /* the runtime's device number (cudaSetDevice) */
    CUdevice dev;                /* the driver's handle of the same device */
    int vmm;                     /* 1: cuMemCreate + POSIX descriptors; 0: cudaMalloc + IPC */
    size_t granularity;          /* VMM: sizes are rounded up to a multiple of this */
    void *stream;                /* cudaStream_t the new memory is zeroed on */
    CUdevice peers[PD_CU_MAX_PEERS]; /* other devices of the daemon whose kernels and copies
                                  * reach this one's new VMM allocations (cuda_reach) */
    int npeers;
};

/* One exportable device allocation. */
struct pd_cu_mem {
    void *dptr;                  /* the daemon's device address of it */
    uint64_t size;               /* bytes asked for */
    uint64_t alloc;              /* bytes allocated and exported (>= size) */
    int vmm;                     /* how it was made (pd_cu_device.vmm at the time) */
    CUmemGenericAllocationHandle handle;  /* VMM: kept to export it again */
    unsigned char ipc[64];       /* legacy: the cudaIpcMemHandle_t bytes */
};

/* The cuda backend's record of a pool's memory (backend.h's pd_pool_mem). */
struct pd_pool_mem {
    struct pd_cu_mem mem;
};

/* The cuda backend's record of a client's data arena (backend.h's pd_arena). */
struct pd_arena {
    struct pd_cu_mem mem;
    void *host;                   /* the client's host arena, once registered (PCORE_SQE_HOST_WORDS) */
    unsigned char *host_dev;      /* its device address then */
    struct pd_cu_look look;       /* its dependency words' looks (probe.h) */
};

/*
 * Resolves every entry point of struct pd_cu_driver through the runtime (the device must
 * be current already). Returns PAGED_OK, or PAGED_E_DEVICE with *cause naming the symbol.
 */
int pd_cu_driver_load(struct pd_cu_driver *d, char **cause);

/*
 * Finds the driver handle of the current device and how to export from it: VMM with POSIX
 * descriptors when the device supports both, else legacy IPC (always when force_ipc).
 * d->drv and d->ordinal must be set. Returns PAGED_OK or PAGED_E_DEVICE with *cause.
 */
int pd_cu_device_setup(struct pd_cu_device *d, int force_ipc, char **cause);

/*
 * Allocates size bytes (what names them in messages: "pool", "data arena"), mapped
 * read-write for the daemon and zeroed, so no earlier user's data shows through. Returns
 * PAGED_OK, PAGED_E_NOMEM when the device is out of memory, or PAGED_E_DEVICE, with *cause
 * naming the call that failed and the driver's or runtime's words.
 */
int pd_cu_mem_alloc(struct pd_cu_device *d, uint64_t size, const char *what, struct pd_cu_mem *m,
                    char **cause);

/* Unmaps and frees an allocation; one with dptr NULL is ignored. Errors are logged only. */
void pd_cu_mem_free(struct pd_cu_device *d, struct pd_cu_mem *m);

/*
 * Fills *out so a client can map m: a new POSIX descriptor of the allocation (the caller
 * sends and closes it) or the legacy IPC handle. Returns PAGED_OK or PAGED_E_DEVICE /
 * PAGED_E_SYSTEM with *cause.
 */
int pd_cu_mem_export(struct pd_cu_device *d, const struct pd_cu_mem *m, struct pd_export *out,
                     char **cause);

/* Formats a message into *cause (NULL when out of memory), as the backend's setup and
 * allocation failures report theirs; returns status. */
int pd_cu_fail(int status, char **cause, const char *fmt, ...) PD_PRINTF(3, 4);

/* Returns the driver's name and description of r ("CUDA_ERROR_OUT_OF_MEMORY: out of memory")
 * in buf (size bytes). */
const char *pd_cu_strerror(const struct pd_cu_driver *d, CUresult r, char *buf, size_t size);

#endif
