/* shapes.c: the kernel shapes paged-bench times, and the bytes and FLOPs each one must cost. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/bench/shapes.h"

#include <stdio.h>

#include "kernels/kernels.h"

#define BF16 PAGED_DTYPE_BF16
#define FP8 PAGED_DTYPE_FP8_E4M3

/* Decode, as batch x context x q heads / KV heads: the list, then head dims 64 and
 * 256, groups of 16 and 32 query heads per KV head (split into sub-groups of 8 across CTAs)
 * and an fp8 cache on 64x2048x32/8 (the bf16 row it is compared with is the third). */
static const struct bk_shape decode_full[] = {
    { .op = BK_DECODE, .seqs = 1, .ctx = 4096, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 16, .ctx = 8192, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 64, .ctx = 2048, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 256, .ctx = 1024, .hq = 64, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 32, .ctx = 1024, .hq = 32, .hkv = 32, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 4, .ctx = 65536, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 64, .ctx = 2048, .hq = 32, .hkv = 8, .D = 64, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 64, .ctx = 2048, .hq = 32, .hkv = 8, .D = 256, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 64, .ctx = 2048, .hq = 64, .hkv = 4, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 64, .ctx = 2048, .hq = 128, .hkv = 4, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 64, .ctx = 2048, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = FP8, .q_dtype = BF16 },
};

/* The same list shrunk for --quick, row for row (the fp8 comparison stays third and last). */
static const struct bk_shape decode_quick[] = {
    { .op = BK_DECODE, .seqs = 1, .ctx = 256, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 2, .ctx = 512, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 4, .ctx = 128, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 8, .ctx = 64, .hq = 64, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 4, .ctx = 64, .hq = 32, .hkv = 32, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 1, .ctx = 1024, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 4, .ctx = 128, .hq = 32, .hkv = 8, .D = 64, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 4, .ctx = 128, .hq = 32, .hkv = 8, .D = 256, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 4, .ctx = 128, .hq = 64, .hkv = 4, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 4, .ctx = 128, .hq = 128, .hkv = 4, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_DECODE, .seqs = 4, .ctx = 128, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = FP8, .q_dtype = BF16 },
};

/* Prefill: 8 sequences x 2048 new tokens on 0 and on 4096 cached tokens, 32/8 heads, causal. */
static const struct bk_shape prefill_full[] = {
    { .op = BK_PREFILL, .seqs = 8, .qlen = 2048, .cached = 0, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_PREFILL, .seqs = 8, .qlen = 2048, .cached = 4096, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
};

/* The CPU backend's full run: the GPU shapes would take minutes per run on a small CPU. */
static const struct bk_shape prefill_cpu[] = {
    { .op = BK_PREFILL, .seqs = 2, .qlen = 256, .cached = 0, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_PREFILL, .seqs = 2, .qlen = 256, .cached = 1024, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
};

static const struct bk_shape prefill_quick[] = {
    { .op = BK_PREFILL, .seqs = 2, .qlen = 32, .cached = 0, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
    { .op = BK_PREFILL, .seqs = 2, .qlen = 32, .cached = 64, .hq = 32, .hkv = 8, .D = 128, .B = 16,
      .kv_dtype = BF16, .q_dtype = BF16 },
};

/* Append: 4096 tokens x 32 layers in one request, 8 KV heads, D 128, bf16. */
static const struct bk_shape append_full[] = {
    { .op = BK_APPEND, .tokens = 4096, .layers = 32, .hkv = 8, .D = 128, .B = 16, .kv_dtype = BF16, .q_dtype = BF16 },
};

static const struct bk_shape append_quick[] = {
    { .op = BK_APPEND, .tokens = 64, .layers = 4, .hkv = 8, .D = 128, .B = 16, .kv_dtype = BF16, .q_dtype = BF16 },
};

#define COUNT(a) ((int) (sizeof(a) / sizeof((a)[0])))

/* Returns the shape list of op. */
const struct bk_shape *bk_shapes(enum bk_op op, int quick, int cpu, int *n)
{
    switch (op) {
    case BK_DECODE:
        *n = quick ? COUNT(decode_quick) : COUNT(decode_full);
        return quick ? decode_quick : decode_full;
    case BK_PREFILL:
        if (quick) {
            *n = COUNT(prefill_quick);
            return prefill_quick;
        }
        *n = cpu ? COUNT(prefill_cpu) : COUNT(prefill_full);
        return cpu ? prefill_cpu : prefill_full;
    default:
        *n = quick ? COUNT(append_quick) : COUNT(append_full);
        return quick ? append_quick : append_full;
    }
}

/* Writes the shape's short name. */
void bk_shape_name(const struct bk_shape *s, char *buf, size_t size)
{
    switch (s->op) {
    case BK_DECODE:
        snprintf(buf, size, "%dx%dx%d/%d", (int) s->seqs, (int) s->ctx, (int) s->hq, (int) s->hkv);
        break;
    case BK_PREFILL:
        snprintf(buf, size, "%dx%d+%d", (int) s->seqs, (int) s->qlen, (int) s->cached);
        break;
    default:
        snprintf(buf, size, "%dx%dL", (int) s->tokens, (int) s->layers);
        break;
    }
}

/* Returns the K/V bytes of the cache one run touches. */
double bk_shape_kv_bytes(const struct bk_shape *s)
{
    double row = 2.0 * s->hkv * s->D * (double) pk_dtype_size(s->kv_dtype);  /* K and V of one token */
    switch (s->op) {
    case BK_DECODE: return (double) s->seqs * s->ctx * row;
    case BK_PREFILL: return (double) s->seqs * (s->cached + s->qlen) * row;
    default: return (double) s->tokens * s->layers * row;
    }
}

/* Returns the least bytes one run moves. */
double bk_shape_bytes(const struct bk_shape *s)
{
    double qs = (double) pk_dtype_size(s->q_dtype);
    double kv = bk_shape_kv_bytes(s);
    switch (s->op) {
    case BK_DECODE: {
        double q = (double) s->seqs * s->hq * s->D * qs;
        double meta = (double) s->seqs * (bk_blocks(s->ctx, s->B) + 1) * 4.0;
        return kv + 2.0 * q + meta;
    }
    case BK_PREFILL: {
        double q = (double) s->seqs * s->qlen * s->hq * s->D * qs;
        double meta = (double) s->seqs * (bk_blocks(s->cached + s->qlen, s->B) + 2) * 4.0 + 4.0;
        return kv + 2.0 * q + meta;
    }
    default: {
        /* The new K and V read in their own dtype, written in the cache's, plus the slots. */
        double src = (double) s->tokens * s->layers * 2.0 * s->hkv * s->D * qs;
        return kv + src + (double) s->tokens * 4.0;
    }
    }
}

/* Returns the FLOPs of the attention. */
double bk_shape_flops(const struct bk_shape *s)
{
    double per_key = 4.0 * s->D * s->hq;   /* q.k and p.v, a multiply and an add each */
    switch (s->op) {
    case BK_DECODE: return (double) s->seqs * s->ctx * per_key;
    case BK_PREFILL: {
        double q = s->qlen, keys = q * s->cached + q * (q + 1.0) / 2.0;
        return (double) s->seqs * keys * per_key;
    }
    default: return 0.0;
    }
}
