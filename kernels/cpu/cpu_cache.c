/* cpu_cache.c: the CPU backend's cache writes, APPEND and COPY, split into work items. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include "kernels/cpu/check.h"
#include "kernels/cpu/cpu_rows.h"

/* Returns 0 if the CPU backend can run a, else a negative paged_error. */
int pk_cpu_append_check(const pk_append_args *a)
{
    return pk_check_append(a);
}

/* Returns the number of work items, one per (layer, token); 0 if a does not pass the check. */
size_t pk_cpu_append_items(const pk_append_args *a)
{
    if (pk_check_append(a) != 0)
        return 0;
    return (size_t) a->num_layers * (size_t) a->num_tokens;
}

/*
 * Writes one head's new row (head_dim elements at element src of the input) to element
 * dst of the cache: copied when the types match, else quantized to fp8 as value / scale.
 */
static void put_row(const pk_cache *c, size_t dst, const void *in, size_t src, int32_t src_dtype,
                    float scale)
{
    size_t esize = pk_dtype_size(c->dtype);
    if (src_dtype == c->dtype) {
        memcpy((char *) c->base + dst * esize, (const char *) in + src * pk_dtype_size(src_dtype),
               (size_t) c->head_dim * esize);
        return;
    }
    float tmp[PK_CPU_MAX_HEAD_DIM];
    const float *x = pk_cpu_load(tmp, in, src, (size_t) c->head_dim, src_dtype, NULL);
    uint8_t *q = (uint8_t *) c->base + dst;
    for (int32_t d = 0; d < c->head_dim; d++)
        q[d] = pk_f32_to_e4m3(x[d] / scale);
}

/*
 * Finds where token t of a checked APPEND reads from and goes to: stores the key and value
 * sources that hold it, its index within them, how many tokens they hold (a binary search
 * over seg_indptr in the segmented form) and the first layer it is written to (its
 * segment's, with seg_layer). Returns nothing.
 */
static void token_source(const pk_append_args *a, int32_t t, const void **k, const void **v,
                         size_t *index, size_t *tokens, int32_t *first_layer)
{
    *first_layer = a->layer_begin;
    if (a->k_seg == NULL) {
        *k = a->k;
        *v = a->v;
        *index = (size_t) t;
        *tokens = (size_t) a->num_tokens;
        return;
    }
    /* The last segment starting at or before t: empty segments before it are passed over. */
    int32_t lo = 0, hi = a->num_segments - 1;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (a->seg_indptr[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    *k = a->k_seg[lo];
    *v = a->v_seg[lo];
    *index = (size_t) (t - a->seg_indptr[lo]);
    *tokens = (size_t) (a->seg_indptr[lo + 1] - a->seg_indptr[lo]);
    *first_layer = pk_append_seg_layer(a, (size_t) lo);
}

/* Runs items [begin, end) of a checked APPEND; item i is layer i / T (counted from the token's
 * first layer), token i % T. */
void pk_cpu_append_run(const pk_append_args *a, size_t begin, size_t end)
{
    const pk_cache *c = &a->cache;
    size_t tokens = (size_t) a->num_tokens;
    size_t items = (size_t) a->num_layers * tokens;
    size_t row = (size_t) c->head_dim;
    for (size_t i = begin; i < end && i < items; i++) {
        size_t l = i / tokens, t = i % tokens;
        int32_t slot = a->slot_mapping[t];
        if (slot < 0)
            continue;
        const void *k, *v;
        size_t st, stokens;
        int32_t first_layer;
        token_source(a, (int32_t) t, &k, &v, &st, &stokens, &first_layer);
        int32_t layer = first_layer + (int32_t) l;
        int32_t block = slot / c->block_size, off = slot % c->block_size;
        for (int32_t h = 0; h < c->num_kv_heads; h++) {
            size_t src = ((l * stokens + st) * (size_t) c->num_kv_heads + (size_t) h) * row;
            put_row(c, pk_cache_index(c, layer, 0, block, h, off), k, src, a->src_dtype, c->k_scale);
            put_row(c, pk_cache_index(c, layer, 1, block, h, off), v, src, a->src_dtype, c->v_scale);
        }
    }
}

/* Returns 0 if the CPU backend can run a, else a negative paged_error. */
int pk_cpu_copy_check(const pk_copy_args *a)
{
    return pk_check_copy(a);
}

/*
 * Returns the number of work items, one per (pair, layer); 0 if a does not pass the
 * check. Items are independent when no destination block is named twice or is also a
 * source, which the daemon ensures.
 */
size_t pk_cpu_copy_items(const pk_copy_args *a)
{
    if (pk_check_copy(a) != 0)
        return 0;
    return (size_t) a->num_pairs * (size_t) a->cache.num_layers;
}

/* Runs items [begin, end) of a checked COPY; item i is pair i / L, layer i % L, K and V. */
void pk_cpu_copy_run(const pk_copy_args *a, size_t begin, size_t end)
{
    const pk_cache *c = &a->cache;
    size_t layers = (size_t) c->num_layers;
    size_t items = (size_t) a->num_pairs * layers;
    size_t esize = pk_dtype_size(c->dtype);
    size_t bytes = (size_t) c->num_kv_heads * (size_t) c->block_size * (size_t) c->head_dim * esize;
    pk_cache d = *c;
    if (a->dst_base != NULL) {
        d.base = a->dst_base;
        d.num_blocks = a->dst_num_blocks;
    }
    for (size_t i = begin; i < end && i < items; i++) {
        int32_t src = a->src_blocks[i / layers], dst = a->dst_blocks[i / layers];
        int32_t l = (int32_t) (i % layers);
        if (src == dst && a->dst_base == NULL)
            continue;
        for (int32_t kv = 0; kv < 2; kv++)
            memcpy((char *) d.base + pk_cache_index(&d, l, kv, dst, 0, 0) * esize,
                   (const char *) c->base + pk_cache_index(c, l, kv, src, 0, 0) * esize, bytes);
    }
}
