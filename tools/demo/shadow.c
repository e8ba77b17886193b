/* shadow.c: a worker's private copy of its sequences' K/V, and the reference check against it. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/demo/shadow.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/dtype.h"

/* Allocates the copy and its tables; returns PAGED_OK or PAGED_E_NOMEM. */
int demo_shadow_init(struct demo_shadow *sh, const struct demo_model *m, uint32_t num_seqs,
                     uint32_t max_tokens)
{
    memset(sh, 0, sizeof *sh);
    sh->model = m;
    sh->num_seqs = num_seqs;
    sh->blocks_per_seq = (max_tokens + m->block_size - 1) / m->block_size;
    sh->cache = (pk_cache) {
        .num_layers = (int32_t) m->num_layers,
        .num_blocks = (int32_t) (num_seqs * sh->blocks_per_seq),
        .num_kv_heads = (int32_t) m->num_kv_heads,
        .head_dim = (int32_t) m->head_dim,
        .block_size = (int32_t) m->block_size,
        .dtype = m->dtype,
        .k_scale = 1.0f,
        .v_scale = 1.0f,
    };
    sh->cache.base = calloc(1, pk_cache_bytes(&sh->cache));
    sh->tables = malloc((size_t) num_seqs * sh->blocks_per_seq * sizeof *sh->tables);
    sh->ref_out = malloc(demo_q_bytes(m, num_seqs));
    if (sh->cache.base == NULL || sh->tables == NULL || sh->ref_out == NULL) {
        demo_shadow_free(sh);
        return PAGED_E_NOMEM;
    }
    for (uint32_t i = 0; i < num_seqs * sh->blocks_per_seq; i++)
        sh->tables[i] = (int32_t) i;
    return PAGED_OK;
}

/* Frees everything the copy holds. */
void demo_shadow_free(struct demo_shadow *sh)
{
    free(sh->cache.base);
    free(sh->tables);
    free(sh->ref_out);
    memset(sh, 0, sizeof *sh);
}

/* Scatters n tokens into the copy with the reference APPEND; returns its result. */
int demo_shadow_append(struct demo_shadow *sh, uint32_t n, const uint32_t *seq,
                       const int32_t *pos, const void *k, const void *v)
{
    int32_t *slots = malloc((size_t) n * sizeof *slots);
    if (slots == NULL)
        return PAGED_E_NOMEM;
    for (uint32_t i = 0; i < n; i++)
        slots[i] = (int32_t) (seq[i] * sh->blocks_per_seq * sh->model->block_size) + pos[i];
    pk_append_args a = {
        .cache = sh->cache,
        .layer_begin = 0,
        .num_layers = sh->cache.num_layers,
        .num_tokens = (int32_t) n,
        .src_dtype = sh->model->dtype,
        .k = k,
        .v = v,
        .slot_mapping = slots,
    };
    int rc = pk_ref_append(&a);
    free(slots);
    return rc;
}

/* Runs the reference decode and counts sequences whose output is off; see shadow.h. */
long demo_shadow_check(struct demo_shadow *sh, int32_t layer, uint32_t num_seqs,
                       const int32_t *seq_lens, float sm_scale, const void *q, const void *out)
{
    const struct demo_model *m = sh->model;
    pk_decode_args a = {
        .cache = sh->cache,
        .layer = layer,
        .num_seqs = (int32_t) num_seqs,
        .num_q_heads = (int32_t) m->num_q_heads,
        .q_dtype = m->dtype,
        .q = q,
        .out = sh->ref_out,
        .block_tables = sh->tables,
        .bt_stride = (int32_t) sh->blocks_per_seq,
        .seq_lens = seq_lens,
        .opts = { .sm_scale = sm_scale },
    };
    int rc = pk_ref_decode(&a);
    if (rc < 0)
        return rc;
    /* The reference rounds a double result once; the daemon's float accumulation may land
     * one rounding step of the output dtype away, and bf16 steps are 2^-8 relative. */
    size_t per_seq = (size_t) m->num_q_heads * m->head_dim;
    long bad = 0;
    for (uint32_t s = 0; s < num_seqs; s++) {
        for (size_t i = s * per_seq; i < (s + 1) * per_seq; i++) {
            float want = pk_load(sh->ref_out, i, m->dtype);
            float got = pk_load(out, i, m->dtype);
            if (!(fabsf(got - want) <= 1e-3f + fabsf(want) / 64.0f)) {
                bad++;
                break;
            }
        }
    }
    return bad;
}
