/* model.h: paged-demo's synthetic model: token ids, keys, values and queries made up on demand. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_DEMO_MODEL_H
#define PAGED_TOOLS_DEMO_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "paged.h"

/*
 * There is no network here: a token's keys and values are a pure function of its id and
 * position (and the layer, head and dimension), uniform in [-1, 1). So every worker can
 * produce the K and V of the shared prompt prefix on its own and get exactly what the
 * worker that published it wrote, which is what lets the demo check adopted blocks.
 */
struct demo_model {
    uint32_t num_layers;
    uint32_t num_kv_heads;
    uint32_t num_q_heads;       /* a multiple of num_kv_heads (GQA) */
    uint32_t head_dim;
    uint32_t block_size;
    paged_dtype dtype;          /* cache, queries and outputs */
    uint64_t salt;              /* the model's identity in prefix hashes */
};

/* Returns splitmix64's next value from *state: the demo's only random source. */
uint64_t demo_rand(uint64_t *state);

/* Returns token i of the prompt prefix every worker shares. */
int32_t demo_prefix_token(uint32_t i);

/* Returns the bytes of one tensor of n tokens' keys (or values) in every layer. */
size_t demo_kv_bytes(const struct demo_model *m, uint32_t n);

/*
 * Writes the keys and values of n tokens, token i with id tokens[i] at position pos[i] of
 * its sequence, as [layer][i][kv_head][dim] tensors of m->dtype (the layout APPEND takes
 * with PAGED_ALL_LAYERS) into k and v, each demo_kv_bytes(m, n) bytes.
 */
void demo_model_kv(const struct demo_model *m, uint32_t n, const int32_t *tokens,
                   const int32_t *pos, void *k, void *v);

/* Returns the bytes of the queries (or outputs) of n sequences: [n][q_heads][dim]. */
size_t demo_q_bytes(const struct demo_model *m, uint32_t n);

/* Writes random queries for n sequences into q (demo_q_bytes(m, n) bytes). */
void demo_model_queries(const struct demo_model *m, uint64_t *rng, uint32_t n, void *q);

#endif
