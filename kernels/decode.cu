/* decode.cu: paged decode attention on CUDA: dispatch, the split-KV reduce, and the entry points. */
/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/decode.cuh"
#include "kernels/ptx.cuh"

/* Returns the defaults, or what PAGED_DECODE_PLAN sets when it is well formed. */
static pk_decode_knobs pk_decode_read_knobs(void)
{
    pk_decode_knobs k = { PK_DECODE_WAVES, PK_DECODE_MIN_PART, true };
    int e[3] = { 0, 0, 1 };
    const char *env = getenv("PAGED_DECODE_PLAN");
    int n = env != NULL ? sscanf(env, "%d,%d,%d", &e[0], &e[1], &e[2]) : 0;
    if (n >= 2 && e[0] >= 1 && e[0] <= 64 && e[1] >= 16 && e[1] <= 1 << 20)
        k = { e[0], e[1], e[2] != 0 };
    return k;
}

/* Returns the launch knobs, read once (see decode.cuh). */
const pk_decode_knobs &pk_decode_tuning(void)
{
    static const pk_decode_knobs knobs = pk_decode_read_knobs();   /* thread-safe initialization */
    return knobs;
}

/*
 * Combines the partitions of one (sequence, query head): the partials hold unnormalized
 * outputs with their max (base 2) and sum; each is weighted by exp2(m_p - M) against the
 * overall max M. The maxima and sums are read in one round (a thread per partition), then
 * thread (g, q) sums 4 dims q*4.. over partitions g, g + NG, ... with 16-byte loads, several
 * in flight, and the NG groups meet in shared memory: few dependent trips to memory, which
 * is what a reduce of a few microseconds is made of. Sequences that fit in one partition
 * were finished by the partition kernel and are skipped. Grid (seq, query head).
 */
template <typename QT>
static __global__ void __launch_bounds__(128) pk_decode_reduce_kernel(const pk_decode_reduce_params p)
{
    __shared__ float w_s[PK_DECODE_MAX_PARTS];          /* partition weights */
    __shared__ float4 sum_s[128];
    __shared__ float scratch[32];
    pk_grid_dependency_wait();      /* launched early (see pk_decode_reduce): wait for the partials */
    pk_grid_launch_dependents();    /* the next decode may be scheduled now (it waits likewise) */
    const int seq = blockIdx.x, hq = blockIdx.y, tid = threadIdx.x;
    const size_t base = ((size_t) seq * p.num_q_heads + hq) * p.max_parts;
    const float *m = p.ws_m + base, *l = p.ws_l + base, *o = p.ws_o + base * p.head_dim;

    /* The maxima and sums of every planned partition are loaded along with the length (one
     * trip to memory, not two); those past the sequence's partitions are then ignored. */
    float mv[PK_DECODE_MAX_PARTS / 128], lv[PK_DECODE_MAX_PARTS / 128];
#pragma unroll
    for (int k = 0; k < PK_DECODE_MAX_PARTS / 128; ++k) {
        const int i = tid + 128 * k;
        mv[k] = i < p.max_parts ? m[i] : -INFINITY;
        lv[k] = i < p.max_parts ? l[i] : 0.0f;
    }
    const int nparts = pk_decode_nparts(p.seq_lens[seq], p.window, p.part_tokens);
    if (nparts <= 1)
        return;
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < PK_DECODE_MAX_PARTS / 128; ++k)
        if (tid + 128 * k < nparts)
            mx = fmaxf(mx, mv[k]);
    mx = pk_block_reduce(mx, true, scratch);
    float lsum = 0.0f;
#pragma unroll
    for (int k = 0; k < PK_DECODE_MAX_PARTS / 128; ++k) {
        const int i = tid + 128 * k;
        if (i < nparts) {
            const float w = exp2f(mv[k] - mx);
            w_s[i] = w;
            lsum += w * lv[k];
        }
    }
    lsum = pk_block_reduce(lsum, false, scratch);   /* its barriers also publish w_s */

    const int nq = p.head_dim / 4, ng = 128 / nq;       /* dim quads, partition groups */
    const int q = tid % nq, g = tid / nq;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (g < ng) {
#pragma unroll 8
        for (int i = g; i < nparts; i += ng) {
            const float w = w_s[i];
            const float4 v = ((const float4 *) (o + (size_t) i * p.head_dim))[q];
            acc.x = fmaf(w, v.x, acc.x);
            acc.y = fmaf(w, v.y, acc.y);
            acc.z = fmaf(w, v.z, acc.z);
            acc.w = fmaf(w, v.w, acc.w);
        }
    }
    sum_s[tid] = acc;
    __syncthreads();
    if (tid < nq) {
        for (int k = 1; k < ng; ++k) {
            const float4 v = sum_s[k * nq + tid];
            acc.x += v.x;
            acc.y += v.y;
            acc.z += v.z;
            acc.w += v.w;
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
    dim3 grid((unsigned) a->num_seqs, (unsigned) a->num_q_heads);
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
    if (a->cache.num_kv_heads > 65535)
        return PAGED_E_GEOMETRY;        /* grid dimension y */
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
    const size_t ws_limit = a->workspace ? a->workspace_size : 0;
    cudaStream_t st = (cudaStream_t) stream;
    pk_decode_plan pl;
    rc = pk_decode_dispatch(a, ws_limit, st, true, &pl);
    if (rc != 0 || pl.max_parts <= 1)
        return rc;
    switch (a->q_dtype) {
    case PAGED_DTYPE_F16: return pk_decode_reduce<__half>(a, &pl, st);
    case PAGED_DTYPE_BF16: return pk_decode_reduce<__nv_bfloat16>(a, &pl, st);
    case PAGED_DTYPE_F32: return pk_decode_reduce<float>(a, &pl, st);
    default: return PAGED_E_DTYPE;
    }
}
