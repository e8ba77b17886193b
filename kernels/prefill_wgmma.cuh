/* prefill_wgmma.cuh: the Hopper (sm_90a) prefill kernel on warpgroup MMA, included by prefill_impl.cuh. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_PREFILL_WGMMA_CUH
#define PAGED_KERNELS_PREFILL_WGMMA_CUH

#include <cudaTypedefs.h>

#include "kernels/tma.cuh"
#include "kernels/wgmma.cuh"

/*
 * 16-bit caches with queries of the same type, head dims 64 and 128, causal or not, with or
 * without a window; no soft cap and no ALiBi (those go to the mma.sync kernel: their extra
 * registers would spill here); blocks of at least 8 tokens. BM = 128 rows of the GQA-packed
 * [qo_len * G] rows per CTA, BN = 128 keys per tile. Three warpgroups, FlashAttention-3's
 * division of labour:
 *
 * - The producer warpgroup gives most of its registers back (setmaxnreg: 24 per thread) and
 *   one of its warps issues the copies. K and V tiles arrive by TMA: the pool is one 2-D
 *   tensor of rows (every layer's K and V planes, a row per token and KV head), a tile is
 *   128 / R boxes of R = min(block size, 128) rows, one per (part of a) block, so the paged
 *   gather costs one block-table lookup per box and one TMA instruction per box and 64-column
 *   block. Boxes outside the keys the tile's rows see point past the tensor's end and land as
 *   zeros. K runs one tile ahead of V, two buffers of each, each buffer with a "full"
 *   mbarrier (its copy landed) and an "empty" one (all 8 consumer warps are done with it).
 *   Q arrives by TMA too where the tile's rows are whole tokens (G divides BM): a box of
 *   64 x G x BM / G of q seen as [tokens][query heads][D] is the tile's GQA-packed rows in
 *   order. The producer warp starts Q's and K_0's copies before the CTA's first barrier;
 *   otherwise the consumers copied Q with cp.async after it, some 3 thousand cycles of a CTA
 *   of 34 on a short causal prefill, every CTA of the grid paying them on its SM.
 * - The two consumer warpgroups (240 registers per thread) hold 64 rows each. Per tile each
 *   issues D / 16 m64n128k16 wgmma for S = Q K^T and, behind them, the BN / 16 m64nDk16
 *   wgmma of the previous tile's O += P V (P from registers: the S accumulators after the
 *   softmax, re-packed as A fragments), and runs the masks and the online softmax of S while
 *   P V still runs. They wait only for data, never for each other, so one's softmax overlaps
 *   the other's matrix products.
 *
 * Q, K and V live in shared memory in 128-byte swizzled column blocks of 64 elements (Q and K
 * K-major; V read MN-major, transposed by the hardware). Rows of a partly used last block past
 * the context (never written, so anything) are zeroed in V before use; in K their scores are
 * masked by selection. One CTA per SM (160 KB of shared memory at D 128). The output goes
 * out through the Q tile's shared memory in 16-byte chunks (pk_prefill_wg_store).
 */
template <int D> struct pk_prefill_wg_shape {
    static constexpr int NT = 256;          /* two consumer warpgroups */
    static constexpr int THREADS = NT + 128;/* and the producer warpgroup */
    static constexpr int BM = 128;
    static constexpr int BN = 128;
    static constexpr int CPR = D / 8;       /* 16-byte chunks per row */
    static constexpr int Q_BYTES = BM * D * 2;
    static constexpr int KV_BYTES = BN * D * 2;
    static constexpr int SMEM = 1024 + Q_BYTES + 4 * KV_BYTES + 128; /* + alignment slack, 9 mbarriers */
    static constexpr int PRODUCER_REGS = 24, CONSUMER_REGS = 240;    /* 128 x 24 + 256 x 240 <= 64 K */
    static_assert(D == 64 || D == 128, "wgmma prefill: head dims 64 and 128");
};

/* Where a CTA's TMA boxes come from: see pk_prefill_wg_shape. */
struct pk_prefill_tma {
    int k_row0, v_row0;             /* the layer's K and V planes' first rows in the tensor */
    int oob_row;                    /* a row past the tensor's end: boxes there read as zeros */
    int box_rows;                   /* R */
    int q_tma;                      /* Q arrives by TMA (the kernel's qmap); else by cp.async */
};

/* Returns whether the wgmma prefill kernel handles head dim D with cache type KT and query type QT. */
template <int D, typename KT, typename QT> constexpr bool pk_prefill_wg_eligible(void)
{
    return (D == 64 || D == 128) && std::is_same<KT, QT>::value
           && (std::is_same<QT, __half>::value || std::is_same<QT, __nv_bfloat16>::value);
}

/*
 * Returns the byte offset of 16-byte chunk ch of row r in a tile of rows rows of 16-bit
 * elements stored as column blocks of 64 elements, each [rows][128 bytes] with the 128-byte
 * swizzle (chunk ch % 8 of row r at ch % 8 ^ r % 8), the layout pk_wgmma_desc describes.
 */
__device__ __forceinline__ int pk_sw128_offset(int rows, int r, int ch)
{
    return (ch >> 3) * rows * 128 + r * 128 + (((ch & 7) ^ (r & 7)) << 4);
}

#if PK_HAVE_WGMMA

/*
 * Starts the TMA copies of the tile at keys [kv0, kv0 + BN) of the plane whose first row is
 * row0 into dst, counted on bar: lane b < BN / R of the calling warp copies box b (R keys),
 * each of its D / 64 column blocks, from its block's rows, or from past the tensor's end if no
 * key of the box is in [c.kv_lo, c.kv_hi). The block-table lookup is done once per tile and
 * box: *row (this lane's) keeps the box's row within the plane for the V copy of the same
 * tile, which passes lookup false and reuses it. Lane 0 first tells bar the bytes to expect.
 */
template <int D>
__device__ __forceinline__ void pk_prefill_wg_tma(const pk_prefill_params &p, const pk_prefill_cta &c,
                                                  const pk_prefill_tma &t, const CUtensorMap *map, const int32_t *bt,
                                                  int h, int kv0, int row0, bool lookup, int *row, unsigned char *dst,
                                                  uint64_t *bar)
{
    using S = pk_prefill_wg_shape<D>;
    const int lane = (int) threadIdx.x & 31;
    if (lane == 0)
        pk_mbar_expect(bar, S::KV_BYTES);
    __syncwarp();
    if (lane >= S::BN / t.box_rows)
        return;
    const int first = kv0 + lane * t.box_rows;
    if (lookup) {
        if (first < c.kv_hi && first + t.box_rows > c.kv_lo)
            *row = (int) pk_paged_row(__ldg(bt + (first >> p.block_shift)), h, first, p.num_kv_heads, p.block_shift);
        else
            *row = -1;
    }
    const int r = *row < 0 ? t.oob_row : row0 + *row;
#pragma unroll
    for (int cb = 0; cb < D / 64; ++cb)
        pk_tma_load_2d(dst + cb * S::BN * 128 + lane * t.box_rows * 128, map, cb * 64, r, bar);
}

/* Zeroes rows [from, BN) of the V tile vb (keys past the context: the slots of a block never written). */
template <int D> __device__ __forceinline__ void pk_prefill_wg_zero_tail(unsigned char *vb, int from)
{
    using S = pk_prefill_wg_shape<D>;
    for (int idx = (int) threadIdx.x + from * S::CPR; idx < S::BN * S::CPR; idx += S::NT) {
        const int n = idx / S::CPR, ch = idx % S::CPR;
        *(uint4 *) (vb + pk_sw128_offset(S::BN, n, ch)) = make_uint4(0, 0, 0, 0);
    }
}

/* Starts the copies of CTA c's Q tile into qs (the swizzled layout; rows past the sequence are zeros). */
template <int D, typename QT>
__device__ __forceinline__ void pk_prefill_wg_load_q(const pk_prefill_params &p, const pk_prefill_cta &c, int h,
                                                     unsigned char *qs)
{
    using S = pk_prefill_wg_shape<D>;
#pragma unroll
    for (int it = 0; it < S::BM * S::CPR / S::NT; ++it) {
        const int idx = (int) threadIdx.x + it * S::NT;
        const int m = idx / S::CPR, ch = idx % S::CPR;
        pk_prefill_load_q_chunk<D, QT>(p, c, h, m, ch, (QT *) (qs + pk_sw128_offset(S::BM, m, ch)));
    }
}

/*
 * The masks and the online-softmax step of one tile for this thread's two rows (positions i0
 * and i1) in the wgmma accumulator layout (sc[nt][e]: row e / 2, key j0 + 8 nt + e % 2),
 * with no cap and no ALiBi: masked keys become -inf, the maxima are taken on the raw dot
 * products (the scale is positive) and each probability is one fma and one ex2. Updates
 * m_run and l_run (this thread's share of the sum) and returns the rows' rescale factors in
 * alpha. visible: no key of the tile is masked for either row.
 */
template <int NT8>
__device__ __forceinline__ void pk_prefill_wg_softmax(const pk_prefill_params &p, int i0, int i1, int j0, bool visible,
                                                      float qk_log2, float (&sc)[NT8][4], float (&m_run)[2],
                                                      float (&l_run)[2], float (&alpha)[2])
{
    if (!visible) {
#pragma unroll
        for (int nt = 0; nt < NT8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (pk_prefill_masked(p, e < 2 ? i0 : i1, j0 + nt * 8 + (e & 1)))
                    sc[nt][e] = -INFINITY;
    }
    float mx[2] = { -INFINITY, -INFINITY };
#pragma unroll
    for (int nt = 0; nt < NT8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
            mx[e >> 1] = fmaxf(mx[e >> 1], sc[nt][e]);
    float m_use[2];
    pk_prefill_rows_update(mx, qk_log2, m_run, l_run, alpha, m_use);
    const float neg_m[2] = { -m_use[0], -m_use[1] };
#pragma unroll
    for (int nt = 0; nt < NT8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            sc[nt][e] = pk_exp2(fmaf(sc[nt][e], qk_log2, neg_m[e >> 1]));
            l_run[e >> 1] += sc[nt][e];
        }
    }
}

/* Issues S = Q K^T for this warpgroup's 64 rows qw against the K tile kb: D / 16 wgmma, 4 per 64-column block. */
template <int D, typename QT>
__device__ __forceinline__ void pk_prefill_wg_qk(float (&sf)[pk_prefill_wg_shape<D>::BN / 2], const unsigned char *qw,
                                                 const unsigned char *kb)
{
    using S = pk_prefill_wg_shape<D>;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        const uint64_t da = pk_wgmma_desc(qw + (kk >> 2) * S::BM * 128 + (kk & 3) * 32, 16, 1024);
        const uint64_t db = pk_wgmma_desc(kb + (kk >> 2) * S::BN * 128 + (kk & 3) * 32, 16, 1024);
        if (kk == 0)
            pk_wgmma_ss0<QT, S::BN>(sf, da, db);
        else
            pk_wgmma_ss<QT, S::BN>(sf, da, db);
    }
}

/* Issues O += P V for the P fragments a against the V tile vb: BN / 16 wgmma. */
template <int D, typename QT>
__device__ __forceinline__ void pk_prefill_wg_pv(float (&of)[D / 2],
                                                 const uint32_t (&a)[pk_prefill_wg_shape<D>::BN / 16][4],
                                                 const unsigned char *vb)
{
    using S = pk_prefill_wg_shape<D>;
#pragma unroll
    for (int kc = 0; kc < S::BN / 16; ++kc)
        pk_wgmma_rs<QT, D>(of, a[kc], pk_wgmma_desc(vb + kc * 16 * 128, S::BN * 128, 1024));
}

/* Re-packs the probabilities s of keys 16 kc..16 kc + 15 as P's A fragment a[kc], for every kc. */
template <typename QT, int NT8>
__device__ __forceinline__ void pk_prefill_wg_pack(uint32_t (&a)[NT8 / 2][4], const float (&s)[NT8][4])
{
#pragma unroll
    for (int kc = 0; kc < NT8 / 2; ++kc) {
        a[kc][0] = pk_pack2<QT>(s[2 * kc][0], s[2 * kc][1]);
        a[kc][1] = pk_pack2<QT>(s[2 * kc][2], s[2 * kc][3]);
        a[kc][2] = pk_pack2<QT>(s[2 * kc + 1][0], s[2 * kc + 1][1]);
        a[kc][3] = pk_pack2<QT>(s[2 * kc + 1][2], s[2 * kc + 1][3]);
    }
}

/*
 * The producer warp's loop, once K_0 is on its way (row_cur: this lane's box row of it): for
 * each tile jt copies K_(jt+1) and V_jt, each once the consumers have released the buffer's
 * previous tile (that of tile - 2: the (tile / 2)-th phase of the buffer's empty barrier,
 * parity (tile / 2 - 1) % 2). row_cur and row_next are this lane's box rows of tiles jt and
 * jt + 1: the V copy of a tile reuses its K copy's block-table lookup.
 */
template <int D>
__device__ __forceinline__ void pk_prefill_wg_produce(const pk_prefill_params &p, const pk_prefill_cta &c,
                                                      const pk_prefill_tma &t, const CUtensorMap *map,
                                                      const int32_t *bt, int h, int kv_start, int ntiles,
                                                      int row_cur, unsigned char *kbuf, unsigned char *vbuf,
                                                      uint64_t *bars)
{
    using S = pk_prefill_wg_shape<D>;
    uint64_t *full_k = bars, *full_v = bars + 2, *empty_k = bars + 4, *empty_v = bars + 6;
    int row_next = -1;
    for (int jt = 0; jt < ntiles; ++jt) {
        const int kv0 = kv_start + jt * S::BN;
        if (jt + 1 < ntiles) {
            const int b = (jt + 1) & 1;
            if (jt + 1 >= 2)
                pk_mbar_wait(empty_k + b, (((jt + 1) >> 1) & 1) ^ 1);
            pk_prefill_wg_tma<D>(p, c, t, map, bt, h, kv0 + S::BN, t.k_row0, true, &row_next, kbuf + b * S::KV_BYTES,
                                 full_k + b);
        }
        if (jt >= 2)
            pk_mbar_wait(empty_v + (jt & 1), ((jt >> 1) & 1) ^ 1);
        pk_prefill_wg_tma<D>(p, c, t, map, bt, h, kv0, t.v_row0, false, &row_cur, vbuf + (jt & 1) * S::KV_BYTES,
                             full_v + (jt & 1));
        row_cur = row_next;
    }
}

/*
 * Normalizes this warpgroup's 64 output rows (wg's, tile-local 64 wg..) and stores them
 * through shared memory, for an out that is 16-byte aligned (p.out_vec). Each thread writes
 * its pairs of rows m0 and m0 + 8 into the same rows of the Q tile qs (this warpgroup's own
 * rows, free once its last Q K^T is done; the swizzle puts a warp's 8 rows in distinct banks),
 * then the warpgroup copies the rows out in 16-byte chunks, consecutive threads on consecutive
 * chunks. A token's G query heads are contiguous rows of out, so each warp store covers whole
 * 32-byte sectors instead of 8 pieces of 16 bytes in 8 rows, and it takes 8 stores a thread
 * instead of 64 (pk_prefill_store_rows, used where out is not 16-byte aligned).
 */
template <int D, typename QT>
__device__ __forceinline__ void pk_prefill_wg_store(const pk_prefill_params &p, const pk_prefill_cta &c, int h, int wg,
                                                    int m0, int lane, const float (&o)[D / 8][4],
                                                    const float (&l_run)[2], unsigned char *qs)
{
    using S = pk_prefill_wg_shape<D>;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float scale = p.v_scale / pk_prefill_quad_sum(l_run[r]);  /* rows past the sequence: stored nowhere */
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
            *(uint32_t *) (qs + pk_sw128_offset(S::BM, m0 + r * 8, dt) + (lane & 3) * 4) =
                pk_pack2<QT>(o[dt][2 * r] * scale, o[dt][2 * r + 1] * scale);
    }
    pk_named_barrier(2 + wg, 128);  /* the warpgroup's rows are in shared memory */
#pragma unroll
    for (int it = 0; it < 64 * S::CPR / 128; ++it) {
        const int idx = ((int) threadIdx.x & 127) + it * 128;
        const int m = wg * 64 + idx / S::CPR, ch = idx % S::CPR, mg = c.m0 + m;
        if (mg < c.rows)
            *(uint4 *) ((QT *) p.out + pk_prefill_qo_row(p, c, h, mg) * D + ch * 8) =
                *(const uint4 *) (qs + pk_sw128_offset(S::BM, m, ch));
    }
}

/* Tells bar that this consumer warp is done with its buffer (lane 0 arrives for the warp). */
__device__ __forceinline__ void pk_prefill_wg_release(uint64_t *bar)
{
    __syncwarp();
    if ((threadIdx.x & 31) == 0)
        pk_mbar_arrive(bar);
}

#endif /* PK_HAVE_WGMMA */

/* The wgmma prefill kernel (see pk_prefill_wg_shape). Grid (row tile, KV head, sequence). */
template <int D, typename QT>
static __global__ void __launch_bounds__(pk_prefill_wg_shape<D>::THREADS, 1)
    pk_prefill_wg_kernel(const __grid_constant__ CUtensorMap map, const __grid_constant__ CUtensorMap qmap,
                         const pk_prefill_params p, const pk_prefill_tma t)
{
#if PK_HAVE_WGMMA
    using S = pk_prefill_wg_shape<D>;
    constexpr int BN = S::BN;
    extern __shared__ unsigned char smem_raw[];
    /* wgmma's swizzle atoms start on 1024-byte boundaries (pointer arithmetic on the shared
     * array keeps the compiler's knowledge that these are shared addresses) */
    unsigned char *qs = smem_raw + ((1024 - (pk_smem_addr(smem_raw) & 1023)) & 1023);
    unsigned char *kbuf = qs + S::Q_BYTES;              /* [2][KV_BYTES] */
    unsigned char *vbuf = kbuf + 2 * S::KV_BYTES;
    uint64_t *bars = (uint64_t *) (vbuf + 2 * S::KV_BYTES);
    uint64_t *full_k = bars, *full_v = bars + 2, *empty_k = bars + 4, *empty_v = bars + 6;  /* [2] each */
    uint64_t *full_q = bars + 8;

    const int h = blockIdx.y, seq = blockIdx.z;
    pk_prefill_cta c;
    if (!pk_prefill_setup(p, S::BM, p.num_mtiles - 1 - (int) blockIdx.x, seq, &c))
        return;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = tid >> 7;
    const int32_t *bt = p.block_tables + (size_t) seq * p.bt_stride;
    const int kv_start = c.kv_lo / BN * BN;
    const int ntiles = (c.kv_hi - kv_start + BN - 1) / BN;
    if (ntiles == 0)
        return;                     /* no key to see (an empty context): nothing defined to store */

    /*
     * The producer warp sets the barriers up and starts the copies of Q (by TMA where it can)
     * and K_0 before the CTA first meets, so that their round trips run under the barrier and
     * the register hand-over: a CTA's start is on the critical path of every CTA of the grid.
     */
    int row_cur = -1;               /* the producer lanes' box rows of K_0 */
    if (warp == S::NT / 32) {
        if (lane == 0) {
            for (int i = 0; i < 9; ++i)                 /* full: the producer's expect; */
                pk_mbar_init(bars + i, i >= 4 && i < 8 ? S::NT / 32 : 1);  /* empty: every consumer warp */
            pk_mbar_init_fence();
            if (t.q_tma) {
                pk_mbar_expect(full_q, S::Q_BYTES);
#pragma unroll
                for (int cb = 0; cb < D / 64; ++cb)     /* the tile's rows are whole tokens: r, then g */
                    pk_tma_load_3d(qs + cb * S::BM * 128, &qmap, cb * 64, h * p.group,
                                   c.qo_start + c.m0 / p.group, full_q);
            }
        }
        __syncwarp();
        pk_prefill_wg_tma<D>(p, c, t, &map, bt, h, kv_start, t.k_row0, true, &row_cur, kbuf, full_k);
    }
    __syncthreads();                /* the barriers are initialized; from here on the consumers
                                     * meet only at named barriers */
    if (wg == S::NT / 128) {
        pk_setmaxnreg_dec<S::PRODUCER_REGS>();
        if (warp == S::NT / 32)
            pk_prefill_wg_produce<D>(p, c, t, &map, bt, h, kv_start, ntiles, row_cur, kbuf, vbuf, bars);
        return;
    }
    pk_setmaxnreg_inc<S::CONSUMER_REGS>();
    if (!t.q_tma) {
        pk_prefill_wg_load_q<D, QT>(p, c, h, qs);
        pk_cp_async_commit();
    }

    /* This thread's rows: m0 and m0 + 8 of the tile (warp w holds rows 16 w..). */
    const int m0 = warp * 16 + (lane >> 2);
    const int i0 = pk_prefill_row_of(p, c, h, m0).i, i1 = pk_prefill_row_of(p, c, h, m0 + 8).i;
    const int i_lo = min(i0, i1), i_hi = max(i0, i1);
    float s[BN / 8][4], o[D / 8][4];
    float (&sf)[BN / 2] = *reinterpret_cast<float (*)[BN / 2]>(&s[0][0]);
    float (&of)[D / 2] = *reinterpret_cast<float (*)[D / 2]>(&o[0][0]);
    uint32_t a[BN / 16][4];                             /* P of the previous tile, as A fragments */
    uint32_t (&af)[BN / 4] = *reinterpret_cast<uint32_t (*)[BN / 4]>(&a[0][0]);
#pragma unroll
    for (int i = 0; i < D / 2; ++i)
        of[i] = 0.0f;
    float m_run[2] = { -INFINITY, -INFINITY }, l_run[2] = { 0.0f, 0.0f }, alpha[2];
    const float qk_log2 = p.qk_scale * PK_LOG2E;
    const unsigned char *qw = qs + wg * 64 * 128;       /* this warpgroup's 64 rows */

    /*
     * Tile jt computes S = Q K_jt while the tensor cores still hold O += P_(jt-1) V_(jt-1)
     * behind it, and runs the softmax of S while that product finishes: the exponentials
     * overlap the matrix products. The first tile has no P V before it and the last P V no
     * tile after it; the loop body stays straight-line so that ptxas can see which wgmma each
     * wait covers. A buffer is released as soon as the wgmma reading it are done.
     */
    if (t.q_tma) {
        pk_mbar_wait(full_q, 0);
    } else {
        pk_cp_async_wait<0>();
        pk_fence_proxy_async();     /* Q, this thread's share, to wgmma's proxy */
        pk_named_barrier(1, S::NT); /* every consumer's share of Q */
    }
    pk_mbar_wait(full_k, 0);
    pk_wgmma_fence();
    pk_prefill_wg_qk<D, QT>(sf, qw, kbuf);
    pk_wgmma_commit();
    pk_wgmma_wait<0>();
    pk_wgmma_pin(sf);
    pk_prefill_wg_release(empty_k);
    pk_prefill_wg_softmax(p, i0, i1, kv_start + (lane & 3) * 2,
                          kv_start + BN - 1 <= i_lo && (p.window <= 0 || kv_start > i_hi - p.window), qk_log2, s,
                          m_run, l_run, alpha);
    pk_prefill_wg_pack<QT>(a, s);

    for (int jt = 1; jt < ntiles; ++jt) {
        const int kv0 = kv_start + jt * BN;
        pk_mbar_wait(full_k + (jt & 1), (jt >> 1) & 1);
        pk_mbar_wait(full_v + ((jt - 1) & 1), ((jt - 1) >> 1) & 1);
        pk_wgmma_pin(of);
        pk_wgmma_pin(af);
        pk_wgmma_fence();
        pk_prefill_wg_qk<D, QT>(sf, qw, kbuf + (jt & 1) * S::KV_BYTES);
        pk_wgmma_commit();
        pk_prefill_wg_pv<D, QT>(of, a, vbuf + ((jt - 1) & 1) * S::KV_BYTES);
        pk_wgmma_commit();
        pk_wgmma_wait<1>();         /* S is done; P V may still run */
        pk_wgmma_pin(sf);
        pk_prefill_wg_release(empty_k + (jt & 1));
        pk_prefill_wg_softmax(p, i0, i1, kv0 + (lane & 3) * 2,
                              kv0 + BN - 1 <= i_lo && (p.window <= 0 || kv0 > i_hi - p.window), qk_log2, s, m_run,
                              l_run, alpha);
        pk_wgmma_wait<0>();         /* P V is done: O may be rescaled and P's registers reused */
        pk_wgmma_pin(of);
        pk_wgmma_pin(af);
        pk_prefill_wg_release(empty_v + ((jt - 1) & 1));
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
            o[dt][0] *= alpha[0];
            o[dt][1] *= alpha[0];
            o[dt][2] *= alpha[1];
            o[dt][3] *= alpha[1];
        }
        pk_prefill_wg_pack<QT>(a, s);
    }
    /* The last tile's V; keys past the context there are unwritten slots of the last block. */
    const int last = ntiles - 1, kv_last = kv_start + last * BN;
    unsigned char *vb = vbuf + (last & 1) * S::KV_BYTES;
    pk_mbar_wait(full_v + (last & 1), (last >> 1) & 1);
    if (kv_last + BN > c.seq_len) {
        pk_prefill_wg_zero_tail<D>(vb, max(c.seq_len - kv_last, 0));
        pk_fence_proxy_async();
        pk_named_barrier(1, S::NT);
    }
    pk_wgmma_pin(of);
    pk_wgmma_pin(af);
    pk_wgmma_fence();
    pk_prefill_wg_pv<D, QT>(of, a, vb);
    pk_wgmma_commit();
    pk_wgmma_wait<0>();
    pk_wgmma_pin(of);

    if (p.out_vec)
        pk_prefill_wg_store<D, QT>(p, c, h, wg, m0, lane, o, l_run, qs);
    else
        pk_prefill_store_rows<D, QT>(p, c, h, m0, lane, o, l_run);
#else
    (void) map;
    (void) p;
    (void) t;                       /* not built for this architecture: never launched (pk_prefill_wg_usable) */
#endif
}

/* Returns the driver's cuTensorMapEncodeTiled, looked up once through the runtime, or NULL. */
static inline PFN_cuTensorMapEncodeTiled_v12000 pk_tensor_map_encoder(void)
{
    static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void *f = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
        const cudaError_t e =
            cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q);
#else
        const cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &q);
#endif
        return e == cudaSuccess && q == cudaDriverEntryPointSuccess ? (PFN_cuTensorMapEncodeTiled_v12000) f : nullptr;
    }();
    return fn;
}

/*
 * Fills *map with the tiled description of the rank-dimensional 16-bit tensor at base (bf16
 * or f16), as the wgmma kernel reads every tensor: boxes of box elements, every element of a
 * box taken, the 128-byte swizzle, reads past the end as zeros. dims and box run innermost
 * first; strides are the rank - 1 outer ones in bytes. Returns false where there is no
 * encoder or it refuses.
 */
static inline bool pk_prefill_wg_encode(CUtensorMap *map, bool bf16, cuuint32_t rank, const void *base,
                                        const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box)
{
    PFN_cuTensorMapEncodeTiled_v12000 encode = pk_tensor_map_encoder();
    const cuuint32_t steps[3] = { 1, 1, 1 };
    return encode != nullptr && rank <= 3
           && encode(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, rank,
                     const_cast<void *>(base), dims, strides, box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
                     CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
                  == CUDA_SUCCESS;
}

/*
 * Describes a's cache to TMA for the wgmma kernel: fills *map (the whole pool as one 2-D
 * tensor of head_dim-element rows, boxes of 64 x R with the 128-byte swizzle) and *t.
 * Returns false if the kernel cannot take this cache (blocks under 8 tokens, more rows than
 * 32-bit coordinates reach, or no encoder), so the caller falls back to the mma.sync kernel.
 */
template <int D>
static bool pk_prefill_wg_map(const pk_prefill_args *a, CUtensorMap *map, pk_prefill_tma *t)
{
    const pk_cache &c = a->cache;
    const long long plane_rows = (long long) c.num_blocks * c.num_kv_heads * c.block_size;
    const long long rows = 2LL * c.num_layers * plane_rows;
    if (c.block_size < 8 || rows > INT32_MAX - 256)
        return false;
    const cuuint64_t dims[2] = { (cuuint64_t) D, (cuuint64_t) rows };
    const cuuint64_t strides[1] = { (cuuint64_t) D * 2 };
    const cuuint32_t box[2] = { 64, (cuuint32_t) min(c.block_size, 128) };
    if (!pk_prefill_wg_encode(map, c.dtype == PAGED_DTYPE_BF16, 2, c.base, dims, strides, box))
        return false;
    t->k_row0 = (int) (2LL * a->layer * plane_rows);
    t->v_row0 = (int) ((2LL * a->layer + 1) * plane_rows);
    t->oob_row = (int) rows;
    t->box_rows = (int) box[1];
    return true;
}

/*
 * Describes a's queries to TMA for the wgmma kernel: fills *qmap (q as the 3-D tensor
 * [total_q][num_q_heads][D], boxes of 64 x G x BM / G: a row tile's GQA-packed rows, the
 * 128-byte swizzle) and returns true; or returns false, and the kernel copies Q with
 * cp.async, where a row tile is not whole tokens (G does not divide BM), q is not 16-byte
 * aligned, or the map cannot be made. Rows of the tile past its sequence then read the next
 * sequence's queries, or zeros past total_q: their outputs are never stored.
 */
template <int D, typename QT>
static bool pk_prefill_wg_qmap(const pk_prefill_args *a, int G, CUtensorMap *qmap)
{
    using S = pk_prefill_wg_shape<D>;
    if (G <= 0 || S::BM % G != 0 || a->total_q <= 0 || !pk_aligned(a->q, 16))
        return false;
    const cuuint64_t dims[3] = { (cuuint64_t) D, (cuuint64_t) a->num_q_heads, (cuuint64_t) a->total_q };
    const cuuint64_t strides[2] = { (cuuint64_t) D * 2, (cuuint64_t) a->num_q_heads * D * 2 };
    const cuuint32_t box[3] = { 64, (cuuint32_t) G, (cuuint32_t) (S::BM / G) };
    return pk_prefill_wg_encode(qmap, std::is_same<QT, __nv_bfloat16>::value, 3, a->q, dims, strides, box);
}

/* Returns whether the wgmma prefill kernel exists in this build for device dev (an sm_90a cubin on a 9.x device). */
static inline bool pk_prefill_wg_usable(int dev)
{
#if defined(PK_SM90A_CUBIN)
    static std::atomic<int> cache[PK_MAX_DEVICES];     /* 0 unknown, 1 yes, 2 no */
    if (dev >= 0 && dev < PK_MAX_DEVICES) {
        const int v = cache[dev].load(std::memory_order_relaxed);
        if (v != 0)
            return v == 1;
    }
    int major = 0;
    const bool yes = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess
                     && major == 9 && getenv("PAGED_NO_WGMMA") == NULL;
    if (dev >= 0 && dev < PK_MAX_DEVICES)
        cache[dev].store(yes ? 1 : 2, std::memory_order_relaxed);
    return yes;
#else
    (void) dev;
    return false;
#endif
}

#endif
