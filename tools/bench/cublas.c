/* cublas.c: the bf16 matrix-product ceiling, through a cuBLAS loaded at run time. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "tools/bench/gpu.h"

/*
 * paged-bench must start where cuBLAS is not installed, so it is dlopen'ed, and the few
 * entry points and constants it needs are declared here from cuBLAS's documented ABI
 * (enums are C ints) rather than taken from its headers.
 */
#define CUBLAS_OP_N 0
#define CUDA_R_16BF 14
#define CUBLAS_COMPUTE_32F 68
#define CUBLAS_GEMM_DEFAULT (-1)

typedef int (*cublas_create_fn)(void **handle);
typedef int (*cublas_destroy_fn)(void *handle);
typedef int (*cublas_set_stream_fn)(void *handle, void *stream);
typedef int (*cublas_gemm_ex_fn)(void *handle, int transa, int transb, int m, int n, int k,
                                 const void *alpha, const void *A, int Atype, int lda, const void *B,
                                 int Btype, int ldb, const void *beta, void *C, int Ctype, int ldc,
                                 int compute_type, int algo);

/* One product C = A B of n x n bf16 matrices, and the library to run it. */
struct gemm {
    void *handle;
    cublas_gemm_ex_fn gemm_ex;
    int n;
    void *a, *b, *c;
    int status;          /* the first failing cuBLAS status, 0 while none */
};

/* Launches one product; records a failing status instead of dying (cuBLAS is optional). */
static void gemm_launch(void *ctx, int set)
{
    (void) set;
    struct gemm *g = ctx;
    const float one = 1.0f, zero = 0.0f;
    int st = g->gemm_ex(g->handle, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->a, CUDA_R_16BF,
                        g->n, g->b, CUDA_R_16BF, g->n, &zero, g->c, CUDA_R_16BF, g->n, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT);
    if (st != 0 && g->status == 0)
        g->status = st;
}

/* Loads libcublas (13, 12, or unversioned); returns the handle or NULL with why. */
static void *load_cublas(char *why, size_t whylen)
{
    static const char *const names[] = { "libcublas.so.13", "libcublas.so.12", "libcublas.so" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib != NULL)
            return lib;
    }
    const char *err = dlerror();
    snprintf(why, whylen, "libcublas.so not found (%s)", err != NULL ? err : "dlopen failed");
    return NULL;
}

/* Measures cuBLAS's bf16 rate; returns TFLOP/s or NAN with why. */
double bg_cublas_tflops(int n, int runs, uint64_t seed, char *why, size_t whylen)
{
    void *lib = load_cublas(why, whylen);
    if (lib == NULL)
        return NAN;
    /* The library stays loaded: unloading cuBLAS before exit is known to upset its own
     * teardown, and the process ends soon anyway. */
    cublas_create_fn create = (cublas_create_fn) dlsym(lib, "cublasCreate_v2");
    cublas_destroy_fn destroy = (cublas_destroy_fn) dlsym(lib, "cublasDestroy_v2");
    cublas_set_stream_fn set_stream = (cublas_set_stream_fn) dlsym(lib, "cublasSetStream_v2");
    struct gemm g = { .n = n, .gemm_ex = (cublas_gemm_ex_fn) dlsym(lib, "cublasGemmEx") };
    if (create == NULL || destroy == NULL || set_stream == NULL || g.gemm_ex == NULL) {
        snprintf(why, whylen, "libcublas lacks cublasCreate_v2, cublasSetStream_v2 or cublasGemmEx");
        return NAN;
    }
    int st = create(&g.handle);
    if (st != 0) {
        snprintf(why, whylen, "cublasCreate failed with status %d", st);
        return NAN;
    }
    double result = NAN;
    st = set_stream(g.handle, bg_stream());
    if (st != 0) {
        snprintf(why, whylen, "cublasSetStream failed with status %d", st);
        destroy(g.handle);
        return NAN;
    }
    size_t elems = (size_t) n * (size_t) n;
    g.a = bg_alloc(elems * 2, "matrix A");
    g.b = bg_alloc(elems * 2, "matrix B");
    g.c = bg_alloc(elems * 2, "matrix C");
    bg_fill(g.a, elems, PAGED_DTYPE_BF16, 1.0f, 1.0f, seed);
    bg_fill(g.b, elems, PAGED_DTYPE_BF16, 1.0f, 1.0f, seed + 1);
    bg_fill(g.c, elems, PAGED_DTYPE_BF16, 1.0f, 1.0f, seed + 2);
    bg_sync("filling the matrices");
    double *us = bench_alloc((size_t) runs * sizeof *us, "run times");
    bg_time_runs(gemm_launch, &g, 1, 3, runs, us);
    if (g.status != 0)
        snprintf(why, whylen, "cublasGemmEx failed with status %d", g.status);
    else
        result = 2.0 * (double) n * n * n / (bench_median(us, (size_t) runs) * 1e6);
    free(us);
    bg_free(g.a);
    bg_free(g.b);
    bg_free(g.c);
    destroy(g.handle);
    return result;
}
