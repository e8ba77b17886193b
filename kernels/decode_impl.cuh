/* decode_impl.cuh: the split-KV paged decode kernel, included by the per-head-dim instance files. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_DECODE_IMPL_CUH
#define PAGED_KERNELS_DECODE_IMPL_CUH

#include "kernels/decode.cuh"
#include "kernels/ptx.cuh"

/*
 * One CTA handles one (sequence, KV head, partition) and serves all G query heads of the
 * group, so every K/V byte is read from memory once. The partition is walked in tiles of
 * T = 32 tokens; a tile's K and V rows ([T][D] each) arrive in shared memory through 16-byte
 * cp.async copies, STAGES tiles deep, so that many bytes are in flight per SM while earlier
 * tiles are computed. Each tile then goes through three phases separated by barriers:
 *
 *   QK: 8 lanes per token, each lane a strided set of 16-byte chunks of the K row; the
 *       queries (scaled, as floats) sit in shared memory in a chunk-interleaved layout so the
 *       8 lanes read consecutive 16-byte words; a 3-step shuffle sums the lanes.
 *   softmax: one warp per query head, one lane per token: tile max, online rescale
 *       factor, probabilities (base 2), running sum.
 *   PV: thread (slot, chunk) owns the 16/sizeof(KT) output elements of one 16-byte chunk
 *       of V for query head slot % G; the slots of one head split the tile's tokens
 *       between them, and are summed at the end.
 */
template <int D, typename KT> struct pk_decode_shape {
    static constexpr int T = PK_DECODE_TILE;
    static constexpr int ESZ = (int) sizeof(KT);
    static constexpr int EPC = 16 / ESZ;                 /* elements per 16-byte chunk */
    static constexpr int NC = D / EPC;                   /* chunks per token row */
    static constexpr int NT = NC * 8 > 128 ? NC * 8 : 128;  /* threads: >= 8 PV slots */
    static constexpr int W = NT / 32;
    static constexpr int SLOTS = NT / NC;                /* PV slots, >= 8 >= G */
    static constexpr int NCI = (NC + 7) / 8;             /* K chunks per lane in QK */
    static constexpr int ROW = D * ESZ;                  /* bytes of one token row */
    static constexpr int TILE_BYTES = T * ROW;
    static constexpr int STAGE_BYTES = 2 * TILE_BYTES;   /* K tile then V tile */
    static constexpr int STAGES = 49152 / STAGE_BYTES < 2 ? 2 : (49152 / STAGE_BYTES > 4 ? 4 : 49152 / STAGE_BYTES);
    static constexpr int Q_BYTES = 8 * D * 4;            /* up to 8 query heads as floats */
    static constexpr int S_BYTES = 8 * T * 4;            /* scores, then probabilities */
    static constexpr int STAT_BYTES = 3 * 8 * 4;         /* running max, running sum, rescale */
    static constexpr int PIPE_OFF = Q_BYTES + S_BYTES + STAT_BYTES;
    static constexpr int PIPE_BYTES = STAGES * STAGE_BYTES;
    static constexpr int RED_BYTES = SLOTS * D * 4;      /* per-slot outputs, reusing the pipeline */
    static constexpr int SMEM = PIPE_OFF + (PIPE_BYTES > RED_BYTES ? PIPE_BYTES : RED_BYTES);
    /* CTAs that fit on an SM by shared memory (227 KB usable, 1 KB reserved per CTA): tells
     * ptxas the register budget (65536 / (NT * MINB)) instead of letting it guess, which
     * it did badly (spills at 64 registers). */
    static constexpr int MINB_SMEM = 232448 / (SMEM + 1024);
    static constexpr int MINB_REGS = 65536 / (NT * 80);  /* but leave at least 80 registers */
    static constexpr int MINB_CAP = MINB_SMEM < MINB_REGS ? MINB_SMEM : MINB_REGS;
    static constexpr int MINB = MINB_CAP < 1 ? 1 : MINB_CAP;
    static_assert(T == 32, "the softmax gives each token of a tile one lane of a warp");
    static_assert(D % EPC == 0 && EPC % 4 == 0, "head dim must be a whole number of 16-byte chunks");
    static_assert(NT % 32 == 0 && NT <= 1024, "bad thread count");
    static_assert(SLOTS >= 8, "every query head of a group needs a PV slot");
    static_assert(PIPE_OFF % 16 == 0, "pipeline must be 16-byte aligned");
};

/* Kernel arguments of the decode partition kernel (passed by value). */
struct pk_decode_params {
    const char *k, *v;              /* the layer's K and V planes, [N][H][B][D] */
    const int32_t *block_tables;
    const int32_t *seq_lens;
    const void *q;
    void *out;
    const void *const *q_seq;
    void *const *out_seq;
    float *ws_o, *ws_m, *ws_l;
    const float *alibi;
    float qk_scale;                 /* sm_scale * k_scale */
    float v_scale;
    float soft_cap;
    int window;
    int bt_stride, num_kv_heads, num_q_heads, group, block_shift;
    int part_tokens, max_parts;
};

/*
 * Starts the copies of tile `tile` of a partition into pipeline stage buf: the K and V rows
 * of tokens [t_lo, t_hi) of the tile; other rows are left alone (never read).
 */
template <int D, typename KT>
__device__ __forceinline__ void pk_decode_load_tile(const pk_decode_params &p, unsigned char *buf,
                                                    const int32_t *bt, int h, int tile_start, int t_lo,
                                                    int t_hi)
{
    using S = pk_decode_shape<D, KT>;
    const int bmask = (1 << p.block_shift) - 1;
#pragma unroll
    for (int it = 0; it < (S::T * S::NC + S::NT - 1) / S::NT; ++it) {
        const int ci = (int) threadIdx.x + it * S::NT;
        const int t = ci / S::NC, col = ci - t * S::NC;
        if (ci < S::T * S::NC && t >= t_lo && t < t_hi) {
            const int pos = tile_start + t;
            const int blk = __ldg(bt + (pos >> p.block_shift));
            const size_t row = (((size_t) blk * p.num_kv_heads + h) << p.block_shift) + (pos & bmask);
            const size_t off = row * S::ROW + (size_t) col * 16;
            pk_cp_async16(buf + ci * 16, p.k + off);
            pk_cp_async16(buf + S::TILE_BYTES + ci * 16, p.v + off);
        }
    }
}

/* The decode partition kernel: see the comment of pk_decode_shape. Grid (seq, kv head, partition). */
template <int D, typename KT, typename QT>
static __global__ void __launch_bounds__(pk_decode_shape<D, KT>::NT, pk_decode_shape<D, KT>::MINB)
pk_decode_kernel(const pk_decode_params p)
{
    using S = pk_decode_shape<D, KT>;
    constexpr int T = S::T, EPC = S::EPC, NC = S::NC, NT = S::NT;
    extern __shared__ __align__(16) unsigned char smem[];
    float4 *q_s = (float4 *) smem;                       /* [g][EPC/4][NC] float4 */
    float *s_s = (float *) (smem + S::Q_BYTES);          /* [g][T] */
    float *m_s = (float *) (smem + S::Q_BYTES + S::S_BYTES);
    float *l_s = m_s + 8;
    float *a_s = l_s + 8;
    unsigned char *pipe = smem + S::PIPE_OFF;

    const int seq = blockIdx.x, h = blockIdx.y, part = blockIdx.z;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int G = p.group;
    const int seq_len = p.seq_lens[seq];
    const int lo = p.window > 0 && seq_len > p.window ? seq_len - p.window : 0;
    const int part_start = pk_decode_lo(seq_len, p.window) + part * p.part_tokens;
    if (part_start >= seq_len)
        return;                                          /* a shorter sequence: nothing here */
    const int part_end = min(part_start + p.part_tokens, seq_len);
    const int nparts = pk_decode_nparts(seq_len, p.window, p.part_tokens);
    const int ntiles = (part_end - part_start + T - 1) / T;
    const int32_t *bt = p.block_tables + (size_t) seq * p.bt_stride;

    /* Fill the pipeline first, so the copies are in flight while the queries are set up. */
#pragma unroll
    for (int st = 0; st < S::STAGES - 1; ++st) {
        if (st < ntiles) {
            const int ts = part_start + st * T;
            pk_decode_load_tile<D, KT>(p, pipe + st * S::STAGE_BYTES, bt, h, ts, max(lo - ts, 0),
                                       min(part_end - ts, T));
        }
        pk_cp_async_commit();
    }

    const QT *q = p.q_seq ? (const QT *) p.q_seq[seq] : (const QT *) p.q + (size_t) seq * p.num_q_heads * D;
    q += (size_t) h * G * D;
    for (int idx = tid; idx < G * D; idx += NT) {
        const int g = idx / D, d = idx - g * D;
        const int c = d / EPC, e = d - c * EPC;
        ((float *) q_s)[((g * (EPC / 4) + e / 4) * NC + c) * 4 + (e & 3)] = pk_to_f32(q[idx]) * p.qk_scale;
    }
    if (tid < 8) {
        m_s[tid] = -INFINITY;
        l_s[tid] = 0.0f;
    }

    /* PV role of this thread. */
    const int pv_c = tid % NC, pv_slot = tid / NC;
    const int nsplit = S::SLOTS / G;
    const bool pv_active = pv_slot < G * nsplit;
    const int pv_g = pv_slot % G, pv_split = pv_slot / G;
    float acc[EPC];
#pragma unroll
    for (int e = 0; e < EPC; ++e)
        acc[e] = 0.0f;

    const float *slopes = p.alibi ? p.alibi + (size_t) h * G : nullptr;

    for (int i = 0; i < ntiles; ++i) {
        pk_cp_async_wait<S::STAGES - 2>();
        __syncthreads();            /* tile i landed for all threads; tile i-1 is fully consumed */
        {
            const int nt = i + S::STAGES - 1;
            if (nt < ntiles) {
                const int ts = part_start + nt * T;
                pk_decode_load_tile<D, KT>(p, pipe + (nt % S::STAGES) * S::STAGE_BYTES, bt, h, ts,
                                           max(lo - ts, 0), min(part_end - ts, T));
            }
            pk_cp_async_commit();
        }
        const unsigned char *ks = pipe + (i % S::STAGES) * S::STAGE_BYTES;
        const unsigned char *vs = ks + S::TILE_BYTES;
        const int tile_start = part_start + i * T;
        const int t_lo = max(lo - tile_start, 0), t_hi = min(part_end - tile_start, T);

        /* QK: 8 lanes per token; the loop bound is warp-uniform so the shuffles are safe. */
        for (int base = warp * 4; base < T; base += 4 * S::W) {
            const int t = base + (lane >> 3), j = lane & 7;
            const bool valid = t >= t_lo && t < t_hi;
            float kf[S::NCI][EPC];
#pragma unroll
            for (int ii = 0; ii < S::NCI; ++ii) {
                const int c = j + 8 * ii;
                if (valid && c < NC) {
                    pk_unpack16<KT>(*(const uint4 *) (ks + t * S::ROW + c * 16), kf[ii]);
                } else {
#pragma unroll
                    for (int e = 0; e < EPC; ++e)
                        kf[ii][e] = 0.0f;
                }
            }
            for (int g = 0; g < G; ++g) {
                float dot = 0.0f;
#pragma unroll
                for (int ii = 0; ii < S::NCI; ++ii) {
                    const int c = j + 8 * ii;
                    if (c < NC) {
#pragma unroll
                        for (int k4 = 0; k4 < EPC / 4; ++k4) {
                            const float4 qv = q_s[(g * (EPC / 4) + k4) * NC + c];
                            dot = fmaf(qv.x, kf[ii][4 * k4], dot);
                            dot = fmaf(qv.y, kf[ii][4 * k4 + 1], dot);
                            dot = fmaf(qv.z, kf[ii][4 * k4 + 2], dot);
                            dot = fmaf(qv.w, kf[ii][4 * k4 + 3], dot);
                        }
                    }
                }
                dot += __shfl_xor_sync(0xffffffffu, dot, 1);
                dot += __shfl_xor_sync(0xffffffffu, dot, 2);
                dot += __shfl_xor_sync(0xffffffffu, dot, 4);
                if (j == 0) {
                    float logit = dot;
                    if (p.soft_cap > 0.0f)
                        logit = p.soft_cap * tanhf(logit / p.soft_cap);
                    if (slopes)
                        logit += slopes[g] * (float) (tile_start + t - (seq_len - 1));
                    s_s[g * T + t] = valid ? logit * PK_LOG2E : -INFINITY;
                }
            }
        }
        __syncthreads();

        /* Online softmax: one warp per query head, one lane per token (T == 32). */
        for (int g = warp; g < G; g += S::W) {
            const float s = s_s[g * T + lane];
            const float m_old = m_s[g];
            const float m_new = fmaxf(m_old, pk_warp_max(s));
            const float m_use = m_new == -INFINITY ? 0.0f : m_new;  /* all masked so far */
            const float pr = exp2f(s - m_use);
            const float sum = pk_warp_sum(pr);
            s_s[g * T + lane] = pr;
            __syncwarp();           /* every lane has read m_s[g] before lane 0 replaces it */
            if (lane == 0) {
                const float alpha = exp2f(m_old - m_use);
                a_s[g] = alpha;
                l_s[g] = l_s[g] * alpha + sum;
                m_s[g] = m_new;
            }
        }
        __syncthreads();

        /* PV: this thread's chunk of V for its head, over its share of the tile's tokens. */
        if (pv_active) {
            const float alpha = a_s[pv_g];
#pragma unroll
            for (int e = 0; e < EPC; ++e)
                acc[e] *= alpha;
            const float *pw = s_s + pv_g * T;
#pragma unroll 4
            for (int t = t_lo + pv_split; t < t_hi; t += nsplit) {
                float vf[EPC];
                pk_unpack16<KT>(*(const uint4 *) (vs + t * S::ROW + pv_c * 16), vf);
                const float w = pw[t];
#pragma unroll
                for (int e = 0; e < EPC; ++e)
                    acc[e] = fmaf(w, vf[e], acc[e]);
            }
        }
    }
    pk_cp_async_wait<0>();          /* only empty groups remain, but the pipeline is reused below */
    __syncthreads();

    float *red = (float *) pipe;    /* [slot][D] */
    if (pv_active) {
#pragma unroll
        for (int e = 0; e < EPC; ++e)
            red[pv_slot * D + pv_c * EPC + e] = acc[e];
    }
    __syncthreads();

    const size_t hq0 = (size_t) seq * p.num_q_heads + (size_t) h * G;
    QT *out = nullptr;
    if (nparts == 1)
        out = (p.out_seq ? (QT *) p.out_seq[seq] + (size_t) h * G * D : (QT *) p.out + hq0 * D);
    for (int idx = tid; idx < G * D; idx += NT) {
        const int g = idx / D, d = idx - g * D;
        float sum = 0.0f;
        for (int sp = 0; sp < nsplit; ++sp)
            sum += red[(sp * G + g) * D + d];
        if (nparts == 1) {
            out[idx] = pk_from_f32<QT>(sum / l_s[g] * p.v_scale);
        } else {
            const size_t pi = (hq0 + g) * p.max_parts + part;
            p.ws_o[pi * D + d] = sum;
            if (d == 0) {
                p.ws_m[pi] = m_s[g];
                p.ws_l[pi] = l_s[g];
            }
        }
    }
}

/* Per-device cache of the decode kernel's resident CTAs per SM, one per instance. */
template <int D, typename KT, typename QT> struct pk_decode_occupancy {
    static std::atomic<int> cache[PK_MAX_DEVICES];
};
template <int D, typename KT, typename QT> std::atomic<int> pk_decode_occupancy<D, KT, QT>::cache[PK_MAX_DEVICES];

/* Plans, and unless only asked for the plan launches, the partition kernel (see decode.cuh). */
template <int D, typename KT, typename QT>
int pk_decode_run(const pk_decode_args *a, size_t ws_limit, cudaStream_t stream, bool launch, pk_decode_plan *plan)
{
    using S = pk_decode_shape<D, KT>;
    int dev = 0;
    PK_CUDA_CHECK(cudaGetDevice(&dev));
    const int occ = pk_kernel_prepare(pk_decode_kernel<D, KT, QT>, S::NT, S::SMEM, dev,
                                      pk_decode_occupancy<D, KT, QT>::cache);
    if (occ < 0)
        return occ;
    const int sms = pk_sm_count(dev);
    if (sms <= 0)
        return PAGED_E_DEVICE;
    pk_decode_make_plan(a, (long long) sms * occ, ws_limit, plan);
    if (!launch)
        return 0;

    pk_decode_params p;
    p.k = pk_cache_plane(&a->cache, a->layer, 0);
    p.v = pk_cache_plane(&a->cache, a->layer, 1);
    p.block_tables = a->block_tables;
    p.seq_lens = a->seq_lens;
    p.q = a->q;
    p.out = a->out;
    p.q_seq = a->q_seq;
    p.out_seq = a->q_seq ? a->out_seq : nullptr;
    const size_t slots = (size_t) a->num_seqs * a->num_q_heads * plan->max_parts;
    p.ws_o = (float *) a->workspace;
    p.ws_m = plan->max_parts > 1 ? p.ws_o + slots * D : nullptr;
    p.ws_l = plan->max_parts > 1 ? p.ws_m + slots : nullptr;
    p.alibi = a->opts.alibi_slopes;
    p.qk_scale = a->opts.sm_scale * (a->cache.dtype == PAGED_DTYPE_FP8_E4M3 ? a->cache.k_scale : 1.0f);
    p.v_scale = a->cache.dtype == PAGED_DTYPE_FP8_E4M3 ? a->cache.v_scale : 1.0f;
    p.soft_cap = a->opts.soft_cap;
    p.window = a->opts.window;
    p.bt_stride = a->bt_stride;
    p.num_kv_heads = a->cache.num_kv_heads;
    p.num_q_heads = a->num_q_heads;
    p.group = a->num_q_heads / a->cache.num_kv_heads;
    p.block_shift = pk_block_shift(a->cache.block_size);
    p.part_tokens = plan->part_tokens;
    p.max_parts = plan->max_parts;

    dim3 grid((unsigned) a->num_seqs, (unsigned) a->cache.num_kv_heads, (unsigned) plan->max_parts);
    pk_decode_kernel<D, KT, QT><<<grid, S::NT, S::SMEM, stream>>>(p);
    return pk_launch_status();
}

/* Instantiates the decode of head dim D for every supported (cache, query) dtype pair. */
#define PK_DECODE_INSTANCES(D)                                                                         \
    template int pk_decode_run<D, __half, __half>(const pk_decode_args *, size_t, cudaStream_t, bool,  \
                                                  pk_decode_plan *);                                   \
    template int pk_decode_run<D, __nv_bfloat16, __nv_bfloat16>(const pk_decode_args *, size_t,        \
                                                                cudaStream_t, bool, pk_decode_plan *); \
    template int pk_decode_run<D, float, float>(const pk_decode_args *, size_t, cudaStream_t, bool,    \
                                                pk_decode_plan *);                                     \
    template int pk_decode_run<D, pk_e4m3, __half>(const pk_decode_args *, size_t, cudaStream_t, bool, \
                                                   pk_decode_plan *);                                  \
    template int pk_decode_run<D, pk_e4m3, __nv_bfloat16>(const pk_decode_args *, size_t,              \
                                                          cudaStream_t, bool, pk_decode_plan *);       \
    template int pk_decode_run<D, pk_e4m3, float>(const pk_decode_args *, size_t, cudaStream_t, bool,  \
                                                  pk_decode_plan *);

#endif
