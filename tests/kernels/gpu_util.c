/* gpu_util.c: helpers for the CUDA kernel tests: device check, device memory, random data, comparisons. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tests/kernels/gpu_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/cpu/dtype.h"

/* Skips the program when there is no usable CUDA device. */
void gu_require_device(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        skip_all("no CUDA device");
    if (cudaSetDevice(0) != cudaSuccess)
        bail("cudaSetDevice(0) failed");
}

/* Returns nonzero when PAGED_TEST_QUICK is set to something other than "" or "0". */
int gu_quick(void)
{
    const char *q = getenv("PAGED_TEST_QUICK");
    return q != NULL && q[0] != '\0' && strcmp(q, "0") != 0;
}

/* Returns device memory of bytes (at least 1), bailing on failure. */
void *gu_alloc(size_t bytes)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes > 0 ? bytes : 1);
    if (e != cudaSuccess)
        bail("cudaMalloc(%zu): %s", bytes, cudaGetErrorString(e));
    return p;
}

/* Frees device memory from gu_alloc (NULL is fine). */
void gu_free(void *p)
{
    if (p != NULL && cudaFree(p) != cudaSuccess)
        bail("cudaFree failed");
}

/* Copies bytes from host src to device dst, bailing on failure. */
void gu_upload(void *dst, const void *src, size_t bytes)
{
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess)
        bail("upload of %zu bytes: %s", bytes, cudaGetErrorString(e));
}

/* Copies bytes from device src to host dst, bailing on failure. */
void gu_download(void *dst, const void *src, size_t bytes)
{
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
        bail("download of %zu bytes: %s", bytes, cudaGetErrorString(e));
}

/* Fills device memory with 0xff bytes, bailing on failure. */
void gu_poison(void *p, size_t bytes)
{
    cudaError_t e = cudaMemset(p, 0xff, bytes);
    if (e != cudaSuccess)
        bail("cudaMemset: %s", cudaGetErrorString(e));
}

/* Synchronizes the device, bailing (with what) if anything it ran failed. */
void gu_sync(const char *what)
{
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        bail("%s: %s", what, cudaGetErrorString(e));
}

/* Returns a fresh device copy of host memory. */
void *gu_clone(const void *src, size_t bytes)
{
    void *p = gu_alloc(bytes);
    if (bytes > 0)
        gu_upload(p, src, bytes);
    return p;
}

/* Returns a uniform integer in [lo, hi]. */
int gu_range(tap_rng *rng, int lo, int hi)
{
    return lo + (int) tap_rng_below(rng, (uint64_t) (hi - lo + 1));
}

/* Fills n elements with uniform values in [-amp, amp), fp8 divided by scale first. */
void gu_fill(tap_rng *rng, void *p, size_t n, int32_t dtype, float amp, float scale)
{
    for (size_t i = 0; i < n; i++) {
        float x = (float) tap_rng_uniform(rng, -amp, amp);
        pk_store(p, i, dtype, dtype == PAGED_DTYPE_FP8_E4M3 ? x / scale : x);
    }
}

/* Returns the dtype's name. */
const char *gu_dtype_name(int32_t dtype)
{
    switch (dtype) {
    case PAGED_DTYPE_F32: return "f32";
    case PAGED_DTYPE_F16: return "f16";
    case PAGED_DTYPE_BF16: return "bf16";
    case PAGED_DTYPE_FP8_E4M3: return "fp8";
    default: return "?";
    }
}

/* Returns the relative L2 tolerance of outputs of dtype. */
double gu_tolerance(int32_t dtype)
{
    switch (dtype) {
    case PAGED_DTYPE_F32: return 2e-5;
    case PAGED_DTYPE_F16: return 2e-3;
    default: return 1e-2;
    }
}

/* Compares row by row; see gpu_util.h. */
int gu_compare(const void *got, const void *want, size_t rows, int32_t D, int32_t dtype, double tol,
               double *worst)
{
    double worst_rel = 0.0;
    size_t worst_row = 0, bad_row = 0;
    int bad = 0;
    const char *why = "";
    for (size_t r = 0; r < rows && !bad; r++) {
        double num = 0.0, den = 0.0, amax = 0.0;
        for (int32_t d = 0; d < D; d++) {
            double w = pk_load(want, r * (size_t) D + (size_t) d, dtype);
            if (fabs(w) > amax)
                amax = fabs(w);
        }
        for (int32_t d = 0; d < D; d++) {
            size_t i = r * (size_t) D + (size_t) d;
            double g = pk_load(got, i, dtype), w = pk_load(want, i, dtype);
            if (!isfinite(g)) {
                bad = 1;
                why = "non-finite element";
                bad_row = r;
                diag("row %zu element %d: got %g, want %g", r, (int) d, g, w);
                break;
            }
            if (fabs(g - w) > 4.0 * tol * amax + 1e-6) {
                bad = 1;
                why = "element too far off";
                bad_row = r;
                diag("row %zu element %d: got %.8g, want %.8g (row max |want| %.4g)", r, (int) d, g, w, amax);
                break;
            }
            num += (g - w) * (g - w);
            den += w * w;
        }
        if (bad)
            break;
        double rel = den > 0.0 ? sqrt(num / den) : sqrt(num);
        if (rel > worst_rel) {
            worst_rel = rel;
            worst_row = r;
        }
    }
    if (worst != NULL)
        *worst = bad ? INFINITY : worst_rel;
    if (bad) {
        diag("%s in row %zu", why, bad_row);
        return 0;
    }
    if (worst_rel > tol) {
        diag("row %zu: relative L2 error %.3g above %.3g", worst_row, worst_rel, tol);
        return 0;
    }
    return 1;
}
