/* stage.c: where paged-demo's tensors meet the synchronous calls: host memory, or a device copy. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/demo/stage.h"

#include <stdio.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* Makes the device buffer at least bytes long; returns 0, or -1 with err (always where built
 * without CUDA). */
static int stage_reserve(struct demo_stage *s, size_t bytes, char *err, size_t errlen)
{
#ifdef HAVE_CUDA
    if (bytes <= s->cap)
        return 0;
    if (s->dev != NULL)
        cudaFree(s->dev);
    s->dev = NULL;
    s->cap = 0;
    cudaError_t e = cudaMalloc(&s->dev, bytes);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cudaMalloc of %zu bytes: %s", bytes, cudaGetErrorString(e));
        s->dev = NULL;
        return -1;
    }
    s->cap = bytes;
    return 0;
#else
    (void) s;
    (void) bytes;
    snprintf(err, errlen, "built without CUDA");
    return -1;
#endif
}

/* Sets up a stage; returns 0 or -1 with err. */
int demo_stage_init(struct demo_stage *s, int on_device, char *err, size_t errlen)
{
    s->on_device = on_device;
    s->dev = NULL;
    s->cap = 0;
    if (!on_device)
        return 0;
#ifdef HAVE_CUDA
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(err, errlen, "the daemon runs the cuda backend, but this process sees no CUDA "
                 "device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "none");
        return -1;
    }
    return 0;
#else
    snprintf(err, errlen, "the daemon runs the cuda backend, and this paged-demo was built "
             "without CUDA (run it with --backend cpu)");
    return -1;
#endif
}

/* Frees the device buffer. */
void demo_stage_free(struct demo_stage *s)
{
#ifdef HAVE_CUDA
    if (s->dev != NULL)
        cudaFree(s->dev);
#endif
    s->dev = NULL;
    s->cap = 0;
}

/* Returns src, or a device copy of it. */
const void *demo_stage_in(struct demo_stage *s, const void *src, size_t bytes, char *err,
                          size_t errlen)
{
    if (!s->on_device)
        return src;
    if (stage_reserve(s, bytes, err, errlen) < 0)
        return NULL;
#ifdef HAVE_CUDA
    cudaError_t e = cudaMemcpy(s->dev, src, bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cudaMemcpy to the device: %s", cudaGetErrorString(e));
        return NULL;
    }
#endif
    return s->dev;
}

/* Returns dst, or a device buffer to be copied back by demo_stage_back. */
void *demo_stage_out(struct demo_stage *s, void *dst, size_t bytes, char *err, size_t errlen)
{
    if (!s->on_device)
        return dst;
    return stage_reserve(s, bytes, err, errlen) < 0 ? NULL : s->dev;
}

/* Copies a staged output back to the host. */
int demo_stage_back(struct demo_stage *s, void *dst, size_t bytes, char *err, size_t errlen)
{
    if (!s->on_device)
        return 0;
#ifdef HAVE_CUDA
    cudaError_t e = cudaMemcpy(dst, s->dev, bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cudaMemcpy from the device: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
#else
    (void) dst;
    (void) bytes;
    snprintf(err, errlen, "built without CUDA");
    return -1;
#endif
}
