/* common.cuh: helpers shared by the CUDA kernels: error checks, dtype traits, async copies, device facts. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_COMMON_CUH
#define PAGED_KERNELS_COMMON_CUH

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <atomic>
#include <type_traits>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

/*
 * Every CUDA runtime call and every launch goes through PK_CUDA_CHECK: on failure the calling
 * host function returns PAGED_E_DEVICE. A macro, not a function, because it must return from
 * its caller.
 */
#define PK_CUDA_CHECK(call)                                                                   \
    do {                                                                                      \
        if ((call) != cudaSuccess)                                                            \
            return PAGED_E_DEVICE;                                                            \
    } while (0)

/* The most devices whose facts (SM count, occupancy) are cached; others are asked each time. */
#define PK_MAX_DEVICES 64

/* log2(e): softmax runs in base 2 so that exp2f (one MUFU.EX2 and a scale) does the exponentials. */
#define PK_LOG2E 1.4426950408889634f

/* ---- dtype traits. pk_e4m3 tags an fp8 e4m3 element (its raw bits). */

struct pk_e4m3 {
    uint8_t bits;
};

template <typename T> struct pk_dtype_of;
template <> struct pk_dtype_of<float> { static constexpr int value = PAGED_DTYPE_F32; };
template <> struct pk_dtype_of<__half> { static constexpr int value = PAGED_DTYPE_F16; };
template <> struct pk_dtype_of<__nv_bfloat16> { static constexpr int value = PAGED_DTYPE_BF16; };
template <> struct pk_dtype_of<pk_e4m3> { static constexpr int value = PAGED_DTYPE_FP8_E4M3; };

/* Returns the float value of one element. */
__device__ __forceinline__ float pk_to_f32(float x) { return x; }
__device__ __forceinline__ float pk_to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float pk_to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float pk_to_f32(pk_e4m3 x)
{
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(x.bits, __NV_E4M3)));
}

/* Returns x rounded to nearest (ties to even) in type T; fp8 saturates to +-448 as pk_f32_to_e4m3 does. */
template <typename T> __device__ __forceinline__ T pk_from_f32(float x);
template <> __device__ __forceinline__ float pk_from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half pk_from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 pk_from_f32<__nv_bfloat16>(float x)
{
    return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ pk_e4m3 pk_from_f32<pk_e4m3>(float x)
{
    pk_e4m3 r;
    r.bits = (uint8_t) __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    return r;
}

/* Returns the two floats packed in a 32-bit word of two f16 values (low half first). */
__device__ __forceinline__ float2 pk_f16x2_to_f32x2(uint32_t w)
{
    __half2 h;
    memcpy(&h, &w, sizeof h);
    return __half22float2(h);
}

/* Returns the two floats packed in a 32-bit word of two bf16 values (low half first); exact. */
__device__ __forceinline__ float2 pk_bf16x2_to_f32x2(uint32_t w)
{
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

/* Returns the two f16 values of two fp8 e4m3 bytes (low byte first), packed; exact. */
__device__ __forceinline__ uint32_t pk_e4m3x2_to_f16x2(uint32_t two_bytes)
{
    __half2_raw r = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t) (two_bytes & 0xffffu), __NV_E4M3);
    return (uint32_t) r.x | ((uint32_t) r.y << 16);
}

/*
 * pk_unpack16<T>(raw, out) turns the 16 bytes raw (16 / sizeof(T) elements of type T) into
 * that many floats. It is how every kernel reads cache tiles: one 16-byte shared-memory
 * load, then register-only conversion.
 */
template <typename T> __device__ __forceinline__ void pk_unpack16(uint4 raw, float *out);

template <> __device__ __forceinline__ void pk_unpack16<float>(uint4 raw, float *out)
{
    out[0] = __uint_as_float(raw.x);
    out[1] = __uint_as_float(raw.y);
    out[2] = __uint_as_float(raw.z);
    out[3] = __uint_as_float(raw.w);
}

template <> __device__ __forceinline__ void pk_unpack16<__half>(uint4 raw, float *out)
{
    const uint32_t w[4] = { raw.x, raw.y, raw.z, raw.w };
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float2 f = pk_f16x2_to_f32x2(w[i]);
        out[2 * i] = f.x;
        out[2 * i + 1] = f.y;
    }
}

template <> __device__ __forceinline__ void pk_unpack16<__nv_bfloat16>(uint4 raw, float *out)
{
    const uint32_t w[4] = { raw.x, raw.y, raw.z, raw.w };
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float2 f = pk_bf16x2_to_f32x2(w[i]);
        out[2 * i] = f.x;
        out[2 * i + 1] = f.y;
    }
}

template <> __device__ __forceinline__ void pk_unpack16<pk_e4m3>(uint4 raw, float *out)
{
    const uint32_t w[4] = { raw.x, raw.y, raw.z, raw.w };
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float2 lo = pk_f16x2_to_f32x2(pk_e4m3x2_to_f16x2(w[i]));
        float2 hi = pk_f16x2_to_f32x2(pk_e4m3x2_to_f16x2(w[i] >> 16));
        out[4 * i] = lo.x;
        out[4 * i + 1] = lo.y;
        out[4 * i + 2] = hi.x;
        out[4 * i + 3] = hi.y;
    }
}

/* ---- packing for the tensor cores. */

/* Returns two floats rounded to T and packed (lo in the low half), as an mma operand word. */
template <typename T> __device__ __forceinline__ uint32_t pk_pack2(float lo, float hi);

template <> __device__ __forceinline__ uint32_t pk_pack2<__half>(float lo, float hi)
{
    __half2 h = __floats2half2_rn(lo, hi);
    uint32_t w;
    memcpy(&w, &h, sizeof w);
    return w;
}

template <> __device__ __forceinline__ uint32_t pk_pack2<__nv_bfloat16>(float lo, float hi)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    uint32_t w;
    memcpy(&w, &h, sizeof w);
    return w;
}

/* Returns two fp8 e4m3 bytes (low byte first) converted exactly to T, packed. */
template <typename T> __device__ __forceinline__ uint32_t pk_e4m3x2_to(uint32_t two_bytes);

template <> __device__ __forceinline__ uint32_t pk_e4m3x2_to<__half>(uint32_t two_bytes)
{
    return pk_e4m3x2_to_f16x2(two_bytes);
}

template <> __device__ __forceinline__ uint32_t pk_e4m3x2_to<__nv_bfloat16>(uint32_t two_bytes)
{
    const float2 f = pk_f16x2_to_f32x2(pk_e4m3x2_to_f16x2(two_bytes));
    return pk_pack2<__nv_bfloat16>(f.x, f.y);  /* e4m3 values are exact in bf16 */
}

/* ---- warp and block reductions. */

/* Returns the maximum of v over the warp (every lane gets it). */
__device__ __forceinline__ float pk_warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Returns the sum of v over the warp (every lane gets it). */
__device__ __forceinline__ float pk_warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/*
 * Returns the maximum (is_max) or sum of v over the whole block, to every thread. scratch
 * holds 32 floats of shared memory; the call contains barriers, so every thread must make it.
 */
__device__ __forceinline__ float pk_block_reduce(float v, bool is_max, float *scratch)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = (blockDim.x + 31) >> 5;
    v = is_max ? pk_warp_max(v) : pk_warp_sum(v);
    __syncthreads();                    /* scratch may still be read by a previous call */
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    float r = lane < nwarps ? scratch[lane] : (is_max ? -INFINITY : 0.0f);
    return is_max ? pk_warp_max(r) : pk_warp_sum(r);
}

/* ---- host side. */

/* Returns nonzero if p is a multiple of align bytes (a power of two). */
static inline int pk_aligned(const void *p, size_t align)
{
    return ((uintptr_t) p & (align - 1)) == 0;
}

/* Returns a ceil(a / b) for positive b. */
static inline long long pk_ceil_div(long long a, long long b)
{
    return (a + b - 1) / b;
}

/*
 * Returns the number of multiprocessors of device dev (cached: kernels size their grids by it
 * on every launch), or 0 if CUDA cannot say.
 */
static inline int pk_sm_count(int dev)
{
    static std::atomic<int> cache[PK_MAX_DEVICES];
    if (dev >= 0 && dev < PK_MAX_DEVICES) {
        int n = cache[dev].load(std::memory_order_relaxed);
        if (n > 0)
            return n;
    }
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return 0;
    if (dev >= 0 && dev < PK_MAX_DEVICES)
        cache[dev].store(n, std::memory_order_relaxed);
    return n;
}

/*
 * Prepares kernel fn for launches with smem bytes of dynamic shared memory on device dev and
 * returns how many of its blocks of threads threads fit on one multiprocessor (at least 1),
 * or a negative paged_error. cache (one per kernel) remembers the answer per device, because
 * the attribute and the occupancy query cost more than a launch.
 */
template <typename F>
static int pk_kernel_prepare(F fn, int threads, size_t smem, int dev, std::atomic<int> *cache)
{
    if (dev >= 0 && dev < PK_MAX_DEVICES) {
        int n = cache[dev].load(std::memory_order_acquire);
        if (n > 0)
            return n;
    }
    if (smem > 48 * 1024)
        PK_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) smem));
    int n = 0;
    PK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fn, threads, smem));
    if (n < 1)
        return PAGED_E_GEOMETRY;        /* the kernel cannot run at all with these resources */
    if (dev >= 0 && dev < PK_MAX_DEVICES)
        cache[dev].store(n, std::memory_order_release);
    return n;
}

/* Returns 0 if the launch just made succeeded, else PAGED_E_DEVICE. */
static inline int pk_launch_status(void)
{
    return cudaGetLastError() == cudaSuccess ? 0 : PAGED_E_DEVICE;
}

/*
 * Launches kernel, with programmatic stream serialization where asked and the device allows
 * it: its blocks may then be scheduled while the kernel before it on the stream still runs
 * (once that one's blocks have all started or called griddepcontrol.launch_dependents), so
 * it must begin with griddepcontrol.wait (pk_grid_dependency_wait), which returns when that
 * kernel has finished and its writes are visible. Falls back to a plain launch. Returns 0 or
 * PAGED_E_DEVICE.
 */
template <typename... P>
static int pk_launch_dependent_args(bool programmatic, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                                    cudaStream_t stream, const P &...params)
{
    if (programmatic) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = grid;
        cfg.blockDim = block;
        cfg.dynamicSmemBytes = smem;
        cfg.stream = stream;
        cudaLaunchAttribute attr[1] = {};
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        if (cudaLaunchKernelEx(&cfg, kernel, params...) == cudaSuccess)
            return 0;
        (void) cudaGetLastError();  /* not supported here: launch it the plain way */
    }
    kernel<<<grid, block, smem, stream>>>(params...);
    return pk_launch_status();
}

/* pk_launch_dependent_args for a kernel of one parameter; returns 0 or PAGED_E_DEVICE. */
template <typename P>
static int pk_launch_dependent(void (*kernel)(P), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                               const P &params, bool programmatic)
{
    return pk_launch_dependent_args(programmatic, kernel, grid, block, smem, stream, params);
}

/*
 * Converts 8 consecutive source elements at src to the cache type and stores them at dst:
 * a plain copy when the types agree (fp8 into fp8 too: the bytes are already x / scale), else
 * (fp8 caches) round(x / scale) with saturation, bit-identical to pk_f32_to_e4m3(x / scale).
 * vec selects 16-byte loads (8-byte for fp8 sources) and 16- or 8-byte stores; otherwise
 * element by element (any alignment of the source).
 */
template <typename ST, typename CT>
__device__ __forceinline__ void pk_append8(const char *src, char *dst, float scale, bool vec)
{
    if constexpr (std::is_same<ST, CT>::value) {
        if (vec && sizeof(ST) == 1) {
            *(uint2 *) dst = __ldg((const uint2 *) src);    /* fp8 into fp8: one 8-byte copy */
        } else if (vec) {
#pragma unroll
            for (int i = 0; i < (int) sizeof(ST) / 2; ++i)
                ((uint4 *) dst)[i] = __ldg((const uint4 *) src + i);
        } else {
#pragma unroll
            for (int e = 0; e < 8; ++e)
                ((ST *) dst)[e] = ((const ST *) src)[e];
        }
    } else {
        static_assert(std::is_same<CT, pk_e4m3>::value, "conversions only into fp8");
        float x[8];
        if (vec) {
#pragma unroll
            for (int i = 0; i < (int) sizeof(ST) / 2; ++i)
                pk_unpack16<ST>(__ldg((const uint4 *) src + i), x + i * (16 / (int) sizeof(ST)));
        } else {
#pragma unroll
            for (int e = 0; e < 8; ++e)
                x[e] = pk_to_f32(((const ST *) src)[e]);
        }
        uint8_t q[8];
#pragma unroll
        for (int e = 0; e < 8; ++e)
            q[e] = pk_from_f32<pk_e4m3>(x[e] / scale).bits;
        if (vec) {
            uint2 w;
            w.x = (uint32_t) q[0] | (uint32_t) q[1] << 8 | (uint32_t) q[2] << 16 | (uint32_t) q[3] << 24;
            w.y = (uint32_t) q[4] | (uint32_t) q[5] << 8 | (uint32_t) q[6] << 16 | (uint32_t) q[7] << 24;
            *(uint2 *) dst = w;
        } else {
#pragma unroll
            for (int e = 0; e < 8; ++e)
                ((uint8_t *) dst)[e] = q[e];
        }
    }
}

/* Shared memory one multiprocessor offers its CTAs on sm_90 (227 KiB); the decode shapes
 * divide it among their CTAs, counting the 1 KiB the runtime keeps per CTA themselves. */
#define PK_SMEM_PER_SM 232448

/* Returns the row index, among a layer plane's [N][H][B] rows, of context position pos of KV
 * head h, which lies in block blk (blocks of 1 << block_shift tokens, num_kv_heads heads). */
__device__ __forceinline__ size_t pk_paged_row(int blk, int h, int pos, int num_kv_heads, int block_shift)
{
    return (((size_t) blk * num_kv_heads + h) << block_shift) + (pos & ((1 << block_shift) - 1));
}

/* Returns nonzero if head_dim is one the kernels are built for. */
static inline int pk_head_dim_supported(int d)
{
    return d == 64 || d == 80 || d == 96 || d == 128 || d == 256;
}

/* Returns log2(block_size) for a supported block size (8, 16, 32), else -1. */
static inline int pk_block_shift(int block_size)
{
    switch (block_size) {
    case 8: return 3;
    case 16: return 4;
    case 32: return 5;
    default: return -1;
    }
}

/*
 * Returns 0 if the attention op may pair a cache of dtype kv with queries of dtype q: equal
 * dtypes for f16, bf16 and f32 caches, any of f16, bf16, f32 queries for an fp8 cache; else
 * PAGED_E_DTYPE.
 */
static inline int pk_attn_dtypes_supported(int kv, int q)
{
    if (kv == PAGED_DTYPE_FP8_E4M3)
        return (q == PAGED_DTYPE_F16 || q == PAGED_DTYPE_BF16 || q == PAGED_DTYPE_F32) ? 0 : PAGED_E_DTYPE;
    if (kv == PAGED_DTYPE_F16 || kv == PAGED_DTYPE_BF16 || kv == PAGED_DTYPE_F32)
        return q == kv ? 0 : PAGED_E_DTYPE;
    return PAGED_E_DTYPE;
}

/*
 * Checks the cache geometry and the GQA shape shared by decode and prefill: returns 0, or
 * PAGED_E_GEOMETRY, PAGED_E_HEADS, PAGED_E_DTYPE, PAGED_E_LAYER, PAGED_E_INVAL.
 */
static inline int pk_attn_check(const pk_cache *c, int layer, int num_q_heads, int q_dtype)
{
    if (!pk_head_dim_supported(c->head_dim) || pk_block_shift(c->block_size) < 0 || c->num_kv_heads < 1
        || c->num_blocks < 1 || c->num_layers < 1)
        return PAGED_E_GEOMETRY;
    if (layer < 0 || layer >= c->num_layers)
        return PAGED_E_LAYER;
    if (num_q_heads < 1 || num_q_heads % c->num_kv_heads != 0)
        return PAGED_E_HEADS;
    int rc = pk_attn_dtypes_supported(c->dtype, q_dtype);
    if (rc != 0)
        return rc;
    if (c->base == NULL || !pk_aligned(c->base, 16))
        return PAGED_E_INVAL;           /* the tile loads are 16-byte copies */
    return 0;
}

/* Returns a pointer to layer's K (kv = 0) or V (kv = 1) cache, [num_blocks][H][B][D]. */
static inline const char *pk_cache_plane(const pk_cache *c, int layer, int kv)
{
    return (const char *) c->base + pk_cache_index(c, layer, kv, 0, 0, 0) * pk_dtype_size(c->dtype);
}

/* Returns the bytes from one layer's planes to the next layer's (K and V of one layer, the
 * stride pk_cache_plane steps by per layer): a kernel that takes each sequence's layer from
 * device memory adds layer * this to layer 0's planes. */
static inline size_t pk_cache_layer_bytes(const pk_cache *c)
{
    return pk_cache_index(c, 1, 0, 0, 0, 0) * pk_dtype_size(c->dtype);
}

#endif
