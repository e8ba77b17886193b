/* probe.cu: paged-bench's device code: random fill, a streaming-read probe, a copy kernel, a spin, dispatch probes. */
/* SPDX-License-Identifier: MIT */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda/atomic>

#include <stddef.h>
#include <stdint.h>

#include "kernels/ptx.cuh"
#include "paged.h"
#include "tools/bench/probe.h"

namespace {

constexpr int kThreads = 256;   /* per block, for every kernel here */
constexpr int kUnroll = 8;      /* 16-byte loads in flight per thread in the read probe */
constexpr int kCopyUnroll = 4;  /* loads (then stores) in flight per thread in the copy */

/* Returns a well-mixed hash of x (the splitmix64 finalizer, as the host's bench_mix64). */
__device__ __forceinline__ uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Returns element i of the seeded uniform [-1, 1) stream, the same values the host draws. */
__device__ __forceinline__ float uniform(uint64_t seed, uint64_t i)
{
    const uint64_t h = mix64(seed ^ mix64(i));
    return (float) ((double) (h >> 40) * (2.0 / 16777216.0) - 1.0);
}

/* Stores x as element i of p in the element type T's representation. */
template <typename T> __device__ __forceinline__ void store(void *p, size_t i, float x);

/* Stores an f32 element. */
template <> __device__ __forceinline__ void store<float>(void *p, size_t i, float x)
{
    static_cast<float *>(p)[i] = x;
}

/* Stores an f16 element, rounded to nearest. */
template <> __device__ __forceinline__ void store<__half>(void *p, size_t i, float x)
{
    static_cast<__half *>(p)[i] = __float2half_rn(x);
}

/* Stores a bf16 element, rounded to nearest. */
template <> __device__ __forceinline__ void store<__nv_bfloat16>(void *p, size_t i, float x)
{
    static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(x);
}

/* Stores an fp8 e4m3 element, saturated to the largest finite value. */
template <> __device__ __forceinline__ void store<__nv_fp8_storage_t>(void *p, size_t i, float x)
{
    static_cast<__nv_fp8_storage_t *>(p)[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

/* Fills n elements with amp * uniform * mul (mul = 1 / scale for fp8, else 1). */
template <typename T>
__global__ void __launch_bounds__(kThreads) fill_kernel(void *p, size_t n, float amp, float mul, uint64_t seed)
{
    const size_t stride = (size_t) gridDim.x * blockDim.x;
    for (size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        store<T>(p, i, amp * uniform(seed, i) * mul);
}

/*
 * Reads tiles [cta, tiles) step ncta of kThreads * kUnroll 16-byte words: each thread issues
 * its kUnroll loads of a tile before using any, consecutive threads read consecutive words
 * (coalesced). Returns the thread's words XOR-folded into one, so that the caller can keep
 * every load alive by storing it.
 */
__device__ __forceinline__ unsigned read_tiles(const uint4 *__restrict__ src, size_t tiles, size_t cta, size_t ncta)
{
    uint4 acc = make_uint4(0, 0, 0, 0);
    for (size_t t = cta; t < tiles; t += ncta) {
        const uint4 *base = src + t * (kThreads * kUnroll) + threadIdx.x;
        uint4 v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; u++)
            v[u] = __ldg(base + u * kThreads);
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            acc.x ^= v[u].x;
            acc.y ^= v[u].y;
            acc.z ^= v[u].z;
            acc.w ^= v[u].w;
        }
    }
    return acc.x ^ acc.y ^ acc.z ^ acc.w;
}

/* XOR-reduces r over the warp and XORs it into *sink from one lane; returns nothing. */
__device__ __forceinline__ void fold_into(unsigned r, unsigned *sink)
{
    for (int off = 16; off > 0; off /= 2)
        r ^= __shfl_xor_sync(0xffffffffu, r, off);
    if ((threadIdx.x & 31) == 0)
        atomicXor(sink, r);
}

/* The streaming-read probe: blocks walk the tiles grid-stride (read_tiles), the words end in
 * *sink, so the compiler must keep every load. */
__global__ void __launch_bounds__(kThreads) read_kernel(const uint4 *__restrict__ src, size_t tiles, unsigned *sink)
{
    fold_into(read_tiles(src, tiles, blockIdx.x, gridDim.x), sink);
}

/* Copies tiles of kThreads * kCopyUnroll 16-byte words: all loads of a tile, then all stores. */
__global__ void __launch_bounds__(kThreads) copy_kernel(uint4 *__restrict__ dst, const uint4 *__restrict__ src,
                                                        size_t tiles)
{
    for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        const size_t first = t * (kThreads * kCopyUnroll) + threadIdx.x;
        uint4 v[kCopyUnroll];
#pragma unroll
        for (int u = 0; u < kCopyUnroll; u++)
            v[u] = __ldg(src + first + u * kThreads);
#pragma unroll
        for (int u = 0; u < kCopyUnroll; u++)
            dst[first + u * kThreads] = v[u];
    }
}

/* Spins one thread until ns nanoseconds have passed on the global timer. */
__global__ void spin_kernel(uint64_t ns)
{
    const uint64_t start = pk_globaltimer_ns();
    while (pk_globaltimer_ns() - start < ns)
        __nanosleep(1000);
}

/* A word of mapped host memory (or device memory) seen at system scope: a store by the host
 * reaches the loads without a cached copy in between, and our release stores reach the host
 * after everything written before them. */
using sys_word = cuda::atomic_ref<unsigned, cuda::thread_scope_system>;

/* A word of device memory shared by the grid's blocks. */
using gpu_word = cuda::atomic_ref<unsigned, cuda::thread_scope_device>;

/*
 * The clock probe: one thread, beside the timed runs, waits for words[0] to hold gen (written
 * by the runs' stream when they start), counts SM clock cycles and global-timer nanoseconds
 * until words[1] holds gen (written when they end) and stores both in out[0..1]. Gives up,
 * leaving zeros, after timeout_ns. It naps between looks so as to take little from the SM it
 * shares with the runs, and keeps to a few registers (14 on sm_90a: one warp's 512 fit beside
 * a CTA that takes all but 1024 of the register file, as the wgmma prefill's does), so that
 * it does not keep a CTA of the runs off its SM.
 */
__global__ void clock_kernel(unsigned *words, unsigned gen, uint64_t timeout_ns, unsigned long long *out)
{
    const uint64_t begin = pk_globaltimer_ns();
    out[0] = out[1] = 0;
    while (gpu_word(words[0]).load(cuda::memory_order_relaxed) != gen) {
        if (pk_globaltimer_ns() - begin > timeout_ns)
            return;
        __nanosleep(256);
    }
    const uint64_t t0 = pk_globaltimer_ns();
    const long long c0 = clock64();
    while (gpu_word(words[1]).load(cuda::memory_order_relaxed) != gen) {
        if (pk_globaltimer_ns() - begin > timeout_ns)
            return;
        __nanosleep(256);
    }
    const long long c1 = clock64();
    const uint64_t t1 = pk_globaltimer_ns();
    out[0] = (unsigned long long) (c1 - c0);
    out[1] = t1 - t0;
}

/* Counts this block's arrival at *count (thread 0, after the block's work); the block that
 * brings it to target stores seq to *done (system scope). Returns nothing. */
__device__ __forceinline__ void arrive(unsigned *count, unsigned target, unsigned *done, unsigned seq)
{
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    __threadfence();
    if (atomicAdd(count, 1u) == target - 1) {
        __threadfence_system();
        sys_word(*done).store(seq, cuda::memory_order_release);
    }
}

/* One layer of the dispatch probe: the read probe's work, then the last block to finish
 * writes seq to *done, a word of mapped host memory the host spins on. */
__global__ void __launch_bounds__(kThreads) layer_kernel(const uint4 *__restrict__ src, size_t tiles, unsigned *sink,
                                                         unsigned *count, unsigned *done, unsigned seq)
{
    fold_into(read_tiles(src, tiles, blockIdx.x, gridDim.x), sink);
    /* count runs on over the launches: launch seq is done at seq arrivals of every block. */
    arrive(count, seq * gridDim.x, done, seq);
}

/*
 * The resident dispatch probe: one grid, every block resident (a cooperative launch), runs
 * layers 1..layers. For each, block 0 waits for the host's doorbell *bell (mapped host
 * memory) to reach the layer's number and passes it on through a device word; the other
 * blocks wait for that word; all read the layer's set (layer mod nsets, of set_tiles tiles
 * each); the last block to finish writes the number to *done. words[0] counts arrivals,
 * words[32] carries the doorbell, words[64] says to stop. A wait longer than timeout_ns
 * stops every block and writes UINT32_MAX to *done, so a host that never rings cannot leave
 * the kernel running.
 */
__global__ void __launch_bounds__(kThreads) resident_kernel(const uint4 *__restrict__ src, size_t set_tiles,
                                                            unsigned nsets, unsigned *sink, unsigned *words,
                                                            const unsigned *bell, unsigned *done, unsigned layers,
                                                            uint64_t timeout_ns)
{
    __shared__ int stop;
    for (unsigned seq = 1; seq <= layers; seq++) {
        if (threadIdx.x == 0) {
            const uint64_t t0 = pk_globaltimer_ns();
            int late = 0;
            if (blockIdx.x == 0) {
                sys_word doorbell(*const_cast<unsigned *>(bell));
                while ((int) (doorbell.load(cuda::memory_order_relaxed) - seq) < 0 && !late)
                    late = pk_globaltimer_ns() - t0 > timeout_ns;
                if (late)
                    gpu_word(words[64]).store(1u, cuda::memory_order_relaxed);
                else
                    gpu_word(words[32]).store(seq, cuda::memory_order_release);
            } else {
                gpu_word passed(words[32]), stopped(words[64]);
                while ((int) (passed.load(cuda::memory_order_acquire) - seq) < 0 && !late)
                    late = stopped.load(cuda::memory_order_relaxed) != 0 || pk_globaltimer_ns() - t0 > timeout_ns;
            }
            stop = late;
        }
        __syncthreads();
        if (stop) {
            if (threadIdx.x == 0 && blockIdx.x == 0)
                sys_word(*done).store(0xffffffffu, cuda::memory_order_release);
            return;
        }
        const uint4 *set = src + (size_t) (seq % nsets) * set_tiles * (kThreads * kUnroll);
        fold_into(read_tiles(set, set_tiles, blockIdx.x, gridDim.x), sink);
        arrive(words, seq * gridDim.x, done, seq);
    }
}

/* Returns the fill grid for n elements: enough blocks for the SMs, no more than needed. */
unsigned fill_blocks(size_t n)
{
    const size_t need = (n + kThreads - 1) / kThreads;
    return (unsigned) (need < 65536 ? (need > 0 ? need : 1) : 65536);
}

} // namespace

/* Returns the tile size of the read and copy kernels, the larger of the two. */
extern "C" size_t bp_tile_bytes(void)
{
    return (size_t) kThreads * kUnroll * sizeof(uint4);
}

/* Launches the fill for dtype; returns the launch status. */
extern "C" int bp_fill(void *p, size_t n, int32_t dtype, float amp, float scale, uint64_t seed, void *stream)
{
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    const unsigned blocks = fill_blocks(n);
    switch (dtype) {
    case PAGED_DTYPE_F32: fill_kernel<float><<<blocks, kThreads, 0, s>>>(p, n, amp, 1.0f, seed); break;
    case PAGED_DTYPE_F16: fill_kernel<__half><<<blocks, kThreads, 0, s>>>(p, n, amp, 1.0f, seed); break;
    case PAGED_DTYPE_BF16: fill_kernel<__nv_bfloat16><<<blocks, kThreads, 0, s>>>(p, n, amp, 1.0f, seed); break;
    case PAGED_DTYPE_FP8_E4M3:
        fill_kernel<__nv_fp8_storage_t><<<blocks, kThreads, 0, s>>>(p, n, amp, 1.0f / scale, seed);
        break;
    default: return (int) cudaErrorInvalidValue;
    }
    return (int) cudaGetLastError();
}

/* Stores in *blocks waves times the blocks of kernel (kThreads each, no dynamic shared
 * memory) that the current device keeps resident at once; returns the status. */
template <typename K> static cudaError_t resident_blocks(K kernel, int waves, int *blocks)
{
    int dev = 0, sms = 0, per_sm = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0);
    if (e == cudaSuccess)
        *blocks = waves * sms * (per_sm > 0 ? per_sm : 1);
    return e;
}

/* Computes the probes' grid from the occupancy of the read kernel; returns the status. */
extern "C" int bp_grid(int waves, int *blocks)
{
    return (int) resident_blocks(read_kernel, waves, blocks);
}

/* Launches the read probe; returns the launch status. */
extern "C" int bp_read(const void *src, size_t bytes, unsigned *sink, int blocks, void *stream)
{
    const size_t tiles = bytes / bp_tile_bytes();
    read_kernel<<<(unsigned) blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const uint4 *>(src), tiles, sink);
    return (int) cudaGetLastError();
}

/* Launches the copy kernel; returns the launch status. */
extern "C" int bp_copy(void *dst, const void *src, size_t bytes, int blocks, void *stream)
{
    const size_t tiles = bytes / ((size_t) kThreads * kCopyUnroll * sizeof(uint4));
    copy_kernel<<<(unsigned) blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<uint4 *>(dst), static_cast<const uint4 *>(src), tiles);
    return (int) cudaGetLastError();
}

/* Launches the spin; returns the launch status. */
extern "C" int bp_spin(uint64_t ns, void *stream)
{
    spin_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(ns);
    return (int) cudaGetLastError();
}

/* Launches the clock probe (clock_kernel) on stream; returns the launch status. */
extern "C" int bp_clock(unsigned *words, unsigned gen, uint64_t timeout_ns, unsigned long long *out, void *stream)
{
    clock_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(words, gen, timeout_ns, out);
    return (int) cudaGetLastError();
}

/* Launches one layer of the dispatch probe; returns the launch status. */
extern "C" int bp_layer(const void *src, size_t bytes, unsigned *sink, unsigned *count, unsigned *done, unsigned seq,
                        int blocks, void *stream)
{
    const size_t tiles = bytes / bp_tile_bytes();
    layer_kernel<<<(unsigned) blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const uint4 *>(src), tiles, sink, count, done, seq);
    return (int) cudaGetLastError();
}

/* Stores in *blocks the resident probe's grid: every block it can keep resident at once. */
extern "C" int bp_resident_grid(int *blocks)
{
    return (int) resident_blocks(resident_kernel, 1, blocks);
}

/* Launches the resident dispatch probe cooperatively; returns the launch status. */
extern "C" int bp_resident(const void *src, size_t set_bytes, unsigned nsets, unsigned *sink, unsigned *words,
                           const unsigned *bell, unsigned *done, unsigned layers, uint64_t timeout_ns, int blocks,
                           void *stream)
{
    const uint4 *s = static_cast<const uint4 *>(src);
    size_t set_tiles = set_bytes / bp_tile_bytes();
    void *args[] = { &s, &set_tiles, &nsets, &sink, &words, &bell, &done, &layers, &timeout_ns };
    return (int) cudaLaunchCooperativeKernel((const void *) resident_kernel, dim3((unsigned) blocks), dim3(kThreads),
                                             args, 0, static_cast<cudaStream_t>(stream));
}
