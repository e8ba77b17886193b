/* copy.cu: COPY on CUDA: whole blocks (every layer, K and V) to other blocks, or to and from contiguous units. */
/* SPDX-License-Identifier: MIT */
#include "kernels/sum.cuh"

/* Kernel arguments of the block copy kernel (passed by value). */
struct pk_copy_params {
    char *base;                     /* the pool */
    char *dst_base;                 /* the destination pool (base itself, or another's) */
    const int32_t *src, *dst;       /* [num_pairs] block ids */
    int num_pairs, planes;          /* planes = num_layers * 2 (K and V of each layer) */
    int num_blocks, dst_num_blocks;
    size_t block_bytes;             /* one block of one plane: H * B * D elements */
};

/*
 * Copies words of type W (uint4, or unsigned char for pools whose blocks are not whole 16-byte
 * words). Grid y walks the (pair, plane) blocks, grid x the words of one block, so
 * consecutive threads move consecutive words: reads and writes are coalesced, and the index
 * arithmetic is one division per block rather than per word.
 */
template <typename W> static __global__ void __launch_bounds__(256) pk_copy_kernel(const pk_copy_params p)
{
    const size_t words = p.block_bytes / sizeof(W);
    const int jobs = p.num_pairs * p.planes;
    for (int job = blockIdx.y; job < jobs; job += gridDim.y) {
        const int pair = job / p.planes, plane = job - pair * p.planes;
        const W *s = (const W *) (p.base + ((size_t) plane * p.num_blocks + p.src[pair]) * p.block_bytes);
        W *d = (W *) (p.dst_base + ((size_t) plane * p.dst_num_blocks + p.dst[pair]) * p.block_bytes);
        for (size_t w = (size_t) blockIdx.x * blockDim.x + threadIdx.x; w < words; w += (size_t) gridDim.x * blockDim.x)
            d[w] = s[w];
    }
}

/* Stores in *grid the grid of 256-thread blocks for jobs pieces of words words each: x over a
 * piece's words (at most 16 waves of the device's multiprocessors), y over the pieces.
 * Returns 0 or PAGED_E_DEVICE. */
static int pk_copy_grid(size_t words, long long jobs, dim3 *grid)
{
    int dev = 0;
    PK_CUDA_CHECK(cudaGetDevice(&dev));
    const int sms = pk_sm_count(dev);
    if (sms <= 0)
        return PAGED_E_DEVICE;
    long long gx = (long long) ((words + 255) / 256), gy = jobs < 65535 ? jobs : 65535;
    if (gx > sms * 16LL)
        gx = sms * 16LL;
    *grid = dim3((unsigned) gx, (unsigned) gy);
    return 0;
}

/* Returns 0 when pool c's geometry and dtype can be copied, else PAGED_E_GEOMETRY or
 * PAGED_E_DTYPE. */
static int pk_copy_check_cache(const pk_cache *c)
{
    if (c->head_dim < 1 || c->block_size < 1 || c->num_kv_heads < 1 || c->num_blocks < 1 || c->num_layers < 1)
        return PAGED_E_GEOMETRY;
    if (pk_dtype_size(c->dtype) == 0)
        return PAGED_E_DTYPE;
    return 0;
}

/* Launches kernel over jobs pieces of words words each (pk_copy_grid's grid of 256-thread
 * blocks) with parameters p. Returns 0 or PAGED_E_DEVICE. */
template <typename P>
static int pk_piece_launch(void (*kernel)(P), const P &p, size_t words, long long jobs, cudaStream_t stream)
{
    dim3 grid;
    int rc = pk_copy_grid(words, jobs, &grid);
    if (rc != 0)
        return rc;
    kernel<<<grid, 256, 0, stream>>>(p);
    return pk_launch_status();
}

/* Launches the copy kernel moving words of type W; returns 0 or PAGED_E_DEVICE. */
template <typename W> static int pk_copy_launch(const pk_copy_params &p, cudaStream_t stream)
{
    return pk_piece_launch(pk_copy_kernel<W>, p, p.block_bytes / sizeof(W), (long long) p.num_pairs * p.planes,
                           stream);
}

/*
 * The pairs run concurrently: a destination must not also be the source or destination of
 * another pair (the daemon copies into freshly allocated blocks, so this holds).
 */
extern "C" int pk_cuda_copy(const pk_copy_args *a, void *stream)
{
    if (a == NULL)
        return PAGED_E_INVAL;
    const pk_cache *c = &a->cache;
    const int bad = pk_copy_check_cache(c);
    if (bad != 0)
        return bad;
    if (a->num_pairs < 0 || (long long) a->num_pairs * c->num_layers * 2 > INT32_MAX)
        return PAGED_E_INVAL;
    if (a->num_pairs == 0)
        return 0;
    if (c->base == NULL || a->src_blocks == NULL || a->dst_blocks == NULL)
        return PAGED_E_INVAL;
    if (a->dst_base != NULL && a->dst_num_blocks < 1)
        return PAGED_E_GEOMETRY;
    pk_copy_params p;
    p.base = (char *) c->base;
    p.src = a->src_blocks;
    p.dst = a->dst_blocks;
    p.num_pairs = a->num_pairs;
    p.planes = c->num_layers * 2;
    p.num_blocks = c->num_blocks;
    p.dst_base = a->dst_base != NULL ? (char *) a->dst_base : p.base;
    p.dst_num_blocks = a->dst_base != NULL ? a->dst_num_blocks : c->num_blocks;
    p.block_bytes = (size_t) c->num_kv_heads * c->block_size * c->head_dim * pk_dtype_size(c->dtype);
    cudaStream_t st = (cudaStream_t) stream;
    if (p.block_bytes % 16 == 0 && pk_aligned(c->base, 16) && pk_aligned(p.dst_base, 16))
        return pk_copy_launch<uint4>(p, st);
    return pk_copy_launch<unsigned char>(p, st);
}

/* Kernel arguments of the units copy kernel (passed by value, the block ids with them). */
struct pk_units_params {
    char *pool;
    char *units;
    unsigned long long *sums;       /* the words' sums of each unit (zeroed before), for a kernel that sums */
    int num_blocks, planes, n, to_units;
    size_t piece;                   /* one block of one plane */
    int32_t blocks[PK_UNITS_MAX];
};

/*
 * Copies words of type W between blocks of the pool and their units. Grid y walks the
 * (unit, plane) pieces, grid x the words of one piece, as pk_copy_kernel does. With Sum (16-byte
 * words only), each word moved is also mixed into its unit's sum as pk_unit_sum_kernel would
 * (keyed by its place in the unit), the block's threads adding theirs by shuffles and shared
 * memory and the block then with one atomicAdd per piece: the copy and the check are one pass
 * over the bytes.
 */
template <typename W, bool Sum>
static __global__ void __launch_bounds__(256) pk_units_kernel(const pk_units_params p)
{
    static_assert(!Sum || sizeof(W) == 16, "the sums take 16-byte words");
    __shared__ unsigned long long warp_sums[256 / 32];
    const size_t words = p.piece / sizeof(W);
    const int jobs = p.n * p.planes;
    for (int job = blockIdx.y; job < jobs; job += gridDim.y) {
        const int i = job / p.planes, plane = job - i * p.planes;
        W *in_pool = (W *) (p.pool + ((size_t) plane * p.num_blocks + p.blocks[i]) * p.piece);
        W *in_unit = (W *) (p.units + ((size_t) i * p.planes + plane) * p.piece);
        const W *s = p.to_units ? in_pool : in_unit;
        W *d = p.to_units ? in_unit : in_pool;
        uint64_t acc = 0;
        const size_t stride = (size_t) gridDim.x * blockDim.x;
        for (size_t w = (size_t) blockIdx.x * blockDim.x + threadIdx.x; w < words; w += stride) {
            const W v = s[w];
            d[w] = v;
            if constexpr (Sum)
                acc += pk_sum_terms16(v, (uint64_t) plane * words + w);
        }
        if constexpr (Sum) {
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                acc += __shfl_xor_sync(0xffffffffu, acc, o);
            if ((threadIdx.x & 31) == 0)
                warp_sums[threadIdx.x >> 5] = acc;
            __syncthreads();
            if (threadIdx.x == 0) {
                unsigned long long all = 0;
                for (unsigned k = 0; k < blockDim.x / 32; k++)
                    all += warp_sums[k];
                if (all != 0)
                    atomicAdd(p.sums + i, all);
            }
            __syncthreads();
        }
    }
}

/* Launches the units copy kernel moving words of type W (summing them with Sum); returns 0 or
 * PAGED_E_DEVICE. */
template <typename W, bool Sum> static int pk_units_launch(const pk_units_params &p, cudaStream_t stream)
{
    return pk_piece_launch(pk_units_kernel<W, Sum>, p, p.piece / sizeof(W), (long long) p.n * p.planes, stream);
}

/*
 * Checks the arguments and launches; see kernels.h. With sums: they are zeroed first and
 * mixed with the unit's length after; where the words are not 16-byte ones the copy runs
 * alone and pk_cuda_unit_sums then reads the units once more.
 */
extern "C" int pk_cuda_units_copy(const pk_units_args *a, void *stream)
{
    if (a == NULL || a->n < 0 || a->n > PK_UNITS_MAX)
        return PAGED_E_INVAL;
    const pk_cache *c = &a->cache;
    const int bad = pk_copy_check_cache(c);
    if (bad != 0)
        return bad;
    if (a->n == 0)
        return 0;
    if (c->base == NULL || a->units == NULL || a->blocks == NULL)
        return PAGED_E_INVAL;
    pk_units_params p;
    p.pool = (char *) c->base;
    p.units = (char *) a->units;
    p.sums = NULL;
    p.num_blocks = c->num_blocks;
    p.planes = c->num_layers * 2;
    p.n = a->n;
    p.to_units = a->to_units != 0;
    p.piece = (size_t) c->num_kv_heads * c->block_size * c->head_dim * pk_dtype_size(c->dtype);
    for (int i = 0; i < a->n; i++) {
        if (a->blocks[i] < 0 || a->blocks[i] >= c->num_blocks)
            return PAGED_E_INVAL;
        p.blocks[i] = a->blocks[i];
    }
    if ((long long) p.n * p.planes > INT32_MAX)
        return PAGED_E_INVAL;
    const uint64_t unit_bytes = (uint64_t) p.piece * (uint64_t) p.planes;
    if (a->sums != NULL && unit_bytes % 8 != 0)
        return PAGED_E_INVAL;
    cudaStream_t st = (cudaStream_t) stream;
    if (p.piece % 16 == 0 && pk_aligned(c->base, 16) && pk_aligned(a->units, 16)) {
        if (a->sums == NULL)
            return pk_units_launch<uint4, false>(p, st);
        p.sums = (unsigned long long *) a->sums;
        PK_CUDA_CHECK(cudaMemsetAsync(a->sums, 0, (size_t) p.n * sizeof *a->sums, st));
        int rc = pk_units_launch<uint4, true>(p, st);
        return rc != 0 ? rc : pk_unit_sums_finish((uint32_t) p.n, unit_bytes, a->sums, st);
    }
    int rc = pk_units_launch<unsigned char, false>(p, st);
    return rc != 0 || a->sums == NULL ? rc : pk_cuda_unit_sums(a->units, (uint32_t) p.n, unit_bytes, a->sums, st);
}
