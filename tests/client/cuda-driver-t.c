/* cuda-driver-t.c: libpaged's lazily loaded CUDA driver: device lookup by UUID, VMM import and mapping, copies. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paged.h"
#include "lib/cuda_driver.h"
#include "lib/core/proto.h"
#include "tests/tap/basic.h"

/* The driver calls the test makes itself, to export memory the way pagedd does. */
static struct {
    CUresult (*init)(unsigned int);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_get_uuid)(CUuuid *, CUdevice);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*primary_release)(CUdevice);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*export_fd)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
} cu;

/* Fills n bytes with a pattern from the test's generator. */
static void fill(tap_rng *rng, unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char) tap_rng_u64(rng);
}

/* Loads, finds, imports, maps, copies and unmaps against a real device, or checks that
 * a machine without a driver gets PAGED_E_NOTSUP. */
int main(void)
{
    char err[256] = "";
    struct pc_cuda *pc = NULL;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        plan(3);
        int rc = pc_cuda_load(&pc, err, sizeof err);
        is_int(PAGED_E_NOTSUP, rc, "no driver: loading the CUDA driver is PAGED_E_NOTSUP");
        ok(pc == NULL, "no driver: no handle");
        ok(strstr(err, "libcuda.so.1") != NULL, "no driver: the reason names libcuda.so.1 (%s)", err);
        return 0;
    }
    bdlsym(lib, "cuInit", &cu.init);
    if (cu.init(0) != CUDA_SUCCESS)
        skip_all("the CUDA driver has no usable device");
    plan_lazy();
    bdlsym(lib, "cuDeviceGet", &cu.device_get);
    bdlsym(lib, "cuDeviceGetUuid_v2", &cu.device_get_uuid);
    bdlsym(lib, "cuDevicePrimaryCtxRetain", &cu.primary_retain);
    bdlsym(lib, "cuDevicePrimaryCtxRelease_v2", &cu.primary_release);
    bdlsym(lib, "cuCtxSetCurrent", &cu.ctx_set_current);
    bdlsym(lib, "cuMemGetAllocationGranularity", &cu.granularity);
    bdlsym(lib, "cuMemCreate", &cu.create);
    bdlsym(lib, "cuMemExportToShareableHandle", &cu.export_fd);
    bdlsym(lib, "cuMemRelease", &cu.release);
    bdlsym(lib, "cuMemcpyHtoD_v2", &cu.htod);
    bdlsym(lib, "cuMemcpyDtoH_v2", &cu.dtoh);

    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    is_int(PAGED_OK, pc_cuda_load(&pc, err, sizeof err), "load: the driver loads (%s)", err);
    if (pc == NULL)
        bail("no driver handle");

    CUdevice dev;
    CUuuid uuid;
    CUcontext ctx;
    if (cu.device_get(&dev, 0) != CUDA_SUCCESS || cu.device_get_uuid(&uuid, dev) != CUDA_SUCCESS
        || cu.primary_retain(&ctx, dev) != CUDA_SUCCESS || cu.ctx_set_current(ctx) != CUDA_SUCCESS)
        bail("device 0 setup");
    int found = -1;
    is_int(PAGED_OK, pc_cuda_find_device(pc, (const uint8_t *) uuid.bytes, &found, err, sizeof err),
           "find: device 0 found by its UUID");
    is_int(dev, found, "find: it is device %d", dev);
    uint8_t nobody[16];
    memset(nobody, 0xee, sizeof nobody);
    is_int(PAGED_E_DEVICE, pc_cuda_find_device(pc, nobody, &found, err, sizeof err),
           "find: an unknown UUID is PAGED_E_DEVICE");
    ok(strstr(err, "not visible") != NULL, "find: the reason says so (%s)", err);

    /* Export an allocation as pagedd does, then import it through the library. */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0;
    if (cu.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || gran == 0)
        bail("granularity");
    size_t size = 2 * gran;
    CUmemGenericAllocationHandle h;
    int fd = -1;
    if (cu.create(&h, size, &prop, 0) != CUDA_SUCCESS
        || cu.export_fd(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) != CUDA_SUCCESS)
        skip_all("this device cannot export VMM allocations as descriptors");

    struct pc_devmap rw, ro;
    is_int(PAGED_OK, pc_cuda_map_vmm(pc, dev, fd, size, 1, &rw, err, sizeof err),
           "vmm: imported and mapped read-write (%s)", err);
    is_int(PAGED_OK, pc_cuda_map_vmm(pc, dev, fd, size, 0, &ro, err, sizeof err),
           "vmm: imported and mapped again read-only (%s)", err);
    ok(rw.dptr != 0 && ro.dptr != 0 && rw.dptr != ro.dptr, "vmm: two mappings at two addresses");

    size_t half = size / 2;
    unsigned char *src = bmalloc(half), *back = bmalloc(half);
    fill(&rng, src, half);
    ok(cu.htod(rw.dptr, src, half) == CUDA_SUCCESS, "vmm: written through the read-write mapping");
    memset(back, 0, half);
    ok(cu.dtoh(back, ro.dptr, half) == CUDA_SUCCESS && memcmp(back, src, half) == 0,
       "vmm: the read-only mapping shows the same memory");
    is_int(PAGED_OK, pc_cuda_copy(pc, dev, rw.dptr + half, rw.dptr, half, err, sizeof err),
           "copy: device to device in the caller's context");
    memset(back, 0, half);
    ok(cu.dtoh(back, ro.dptr + half, half) == CUDA_SUCCESS && memcmp(back, src, half) == 0,
       "copy: the copy landed");
    fill(&rng, src, half);
    cu.htod(rw.dptr, src, half);
    cu.ctx_set_current(NULL);
    is_int(PAGED_OK, pc_cuda_copy(pc, dev, rw.dptr + half, rw.dptr, half, err, sizeof err),
           "copy: with no current context, in the device's primary one");
    cu.ctx_set_current(ctx);
    memset(back, 0, half);
    ok(cu.dtoh(back, rw.dptr + half, half) == CUDA_SUCCESS && memcmp(back, src, half) == 0,
       "copy: that copy landed too");

    pc_cuda_unmap(pc, &ro);
    pc_cuda_unmap(pc, &rw);
    ok(rw.dptr == 0 && ro.dptr == 0, "unmap: both mappings gone");
    cu.release(h);
    close(fd);
    free(src);
    free(back);
    pc_cuda_unload(pc);
    cu.primary_release(dev);
    return 0;
}
