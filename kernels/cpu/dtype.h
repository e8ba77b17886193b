/* dtype.h: exact conversions between float and the stored element types (f16, bf16, fp8 e4m3). */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_CPU_DTYPE_H
#define PAGED_KERNELS_CPU_DTYPE_H

/*
 * Every conversion to a narrower type rounds to nearest, ties to even, as the CUDA
 * intrinsics do (__float2half_rn, __float2bfloat16_rn, __nv_cvt_float_to_fp8 with
 * __NV_SATFINITE and __NV_E4M3), so CPU and GPU store identical bits for identical input.
 * fp8 e4m3 is the OCP "fn" variant: bias 7, no infinities, 0x7f/0xff are NaN, largest
 * finite 448; conversion saturates to +-448.
 */

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "paged.h"

/* Returns the bits of f. */
static inline uint32_t pk_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Returns the float with bits u. */
static inline float pk_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Returns f rounded to the nearest binary16 (ties to even), as bits. */
static inline uint16_t pk_f32_to_f16(float f)
{
    uint32_t x = pk_f32_bits(f);
    uint16_t sign = (uint16_t) ((x >> 16) & 0x8000u);
    uint32_t a = x & 0x7fffffffu;
    if (a >= 0x7f800000u)                       /* infinity or NaN (kept quiet) */
        return sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u);
    if (a >= 0x477ff000u)                       /* 65520 and above round to infinity */
        return sign | 0x7c00u;
    if (a < 0x38800000u) {                      /* below 2^-14: a subnormal half (or zero) */
        float scaled = pk_bits_f32(a) * 16777216.0f;   /* in units of 2^-24, exact */
        return sign | (uint16_t) rintf(scaled);        /* 1024 becomes the smallest normal */
    }
    uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
    return sign | (uint16_t) ((rounded - 0x38000000u) >> 13);
}

/* Returns the float value of binary16 bits h. */
static inline float pk_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t) (h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = ldexpf((float) m, -24);
        return sign ? -v : v;
    }
    if (e == 31)
        return pk_bits_f32(sign | 0x7f800000u | (m << 13));
    return pk_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* Returns f rounded to the nearest bfloat16 (ties to even), as bits. */
static inline uint16_t pk_f32_to_bf16(float f)
{
    uint32_t x = pk_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t) ((x >> 16) | 0x40u);  /* NaN stays a quiet NaN */
    return (uint16_t) ((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* Returns the float value of bfloat16 bits b. */
static inline float pk_bf16_to_f32(uint16_t b)
{
    return pk_bits_f32((uint32_t) b << 16);
}

/* Returns f rounded to the nearest fp8 e4m3 (ties to even, saturating at +-448), as bits. */
static inline uint8_t pk_f32_to_e4m3(float f)
{
    uint8_t sign = (uint8_t) ((pk_f32_bits(f) >> 24) & 0x80u);
    float a = fabsf(f);
    if (isnan(f))
        return sign | 0x7fu;
    if (a >= 448.0f)
        return sign | 0x7eu;
    if (a < 0.015625f)                          /* below 2^-6: subnormal, units of 2^-9 */
        return sign | (uint8_t) rintf(a * 512.0f);  /* 8 becomes the smallest normal */
    int e;
    float frac = frexpf(a, &e);                 /* a = frac * 2^e, frac in [0.5, 1) */
    int m = (int) rintf((frac * 2.0f - 1.0f) * 8.0f);
    e -= 1;                                     /* a = (1 + m/8) * 2^e */
    if (m == 8) {
        m = 0;
        e += 1;
    }
    return sign | (uint8_t) (((e + 7) << 3) | m);
}

/* Returns the float value of fp8 e4m3 bits q. */
static inline float pk_e4m3_to_f32(uint8_t q)
{
    int e = (q >> 3) & 0xf, m = q & 0x7;
    float v;
    if (e == 0xf && m == 0x7)
        v = NAN;
    else if (e == 0)
        v = ldexpf((float) m, -9);
    else
        v = ldexpf(1.0f + (float) m / 8.0f, e - 7);
    return (q & 0x80u) ? -v : v;
}

/* Returns element i of an array of dtype as a float (fp8 unscaled). */
static inline float pk_load(const void *p, size_t i, int32_t dtype)
{
    switch (dtype) {
    case PAGED_DTYPE_F32: return ((const float *) p)[i];
    case PAGED_DTYPE_F16: return pk_f16_to_f32(((const uint16_t *) p)[i]);
    case PAGED_DTYPE_BF16: return pk_bf16_to_f32(((const uint16_t *) p)[i]);
    case PAGED_DTYPE_FP8_E4M3: return pk_e4m3_to_f32(((const uint8_t *) p)[i]);
    default: return NAN;
    }
}

/* Stores v, rounded to dtype, as element i of an array of dtype (fp8 unscaled). */
static inline void pk_store(void *p, size_t i, int32_t dtype, float v)
{
    switch (dtype) {
    case PAGED_DTYPE_F32: ((float *) p)[i] = v; break;
    case PAGED_DTYPE_F16: ((uint16_t *) p)[i] = pk_f32_to_f16(v); break;
    case PAGED_DTYPE_BF16: ((uint16_t *) p)[i] = pk_f32_to_bf16(v); break;
    case PAGED_DTYPE_FP8_E4M3: ((uint8_t *) p)[i] = pk_f32_to_e4m3(v); break;
    default: break;
    }
}

#endif
