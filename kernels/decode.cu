/* decode.cu: paged decode attention on CUDA: dispatch, the split-KV reduce, and the entry points. */
/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/decode.cuh"
#include "kernels/ptx.cuh"

/* Returns the defaults, or what PAGED_DECODE_PLAN sets when it is well formed. */
static pk_decode_knobs pk_decode_read_knobs(void)
{
    pk_decode_knobs k = { PK_DECODE_WAVES, PK_DECODE_MIN_PART, true, PK_DECODE_SHORT_CTX, 0 };
    int e[5] = { 0, 0, 1, PK_DECODE_SHORT_CTX, 0 };
    const char *env = getenv("PAGED_DECODE_PLAN");
    int n = env != NULL ? sscanf(env, "%d,%d,%d,%d,%d", &e[0], &e[1], &e[2], &e[3], &e[4]) : 0;
    if (n >= 2 && e[0] >= 1 && e[0] <= 64 && e[1] >= 16 && e[1] <= 1 << 20 && e[3] >= 0 && e[4] >= 0
        && e[4] <= PK_DECODE_MAX_PARTS)
        k = { e[0], e[1], e[2] != 0, e[3], e[4] };
    return k;
}

/* Returns the launch knobs, read once (see decode.cuh). */
const pk_decode_knobs &pk_decode_tuning(void)
{
    static const pk_decode_knobs knobs = pk_decode_read_knobs();   /* thread-safe initialization */
    return knobs;
}

/* Partitions a reduce thread loads per trip to memory (see pk_decode_reduce_kernel). */
#define PK_REDUCE_ROUND 8

/* A reduce thread's running merge of its partitions: their maximum (base 2), and the sum and
 * the 4 output dims weighted against it. */
struct pk_reduce_state {
    float m, l;
    float4 acc;
};

/* One round of a reduce thread's partitions: partition first + k * step for k < PK_REDUCE_ROUND,
 * the partition's max, sum and the thread's 4 dims. */
struct pk_reduce_round {
    float m[PK_REDUCE_ROUND], l[PK_REDUCE_ROUND];
    float4 o[PK_REDUCE_ROUND];
};

/* Loads the round of partitions first, first + step, ... below limit into r (all its loads
 * independent: one trip to memory); returns nothing. q is the thread's dim quad, nq the quads
 * per partition. */
__device__ __forceinline__ void pk_reduce_load(pk_reduce_round &r, const float *m, const float *l,
                                               const float *o, int first, int step, int limit, int q, int nq)
{
#pragma unroll
    for (int k = 0; k < PK_REDUCE_ROUND; ++k) {
        const int i = first + k * step;
        if (i < limit) {
            r.m[k] = m[i];
            r.l[k] = l[i];
            r.o[k] = ((const float4 *) o)[(size_t) i * nq + q];
        }
    }
}

/* Returns exp2(m - mref), or 0 for an empty partial (m = -inf; mref >= m). */
__device__ __forceinline__ float pk_reduce_weight(float m, float mref)
{
    return m == -INFINITY ? 0.0f : exp2f(m - mref);
}

/* Folds the round's partitions first, first + step, ... below nparts into s: the running
 * state is rescaled to the round's new maximum first. Returns nothing. */
__device__ __forceinline__ void pk_reduce_fold(pk_reduce_state &s, const pk_reduce_round &r, int first, int step,
                                               int nparts)
{
    float mx = s.m;
#pragma unroll
    for (int k = 0; k < PK_REDUCE_ROUND; ++k)
        if (first + k * step < nparts)
            mx = fmaxf(mx, r.m[k]);
    const float c = pk_reduce_weight(s.m, mx);
    s.l *= c;
    s.acc.x *= c;
    s.acc.y *= c;
    s.acc.z *= c;
    s.acc.w *= c;
#pragma unroll
    for (int k = 0; k < PK_REDUCE_ROUND; ++k) {
        if (first + k * step < nparts) {
            const float w = pk_reduce_weight(r.m[k], mx);
            s.l = fmaf(w, r.l[k], s.l);
            s.acc.x = fmaf(w, r.o[k].x, s.acc.x);
            s.acc.y = fmaf(w, r.o[k].y, s.acc.y);
            s.acc.z = fmaf(w, r.o[k].z, s.acc.z);
            s.acc.w = fmaf(w, r.o[k].w, s.acc.w);
        }
    }
    s.m = mx;
}

/*
 * Combines the partitions of one (sequence, query head): the partials hold unnormalized
 * outputs with their max (base 2) and sum; each is weighted by exp2(m_p - M) against the
 * overall max M. Thread (g, q) takes dims 4q .. 4q + 3 of partitions g, g + NG, ...: it loads
 * the max, sum and dims of PK_REDUCE_ROUND of them at once, the first round along with the
 * sequence's length (partitions up to the plan's maximum; those past the sequence's are then
 * ignored), and merges them online; the NG groups then meet in shared memory. So a reduce of
 * up to PK_REDUCE_ROUND * NG partitions is one trip to memory and one barrier: what a reduce
 * of a few microseconds is made of. Sequences that fit in one partition were finished by the
 * partition kernel and are skipped. Grid (seq, query head).
 */
template <typename QT>
__device__ __forceinline__ void pk_decode_reduce_body(const pk_decode_reduce_params &p)
{
    __shared__ pk_reduce_state st_s[128];
    pk_grid_dependency_wait();      /* launched early (see pk_decode_reduce): wait for the partials */
    pk_grid_launch_dependents();    /* the next decode may be scheduled now (it waits likewise) */
    const int seq = blockIdx.x, hq = blockIdx.y, tid = threadIdx.x;
    const size_t base = ((size_t) seq * p.num_q_heads + hq) * p.max_parts;
    const float *m = p.ws_m + base, *l = p.ws_l + base, *o = p.ws_o + base * p.head_dim;
    const int nq = p.head_dim / 4, ng = 128 / nq;       /* dim quads, partition groups */
    const int q = tid % nq, g = tid / nq;
    const int step = ng * PK_REDUCE_ROUND;              /* partitions per round of the whole CTA */

    pk_reduce_round r;
    pk_reduce_load(r, m, l, o, g, ng, g < ng ? p.max_parts : 0, q, nq);
    /* (A length past its table's capacity, which callers rule out, reads no other slot.) */
    const int nparts = min(pk_decode_nparts(p.seq_lens[seq], p.window, p.part_tokens), p.max_parts);
    if (nparts <= 1)
        return;
    pk_reduce_state s = { -INFINITY, 0.0f, make_float4(0.0f, 0.0f, 0.0f, 0.0f) };
    if (g < ng) {
        pk_reduce_fold(s, r, g, ng, nparts);
        for (int first = g + step; first < nparts; first += step) {   /* beyond the first round */
            pk_reduce_load(r, m, l, o, first, ng, nparts, q, nq);
            pk_reduce_fold(s, r, first, ng, nparts);
        }
    }
    st_s[tid] = s;
    __syncthreads();
    if (tid < nq) {
        float mx = -INFINITY;
        for (int k = 0; k < ng; ++k)
            mx = fmaxf(mx, st_s[k * nq + tid].m);
        float lsum = 0.0f;
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int k = 0; k < ng; ++k) {
            const pk_reduce_state &t = st_s[k * nq + tid];
            const float w = pk_reduce_weight(t.m, mx);
            lsum = fmaf(w, t.l, lsum);
            acc.x = fmaf(w, t.acc.x, acc.x);
            acc.y = fmaf(w, t.acc.y, acc.y);
            acc.z = fmaf(w, t.acc.z, acc.z);
            acc.w = fmaf(w, t.acc.w, acc.w);
        }
        const float scale = p.v_scale / lsum;
        QT *out = p.out_seq ? (QT *) p.out_seq[seq] + (size_t) hq * p.head_dim
                            : (QT *) p.out + ((size_t) seq * p.num_q_heads + hq) * p.head_dim;
        out[4 * tid] = pk_from_f32<QT>(acc.x * scale);
        out[4 * tid + 1] = pk_from_f32<QT>(acc.y * scale);
        out[4 * tid + 2] = pk_from_f32<QT>(acc.z * scale);
        out[4 * tid + 3] = pk_from_f32<QT>(acc.w * scale);
    }
}

/* The reduce kernel, its metadata in device memory. */
template <typename QT>
static __global__ void __launch_bounds__(128) pk_decode_reduce_kernel(const pk_decode_reduce_params p)
{
    pk_decode_reduce_body<QT>(p);
}

/* The reduce kernel, its metadata (lengths, output pointers) in its parameters (m); see
 * pk_decode_mma_meta_kernel. */
template <typename QT, int N>
static __global__ void __launch_bounds__(128)
pk_decode_reduce_meta_kernel(const __grid_constant__ pk_decode_reduce_params p,
                             const __grid_constant__ pk_decode_meta<N> m)
{
    pk_decode_reduce_params r = p;
    r.seq_lens = pk_meta_rebase(p.seq_lens, p.meta_base, m.bytes);
    r.out_seq = pk_meta_rebase(p.out_seq, p.meta_base, m.bytes);
    pk_decode_reduce_body<QT>(r);
}

/* Launches the reduce kernel of QT queries on grid with parameters p, a's metadata in an
 * N-byte parameter; returns 0 or PAGED_E_DEVICE. */
template <typename QT, int N>
static int pk_decode_reduce_meta(const pk_decode_args *a, const pk_decode_reduce_params &p, dim3 grid,
                                 cudaStream_t stream)
{
    return pk_launch_dependent_args(pk_decode_tuning().pdl, pk_decode_reduce_meta_kernel<QT, N>, grid, dim3(128), 0,
                                    stream, p, pk_decode_meta_of<N>(a));
}

/* Launches the reduce kernel for queries of type QT; returns 0 or PAGED_E_DEVICE. */
template <typename QT>
static int pk_decode_reduce(const pk_decode_args *a, const pk_decode_plan *pl, cudaStream_t stream)
{
    pk_decode_reduce_params p;
    const size_t slots = (size_t) a->num_seqs * a->num_q_heads * pl->max_parts;
    p.seq_lens = a->seq_lens;
    p.ws_o = (const float *) a->workspace;
    p.ws_m = p.ws_o + slots * a->cache.head_dim;
    p.ws_l = p.ws_m + slots;
    p.out = a->out;
    p.out_seq = a->q_seq ? a->out_seq : nullptr;
    p.num_q_heads = a->num_q_heads;
    p.head_dim = a->cache.head_dim;
    p.window = a->opts.window;
    p.part_tokens = pl->part_tokens;
    p.max_parts = pl->max_parts;
    p.v_scale = a->cache.dtype == PAGED_DTYPE_FP8_E4M3 ? a->cache.v_scale : 1.0f;
    p.meta_base = (const char *) a->meta_dev;
    dim3 grid((unsigned) a->num_seqs, (unsigned) a->num_q_heads);
    if (pl->meta)
        return pk_decode_meta_sized(a->meta_bytes, [&](auto n) {
            return pk_decode_reduce_meta<QT, decltype(n)::value>(a, p, grid, stream);
        });
    return pk_launch_dependent(pk_decode_reduce_kernel<QT>, grid, dim3(128), 0, stream, p,
                               pk_decode_tuning().pdl);
}

/* Runs (or only plans) the partition kernel of head dim D for the args' dtypes. */
template <int D>
static int pk_decode_by_dtype(const pk_decode_args *a, size_t ws_limit, cudaStream_t stream, bool launch,
                              pk_decode_plan *pl)
{
    switch (a->cache.dtype) {
    case PAGED_DTYPE_F16: return pk_decode_run<D, __half, __half>(a, ws_limit, stream, launch, pl);
    case PAGED_DTYPE_BF16: return pk_decode_run<D, __nv_bfloat16, __nv_bfloat16>(a, ws_limit, stream, launch, pl);
    case PAGED_DTYPE_F32: return pk_decode_run<D, float, float>(a, ws_limit, stream, launch, pl);
    case PAGED_DTYPE_FP8_E4M3:
        switch (a->q_dtype) {
        case PAGED_DTYPE_F16: return pk_decode_run<D, pk_e4m3, __half>(a, ws_limit, stream, launch, pl);
        case PAGED_DTYPE_BF16: return pk_decode_run<D, pk_e4m3, __nv_bfloat16>(a, ws_limit, stream, launch, pl);
        case PAGED_DTYPE_F32: return pk_decode_run<D, pk_e4m3, float>(a, ws_limit, stream, launch, pl);
        default: return PAGED_E_DTYPE;
        }
    default: return PAGED_E_DTYPE;
    }
}

/* Runs (or only plans) the partition kernel for the args' head dim. */
static int pk_decode_dispatch(const pk_decode_args *a, size_t ws_limit, cudaStream_t stream, bool launch,
                              pk_decode_plan *pl)
{
    switch (a->cache.head_dim) {
    case 64: return pk_decode_by_dtype<64>(a, ws_limit, stream, launch, pl);
    case 80: return pk_decode_by_dtype<80>(a, ws_limit, stream, launch, pl);
    case 96: return pk_decode_by_dtype<96>(a, ws_limit, stream, launch, pl);
    case 128: return pk_decode_by_dtype<128>(a, ws_limit, stream, launch, pl);
    case 256: return pk_decode_by_dtype<256>(a, ws_limit, stream, launch, pl);
    default: return PAGED_E_GEOMETRY;
    }
}

/* Returns 0 if the decode's shapes (not its pointers) are ones the kernels handle, else a
 * negative paged_error. */
static int pk_decode_check_shape(const pk_decode_args *a)
{
    int rc = pk_attn_check(&a->cache, a->layer, a->num_q_heads, a->q_dtype);
    if (rc != 0)
        return rc;
    if (a->num_seqs < 0 || a->bt_stride < 0 || a->num_seqs > INT32_MAX / 2)
        return PAGED_E_INVAL;
    /* The plain kernel's grid dimension y: KV heads x sub-groups of 8 (no kernel has more). */
    if ((long long) a->cache.num_kv_heads * pk_decode_subs(a->num_q_heads / a->cache.num_kv_heads, 8) > 65535)
        return PAGED_E_GEOMETRY;
    return 0;
}

/* Returns 0 if the decode arguments are ones the kernels handle, else a negative paged_error. */
static int pk_decode_check(const pk_decode_args *a)
{
    int rc = pk_decode_check_shape(a);
    if (rc != 0)
        return rc;
    if (a->num_seqs > 0 && (a->block_tables == NULL || a->seq_lens == NULL))
        return PAGED_E_INVAL;
    if (a->num_seqs > 0 && !(a->q_seq ? a->out_seq != NULL : a->q != NULL && a->out != NULL))
        return PAGED_E_INVAL;
    /* New rows (fused append): both or neither, in the form the queries take. */
    if (a->q_seq ? (a->new_k_seq == NULL) != (a->new_v_seq == NULL) || a->new_k != NULL || a->new_v != NULL
                 : (a->new_k == NULL) != (a->new_v == NULL) || a->new_k_seq != NULL || a->new_v_seq != NULL)
        return PAGED_E_INVAL;
    return 0;
}

/* Returns the split-KV workspace the decode of a needs on the current device (0: no split).
 * Only the shapes count: the pointers may still be unset (the daemon sizes the workspace
 * before it lays out the metadata the pointers will address). */
extern "C" size_t pk_cuda_decode_workspace(const pk_decode_args *a)
{
    if (a == NULL || pk_decode_check_shape(a) != 0 || a->num_seqs == 0)
        return 0;
    pk_decode_plan pl;
    if (pk_decode_dispatch(a, SIZE_MAX, nullptr, false, &pl) != 0)
        return 0;
    return pk_decode_plan_bytes(a, &pl);
}

/* Returns the workspace bytes a launch of a may use for partials: none without a workspace. */
static size_t pk_decode_ws_limit(const pk_decode_args *a)
{
    return a->workspace ? a->workspace_size : 0;
}

/* Fills *out with the plan of a's decode; see kernels.h. */
extern "C" int pk_cuda_decode_plan(const pk_decode_args *a, pk_decode_plan_info *out)
{
    if (a == NULL || out == NULL)
        return PAGED_E_INVAL;
    int rc = pk_decode_check_shape(a);
    if (rc != 0)
        return rc;
    pk_decode_plan pl;
    rc = pk_decode_dispatch(a, pk_decode_ws_limit(a), nullptr, false, &pl);
    if (rc != 0)
        return rc;
    out->parts = pl.max_parts;
    out->part_tokens = pl.part_tokens;
    out->ctas = (long long) a->num_seqs * a->cache.num_kv_heads * pl.subs * pl.max_parts;
    out->cta_heads = pl.cta_heads;
    out->small_rings = pl.small;
    return 0;
}

/* Says whether a's metadata goes in the kernel's parameters; see kernels.h. */
extern "C" int pk_cuda_decode_meta_inline(const pk_decode_args *a)
{
    if (a == NULL)
        return PAGED_E_INVAL;
    int rc = pk_decode_check_shape(a);
    if (rc != 0)
        return rc;
    if (a->meta_host == NULL || a->num_seqs == 0)
        return 0;
    pk_decode_plan pl;
    rc = pk_decode_dispatch(a, pk_decode_ws_limit(a), nullptr, false, &pl);
    return rc != 0 ? rc : pl.meta;
}

/*
 * Launches the decode of a on stream: the partition kernel, then the reduce if the plan splits.
 * A workspace smaller than pk_cuda_decode_workspace asks for makes the plan split less (or
 * not at all) rather than fail. Returns 0 or a negative paged_error.
 */
extern "C" int pk_cuda_decode(const pk_decode_args *a, void *stream)
{
    if (a == NULL)
        return PAGED_E_INVAL;
    int rc = pk_decode_check(a);
    if (rc != 0 || a->num_seqs == 0)
        return rc;
    cudaStream_t st = (cudaStream_t) stream;
    pk_decode_plan pl;
    rc = pk_decode_dispatch(a, pk_decode_ws_limit(a), st, true, &pl);
    if (rc != 0 || pl.max_parts <= 1)
        return rc;
    switch (a->q_dtype) {
    case PAGED_DTYPE_F16: return pk_decode_reduce<__half>(a, &pl, st);
    case PAGED_DTYPE_BF16: return pk_decode_reduce<__nv_bfloat16>(a, &pl, st);
    case PAGED_DTYPE_F32: return pk_decode_reduce<float>(a, &pl, st);
    default: return PAGED_E_DTYPE;
    }
}
