/* cuda_words.c: a worker's stream waiting for or writing a dependency word by a one-thread kernel or a stream memop. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "paged.h"
#include "lib/cuda_api.h"
#include "lib/cuda_driver.h"

/*
 * The kernels, in PTX that the driver compiles for the device when they are first needed
 * (libpaged links no CUDA library and carries no device code of nvcc's). The wait kernel
 * polls the word with volatile loads until (int32_t) (word - value) >= 0, then fences, so
 * that the stream's later work sees what was written before the word; the signal kernel
 * fences the stream's earlier work and writes the word. Neither gives up: like a stream
 * wait, a word that never comes holds the stream until someone writes it (see
 * paged_stream_wait(3)). On sm_90 and later the signal kernel is launched programmatically
 * and waits in griddepcontrol.wait for the kernel before it, so its launch overlaps that
 * kernel's end, and the wait kernel lets a programmatically launched kernel after it start
 * once the word is there.
 */

/* The wait kernel from its entry to the fence after the word is there. */
#define WORDS_WAIT_UNTIL_THERE \
    ".visible .entry paged_word_wait(.param .u64 addr, .param .u32 value)\n" \
    "{\n" \
    "    .reg .pred %p<2>;\n" \
    "    .reg .b32 %r<4>;\n" \
    "    .reg .b64 %rd<3>;\n" \
    "    ld.param.u64 %rd1, [addr];\n" \
    "    ld.param.u32 %r1, [value];\n" \
    "    cvta.to.global.u64 %rd2, %rd1;\n" \
    "poll:\n" \
    "    ld.volatile.global.u32 %r2, [%rd2];\n" \
    "    sub.s32 %r3, %r2, %r1;\n" \
    "    setp.lt.s32 %p1, %r3, 0;\n" \
    "    @%p1 bra poll;\n" \
    "    membar.sys;\n"

/* The signal kernel's entry and registers. */
#define WORDS_SIGNAL_ENTRY \
    ".visible .entry paged_word_signal(.param .u64 addr, .param .u32 value)\n" \
    "{\n" \
    "    .reg .b32 %r<2>;\n" \
    "    .reg .b64 %rd<3>;\n"

/* The signal kernel's fence and write, to its end. */
#define WORDS_SIGNAL_WRITE \
    "    ld.param.u64 %rd1, [addr];\n" \
    "    ld.param.u32 %r1, [value];\n" \
    "    cvta.to.global.u64 %rd2, %rd1;\n" \
    "    membar.sys;\n" \
    "    st.volatile.global.u32 [%rd2], %r1;\n" \
    "    ret;\n" \
    "}\n"

/* For sm_90 and later: programmatic dependent launch on both sides. */
static const char words_ptx_sm90[] =
    ".version 7.8\n.target sm_90\n.address_size 64\n\n"
    WORDS_WAIT_UNTIL_THERE
    "    griddepcontrol.launch_dependents;\n"
    "    ret;\n"
    "}\n\n"
    WORDS_SIGNAL_ENTRY
    "    griddepcontrol.wait;\n"
    WORDS_SIGNAL_WRITE;

/* For devices before sm_90 (and drivers that cannot compile the above). */
static const char words_ptx_base[] =
    ".version 6.0\n.target sm_60\n.address_size 64\n\n"
    WORDS_WAIT_UNTIL_THERE
    "    ret;\n"
    "}\n\n"
    WORDS_SIGNAL_ENTRY
    WORDS_SIGNAL_WRITE;

/* Returns the PTX of the word kernels for variant 1 (sm_90) or 0 (earlier devices). */
const char *pc_cuda_words_ptx(int sm90)
{
    return sm90 ? words_ptx_sm90 : words_ptx_base;
}

/* Says whether device runs its contexts under MPS, asking the driver once. */
static int words_mps(struct pc_cuda *cu, int device)
{
    struct pc_cuda_words *w = &cu->words[device];
    if (w->mps < 0) {
        int v = 0;
        if (cu->device_get_attribute == NULL
            || cu->device_get_attribute(&v, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, device) != CU_SUCCESS)
            v = 0;
        w->mps = v != 0;
    }
    return w->mps;
}

/* Loads one variant's module and both functions into the current (primary) context, each
 * loaded now, not at its first launch (see pc_cuda_words_load). Returns CU_SUCCESS or the
 * driver's error. */
static cu_result words_load_variant(struct pc_cuda *cu, struct pc_cuda_words *w, int sm90)
{
    cu_module m = NULL;
    cu_result r = cu->module_load_data(&m, pc_cuda_words_ptx(sm90));
    if (r != CU_SUCCESS)
        return r;
    int regs = 0;
    r = cu->module_get_function(&w->wait_fn, m, "paged_word_wait");
    if (r == CU_SUCCESS)
        r = cu->module_get_function(&w->signal_fn, m, "paged_word_signal");
    if (r == CU_SUCCESS)
        r = cu->func_get_attribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, w->wait_fn);
    if (r == CU_SUCCESS)
        r = cu->func_get_attribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, w->signal_fn);
    if (r != CU_SUCCESS) {
        cu->module_unload(m);
        return r;
    }
    w->module = m;
    w->programmatic = sm90 && cu->launch_kernel_ex != NULL;
    w->loaded = 1;
    return CU_SUCCESS;
}

/*
 * Loads the word kernels for device into its primary context (current) on first use.
 * Asking for each function's registers makes the driver load it now: under lazy loading a
 * kernel's first launch may otherwise wait for the device to go idle, which a stream that
 * waits for the daemon's word never does. Returns PAGED_OK, or an error with err set.
 */
static int words_load(struct pc_cuda *cu, int device, char *err, size_t errlen)
{
    struct pc_cuda_words *w = &cu->words[device];
    if (w->loaded)
        return PAGED_OK;
    if (cu->module_load_data == NULL || cu->module_unload == NULL || cu->module_get_function == NULL
        || cu->func_get_attribute == NULL || cu->launch_kernel == NULL) {
        pc_cu_err(err, errlen, "the CUDA driver lacks the module and launch entry points the word kernels need; "
                  "use PAGED_STREAM_MEMOP");
        return PAGED_E_NOTSUP;
    }
    int major = 0;
    if (cu->device_get_attribute == NULL
        || cu->device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) != CU_SUCCESS)
        major = 0;
    cu_result r = CU_ERROR_INVALID_VALUE;
    if (major >= 9)
        r = words_load_variant(cu, w, 1);
    if (r != CU_SUCCESS)
        r = words_load_variant(cu, w, 0);
    if (r != CU_SUCCESS) {
        pc_cu_err(err, errlen, "loading libpaged's word kernels on CUDA device %d failed: %s", device,
                  pc_cu_str(cu, r));
        return PAGED_E_DEVICE;
    }
    return PAGED_OK;
}

/* Launches one word kernel on stream: the signal kernel programmatically where the module
 * allows it. Returns the driver's result. */
static cu_result words_launch(struct pc_cuda *cu, const struct pc_cuda_words *w, int wait, cu_stream stream,
                              uint64_t addr, uint32_t value)
{
    unsigned long long a = addr;
    unsigned int v = value;
    void *params[2] = { &a, &v };
    cu_function f = wait ? w->wait_fn : w->signal_fn;
    if (!wait && w->programmatic) {
        cu_launch_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.val.value = 1;
        cu_launch_config cfg = { .grid = { 1, 1, 1 }, .block = { 1, 1, 1 }, .stream = stream, .attrs = &attr,
                                 .num_attrs = 1 };
        return cu->launch_kernel_ex(&cfg, f, params, NULL);
    }
    return cu->launch_kernel(f, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
}

/* Queues a wait for or a write of a word on a stream; see cuda_driver.h. */
int pc_cuda_word(struct pc_cuda *cu, int device, void *stream, uint64_t addr, uint32_t value, int wait,
                 unsigned flags, char *err, size_t errlen)
{
    const char *what = wait ? "wait" : "write";
    int rc = pc_cu_enter_primary(cu, device, err, errlen);
    if (rc < 0)
        return rc;
    cu_stream st = (cu_stream) stream;
    cu_context owner = NULL;
    if (cu->stream_get_ctx == NULL) {
        pc_cu_err(err, errlen, "the CUDA driver lacks cuStreamGetCtx");
        rc = PAGED_E_NOTSUP;
    } else if (cu->stream_get_ctx(st, &owner) != CU_SUCCESS || owner != cu->primary[device]) {
        pc_cu_err(err, errlen, "the stream is not one of CUDA device %d's primary context, where the data "
                  "arena is mapped", device);
        rc = PAGED_E_INVAL;
    }
    int by_kernel = (flags & PAGED_STREAM_KERNEL) != 0
                    || ((flags & PAGED_STREAM_MEMOP) == 0 && words_mps(cu, device));
    if (rc == PAGED_OK && by_kernel)
        rc = words_load(cu, device, err, errlen);
    if (rc == PAGED_OK) {
        cu_result r;
        if (by_kernel) {
            r = words_launch(cu, &cu->words[device], wait, st, addr, value);
        } else if ((wait ? cu->stream_wait_value32 : cu->stream_write_value32) == NULL) {
            pc_cu_err(err, errlen, "the CUDA driver lacks %s", wait ? "cuStreamWaitValue32" : "cuStreamWriteValue32");
            rc = PAGED_E_NOTSUP;
            r = CU_SUCCESS;
        } else {
            r = wait ? cu->stream_wait_value32(st, addr, value, CU_STREAM_WAIT_VALUE_GEQ)
                     : cu->stream_write_value32(st, addr, value, CU_STREAM_WRITE_VALUE_DEFAULT);
        }
        if (r != CU_SUCCESS) {
            pc_cu_err(err, errlen, "queueing the word's %s %s failed: %s", what,
                      by_kernel ? "kernel" : "stream operation", pc_cu_str(cu, r));
            rc = PAGED_E_DEVICE;
        }
    }
    pc_cu_leave(cu);
    return rc;
}
