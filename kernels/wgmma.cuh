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

/* The accumulator operands of an m64nNk16 wgmma with f32 accumulators d[0 .. N/2): their
 * placeholders, and the operands themselves under constraint C ("+f", or "=f" where d is only
 * written). The other operands are numbered from N/2 on. */
#define PK_WGMMA_REGS32                                                                          \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define PK_WGMMA_REGS64                                                                          \
    PK_WGMMA_REGS32 ", "                                                                         \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, " \
    "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define PK_WGMMA_ACC32(C)                                                                               \
    C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]), C(d[8]), C(d[9]), C(d[10]), \
    C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15]), C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), \
    C(d[21]), C(d[22]), C(d[23]), C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), \
    C(d[31])
#define PK_WGMMA_ACC64(C)                                                                               \
    PK_WGMMA_ACC32(C), C(d[32]), C(d[33]), C(d[34]), C(d[35]), C(d[36]), C(d[37]), C(d[38]), C(d[39]),  \
    C(d[40]), C(d[41]), C(d[42]), C(d[43]), C(d[44]), C(d[45]), C(d[46]), C(d[47]), C(d[48]), C(d[49]), \
    C(d[50]), C(d[51]), C(d[52]), C(d[53]), C(d[54]), C(d[55]), C(d[56]), C(d[57]), C(d[58]), C(d[59]), \
    C(d[60]), C(d[61]), C(d[62]), C(d[63])

/*
 * One asynchronous wgmma of shape m64nNk16, f32 accumulators d, inputs of PTX type TY: REGS and
 * ACC are the accumulator placeholders and operands above, C their constraint, OPS the rest of
 * the instruction (A, B, scale-d and the immediates), the inputs follow.
 */
#define PK_WGMMA(N, TY, REGS, ACC, C, OPS, ...)                                                        \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" REGS "}, " OPS ";\n" \
                 : ACC(C)                                                                              \
                 : __VA_ARGS__)

/* Returns whether T is bf16 (else f16): the PTX type the wgmma below name. */
template <typename T> constexpr bool pk_wgmma_bf16(void)
{
    return std::is_same<T, __nv_bfloat16>::value;
}

/*
 * The wgmma of shape m64nNk16 (N 64 or 128) for input type T (bf16 or f16), accumulators
 * under constraint C; OPS64 and OPS128 are the rest of the instruction for each N (the
 * operand numbers differ), the inputs follow.
 */
#define PK_WGMMA_FOR(T, N, C, OPS64, OPS128, ...)                                                     \
    do {                                                                                             \
        static_assert(N == 64 || N == 128, "m64n64k16 and m64n128k16 only");                         \
        if constexpr (N == 64 && pk_wgmma_bf16<T>())                                                 \
            PK_WGMMA(64, "bf16", PK_WGMMA_REGS32, PK_WGMMA_ACC32, C, OPS64, __VA_ARGS__);            \
        else if constexpr (N == 64)                                                                  \
            PK_WGMMA(64, "f16", PK_WGMMA_REGS32, PK_WGMMA_ACC32, C, OPS64, __VA_ARGS__);             \
        else if constexpr (pk_wgmma_bf16<T>())                                                       \
            PK_WGMMA(128, "bf16", PK_WGMMA_REGS64, PK_WGMMA_ACC64, C, OPS128, __VA_ARGS__);          \
        else                                                                                         \
            PK_WGMMA(128, "f16", PK_WGMMA_REGS64, PK_WGMMA_ACC64, C, OPS128, __VA_ARGS__);           \
    } while (0)

/* d = A B: A (64x16, rows of descriptor da) and B (16xN, K-major, db) in shared memory; d's old values are dead. */
template <typename T, int N> __device__ __forceinline__ void pk_wgmma_ss0(float (&d)[N / 2], uint64_t da, uint64_t db)
{
    PK_WGMMA_FOR(T, N, "=f", "%32, %33, 0, 1, 1, 0, 0", "%64, %65, 0, 1, 1, 0, 0", "l"(da), "l"(db));
}

/* d += A B: A (64x16, rows of descriptor da) and B (16xN, K-major, db) in shared memory. */
template <typename T, int N> __device__ __forceinline__ void pk_wgmma_ss(float (&d)[N / 2], uint64_t da, uint64_t db)
{
    PK_WGMMA_FOR(T, N, "+f", "%32, %33, 1, 1, 1, 0, 0", "%64, %65, 1, 1, 1, 0, 0", "l"(da), "l"(db));
}

/* d += A B: A (64x16) in registers a, B (16xN, MN-major, descriptor db) in shared memory. */
template <typename T, int N>
__device__ __forceinline__ void pk_wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db)
{
    PK_WGMMA_FOR(T, N, "+f", "{%32, %33, %34, %35}, %36, 1, 1, 1, 1", "{%64, %65, %66, %67}, %68, 1, 1, 1, 1",
                 "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

#endif /* PK_HAVE_WGMMA */

#endif
