/* prefix-hash-t.c: the chained prefix-block hashes of paged_hash_blocks. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>
#include <xxhash.h>

#include "paged.h"
#include "tests/tap/basic.h"

#define B 16                   /* tokens per block */
#define NB 6                   /* full blocks of the test sequence */
#define NTOK (NB * B + 5)      /* and a partial one */

/* Returns whether two hashes are equal. */
static int hash_eq(paged_hash x, paged_hash y)
{
    return x.lo == y.lo && x.hi == y.hi;
}

/* Returns how many of the first n hashes of x and y are equal. */
static int count_equal(const paged_hash *x, const paged_hash *y, int n)
{
    int same = 0;
    for (int i = 0; i < n; i++)
        same += hash_eq(x[i], y[i]);
    return same;
}

/* Hashes block 0 the documented way, straight through XXH3: the format client and daemon share. */
static paged_hash reference_first(const int32_t *tokens, uint64_t salt)
{
    unsigned char buf[3 * sizeof(uint64_t) + B * sizeof(int32_t)];
    uint64_t head[3] = { 0, 0, salt };
    memcpy(buf, head, sizeof head);
    memcpy(buf + sizeof head, tokens, B * sizeof(int32_t));
    XXH128_hash_t h = XXH3_128bits(buf, sizeof buf);
    paged_hash out = { h.low64, h.high64 };
    return out;
}

/* Runs the tests. */
int main(void)
{
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    plan_lazy();

    int32_t tok[NTOK], other[NTOK];
    for (int i = 0; i < NTOK; i++)
        tok[i] = (int32_t) tap_rng_below(&rng, 150000) + 1;
    uint64_t salt = tap_rng_u64(&rng) | 1;
    paged_hash h[NB + 1], g[NB + 1];
    paged_hash sentinel = { 0x5151515151515151ull, 0xa5a5a5a5a5a5a5a5ull };

    h[NB] = sentinel;
    is_int(NB, paged_hash_blocks(NULL, tok, NTOK, B, salt, h), "6 full blocks and 5 tokens: 6 hashes");
    ok(hash_eq(h[NB], sentinel), "the partial trailing block is not hashed");
    ok(hash_eq(h[0], reference_first(tok, salt)),
       "block 0 is XXH3-128 of (0, 0, salt, tokens) as documented");
    int distinct = 1;
    for (int i = 0; i < NB; i++)
        for (int j = 0; j < i; j++)
            distinct &= !hash_eq(h[i], h[j]);
    ok(distinct, "the 6 block hashes are distinct");

    is_int(NB, paged_hash_blocks(NULL, tok, NTOK, B, salt, g), "hashing again");
    is_int(NB, count_equal(h, g, NB), "the same sequence gives the same hashes");

    /* Chaining: a token of block 0 changes block 2 (and all), one of block 2 only 2 onward. */
    memcpy(other, tok, sizeof tok);
    other[3] ^= 0x40;
    paged_hash_blocks(NULL, other, NTOK, B, salt, g);
    ok(!hash_eq(g[2], h[2]), "hash of block 2 depends on block 0's tokens");
    is_int(0, count_equal(h, g, NB), "a change in block 0 changes every hash");
    memcpy(other, tok, sizeof tok);
    other[2 * B + 7] += 1;
    paged_hash_blocks(NULL, other, NTOK, B, salt, g);
    ok(count_equal(h, g, 2) == 2 && count_equal(h + 2, g + 2, NB - 2) == 0,
       "a change in block 2 keeps blocks 0-1 and changes blocks 2-5");

    /* Equal prefixes: share 3 blocks, then diverge. */
    memcpy(other, tok, sizeof tok);
    for (int i = 3 * B; i < NTOK; i++)
        other[i] = (int32_t) tap_rng_below(&rng, 150000) + 200000;
    paged_hash_blocks(NULL, other, NTOK, B, salt, g);
    ok(count_equal(h, g, 3) == 3 && count_equal(h + 3, g + 3, NB - 3) == 0,
       "sequences sharing 3 blocks share exactly 3 hashes");

    paged_hash_blocks(NULL, tok, NTOK, B, salt ^ 2, g);
    is_int(0, count_equal(h, g, NB), "another salt changes every hash");

    /* A parent continues a chain: hashing blocks 3.. with block 2's hash as parent. */
    is_int(NB - 3, paged_hash_blocks(&h[2], tok + 3 * B, NTOK - 3 * B, B, salt, g),
           "continuing from block 2's hash: 3 hashes");
    is_int(NB - 3, count_equal(h + 3, g, NB - 3), "a parent gives the longer sequence's hashes");
    paged_hash zero = { 0, 0 };
    paged_hash_blocks(&zero, tok, NTOK, B, salt, g);
    is_int(NB, count_equal(h, g, NB), "a zero parent equals no parent");

    paged_hash_blocks(NULL, tok, NTOK, B * 2, salt, g);
    ok(!hash_eq(g[0], h[0]) && !hash_eq(g[0], h[1]), "another block size gives other hashes");

    /* Errors and edge cases. */
    is_int(PAGED_E_INVAL, paged_hash_blocks(NULL, tok, NTOK, 0, salt, g), "block_size 0: PAGED_E_INVAL");
    is_int(PAGED_E_INVAL, paged_hash_blocks(NULL, NULL, NTOK, B, salt, g), "tokens NULL: PAGED_E_INVAL");
    is_int(PAGED_E_INVAL, paged_hash_blocks(NULL, tok, NTOK, B, salt, NULL), "out NULL: PAGED_E_INVAL");
    g[0] = sentinel;
    is_int(0, paged_hash_blocks(NULL, tok, B - 1, B, salt, g), "fewer tokens than a block: 0 hashes");
    ok(hash_eq(g[0], sentinel), "fewer tokens than a block: nothing written");
    is_int(0, paged_hash_blocks(NULL, NULL, 0, B, salt, NULL), "no tokens, NULL arrays: 0 hashes");
    is_int(1, paged_hash_blocks(NULL, tok, B, B, salt, g), "exactly one block: 1 hash");
    ok(hash_eq(g[0], h[0]), "exactly one block: the same first hash");
    return 0;
}
