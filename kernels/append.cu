/* append.cu: APPEND on CUDA: scatter new keys and values into their cache slots, quantizing for fp8. */
/* SPDX-License-Identifier: MIT */
#include <type_traits>

#include "kernels/common.cuh"

/* Kernel arguments of the append kernel (passed by value). */
struct pk_append_params {
    char *cache;                    /* the pool base */
    const char *k, *v;              /* [num_layers][num_tokens][H][D] of the source dtype */
    const int32_t *slots;
    /* Segmented form (k_seg not NULL): segment s holds tokens seg_indptr[s].. of the slots,
     * its sources k_seg[s], v_seg[s] ([num_layers][seg_tokens][H][D] each); k, v unused. */
    const int32_t *seg_indptr;
    const void *const *k_seg, *const *v_seg;
    const int32_t *seg_layer;       /* per-segment first layers, or nullptr: layer_begin */
    int num_segments;
    int layer_begin, num_layers, num_tokens;
    int num_blocks, num_kv_heads, head_dim, block_size;
    float k_scale, v_scale;         /* fp8 caches */
    int vec;                        /* every address allows the 16-byte (fp8: 8-byte) vector path;
                                     * segmented form: the cache does (sources are checked per
                                     * segment in the kernel) */
};

/*
 * Finds the segment holding token tok of a segmented APPEND: the last segment that starts at
 * or before tok (empty segments before it are passed over), by binary search over
 * seg_indptr. Returns its index.
 */
static __device__ __forceinline__ int pk_append_segment(const pk_append_params &p, int tok)
{
    int lo = 0, hi = p.num_segments - 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (__ldg(p.seg_indptr + mid) <= tok)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/*
 * One thread per 8 elements of one (layer, token, head) row, K and V together; a
 * grid-stride loop covers every row. Tokens with a negative slot are skipped. In the
 * segmented form a token reads from its segment's sources, found by pk_append_segment,
 * writes from its segment's first layer (seg_layer) if the segments have their own, and
 * takes the vector path where the cache and that segment's sources allow it.
 */
template <typename ST, typename CT>
static __global__ void __launch_bounds__(256) pk_append_kernel(const pk_append_params p)
{
    const int groups = p.head_dim / 8;
    const size_t total = (size_t) p.num_layers * p.num_tokens * p.num_kv_heads * groups;
    for (size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t) gridDim.x * blockDim.x) {
        size_t rest = i;
        const int grp = (int) (rest % groups);
        rest /= groups;
        const int h = (int) (rest % p.num_kv_heads);
        rest /= p.num_kv_heads;
        const int tok = (int) (rest % p.num_tokens);
        const int l = (int) (rest / p.num_tokens);
        const int slot = p.slots[tok];
        if (slot < 0)
            continue;
        const int blk = slot / p.block_size, off = slot - blk * p.block_size;
        const char *ks = p.k, *vs = p.v;
        int stok = tok, ntok = p.num_tokens, layer0 = p.layer_begin;
        bool vec = p.vec != 0;
        if (p.k_seg != nullptr) {
            const int seg = pk_append_segment(p, tok);
            const int first = __ldg(p.seg_indptr + seg);
            stok = tok - first;
            ntok = __ldg(p.seg_indptr + seg + 1) - first;
            ks = (const char *) p.k_seg[seg];
            vs = (const char *) p.v_seg[seg];
            vec = vec && (((uintptr_t) ks | (uintptr_t) vs) & 15) == 0;
            if (p.seg_layer != nullptr)
                layer0 = __ldg(p.seg_layer + seg);
        }
        const size_t src = (((size_t) l * ntok + stok) * p.num_kv_heads + h) * p.head_dim + (size_t) grp * 8;
        const size_t kidx = (size_t) (layer0 + l) * 2 * p.num_blocks + blk;
        const size_t vidx = kidx + p.num_blocks;
        const size_t tail = ((size_t) h * p.block_size + off) * p.head_dim + (size_t) grp * 8;
        const size_t per_block = (size_t) p.num_kv_heads * p.block_size * p.head_dim;
        pk_append8<ST, CT>(ks + src * sizeof(ST), p.cache + (kidx * per_block + tail) * sizeof(CT), p.k_scale,
                           vec);
        pk_append8<ST, CT>(vs + src * sizeof(ST), p.cache + (vidx * per_block + tail) * sizeof(CT), p.v_scale,
                           vec);
    }
}

/* Launches the append kernel for source type ST and cache type CT; returns 0 or PAGED_E_DEVICE. */
template <typename ST, typename CT>
static int pk_append_launch(const pk_append_params &p, cudaStream_t stream)
{
    int dev = 0;
    PK_CUDA_CHECK(cudaGetDevice(&dev));
    const int sms = pk_sm_count(dev);
    if (sms <= 0)
        return PAGED_E_DEVICE;
    const size_t total = (size_t) p.num_layers * p.num_tokens * p.num_kv_heads * (p.head_dim / 8);
    const size_t want = (total + 255) / 256, cap = (size_t) sms * 16;
    pk_append_kernel<ST, CT><<<(unsigned) (want < cap ? want : cap), 256, 0, stream>>>(p);
    return pk_launch_status();
}

/* Checks and launches an APPEND (contiguous or segmented form, with or without per-segment
 * layers) on stream; returns 0 or a negative paged_error. The segment arrays are device
 * memory and not read here. */
extern "C" int pk_cuda_append(const pk_append_args *a, void *stream)
{
    if (a == NULL)
        return PAGED_E_INVAL;
    const pk_cache *c = &a->cache;
    if (c->head_dim < 8 || c->head_dim % 8 != 0 || c->block_size < 1 || c->num_kv_heads < 1 || c->num_blocks < 1
        || c->num_layers < 1)
        return PAGED_E_GEOMETRY;
    if (a->layer_begin < 0 || a->num_layers < 0 || a->layer_begin > c->num_layers - a->num_layers)
        return PAGED_E_LAYER;
    const bool fp8 = c->dtype == PAGED_DTYPE_FP8_E4M3;
    if (pk_dtype_size(c->dtype) == 0
        || (fp8 ? !(a->src_dtype == PAGED_DTYPE_F16 || a->src_dtype == PAGED_DTYPE_BF16
                    || a->src_dtype == PAGED_DTYPE_F32 || a->src_dtype == PAGED_DTYPE_FP8_E4M3)
                : a->src_dtype != c->dtype))
        return PAGED_E_DTYPE;
    if (a->num_tokens < 0 || (a->seg_layer != NULL && a->k_seg == NULL))
        return PAGED_E_INVAL;     /* per-segment layers need segments */
    if (a->num_tokens == 0 || a->num_layers == 0)
        return 0;
    const bool seg = a->k_seg != NULL;
    if (c->base == NULL || a->slot_mapping == NULL)
        return PAGED_E_INVAL;
    if (seg ? a->num_segments < 1 || a->seg_indptr == NULL || a->v_seg == NULL
            : a->k == NULL || a->v == NULL)
        return PAGED_E_INVAL;

    pk_append_params p;
    p.cache = (char *) c->base;
    p.k = (const char *) a->k;
    p.v = (const char *) a->v;
    p.slots = a->slot_mapping;
    p.seg_indptr = seg ? a->seg_indptr : nullptr;
    p.k_seg = seg ? a->k_seg : nullptr;
    p.v_seg = seg ? a->v_seg : nullptr;
    p.seg_layer = seg ? a->seg_layer : nullptr;
    p.num_segments = seg ? a->num_segments : 0;
    p.layer_begin = a->layer_begin;
    p.num_layers = a->num_layers;
    p.num_tokens = a->num_tokens;
    p.num_blocks = c->num_blocks;
    p.num_kv_heads = c->num_kv_heads;
    p.head_dim = c->head_dim;
    p.block_size = c->block_size;
    p.k_scale = c->k_scale;
    p.v_scale = c->v_scale;
    /* Rows are whole 8-element groups; the vector path needs 16-byte aligned sources (8
     * elements of a 16-bit type, two 16-byte halves of f32, or 8 fp8 bytes, whose 8-byte
     * groups then lie aligned) and destinations aligned to 8 elements. */
    const size_t dst_vec = 8 * pk_dtype_size(c->dtype) < 16 ? 8 * pk_dtype_size(c->dtype) : 16;
    p.vec = pk_aligned(c->base, dst_vec) && (seg || (pk_aligned(a->k, 16) && pk_aligned(a->v, 16)));
    cudaStream_t st = (cudaStream_t) stream;

    switch (c->dtype) {
    case PAGED_DTYPE_F16: return pk_append_launch<__half, __half>(p, st);
    case PAGED_DTYPE_BF16: return pk_append_launch<__nv_bfloat16, __nv_bfloat16>(p, st);
    case PAGED_DTYPE_F32: return pk_append_launch<float, float>(p, st);
    default: break;
    }
    switch (a->src_dtype) {
    case PAGED_DTYPE_F16: return pk_append_launch<__half, pk_e4m3>(p, st);
    case PAGED_DTYPE_BF16: return pk_append_launch<__nv_bfloat16, pk_e4m3>(p, st);
    case PAGED_DTYPE_F32: return pk_append_launch<float, pk_e4m3>(p, st);
    case PAGED_DTYPE_FP8_E4M3: return pk_append_launch<pk_e4m3, pk_e4m3>(p, st);
    default: return PAGED_E_DTYPE;
    }
}
