/* sum.cu: paged's unit sum on CUDA: the 64-bit check of each of n KV units in device memory (see pk_unit_sum). */
/* SPDX-License-Identifier: MIT */
#include "kernels/sum.cuh"

/* Elements (16 or 8 bytes) each thread reads per chunk: a chunk is threads * this elements. */
#define PK_SUM_PER_THREAD 8
/* The most blocks on grid y (the hardware's limit); more chunks loop. */
#define PK_SUM_MAX_GY 65535u
/* The most blocks on grid x; more units loop. */
#define PK_SUM_MAX_GX 0x7fffffffu

/*
 * Returns the mixed terms of element e of a unit at u: an element is 16 bytes (words 2e and
 * 2e + 1, one 16-byte load) for A = 16, else 8 bytes (word e), read with one 8-byte load for
 * A = 8 or byte by byte for any alignment (A = 1). Words are little-endian, as the device is.
 */
template <int A> __device__ __forceinline__ uint64_t pk_sum_element(const char *u, uint64_t e)
{
    if constexpr (A == 16) {
        return pk_sum_terms16(__ldg((const uint4 *) u + e), e);
    } else if constexpr (A == 8) {
        const uint2 v = __ldg((const uint2 *) u + e);
        return pk_sum_mix(((uint64_t) v.y << 32 | v.x) ^ (PK_SUM_KEY * (e + 1)));
    } else {
        const unsigned char *b = (const unsigned char *) u + 8 * e;
        uint64_t w = 0;
#pragma unroll
        for (int j = 7; j >= 0; --j)
            w = w << 8 | b[j];
        return pk_sum_mix(w ^ (PK_SUM_KEY * (e + 1)));
    }
}

/*
 * Adds the mixed words of the units into sums (zeroed before). Grid x walks the units, grid y
 * the chunks of one unit (threads * PK_SUM_PER_THREAD elements each, consecutive threads on
 * consecutive elements so that the loads coalesce); both loop past the grid. Each warp sums
 * its threads' terms by shuffles and adds them with one atomicAdd: mod 2^64 the order does
 * not matter, so the result is the CPU's bit for bit. Every thread of a block walks the same
 * units, so each warp reaches its shuffles whole. blockDim.x is a multiple of 32.
 */
template <int A>
static __global__ void __launch_bounds__(256)
    pk_unit_sum_kernel(const char *units, uint32_t n, uint64_t unit_bytes, unsigned long long *sums)
{
    const uint64_t elems = unit_bytes / (A == 16 ? 16 : 8);
    const uint64_t chunk = (uint64_t) blockDim.x * PK_SUM_PER_THREAD;
    for (uint64_t unit = blockIdx.x; unit < n; unit += gridDim.x) {
        const char *u = units + unit * unit_bytes;
        uint64_t acc = 0;
        for (uint64_t c = (uint64_t) blockIdx.y * chunk; c < elems; c += (uint64_t) gridDim.y * chunk) {
            const uint64_t end = elems - c < chunk ? elems : c + chunk;
#pragma unroll 4
            for (uint64_t e = c + threadIdx.x; e < end; e += blockDim.x)
                acc += pk_sum_element<A>(u, e);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if ((threadIdx.x & 31) == 0 && acc != 0)
            atomicAdd(sums + unit, (unsigned long long) acc);
    }
}

/* Turns each of the n sums of the words into the unit sum: mix(acc + unit_bytes). */
static __global__ void __launch_bounds__(256) pk_unit_sum_final(uint32_t n, uint64_t unit_bytes, uint64_t *sums)
{
    const uint64_t i = (uint64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        sums[i] = pk_sum_mix(sums[i] + unit_bytes);
}

/* Launches the final mix; see sum.cuh. */
int pk_unit_sums_finish(uint32_t n, uint64_t unit_bytes, uint64_t *sums, cudaStream_t st)
{
    pk_unit_sum_final<<<(unsigned) pk_ceil_div(n, 256), 256, 0, st>>>(n, unit_bytes, sums);
    return pk_launch_status();
}

/* Launches the word kernel reading units with alignment A; returns 0 or PAGED_E_DEVICE. */
template <int A>
static int pk_unit_sum_launch(const char *units, uint32_t n, uint64_t unit_bytes, uint64_t *sums, cudaStream_t st)
{
    const uint64_t elems = unit_bytes / (A == 16 ? 16 : 8);
    if (elems == 0)
        return 0;
    /* Small units get smaller blocks, so that few threads idle: a warp per 32 elements, up to 256. */
    const unsigned threads = elems >= 256 ? 256u : (unsigned) ((elems + 31) / 32 * 32);
    const uint64_t chunk = (uint64_t) threads * PK_SUM_PER_THREAD, chunks = (elems + chunk - 1) / chunk;
    const unsigned gx = n < PK_SUM_MAX_GX ? n : PK_SUM_MAX_GX;
    const unsigned gy = chunks < PK_SUM_MAX_GY ? (unsigned) chunks : PK_SUM_MAX_GY;
    pk_unit_sum_kernel<A><<<dim3(gx, gy), threads, 0, st>>>(units, n, unit_bytes, (unsigned long long *) sums);
    return pk_launch_status();
}

/*
 * Three launches on stream: the sums zeroed, the words of every unit mixed and added into
 * them (16-byte loads where units and unit_bytes allow, else 8-byte or byte loads), and the
 * final mix with the length. sums must not overlap the units.
 */
extern "C" int pk_cuda_unit_sums(const void *units, uint32_t n, uint64_t unit_bytes, uint64_t *sums, void *stream)
{
    if (n == 0)
        return 0;
    if (units == NULL || sums == NULL || unit_bytes % 8 != 0 || unit_bytes > UINT64_MAX / n)
        return PAGED_E_INVAL;
    cudaStream_t st = (cudaStream_t) stream;
    PK_CUDA_CHECK(cudaMemsetAsync(sums, 0, (size_t) n * sizeof *sums, st));
    const char *u = (const char *) units;
    int rc;
    if (unit_bytes % 16 == 0 && pk_aligned(u, 16))
        rc = pk_unit_sum_launch<16>(u, n, unit_bytes, sums, st);
    else if (pk_aligned(u, 8))
        rc = pk_unit_sum_launch<8>(u, n, unit_bytes, sums, st);
    else
        rc = pk_unit_sum_launch<1>(u, n, unit_bytes, sums, st);
    if (rc != 0)
        return rc;
    return pk_unit_sums_finish(n, unit_bytes, sums, st);
}
