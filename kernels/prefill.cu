/* prefill.cu: paged prefill (append) attention on CUDA: checks, dispatch and the entry points. */
/* SPDX-License-Identifier: MIT */
#include "kernels/prefill.cuh"

/* Launches the prefill kernel of head dim D for the args' dtypes. */
template <int D> static int pk_prefill_by_dtype(const pk_prefill_args *a, cudaStream_t stream)
{
    switch (a->cache.dtype) {
    case PAGED_DTYPE_F16: return pk_prefill_run<D, __half, __half>(a, stream);
    case PAGED_DTYPE_BF16: return pk_prefill_run<D, __nv_bfloat16, __nv_bfloat16>(a, stream);
    case PAGED_DTYPE_F32: return pk_prefill_run<D, float, float>(a, stream);
    case PAGED_DTYPE_FP8_E4M3:
        switch (a->q_dtype) {
        case PAGED_DTYPE_F16: return pk_prefill_run<D, pk_e4m3, __half>(a, stream);
        case PAGED_DTYPE_BF16: return pk_prefill_run<D, pk_e4m3, __nv_bfloat16>(a, stream);
        case PAGED_DTYPE_F32: return pk_prefill_run<D, pk_e4m3, float>(a, stream);
        default: return PAGED_E_DTYPE;
        }
    default: return PAGED_E_DTYPE;
    }
}

/* Returns 0 if the prefill arguments are ones the kernels handle, else a negative paged_error. */
static int pk_prefill_check(const pk_prefill_args *a)
{
    int rc = pk_attn_check(&a->cache, a->layer, a->num_q_heads, a->q_dtype);
    if (rc != 0)
        return rc;
    if (a->num_seqs < 0 || a->max_qo_len < 0 || a->total_q < 0 || a->bt_stride < 0)
        return PAGED_E_INVAL;
    if (a->num_seqs > 0
        && (a->qo_indptr == NULL || a->block_tables == NULL || a->seq_lens == NULL
            || (a->total_q > 0 && (a->q == NULL || a->out == NULL))))
        return PAGED_E_INVAL;
    if (a->num_seqs > 65535 || a->cache.num_kv_heads > 65535)
        return PAGED_E_GEOMETRY;        /* grid dimensions z and y */
    return 0;
}

/* Returns the workspace prefill needs: none. */
extern "C" size_t pk_cuda_prefill_workspace(const pk_prefill_args *a)
{
    (void) a;                       /* each CTA walks all of its keys: no split, no partials */
    return 0;
}

/* Launches the prefill of a on stream; returns 0 or a negative paged_error. */
extern "C" int pk_cuda_prefill(const pk_prefill_args *a, void *stream)
{
    if (a == NULL)
        return PAGED_E_INVAL;
    int rc = pk_prefill_check(a);
    if (rc != 0 || a->num_seqs == 0 || a->total_q == 0 || a->max_qo_len == 0)
        return rc;
    cudaStream_t st = (cudaStream_t) stream;
    switch (a->cache.head_dim) {
    case 64: return pk_prefill_by_dtype<64>(a, st);
    case 80: return pk_prefill_by_dtype<80>(a, st);
    case 96: return pk_prefill_by_dtype<96>(a, st);
    case 128: return pk_prefill_by_dtype<128>(a, st);
    case 256: return pk_prefill_by_dtype<256>(a, st);
    default: return PAGED_E_GEOMETRY;
    }
}
