/* shapes.h: the kernel shapes paged-bench times, and the bytes and FLOPs each one must cost. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_BENCH_SHAPES_H
#define PAGED_TOOLS_BENCH_SHAPES_H

#include <stddef.h>
#include <stdint.h>

enum bk_op { BK_DECODE, BK_PREFILL, BK_APPEND };

/*
 * One timed case. decode: seqs sequences of ctx tokens, one query each. prefill: seqs
 * sequences of cached + qlen tokens whose last qlen are queries, causal. append: tokens
 * new tokens of layers layers in one request. Heads hq (query) over hkv (KV), head dim D,
 * block size B; kv_dtype is the cache's, q_dtype the queries' and outputs' (append: of the
 * new K and V).
 */
struct bk_shape {
    enum bk_op op;
    int32_t seqs, ctx, qlen, cached, tokens, layers;
    int32_t hq, hkv, D, B;
    int32_t kv_dtype, q_dtype;
};

/* Returns the shapes of op (the list, or the --quick one) and stores their number.
 * cpu picks smaller prefill shapes for the CPU backend's full run. */
const struct bk_shape *bk_shapes(enum bk_op op, int quick, int cpu, int *n);

/* Writes a short name of the shape ("16x8192x32/8", "8x2048+4096", "4096x32L") to buf. */
void bk_shape_name(const struct bk_shape *s, char *buf, size_t size);

/* Returns the bytes one run must move through memory at the least: each input read once,
 * each output written once (K/V, queries, outputs, block tables, lengths, slots). */
double bk_shape_bytes(const struct bk_shape *s);

/* Returns the K/V bytes of the cache one run reads (decode, prefill) or writes (append). */
double bk_shape_kv_bytes(const struct bk_shape *s);

/* Returns the FLOPs the attention must do: 4 * D per (query head, query, visible key), the
 * causal mask counted exactly (query r of qlen sees cached + r + 1 keys). */
double bk_shape_flops(const struct bk_shape *s);

/* Returns the blocks a sequence of len tokens needs. */
static inline int32_t bk_blocks(int32_t len, int32_t B)
{
    return (len + B - 1) / B;
}

#endif
