/* cpu_rows.c: the CPU backend's conversions of stored rows to float. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "kernels/cpu/cpu_rows.h"

/* Fills the fp8 lookup table with every byte's value times scale. */
void pk_cpu_fp8_table(float *table, float scale)
{
    for (int b = 0; b < 256; b++)
        table[b] = pk_e4m3_to_f32((uint8_t) b) * scale;
}

/*
 * Converts a run of stored elements to floats, one loop per dtype so each loop is
 * branch-free, in groups of eight (which the compiler vectorizes at -O2 as it does
 * pk_cpu_dot) and a tail; returns where the floats are (base itself for f32).
 */
const float *pk_cpu_load(float *restrict dst, const void *restrict base, size_t first,
                         size_t count, int32_t dtype, const float *fp8_table)
{
    switch (dtype) {
    case PAGED_DTYPE_F32:
        return (const float *) base + first;
    case PAGED_DTYPE_F16: {
        const uint16_t *src = (const uint16_t *) base + first;
        size_t i = 0;
        for (; i + 8 <= count; i += 8)
            for (int k = 0; k < 8; k++)
                dst[i + k] = pk_cpu_f16_to_f32(src[i + k]);
        for (; i < count; i++)
            dst[i] = pk_cpu_f16_to_f32(src[i]);
        break;
    }
    case PAGED_DTYPE_BF16: {
        const uint16_t *src = (const uint16_t *) base + first;
        size_t i = 0;
        for (; i + 8 <= count; i += 8)
            for (int k = 0; k < 8; k++)
                dst[i + k] = pk_bits_f32((uint32_t) src[i + k] << 16);
        for (; i < count; i++)
            dst[i] = pk_bits_f32((uint32_t) src[i] << 16);
        break;
    }
    case PAGED_DTYPE_FP8_E4M3: {
        const uint8_t *src = (const uint8_t *) base + first;
        for (size_t i = 0; i < count; i++)
            dst[i] = fp8_table[src[i]];
        break;
    }
    default:
        break;
    }
    return dst;
}
