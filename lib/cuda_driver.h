/* cuda_driver.h: the few CUDA driver calls libpaged needs, loaded with dlopen on first use. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_LIB_CUDA_DRIVER_H
#define PAGED_LIB_CUDA_DRIVER_H

/*
 * libpaged never links the CUDA driver: a client without CUDA must work against a cpu
 * daemon. Only when it maps GPU memory (a cuda pool, the device data arena) does it
 * dlopen libcuda.so.1 and resolve the handful of entry points below, declared here by hand
 * so that the library builds without the CUDA headers.
 *
 * Contexts. Mappings are made and undone in the primary context of the pool's device,
 * retained once per loaded driver (the context the CUDA runtime uses for that device, so
 * a PyTorch-style caller sees the memory in its own context). Copies run in the caller's
 * current context when it has one, else in that primary context.
 *
 * Every function returns PAGED_OK or a negative paged_error and writes a one-line reason
 * to err (errlen bytes) on failure.
 */

#include <stddef.h>
#include <stdint.h>

/* A loaded driver; one per client, so clients stay independent. */
struct pc_cuda;

/* One device mapping. */
struct pc_devmap {
    uint64_t dptr;          /* device address, 0 when not mapped */
    uint64_t size;          /* bytes mapped (VMM) */
    int kind;               /* enum pcore_mem_kind: PCORE_MEM_CUDA_VMM or PCORE_MEM_CUDA_IPC */
    int device;             /* CUdevice */
};

/* Loads the driver (dlopen, cuInit). Returns PAGED_OK, or PAGED_E_NOTSUP when this
 * process has no usable CUDA driver. */
int pc_cuda_load(struct pc_cuda **out, char *err, size_t errlen);

/* Releases the primary context (if retained) and unloads the driver. NULL is ignored. */
void pc_cuda_unload(struct pc_cuda *cu);

/* Finds the device whose UUID is uuid among those this process sees. Returns PAGED_OK
 * and the device, or PAGED_E_DEVICE when it is not visible here. */
int pc_cuda_find_device(struct pc_cuda *cu, const uint8_t uuid[16], int *device, char *err,
                        size_t errlen);

/* Imports a VMM allocation of size bytes from a POSIX descriptor (not consumed: the
 * caller closes it) and maps it, read-only unless writable (read-write where the device
 * refuses read-only access; the descriptor grants it anyway). */
int pc_cuda_map_vmm(struct pc_cuda *cu, int device, int fd, uint64_t size, int writable,
                    struct pc_devmap *m, char *err, size_t errlen);

/* Opens a legacy CUDA IPC memory handle (64 bytes); such mappings are always read-write. */
int pc_cuda_map_ipc(struct pc_cuda *cu, int device, const uint8_t handle[64],
                    struct pc_devmap *m, char *err, size_t errlen);

/* Undoes a mapping; a mapping with dptr 0 is ignored. */
void pc_cuda_unmap(struct pc_cuda *cu, struct pc_devmap *m);

/* Registers size bytes of host memory at host (page-aligned) with device's primary context,
 * mapped for the device, and stores its device address in *dptr. Returns PAGED_OK,
 * PAGED_E_NOTSUP (a driver without cuMemHostRegister) or PAGED_E_DEVICE, the reason in err. */
int pc_cuda_host_map(struct pc_cuda *cu, int device, void *host, size_t size, uint64_t *dptr, char *err,
                     size_t errlen);

/* Undoes pc_cuda_host_map of host. Returns nothing. */
void pc_cuda_host_unmap(struct pc_cuda *cu, int device, void *host);

/* Copies n bytes from device address src to dst and waits until the copy is done. The
 * copy is ordered after the caller's work on blocking streams (legacy default stream). */
int pc_cuda_copy(struct pc_cuda *cu, int device, uint64_t dst, uint64_t src, size_t n,
                 char *err, size_t errlen);

/*
 * Queues on stream (a CUstream of device's primary context; NULL: its legacy default
 * stream) a wait until the 32-bit word at device address addr satisfies (int32_t) (word -
 * value) >= 0 (wait), or a write of value to it after the stream's earlier work (!wait): by
 * a one-thread kernel or a stream memory operation as flags say (PAGED_STREAM_KERNEL,
 * PAGED_STREAM_MEMOP, or neither: kernels where the device runs under MPS). cuda_words.c.
 */
int pc_cuda_word(struct pc_cuda *cu, int device, void *stream, uint64_t addr, uint32_t value, int wait,
                 unsigned flags, char *err, size_t errlen);

/* Returns the PTX of the word kernels: for sm_90 and later (sm90), or for earlier devices. */
const char *pc_cuda_words_ptx(int sm90);

#endif
