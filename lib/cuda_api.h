/* cuda_api.h: libpaged's own declarations of the CUDA driver's types and its table of loaded entry points. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_LIB_CUDA_API_H
#define PAGED_LIB_CUDA_API_H

/*
 * Internal to cuda_driver.c (loading, mappings, copies) and cuda_words.c (dependency words
 * on a worker's stream). The types are declared here with the layouts of cuda.h (ints,
 * pointers and byte arrays, stable across every driver with the VMM API), so that libpaged
 * builds where the CUDA headers are absent.
 */

#include <stddef.h>

typedef int cu_result;                          /* CUresult; 0 is CUDA_SUCCESS */
typedef int cu_device;                          /* CUdevice: an ordinal */
typedef struct cu_ctx_st *cu_context;           /* CUcontext */
typedef struct cu_stream_st *cu_stream;         /* CUstream; NULL is the legacy default stream */
typedef struct cu_mod_st *cu_module;            /* CUmodule */
typedef struct cu_func_st *cu_function;         /* CUfunction */
typedef unsigned long long cu_deviceptr;        /* CUdeviceptr on 64-bit hosts */
typedef unsigned long long cu_mem_handle;       /* CUmemGenericAllocationHandle */
typedef struct { char bytes[16]; } cu_uuid;     /* CUuuid */
typedef struct { char reserved[64]; } cu_ipc_mem_handle; /* CUipcMemHandle, passed by value */
typedef struct { int type; int id; } cu_mem_location;    /* CUmemLocation */
typedef struct { cu_mem_location location; int flags; } cu_mem_access_desc; /* CUmemAccessDesc */

/* CUlaunchAttribute: an id, padding to 8 bytes, a 64-byte union (8-byte aligned). */
typedef struct {
    int id;
    char pad[4];
    union { char bytes[64]; int value; void *align; } val;
} cu_launch_attr;

/* CUlaunchConfig. */
typedef struct {
    unsigned int grid[3], block[3];
    unsigned int shared_bytes;
    cu_stream stream;
    cu_launch_attr *attrs;
    unsigned int num_attrs;
} cu_launch_config;

_Static_assert(sizeof(cu_ipc_mem_handle) == 64, "CUipcMemHandle is 64 bytes");
_Static_assert(sizeof(cu_mem_access_desc) == 12, "CUmemAccessDesc is 12 bytes");
_Static_assert(sizeof(cu_launch_attr) == 72, "CUlaunchAttribute is 72 bytes");
_Static_assert(sizeof(cu_launch_config) == 56, "CUlaunchConfig is 56 bytes");

#define CU_SUCCESS 0
#define CU_ERROR_INVALID_VALUE 1
#define CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR 0x1
#define CU_MEM_LOCATION_TYPE_DEVICE 0x1
#define CU_MEM_ACCESS_FLAGS_PROT_READ 0x1
#define CU_MEM_ACCESS_FLAGS_PROT_READWRITE 0x3
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1
#define CU_STREAM_WAIT_VALUE_GEQ 0x0            /* (int32_t) (*addr - value) >= 0 */
#define CU_STREAM_WRITE_VALUE_DEFAULT 0x0
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_MPS_ENABLED 133
#define CU_FUNC_ATTRIBUTE_NUM_REGS 4
#define CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6
#define CU_MEMHOSTREGISTER_PORTABLE 0x1
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x2

/* Per device: libpaged's dependency-word kernels (cuda_words.c), loaded on first use in the
 * device's primary context and unloaded with the driver. */
struct pc_cuda_words {
    int mps;                /* -1 not asked yet, else whether the device runs contexts under MPS */
    int loaded;             /* the module and both functions are loaded */
    int programmatic;       /* the sm_90 module: its signal kernel is launched programmatically */
    cu_module module;
    cu_function wait_fn, signal_fn;
};

/* The entry points, by the exported names the cuda.h macros resolve to (the _v2 ones). The
 * ones after stream_sync are optional: only the dependency words need them. */
struct pc_cuda {
    void *lib;
    cu_result (*init)(unsigned int);
    cu_result (*get_error_string)(cu_result, const char **);
    cu_result (*device_get_count)(int *);
    cu_result (*device_get)(cu_device *, int);
    cu_result (*device_get_uuid)(cu_uuid *, cu_device);
    cu_result (*primary_retain)(cu_context *, cu_device);
    cu_result (*primary_release)(cu_device);
    cu_result (*ctx_get_current)(cu_context *);
    cu_result (*ctx_push)(cu_context);
    cu_result (*ctx_pop)(cu_context *);
    cu_result (*import_shareable)(cu_mem_handle *, void *, int);
    cu_result (*address_reserve)(cu_deviceptr *, size_t, size_t, cu_deviceptr, unsigned long long);
    cu_result (*address_free)(cu_deviceptr, size_t);
    cu_result (*mem_map)(cu_deviceptr, size_t, size_t, cu_mem_handle, unsigned long long);
    cu_result (*mem_unmap)(cu_deviceptr, size_t);
    cu_result (*mem_release)(cu_mem_handle);
    cu_result (*mem_set_access)(cu_deviceptr, size_t, const cu_mem_access_desc *, size_t);
    cu_result (*ipc_open)(cu_deviceptr *, cu_ipc_mem_handle, unsigned int);
    cu_result (*ipc_close)(cu_deviceptr);
    cu_result (*memcpy_dtod_async)(cu_deviceptr, cu_deviceptr, size_t, cu_stream);
    cu_result (*stream_sync)(cu_stream);
    cu_result (*device_get_attribute)(int *, int, cu_device);
    cu_result (*stream_get_ctx)(cu_stream, cu_context *);
    cu_result (*stream_wait_value32)(cu_stream, cu_deviceptr, unsigned int, unsigned int);
    cu_result (*stream_write_value32)(cu_stream, cu_deviceptr, unsigned int, unsigned int);
    cu_result (*module_load_data)(cu_module *, const void *);
    cu_result (*module_unload)(cu_module);
    cu_result (*module_get_function)(cu_function *, cu_module, const char *);
    cu_result (*func_get_attribute)(int *, int, cu_function);
    cu_result (*launch_kernel)(cu_function, unsigned int, unsigned int, unsigned int, unsigned int,
                               unsigned int, unsigned int, unsigned int, cu_stream, void **, void **);
    cu_result (*launch_kernel_ex)(const cu_launch_config *, cu_function, void **, void **);
    cu_result (*mem_host_register)(void *, size_t, unsigned int);
    cu_result (*mem_host_unregister)(void *);
    cu_result (*mem_host_get_device_pointer)(cu_deviceptr *, void *, unsigned int);
    int num_devices;
    cu_context *primary;    /* per device: the retained primary context, or NULL */
    struct pc_cuda_words *words; /* per device */
};

/* Writes a formatted reason to err (errlen bytes), if there is room for one. */
void pc_cu_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Returns the driver's name for a result code, or "CUDA error". */
const char *pc_cu_str(const struct pc_cuda *cu, cu_result r);

/* Makes device's primary context current (retaining it on first use) and returns PAGED_OK;
 * the caller pops it with pc_cu_leave. PAGED_E_DEVICE, with the reason in err, when that fails. */
int pc_cu_enter_primary(struct pc_cuda *cu, int device, char *err, size_t errlen);

/* Pops the context pc_cu_enter_primary pushed. Returns nothing. */
void pc_cu_leave(struct pc_cuda *cu);

#endif
