/* wgmma.cuh: inline-PTX wrappers of Hopper's warpgroup matrix multiply (wgmma, sm_90a only). */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_WGMMA_CUH
#define PAGED_KERNELS_WGMMA_CUH

#include <type_traits>

#include "kernels/common.cuh"

/*
 * A warpgroup is 4 consecutive warps (128 threads) that issue one wgmma together. wgmma is
 * asynchronous: its accumulators must not be touched between the issue and the wait, its
 * shared-memory operands are read through the async proxy (so generic writes to them need
 * pk_fence_proxy_async first), and they are described by 64-bit matrix descriptors
 * (pk_wgmma_desc). Everything here compiles only where __CUDA_ARCH_FEAT_SM90_ALL is
 * defined (sm_90a); callers guard their use with PK_HAVE_WGMMA.
 *
 * Fragments of m64nNk16 with f32 accumulators, for thread t of the warpgroup, warp w = t / 32,
 * lane l, g = l / 4, c = 2 * (l % 4): accumulator d[4 j + e] is D[16 w + g + 8 (e / 2)]
 * [8 j + c + e % 2] (mma.sync's m16n8 C fragment, one per 8 columns, four warps stacked);
 * a register A (64x16) is four 16-bit pairs a0 = A[16 w + g][c..c+1], a1 = A[16 w + g + 8][c..],
 * a2 = A[16 w + g][c+8..], a3 = A[16 w + g + 8][c+8..] (mma.sync's A fragment). So the
 * accumulators of a product's 16 columns re-pack directly into the A operand of the next.
 */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PK_HAVE_WGMMA 1
#else
#define PK_HAVE_WGMMA 0
#endif

#if PK_HAVE_WGMMA

/*
 * Returns the descriptor of a shared-memory operand at smem laid out in 128-byte swizzled
 * atoms (8 rows of 128 bytes, the 16-byte chunk c of row r stored at chunk c ^ (r % 8), atoms
 * 1024-byte aligned). lbo and sbo are the leading and stride byte offsets: for a K-major
 * operand sbo is the distance between 8-row groups (lbo is unused); for an MN-major one lbo
 * is the distance between 64-element column blocks and sbo between 8-row groups along K.
 */
__device__ __forceinline__ uint64_t pk_wgmma_desc(const void *smem, uint32_t lbo, uint32_t sbo)
{
    const uint32_t a = (uint32_t) __cvta_generic_to_shared(smem);
    return (uint64_t) ((a & 0x3ffff) >> 4) | (uint64_t) ((lbo & 0x3ffff) >> 4) << 16
           | (uint64_t) ((sbo & 0x3ffff) >> 4) << 32 | (uint64_t) 1 << 62;
}

/* Orders this thread's earlier generic-proxy writes to shared memory before later async-proxy reads (wgmma). */
__device__ __forceinline__ void pk_fence_proxy_async(void)
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* Makes this warpgroup's register writes (accumulators, A fragments) visible to the wgmma issued next. */
__device__ __forceinline__ void pk_wgmma_fence(void)
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

/* Closes the group of the wgmma this warpgroup issued since the last commit. */
__device__ __forceinline__ void pk_wgmma_commit(void)
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

/* Waits until at most N of this warpgroup's committed wgmma groups are still running. */
template <int N> __device__ __forceinline__ void pk_wgmma_wait(void)
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Keeps the compiler from moving reads or writes of the N accumulators in d across this point. */
template <int N> __device__ __forceinline__ void pk_wgmma_pin(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm volatile("" : "+f"(d[i])::"memory");
}

/* Keeps the compiler from moving reads or writes of the N A-fragment registers in a across this point. */
template <int N> __device__ __forceinline__ void pk_wgmma_pin(uint32_t (&a)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm volatile("" : "+r"(a[i])::"memory");
}

/* d += A B: A, B in shared memory, K-major; m64n64k16, inputs TY */
#define PK_WGMMA_SS_N64(TY)                                                                                       \
    asm volatile(                                                                                                 \
        "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                                               \
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                 \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                       \
        "%32, %33, 1, 1, 1, 0, 0;\n"                                                                              \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),         \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),   \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])  \
        : "l"(da), "l"(db))

/* d = A B (d only written): A, B in shared memory, K-major; m64n64k16, inputs TY */
#define PK_WGMMA_SS0_N64(TY)                                                                                      \
    asm volatile(                                                                                                 \
        "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                                               \
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                 \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                       \
        "%32, %33, 0, 1, 1, 0, 0;\n"                                                                              \
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]),         \
          "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]),   \
          "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), \
          "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])  \
        : "l"(da), "l"(db))

/* d += A B: A in registers, B in shared memory, MN-major; m64n64k16, inputs TY */
#define PK_WGMMA_RS_N64(TY)                                                                                       \
    asm volatile(                                                                                                 \
        "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                                               \
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                 \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                       \
        "{%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"                                                                \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),         \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),   \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])  \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db))

/* d += A B: A, B in shared memory, K-major; m64n128k16, inputs TY */
#define PK_WGMMA_SS_N128(TY)                                                                                      \
    asm volatile(                                                                                                 \
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " "                                              \
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                 \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                        \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                        \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "                       \
        "%64, %65, 1, 1, 1, 0, 0;\n"                                                                              \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),         \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),   \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])  \
        : "l"(da), "l"(db))

/* d = A B (d only written): A, B in shared memory, K-major; m64n128k16, inputs TY */
#define PK_WGMMA_SS0_N128(TY)                                                                                     \
    asm volatile(                                                                                                 \
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " "                                              \
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                 \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                        \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                        \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "                       \
        "%64, %65, 0, 1, 1, 0, 0;\n"                                                                              \
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]),         \
          "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]),   \
          "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), \
          "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31]), \
          "=f"(d[32]), "=f"(d[33]), "=f"(d[34]), "=f"(d[35]), "=f"(d[36]), "=f"(d[37]), "=f"(d[38]), "=f"(d[39]), \
          "=f"(d[40]), "=f"(d[41]), "=f"(d[42]), "=f"(d[43]), "=f"(d[44]), "=f"(d[45]), "=f"(d[46]), "=f"(d[47]), \
          "=f"(d[48]), "=f"(d[49]), "=f"(d[50]), "=f"(d[51]), "=f"(d[52]), "=f"(d[53]), "=f"(d[54]), "=f"(d[55]), \
          "=f"(d[56]), "=f"(d[57]), "=f"(d[58]), "=f"(d[59]), "=f"(d[60]), "=f"(d[61]), "=f"(d[62]), "=f"(d[63])  \
        : "l"(da), "l"(db))

/* d += A B: A in registers, B in shared memory, MN-major; m64n128k16, inputs TY */
#define PK_WGMMA_RS_N128(TY)                                                                                      \
    asm volatile(                                                                                                 \
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " "                                              \
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                 \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                        \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                        \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "                       \
        "{%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"                                                                \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),         \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),   \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])  \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db))

/* d = A B: A (64x16, rows of descriptor da) and B (16xN, K-major, db) in shared memory; d's old values are dead. */
template <typename T, int N> __device__ __forceinline__ void pk_wgmma_ss0(float (&d)[N / 2], uint64_t da, uint64_t db)
{
    static_assert(N == 64 || N == 128, "m64n64k16 and m64n128k16 only");
    if constexpr (N == 64 && std::is_same<T, __nv_bfloat16>::value)
        PK_WGMMA_SS0_N64("bf16");
    else if constexpr (N == 64)
        PK_WGMMA_SS0_N64("f16");
    else if constexpr (std::is_same<T, __nv_bfloat16>::value)
        PK_WGMMA_SS0_N128("bf16");
    else
        PK_WGMMA_SS0_N128("f16");
}

/* d += A B: A (64x16, rows of descriptor da) and B (16xN, K-major, db) in shared memory. */
template <typename T, int N> __device__ __forceinline__ void pk_wgmma_ss(float (&d)[N / 2], uint64_t da, uint64_t db)
{
    static_assert(N == 64 || N == 128, "m64n64k16 and m64n128k16 only");
    if constexpr (N == 64 && std::is_same<T, __nv_bfloat16>::value)
        PK_WGMMA_SS_N64("bf16");
    else if constexpr (N == 64)
        PK_WGMMA_SS_N64("f16");
    else if constexpr (std::is_same<T, __nv_bfloat16>::value)
        PK_WGMMA_SS_N128("bf16");
    else
        PK_WGMMA_SS_N128("f16");
}

/* d += A B: A (64x16) in registers a, B (16xN, MN-major, descriptor db) in shared memory. */
template <typename T, int N>
__device__ __forceinline__ void pk_wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db)
{
    static_assert(N == 64 || N == 128, "m64n64k16 and m64n128k16 only");
    if constexpr (N == 64 && std::is_same<T, __nv_bfloat16>::value)
        PK_WGMMA_RS_N64("bf16");
    else if constexpr (N == 64)
        PK_WGMMA_RS_N64("f16");
    else if constexpr (std::is_same<T, __nv_bfloat16>::value)
        PK_WGMMA_RS_N128("bf16");
    else
        PK_WGMMA_RS_N128("f16");
}

#endif /* PK_HAVE_WGMMA */

#endif
