/* naive.h: test-side helpers for the kernel tests: stored values, random pools, a naive attention. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_KERNELS_NAIVE_H
#define PAGED_TESTS_KERNELS_NAIVE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "tests/tap/basic.h"

/*
 * Everything here is written independently of kernels/cpu/ (bar pk_store, whose rounding
 * dtype-t checks exhaustively): the layout formula, the decoding of stored bits, and the
 * attention, done in double over K and V gathered into contiguous arrays.
 */

/* Returns element i of an array of dtype, computed in double from the fields of its bits. */
double nv_value(const void *p, size_t i, int32_t dtype);

/* Returns the element offset of (layer, kv, block, head, token, dim 0) from the pool layout. */
size_t nv_offset(const pk_cache *c, int32_t layer, int32_t kv, int32_t block, int32_t head,
                 int32_t token);

/* Returns the number of elements of a whole pool. */
size_t nv_pool_elems(const pk_cache *c);

/* Fills n elements of dtype at p with NaN, so that any element a kernel should not read
 * poisons its result and any it should write but does not stays visible. */
void nv_poison(void *p, size_t n, int32_t dtype);

/* Stores a uniform random value in [-1, 1) as element i of dtype (fp8: value / scale). */
void nv_random(tap_rng *rng, void *p, size_t i, int32_t dtype, float scale);

/* Returns a random permutation of 0 .. n-1 (allocated; the caller frees it). */
int32_t *nv_permutation(tap_rng *rng, int32_t n);

/* Returns n random layers in [0, range), the first two different when there are two and the
 * range allows; bmalloc'd. */
int32_t *nv_random_layers(tap_rng *rng, int n, int32_t range);

/*
 * Returns block tables for nseqs sequences of the given lengths: bt_stride columns per
 * sequence, the blocks drawn without repetition from a random permutation of the pool's
 * num_blocks, the unused columns -1 (a kernel reading one fails under ASan).
 */
int32_t *nv_block_tables(tap_rng *rng, int nseqs, const int32_t *lens, int32_t block_size,
                         int32_t num_blocks, int32_t bt_stride);

/*
 * Fills the first len tokens of a sequence (every KV head, K and V, one layer) with fresh
 * random values; the rest of the pool keeps whatever it held.
 */
void nv_fill_seq(tap_rng *rng, const pk_cache *c, int32_t layer, const int32_t *table,
                 int32_t len);

/* Gathers the first len tokens of KV head h of a sequence into K and V ([len][D] doubles),
 * fp8 scales applied. */
void nv_gather(const pk_cache *c, int32_t layer, const int32_t *table, int32_t len, int32_t h,
               double *K, double *V);

/*
 * Computes in out (D doubles) the attention of query q (D doubles, query head q_head,
 * context position pos) over K and V (len rows) exactly as kernels.h defines it.
 */
void nv_attend(const double *q, int32_t q_head, int32_t pos, const double *K, const double *V,
               int32_t len, int32_t D, const pk_attn_opts *o, double *out);

/*
 * Returns 1 when every element of out (rows x D of dtype) is finite and close to want:
 * for f32 each row's relative L2 error is below 1e-5; for f16 and bf16 each element is
 * within two units in the last place of that type (plus 1e-6). Prints the worst miss as a
 * diagnostic when it fails, labelled with what.
 */
int nv_close(const void *out, int32_t dtype, const double *want, size_t rows, int32_t D,
             const char *what);

/*
 * Splits [0, items) into random chunks in random order: fills begin[] and end[] (room for
 * items + 1 entries each) and returns the number of chunks, one of which may be empty.
 */
size_t nv_split(tap_rng *rng, size_t items, size_t *begin, size_t *end);

/* Returns the name of a dtype for test messages. */
const char *nv_dtype_name(int32_t dtype);

/*
 * The CPU kernel tests' covering set, rather than the cross product: case c takes head dim
 * c % 5 of 64, 80, 96, 128 and 256, block size c % 3 of 8, 16 and 32, GQA group c % 4 of 1,
 * 2, 4 and 8, cache dtype (c / 4) % 4 of f32, f16, bf16 and fp8 (whose queries are f16, bf16
 * or f32 by (c / 16) % 3; other caches' queries are of their own dtype) and option bits
 * (c / 3) % 8 (nv_random_opts), so every value of each appears many times and every pair
 * of them meets.
 */
typedef struct nv_covering {
    int32_t D, B, G, dtype, q_dtype;
    int options;
} nv_covering;

/* Returns a pool of L layers, used blocks and up to 7 more, H KV heads of head dim D, blocks
 * of B tokens and dtype (fp8: random scales), its memory bmalloc'd and poisoned
 * (nv_poison). */
pk_cache nv_random_pool(tap_rng *rng, int32_t L, int32_t used, int32_t H, int32_t D, int32_t B, int32_t dtype);

/* Returns case c of the covering set. */
nv_covering nv_covering_case(int c);

/* Returns a context length: 1, one near a multiple of block, 2000, or spread log-uniformly. */
int32_t nv_pick_len(tap_rng *rng, int32_t block);

/*
 * Returns random attention options for head dim D and Hq query heads: a logit scale around
 * 1 / sqrt(D), and with option bit 1 a soft cap, bit 2 ALiBi slopes (bmalloc'd into *slopes,
 * else NULL), bit 4 a window of up to max_len + 16 tokens.
 */
pk_attn_opts nv_random_opts(tap_rng *rng, int options, int32_t D, int32_t Hq, int32_t max_len, float **slopes);

/* Fills buf with the start of a case's label: op, then the cache dtype, or for an fp8 cache
 * the query dtype. Returns nothing. */
void nv_case_prefix(char *buf, size_t size, const char *op, int32_t dtype, int32_t q_dtype);

/* Fills buf with a label naming the options set in o. Returns nothing. */
void nv_opts_label(char *buf, size_t size, const pk_attn_opts *o);

#endif
