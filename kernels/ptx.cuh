/* ptx.cuh: inline PTX: cp.async, barriers, setmaxnreg, ldmatrix, mma.sync, griddepcontrol, the global timer. */
/* SPDX-License-Identifier: MIT */
/* The wgmma and TMA wrappers are in wgmma.cuh and tma.cuh. */
#ifndef PAGED_KERNELS_PTX_CUH
#define PAGED_KERNELS_PTX_CUH

#include "kernels/common.cuh"

/*
 * Keeping all inline assembly here, behind small functions, keeps the kernels readable and
 * gives one place to look when moving to a new architecture.
 */

/* ---- asynchronous global-to-shared copies (cp.async, sm_80 and later). */

/* Starts a 16-byte copy from global gmem to shared smem; both must be 16-byte aligned. */
__device__ __forceinline__ void pk_cp_async16(void *smem, const void *gmem)
{
    unsigned s = (unsigned) __cvta_generic_to_shared(smem);
    size_t g = __cvta_generic_to_global(gmem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(g) : "memory");
}

/*
 * Starts a 16-byte copy like pk_cp_async16, or, when !valid, writes 16 zero bytes to smem
 * without reading gmem (the source size operand is 0; gmem must still be a valid address).
 */
__device__ __forceinline__ void pk_cp_async16_zfill(void *smem, const void *gmem, bool valid)
{
    unsigned s = (unsigned) __cvta_generic_to_shared(smem);
    size_t g = __cvta_generic_to_global(gmem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(g), "r"(valid ? 16 : 0)
                 : "memory");
}

/* Closes the group of copies this thread started since the last commit. */
__device__ __forceinline__ void pk_cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Waits until at most N of this thread's committed groups are still in flight. */
template <int N> __device__ __forceinline__ void pk_cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* Waits at named barrier id (1 to 15; 0 is __syncthreads's) until count threads (a multiple of 32) have arrived. */
__device__ __forceinline__ void pk_named_barrier(int id, int count)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

/* Sets this warpgroup's registers per thread to N (a multiple of 8), giving the rest back to the SM (sm_90a). */
template <int N> __device__ __forceinline__ void pk_setmaxnreg_dec(void)
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

/* Raises this warpgroup's registers per thread to N (a multiple of 8), waiting until the SM has them (sm_90a). */
template <int N> __device__ __forceinline__ void pk_setmaxnreg_inc(void)
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

/* ---- tensor cores: ldmatrix and mma.sync (sm_80 and later). */

/*
 * Fragment layouts of mma.sync.m16n8k16 with 16-bit inputs and f32 accumulators, for lane l,
 * g = l / 4, c = 2 * (l % 4):
 *   A (16x16, row-major): a0 = A[g][c..c+1], a1 = A[g+8][c..], a2 = A[g][c+8..], a3 = A[g+8][c+8..]
 *   B (16x8, k by n):     b0 = B[c..c+1][g],  b1 = B[c+8..c+9][g]
 *   C (16x8, f32):        c0, c1 = C[g][c], C[g][c+1];  c2, c3 = C[g+8][c], C[g+8][c+1]
 * ldmatrix gives thread l the elements [l / 4][2 * (l % 4) ..+1] of each 8x8 matrix whose row
 * addresses lanes 8i..8i+7 supply (transposed with .trans), which matches A and B above.
 */

/* Loads four 8x8 16-bit matrices from shared memory (row address per lane) into r[0..3]. */
__device__ __forceinline__ void pk_ldmatrix_x4(uint32_t r[4], const void *smem_row)
{
    unsigned a = (unsigned) __cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

/* Like pk_ldmatrix_x4, each matrix transposed. */
__device__ __forceinline__ void pk_ldmatrix_x4_trans(uint32_t r[4], const void *smem_row)
{
    unsigned a = (unsigned) __cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

/* Loads two 8x8 16-bit matrices (row addresses from lanes 0..15) into r[0..1]. */
__device__ __forceinline__ void pk_ldmatrix_x2(uint32_t r[2], const void *smem_row)
{
    unsigned a = (unsigned) __cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(a));
}

/* Like pk_ldmatrix_x2, each matrix transposed. */
__device__ __forceinline__ void pk_ldmatrix_x2_trans(uint32_t r[2], const void *smem_row)
{
    unsigned a = (unsigned) __cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(a));
}

/*
 * Returns this lane's word of the transpose of the 8x8 16-bit matrix whose row l / 4,
 * columns 2 * (l % 4) ..+1 lane l passes in x (the ldmatrix layout on both sides): turns a
 * C fragment of one mma into a B fragment of the next without touching shared memory.
 */
__device__ __forceinline__ uint32_t pk_movmatrix_trans(uint32_t x)
{
    uint32_t r;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
    return r;
}

/* d += A * B for one m16n8k16 tile with element type T (__half or __nv_bfloat16). */
template <typename T>
__device__ __forceinline__ void pk_mma16816(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void pk_mma16816<__half>(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void pk_mma16816<__nv_bfloat16>(float d[4], const uint32_t a[4], uint32_t b0,
                                                          uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* ---- programmatic dependent launch (sm_90 and later; no-ops before). */

/* Lets the grid launched after this one on the stream (with programmatic serialization)
 * start its blocks now; they wait in pk_grid_dependency_wait until this grid is done. */
__device__ __forceinline__ void pk_grid_launch_dependents(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/* Waits until the grids this one depends on have finished and their writes are visible. */
__device__ __forceinline__ void pk_grid_dependency_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/* ---- the clock. */

/* Returns the device's global timer: nanoseconds, the same on every SM. */
__device__ __forceinline__ unsigned long long pk_globaltimer_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* ---- conversions and special functions. */

/* Returns the f16 pair (low byte first) of the two e4m3 bytes in the low (high: upper) half
 * of x: on sm_89 and later one cvt straight from the register half, no shift or mask. */
template <bool HIGH> __device__ __forceinline__ uint32_t pk_cvt_e4m3x2(uint32_t x)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    uint32_t r;
    if (HIGH)
        asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %1;\ncvt.rn.f16x2.e4m3x2 %0, h;\n}\n" : "=r"(r) : "r"(x));
    else
        asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %1;\ncvt.rn.f16x2.e4m3x2 %0, l;\n}\n" : "=r"(r) : "r"(x));
    return r;
#else
    return pk_e4m3x2_to_f16x2(HIGH ? x >> 16 : x & 0xffffu);
#endif
}

/* Returns 2^x by the bare MUFU.EX2 (ex2.approx.ftz: about 2 ulp; results under 2^-126 flush
 * to 0, 2^-inf = 0), without exp2f's rescaling for subnormal results, which a softmax weight
 * that small does not need. */
__device__ __forceinline__ float pk_exp2(float x)
{
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}

#endif
