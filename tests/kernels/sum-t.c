/* sum-t.c: pk_unit_sum: the formula word by word, and what it tells apart (bit flips, swapped words, lengths). */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "tests/tap/basic.h"

/* The unit sizes checked against the reference, in bytes. */
static const uint64_t sizes[] = { 8, 16, 24, 4096, 65536 + 8, 1u << 20 };
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define NFLIPS 8      /* random one-bit flips per size */

/* Returns z through the mix of the definition, spelled as kernels.h spells it. */
static uint64_t ref_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Returns the unit sum of bytes bytes at p by the definition, one word at a time. */
static uint64_t ref_sum(const unsigned char *p, uint64_t bytes)
{
    uint64_t acc = 0;
    for (uint64_t i = 0; i < bytes / 8; i++) {
        unsigned char b[8];
        memcpy(b, p + 8 * i, 8);
        uint64_t w = 0;
        for (int j = 7; j >= 0; j--)
            w = w << 8 | b[j];          /* little-endian, whatever the host */
        acc += ref_mix(w ^ (UINT64_C(0x9e3779b97f4a7c15) * (i + 1)));
    }
    return ref_mix(acc + bytes);
}

/* Reports whether two sums are equal, printing both in hex when not; returns success. */
static int is_sum(uint64_t want, uint64_t got, const char *what)
{
    if (want != got)
        diag("wanted %016llx, got %016llx", (unsigned long long) want, (unsigned long long) got);
    return ok(want == got, "%s", what);
}

/* Fills n bytes (a multiple of 8) at p with random bits; returns nothing. */
static void random_bytes(tap_rng *rng, unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t x = tap_rng_u64(rng);
        memcpy(p + i, &x, 8);
    }
}

/* Checks one size: the reference, aligned and not, then flips and a swap; returns nothing. */
static void check_size(tap_rng *rng, uint64_t bytes)
{
    /* One byte more, so the unit can also sit at an odd address. */
    unsigned char *buf = bmalloc((size_t) bytes + 1);
    unsigned char *u = buf;
    random_bytes(rng, u, (size_t) bytes);
    const uint64_t want = ref_sum(u, bytes);
    char what[64];
    snprintf(what, sizeof what, "%llu bytes: the reference's sum", (unsigned long long) bytes);
    is_sum(want, pk_unit_sum(u, bytes), what);
    memmove(buf + 1, buf, (size_t) bytes);
    ok(pk_unit_sum(buf + 1, bytes) == want, "%llu bytes: the same at an odd address", (unsigned long long) bytes);
    memmove(buf, buf + 1, (size_t) bytes);

    int flips_ok = 1;
    for (int f = 0; f < NFLIPS; f++) {
        const uint64_t bit = tap_rng_below(rng, bytes * 8);
        u[bit / 8] ^= (unsigned char) (1u << (bit % 8));
        const uint64_t got = pk_unit_sum(u, bytes);
        if (got == want || got != ref_sum(u, bytes)) {
            diag("%llu bytes: flipping bit %llu: sum %016llx", (unsigned long long) bytes, (unsigned long long) bit,
                 (unsigned long long) got);
            flips_ok = 0;
        }
        u[bit / 8] ^= (unsigned char) (1u << (bit % 8));
    }
    ok(flips_ok, "%llu bytes: each of %d random one-bit flips changes the sum (to the reference's)",
       (unsigned long long) bytes, NFLIPS);

    if (bytes >= 16) {
        const uint64_t m = bytes / 8;
        uint64_t i = tap_rng_below(rng, m), j = tap_rng_below(rng, m - 1);
        if (j >= i)
            j++;
        uint64_t wi, wj;
        memcpy(&wi, u + 8 * i, 8);
        memcpy(&wj, u + 8 * j, 8);
        if (wi == wj) {             /* the odds are nil, but a swap of equal words changes nothing */
            wi ^= 1;
            memcpy(u + 8 * i, &wi, 8);
        }
        const uint64_t before = pk_unit_sum(u, bytes);
        memcpy(u + 8 * i, &wj, 8);
        memcpy(u + 8 * j, &wi, 8);
        const uint64_t after = pk_unit_sum(u, bytes);
        ok(after != before && after == ref_sum(u, bytes), "%llu bytes: swapping words %llu and %llu changes the sum",
           (unsigned long long) bytes, (unsigned long long) i, (unsigned long long) j);
    }
    free(buf);
}

/* Runs the cases; returns 0 (the TAP output carries the verdict). */
int main(void)
{
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    plan_lazy();

    for (size_t s = 0; s < NSIZES; s++)
        check_size(&rng, sizes[s]);

    static const unsigned char zeros[16];
    ok(pk_unit_sum(zeros, 8) != pk_unit_sum(zeros, 16), "units of zeros of 8 and 16 bytes differ (the length counts)");
    is_sum(ref_sum(zeros, 0), pk_unit_sum(zeros, 0), "an empty unit: the reference's");
    is_sum(ref_sum(zeros, 16), pk_unit_sum(zeros, 16), "16 bytes of zeros: the reference's");

    /* Known answers, computed apart from this file, so that the definition cannot drift with
     * the reference: bytes 0, 1, ..., 31; and zeros of 8 and 16 bytes. */
    unsigned char seq[32];
    for (int i = 0; i < 32; i++)
        seq[i] = (unsigned char) i;
    is_sum(UINT64_C(0x3e4123b3445a3d0b), pk_unit_sum(seq, 32), "bytes 0..31: the known answer");
    is_sum(UINT64_C(0x888bf34fdf06208b), pk_unit_sum(zeros, 8), "8 bytes of zeros: the known answer");
    is_sum(UINT64_C(0xf55364d1bdce1c61), pk_unit_sum(zeros, 16), "16 bytes of zeros: the known answer");
    return 0;
}
