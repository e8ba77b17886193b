/* dtype-t.c: exhaustive and randomized checks of the conversions in kernels/cpu/dtype.h. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cpu/cpu_rows.h"
#include "kernels/cpu/dtype.h"
#include "tests/kernels/naive.h"
#include "tests/tap/basic.h"

#define RANDOM_FLOATS 1000000

/* A narrow format as the reference rounding sees it. */
typedef struct format {
    const char *name;
    int32_t dtype;
    int mbits;                  /* stored mantissa bits */
    int emin;                   /* exponent of the smallest normal */
    double max;                 /* largest finite value */
    int saturates;              /* 1: overflow gives +-max (e4m3), 0: infinity */
} format;

static const format f16 = { "f16", PAGED_DTYPE_F16, 10, -14, 65504.0, 0 };
static const format bf16 = { "bf16", PAGED_DTYPE_BF16, 7, -126, 0x1.fep127, 0 };
static const format e4m3 = { "e4m3", PAGED_DTYPE_FP8_E4M3, 3, -6, 448.0, 1 };

/*
 * Returns x rounded to format f in double arithmetic, to nearest with ties to even:
 * x is cut at the format's unit in the last place for its binade (the subnormal unit
 * below the smallest normal), and overflow gives infinity or, for e4m3, +-448.
 */
static double round_ref(const format *f, double x)
{
    double a = fabs(x);
    if (isinf(a))
        return f->saturates ? copysign(f->max, x) : x;
    if (a == 0.0)
        return x;
    int e;
    frexp(a, &e);
    e -= 1;                     /* a in [2^e, 2^(e+1)) */
    if (e < f->emin)
        e = f->emin;
    double ulp = ldexp(1.0, e - f->mbits);
    double q = a / ulp, n = floor(q), rest = q - n;
    if (rest > 0.5 || (rest == 0.5 && fmod(n, 2.0) != 0.0))
        n += 1.0;
    double r = n * ulp;
    if (r > f->max)
        r = f->saturates ? f->max : INFINITY;
    return copysign(r, x);
}

/* Returns the bits pk_* store for x in format f. */
static unsigned to_bits(const format *f, float x)
{
    switch (f->dtype) {
    case PAGED_DTYPE_F16: return pk_f32_to_f16(x);
    case PAGED_DTYPE_BF16: return pk_f32_to_bf16(x);
    default: return pk_f32_to_e4m3(x);
    }
}

/* Returns the sign bit of stored bits of format f. */
static int sign_bit(const format *f, unsigned bits)
{
    return f->dtype == PAGED_DTYPE_FP8_E4M3 ? (bits >> 7) & 1 : (bits >> 15) & 1;
}

/* Returns the value of stored bits of format f, decoded from their fields. */
static double bits_value(const format *f, unsigned bits)
{
    uint16_t h = (uint16_t) bits;
    uint8_t q = (uint8_t) bits;
    return f->dtype == PAGED_DTYPE_FP8_E4M3 ? nv_value(&q, 0, f->dtype) : nv_value(&h, 0, f->dtype);
}

/*
 * Returns 1 if converting x to format f gives the reference rounding (same value, same
 * sign, so the same bits); counts and reports the first few misses through *misses.
 */
static int check_round(const format *f, float x, unsigned long *misses)
{
    unsigned bits = to_bits(f, x);
    double want = round_ref(f, x), got = bits_value(f, bits);
    if (got == want && sign_bit(f, bits) == (signbit(x) != 0))
        return 1;
    if ((*misses)++ < 5)
        diag("%s: %a (bits %#x) converts to %#x = %a, expected %a", f->name, (double) x, pk_f32_bits(x),
             bits, got, want);
    return 0;
}

/* Returns the number of stored bit patterns of format f. */
static unsigned patterns(const format *f)
{
    return f->dtype == PAGED_DTYPE_FP8_E4M3 ? 256u : 65536u;
}

/* Returns the float value pk_* decode stored bits of format f to. */
static float from_bits(const format *f, unsigned bits)
{
    switch (f->dtype) {
    case PAGED_DTYPE_F16: return pk_f16_to_f32((uint16_t) bits);
    case PAGED_DTYPE_BF16: return pk_bf16_to_f32((uint16_t) bits);
    default: return pk_e4m3_to_f32((uint8_t) bits);
    }
}

/* Checks the decoding of every bit pattern of f against its fields, and pk_load. */
static void test_decode(const format *f)
{
    unsigned long bad = 0, nans = 0;
    for (unsigned b = 0; b < patterns(f); b++) {
        float got = from_bits(f, b);
        double want = bits_value(f, b);
        union {
            float f;            /* room for whatever pk_load's switch could read */
            uint16_t h;
            uint8_t q;
        } u = { .f = 0 };
        if (f->dtype == PAGED_DTYPE_FP8_E4M3)
            u.q = (uint8_t) b;
        else
            u.h = (uint16_t) b;
        float loaded = pk_load(&u, 0, f->dtype);
        int same = isnan(want) ? isnan(got) && (signbit(got) != 0) == sign_bit(f, b)
                               : (double) got == want && (signbit(got) != 0) == sign_bit(f, b);
        same = same && pk_f32_bits(loaded) == pk_f32_bits(got);
        nans += isnan(want) != 0;
        if (!same && bad++ < 5)
            diag("%s: bits %#x decode to %a, expected %a", f->name, b, (double) got, want);
    }
    ok(bad == 0, "%s: all %u bit patterns decode to the value of their fields (%lu NaNs)", f->name,
       patterns(f), nans);
}

/* Checks that every finite value of f converts back to its own bits (zeros keep their sign). */
static void test_roundtrip(const format *f)
{
    unsigned long bad = 0, count = 0;
    for (unsigned b = 0; b < patterns(f); b++) {
        float x = from_bits(f, b);
        if (isnan(x))
            continue;
        count++;
        if (to_bits(f, x) != b && bad++ < 5)
            diag("%s: %a from bits %#x converts back to %#x", f->name, (double) x, b, to_bits(f, x));
    }
    ok(bad == 0, "%s: all %lu non-NaN values convert back to their own bits", f->name, count);
}

/*
 * Checks every halfway point between neighbouring finite values of f (and between the
 * largest and the next power of two), and the floats just either side of each.
 */
static void test_halfway(const format *f)
{
    unsigned long misses = 0, count = 0;
    unsigned top = f->dtype == PAGED_DTYPE_FP8_E4M3 ? 0x7eu : f->dtype == PAGED_DTYPE_F16 ? 0x7bffu : 0x7f7fu;
    for (unsigned b = 0; b <= top; b++) {
        double lo = bits_value(f, b);
        /* Past the largest value, the next one the exponent range would allow. */
        double hi = b < top ? bits_value(f, b + 1) : lo + ldexp(1.0, ilogb(lo) - f->mbits);
        double mid = (lo + hi) / 2;
        float x = (float) mid;
        if ((double) x != mid)
            bail("%s: halfway point %a is not a float", f->name, mid);
        const float probes[] = { x, nextafterf(x, 0.0f), nextafterf(x, INFINITY) };
        for (int i = 0; i < 3; i++) {
            count += 2;
            check_round(f, probes[i], &misses);
            check_round(f, -probes[i], &misses);
        }
    }
    ok(misses == 0, "%s: %lu halfway points and their neighbours round to nearest even", f->name, count);
}

/*
 * Checks random floats: any bit pattern but NaN (subnormals and infinities included),
 * then floats whose exponents lie in and around the range of f.
 */
static void test_random(const format *f, tap_rng *rng)
{
    unsigned long misses = 0, count = 0;
    while (count < RANDOM_FLOATS) {
        float x = pk_bits_f32((uint32_t) tap_rng_u64(rng));
        if (isnan(x))
            continue;
        check_round(f, x, &misses);
        count++;
    }
    ok(misses == 0, "%s: %lu random float bit patterns round as the reference does", f->name, count);
    misses = 0;
    int lo = f->emin - f->mbits - 3, hi = (int) ilogb(f->max) + 3;
    for (count = 0; count < RANDOM_FLOATS; count++) {
        int e = lo + (int) tap_rng_below(rng, (uint64_t) (hi - lo + 1));
        float x = ldexpf((float) tap_rng_uniform(rng, 1.0, 2.0), e);
        check_round(f, tap_rng_below(rng, 2) ? x : -x, &misses);
    }
    ok(misses == 0, "%s: %lu random floats of exponents %d..%d round as the reference does", f->name,
       count, lo, hi);
}

/* Checks that NaNs stay NaNs of the right sign and infinities overflow as the format says. */
static void test_specials(void)
{
    const uint32_t nan_bits[] = { 0x7fc00000u, 0x7f800001u, 0x7fbfffffu, 0x7fffffffu, 0x7f802000u };
    int good = 1;
    for (size_t i = 0; i < sizeof nan_bits / sizeof nan_bits[0]; i++)
        for (int neg = 0; neg < 2; neg++) {
            uint32_t sign = neg ? 0x80000000u : 0u;
            float x = pk_bits_f32(nan_bits[i] | sign);
            uint16_t h = pk_f32_to_f16(x), b = pk_f32_to_bf16(x);
            good &= (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0 && (h >> 15) == sign >> 31;
            good &= (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0 && (b >> 15) == sign >> 31;
            good &= isnan(pk_f16_to_f32(h)) && isnan(pk_bf16_to_f32(b));
        }
    ok(good, "f16, bf16: NaNs of any payload and sign convert to NaNs of that sign");

    good = 1;
    for (size_t i = 0; i < sizeof nan_bits / sizeof nan_bits[0]; i++) {
        good &= pk_f32_to_e4m3(pk_bits_f32(nan_bits[i])) == 0x7f;
        good &= pk_f32_to_e4m3(pk_bits_f32(nan_bits[i] | 0x80000000u)) == 0xff;
    }
    good &= isnan(pk_e4m3_to_f32(0x7f)) && isnan(pk_e4m3_to_f32(0xff));
    ok(good, "e4m3: NaN converts to 0x7f or 0xff by its sign, and those decode to NaN");

    ok(pk_f32_to_f16(INFINITY) == 0x7c00 && pk_f32_to_f16(-INFINITY) == 0xfc00
           && pk_f32_to_f16(65519.996f) == 0x7bff && pk_f32_to_f16(65520.0f) == 0x7c00
           && pk_f32_to_f16(FLT_MAX) == 0x7c00,
       "f16: infinities stay, 65520 and above overflow to infinity, just below rounds to 65504");
    ok(pk_f32_to_bf16(INFINITY) == 0x7f80 && pk_f32_to_bf16(-INFINITY) == 0xff80
           && pk_f32_to_bf16(FLT_MAX) == 0x7f80 && pk_f32_to_bf16(pk_bits_f32(0x7f7f7fffu)) == 0x7f7f,
       "bf16: infinities stay, the largest floats overflow to infinity");

    const float big[] = { 448.0f, 449.0f, 463.99f, 464.0f, 465.0f, 480.0f, 500.0f, 1e6f, FLT_MAX, INFINITY };
    good = 1;
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        good &= pk_f32_to_e4m3(big[i]) == 0x7e && pk_f32_to_e4m3(-big[i]) == 0xfe;
        if (pk_f32_to_e4m3(big[i]) != 0x7e)
            diag("e4m3: %g converts to %#x", (double) big[i], pk_f32_to_e4m3(big[i]));
    }
    good &= pk_e4m3_to_f32(0x7e) == 448.0f && pk_e4m3_to_f32(0xfe) == -448.0f;
    ok(good, "e4m3: 448 and everything above (infinity included) saturates to +-448");
    ok(pk_f32_to_e4m3(440.0f) == 0x7e && pk_f32_to_e4m3(432.0f) == 0x7e && pk_f32_to_e4m3(431.99f) == 0x7d,
       "e4m3: 432 (halfway 416..448, odd below) rounds up to 448, just below it to 416");
}

/* Checks the CPU backend's branch-free f16 decoder and its fp8 tables against dtype.h. */
static void test_cpu_rows(tap_rng *rng)
{
    unsigned long bad = 0;
    for (unsigned b = 0; b < 65536; b++)
        if (pk_f32_bits(pk_cpu_f16_to_f32((uint16_t) b)) != pk_f32_bits(pk_f16_to_f32((uint16_t) b))
            && bad++ < 5)
            diag("pk_cpu_f16_to_f32(%#x) = %a, pk_f16_to_f32 gives %a", b,
                 (double) pk_cpu_f16_to_f32((uint16_t) b), (double) pk_f16_to_f32((uint16_t) b));
    ok(bad == 0, "cpu rows: the branch-free f16 decoder gives pk_f16_to_f32's bits for all 65536");

    float table[256], scale = (float) tap_rng_uniform(rng, 0.001, 4.0);
    pk_cpu_fp8_table(table, scale);
    bad = 0;
    for (unsigned b = 0; b < 256; b++) {
        float want = pk_e4m3_to_f32((uint8_t) b) * scale;
        if (pk_f32_bits(table[b]) != pk_f32_bits(want) && !(isnan(want) && isnan(table[b])))
            bad++;
    }
    ok(bad == 0, "cpu rows: the fp8 table holds every byte's value times the scale %g", (double) scale);

    /* Rows of every type, of lengths around the eight-wide groups, through pk_cpu_load. */
    uint16_t h[67];
    uint8_t q[67];
    float f[67], dst[67];
    bad = 0;
    for (size_t n = 0; n <= 67; n++) {
        for (size_t i = 0; i < n; i++) {
            h[i] = (uint16_t) tap_rng_u64(rng);
            q[i] = (uint8_t) tap_rng_u64(rng);
            f[i] = (float) tap_rng_uniform(rng, -1, 1);
        }
        const float *r = pk_cpu_load(dst, h, 0, n, PAGED_DTYPE_F16, NULL);
        for (size_t i = 0; i < n; i++)
            bad += pk_f32_bits(r[i]) != pk_f32_bits(pk_f16_to_f32(h[i]));
        r = pk_cpu_load(dst, h, 0, n, PAGED_DTYPE_BF16, NULL);
        for (size_t i = 0; i < n; i++)
            bad += pk_f32_bits(r[i]) != pk_f32_bits(pk_bf16_to_f32(h[i]));
        r = pk_cpu_load(dst, q, 0, n, PAGED_DTYPE_FP8_E4M3, table);
        for (size_t i = 0; i < n; i++)
            bad += pk_f32_bits(r[i]) != pk_f32_bits(table[q[i]]);
        r = pk_cpu_load(dst, f, 0, n, PAGED_DTYPE_F32, NULL);
        for (size_t i = 0; i < n; i++)
            bad += r[i] != f[i];
    }
    ok(bad == 0, "cpu rows: pk_cpu_load converts rows of 0..67 elements of every dtype exactly");
}

/* Runs the checks of each format, then the special values and the CPU row helpers; returns 0. */
int main(void)
{
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    const format *formats[] = { &f16, &bf16, &e4m3 };
    plan(3 * 5 + 6 + 3);
    for (int i = 0; i < 3; i++) {
        test_decode(formats[i]);
        test_roundtrip(formats[i]);
        test_halfway(formats[i]);
        test_random(formats[i], &rng);
    }
    test_specials();
    test_cpu_rows(&rng);
    return 0;
}
