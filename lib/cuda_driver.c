/* cuda_driver.c: the few CUDA driver calls libpaged needs, loaded with dlopen on first use. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "lib/cuda_driver.h"
#include "lib/cuda_api.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paged.h"
#include "lib/core/proto.h"

/* Writes a formatted reason to err (errlen bytes), if there is room for one. */
void pc_cu_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Returns the driver's name for a result code, or "CUDA error". */
const char *pc_cu_str(const struct pc_cuda *cu, cu_result r)
{
    const char *s = NULL;
    if (cu->get_error_string != NULL && cu->get_error_string(r, &s) == CU_SUCCESS && s != NULL)
        return s;
    return "CUDA error";
}

/* Resolves name (or, if absent, fallback) into *slot; returns 1 when found. */
static int cu_sym(void *lib, const char *name, const char *fallback, void *slot)
{
    void *p = dlsym(lib, name);
    if (p == NULL && fallback != NULL)
        p = dlsym(lib, fallback);
    /* A data pointer to a function pointer: POSIX guarantees dlsym's result converts. */
    memcpy(slot, &p, sizeof p);
    return p != NULL;
}

/* Loads the driver and every entry point; see cuda_driver.h. */
int pc_cuda_load(struct pc_cuda **out, char *err, size_t errlen)
{
    *out = NULL;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        pc_cu_err(err, errlen, "no CUDA driver in this process (%s)", dlerror());
        return PAGED_E_NOTSUP;
    }
    struct pc_cuda *cu = calloc(1, sizeof *cu);
    if (cu == NULL) {
        dlclose(lib);
        return PAGED_E_NOMEM;
    }
    cu->lib = lib;
    /* cuGetErrorString is only for messages; everything else is required. */
    cu_sym(lib, "cuGetErrorString", NULL, &cu->get_error_string);
    int ok = cu_sym(lib, "cuInit", NULL, &cu->init)
             && cu_sym(lib, "cuDeviceGetCount", NULL, &cu->device_get_count)
             && cu_sym(lib, "cuDeviceGet", NULL, &cu->device_get)
             /* _v2 reports a MIG instance's own UUID, as the runtime's device properties do. */
             && cu_sym(lib, "cuDeviceGetUuid_v2", "cuDeviceGetUuid", &cu->device_get_uuid)
             && cu_sym(lib, "cuDevicePrimaryCtxRetain", NULL, &cu->primary_retain)
             && cu_sym(lib, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease",
                       &cu->primary_release)
             && cu_sym(lib, "cuCtxGetCurrent", NULL, &cu->ctx_get_current)
             && cu_sym(lib, "cuCtxPushCurrent_v2", "cuCtxPushCurrent", &cu->ctx_push)
             && cu_sym(lib, "cuCtxPopCurrent_v2", "cuCtxPopCurrent", &cu->ctx_pop)
             && cu_sym(lib, "cuMemImportFromShareableHandle", NULL, &cu->import_shareable)
             && cu_sym(lib, "cuMemAddressReserve", NULL, &cu->address_reserve)
             && cu_sym(lib, "cuMemAddressFree", NULL, &cu->address_free)
             && cu_sym(lib, "cuMemMap", NULL, &cu->mem_map)
             && cu_sym(lib, "cuMemUnmap", NULL, &cu->mem_unmap)
             && cu_sym(lib, "cuMemRelease", NULL, &cu->mem_release)
             && cu_sym(lib, "cuMemSetAccess", NULL, &cu->mem_set_access)
             && cu_sym(lib, "cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle", &cu->ipc_open)
             && cu_sym(lib, "cuIpcCloseMemHandle", NULL, &cu->ipc_close)
             && cu_sym(lib, "cuMemcpyDtoDAsync_v2", NULL, &cu->memcpy_dtod_async)
             && cu_sym(lib, "cuStreamSynchronize", NULL, &cu->stream_sync);
    /* Optional: only paged_stream_wait and paged_stream_signal use these, and say so when
     * one is missing. */
    cu_sym(lib, "cuDeviceGetAttribute", NULL, &cu->device_get_attribute);
    cu_sym(lib, "cuStreamGetCtx", NULL, &cu->stream_get_ctx);
    cu_sym(lib, "cuStreamWaitValue32_v2", "cuStreamWaitValue32", &cu->stream_wait_value32);
    cu_sym(lib, "cuStreamWriteValue32_v2", "cuStreamWriteValue32", &cu->stream_write_value32);
    cu_sym(lib, "cuModuleLoadData", NULL, &cu->module_load_data);
    cu_sym(lib, "cuModuleUnload", NULL, &cu->module_unload);
    cu_sym(lib, "cuModuleGetFunction", NULL, &cu->module_get_function);
    cu_sym(lib, "cuFuncGetAttribute", NULL, &cu->func_get_attribute);
    cu_sym(lib, "cuLaunchKernel", NULL, &cu->launch_kernel);
    cu_sym(lib, "cuLaunchKernelEx", NULL, &cu->launch_kernel_ex);
    cu_sym(lib, "cuMemHostRegister_v2", "cuMemHostRegister", &cu->mem_host_register);
    cu_sym(lib, "cuMemHostUnregister", NULL, &cu->mem_host_unregister);
    cu_sym(lib, "cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer", &cu->mem_host_get_device_pointer);
    if (!ok) {
        pc_cu_err(err, errlen, "the CUDA driver lacks the VMM and IPC entry points libpaged needs");
        dlclose(lib);
        free(cu);
        return PAGED_E_NOTSUP;
    }
    cu_result r = cu->init(0);
    if (r == CU_SUCCESS)
        r = cu->device_get_count(&cu->num_devices);
    if (r != CU_SUCCESS || cu->num_devices <= 0) {
        pc_cu_err(err, errlen, "CUDA driver present but unusable: %s",
                  r != CU_SUCCESS ? pc_cu_str(cu, r) : "no device visible");
        /* Once cuInit has run the driver may have started threads: never unload it then. */
        free(cu);
        return PAGED_E_NOTSUP;
    }
    cu->primary = calloc((size_t) cu->num_devices, sizeof *cu->primary);
    cu->words = calloc((size_t) cu->num_devices, sizeof *cu->words);
    if (cu->primary == NULL || cu->words == NULL) {
        free(cu->primary);
        free(cu->words);
        free(cu);
        return PAGED_E_NOMEM;
    }
    for (int d = 0; d < cu->num_devices; d++)
        cu->words[d].mps = -1;
    *out = cu;
    return PAGED_OK;
}

/* Unloads the dependency-word kernels and releases retained primary contexts; the library
 * itself stays loaded (see below). */
void pc_cuda_unload(struct pc_cuda *cu)
{
    if (cu == NULL)
        return;
    for (int d = 0; d < cu->num_devices; d++) {
        if (cu->words[d].loaded && pc_cu_enter_primary(cu, d, NULL, 0) == PAGED_OK) {
            cu->module_unload(cu->words[d].module);
            pc_cu_leave(cu);
        }
        if (cu->primary[d] != NULL)
            cu->primary_release(d);
    }
    /* No dlclose: the driver starts threads at cuInit and does not survive being
     * unloaded under them; dlopen's reference just stays with the process. */
    free(cu->words);
    free(cu->primary);
    free(cu);
}

/* Finds a device by UUID; see cuda_driver.h. */
int pc_cuda_find_device(struct pc_cuda *cu, const uint8_t uuid[16], int *device, char *err,
                        size_t errlen)
{
    for (int i = 0; i < cu->num_devices; i++) {
        cu_device d;
        cu_uuid u;
        if (cu->device_get(&d, i) != CU_SUCCESS || cu->device_get_uuid(&u, d) != CU_SUCCESS)
            continue;
        if (memcmp(u.bytes, uuid, 16) == 0) {
            *device = d;
            return PAGED_OK;
        }
    }
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", uuid[i]);
    pc_cu_err(err, errlen, "the daemon's GPU (UUID %s) is not visible to this process "
              "(CUDA_VISIBLE_DEVICES?)", hex);
    return PAGED_E_DEVICE;
}

/*
 * Makes device's primary context current (retaining it on first use); see cuda_api.h.
 */
int pc_cu_enter_primary(struct pc_cuda *cu, int device, char *err, size_t errlen)
{
    if (device < 0 || device >= cu->num_devices) {
        pc_cu_err(err, errlen, "CUDA device %d out of range", device);
        return PAGED_E_DEVICE;
    }
    cu_result r = CU_SUCCESS;
    if (cu->primary[device] == NULL)
        r = cu->primary_retain(&cu->primary[device], device);
    if (r == CU_SUCCESS)
        r = cu->ctx_push(cu->primary[device]);
    if (r != CU_SUCCESS) {
        pc_cu_err(err, errlen, "cannot use the primary context of CUDA device %d: %s", device,
                  pc_cu_str(cu, r));
        return PAGED_E_DEVICE;
    }
    return PAGED_OK;
}

/* Pops the context pc_cu_enter_primary pushed; see cuda_api.h. */
void pc_cu_leave(struct pc_cuda *cu)
{
    cu_context ignored;
    cu->ctx_pop(&ignored);
}

/* Imports and maps a VMM allocation; see cuda_driver.h. */
int pc_cuda_map_vmm(struct pc_cuda *cu, int device, int fd, uint64_t size, int writable,
                    struct pc_devmap *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (size == 0 || size > SIZE_MAX) {
        pc_cu_err(err, errlen, "device allocation of %llu bytes cannot be mapped",
                  (unsigned long long) size);
        return PAGED_E_PROTO;
    }
    int rc = pc_cu_enter_primary(cu, device, err, errlen);
    if (rc < 0)
        return rc;
    cu_mem_handle h = 0;
    cu_deviceptr p = 0;
    int reserved = 0, mapped = 0, have_handle = 0;
    const char *step = "cuMemImportFromShareableHandle";
    /* The POSIX handle travels as the descriptor's value cast to a pointer. */
    cu_result r = cu->import_shareable(&h, (void *) (uintptr_t) fd,
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r == CU_SUCCESS) {
        have_handle = 1;
        step = "cuMemAddressReserve";
        /* Alignment 0: the allocation granularity, which the exported size is a multiple of. */
        r = cu->address_reserve(&p, (size_t) size, 0, 0, 0);
    }
    if (r == CU_SUCCESS) {
        reserved = 1;
        step = "cuMemMap";
        r = cu->mem_map(p, (size_t) size, 0, h, 0);
    }
    if (r == CU_SUCCESS) {
        mapped = 1;
        step = "cuMemSetAccess";
        cu_mem_access_desc d = {
            .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device },
            .flags = writable ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ,
        };
        r = cu->mem_set_access(p, (size_t) size, &d, 1);
        if (r != CU_SUCCESS && !writable) {
            /* Devices that take no read-only access: read-write is all the descriptor
             * grants anyway, so this gives away nothing the process does not have. */
            d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            r = cu->mem_set_access(p, (size_t) size, &d, 1);
        }
    }
    /* The mapping holds the allocation from here on; our handle is no longer needed. */
    if (have_handle)
        cu->mem_release(h);
    if (r != CU_SUCCESS) {
        pc_cu_err(err, errlen, "mapping the device allocation failed: %s: %s", step, pc_cu_str(cu, r));
        if (mapped)
            cu->mem_unmap(p, (size_t) size);
        if (reserved)
            cu->address_free(p, (size_t) size);
        pc_cu_leave(cu);
        return PAGED_E_DEVICE;
    }
    pc_cu_leave(cu);
    m->dptr = p;
    m->size = size;
    m->kind = PCORE_MEM_CUDA_VMM;
    m->device = device;
    return PAGED_OK;
}

/* Opens a legacy IPC handle; see cuda_driver.h. */
int pc_cuda_map_ipc(struct pc_cuda *cu, int device, const uint8_t handle[64],
                    struct pc_devmap *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    int rc = pc_cu_enter_primary(cu, device, err, errlen);
    if (rc < 0)
        return rc;
    cu_ipc_mem_handle h;
    memcpy(h.reserved, handle, sizeof h.reserved);
    cu_deviceptr p = 0;
    cu_result r = cu->ipc_open(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    pc_cu_leave(cu);
    if (r != CU_SUCCESS) {
        pc_cu_err(err, errlen, "cuIpcOpenMemHandle failed: %s", pc_cu_str(cu, r));
        return PAGED_E_DEVICE;
    }
    m->dptr = p;
    m->kind = PCORE_MEM_CUDA_IPC;
    m->device = device;
    return PAGED_OK;
}

/* Undoes a mapping in the context it was made in. */
void pc_cuda_unmap(struct pc_cuda *cu, struct pc_devmap *m)
{
    if (cu == NULL || m->dptr == 0)
        return;
    if (pc_cu_enter_primary(cu, m->device, NULL, 0) == PAGED_OK) {
        if (m->kind == PCORE_MEM_CUDA_VMM) {
            cu->mem_unmap(m->dptr, (size_t) m->size);
            cu->address_free(m->dptr, (size_t) m->size);
        } else {
            cu->ipc_close(m->dptr);
        }
        pc_cu_leave(cu);
    }
    memset(m, 0, sizeof *m);
}

/* Registers a host range with a device; see cuda_driver.h. */
int pc_cuda_host_map(struct pc_cuda *cu, int device, void *host, size_t size, uint64_t *dptr, char *err,
                     size_t errlen)
{
    if (cu->mem_host_register == NULL || cu->mem_host_unregister == NULL || cu->mem_host_get_device_pointer == NULL) {
        pc_cu_err(err, errlen, "the CUDA driver lacks cuMemHostRegister");
        return PAGED_E_NOTSUP;
    }
    int rc = pc_cu_enter_primary(cu, device, err, errlen);
    if (rc < 0)
        return rc;
    cu_result r = cu->mem_host_register(host, size, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    cu_deviceptr d = 0;
    if (r == CU_SUCCESS && (r = cu->mem_host_get_device_pointer(&d, host, 0)) != CU_SUCCESS)
        cu->mem_host_unregister(host);
    pc_cu_leave(cu);
    if (r != CU_SUCCESS) {
        pc_cu_err(err, errlen, "registering the host arena (%zu bytes) with CUDA device %d: %s", size, device,
                  pc_cu_str(cu, r));
        return PAGED_E_DEVICE;
    }
    *dptr = d;
    return PAGED_OK;
}

/* Unregisters a host range; see cuda_driver.h. */
void pc_cuda_host_unmap(struct pc_cuda *cu, int device, void *host)
{
    if (cu == NULL || host == NULL || cu->mem_host_unregister == NULL)
        return;
    if (pc_cu_enter_primary(cu, device, NULL, 0) == PAGED_OK) {
        cu->mem_host_unregister(host);
        pc_cu_leave(cu);
    }
}

/* Copies device to device and waits; see cuda_driver.h. */
int pc_cuda_copy(struct pc_cuda *cu, int device, uint64_t dst, uint64_t src, size_t n,
                 char *err, size_t errlen)
{
    if (n == 0)
        return PAGED_OK;
    cu_context cur = NULL;
    int pushed = 0;
    if (cu->ctx_get_current(&cur) != CU_SUCCESS || cur == NULL) {
        int rc = pc_cu_enter_primary(cu, device, err, errlen);
        if (rc < 0)
            return rc;
        pushed = 1;
    }
    /* Async on the legacy default stream, then a wait: a plain device-to-device cuMemcpy
     * may return before the copy is done, and the daemon reads the arena next. */
    cu_result r = cu->memcpy_dtod_async(dst, src, n, NULL);
    if (r == CU_SUCCESS)
        r = cu->stream_sync(NULL);
    if (pushed)
        pc_cu_leave(cu);
    if (r != CU_SUCCESS) {
        pc_cu_err(err, errlen, "device copy of %zu bytes failed: %s", n, pc_cu_str(cu, r));
        return PAGED_E_DEVICE;
    }
    return PAGED_OK;
}
