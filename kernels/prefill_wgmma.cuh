/* prefill_wgmma.cuh: the Hopper (sm_90a) prefill kernel on warpgroup MMA, included by prefill_impl.cuh. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_PREFILL_WGMMA_CUH
#define PAGED_KERNELS_PREFILL_WGMMA_CUH

#include "kernels/wgmma.cuh"

/*
 * 16-bit caches with queries of the same type, head dims 64 and 128, causal or not, with or
 * without a window; no soft cap and no ALiBi (those go to the mma.sync kernel: their extra
 * registers would spill here). Two warpgroups of 64
 * rows each (BM = 128 rows of the GQA-packed [qo_len * G] rows); BN = 128 keys per tile.
 * Q, K and V live in shared memory in 128-byte swizzled column blocks of 64 elements (Q and K
 * K-major for S = Q K^T; V read MN-major, transposed by the hardware, for O += P V). Per
 * tile each warpgroup issues D / 16 m64n128k16 wgmma for S and, behind them, the BN / 16
 * m64nDk16 wgmma of the previous tile's O += P V (P from registers: the S accumulators after
 * the softmax, re-packed as A fragments); it runs the masks and the online softmax of S
 * while P V still runs. K/V tiles are double-buffered with cp.async by all 256 threads, K one
 * tile ahead of V. One CTA per SM (160 KB of shared memory at D 128).
 */
template <int D> struct pk_prefill_wg_shape {
    static constexpr int NT = 256;          /* two warpgroups */
    static constexpr int BM = 128;
    static constexpr int BN = 128;
    static constexpr int CPR = D / 8;       /* 16-byte chunks per row */
    static constexpr int Q_BYTES = BM * D * 2;
    static constexpr int KV_BYTES = BN * D * 2;
    static constexpr int ROWS_BYTES = 3 * BN * 8;               /* three tiles' row tables */
    static constexpr int SMEM = 1024 + Q_BYTES + 4 * KV_BYTES + ROWS_BYTES;  /* + alignment slack */
    static_assert(D == 64 || D == 128, "wgmma prefill: head dims 64 and 128");
    static_assert(NT == 2 * BN, "the prologue gives each thread one key of the first two tiles");
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
 * Writes rows[t] for key kv0 + t: its row index in a K/V plane and 16, or row 0 and 0 if the
 * key is outside [c.kv_lo, c.kv_hi) (its row is zero-filled): one block-table lookup per key
 * and tile, shared by the K and the V copies and by the chunks of the row. Row indices fit
 * 32 bits: a plane of 2^31 rows would hold at least 256 GB.
 */
__device__ __forceinline__ void pk_prefill_wg_rows(const pk_prefill_params &p, const pk_prefill_cta &c,
                                                   const int32_t *bt, int h, int kv0, int t, int2 *rows)
{
    const int pos = kv0 + t;
    const bool in = pos >= c.kv_lo && pos < c.kv_hi;
    rows[t] = make_int2(in ? (int) pk_paged_row(__ldg(bt + (pos >> p.block_shift)), h, pos, p.num_kv_heads,
                                                p.block_shift)
                           : 0,
                        in ? 16 : 0);
}

/*
 * Starts the copies of a tile of K/V plane src into dst (the swizzled layout of
 * pk_sw128_offset), row n from row rows[n].x, reading rows[n].y bytes of each 16-byte chunk.
 * A thread copies chunk tid % CPR of rows tid / CPR + i NT / CPR, whose swizzle is the same
 * for every i (NT / CPR is a multiple of 8), so the destinations are fixed offsets.
 */
template <int D>
__device__ __forceinline__ void pk_prefill_wg_load(const int2 *rows, const char *src, unsigned char *dst)
{
    using S = pk_prefill_wg_shape<D>;
    constexpr int STEP = S::NT / S::CPR;                /* rows per pass */
    static_assert(STEP % 8 == 0, "the swizzle must repeat every pass");
    const int n0 = (int) threadIdx.x / S::CPR, ch = (int) threadIdx.x % S::CPR;
    unsigned char *d = dst + pk_sw128_offset(S::BN, n0, ch);
    const char *g = src + ch * 16;
#pragma unroll
    for (int it = 0; it < S::BN / STEP; ++it) {
        const int2 r = rows[n0 + it * STEP];
        pk_cp_async16_bytes(d + it * STEP * 128, g + (size_t) (unsigned) r.x * (D * 2), r.y);
    }
}

/* Starts the copies of CTA c's Q tile into qs (rows past the sequence are zeros). */
template <int D, typename QT>
__device__ __forceinline__ void pk_prefill_wg_load_q(const pk_prefill_params &p, const pk_prefill_cta &c, int h,
                                                     unsigned char *qs)
{
    using S = pk_prefill_wg_shape<D>;
#pragma unroll
    for (int it = 0; it < S::BM * S::CPR / S::NT; ++it) {
        const int idx = (int) threadIdx.x + it * S::NT;
        const int m = idx / S::CPR, ch = idx % S::CPR;
        unsigned char *dst = qs + pk_sw128_offset(S::BM, m, ch);
        const int mg = c.m0 + m;
        if (mg < c.rows) {
            const int r = mg / p.group, g = mg - r * p.group;
            const QT *src = (const QT *) p.q
                            + ((size_t) (c.qo_start + r) * p.num_q_heads + (size_t) h * p.group + g) * D + ch * 8;
            if (p.q_aligned) {
                pk_cp_async16(dst, src);
            } else {
#pragma unroll
                for (int e = 0; e < 8; ++e)
                    ((QT *) dst)[e] = src[e];
            }
        } else {
            *(uint4 *) dst = make_uint4(0, 0, 0, 0);
        }
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
    float neg_m[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        const float m_new = fmaxf(m_run[r], mx[r] * qk_log2);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;  /* nothing visible yet */
        alpha[r] = pk_exp2(m_run[r] - m_use);
        m_run[r] = m_new;
        l_run[r] *= alpha[r];
        neg_m[r] = -m_use;
    }
#pragma unroll
    for (int nt = 0; nt < NT8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            sc[nt][e] = pk_exp2(fmaf(sc[nt][e], qk_log2, neg_m[e >> 1]));
            l_run[e >> 1] += sc[nt][e];
        }
    }
}

/* Issues S = Q K^T for this warpgroup's 64 rows qw against the K tile kb: D / 16 wgmma, 4 per 64-element column block. */
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
__device__ __forceinline__ void pk_prefill_wg_pv(float (&of)[D / 2], const uint32_t (&a)[pk_prefill_wg_shape<D>::BN / 16][4],
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

/* Waits for this thread's copies, hands them to wgmma's proxy and meets the CTA: every thread's copies have landed. */
__device__ __forceinline__ void pk_prefill_wg_landed(void)
{
    pk_cp_async_wait<0>();
    pk_fence_proxy_async();
    __syncthreads();
}

#endif /* PK_HAVE_WGMMA */

/* The wgmma prefill kernel (see pk_prefill_wg_shape). Grid (row tile, KV head, sequence). */
template <int D, typename QT>
static __global__ void __launch_bounds__(256, 1) pk_prefill_wg_kernel(const pk_prefill_params p)
{
#if PK_HAVE_WGMMA
    using S = pk_prefill_wg_shape<D>;
    constexpr int BN = S::BN;
    extern __shared__ unsigned char smem_raw[];
    /* wgmma's swizzle atoms start on 1024-byte boundaries (pointer arithmetic on the shared
     * array keeps the compiler's knowledge that these are shared addresses) */
    unsigned char *qs = smem_raw + ((1024 - ((uint32_t) __cvta_generic_to_shared(smem_raw) & 1023)) & 1023);
    unsigned char *kbuf = qs + S::Q_BYTES;              /* [2][KV_BYTES] */
    unsigned char *vbuf = kbuf + 2 * S::KV_BYTES;
    int2 *rows = (int2 *) (vbuf + 2 * S::KV_BYTES);     /* [3][BN] */

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

    /* The row offsets of the first two tiles, one key per thread; then Q and K_0. */
    if (wg < ntiles)
        pk_prefill_wg_rows(p, c, bt, h, kv_start + wg * BN, tid & (BN - 1), rows + wg * BN);
    pk_prefill_wg_load_q<D, QT>(p, c, h, qs);
    __syncthreads();
    pk_prefill_wg_load<D>(rows, p.k, kbuf);
    pk_cp_async_commit();

    /* This thread's rows: m0 and m0 + 8 of the tile (warp w of the CTA holds rows 16 w..). */
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
     * overlap the matrix products. K_(jt+1) and V_jt stream in meanwhile (K is one tile ahead
     * of V, two buffers of each), and one warpgroup looks up the rows of tile jt + 2 (three
     * tables: tile jt's for V, jt + 1's for K, jt + 2's being written). The first tile has
     * no P V before it and the last P V no tile after it; the loop body stays straight-line
     * so that ptxas can see which wgmma each wait covers.
     */
    pk_prefill_wg_landed();         /* Q and K_0 */
    if (ntiles > 1)
        pk_prefill_wg_load<D>(rows + BN, p.k, kbuf + S::KV_BYTES);
    pk_prefill_wg_load<D>(rows, p.v, vbuf);
    pk_cp_async_commit();
    pk_wgmma_fence();
    pk_prefill_wg_qk<D, QT>(sf, qw, kbuf);
    pk_wgmma_commit();
    if (ntiles > 2 && wg == 0)
        pk_prefill_wg_rows(p, c, bt, h, kv_start + 2 * BN, tid, rows + 2 * BN);
    pk_wgmma_wait<0>();
    pk_wgmma_pin(sf);
    pk_prefill_wg_softmax(p, i0, i1, kv_start + (lane & 3) * 2,
                          kv_start + BN - 1 <= i_lo && (p.window <= 0 || kv_start > i_hi - p.window), qk_log2, s,
                          m_run, l_run, alpha);
    pk_prefill_wg_pack<QT>(a, s);

    int r_v = 1, r_k = 2, r_new = 0;                    /* row tables of V_jt, K_(jt+1), tile jt + 2 */
    for (int jt = 1; jt < ntiles; ++jt) {
        const int kv0 = kv_start + jt * BN;
        pk_prefill_wg_landed();     /* K_jt, V_(jt-1), tile jt + 1's rows; tile jt - 1's readers are done */
        if (jt + 1 < ntiles)
            pk_prefill_wg_load<D>(rows + r_k * BN, p.k, kbuf + ((jt + 1) & 1) * S::KV_BYTES);
        pk_prefill_wg_load<D>(rows + r_v * BN, p.v, vbuf + (jt & 1) * S::KV_BYTES);
        pk_cp_async_commit();

        pk_wgmma_pin(of);
        pk_wgmma_pin(af);
        pk_wgmma_fence();
        pk_prefill_wg_qk<D, QT>(sf, qw, kbuf + (jt & 1) * S::KV_BYTES);
        pk_wgmma_commit();
        pk_prefill_wg_pv<D, QT>(of, a, vbuf + ((jt - 1) & 1) * S::KV_BYTES);
        pk_wgmma_commit();
        if (jt + 2 < ntiles && wg == (jt & 1))
            pk_prefill_wg_rows(p, c, bt, h, kv0 + 2 * BN, tid & (BN - 1), rows + r_new * BN);
        pk_wgmma_wait<1>();         /* S is done; P V may still run */
        pk_wgmma_pin(sf);

        pk_prefill_wg_softmax(p, i0, i1, kv0 + (lane & 3) * 2,
                              kv0 + BN - 1 <= i_lo && (p.window <= 0 || kv0 > i_hi - p.window), qk_log2, s, m_run,
                              l_run, alpha);

        pk_wgmma_wait<0>();         /* P V is done: O may be rescaled and P's registers reused */
        pk_wgmma_pin(of);
        pk_wgmma_pin(af);
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
            o[dt][0] *= alpha[0];
            o[dt][1] *= alpha[0];
            o[dt][2] *= alpha[1];
            o[dt][3] *= alpha[1];
        }
        pk_prefill_wg_pack<QT>(a, s);
        const int r = r_v;
        r_v = r_k;
        r_k = r_new;
        r_new = r;
    }
    pk_prefill_wg_landed();         /* V of the last tile */
    pk_wgmma_pin(of);
    pk_wgmma_pin(af);
    pk_wgmma_fence();
    pk_prefill_wg_pv<D, QT>(of, a, vbuf + ((ntiles - 1) & 1) * S::KV_BYTES);
    pk_wgmma_commit();
    pk_wgmma_wait<0>();
    pk_wgmma_pin(of);

    pk_prefill_store_rows<D, QT>(p, c, h, m0, lane, o, l_run);
#else
    (void) p;                       /* not built for this architecture: never launched (pk_prefill_wg_usable) */
#endif
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
