/* sum.cuh: the unit sum's words on CUDA (see pk_unit_sum in kernels.h), shared by the sum and units copy kernels. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_SUM_CUH
#define PAGED_KERNELS_SUM_CUH

#include "kernels/common.cuh"

/* The odd constant whose multiples key each word by its position (word i gets it times i + 1). */
#define PK_SUM_KEY 0x9e3779b97f4a7c15ull

/* Returns z mixed by the splitmix64 finalizer, as pk_unit_sum's mix. */
__device__ __forceinline__ uint64_t pk_sum_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Returns the mixed terms of the 16-byte element v at element index e of its unit: words
 * 2e and 2e + 1, little-endian as the device is. */
__device__ __forceinline__ uint64_t pk_sum_terms16(uint4 v, uint64_t e)
{
    const uint64_t k = PK_SUM_KEY * (2 * e + 1);
    return pk_sum_mix(((uint64_t) v.y << 32 | v.x) ^ k) + pk_sum_mix(((uint64_t) v.w << 32 | v.z) ^ (k + PK_SUM_KEY));
}

/* Launches on st the turning of each of the n sums of the words into the unit sum:
 * mix(acc + unit_bytes). Returns 0 or PAGED_E_DEVICE. (sum.cu) */
int pk_unit_sums_finish(uint32_t n, uint64_t unit_bytes, uint64_t *sums, cudaStream_t st);

#endif
