/* shadow.h: a worker's private copy of its sequences' K/V, and the reference check against it. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_DEMO_SHADOW_H
#define PAGED_TOOLS_DEMO_SHADOW_H

#include <stdint.h>

#include "kernels/kernels.h"
#include "tools/demo/model.h"

/*
 * The daemon's outputs are checked against the CPU reference (pk_ref_decode) run on a copy
 * the worker keeps itself, in the pool's layout but its own memory: sequence s owns blocks
 * [s * blocks_per_seq, (s + 1) * blocks_per_seq) and token p sits in slot
 * s * blocks_per_seq * block_size + p. The copy never reads the pool, so a wrong APPEND, a
 * wrong adopted prefix block or a wrong DECODE all show up as a mismatch.
 */
struct demo_shadow {
    const struct demo_model *model;
    pk_cache cache;
    uint32_t num_seqs;
    uint32_t blocks_per_seq;
    int32_t *tables;            /* [num_seqs][blocks_per_seq]: the identity tables */
    void *ref_out;              /* scratch for reference outputs */
};

/* Sets up a copy for num_seqs sequences of up to max_tokens tokens. Returns PAGED_OK or
 * PAGED_E_NOMEM. */
int demo_shadow_init(struct demo_shadow *sh, const struct demo_model *m, uint32_t num_seqs,
                     uint32_t max_tokens);

/* Frees the copy. */
void demo_shadow_free(struct demo_shadow *sh);

/* Stores n tokens' K and V ([layer][i][kv_head][dim], as demo_model_kv makes them): token i
 * belongs to sequence seq[i] at position pos[i]. Returns PAGED_OK or the reference's error. */
int demo_shadow_append(struct demo_shadow *sh, uint32_t n, const uint32_t *seq,
                       const int32_t *pos, const void *k, const void *v);

/*
 * Computes the reference DECODE of one layer for the first num_seqs sequences with context
 * lengths seq_lens and queries q, and compares it with out (the daemon's answer), element
 * by element within a tolerance of one or two roundings to the model's dtype. Returns the
 * number of sequences whose output differs (0 when all match), or a negative paged_error
 * when the reference itself could not run.
 */
long demo_shadow_check(struct demo_shadow *sh, int32_t layer, uint32_t num_seqs,
                       const int32_t *seq_lens, float sm_scale, const void *q, const void *out);

#endif
