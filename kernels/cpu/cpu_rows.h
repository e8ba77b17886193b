/* cpu_rows.h: the CPU backend's row conversions and the float loops its kernels are built on. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_CPU_CPU_ROWS_H
#define PAGED_KERNELS_CPU_CPU_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/dtype.h"

/*
 * Returns the float value of binary16 bits h, exactly as pk_f16_to_f32 does, but without
 * branches so that a loop over a row vectorizes: the 15 magnitude bits moved into float
 * position make a float 2^112 times too small (normal or subnormal alike, and exactly),
 * and only the all-ones exponent of infinities and NaNs needs patching.
 */
static inline float pk_cpu_f16_to_f32(uint16_t h)
{
    uint32_t mag = (uint32_t) (h & 0x7fffu) << 13;
    uint32_t bits = pk_f32_bits(pk_bits_f32(mag) * 0x1p112f);
    bits |= mag >= (0x7c00u << 13) ? 0x7f800000u : 0u;
    return pk_bits_f32(bits | (uint32_t) (h & 0x8000u) << 16);
}

/*
 * Fills table (256 floats) with the value of every fp8 e4m3 byte times scale, the same
 * float product the reference computes, so reading an fp8 row is one lookup per element.
 */
void pk_cpu_fp8_table(float *table, float scale);

/*
 * Returns count elements of dtype starting at element first of base as floats: for f32
 * a pointer straight into base, otherwise dst (count floats) after converting into it;
 * fp8 goes through fp8_table (see pk_cpu_fp8_table). dtype is f32, f16, bf16 or fp8.
 */
const float *pk_cpu_load(float *restrict dst, const void *restrict base, size_t first,
                         size_t count, int32_t dtype, const float *fp8_table);

/*
 * Returns the dot product of a and b (n floats each). Eight partial sums make the loop
 * vectorize without reassociation flags; the order of additions differs from a plain
 * loop's, which is inside float rounding.
 */
static inline float pk_cpu_dot(const float *restrict a, const float *restrict b, int32_t n)
{
    float part[8] = { 0 };
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            part[k] += a[i + k] * b[i + k];
    for (; i < n; i++)
        part[0] += a[i] * b[i];
    return ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
}

/* Adds alpha * x to y (n floats each). */
static inline void pk_cpu_axpy(float *restrict y, float alpha, const float *restrict x, int32_t n)
{
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            y[i + k] += alpha * x[i + k];
    for (; i < n; i++)
        y[i] += alpha * x[i];
}

/* Multiplies y (n floats) by alpha. */
static inline void pk_cpu_scale(float *y, float alpha, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        y[i] *= alpha;
}

#endif
