/* decode_impl.cuh: the split-KV paged decode kernels, included by the per-head-dim instance files. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_DECODE_IMPL_CUH
#define PAGED_KERNELS_DECODE_IMPL_CUH

#include <type_traits>

#include "kernels/decode.cuh"
#include "kernels/ptx.cuh"

/*
 * Two partition kernels. The tensor-core one (further down) serves f16, bf16 and fp8 caches
 * with 16-bit queries; this one, on plain FMAs, serves f32 caches and fp8 caches with f32
 * queries, whose f32 outputs 16-bit probabilities would not match.
 *
 * One CTA handles one (sequence, KV head, partition) and serves all G query heads of the
 * group, so every K/V byte is read from memory once. A group of more than 8 heads is split into
 * sub-groups of at most 8 (pk_decode_heads_of<8>), one CTA each, side by side in the grid so
 * that the K/V bytes they share are read from memory once and from L2 after. The partition
 * is walked in tiles of T = 32 tokens; a tile's K and V rows ([T][D] each) arrive in shared
 * memory through 16-byte cp.async copies, STAGES tiles deep, so that many bytes are in flight
 * per SM while earlier tiles are computed. Each tile then goes through three phases separated
 * by barriers:
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
    static constexpr int T = 32;                         /* tile tokens: one softmax lane each */
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
    static constexpr int MINB_SMEM = PK_SMEM_PER_SM / (SMEM + 1024);
    static constexpr int MINB_REGS = 65536 / (NT * 80);  /* but leave at least 80 registers */
    static constexpr int MINB_CAP = MINB_SMEM < MINB_REGS ? MINB_SMEM : MINB_REGS;
    static constexpr int MINB = MINB_CAP < 1 ? 1 : MINB_CAP;
    /* The wide-group variant holds its sub-group's size in a register through the loop (it
     * spilled at D 80 with MINB's budget): one CTA per SM fewer where that budget binds. */
    static constexpr int MINB_WIDE = MINB > 1 && MINB == MINB_REGS ? MINB - 1 : MINB;
    static_assert(T == 32, "the softmax gives each token of a tile one lane of a warp");
    static_assert(D % EPC == 0 && EPC % 4 == 0, "head dim must be a whole number of 16-byte chunks");
    static_assert(NT % 32 == 0 && NT <= 1024, "bad thread count");
    static_assert(SLOTS >= 8, "every query head of a group needs a PV slot");
    static_assert(PIPE_OFF % 16 == 0, "pipeline must be 16-byte aligned");
};

/* Kernel arguments of the decode partition kernel (passed by value). */
struct pk_decode_params {
    const char *k, *v;              /* the layer's K and V planes, [N][H][B][D]; with seq_layer
                                     * layer 0's */
    const int32_t *seq_layer;       /* per-sequence layers, or nullptr */
    size_t layer_bytes;             /* from one layer's planes to the next (with seq_layer) */
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
    int subs;                       /* CTAs per KV head: sub-groups of at most the kernel's heads per CTA
                                     * (8, or 16 for the tensor-core kernel's two n-tiles; 1 if G fits) */
    int part_tokens, max_parts;
    int stages;                     /* tensor-core kernel: its shape's STAGES, or 2 (the small rings) */
    /* Fused append (pk_decode_args): the newest token's rows, side by side or per sequence,
     * or all nullptr; the cache's scales they are divided by (fp8; else 1). */
    const void *new_k, *new_v;
    const void *const *new_k_seq, *const *new_v_seq;
    float k_scale_raw, v_scale_raw;
    /* The tensor-core kernel with its metadata in its parameters (pk_decode_meta): the device
     * address the metadata pointers above are relative to (pk_decode_args.meta_dev). */
    const char *meta_base;
};

/* The query heads one CTA serves: a whole group of G <= HPC (the kernel's heads per CTA), or
 * one sub-group of at most HPC of a wider group (pk_decode_params.subs of them per KV head). */
struct pk_decode_heads {
    int h;                          /* the KV head whose keys and values the CTA reads */
    int g;                          /* query heads served, 1 .. HPC */
    int q0;                         /* the first of them, among the sequence's query heads */
};

/* Returns the heads of the CTA at index unit_head (KV head * p.subs + sub-group: the sub-groups
 * of one KV head side by side in the launch, so that their reads of the same K/V meet in L2)
 * for a kernel that serves up to HPC query heads per CTA (the sub-groups hold HPC heads each,
 * the last one the rest). */
template <int HPC>
__device__ __forceinline__ pk_decode_heads pk_decode_heads_of(const pk_decode_params &p, int unit_head)
{
    pk_decode_heads r;
    if (p.subs == 1) {
        r.h = unit_head;
        r.g = p.group;
        r.q0 = unit_head * p.group;
        return r;
    }
    r.h = unit_head / p.subs;
    const int sub = unit_head - r.h * p.subs;
    r.q0 = r.h * p.group + sub * HPC;
    r.g = min(HPC, p.group - sub * HPC);
    return r;
}

/* Returns *ptr: through the read-only data cache from device memory, or with META (the
 * metadata lives in the kernel's parameters, which that cache cannot address) a plain load. */
template <bool META, typename T>
__device__ __forceinline__ T pk_meta_load(const T *ptr)
{
    if constexpr (META)
        return *ptr;
    else
        return __ldg(ptr);
}

/*
 * The fused append: when the CTA's partition [part_start, part_end) of sequence seq holds
 * the newest position (seq_len - 1) and the launch carries new rows, writes that position's
 * key and value of KV head h into the planes kp and vp (the sequence's layer), converted as
 * the append kernel converts (pk_append8), and makes them visible to the CTA's copies that
 * follow (a CTA barrier). The condition is the same for every thread of the CTA, which all call it. Returns
 * nothing.
 */
template <int D, typename KT, typename QT, bool META = false>
__device__ __forceinline__ void pk_decode_append_new(const pk_decode_params &p, int seq, int h, const int32_t *bt,
                                                     const char *kp, const char *vp, int seq_len, int part_start,
                                                     int part_end)
{
    const int pos = seq_len - 1;
    if ((p.new_k == nullptr && p.new_k_seq == nullptr) || pos < part_start || pos >= part_end)
        return;
    constexpr int G8 = D / 8;
    const size_t row_bytes = (size_t) p.num_kv_heads * D * sizeof(QT);
    const char *ks = p.new_k_seq ? (const char *) p.new_k_seq[seq] : (const char *) p.new_k + seq * row_bytes;
    const char *vs = p.new_v_seq ? (const char *) p.new_v_seq[seq] : (const char *) p.new_v + seq * row_bytes;
    ks += (size_t) h * D * sizeof(QT);
    vs += (size_t) h * D * sizeof(QT);
    const size_t row = pk_paged_row(pk_meta_load<META>(bt + (pos >> p.block_shift)), h, pos, p.num_kv_heads,
                                    p.block_shift);
    for (int t = threadIdx.x; t < 2 * G8; t += blockDim.x) {
        const bool val = t >= G8;
        const int g = val ? t - G8 : t;
        const char *src = (val ? vs : ks) + (size_t) g * 8 * sizeof(QT);
        char *dst = (char *) (val ? vp : kp) + (row * D + (size_t) g * 8) * sizeof(KT);
        pk_append8<QT, KT>(src, dst, val ? p.v_scale_raw : p.k_scale_raw, ((uintptr_t) src & 15) == 0);
    }
    /* The barrier orders these stores before every copy the CTA issues after it (cp.async is a
     * weak load of the generic proxy): no GPU-scope fence is needed, and one here (MEMBAR.SC.GPU)
     * would hold 2.6% of the kernel's stall samples (ncu). */
    __syncthreads();
}

/*
 * Returns the offset in bytes of sequence seq's layer's planes from p.k and p.v: 0 without
 * per-sequence layers. A CTA calls it once and keeps the planes it gives.
 */
template <bool META = false>
__device__ __forceinline__ size_t pk_decode_layer_offset(const pk_decode_params &p, int seq)
{
    return p.seq_layer ? (size_t) pk_meta_load<META>(p.seq_layer + seq) * p.layer_bytes : 0;
}

/* Where partition part of a sequence lies: its length, the first position it attends to
 * (lo), the partition's tokens [part_start, part_end), and the sequence's partitions. */
struct pk_decode_bounds {
    int seq_len, lo, part_start, part_end, nparts;
};

/* Fills *b for partition part of sequence seq; returns false when the sequence is too short
 * to reach that partition (the CTA has nothing to do). */
__device__ __forceinline__ bool pk_decode_bounds_of(const pk_decode_params &p, int seq, int part,
                                                    pk_decode_bounds *b)
{
    b->seq_len = p.seq_lens[seq];
    b->lo = pk_decode_window_start(b->seq_len, p.window);
    b->part_start = pk_decode_lo(b->seq_len, p.window) + part * p.part_tokens;
    if (b->part_start >= b->seq_len)
        return false;
    b->part_end = min(b->part_start + p.part_tokens, b->seq_len);
    b->nparts = pk_decode_nparts(b->seq_len, p.window, p.part_tokens);
    return true;
}

/*
 * Starts the copies of tile `tile` of a partition into pipeline stage buf: the K and V rows
 * (from the sequence's planes kp and vp) of tokens [t_lo, t_hi) of the tile; other rows are
 * left alone (never read).
 */
template <int D, typename KT>
__device__ __forceinline__ void pk_decode_load_tile(const pk_decode_params &p, const char *kp, const char *vp,
                                                    unsigned char *buf, const int32_t *bt, int h,
                                                    int tile_start, int t_lo, int t_hi)
{
    using S = pk_decode_shape<D, KT>;
#pragma unroll
    for (int it = 0; it < (S::T * S::NC + S::NT - 1) / S::NT; ++it) {
        const int ci = (int) threadIdx.x + it * S::NT;
        const int t = ci / S::NC, col = ci - t * S::NC;
        if (ci < S::T * S::NC && t >= t_lo && t < t_hi) {
            const int pos = tile_start + t;
            const int blk = __ldg(bt + (pos >> p.block_shift));
            const size_t off = pk_paged_row(blk, h, pos, p.num_kv_heads, p.block_shift) * S::ROW
                               + (size_t) col * 16;
            pk_cp_async16(buf + ci * 16, kp + off);
            pk_cp_async16(buf + S::TILE_BYTES + ci * 16, vp + off);
        }
    }
}

/* The decode partition kernel: see the comment of pk_decode_shape. Grid (seq, KV head x sub-group,
 * partition). WIDE: groups of more than 8 heads, split into sub-groups (p.subs > 1); without it
 * the group size stays a kernel parameter, not a register (a register spilled at D 80). */
template <int D, typename KT, typename QT, bool WIDE>
static __global__ void __launch_bounds__(pk_decode_shape<D, KT>::NT,
                                         WIDE ? pk_decode_shape<D, KT>::MINB_WIDE : pk_decode_shape<D, KT>::MINB)
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

    pk_grid_dependency_wait();      /* launched early (programmatic): the inputs may be in flight */
    pk_grid_launch_dependents();    /* the reduce may be scheduled once every CTA runs */
    const int seq = blockIdx.x, part = blockIdx.z;
    const pk_decode_heads heads = WIDE ? pk_decode_heads_of<8>(p, (int) blockIdx.y)
                                       : pk_decode_heads{ (int) blockIdx.y, p.group, (int) blockIdx.y * p.group };
    const int h = heads.h, G = WIDE ? heads.g : p.group;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    pk_decode_bounds bd;
    if (!pk_decode_bounds_of(p, seq, part, &bd))
        return;                                          /* a shorter sequence: nothing here */
    const int seq_len = bd.seq_len, lo = bd.lo, part_start = bd.part_start, part_end = bd.part_end,
              nparts = bd.nparts;
    const int ntiles = (part_end - part_start + T - 1) / T;
    const int32_t *bt = p.block_tables + (size_t) seq * p.bt_stride;
    const size_t lofs = pk_decode_layer_offset(p, seq);
    const char *const kp = p.k + lofs, *const vp = p.v + lofs;   /* the sequence's layer */

    /* Fill the pipeline first, so the copies are in flight while the queries are set up. */
#pragma unroll
    for (int st = 0; st < S::STAGES - 1; ++st) {
        if (st < ntiles) {
            const int ts = part_start + st * T;
            pk_decode_load_tile<D, KT>(p, kp, vp, pipe + st * S::STAGE_BYTES, bt, h, ts, max(lo - ts, 0),
                                       min(part_end - ts, T));
        }
        pk_cp_async_commit();
    }

    const QT *q = p.q_seq ? (const QT *) p.q_seq[seq] : (const QT *) p.q + (size_t) seq * p.num_q_heads * D;
    q += (size_t) heads.q0 * D;
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

    const float *slopes = p.alibi ? p.alibi + heads.q0 : nullptr;

    for (int i = 0; i < ntiles; ++i) {
        pk_cp_async_wait<S::STAGES - 2>();
        __syncthreads();            /* tile i landed for all threads; tile i-1 is fully consumed */
        {
            const int nt = i + S::STAGES - 1;
            if (nt < ntiles) {
                const int ts = part_start + nt * T;
                pk_decode_load_tile<D, KT>(p, kp, vp, pipe + (nt % S::STAGES) * S::STAGE_BYTES, bt, h, ts,
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

    /* The heads again, from the grid: their first query head live through the loop spilled (D 80). */
    const int q0 = WIDE ? pk_decode_heads_of<8>(p, (int) blockIdx.y).q0 : (int) blockIdx.y * p.group;
    const size_t hq0 = (size_t) seq * p.num_q_heads + (size_t) q0;
    QT *out = nullptr;
    if (nparts == 1)
        out = (p.out_seq ? (QT *) p.out_seq[seq] + (size_t) q0 * D : (QT *) p.out + hq0 * D);
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

/* ==== The tensor-core kernel: f16, bf16 and fp8 caches with 16-bit queries. ==== */

/*
 * The same partitions as above (one CTA per sequence, KV head and partition), but the
 * group's dot products and the weighted sum of V run on mma.sync m16n8k16, with the roles
 * turned around so that the tokens, not the query heads, fill the 16 rows: S^T = K Q^T
 * takes a 16-token tile of K as A (straight from shared memory with ldmatrix) and the CTA's
 * queries as B, kept in registers for the whole partition: NTILE n-tiles of 8 columns, the
 * CTA's heads 8j .. 8j + 7 in n-tile j. A CTA so serves up to 8 NTILE query heads of one KV
 * head; every A fragment of K (and of V below) is loaded once by ldmatrix and feeds NTILE
 * mmas, so that one copy of the K/V bytes into shared memory and one round of ldmatrix serve
 * all of them. NTILE is 1 for groups of at most 16 heads (sub-groups of 8 beyond 8), 2
 * (sub-groups of 16) for wider ones where the registers allow it (pk_decode_mma_wide,
 * pk_decode_mma_ntile). The softmax then works on each n-tile's
 * C fragment (each lane holds 2 tokens x 2 heads of the n-tile; a head's 16 tokens sit in the
 * 8 lanes of one column group, 3 shuffles apart), with a running maximum and sum per head,
 * that is per lane and n-tile two of each; the probabilities are rounded to the mma type and
 * turned from C layout (token rows) into B layout (head columns) with movmatrix, per n-tile,
 * and O^T += V^T P^T takes V (ldmatrix .trans) as A, one 16-dim row tile per mma, once per
 * n-tile, into accumulators (one set per n-tile) that stay in registers.
 *
 * Each warp streams its own chunks of 16 tokens (chunks w, w + W, w + 2W, ... of the
 * partition) through its own ring of STAGES shared-memory stages with 16-byte cp.async, so
 * warps never wait for each other until the end, where their (max, sum, output) triples are
 * merged through shared memory (see pk_decode_mma_shape for the ring sizes and the bank
 * layout, pk_decode_mma_merge for the merge area). Tokens outside [lo, part_end) are
 * zero-filled by the copy (no NaN from stale memory reaches the mma) and masked to -inf.
 *
 * fp8 e4m3 widens exactly to f16. Its rows are loaded with the 16-bit ldmatrix as pairs of
 * bytes: for K a lane then holds 4 consecutive dims of one token, which the mma takes in a
 * permuted k order (the queries are loaded in the same order, which leaves the dot product
 * unchanged); for V (.trans) it holds 2 dims of 2 tokens, which one byte permute sorts into
 * a (token, token) pair per dim: two output dims per lane row, an output mapping only.
 * Queries of another type than the mma's (bf16 with an fp8 cache) are scaled by a power of
 * two that brings their largest magnitude just under 2^15 before rounding to f16, and the
 * logit scale divides it out again, so no query overflows and none loses more precision
 * than f16 rounding.
 */

/* The element type the tensor cores see for a cache of KT: e4m3 widens exactly to f16. */
template <typename KT> struct pk_decode_mma_type {
    using type = KT;
};
template <> struct pk_decode_mma_type<pk_e4m3> {
    using type = __half;
};

/* Whether a (cache, query) pair runs on the tensor-core kernel: not with f32 on either side,
 * whose outputs are held to f32 accuracy that 16-bit probabilities would miss. */
template <typename KT, typename QT> struct pk_decode_uses_mma {
    static constexpr bool value = sizeof(KT) < 4 && sizeof(QT) < 4;
};

/*
 * Compile-time shape of the tensor-core kernel for head dim D and cache type KT. The rings
 * take as much of the SM's shared memory as PK_DECODE_CTAS_PER_SM CTAs can hold, in chunks
 * of one mma row tile of 16 tokens (K then V), or two (32 tokens) where a row has at most
 * 128 bytes: 3 warps of 4 stages of 8 KB at D 128 bf16 (three chunks in flight per warp while
 * one is computed), 24 chunks per SM, and the same at D 64 bf16 and fp8 D 128 with 32-token
 * chunks, whose softmax round (shuffles, rescale, exponentials of the running maximum) then
 * serves twice the tokens. Two CTAs of four stages beat three of three (H100; BENCHMARKS.md,
 * Experiments): a grid of 1.3 to 1.9 waves of three runs unsplit as 1.9 waves of two (64 x 2048 x
 * 32/8: 93.4% of the streaming read against 89.0% split, D 64 89.5 against 83.7, fp8 D 128
 * 87.2 against 81.0), at the price of 1.3% on one-CTA-per-SM grids. A launch of more than
 * a wave of those, unsplit, runs with small rings instead (two stages per warp, 48 KB a CTA,
 * PK_DECODE_SMALL_CTAS CTAs per SM, the ring depth a kernel argument): 64 x 2048 x 32/8 at
 * D 64 and with an fp8 cache then runs in one wave, not 1.9 (95.0 against 96.2 us, 96.8
 * against 98.9), MHA in 1.9 waves, not 3.9 (181.1 against 181.9), while grids that split or
 * fill under a wave keep the deep rings their few CTAs need (the in-process 32-layer step of
 * one 1024-token sequence: 0.270 ms against 0.325 with small rings everywhere). Rows whose
 * 16-byte units come in whole groups of 8 are swizzled (unit c of row t stored at
 * c ^ (t % 8)); others are padded to an odd number of units. Either way the 8 rows one
 * ldmatrix reads fall in distinct banks.
 */
#define PK_DECODE_CTAS_PER_SM 2     /* tensor-core decode CTAs an SM holds by shared memory */
#define PK_DECODE_SMALL_CTAS 4      /* the same with the small rings (two stages per warp) */
template <int D, typename KT> struct pk_decode_mma_shape {
    static constexpr bool FP8 = sizeof(KT) == 1;
    static constexpr int ROW = D * (int) sizeof(KT);     /* bytes of one token row in the cache */
    static constexpr int RT = ROW <= 128 ? 2 : 1;        /* mma row tiles per chunk */
    static constexpr int CH = 16 * RT;                   /* tokens per chunk */
    static constexpr int NC = ROW / 16;                  /* 16-byte units per row */
    static constexpr bool SWZ = NC % 8 == 0;
    static constexpr int RS = SWZ ? ROW : (NC % 2 ? NC : NC + 1) * 16;   /* row stride in shared memory */
    static constexpr int TILE = CH * RS;                 /* one chunk of K (or V) */
    static constexpr int STAGE = 2 * TILE;               /* K then V */
    static constexpr int CTA_BUDGET = PK_SMEM_PER_SM / PK_DECODE_CTAS_PER_SM - 1024;   /* one CTA's share */
    static constexpr bool BIG = 3 * 2 * STAGE > CTA_BUDGET;   /* rows over 600 B (f32 D 256): compiled, not launched */
    static constexpr int W = BIG ? 2 : 3;                /* warps per CTA */
    static constexpr int NT = 32 * W;
    static constexpr int STAGES_FIT = CTA_BUDGET / (W * STAGE);
    static constexpr int STAGES = BIG ? 3 : (STAGES_FIT > 8 ? 8 : STAGES_FIT);
    static constexpr int WARP_BYTES = STAGES * STAGE;    /* one warp's ring */
    static constexpr int SMEM = W * WARP_BYTES;
    static constexpr int NKS = D / 16;                   /* k steps of QK = row tiles of PV */
    /* The small rings: two stages per warp, so that PK_DECODE_SMALL_CTAS CTAs fit an SM (see
     * pk_decode_make_plan for when they run); not where two stages are all there is, nor past
     * the 48 KB a launch may take without raising the kernel's limit (pk_kernel_prepare sets
     * that limit for the deep rings and must not lower it for these). */
    static constexpr int SMALL_WARP_BYTES = 2 * STAGE;
    static constexpr int SMALL_SMEM = W * SMALL_WARP_BYTES;
    static constexpr bool SMALL = !BIG && STAGES > 2 && SMALL_SMEM <= 48 * 1024
                                  && SMALL_SMEM <= PK_SMEM_PER_SM / PK_DECODE_SMALL_CTAS - 1024;
    static constexpr int MINB_SMEM = PK_SMEM_PER_SM / (SMEM + 1024);
    static constexpr int MINB = SMALL ? PK_DECODE_SMALL_CTAS : (MINB_SMEM < 1 ? 1 : (MINB_SMEM > 4 ? 4 : MINB_SMEM));
    static_assert(D % 16 == 0, "head dim must be a whole number of mma k steps");
    static_assert(CH % PK_DECODE_TILE == 0 && CH <= 32, "a chunk is whole mma row tiles, a lane's token each at most");
    static_assert(STAGES >= 2, "a ring needs two stages");
};

/* Whether the tensor-core kernel of head dim D and cache type KT serves wide groups with two
 * n-tiles (16 heads per CTA): where the registers its launch bounds leave hold two sets of
 * queries, accumulators and chunk scores without spilling, and a warp's ring holds the merge
 * area of 16 heads. Up to D 128 (168 registers with four CTAs of 96 threads per SM), but not
 * with an fp8 cache at D 128, whose chunks of two row tiles double the scores (ptxas spills
 * there); at D 256 with 16-bit caches (two CTAs per SM: 255 registers, no spill), not fp8
 * ones (their small rings cannot hold the merge area). */
template <int D, typename KT> struct pk_decode_mma_wide {
    static constexpr bool value = D < 128 || (D == 128 && pk_decode_mma_shape<D, KT>::RT == 1)
                                  || (D == 256 && sizeof(KT) == 2);
};

/* A warp's merge area in the tensor-core kernel with NTILE n-tiles (in its ring, once the ring
 * is drained), in floats: the unnormalized outputs of up to 8 NTILE heads ([head][D]), then
 * their maxima (from M), then their sums (from L). */
template <int D, typename KT, int NTILE> struct pk_decode_mma_merge {
    using S = pk_decode_mma_shape<D, KT>;
    static constexpr int HEADS = 8 * NTILE;
    static constexpr int M = HEADS * D, L = M + HEADS, BYTES = (L + HEADS) * 4;
    static_assert(BYTES <= S::WARP_BYTES && (!S::SMALL || BYTES <= S::SMALL_WARP_BYTES),
                  "a warp's merge area fits in its ring");
};

/* Returns the byte offset in a chunk tile of 16-byte unit c of token row t (see above). */
template <int D, typename KT> __device__ __forceinline__ int pk_decode_unit(int t, int c)
{
    using S = pk_decode_mma_shape<D, KT>;
    return t * S::RS + (S::SWZ ? (c ^ (t & 7)) : c) * 16;
}

/*
 * Returns the row index in the layer's [N][H][B] rows of context position pos of KV head h
 * (block id blk, looked up by the caller), or -1 if pos is outside [lo, hi).
 */
__device__ __forceinline__ long long pk_decode_row(const pk_decode_params &p, int blk, int h, int pos, int lo, int hi)
{
    if (pos < lo || pos >= hi)
        return -1;
    return (long long) pk_paged_row(blk, h, pos, p.num_kv_heads, p.block_shift);
}

/* Returns the block id of context position pos (which must lie inside the block table row). */
template <bool META = false>
__device__ __forceinline__ int pk_decode_block(const pk_decode_params &p, const int32_t *bt, int pos)
{
    return pk_meta_load<META>(bt + (pos >> p.block_shift));
}

/*
 * Starts the copies of one chunk of CH tokens into a warp's stage buf from the sequence's K
 * and V planes kp and vp: row is the row index (pk_decode_row) of token lane % CH of the
 * chunk; the rows reach the lanes that copy their 16-byte units by shuffle. Tokens whose row
 * is -1 are zero-filled. Every lane of the warp must call it.
 */
template <int D, typename KT>
__device__ __forceinline__ void pk_decode_mma_issue(const char *kp, const char *vp, unsigned char *buf,
                                                    long long row, int lane)
{
    using S = pk_decode_mma_shape<D, KT>;
#pragma unroll
    for (int it = 0; it < (S::CH * S::NC + 31) / 32; ++it) {
        const int ci = lane + 32 * it;
        const int t = ci / S::NC, col = ci - t * S::NC;
        const long long r = __shfl_sync(0xffffffffu, row, t % S::CH);
        if (S::CH * S::NC % 32 == 0 || ci < S::CH * S::NC) {
            const bool ok = r >= 0;
            const size_t off = ok ? (size_t) r * S::ROW + (size_t) col * 16 : 0;
            unsigned char *dst = buf + pk_decode_unit<D, KT>(t, col);
            pk_cp_async16_zfill(dst, kp + off, ok);
            pk_cp_async16_zfill(dst + S::TILE, vp + off, ok);
        }
    }
}

/*
 * Starts the copies of one chunk like pk_decode_mma_issue, for a chunk whose tokens all lie
 * inside the partition and whose row tiles never cross a block (blocks of 16 tokens or more):
 * the 16 rows of a tile are then consecutive rows of the plane, one run of 16 rows of K and
 * one of V, copied at fixed offsets from the tile's first row, with no per-row lookup,
 * shuffle or zero-fill test (the general path spent ~14 instructions per 16-byte copy on
 * them). cs is the chunk's first position, blk the block id of token lane % CH. Every lane
 * of the warp must call it.
 */
template <int D, typename KT>
__device__ __forceinline__ void pk_decode_mma_issue_tiles(const pk_decode_params &p, const char *kp, const char *vp,
                                                          unsigned char *buf, int blk, int h, int cs, int lane)
{
    using S = pk_decode_mma_shape<D, KT>;
    constexpr int UNITS = 16 * S::NC;                    /* 16-byte units of one tile's K (or V) */
#pragma unroll
    for (int rt = 0; rt < S::RT; ++rt) {
        const int b = S::RT == 1 ? blk : __shfl_sync(0xffffffffu, blk, 16 * rt);
        const size_t off = pk_paged_row(b, h, cs + 16 * rt, p.num_kv_heads, p.block_shift) * (size_t) S::ROW;
        const char *kt = kp + off, *vt = vp + off;
#pragma unroll
        for (int it = 0; it < (UNITS + 31) / 32; ++it) {
            const int ci = lane + 32 * it;               /* unit ci of the run: row ci / NC, column ci % NC */
            if (UNITS % 32 == 0 || ci < UNITS) {
                const int t = ci / S::NC, col = ci - t * S::NC;
                unsigned char *dst = buf + pk_decode_unit<D, KT>(16 * rt + t, col);
                pk_cp_async16(dst, kt + ci * 16);
                pk_cp_async16(dst + S::TILE, vt + ci * 16);
            }
        }
    }
}

/*
 * Fills a with the f16 A fragment of K Q^T for one k step of an fp8 K chunk: r0 and r1 are a
 * lane's ldmatrix words of the step (4 bytes each: consecutive dims of one token), widened to
 * f16 pairs in the order the queries were loaded in. Every n-tile's mma of the step takes it.
 */
__device__ __forceinline__ void pk_decode_k_fp8(uint32_t a[4], uint32_t r0, uint32_t r1)
{
    a[0] = pk_cvt_e4m3x2<false>(r0);
    a[1] = pk_cvt_e4m3x2<false>(r1);
    a[2] = pk_cvt_e4m3x2<true>(r0);
    a[3] = pk_cvt_e4m3x2<true>(r1);
}

/*
 * Fills a with the f16 A fragment of V^T P^T for one 16-dim row tile of an fp8 V chunk: lo
 * and hi are a lane's .trans ldmatrix words of tokens 0-7 and 8-15 (bytes: dim d of token t,
 * d + 1 of t, d of t + 1, d + 1 of t + 1); rows r and r + 8 of the tile are dims d and d + 1.
 * Every n-tile's mma of the row tile takes it.
 */
__device__ __forceinline__ void pk_decode_v_fp8(uint32_t a[4], uint32_t lo, uint32_t hi)
{
    const uint32_t x = __byte_perm(lo, 0, 0x3120), y = __byte_perm(hi, 0, 0x3120);
    a[0] = pk_cvt_e4m3x2<false>(x);
    a[1] = pk_cvt_e4m3x2<true>(x);
    a[2] = pk_cvt_e4m3x2<false>(y);
    a[3] = pk_cvt_e4m3x2<true>(y);
}

/*
 * The tensor-core decode partition kernel's body (see above; the kernels follow it) with
 * NTILE n-tiles of 8 query heads. Grid (seq x KV head x sub-group, partition), the sub-groups
 * then the heads fastest, so that CTAs running side by side read neighbouring slices of the
 * same pool blocks. Warp w streams chunks w, w + W, w + 2W, ... of the partition. META: p's
 * metadata pointers address the kernel's parameters.
 */
template <int D, typename KT, typename QT, bool META, int NTILE>
__device__ __forceinline__ void pk_decode_mma_body(const pk_decode_params &p)
{
    using S = pk_decode_mma_shape<D, KT>;
    using MG = pk_decode_mma_merge<D, KT, NTILE>;
    using MT = typename pk_decode_mma_type<KT>::type;
    constexpr int CH = S::CH, RT = S::RT, NKS = S::NKS, W = S::W, STAGES = S::STAGES;
    constexpr bool FP8 = S::FP8;
    /* One n-tile's QK mmas alternate between two accumulator chains per row tile, so that
     * consecutive mmas do not wait on each other; with more n-tiles those already alternate,
     * and one chain each saves the registers. */
    constexpr bool CHAIN2 = NTILE == 1;
    extern __shared__ __align__(16) unsigned char smem[];

    pk_grid_dependency_wait();      /* launched early (programmatic): the inputs may be in flight */
    pk_grid_launch_dependents();    /* the reduce may be scheduled once every CTA runs */
    const int unit_heads = p.num_kv_heads * p.subs;      /* CTAs per sequence and partition */
    const int seq = blockIdx.x / unit_heads, part = blockIdx.y;
    const pk_decode_heads heads = pk_decode_heads_of<8 * NTILE>(p, (int) blockIdx.x - seq * unit_heads);
    const int h = heads.h, G = heads.g;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int tok = lane % CH;                           /* the chunk token whose row this lane looks up */

    /* The queries as B fragments: lane (r, c) = (lane / 4, lane % 4) holds, in n-tile j, head
     * 8j + r's dims 2c, 2c + 1 and 2c + 8, 2c + 9 of each k step (fp8: 4c .. 4c + 3, see
     * above); heads past G read the CTA's first head's, zeroed below. Their loads go first, so
     * their trip to memory overlaps the block ids' and the length's instead of following the
     * ring's fill (ncu: 7% of a 128-CTA grid's stall samples waited on them there); they are
     * converted once the ring is filled. */
    const int qr = lane >> 2, qc = lane & 3;
    QT qraw[NTILE][NKS][4];
    {
        const QT *q = p.q_seq ? (const QT *) p.q_seq[seq] : (const QT *) p.q + (size_t) seq * p.num_q_heads * D;
#pragma unroll
        for (int j = 0; j < NTILE; ++j) {
            const QT *qj = q + (size_t) (heads.q0 + (8 * j + qr < G ? 8 * j + qr : 0)) * D;
#pragma unroll
            for (int ks = 0; ks < NKS; ++ks)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    qraw[j][ks][e] = qj[FP8 ? 16 * ks + 4 * qc + e : 16 * ks + 2 * qc + (e & 1) + 8 * (e >> 1)];
        }
    }

    const int32_t *bt = p.block_tables + (size_t) seq * p.bt_stride;
    const int stg = S::SMALL ? p.stages : STAGES;       /* this launch's ring depth */
    const int warp_bytes = stg * S::STAGE;
    unsigned char *wbuf = smem + warp * warp_bytes;
    const int cstride = W * CH;                          /* tokens between a warp's chunks */
    /* The sequence's layer, looked up once while the block ids below are on their way. */
    const size_t lofs = pk_decode_layer_offset<META>(p, seq);

    /* Without a window the partition does not depend on the length: look up the block ids of
     * the ring's first chunks while the length is still on its way. */
    const int table_tokens = p.bt_stride << p.block_shift;
    int pre_blk[STAGES - 1];
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
        const int pos = part * p.part_tokens + warp * CH + st * cstride + tok;
        pre_blk[st] = st < stg - 1 && p.window <= 0 && pos < table_tokens ? pk_decode_block<META>(p, bt, pos) : 0;
    }

    pk_decode_bounds bd;
    if (!pk_decode_bounds_of(p, seq, part, &bd))
        return;                                          /* a shorter sequence: nothing here */
    const int seq_len = bd.seq_len, lo = bd.lo, part_start = bd.part_start, part_end = bd.part_end,
              nparts = bd.nparts;
    const int nchunks = (part_end - part_start + CH - 1) / CH;
    const int nw = warp < nchunks ? (nchunks - warp + W - 1) / W : 0;   /* this warp's chunks */
    const int cs0 = part_start + warp * CH;              /* the warp's first chunk */
    const char *const kp = p.k + lofs, *const vp = p.v + lofs;   /* the sequence's layer */
    const bool tiles_whole = p.block_shift >= 4;         /* no 16-token row tile crosses a block */
    pk_decode_append_new<D, KT, QT, META>(p, seq, h, bt, kp, vp, seq_len, part_start, part_end);

    /* Fill the ring first, so the copies are in flight while the queries are set up. */
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
        if (st >= stg - 1)
            break;                  /* the small rings: a group per stage but the last, no more */
        if (st < nw) {
            const int c0 = cs0 + st * cstride, pos = c0 + tok;
            const int blk = p.window <= 0 ? pre_blk[st] : (pos < part_end ? pk_decode_block<META>(p, bt, pos) : 0);
            if (tiles_whole && c0 >= lo && c0 + CH <= part_end)
                pk_decode_mma_issue_tiles<D, KT>(p, kp, vp, wbuf + st * S::STAGE, blk, h, c0, lane);
            else
                pk_decode_mma_issue<D, KT>(kp, vp, wbuf + st * S::STAGE,
                                           pk_decode_row(p, blk, h, pos, lo, part_end), lane);
        }
        pk_cp_async_commit();
    }

    float qv[NTILE][NKS][4];
#pragma unroll
    for (int j = 0; j < NTILE; ++j)
#pragma unroll
        for (int ks = 0; ks < NKS; ++ks)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                qv[j][ks][e] = 8 * j + qr < G ? pk_to_f32(qraw[j][ks][e]) : 0.0f;
    int qexp = 0;
    if constexpr (!std::is_same<QT, MT>::value) {
        float amax = 0.0f;
#pragma unroll
        for (int j = 0; j < NTILE; ++j)
#pragma unroll
            for (int ks = 0; ks < NKS; ++ks)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    amax = fmaxf(amax, fabsf(qv[j][ks][e]));
        amax = pk_warp_max(amax);
        int ex = 0;
        frexpf(amax, &ex);                               /* amax < 2^ex */
        qexp = min(max(15 - ex, -100), 100);
#pragma unroll
        for (int j = 0; j < NTILE; ++j)
#pragma unroll
            for (int ks = 0; ks < NKS; ++ks)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    qv[j][ks][e] = ldexpf(qv[j][ks][e], qexp);
    }
    uint32_t qf[NTILE][NKS][2];
#pragma unroll
    for (int j = 0; j < NTILE; ++j)
#pragma unroll
        for (int ks = 0; ks < NKS; ++ks) {
            qf[j][ks][0] = pk_pack2<MT>(qv[j][ks][0], qv[j][ks][1]);
            qf[j][ks][1] = pk_pack2<MT>(qv[j][ks][2], qv[j][ks][3]);
        }

    const float ss = ldexpf(p.qk_scale, -qexp);         /* logit per unit of the mma's dot product */
    const float ss2 = ss * PK_LOG2E;
    const float cap = p.soft_cap;
    const float *slopes = p.alibi ? p.alibi + heads.q0 : nullptr;
    const int g0 = 2 * qc, g1 = g0 + 1;                  /* the heads of this lane's C columns in each n-tile */
    float sl0[NTILE], sl1[NTILE];                        /* their ALiBi slopes, per n-tile */
#pragma unroll
    for (int j = 0; j < NTILE; ++j) {
        sl0[j] = slopes && 8 * j + g0 < G ? slopes[8 * j + g0] : 0.0f;
        sl1[j] = slopes && 8 * j + g1 < G ? slopes[8 * j + g1] : 0.0f;
    }
    const bool plain = !(cap > 0.0f) && slopes == nullptr;

    float acc[NTILE][NKS][4];
#pragma unroll
    for (int j = 0; j < NTILE; ++j)
#pragma unroll
        for (int mt = 0; mt < NKS; ++mt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc[j][mt][e] = 0.0f;
    float m0[NTILE], m1[NTILE], l0[NTILE], l1[NTILE];    /* per n-tile; l: this lane's share */
#pragma unroll
    for (int j = 0; j < NTILE; ++j) {
        m0[j] = m1[j] = -INFINITY;
        l0[j] = l1[j] = 0.0f;
    }

    int stage = 0;
    for (int i = 0; i < nw; ++i) {
        __syncwarp();               /* every lane is done with the stage refilled next */
        {
            const int j = i + stg - 1;
            const int js = stage == 0 ? stg - 1 : stage - 1;
            if (j < nw) {
                const int c0 = cs0 + j * cstride, pos = c0 + tok;
                const int blk = pos < part_end ? pk_decode_block<META>(p, bt, pos) : 0;
                if (tiles_whole && c0 >= lo && c0 + CH <= part_end)
                    pk_decode_mma_issue_tiles<D, KT>(p, kp, vp, wbuf + js * S::STAGE, blk, h, c0, lane);
                else
                    pk_decode_mma_issue<D, KT>(kp, vp, wbuf + js * S::STAGE,
                                               pk_decode_row(p, blk, h, pos, lo, part_end), lane);
            }
            pk_cp_async_commit();
        }
        if (stg == STAGES)
            pk_cp_async_wait<STAGES - 1>();
        else
            pk_cp_async_wait<1>();
        __syncwarp();               /* chunk i landed for every lane */
        const unsigned char *kb = wbuf + stage * S::STAGE;
        const unsigned char *vb = kb + S::TILE;
        const int cs = cs0 + i * cstride;
        stage = stage == stg - 1 ? 0 : stage + 1;

        /* S^T = K Q^T per n-tile j and row tile rt (tokens 16 rt ..): each A fragment of K
         * feeds every n-tile's mma; with one n-tile, two accumulator chains (CHAIN2). */
        float c[NTILE][RT][4], c2[NTILE][RT][4];
#pragma unroll
        for (int j = 0; j < NTILE; ++j)
#pragma unroll
            for (int rt = 0; rt < RT; ++rt)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    c[j][rt][e] = c2[j][rt][e] = 0.0f;
#pragma unroll
        for (int rt = 0; rt < RT; ++rt) {
            const int kr = 16 * rt + (lane & 15);        /* the token row this lane's ldmatrix address names */
            if constexpr (FP8) {
#pragma unroll
                for (int ks = 0; ks < NKS; ks += 2) {
                    if (ks + 1 < NKS) {
                        uint32_t r[4], a[4];
                        pk_ldmatrix_x4(r, kb + pk_decode_unit<D, KT>(kr, ks + (lane >> 4)));
                        pk_decode_k_fp8(a, r[0], r[1]);
#pragma unroll
                        for (int j = 0; j < NTILE; ++j)
                            pk_mma16816<__half>(c[j][rt], a, qf[j][ks][0], qf[j][ks][1]);
                        pk_decode_k_fp8(a, r[2], r[3]);
#pragma unroll
                        for (int j = 0; j < NTILE; ++j)
                            pk_mma16816<__half>(CHAIN2 ? c2[j][rt] : c[j][rt], a, qf[j][ks + 1][0],
                                                qf[j][ks + 1][1]);
                    } else {
                        uint32_t r[2], a[4];
                        pk_ldmatrix_x2(r, kb + pk_decode_unit<D, KT>(kr, ks));
                        pk_decode_k_fp8(a, r[0], r[1]);
#pragma unroll
                        for (int j = 0; j < NTILE; ++j)
                            pk_mma16816<__half>(c[j][rt], a, qf[j][ks][0], qf[j][ks][1]);
                    }
                }
            } else {
#pragma unroll
                for (int ks = 0; ks < NKS; ++ks) {
                    uint32_t a[4];
                    pk_ldmatrix_x4(a, kb + pk_decode_unit<D, KT>(kr, 2 * ks + (lane >> 4)));
#pragma unroll
                    for (int j = 0; j < NTILE; ++j)
                        pk_mma16816<MT>(CHAIN2 && (ks & 1) ? c2[j][rt] : c[j][rt], a, qf[j][ks][0], qf[j][ks][1]);
                }
            }
        }

        /* Logits in base 2: s[j][rt][0], s[j][rt][1] are token 16 rt + qr for heads 8j + g0,
         * 8j + g1; s[j][rt][2], s[j][rt][3] token 16 rt + qr + 8. */
        float s[NTILE][RT][4];
#pragma unroll
        for (int j = 0; j < NTILE; ++j)
#pragma unroll
            for (int rt = 0; rt < RT; ++rt) {
                if (plain) {
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        s[j][rt][e] = (CHAIN2 ? c[j][rt][e] + c2[j][rt][e] : c[j][rt][e]) * ss2;
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        float x = (CHAIN2 ? c[j][rt][e] + c2[j][rt][e] : c[j][rt][e]) * ss;
                        if (cap > 0.0f)
                            x = cap * tanhf(x / cap);
                        if (slopes)
                            x += (e & 1 ? sl1[j] : sl0[j])
                                 * (float) (cs + 16 * rt + qr + 8 * (e >> 1) - (seq_len - 1));
                        s[j][rt][e] = x * PK_LOG2E;
                    }
                }
            }
        if (cs < lo || cs + CH > part_end) {
#pragma unroll
            for (int rt = 0; rt < RT; ++rt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int pos = cs + 16 * rt + qr + 8 * (e >> 1);
                    if (pos < lo || pos >= part_end)
#pragma unroll
                        for (int j = 0; j < NTILE; ++j)
                            s[j][rt][e] = -INFINITY;
                }
        }

        /* Online softmax per head over the 8 lanes of a column group, once per chunk and n-tile. */
        float mx0[NTILE], mx1[NTILE], al0[NTILE], al1[NTILE];
#pragma unroll
        for (int j = 0; j < NTILE; ++j) {
            mx0[j] = fmaxf(s[j][0][0], s[j][0][2]);
            mx1[j] = fmaxf(s[j][0][1], s[j][0][3]);
#pragma unroll
            for (int rt = 1; rt < RT; ++rt) {
                mx0[j] = fmaxf(mx0[j], fmaxf(s[j][rt][0], s[j][rt][2]));
                mx1[j] = fmaxf(mx1[j], fmaxf(s[j][rt][1], s[j][rt][3]));
            }
        }
#pragma unroll
        for (int off = 4; off < 32; off <<= 1)
#pragma unroll
            for (int j = 0; j < NTILE; ++j) {
                mx0[j] = fmaxf(mx0[j], __shfl_xor_sync(0xffffffffu, mx0[j], off));
                mx1[j] = fmaxf(mx1[j], __shfl_xor_sync(0xffffffffu, mx1[j], off));
            }
        uint32_t pb[NTILE][RT][2];  /* the probabilities as B fragments: tokens 16 rt + 0-7, + 8-15 */
#pragma unroll
        for (int j = 0; j < NTILE; ++j) {
            const float mn0 = fmaxf(m0[j], mx0[j]), mn1 = fmaxf(m1[j], mx1[j]);
            const float mu0 = mn0 == -INFINITY ? 0.0f : mn0;   /* all masked so far */
            const float mu1 = mn1 == -INFINITY ? 0.0f : mn1;
            al0[j] = pk_exp2(m0[j] - mu0);
            al1[j] = pk_exp2(m1[j] - mu1);
            m0[j] = mn0;
            m1[j] = mn1;
            float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
            for (int rt = 0; rt < RT; ++rt) {
                const float p0 = pk_exp2(s[j][rt][0] - mu0), p1 = pk_exp2(s[j][rt][1] - mu1);
                const float p2 = pk_exp2(s[j][rt][2] - mu0), p3 = pk_exp2(s[j][rt][3] - mu1);
                ps0 += p0 + p2;
                ps1 += p1 + p3;
                pb[j][rt][0] = pk_movmatrix_trans(pk_pack2<MT>(p0, p1));
                pb[j][rt][1] = pk_movmatrix_trans(pk_pack2<MT>(p2, p3));
            }
            l0[j] = l0[j] * al0[j] + ps0;
            l1[j] = l1[j] * al1[j] + ps1;
        }

        /* O^T += V^T P^T: lane (r, c) accumulates, per n-tile j, heads 8j + g0, 8j + g1 of two
         * dims per row tile; each A fragment of V feeds every n-tile's mma. */
#pragma unroll
        for (int j = 0; j < NTILE; ++j)
#pragma unroll
            for (int mt = 0; mt < NKS; ++mt) {
                acc[j][mt][0] *= al0[j];
                acc[j][mt][1] *= al1[j];
                acc[j][mt][2] *= al0[j];
                acc[j][mt][3] *= al1[j];
            }
#pragma unroll
        for (int rt = 0; rt < RT; ++rt) {
            if constexpr (FP8) {
#pragma unroll
                for (int mt = 0; mt < NKS; mt += 2) {
                    const int vr = 16 * rt + (lane & 15);
                    if (mt + 1 < NKS) {
                        uint32_t r[4], a[4];
                        pk_ldmatrix_x4_trans(r, vb + pk_decode_unit<D, KT>(vr, mt + (lane >> 4)));
                        pk_decode_v_fp8(a, r[0], r[1]);
#pragma unroll
                        for (int j = 0; j < NTILE; ++j)
                            pk_mma16816<__half>(acc[j][mt], a, pb[j][rt][0], pb[j][rt][1]);
                        pk_decode_v_fp8(a, r[2], r[3]);
#pragma unroll
                        for (int j = 0; j < NTILE; ++j)
                            pk_mma16816<__half>(acc[j][mt + 1], a, pb[j][rt][0], pb[j][rt][1]);
                    } else {
                        uint32_t r[2], a[4];
                        pk_ldmatrix_x2_trans(r, vb + pk_decode_unit<D, KT>(vr, mt));
                        pk_decode_v_fp8(a, r[0], r[1]);
#pragma unroll
                        for (int j = 0; j < NTILE; ++j)
                            pk_mma16816<__half>(acc[j][mt], a, pb[j][rt][0], pb[j][rt][1]);
                    }
                }
            } else {
#pragma unroll
                for (int mt = 0; mt < NKS; ++mt) {
                    uint32_t a[4];
                    pk_ldmatrix_x4_trans(a, vb + pk_decode_unit<D, KT>(16 * rt + ((lane >> 4) << 3) + (lane & 7),
                                                                       2 * mt + ((lane >> 3) & 1)));
#pragma unroll
                    for (int j = 0; j < NTILE; ++j)
                        pk_mma16816<MT>(acc[j][mt], a, pb[j][rt][0], pb[j][rt][1]);
                }
            }
        }
    }
    pk_cp_async_wait<0>();          /* only empty groups remain, but the ring is reused below */
    __syncwarp();

    /* Each warp leaves its (max, sum, unnormalized output) per head in its own ring. */
#pragma unroll
    for (int off = 4; off < 32; off <<= 1)
#pragma unroll
        for (int j = 0; j < NTILE; ++j) {
            l0[j] += __shfl_xor_sync(0xffffffffu, l0[j], off);
            l1[j] += __shfl_xor_sync(0xffffffffu, l1[j], off);
        }
    float *ow = (float *) wbuf;     /* [G][D] */
    float *mw = ow + MG::M, *lw = ow + MG::L;
#pragma unroll
    for (int j = 0; j < NTILE; ++j) {
        const int h0 = 8 * j + g0, h1 = h0 + 1;          /* this lane's heads in n-tile j */
#pragma unroll
        for (int mt = 0; mt < NKS; ++mt) {
            const int da = FP8 ? 16 * mt + 2 * qr : 16 * mt + qr;
            const int db = FP8 ? da + 1 : da + 8;
            if (h0 < G) {
                ow[h0 * D + da] = acc[j][mt][0];
                ow[h0 * D + db] = acc[j][mt][2];
            }
            if (h1 < G) {
                ow[h1 * D + da] = acc[j][mt][1];
                ow[h1 * D + db] = acc[j][mt][3];
            }
        }
        if (qr == 0) {
            if (h0 < G) {
                mw[h0] = m0[j];
                lw[h0] = l0[j];
            }
            if (h1 < G) {
                mw[h1] = m1[j];
                lw[h1] = l1[j];
            }
        }
    }
    __syncthreads();

    /* Merge the warps: out = sum_w 2^(m_w - M) o_w / sum_w 2^(m_w - M) l_w. */
    const size_t hq0 = (size_t) seq * p.num_q_heads + (size_t) heads.q0;
    QT *out = nullptr;
    if (nparts == 1)
        out = p.out_seq ? (QT *) p.out_seq[seq] + (size_t) heads.q0 * D : (QT *) p.out + hq0 * D;
    for (int idx = threadIdx.x; idx < G * D; idx += S::NT) {
        const int g = idx / D, d = idx - g * D;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < W; ++w)
            M = fmaxf(M, ((const float *) (smem + w * warp_bytes))[MG::M + g]);
        const float Mu = M == -INFINITY ? 0.0f : M;
        float L = 0.0f, O = 0.0f;
#pragma unroll
        for (int w = 0; w < W; ++w) {
            const float *o = (const float *) (smem + w * warp_bytes);
            const float f = exp2f(o[MG::M + g] - Mu);
            L += f * o[MG::L + g];
            O += f * o[idx];
        }
        if (nparts == 1) {
            out[idx] = pk_from_f32<QT>(O / L * p.v_scale);
        } else {
            const size_t pi = (hq0 + g) * p.max_parts + part;
            p.ws_o[pi * D + d] = O;
            if (d == 0) {
                p.ws_m[pi] = M;
                p.ws_l[pi] = L;
            }
        }
    }
}

/* The tensor-core decode partition kernel with NTILE n-tiles, its metadata in device memory. */
template <int D, typename KT, typename QT, int NTILE>
static __global__ void __launch_bounds__(pk_decode_mma_shape<D, KT>::NT, pk_decode_mma_shape<D, KT>::MINB)
pk_decode_mma_kernel(const pk_decode_params p)
{
    pk_decode_mma_body<D, KT, QT, false, NTILE>(p);
}

/* The tensor-core decode partition kernel with NTILE n-tiles, its metadata in its parameters
 * (m): p's metadata pointers, device addresses from p.meta_base on, are moved onto m's bytes. */
template <int D, typename KT, typename QT, int N, int NTILE>
static __global__ void __launch_bounds__(pk_decode_mma_shape<D, KT>::NT, pk_decode_mma_shape<D, KT>::MINB)
pk_decode_mma_meta_kernel(const __grid_constant__ pk_decode_params p, const __grid_constant__ pk_decode_meta<N> m)
{
    pk_decode_params r = p;
    r.seq_layer = pk_meta_rebase(p.seq_layer, p.meta_base, m.bytes);
    r.block_tables = pk_meta_rebase(p.block_tables, p.meta_base, m.bytes);
    r.seq_lens = pk_meta_rebase(p.seq_lens, p.meta_base, m.bytes);
    r.q_seq = pk_meta_rebase(p.q_seq, p.meta_base, m.bytes);
    r.out_seq = pk_meta_rebase(p.out_seq, p.meta_base, m.bytes);
    r.alibi = pk_meta_rebase(p.alibi, p.meta_base, m.bytes);
    r.new_k_seq = pk_meta_rebase(p.new_k_seq, p.meta_base, m.bytes);
    r.new_v_seq = pk_meta_rebase(p.new_v_seq, p.meta_base, m.bytes);
    pk_decode_mma_body<D, KT, QT, true, NTILE>(r);
}

/* Per-device cache of the decode kernel's resident CTAs per SM, one per instance (NTILE: the
 * tensor-core kernel's n-tiles; 1 for the plain kernel). */
template <int D, typename KT, typename QT, int NTILE = 1> struct pk_decode_occupancy {
    static std::atomic<int> cache[PK_MAX_DEVICES];
};
template <int D, typename KT, typename QT, int NTILE>
std::atomic<int> pk_decode_occupancy<D, KT, QT, NTILE>::cache[PK_MAX_DEVICES];

/* Per-device cache of the plain decode kernel's wide-group variant's resident CTAs per SM, one
 * per instance. */
template <int D, typename KT, typename QT> struct pk_decode_wide_occupancy {
    static std::atomic<int> cache[PK_MAX_DEVICES];
};
template <int D, typename KT, typename QT> std::atomic<int> pk_decode_wide_occupancy<D, KT, QT>::cache[PK_MAX_DEVICES];

/* Per-device cache of the tensor-core decode kernel's resident CTAs per SM with the small
 * rings, one per instance (NTILE: its n-tiles). */
template <int D, typename KT, typename QT, int NTILE> struct pk_decode_small_occupancy {
    static std::atomic<int> cache[PK_MAX_DEVICES];
};
template <int D, typename KT, typename QT, int NTILE>
std::atomic<int> pk_decode_small_occupancy<D, KT, QT, NTILE>::cache[PK_MAX_DEVICES];

/* Per-device cache of the tensor-core decode kernel's resident CTAs per SM with its metadata in
 * its parameters, one per instance (only its shared memory attribute matters). */
template <int D, typename KT, typename QT, int N, int NTILE> struct pk_decode_meta_occupancy {
    static std::atomic<int> cache[PK_MAX_DEVICES];
};
template <int D, typename KT, typename QT, int N, int NTILE>
std::atomic<int> pk_decode_meta_occupancy<D, KT, QT, N, NTILE>::cache[PK_MAX_DEVICES];

/* Launches the tensor-core kernel with NTILE n-tiles of a's metadata on grid with parameters
 * p, the metadata in an N-byte parameter; returns 0 or a negative paged_error. */
template <int D, typename KT, typename QT, int N, int NTILE>
static int pk_decode_meta_launch(const pk_decode_args *a, const pk_decode_params &p, dim3 grid, size_t smem,
                                 int dev, cudaStream_t stream)
{
    using S = pk_decode_mma_shape<D, KT>;
    const int occ = pk_kernel_prepare(pk_decode_mma_meta_kernel<D, KT, QT, N, NTILE>, S::NT, S::SMEM, dev,
                                      pk_decode_meta_occupancy<D, KT, QT, N, NTILE>::cache);
    if (occ < 0)
        return occ;
    return pk_launch_dependent_args(pk_decode_tuning().pdl, pk_decode_mma_meta_kernel<D, KT, QT, N, NTILE>, grid,
                                    dim3(S::NT), smem, stream, p, pk_decode_meta_of<N>(a));
}

/* Returns the n-tiles of the tensor-core kernel of head dim D and cache type KT for a group of
 * `group` query heads per KV head: 1 up to 16 heads (sub-groups of 8 beyond 8), 2 (sub-groups
 * of 16) for wider groups where pk_decode_mma_wide allows it. Up to 16 the sub-groups of 8
 * keep twice the CTAs in the grid and read the second copy of K/V from L2, which measured
 * faster on an H200 than one 16-head CTA (BENCHMARKS.md, the group rows); from 32 the copies
 * each sub-group makes cost more than the wider tiles. */
template <int D, typename KT>
static inline int pk_decode_mma_ntile(int group)
{
    return pk_decode_mma_wide<D, KT>::value && group > 16 ? 2 : 1;
}

/* Plans, and unless only asked for the plan launches, the partition kernel (see
 * pk_decode_run), the tensor-core one with NTILE n-tiles (1 for the plain kernel). */
template <int D, typename KT, typename QT, int NTILE>
static int pk_decode_run_tiles(const pk_decode_args *a, size_t ws_limit, cudaStream_t stream, bool launch,
                               pk_decode_plan *plan)
{
    constexpr bool MMA = pk_decode_uses_mma<KT, QT>::value;
    static_assert(NTILE == 1 || (MMA && pk_decode_mma_wide<D, KT>::value), "two n-tiles only where allowed");
    constexpr int NT = MMA ? pk_decode_mma_shape<D, KT>::NT : pk_decode_shape<D, KT>::NT;
    constexpr int SMEM = MMA ? pk_decode_mma_shape<D, KT>::SMEM : pk_decode_shape<D, KT>::SMEM;
    void (*kernel)(pk_decode_params);
    const int subs = pk_decode_subs(a->num_q_heads / a->cache.num_kv_heads, MMA ? 8 * NTILE : 8);
    if constexpr (MMA)
        kernel = pk_decode_mma_kernel<D, KT, QT, NTILE>;
    else
        kernel = subs > 1 ? pk_decode_kernel<D, KT, QT, true> : pk_decode_kernel<D, KT, QT, false>;
    /* The fused append lives in the tensor-core kernel only (the f32 one has no registers
     * to spare for it). */
    if (!MMA && (a->new_k != nullptr || a->new_k_seq != nullptr))
        return PAGED_E_NOTSUP;
    int dev = 0;
    PK_CUDA_CHECK(cudaGetDevice(&dev));
    const int occ = pk_kernel_prepare(kernel, NT, SMEM, dev,
                                      !MMA && subs > 1 ? pk_decode_wide_occupancy<D, KT, QT>::cache
                                                       : pk_decode_occupancy<D, KT, QT, NTILE>::cache);
    if (occ < 0)
        return occ;
    const int sms = pk_sm_count(dev);
    if (sms <= 0)
        return PAGED_E_DEVICE;
    const long long units = (long long) a->num_seqs * a->cache.num_kv_heads * subs;
    if (units > INT32_MAX)
        return PAGED_E_GEOMETRY;        /* grid dimension x of the tensor-core kernel */
    /* The reduce reads the partials in 16-byte vectors. */
    if (!pk_aligned(a->workspace, 16))
        ws_limit = 0;
    long long small_slots = 0;
    if constexpr (MMA) {
        using S = pk_decode_mma_shape<D, KT>;
        if (S::SMALL) {
            const int fit = pk_kernel_prepare(kernel, NT, S::SMALL_SMEM, dev,
                                              pk_decode_small_occupancy<D, KT, QT, NTILE>::cache);
            if (fit > occ)
                small_slots = (long long) sms * fit;
            else if (fit < 0)
                (void) cudaGetLastError();   /* no small rings then */
        }
    }
    pk_decode_make_plan(a, units, (long long) sms * occ, small_slots, ws_limit, plan);
    plan->subs = subs;
    plan->cta_heads = MMA ? 8 * NTILE : 8;
    plan->meta = MMA && a->meta_host != nullptr && a->meta_dev != nullptr && a->meta_bytes <= PK_CUDA_DECODE_META_MAX;
    if (!launch)
        return 0;
    if (a->meta_host != nullptr && !plan->meta)
        return PAGED_E_NOTSUP;          /* the caller may not have copied the metadata to the device */
    if (plan->meta && !pk_decode_meta_covers(a))
        return PAGED_E_INVAL;

    pk_decode_params p;
    /* With per-sequence layers each CTA steps from layer 0's planes to its sequence's. */
    const int base_layer = a->seq_layer ? 0 : a->layer;
    p.k = pk_cache_plane(&a->cache, base_layer, 0);
    p.v = pk_cache_plane(&a->cache, base_layer, 1);
    p.seq_layer = a->seq_layer;
    p.layer_bytes = pk_cache_layer_bytes(&a->cache);
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
    p.subs = subs;
    p.block_shift = pk_block_shift(a->cache.block_size);
    p.part_tokens = plan->part_tokens;
    p.max_parts = plan->max_parts;
    size_t smem = SMEM;
    p.stages = 0;
    if constexpr (MMA) {
        using S = pk_decode_mma_shape<D, KT>;
        p.stages = plan->small ? 2 : S::STAGES;
        if (plan->small)
            smem = S::SMALL_SMEM;
    }
    p.new_k = a->q_seq ? nullptr : a->new_k;
    p.new_v = a->q_seq ? nullptr : a->new_v;
    p.new_k_seq = a->q_seq ? a->new_k_seq : nullptr;
    p.new_v_seq = a->q_seq ? a->new_v_seq : nullptr;
    p.k_scale_raw = a->cache.dtype == PAGED_DTYPE_FP8_E4M3 ? a->cache.k_scale : 1.0f;
    p.v_scale_raw = a->cache.dtype == PAGED_DTYPE_FP8_E4M3 ? a->cache.v_scale : 1.0f;

    p.meta_base = (const char *) a->meta_dev;

    const dim3 grid = MMA ? dim3((unsigned) units, (unsigned) plan->max_parts)
                          : dim3((unsigned) a->num_seqs, (unsigned) (a->cache.num_kv_heads * subs),
                                 (unsigned) plan->max_parts);
    if constexpr (MMA) {
        if (plan->meta)
            return pk_decode_meta_sized(a->meta_bytes, [&](auto n) {
                return pk_decode_meta_launch<D, KT, QT, decltype(n)::value, NTILE>(a, p, grid, smem, dev, stream);
            });
    }
    return pk_launch_dependent(kernel, grid, dim3(NT), smem, stream, p, pk_decode_tuning().pdl);
}

/* Plans, and unless only asked for the plan launches, the partition kernel (see decode.cuh):
 * the tensor-core kernel with the n-tiles pk_decode_mma_ntile gives the group, else with one
 * (and the plain kernel). */
template <int D, typename KT, typename QT>
int pk_decode_run(const pk_decode_args *a, size_t ws_limit, cudaStream_t stream, bool launch, pk_decode_plan *plan)
{
    if constexpr (pk_decode_uses_mma<KT, QT>::value && pk_decode_mma_wide<D, KT>::value) {
        if (pk_decode_mma_ntile<D, KT>(a->num_q_heads / a->cache.num_kv_heads) == 2)
            return pk_decode_run_tiles<D, KT, QT, 2>(a, ws_limit, stream, launch, plan);
    }
    return pk_decode_run_tiles<D, KT, QT, 1>(a, ws_limit, stream, launch, plan);
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
