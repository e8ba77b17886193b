/* validate-setup.h: the pools and allocator state fuzz-validate runs against, for its seeds too. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_FUZZ_VALIDATE_SETUP_H
#define PAGED_FUZZ_VALIDATE_SETUP_H

/*
 * The fuzzed client is FV_HOLDER; FV_OTHER is another holder. Each pool's allocator starts
 * fresh (it hands out 0, 1, 2, ... in order) and is brought, with q = num_blocks / 16, to:
 *   [0, q)        held by the client once: writable
 *   [q, 2q)       held by the client twice (forked): read only
 *   [2q, 3q)      held by the client, published from tokens FV_TOKENS_MINE + i: read only
 *   [3q, 4q)      held by the client once: writable
 *   [4q, 5q)      published by the other holder (tokens FV_TOKENS_OTHER + i) and found by the
 *                 client's LOOKUP: held by both, read only for the client
 *   [5q, 6q)      published by the other holder, then let go: cached, found by a LOOKUP of
 *                 the tokens after the first q blocks'
 *   [6q, 8q)      held by the other holder only: the client may not touch them
 *   [8q, 16q)     free
 * Hashes use salt FV_SALT and a zero parent; both holders publish and look up in the prefix
 * scope FV_TENANT.
 */

#include <stdint.h>

#include "daemon/alloc/alloc.h"

#define FV_HOLDER 7u
#define FV_OTHER 9u
#define FV_SALT 0u
#define FV_TENANT 0u
#define FV_TOKENS_MINE 5000
#define FV_TOKENS_OTHER 1000
#define FV_NUM_POOLS 6

/* One pool's geometry and the client's attachment to it. */
struct fv_pool {
    uint32_t id;
    uint32_t num_layers, num_kv_heads, head_dim, block_size, num_blocks;
    int32_t dtype;
    float k_scale, v_scale;
    int writable;
};

/* Pools 1-4: 2 layers, 2 KV heads, head_dim 64, block_size 8, 64 blocks, in f32, f16, bf16
 * and fp8 e4m3 (k_scale 0.5, v_scale 2); pool 5 the same in bf16 but attached read-only;
 * pool 6: 1 layer, 4 KV heads, head_dim 128, block_size 16, 32 blocks, f16. */
extern const struct fv_pool fv_pools[FV_NUM_POOLS];

/* Builds the allocator of a pool in the state above. Returns it, or NULL if a step failed. */
pa_alloc *fv_build_alloc(const struct fv_pool *s);

#endif
