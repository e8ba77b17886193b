/* ptx.cuh: every inline-PTX wrapper of the kernels: cp.async copies, ldmatrix, mma.sync m16n8k16. */
/* SPDX-License-Identifier: MIT */
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

#endif
