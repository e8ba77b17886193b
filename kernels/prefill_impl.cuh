/* prefill_impl.cuh: the paged prefill (append attention) kernels, included by the per-head-dim instance files. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_PREFILL_IMPL_CUH
#define PAGED_KERNELS_PREFILL_IMPL_CUH

#include <climits>
#include <type_traits>

#include "kernels/ptx.cuh"
#include "kernels/prefill.cuh"

/*
 * Both prefill kernels pack GQA into the rows of a tile: for KV head h, row m of the
 * sequence's [qo_len * G] rows is query token r = m / G of query head h * G + m % G, so one
 * CTA reads each K/V tile once for the whole group. Grid (row tile, KV head, sequence);
 * row tiles run last-first, so the causal tiles with the most keys start earliest.
 */

/* Kernel arguments of the prefill kernels (passed by value). */
struct pk_prefill_params {
    const char *k, *v;              /* the layer's K and V planes, [N][H][B][D] */
    const int32_t *block_tables;
    const int32_t *seq_lens;
    const int32_t *qo_indptr;
    const void *q;
    void *out;
    const float *alibi;
    float qk_scale;                 /* sm_scale * k_scale */
    float v_scale;
    float soft_cap;
    int window, causal;
    int bt_stride, num_kv_heads, num_q_heads, group, block_shift;
    int num_mtiles;
    int q_aligned;                  /* q is 16-byte aligned: its tile is copied with cp.async */
    int out_aligned;                /* out is 4-byte aligned: pairs are stored as one word */
    int out_vec;                    /* out is 16-byte aligned: rows are stored in 16-byte chunks */
};

/* What a CTA works on: its rows and the keys any of them can see. */
struct pk_prefill_cta {
    int qo_start, qo_len, seq_len;
    int rows;                       /* qo_len * G */
    int m0;                         /* first row of the tile */
    int kv_lo, kv_hi;               /* keys seen by some row of the tile: [kv_lo, kv_hi) */
};

/* One row's masking and ALiBi facts. */
struct pk_prefill_row {
    int valid;                      /* a real row, not padding past qo_len * G */
    int r, hq;                      /* query token (within the sequence) and query head */
    int i;                          /* its position: keys j <= i are visible (minus the window) */
    float slope;
};

/*
 * Fills c for row tile mtile (of bm rows) of sequence seq; returns false if the tile has no
 * rows (a shorter sequence than the grid was sized for).
 */
__device__ __forceinline__ bool pk_prefill_setup(const pk_prefill_params &p, int bm, int mtile, int seq,
                                                 pk_prefill_cta *c)
{
    const int G = p.group;
    c->qo_start = p.qo_indptr[seq];
    c->qo_len = p.qo_indptr[seq + 1] - c->qo_start;
    c->seq_len = p.seq_lens[seq];
    c->rows = c->qo_len * G;
    c->m0 = mtile * bm;
    if (c->m0 >= c->rows)
        return false;
    const int r_min = c->m0 / G, r_max = (min(c->m0 + bm, c->rows) - 1) / G;
    const int base = c->seq_len - c->qo_len;
    c->kv_hi = p.causal ? base + r_max + 1 : c->seq_len;
    c->kv_lo = 0;
    if (p.window > 0)
        c->kv_lo = max(0, (p.causal ? base + r_min : c->seq_len - 1) - p.window + 1);
    return true;
}

/* Returns the facts of tile row m (tile-local) of CTA c at KV head h. */
__device__ __forceinline__ pk_prefill_row pk_prefill_row_of(const pk_prefill_params &p, const pk_prefill_cta &c,
                                                           int h, int m)
{
    pk_prefill_row w;
    const int mg = c.m0 + m;
    w.valid = mg < c.rows;
    const int mm = w.valid ? mg : c.rows - 1;
    w.r = mm / p.group;
    w.hq = h * p.group + (mm - w.r * p.group);
    /* Without the causal mask every row stands at the last position, for ALiBi too. */
    w.i = p.causal ? c.seq_len - c.qo_len + w.r : c.seq_len - 1;
    w.slope = p.alibi ? p.alibi[w.hq] : 0.0f;
    return w;
}

/*
 * Returns whether key j is hidden from a row at position i: after it (the causal mask, and
 * keys past the context) or out of the window.
 */
__device__ __forceinline__ bool pk_prefill_masked(const pk_prefill_params &p, int i, int j)
{
    return j > i || (p.window > 0 && j <= i - p.window);
}

/*
 * Returns the base-2 logit of scaled score x (sm_scale * dot) of key j for row w: soft cap,
 * ALiBi, then the masks (-inf): keys after the row's position (which covers the causal mask
 * and keys past the context) and keys out of the window.
 */
__device__ __forceinline__ float pk_prefill_logit(const pk_prefill_params &p, const pk_prefill_cta &c,
                                                  const pk_prefill_row &w, int j, float x)
{
    if (p.soft_cap > 0.0f)
        x = p.soft_cap * tanhf(x / p.soft_cap);
    if (p.alibi)
        x += w.slope * (float) (j - w.i);
    return pk_prefill_masked(p, w.i, j) ? -INFINITY : x * PK_LOG2E;
}

/*
 * Returns the sum of x over this lane's quad (lanes 4 q .. 4 q + 3, which share an mma row:
 * a row's softmax denominator from its four parts). Every lane of the warp calls it.
 */
__device__ __forceinline__ float pk_prefill_quad_sum(float x)
{
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    x += __shfl_xor_sync(0xffffffffu, x, 2);
    return x;
}

/*
 * Returns the row of q and out (a row per query token and head, D elements each) that GQA-packed
 * row mg of CTA c's sequence (mg < c.rows: token mg / G, query head h G + mg % G) stands for.
 */
__device__ __forceinline__ size_t pk_prefill_qo_row(const pk_prefill_params &p, const pk_prefill_cta &c, int h, int mg)
{
    const int r = mg / p.group, g = mg - r * p.group;
    return (size_t) (c.qo_start + r) * p.num_q_heads + (size_t) h * p.group + g;
}

/*
 * Starts the copy of 16-byte chunk ch of row m (tile-local) of CTA c's Q tile at KV head h
 * into dst (shared memory), with plain loads and stores where q is not 16-byte aligned, or
 * zeroes dst for a row past the sequence.
 */
template <int D, typename QT>
__device__ __forceinline__ void pk_prefill_load_q_chunk(const pk_prefill_params &p, const pk_prefill_cta &c, int h,
                                                        int m, int ch, QT *dst)
{
    const int mg = c.m0 + m;
    if (mg < c.rows) {
        const QT *src = (const QT *) p.q + pk_prefill_qo_row(p, c, h, mg) * D + ch * 8;
        if (p.q_aligned) {
            pk_cp_async16(dst, src);
        } else {
#pragma unroll
            for (int e = 0; e < 8; ++e)
                dst[e] = src[e];
        }
    } else {
        *(uint4 *) dst = make_uint4(0, 0, 0, 0);
    }
}

/* Returns the byte offset in a K/V plane of the row of context position pos of KV head h. */
__device__ __forceinline__ size_t pk_prefill_row_offset(const pk_prefill_params &p, const int32_t *bt, int h,
                                                        int pos, int row_bytes)
{
    const int blk = __ldg(bt + (pos >> p.block_shift));
    return pk_paged_row(blk, h, pos, p.num_kv_heads, p.block_shift) * (size_t) row_bytes;
}

/*
 * The online-softmax bookkeeping of one tile for a thread's two rows: takes the quad's
 * maximum of each row's scores mx (times scale, which must be positive, in base-2 logits),
 * updates the running maxima m_run and the sums l_run, and returns the factors alpha by which
 * the rows' outputs must be rescaled and the maxima m_use the tile's logits are taken from.
 */
__device__ __forceinline__ void pk_prefill_rows_update(float (&mx)[2], float scale, float (&m_run)[2],
                                                       float (&l_run)[2], float (&alpha)[2], float (&m_use)[2])
{
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        const float m_new = fmaxf(m_run[r], mx[r] * scale);
        m_use[r] = m_new == -INFINITY ? 0.0f : m_new;   /* nothing visible yet */
        alpha[r] = pk_exp2(m_run[r] - m_use[r]);
        m_run[r] = m_new;
        l_run[r] *= alpha[r];
    }
}

/*
 * The masks and the online-softmax step of one tile for the two rows m0 and m0 + 8 (tile-local)
 * a thread holds in an mma accumulator layout: sc[nt][e] is the raw dot product of row
 * m0 + 8 (e / 2) and key j0 + 8 nt + e % 2. Turns sc into unnormalized probabilities,
 * updates the rows' running maxima m_run and sums l_run (this thread's share: a row's 4
 * lanes, a quad, share the maximum and add their sums at the end), and returns in alpha the
 * factor by which each row's output accumulators must be rescaled. visible: every key of the
 * tile is visible to both rows and there is no cap or ALiBi, so only the scale applies.
 */
template <int NT8>
__device__ __forceinline__ void pk_prefill_softmax(const pk_prefill_params &p, const pk_prefill_cta &c, int h, int m0,
                                                   int j0, bool visible, float qk_log2, float (&sc)[NT8][4],
                                                   float (&m_run)[2], float (&l_run)[2], float (&alpha)[2])
{
    float mx[2] = { -INFINITY, -INFINITY };
    if (visible) {
#pragma unroll
        for (int nt = 0; nt < NT8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                sc[nt][e] *= qk_log2;
                mx[e >> 1] = fmaxf(mx[e >> 1], sc[nt][e]);
            }
        }
    } else {
        const pk_prefill_row rw[2] = { pk_prefill_row_of(p, c, h, m0), pk_prefill_row_of(p, c, h, m0 + 8) };
#pragma unroll
        for (int nt = 0; nt < NT8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int j = j0 + nt * 8 + (e & 1);
                sc[nt][e] = pk_prefill_logit(p, c, rw[e >> 1], j, sc[nt][e] * p.qk_scale);
                mx[e >> 1] = fmaxf(mx[e >> 1], sc[nt][e]);
            }
        }
    }
    float m_use[2];
    pk_prefill_rows_update(mx, 1.0f, m_run, l_run, alpha, m_use);
#pragma unroll
    for (int nt = 0; nt < NT8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            sc[nt][e] = pk_exp2(sc[nt][e] - m_use[e >> 1]);
            l_run[e >> 1] += sc[nt][e];
        }
    }
}

/*
 * Normalizes and stores the two output rows m0 and m0 + 8 (tile-local) a thread holds in an
 * mma accumulator layout: o[dt][e] is column 8 dt + 2 (lane % 4) + e % 2 of row m0 + 8 (e / 2),
 * l_run the thread's share of each row's sum (the quad's shares are added here).
 */
template <int D, typename QT>
__device__ __forceinline__ void pk_prefill_store_rows(const pk_prefill_params &p, const pk_prefill_cta &c, int h,
                                                      int m0, int lane, const float (&o)[D / 8][4],
                                                      const float (&l_run)[2])
{
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float l = pk_prefill_quad_sum(l_run[r]);
        const pk_prefill_row w = pk_prefill_row_of(p, c, h, m0 + r * 8);
        if (!w.valid)
            continue;
        const float scale = p.v_scale / l;
        QT *dst = (QT *) p.out + ((size_t) (c.qo_start + w.r) * p.num_q_heads + w.hq) * D + (lane & 3) * 2;
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
            const float x0 = o[dt][2 * r] * scale, x1 = o[dt][2 * r + 1] * scale;
            if (p.out_aligned) {
                *(uint32_t *) (dst + dt * 8) = pk_pack2<QT>(x0, x1);
            } else {
                dst[dt * 8] = pk_from_f32<QT>(x0);
                dst[dt * 8 + 1] = pk_from_f32<QT>(x1);
            }
        }
    }
}

/* ===================================================================================== */
/*
 * Tensor-core kernel (f16/bf16 queries; cache of the same dtype, or fp8 widened to it in
 * shared memory). 4 warps of MT 16-row m-tiles each: MT = 2 (BM = 128 rows) up to D 128,
 * so every K and V fragment a warp loads from shared memory serves two m-tiles and every K/V
 * tile loaded from L2 serves 128 rows; MT = 1 (BM = 64) at D 256, where the output
 * accumulators take twice the registers, and for fp8 caches. BN = 32 keys per tile. Per tile each
 * warp computes S = Q K^T with mma.sync m16n8k16 (A = Q from shared memory by ldmatrix,
 * B = K rows by ldmatrix), applies masks and the online softmax on the accumulators, and
 * multiplies P (the S accumulators re-packed in registers as A fragments) by V (B fragments
 * by ldmatrix.trans). Shared-memory rows are padded by 16 bytes so ldmatrix is conflict-free.
 * 16-bit caches: K/V tiles double-buffered with cp.async. fp8 caches: raw fp8 tiles
 * double-buffered with cp.async, converted exactly to the query type in one K/V buffer.
 */
template <int D, typename KT, typename QT> struct pk_prefill_mma_shape {
    static constexpr bool FP8 = std::is_same<KT, pk_e4m3>::value;
    static constexpr int MT = D > 128 || FP8 ? 1 : 2;    /* 16-row m-tiles per warp (fp8's
                                                          * widening needs the registers) */
    static constexpr int NT = 128;                       /* 4 warps */
    static constexpr int BM = 16 * MT * (NT / 32);
    static constexpr int BN = 32;
    static constexpr int LDS = D + 8;                    /* padded row, in elements */
    static constexpr int Q_BYTES = BM * LDS * 2;
    static constexpr int KV_BYTES = BN * LDS * 2;
    static constexpr int NBUF = FP8 ? 1 : 2;
    static constexpr int RAW_BYTES = BN * D;             /* one raw fp8 tile */
    static constexpr int SMEM = Q_BYTES + 2 * NBUF * KV_BYTES + (FP8 ? 4 * RAW_BYTES : 0);
    static_assert(D % 16 == 0 && BN % 16 == 0, "tile shapes must be whole mma tiles");
    static_assert(sizeof(QT) == 2 && (FP8 || std::is_same<KT, QT>::value), "16-bit queries only");
};

/* Starts the copies of the K/V tile at keys [kv0, kv0 + BN), whose cache rows are ROW_BYTES
 * long, in 16-byte chunks (of CHUNK elements T): chunk ch of key n goes to element
 * n * STRIDE + ch * CHUNK of kdst, its V to the same element of vdst, or, with V_AFTER > 0,
 * V_AFTER elements after its K; zero-fills keys outside [c.kv_lo, c.kv_hi). */
template <int D, typename KT, typename QT, int ROW_BYTES, typename T, int STRIDE, int V_AFTER>
__device__ __forceinline__ void pk_prefill_load_tile(const pk_prefill_params &p, const pk_prefill_cta &c,
                                                     const int32_t *bt, int h, int kv0, T *kdst, T *vdst)
{
    using S = pk_prefill_mma_shape<D, KT, QT>;
    constexpr int CPR = ROW_BYTES / 16;     /* 16-byte chunks per row */
    constexpr int CHUNK = 16 / (int) sizeof(T);
#pragma unroll
    for (int it = 0; it < (S::BN * CPR + S::NT - 1) / S::NT; ++it) {
        const int idx = (int) threadIdx.x + it * S::NT;
        if (idx >= S::BN * CPR)
            break;
        const int n = idx / CPR, ch = idx - n * CPR;
        const int pos = kv0 + n;
        T *dk = kdst + n * STRIDE + ch * CHUNK;
        T *dv = V_AFTER > 0 ? dk + V_AFTER : vdst + n * STRIDE + ch * CHUNK;
        if (pos >= c.kv_lo && pos < c.kv_hi) {
            const size_t off = pk_prefill_row_offset(p, bt, h, pos, ROW_BYTES) + (size_t) ch * 16;
            pk_cp_async16(dk, p.k + off);
            pk_cp_async16(dv, p.v + off);
        } else {
            *(uint4 *) dk = make_uint4(0, 0, 0, 0);
            *(uint4 *) dv = make_uint4(0, 0, 0, 0);
        }
    }
}

/* Starts the copies of the 16-bit K/V tile at keys [kv0, kv0 + BN) into buffers kb, vb (rows
 * of LDS elements); zero-fills keys outside [c.kv_lo, c.kv_hi). */
template <int D, typename KT, typename QT>
__device__ __forceinline__ void pk_prefill_load16(const pk_prefill_params &p, const pk_prefill_cta &c,
                                                  const int32_t *bt, int h, int kv0, QT *kb, QT *vb)
{
    using S = pk_prefill_mma_shape<D, KT, QT>;
    pk_prefill_load_tile<D, KT, QT, D * 2, QT, S::LDS, 0>(p, c, bt, h, kv0, kb, vb);
}

/* Starts the copies of the raw fp8 K/V tile at keys [kv0, kv0 + BN) into raw ([K tile][V tile]);
 * zero-fills keys outside [c.kv_lo, c.kv_hi). */
template <int D, typename KT, typename QT>
__device__ __forceinline__ void pk_prefill_load8(const pk_prefill_params &p, const pk_prefill_cta &c,
                                                 const int32_t *bt, int h, int kv0, unsigned char *raw)
{
    using S = pk_prefill_mma_shape<D, KT, QT>;
    pk_prefill_load_tile<D, KT, QT, D, unsigned char, D, S::RAW_BYTES>(p, c, bt, h, kv0, raw, nullptr);
}

/* Widens the raw fp8 K/V tile raw into the 16-bit buffers kb, vb (exact: e4m3 fits f16 and bf16). */
template <int D, typename KT, typename QT>
__device__ __forceinline__ void pk_prefill_widen(const unsigned char *raw, QT *kb, QT *vb)
{
    using S = pk_prefill_mma_shape<D, KT, QT>;
    constexpr int CPR = D / 8;      /* 8-byte groups per row */
#pragma unroll
    for (int it = 0; it < (2 * S::BN * CPR + S::NT - 1) / S::NT; ++it) {
        const int idx = (int) threadIdx.x + it * S::NT;
        if (idx >= 2 * S::BN * CPR)
            break;
        const int kv = idx / (S::BN * CPR), rem = idx - kv * (S::BN * CPR);
        const int n = rem / CPR, ch = rem - n * CPR;
        const uint2 w = *(const uint2 *) (raw + kv * S::RAW_BYTES + n * D + ch * 8);
        uint4 o;
        o.x = pk_e4m3x2_to<QT>(w.x);
        o.y = pk_e4m3x2_to<QT>(w.x >> 16);
        o.z = pk_e4m3x2_to<QT>(w.y);
        o.w = pk_e4m3x2_to<QT>(w.y >> 16);
        *(uint4 *) ((kv ? vb : kb) + n * S::LDS + ch * 8) = o;
    }
}

/* The tensor-core prefill kernel (see pk_prefill_mma_shape). Grid (row tile, KV head, sequence). */
template <int D, typename KT, typename QT>
static __global__ void __launch_bounds__(pk_prefill_mma_shape<D, KT, QT>::NT)
    pk_prefill_mma_kernel(const pk_prefill_params p)
{
    using S = pk_prefill_mma_shape<D, KT, QT>;
    constexpr int BN = S::BN, LDS = S::LDS;
    extern __shared__ __align__(16) unsigned char smem[];
    QT *qs = (QT *) smem;
    QT *kbuf = (QT *) (smem + S::Q_BYTES);              /* [NBUF][BN][LDS] */
    QT *vbuf = kbuf + S::NBUF * BN * LDS;
    unsigned char *raw = (unsigned char *) (vbuf + S::NBUF * BN * LDS);  /* fp8: [2][K, V][BN][D] */

    const int h = blockIdx.y, seq = blockIdx.z;
    pk_prefill_cta c;
    if (!pk_prefill_setup(p, S::BM, p.num_mtiles - 1 - (int) blockIdx.x, seq, &c))
        return;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int32_t *bt = p.block_tables + (size_t) seq * p.bt_stride;

    /* The Q tile: rows past the sequence are zeros. */
    for (int idx = tid; idx < S::BM * (D / 8); idx += S::NT) {
        const int m = idx / (D / 8), ch = idx - m * (D / 8);
        pk_prefill_load_q_chunk<D, QT>(p, c, h, m, ch, qs + m * LDS + ch * 8);
    }

    const int kv_start = c.kv_lo / BN * BN;
    const int ntiles = (c.kv_hi - kv_start + BN - 1) / BN;
    if constexpr (S::FP8)
        pk_prefill_load8<D, KT, QT>(p, c, bt, h, kv_start, raw);
    else
        pk_prefill_load16<D, KT, QT>(p, c, bt, h, kv_start, kbuf, vbuf);
    pk_cp_async_commit();

    constexpr int MT = S::MT;
    /* This thread's rows are rows lane / 4 and lane / 4 + 8 of m-tile mi of the warp; only
     * the range of their positions is kept (registers are short), the rest is recomputed
     * where needed. */
    int i_lo = INT_MAX, i_hi = INT_MIN;
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int i = pk_prefill_row_of(p, c, h, (warp * MT + mi) * 16 + (lane >> 2) + r * 8).i;
            i_lo = min(i_lo, i);
            i_hi = max(i_hi, i);
        }
    }
    float o[MT][D / 8][4];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
            o[mi][dt][0] = o[mi][dt][1] = o[mi][dt][2] = o[mi][dt][3] = 0.0f;
    float m_run[MT][2], l_run[MT][2];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
        m_run[mi][0] = m_run[mi][1] = -INFINITY, l_run[mi][0] = l_run[mi][1] = 0.0f;
    const bool plain = p.soft_cap <= 0.0f && p.alibi == nullptr;
    const float qk_log2 = p.qk_scale * PK_LOG2E;

    for (int jt = 0; jt < ntiles; ++jt) {
        const int kv0 = kv_start + jt * BN;
        const int buf = S::FP8 ? 0 : (jt & 1);
        if (jt + 1 < ntiles) {
            if constexpr (S::FP8)
                pk_prefill_load8<D, KT, QT>(p, c, bt, h, kv0 + BN, raw + ((jt + 1) & 1) * 2 * S::RAW_BYTES);
            else
                pk_prefill_load16<D, KT, QT>(p, c, bt, h, kv0 + BN, kbuf + (buf ^ 1) * BN * LDS,
                                             vbuf + (buf ^ 1) * BN * LDS);
        }
        pk_cp_async_commit();
        pk_cp_async_wait<1>();
        __syncthreads();            /* tile jt (and Q) landed for every thread */
        if constexpr (S::FP8) {
            pk_prefill_widen<D, KT, QT>(raw + (jt & 1) * 2 * S::RAW_BYTES, kbuf, vbuf);
            __syncthreads();
        }
        const QT *kb = kbuf + buf * BN * LDS, *vb = vbuf + buf * BN * LDS;

        /* S = Q K^T for this warp's rows: each K fragment serves every m-tile. */
        float sc[MT][BN / 8][4];
#pragma unroll
        for (int mi = 0; mi < MT; ++mi)
#pragma unroll
            for (int nt = 0; nt < BN / 8; ++nt)
                sc[mi][nt][0] = sc[mi][nt][1] = sc[mi][nt][2] = sc[mi][nt][3] = 0.0f;
#pragma unroll
        for (int kc = 0; kc < D / 16; ++kc) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mi = 0; mi < MT; ++mi)
                pk_ldmatrix_x4(a[mi], qs + ((warp * MT + mi) * 16 + (lane & 15)) * LDS + kc * 16 + (lane >> 4) * 8);
#pragma unroll
            for (int np = 0; np < BN / 16; ++np) {
                uint32_t b[4];
                pk_ldmatrix_x4(b, kb + (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * LDS + kc * 16
                                      + ((lane >> 3) & 1) * 8);
#pragma unroll
                for (int mi = 0; mi < MT; ++mi) {
                    pk_mma16816<QT>(sc[mi][2 * np], a[mi], b[0], b[1]);
                    pk_mma16816<QT>(sc[mi][2 * np + 1], a[mi], b[2], b[3]);
                }
            }
        }

        /* Masks and the online softmax. A tile whose every key all of this thread's rows see,
         * with no cap and no ALiBi (most tiles of a long prefill), needs only the scale. */
        const bool visible = plain && kv0 + BN - 1 <= i_lo && (p.window <= 0 || kv0 > i_hi - p.window);
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
            float alpha[2];
            pk_prefill_softmax(p, c, h, (warp * MT + mi) * 16 + (lane >> 2), kv0 + (lane & 3) * 2, visible, qk_log2,
                               sc[mi], m_run[mi], l_run[mi], alpha);
#pragma unroll
            for (int dt = 0; dt < D / 8; ++dt) {
                o[mi][dt][0] *= alpha[0];
                o[mi][dt][1] *= alpha[0];
                o[mi][dt][2] *= alpha[1];
                o[mi][dt][3] *= alpha[1];
            }
        }

        /* O += P V: the S accumulators of key chunk kc2 are the A fragment of P; each V
         * fragment serves every m-tile. */
#pragma unroll
        for (int kc2 = 0; kc2 < BN / 16; ++kc2) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mi = 0; mi < MT; ++mi) {
                a[mi][0] = pk_pack2<QT>(sc[mi][2 * kc2][0], sc[mi][2 * kc2][1]);
                a[mi][1] = pk_pack2<QT>(sc[mi][2 * kc2][2], sc[mi][2 * kc2][3]);
                a[mi][2] = pk_pack2<QT>(sc[mi][2 * kc2 + 1][0], sc[mi][2 * kc2 + 1][1]);
                a[mi][3] = pk_pack2<QT>(sc[mi][2 * kc2 + 1][2], sc[mi][2 * kc2 + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < D / 16; ++dp) {
                uint32_t b[4];
                pk_ldmatrix_x4_trans(b, vb + (kc2 * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + dp * 16
                                            + (lane >> 4) * 8);
#pragma unroll
                for (int mi = 0; mi < MT; ++mi) {
                    pk_mma16816<QT>(o[mi][2 * dp], a[mi], b[0], b[1]);
                    pk_mma16816<QT>(o[mi][2 * dp + 1], a[mi], b[2], b[3]);
                }
            }
        }
        __syncthreads();            /* every warp is done with this tile's buffers */
    }

    /* Normalize and store this thread's rows. */
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
        pk_prefill_store_rows<D, QT>(p, c, h, (warp * MT + mi) * 16 + (lane >> 2), lane, o[mi], l_run[mi]);
}

/* ===================================================================================== */
/*
 * fp32 kernel (f32 queries; f32 cache, or fp8 widened to f32): the simple path. 128
 * threads, BM = 16 rows, 8 lanes per row; BN = 32 keys per tile, loaded (converted to
 * float) into shared memory with plain loads. Lane j of a row scores keys j, j+8, j+16,
 * j+24 and owns the output chunks j, j+8, ... (4 floats each); K/V rows are padded by 16
 * bytes so the 8 lanes of a row hit distinct banks. The launch bound's 4 CTAs per SM gives
 * ptxas a 128-register budget (left to itself it spilled at 72).
 */
template <int D, typename KT> struct pk_prefill_simt_shape {
    static constexpr int BM = 16;
    static constexpr int BN = 32;
    static constexpr int NT = 128;
    static constexpr int LDK = D + 4;                    /* padded row, in floats */
    static constexpr int NCH = D / 4;                    /* float4 chunks per row */
    static constexpr int NCI = (NCH + 7) / 8;            /* output chunks per lane */
    static constexpr int Q_BYTES = BM * D * 4;
    static constexpr int KV_BYTES = BN * LDK * 4;
    static constexpr int P_BYTES = BM * BN * 4;
    static constexpr int SMEM = Q_BYTES + 2 * KV_BYTES + P_BYTES;
};

/* Returns 4 consecutive cache elements at p (16-byte aligned for f32, 4-byte for fp8) as floats. */
template <typename KT> __device__ __forceinline__ float4 pk_load4_f32(const char *p);

template <> __device__ __forceinline__ float4 pk_load4_f32<float>(const char *p)
{
    return __ldg((const float4 *) p);
}

template <> __device__ __forceinline__ float4 pk_load4_f32<pk_e4m3>(const char *p)
{
    const uint32_t w = __ldg((const unsigned int *) p);
    const float2 lo = pk_f16x2_to_f32x2(pk_e4m3x2_to_f16x2(w));
    const float2 hi = pk_f16x2_to_f32x2(pk_e4m3x2_to_f16x2(w >> 16));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
}

/* The fp32 prefill kernel (see pk_prefill_simt_shape). Grid (row tile, KV head, sequence). */
template <int D, typename KT>
static __global__ void __launch_bounds__(128, 4) pk_prefill_simt_kernel(const pk_prefill_params p)
{
    using S = pk_prefill_simt_shape<D, KT>;
    constexpr int BN = S::BN, LDK = S::LDK, NCH = S::NCH;
    extern __shared__ __align__(16) unsigned char smem[];
    float *qs = (float *) smem;                          /* [BM][D], scaled */
    float *ks = (float *) (smem + S::Q_BYTES);           /* [BN][LDK] */
    float *vs = ks + BN * LDK;
    float *ps = vs + BN * LDK;                           /* [BM][BN] */

    const int h = blockIdx.y, seq = blockIdx.z;
    pk_prefill_cta c;
    if (!pk_prefill_setup(p, S::BM, p.num_mtiles - 1 - (int) blockIdx.x, seq, &c))
        return;
    const int tid = threadIdx.x, row = tid >> 3, j = tid & 7;
    const int32_t *bt = p.block_tables + (size_t) seq * p.bt_stride;

    for (int idx = tid; idx < S::BM * D; idx += S::NT) {
        const int m = idx / D, d = idx - m * D;
        const int mg = c.m0 + m;
        float x = 0.0f;
        if (mg < c.rows)
            x = ((const float *) p.q)[pk_prefill_qo_row(p, c, h, mg) * D + d] * p.qk_scale;
        qs[idx] = x;
    }

    const pk_prefill_row rw = pk_prefill_row_of(p, c, h, row);
    const int kv_start = c.kv_lo / BN * BN;
    const int ntiles = (c.kv_hi - kv_start + BN - 1) / BN;
    float o[S::NCI][4];
#pragma unroll
    for (int ii = 0; ii < S::NCI; ++ii)
        o[ii][0] = o[ii][1] = o[ii][2] = o[ii][3] = 0.0f;
    float m_run = -INFINITY, l_run = 0.0f;

    for (int jt = 0; jt < ntiles; ++jt) {
        const int kv0 = kv_start + jt * BN;
        __syncthreads();            /* the previous tile is consumed (and Q is visible) */
        for (int idx = tid; idx < BN * NCH; idx += S::NT) {
            const int n = idx / NCH, ch = idx - n * NCH;
            const int pos = kv0 + n;
            float4 kx = make_float4(0.0f, 0.0f, 0.0f, 0.0f), vx = kx;
            if (pos >= c.kv_lo && pos < c.kv_hi) {
                const size_t off = pk_prefill_row_offset(p, bt, h, pos, D * (int) sizeof(KT))
                                   + (size_t) ch * 4 * sizeof(KT);
                kx = pk_load4_f32<KT>(p.k + off);
                vx = pk_load4_f32<KT>(p.v + off);
            }
            *(float4 *) (ks + n * LDK + ch * 4) = kx;
            *(float4 *) (vs + n * LDK + ch * 4) = vx;
        }
        __syncthreads();

        float sc[4], mx = -INFINITY;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int n = j + 8 * k;
            float dot = 0.0f;
#pragma unroll 8
            for (int ch = 0; ch < NCH; ++ch) {
                const float4 qv = *(const float4 *) (qs + row * D + ch * 4);
                const float4 kv = *(const float4 *) (ks + n * LDK + ch * 4);
                dot = fmaf(qv.x, kv.x, dot);
                dot = fmaf(qv.y, kv.y, dot);
                dot = fmaf(qv.z, kv.z, dot);
                dot = fmaf(qv.w, kv.w, dot);
            }
            sc[k] = pk_prefill_logit(p, c, rw, kv0 + n, dot);
            mx = fmaxf(mx, sc[k]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        const float m_new = fmaxf(m_run, mx);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        const float alpha = exp2f(m_run - m_use);
        m_run = m_new;
        l_run *= alpha;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const float pr = exp2f(sc[k] - m_use);
            l_run += pr;
            ps[row * BN + j + 8 * k] = pr;
        }
        __syncwarp();               /* a row's 8 lanes share a warp */
#pragma unroll
        for (int ii = 0; ii < S::NCI; ++ii) {
            o[ii][0] *= alpha;
            o[ii][1] *= alpha;
            o[ii][2] *= alpha;
            o[ii][3] *= alpha;
        }
        for (int n = 0; n < BN; ++n) {
            const float w = ps[row * BN + n];
#pragma unroll
            for (int ii = 0; ii < S::NCI; ++ii) {
                const int ch = j + 8 * ii;
                if (ch < NCH) {
                    const float4 vv = *(const float4 *) (vs + n * LDK + ch * 4);
                    o[ii][0] = fmaf(w, vv.x, o[ii][0]);
                    o[ii][1] = fmaf(w, vv.y, o[ii][1]);
                    o[ii][2] = fmaf(w, vv.z, o[ii][2]);
                    o[ii][3] = fmaf(w, vv.w, o[ii][3]);
                }
            }
        }
    }

    l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
    l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);
    l_run += __shfl_xor_sync(0xffffffffu, l_run, 4);
    if (!rw.valid)
        return;
    const float scale = p.v_scale / l_run;
    float *dst = (float *) p.out + ((size_t) (c.qo_start + rw.r) * p.num_q_heads + rw.hq) * D;
#pragma unroll
    for (int ii = 0; ii < S::NCI; ++ii) {
        const int ch = j + 8 * ii;
        if (ch < NCH) {
#pragma unroll
            for (int e = 0; e < 4; ++e)
                dst[ch * 4 + e] = o[ii][e] * scale;
        }
    }
}

/* ===================================================================================== */

#include "kernels/prefill_wgmma.cuh"

/* Per-device caches of whether a prefill kernel's shared-memory limit was raised, one per instance and kernel. */
template <int D, typename KT, typename QT> struct pk_prefill_prepared {
    static std::atomic<int> cache[PK_MAX_DEVICES];
    static std::atomic<int> wg_cache[PK_MAX_DEVICES];   /* the wgmma kernel's */
};
template <int D, typename KT, typename QT> std::atomic<int> pk_prefill_prepared<D, KT, QT>::cache[PK_MAX_DEVICES];
template <int D, typename KT, typename QT> std::atomic<int> pk_prefill_prepared<D, KT, QT>::wg_cache[PK_MAX_DEVICES];

/*
 * Launches a prefill kernel over a grid of (row tiles of bm rows, KV heads, sequences): fills
 * p->num_mtiles for rows rows, prepares kernel (threads per CTA, smem bytes of dynamic shared
 * memory, cache: its per-device preparation) and calls go(grid), which launches it. Returns 0
 * or a negative paged_error.
 */
template <typename K, typename Go>
static int pk_prefill_launch(K kernel, int threads, int smem, int bm, long long rows, const pk_prefill_args *a,
                             int dev, std::atomic<int> *cache, pk_prefill_params *p, Go go)
{
    const long long mt = pk_ceil_div(rows, (long long) bm);
    if (mt == 0)
        return 0;
    if (mt > INT32_MAX)
        return PAGED_E_GEOMETRY;
    p->num_mtiles = (int) mt;
    int rc = pk_kernel_prepare(kernel, threads, smem, dev, cache);
    if (rc < 0)
        return rc;
    go(dim3((unsigned) mt, (unsigned) a->cache.num_kv_heads, (unsigned) a->num_seqs));
    return pk_launch_status();
}

/*
 * Fills the kernel arguments and launches the fp32 kernel (f32 queries), the wgmma one (16-bit
 * caches of the query type at D 64 and 128, no soft cap, no ALiBi, a positive scale, blocks of
 * 8 tokens or more, pools of fewer than 2^31 rows, on a device with sm_90a code) or the
 * mma.sync one.
 */
template <int D, typename KT, typename QT> int pk_prefill_run(const pk_prefill_args *a, cudaStream_t stream)
{
    pk_prefill_params p;
    const int G = a->num_q_heads / a->cache.num_kv_heads;
    p.k = pk_cache_plane(&a->cache, a->layer, 0);
    p.v = pk_cache_plane(&a->cache, a->layer, 1);
    p.block_tables = a->block_tables;
    p.seq_lens = a->seq_lens;
    p.qo_indptr = a->qo_indptr;
    p.q = a->q;
    p.out = a->out;
    p.alibi = a->opts.alibi_slopes;
    p.qk_scale = a->opts.sm_scale * (a->cache.dtype == PAGED_DTYPE_FP8_E4M3 ? a->cache.k_scale : 1.0f);
    p.v_scale = a->cache.dtype == PAGED_DTYPE_FP8_E4M3 ? a->cache.v_scale : 1.0f;
    p.soft_cap = a->opts.soft_cap;
    p.window = a->opts.window;
    p.causal = a->causal != 0;
    p.bt_stride = a->bt_stride;
    p.num_kv_heads = a->cache.num_kv_heads;
    p.num_q_heads = a->num_q_heads;
    p.group = G;
    p.block_shift = pk_block_shift(a->cache.block_size);
    p.q_aligned = pk_aligned(a->q, 16);
    p.out_aligned = pk_aligned(a->out, 4);
    p.out_vec = pk_aligned(a->out, 16);

    int dev = 0;
    PK_CUDA_CHECK(cudaGetDevice(&dev));
    const long long rows = (long long) a->max_qo_len * G;
    if constexpr (std::is_same<QT, float>::value) {
        using S = pk_prefill_simt_shape<D, KT>;
        return pk_prefill_launch(pk_prefill_simt_kernel<D, KT>, S::NT, S::SMEM, S::BM, rows, a, dev,
                                 pk_prefill_prepared<D, KT, QT>::cache, &p, [&](dim3 grid) {
                                     pk_prefill_simt_kernel<D, KT><<<grid, S::NT, S::SMEM, stream>>>(p);
                                 });
    } else {
        if constexpr (pk_prefill_wg_eligible<D, KT, QT>()) {
            CUtensorMap map, qmap{};        /* qmap is read only with Q by TMA (zeroed: no stray bytes) */
            pk_prefill_tma t;
            if (p.soft_cap <= 0.0f && p.alibi == nullptr && p.qk_scale > 0.0f && pk_prefill_wg_usable(dev)
                && pk_prefill_wg_map<D>(a, &map, &t)) {
                using S = pk_prefill_wg_shape<D>;
                t.q_tma = pk_prefill_wg_qmap<D, QT>(a, G, &qmap);
                return pk_prefill_launch(pk_prefill_wg_kernel<D, QT>, S::THREADS, S::SMEM, S::BM, rows, a, dev,
                                         pk_prefill_prepared<D, KT, QT>::wg_cache, &p, [&](dim3 grid) {
                                             pk_prefill_wg_kernel<D, QT>
                                                 <<<grid, S::THREADS, S::SMEM, stream>>>(map, qmap, p, t);
                                         });
            }
        }
        using S = pk_prefill_mma_shape<D, KT, QT>;
        return pk_prefill_launch(pk_prefill_mma_kernel<D, KT, QT>, S::NT, S::SMEM, S::BM, rows, a, dev,
                                 pk_prefill_prepared<D, KT, QT>::cache, &p, [&](dim3 grid) {
                                     pk_prefill_mma_kernel<D, KT, QT><<<grid, S::NT, S::SMEM, stream>>>(p);
                                 });
    }
}

/* Instantiates the prefill of head dim D for every supported (cache, query) dtype pair. */
#define PK_PREFILL_INSTANCES(D)                                                                     \
    template int pk_prefill_run<D, __half, __half>(const pk_prefill_args *, cudaStream_t);           \
    template int pk_prefill_run<D, __nv_bfloat16, __nv_bfloat16>(const pk_prefill_args *, cudaStream_t); \
    template int pk_prefill_run<D, float, float>(const pk_prefill_args *, cudaStream_t);             \
    template int pk_prefill_run<D, pk_e4m3, __half>(const pk_prefill_args *, cudaStream_t);          \
    template int pk_prefill_run<D, pk_e4m3, __nv_bfloat16>(const pk_prefill_args *, cudaStream_t);   \
    template int pk_prefill_run<D, pk_e4m3, float>(const pk_prefill_args *, cudaStream_t);

#endif
