/* cuda-words-t.c: both PTX variants of libpaged's dependency-word kernels, run on the device. */
/* SPDX-License-Identifier: MIT */
/* A wait holds its stream until the word comes; a signal writes the word. */
#include "config.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "lib/cuda_driver.h"
#include "tests/tap/basic.h"

/*
 * libpaged picks the sm_90 variant on devices of compute capability 9.0 and later, so the
 * service tests never run the base one on a Hopper GPU. Here each variant's text is loaded
 * as libpaged loads it (cuModuleLoadData) and its kernels run on non-blocking streams, the
 * sm_90 signal launched programmatically as libpaged launches it: a wait for a word short of
 * its value must hold its stream (every one of many queries finds it busy, and the signal
 * queued behind it has not written its own word), a signal from a second stream must release
 * it, with the counter wrapping past 2^32 in between, and a wait for a value already passed
 * must not hold. Skips where there is no device.
 */

#define HOLD_QUERIES 20000
#define WAIT_NS 10000000000ll   /* the longest a released stream may take to finish */

/* The driver calls the test makes. */
static struct {
    CUresult (*init)(unsigned int);
    CUresult (*device_get_count)(int *);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_get_attribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*module_load_data)(CUmodule *, const void *);
    CUresult (*module_unload)(CUmodule);
    CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
    CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
    CUresult (*launch_kernel_ex)(const CUlaunchConfig *, CUfunction, void **, void **);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*memset_d32)(CUdeviceptr, unsigned int, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*stream_create)(CUstream *, unsigned int);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*stream_query)(CUstream);
} cu;

/* Queues kernel f on st with the word's address and value, programmatically when pdl says;
 * bails when the driver refuses. Returns nothing. */
static void launch(CUfunction f, CUstream st, CUdeviceptr addr, uint32_t value, int pdl)
{
    unsigned long long a = addr;
    unsigned int v = value;
    void *params[2] = { &a, &v };
    CUresult r;
    if (pdl) {
        CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.hStream = st;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        r = cu.launch_kernel_ex(&cfg, f, params, NULL);
    } else {
        r = cu.launch_kernel(f, 1, 1, 1, 1, 1, 1, 0, st, params, NULL);
    }
    if (r != CUDA_SUCCESS)
        bail("launching a word kernel: CUDA error %d", (int) r);
}

/* Reads word i of the three at words (the legacy stream, which waits for neither of the
 * test's non-blocking streams). Returns it, or 0xdeadbeef when the copy failed. */
static uint32_t word(CUdeviceptr words, int i)
{
    uint32_t v = 0xdeadbeefu;
    if (cu.dtoh(&v, words + 4 * (CUdeviceptr) i, 4) != CUDA_SUCCESS)
        return 0xdeadbeefu;
    return v;
}

/* Queries st until it is done, for at most WAIT_NS; returns 1 when it finished cleanly. */
static int finishes(CUstream st)
{
    int64_t deadline = tap_now_ns() + WAIT_NS;
    CUresult r;
    while ((r = cu.stream_query(st)) == CUDA_ERROR_NOT_READY)
        if (tap_now_ns() > deadline)
            return 0;
    return r == CUDA_SUCCESS;
}

/* Runs the hold, the release across the wrap and the passed value with one variant. */
static void run_variant(int sm90, CUdeviceptr words)
{
    const char *name = sm90 ? "sm_90 variant" : "base variant";
    CUmodule m;
    CUfunction wait_fn, signal_fn;
    CUresult r = cu.module_load_data(&m, pc_cuda_words_ptx(sm90));
    is_int(CUDA_SUCCESS, r, "%s: the driver compiles and loads its PTX", name);
    if (r != CUDA_SUCCESS)
        return;
    if (cu.module_get_function(&wait_fn, m, "paged_word_wait") != CUDA_SUCCESS
        || cu.module_get_function(&signal_fn, m, "paged_word_signal") != CUDA_SUCCESS)
        bail("%s: the word kernels are not in the module", name);
    CUstream held, other;
    if (cu.stream_create(&held, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS
        || cu.stream_create(&other, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        bail("streams");
    const CUdeviceptr a = words, b = words + 4;
    /* A is 5 short of wrapping; the wait asks for 2, past the wrap. */
    if (cu.memset_d32(a, 0xfffffffbu, 1) != CUDA_SUCCESS || cu.memset_d32(b, 0, 1) != CUDA_SUCCESS)
        bail("setting the words");
    launch(wait_fn, held, a, 2, 0);
    launch(signal_fn, held, b, 9, sm90);
    int busy = 0;
    for (int k = 0; k < HOLD_QUERIES; k++)
        busy += cu.stream_query(held) == CUDA_ERROR_NOT_READY;
    is_int(HOLD_QUERIES, busy, "%s: a wait for 2 while the word is 0xfffffffb holds its stream", name);
    is_int(0, word(words, 1), "%s: the signal queued behind it has not written its word", name);
    launch(signal_fn, other, a, 2, sm90);
    ok(finishes(held), "%s: a signal of 2 from another stream releases it, past the wrap", name);
    is_int(9, word(words, 1), "%s: then the signal behind the wait writes its word", name);
    is_int(2, word(words, 0), "%s: the released word holds 2", name);
    launch(wait_fn, held, a, 1, 0);
    launch(signal_fn, held, b, 10, sm90);
    ok(finishes(held), "%s: a wait for a value already passed does not hold", name);
    is_int(10, word(words, 1), "%s: and the signal behind it writes", name);
    ok(finishes(other), "%s: the other stream is done too", name);
    cu.stream_destroy(held);
    cu.stream_destroy(other);
    cu.module_unload(m);
}

/* Runs both variants where the device has sm_90, the base one elsewhere; returns 0. */
int main(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        skip_all("no CUDA device");
    bdlsym(lib, "cuInit", &cu.init);
    bdlsym(lib, "cuDeviceGetCount", &cu.device_get_count);
    int n = 0;
    if (cu.init(0) != CUDA_SUCCESS || cu.device_get_count(&n) != CUDA_SUCCESS || n <= 0)
        skip_all("no CUDA device");
    plan_lazy();
    bdlsym(lib, "cuDeviceGet", &cu.device_get);
    bdlsym(lib, "cuDeviceGetAttribute", &cu.device_get_attribute);
    bdlsym(lib, "cuDevicePrimaryCtxRetain", &cu.primary_retain);
    bdlsym(lib, "cuCtxSetCurrent", &cu.ctx_set_current);
    bdlsym(lib, "cuModuleLoadData", &cu.module_load_data);
    bdlsym(lib, "cuModuleUnload", &cu.module_unload);
    bdlsym(lib, "cuModuleGetFunction", &cu.module_get_function);
    bdlsym(lib, "cuLaunchKernel", &cu.launch_kernel);
    bdlsym(lib, "cuLaunchKernelEx", &cu.launch_kernel_ex);
    bdlsym(lib, "cuMemAlloc_v2", &cu.mem_alloc);
    bdlsym(lib, "cuMemFree_v2", &cu.mem_free);
    bdlsym(lib, "cuMemsetD32_v2", &cu.memset_d32);
    bdlsym(lib, "cuMemcpyDtoH_v2", &cu.dtoh);
    bdlsym(lib, "cuStreamCreate", &cu.stream_create);
    bdlsym(lib, "cuStreamDestroy_v2", &cu.stream_destroy);
    bdlsym(lib, "cuStreamQuery", &cu.stream_query);
    CUdevice dev;
    CUcontext ctx;
    int major = 0;
    if (cu.device_get(&dev, 0) != CUDA_SUCCESS || cu.primary_retain(&ctx, dev) != CUDA_SUCCESS
        || cu.ctx_set_current(ctx) != CUDA_SUCCESS
        || cu.device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS)
        bail("device 0 setup");
    CUdeviceptr words;
    if (cu.mem_alloc(&words, 16) != CUDA_SUCCESS)
        bail("16 bytes of device memory");
    run_variant(0, words);
    if (major >= 9)
        run_variant(1, words);
    else
        diag("compute capability %d: the sm_90 variant is not for this device", major);
    cu.mem_free(words);
    return 0;
}
