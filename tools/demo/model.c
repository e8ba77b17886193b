/* model.c: paged-demo's synthetic model: token ids, keys, values and queries made up on demand. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/demo/model.h"

#include "kernels/cpu/dtype.h"

/* Advances a splitmix64 state and returns the next value. */
uint64_t demo_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Returns a uniform value in [-1, 1) from 64 random bits. */
static float unit(uint64_t bits)
{
    return (float) ((double) (bits >> 11) * 0x1.0p-52 - 1.0);
}

/* Returns prefix token i: any fixed sequence of ids below a 32000-token vocabulary. */
int32_t demo_prefix_token(uint32_t i)
{
    return (int32_t) ((i * 7919u + 13u) % 32000u);
}

/* Returns the bytes of n tokens' K (or V) over all layers. */
size_t demo_kv_bytes(const struct demo_model *m, uint32_t n)
{
    return (size_t) m->num_layers * n * m->num_kv_heads * m->head_dim
           * paged_dtype_size(m->dtype);
}

/* Returns the bytes of n sequences' queries. */
size_t demo_q_bytes(const struct demo_model *m, uint32_t n)
{
    return (size_t) n * m->num_q_heads * m->head_dim * paged_dtype_size(m->dtype);
}

/* Fills K and V of n tokens from their ids and positions. */
void demo_model_kv(const struct demo_model *m, uint32_t n, const int32_t *tokens,
                   const int32_t *pos, void *k, void *v)
{
    size_t row = m->head_dim;
    for (uint32_t l = 0; l < m->num_layers; l++)
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t h = 0; h < m->num_kv_heads; h++) {
                /* One stream per (token, position, layer, head); K and V draw alternately. */
                uint64_t s = ((uint64_t) (uint32_t) tokens[i] << 32 | (uint32_t) pos[i])
                             ^ ((uint64_t) l * m->num_kv_heads + h) * 0xd1b54a32d192ed03u;
                size_t at = (((size_t) l * n + i) * m->num_kv_heads + h) * row;
                for (size_t d = 0; d < row; d++) {
                    pk_store(k, at + d, m->dtype, unit(demo_rand(&s)));
                    pk_store(v, at + d, m->dtype, unit(demo_rand(&s)));
                }
            }
}

/* Fills random queries. */
void demo_model_queries(const struct demo_model *m, uint64_t *rng, uint32_t n, void *q)
{
    size_t count = (size_t) n * m->num_q_heads * m->head_dim;
    for (size_t i = 0; i < count; i++)
        pk_store(q, i, m->dtype, unit(demo_rand(rng)));
}
