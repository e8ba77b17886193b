/* dtype.c: sizes and names of the element types. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "paged.h"

/* Returns the byte size of one element of dtype, 0 if dtype is not one. */
size_t paged_dtype_size(paged_dtype dtype)
{
    switch (dtype) {
    case PAGED_DTYPE_F32: return 4;
    case PAGED_DTYPE_F16: return 2;
    case PAGED_DTYPE_BF16: return 2;
    case PAGED_DTYPE_FP8_E4M3: return 1;
    default: return 0;
    }
}

/* Returns the short name of dtype, NULL if dtype is not one. */
const char *paged_dtype_name(paged_dtype dtype)
{
    switch (dtype) {
    case PAGED_DTYPE_F32: return "f32";
    case PAGED_DTYPE_F16: return "f16";
    case PAGED_DTYPE_BF16: return "bf16";
    case PAGED_DTYPE_FP8_E4M3: return "fp8_e4m3";
    default: return NULL;
    }
}
