/* gpu_util.h: helpers for the CUDA kernel tests: device check, device memory, random data, comparisons. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_KERNELS_GPU_UTIL_H
#define PAGED_TESTS_KERNELS_GPU_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "tests/kernels/naive.h"
#include "tests/tap/basic.h"

/*
 * Skips the whole program ("1..0 # SKIP no CUDA device") when the CUDA runtime finds no
 * device (no driver, or no GPU), else selects device 0. Call it before anything else.
 */
void gu_require_device(void);

/* Returns nonzero when $PAGED_TEST_QUICK asks for the reduced case set (compute-sanitizer runs). */
int gu_quick(void);

/* Device memory: each bails out of the test on a CUDA error, naming what failed. */
void *gu_alloc(size_t bytes);
void gu_free(void *p);
void gu_upload(void *dst, const void *src, size_t bytes);
void gu_download(void *dst, const void *src, size_t bytes);
/* Fills bytes of device memory with 0xff: NaN in every float type, so unwritten outputs fail. */
void gu_poison(void *p, size_t bytes);
/* Waits for the device and bails if a kernel failed. */
void gu_sync(const char *what);

/* Returns a device copy of bytes of host memory src. */
void *gu_clone(const void *src, size_t bytes);

/* Returns a uniform random integer in [lo, hi]. */
int gu_range(tap_rng *rng, int lo, int hi);

/*
 * Stores n random elements of dtype at p: uniform in [-amp, amp); for fp8 the value divided
 * by scale and rounded (what an fp8 cache would hold), never NaN.
 */
void gu_fill(tap_rng *rng, void *p, size_t n, int32_t dtype, float amp, float scale);

/* Returns the name of a dtype for test messages. */
const char *gu_dtype_name(int32_t dtype);

/*
 * Returns the relative L2 tolerance for attention outputs of dtype: f32 2e-5, f16 2e-3,
 * bf16 1e-2 (fp8 caches use their query dtype's; the reference reads the same fp8 bits).
 */
double gu_tolerance(int32_t dtype);

/*
 * Compares rows x D elements of dtype, got against want (the reference's output): every
 * element finite, each row's relative L2 error within tol, and each element within
 * 4 * tol * (the row's largest |want|) + 1e-6. Returns 1 if so; otherwise prints the worst
 * row as a diagnostic and returns 0. *worst receives the worst row's relative error.
 */
int gu_compare(const void *got, const void *want, size_t rows, int32_t D, int32_t dtype, double tol,
               double *worst);

#endif
