/* check.c: the argument checks the reference and the CPU backend kernels share. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "kernels/cpu/check.h"

#include <math.h>
#include <stdint.h>

/* Returns 1 if dtype can hold queries, outputs or new keys and values, else 0. */
static int activation_dtype(int32_t dtype)
{
    return dtype == PAGED_DTYPE_F32 || dtype == PAGED_DTYPE_F16 || dtype == PAGED_DTYPE_BF16;
}

/*
 * Returns 0 if activations of dtype may meet a cache of cache_dtype, else PAGED_E_DTYPE:
 * they must match, except that an fp8 cache (which has no arithmetic of its own) takes
 * any of the wider types; with stored set (APPEND's new keys and values), an fp8 cache also
 * takes fp8, copied as it is.
 */
static int check_pair(int32_t cache_dtype, int32_t dtype, int stored)
{
    if (stored && dtype == PAGED_DTYPE_FP8_E4M3 && cache_dtype == PAGED_DTYPE_FP8_E4M3)
        return 0;
    if (!activation_dtype(dtype))
        return PAGED_E_DTYPE;
    if (cache_dtype != PAGED_DTYPE_FP8_E4M3 && dtype != cache_dtype)
        return PAGED_E_DTYPE;
    return 0;
}

/* Checks a pool's geometry, dtype and fp8 scales; returns 0 or a negative paged_error. */
int pk_check_cache(const pk_cache *c)
{
    if (c->base == NULL)
        return PAGED_E_INVAL;
    if (c->num_layers < 1 || c->num_blocks < 1 || c->num_kv_heads < 1 || c->block_size < 1)
        return PAGED_E_GEOMETRY;
    if (c->head_dim < 1 || c->head_dim > PK_CPU_MAX_HEAD_DIM)
        return PAGED_E_GEOMETRY;
    if (pk_dtype_size(c->dtype) == 0)
        return PAGED_E_DTYPE;
    /* Offsets are computed in size_t; a pool whose size does not fit cannot be addressed. */
    const int32_t dims[] = { c->num_layers, 2, c->num_blocks, c->num_kv_heads,
                             c->block_size, c->head_dim };
    size_t total = pk_dtype_size(c->dtype);
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        if (total > SIZE_MAX / (size_t) dims[i])
            return PAGED_E_GEOMETRY;
        total *= (size_t) dims[i];
    }
    if (c->dtype == PAGED_DTYPE_FP8_E4M3
        && !(isfinite(c->k_scale) && c->k_scale > 0.0f && isfinite(c->v_scale)
             && c->v_scale > 0.0f))
        return PAGED_E_INVAL;
    return 0;
}

/* Checks the attention options; returns 0 or PAGED_E_INVAL for a non-finite parameter. */
static int check_opts(const pk_attn_opts *o)
{
    if (!isfinite(o->sm_scale))
        return PAGED_E_INVAL;
    if (isnan(o->soft_cap) || (o->soft_cap > 0.0f && !isfinite(o->soft_cap)))
        return PAGED_E_INVAL;
    return 0;
}

/*
 * Checks what decode and prefill share: the cache, the layer, the head counts, the query
 * dtype and the options. Returns 0 or a negative paged_error.
 */
static int check_attn(const pk_cache *c, int32_t layer, int32_t num_q_heads, int32_t q_dtype,
                      const pk_attn_opts *o)
{
    int err = pk_check_cache(c);
    if (err != 0)
        return err;
    if (layer < 0 || layer >= c->num_layers)
        return PAGED_E_LAYER;
    if (num_q_heads < 1 || num_q_heads % c->num_kv_heads != 0)
        return PAGED_E_HEADS;
    err = check_pair(c->dtype, q_dtype, 0);
    if (err != 0)
        return err;
    return check_opts(o);
}

/*
 * Checks the segmented form of an APPEND (k_seg not NULL): at least one segment, seg_indptr
 * from 0, never decreasing, ending at num_tokens, and a key and value source for every
 * segment that has tokens when any layer is written (else PAGED_E_INVAL); with seg_layer,
 * every segment's layers inside the pool (else PAGED_E_LAYER). Returns 0 or that error.
 */
static int check_segments(const pk_append_args *a)
{
    if (a->num_segments < 1 || a->seg_indptr == NULL || a->v_seg == NULL)
        return PAGED_E_INVAL;
    if (a->seg_indptr[0] != 0 || a->seg_indptr[a->num_segments] != a->num_tokens)
        return PAGED_E_INVAL;
    for (int32_t s = 0; s < a->num_segments; s++) {
        if (a->seg_indptr[s + 1] < a->seg_indptr[s])
            return PAGED_E_INVAL;
        if (a->seg_indptr[s + 1] > a->seg_indptr[s] && a->num_layers > 0
            && (a->k_seg[s] == NULL || a->v_seg[s] == NULL))
            return PAGED_E_INVAL;
        /* num_layers <= cache.num_layers was checked by the caller. */
        if (a->seg_layer != NULL
            && (a->seg_layer[s] < 0 || a->seg_layer[s] > a->cache.num_layers - a->num_layers))
            return PAGED_E_LAYER;
    }
    if (a->num_tokens > 0 && a->num_layers > 0 && a->slot_mapping == NULL)
        return PAGED_E_INVAL;
    return 0;
}

/* Checks an APPEND; returns 0 or a negative paged_error. */
int pk_check_append(const pk_append_args *a)
{
    int err = pk_check_cache(&a->cache);
    if (err != 0)
        return err;
    if (a->layer_begin < 0 || a->num_layers < 0
        || a->num_layers > a->cache.num_layers - a->layer_begin)
        return PAGED_E_LAYER;
    if (a->num_tokens < 0)
        return PAGED_E_INVAL;
    err = check_pair(a->cache.dtype, a->src_dtype, 1);
    if (err != 0)
        return err;
    if (a->k_seg != NULL)
        return check_segments(a);
    if (a->seg_layer != NULL)
        return PAGED_E_INVAL;     /* per-segment layers need segments */
    if (a->num_tokens > 0 && a->num_layers > 0
        && (a->k == NULL || a->v == NULL || a->slot_mapping == NULL))
        return PAGED_E_INVAL;
    return 0;
}

/* Checks a DECODE, each sequence's length and layer included; returns 0 or a negative paged_error. */
int pk_check_decode(const pk_decode_args *a)
{
    int err = check_attn(&a->cache, a->layer, a->num_q_heads, a->q_dtype, &a->opts);
    if (err != 0)
        return err;
    if (a->num_seqs < 0 || a->bt_stride < 0)
        return PAGED_E_INVAL;
    /* The fused append is a launch form of the CUDA kernels; here APPEND runs on its own. */
    if (a->new_k != NULL || a->new_v != NULL || a->new_k_seq != NULL || a->new_v_seq != NULL)
        return PAGED_E_NOTSUP;
    if (a->num_seqs == 0)
        return 0;
    if (a->block_tables == NULL || a->seq_lens == NULL)
        return PAGED_E_INVAL;
    if (a->q_seq != NULL) {
        if (a->out_seq == NULL)
            return PAGED_E_INVAL;
        for (int32_t s = 0; s < a->num_seqs; s++)
            if (a->q_seq[s] == NULL || a->out_seq[s] == NULL)
                return PAGED_E_INVAL;
    } else if (a->q == NULL || a->out == NULL) {
        return PAGED_E_INVAL;
    }
    int64_t covered = (int64_t) a->bt_stride * a->cache.block_size;
    for (int32_t s = 0; s < a->num_seqs; s++) {
        if (a->seq_lens[s] < 1 || a->seq_lens[s] > covered)
            return PAGED_E_SEQLEN;
        if (a->seq_layer != NULL && (a->seq_layer[s] < 0 || a->seq_layer[s] >= a->cache.num_layers))
            return PAGED_E_LAYER;
    }
    return 0;
}

/*
 * Checks a PREFILL: qo_indptr must start at 0, never decrease and end at total_q, and
 * every sequence must hold at least its query rows. max_qo_len is not needed on the CPU
 * and not checked. Returns 0 or a negative paged_error.
 */
int pk_check_prefill(const pk_prefill_args *a)
{
    int err = check_attn(&a->cache, a->layer, a->num_q_heads, a->q_dtype, &a->opts);
    if (err != 0)
        return err;
    if (a->num_seqs < 0 || a->bt_stride < 0 || a->total_q < 0)
        return PAGED_E_INVAL;
    if (a->num_seqs == 0)
        return a->total_q == 0 ? 0 : PAGED_E_INVAL;
    if (a->qo_indptr == NULL || a->block_tables == NULL || a->seq_lens == NULL)
        return PAGED_E_INVAL;
    if (a->total_q > 0 && (a->q == NULL || a->out == NULL))
        return PAGED_E_INVAL;
    if (a->qo_indptr[0] != 0 || a->qo_indptr[a->num_seqs] != a->total_q)
        return PAGED_E_INVAL;
    int64_t covered = (int64_t) a->bt_stride * a->cache.block_size;
    for (int32_t s = 0; s < a->num_seqs; s++) {
        if (a->qo_indptr[s + 1] < a->qo_indptr[s])
            return PAGED_E_INVAL;
        int32_t qo_len = a->qo_indptr[s + 1] - a->qo_indptr[s];
        if (a->seq_lens[s] < qo_len || a->seq_lens[s] > covered)
            return PAGED_E_SEQLEN;
    }
    return 0;
}

/* Checks a COPY; returns 0 or a negative paged_error. */
int pk_check_copy(const pk_copy_args *a)
{
    int err = pk_check_cache(&a->cache);
    if (err != 0)
        return err;
    if (a->num_pairs < 0)
        return PAGED_E_INVAL;
    if (a->num_pairs > 0 && (a->src_blocks == NULL || a->dst_blocks == NULL))
        return PAGED_E_INVAL;
    if (a->dst_base != NULL && a->dst_num_blocks < 1)
        return PAGED_E_GEOMETRY;
    return 0;
}
