/* sum.c: paged's unit sum on the CPU: the 64-bit check of one KV unit (see pk_unit_sum in kernels.h). */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

/* The odd constant whose multiples key each word by its position (word i gets it times i + 1). */
#define PK_SUM_KEY 0x9e3779b97f4a7c15ull

/* Returns z mixed by the splitmix64 finalizer (a bijection of the 64-bit words). */
static inline uint64_t pk_sum_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Returns the little-endian 64-bit word at p (any alignment). */
static inline uint64_t pk_sum_load(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof w);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

/*
 * Four words per step, in four sums, so that the four mixes (two multiplications each) run
 * side by side rather than one after another; the keys step by 4 * PK_SUM_KEY.
 */
uint64_t pk_unit_sum(const void *unit, uint64_t bytes)
{
    const unsigned char *p = unit;
    const uint64_t m = bytes / 8;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    uint64_t k = PK_SUM_KEY;                /* the key of word i: PK_SUM_KEY * (i + 1) */
    uint64_t i = 0;
    for (; i + 4 <= m; i += 4, p += 32, k += 4 * PK_SUM_KEY) {
        a0 += pk_sum_mix(pk_sum_load(p) ^ k);
        a1 += pk_sum_mix(pk_sum_load(p + 8) ^ (k + PK_SUM_KEY));
        a2 += pk_sum_mix(pk_sum_load(p + 16) ^ (k + 2 * PK_SUM_KEY));
        a3 += pk_sum_mix(pk_sum_load(p + 24) ^ (k + 3 * PK_SUM_KEY));
    }
    for (; i < m; i++, p += 8, k += PK_SUM_KEY)
        a0 += pk_sum_mix(pk_sum_load(p) ^ k);
    return pk_sum_mix(a0 + a1 + a2 + a3 + bytes);
}
