/* tma.cuh: inline-PTX wrappers of Hopper's tensor copies (TMA) and the shared-memory barriers they complete on. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_TMA_CUH
#define PAGED_KERNELS_TMA_CUH

#include <cuda.h>

#include "kernels/common.cuh"

/*
 * A TMA copy moves a box of a tensor described by a CUtensorMap (made on the host, passed as
 * a __grid_constant__ kernel parameter) into shared memory, swizzled as the map says, and
 * counts its bytes on an mbarrier: a barrier whose phase completes when its expected arrivals
 * have arrived and its expected bytes have landed. Waiters wait for a phase by its parity.
 * Coordinates outside the tensor read as zeros, and still count. Used only by sm_90a code.
 */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

/* Returns the shared-memory address of p (a pointer into shared memory) as PTX wants it. */
__device__ __forceinline__ uint32_t pk_smem_addr(const void *p)
{
    return (uint32_t) __cvta_generic_to_shared(p);
}

/* Initializes the mbarrier at bar for count arrivals per phase (one thread, before any use). */
__device__ __forceinline__ void pk_mbar_init(uint64_t *bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(pk_smem_addr(bar)), "r"(count) : "memory");
}

/* Makes this thread's mbarrier initializations visible to the async proxy (TMA); a CTA barrier must follow. */
__device__ __forceinline__ void pk_mbar_init_fence(void)
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/* Arrives once on bar and adds bytes to the bytes its current phase expects. */
__device__ __forceinline__ void pk_mbar_expect(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(pk_smem_addr(bar)), "r"(bytes)
                 : "memory");
}

/* Arrives once on bar. */
__device__ __forceinline__ void pk_mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(pk_smem_addr(bar)) : "memory");
}

/* Waits until the phase of bar with parity parity (0 or 1) has completed. */
__device__ __forceinline__ void pk_mbar_wait(uint64_t *bar, uint32_t parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "wait_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra wait_%=;\n"
                 "}\n" ::"r"(pk_smem_addr(bar)),
                 "r"(parity)
                 : "memory");
}

/*
 * Starts the copy of the box at coordinates (c0, c1) of the 2-D tensor map into shared memory
 * at dst (aligned as the map's swizzle needs), counting its bytes on bar.
 */
__device__ __forceinline__ void pk_tma_load_2d(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
                 "[%4];\n" ::"r"(pk_smem_addr(dst)),
                 "l"((uint64_t) map), "r"(c0), "r"(c1), "r"(pk_smem_addr(bar))
                 : "memory");
}

/*
 * Starts the copy of the box at coordinates (c0, c1, c2) of the 3-D tensor map into shared
 * memory at dst (aligned as the map's swizzle needs), counting its bytes on bar.
 */
__device__ __forceinline__ void pk_tma_load_3d(void *dst, const CUtensorMap *map, int c0, int c1, int c2,
                                               uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, "
                 "%4}], [%5];\n" ::"r"(pk_smem_addr(dst)),
                 "l"((uint64_t) map), "r"(c0), "r"(c1), "r"(c2), "r"(pk_smem_addr(bar))
                 : "memory");
}

#endif

#endif
