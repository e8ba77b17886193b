/* ref_cache.c: the reference cache writes, APPEND (with fp8 quantization) and COPY. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include "kernels/cpu/check.h"
#include "kernels/cpu/dtype.h"

/*
 * Writes one element of a new key or value into the cache: the same type is copied bit
 * for bit (so even a NaN payload survives), an fp8 cache stores value / scale rounded.
 */
static void ref_put(const pk_cache *c, size_t dst, const void *src, size_t i, int32_t src_dtype,
                    float scale)
{
    size_t size = pk_dtype_size(c->dtype);
    if (src_dtype == c->dtype) {
        memcpy((char *) c->base + dst * size, (const char *) src + i * size, size);
        return;
    }
    pk_store(c->base, dst, c->dtype, pk_load(src, i, src_dtype) / scale);
}

/*
 * Writes tokens [t0, t1) of an APPEND whose sources k and v ([num_layers][t1 - t0][H][D]
 * each) hold just those tokens, into layers [first_layer, + num_layers), element by element;
 * returns nothing.
 */
static void ref_append_tokens(const pk_append_args *a, int32_t first_layer, int32_t t0, int32_t t1,
                              const void *k, const void *v)
{
    const pk_cache *c = &a->cache;
    size_t tokens = (size_t) (t1 - t0);
    for (int32_t l = 0; l < a->num_layers; l++) {
        for (int32_t t = t0; t < t1; t++) {
            int32_t slot = a->slot_mapping[t];
            if (slot < 0)
                continue;
            for (int32_t h = 0; h < c->num_kv_heads; h++) {
                size_t src = (((size_t) l * tokens + (size_t) (t - t0))
                              * (size_t) c->num_kv_heads + (size_t) h) * (size_t) c->head_dim;
                int32_t layer = first_layer + l;
                int32_t block = slot / c->block_size, off = slot % c->block_size;
                size_t kdst = pk_cache_index(c, layer, 0, block, h, off);
                size_t vdst = pk_cache_index(c, layer, 1, block, h, off);
                for (int32_t d = 0; d < c->head_dim; d++) {
                    ref_put(c, kdst + (size_t) d, k, src + (size_t) d, a->src_dtype, c->k_scale);
                    ref_put(c, vdst + (size_t) d, v, src + (size_t) d, a->src_dtype, c->v_scale);
                }
            }
        }
    }
}

/* Runs a whole APPEND element by element, segment by segment (each from its own first layer
 * with seg_layer) in the segmented form; returns 0 or a negative paged_error. */
int pk_ref_append(const pk_append_args *a)
{
    int err = pk_check_append(a);
    if (err != 0)
        return err;
    if (a->k_seg == NULL) {
        ref_append_tokens(a, a->layer_begin, 0, a->num_tokens, a->k, a->v);
        return 0;
    }
    for (int32_t s = 0; s < a->num_segments; s++)
        ref_append_tokens(a, pk_append_seg_layer(a, (size_t) s), a->seg_indptr[s],
                          a->seg_indptr[s + 1], a->k_seg[s], a->v_seg[s]);
    return 0;
}

/* Runs a whole COPY pair by pair, in order; returns 0 or a negative paged_error. */
int pk_ref_copy(const pk_copy_args *a)
{
    int err = pk_check_copy(a);
    if (err != 0)
        return err;
    const pk_cache *c = &a->cache;
    size_t esize = pk_dtype_size(c->dtype);
    size_t block_elems = (size_t) c->num_kv_heads * (size_t) c->block_size * (size_t) c->head_dim;
    pk_cache d = *c;
    if (a->dst_base != NULL) {
        d.base = a->dst_base;
        d.num_blocks = a->dst_num_blocks;
    }
    for (int32_t i = 0; i < a->num_pairs; i++) {
        if (a->src_blocks[i] == a->dst_blocks[i] && a->dst_base == NULL)
            continue;
        for (int32_t l = 0; l < c->num_layers; l++) {
            for (int32_t kv = 0; kv < 2; kv++) {
                size_t src = pk_cache_index(c, l, kv, a->src_blocks[i], 0, 0);
                size_t dst = pk_cache_index(&d, l, kv, a->dst_blocks[i], 0, 0);
                memcpy((char *) d.base + dst * esize, (const char *) c->base + src * esize,
                       block_elems * esize);
            }
        }
    }
    return 0;
}
