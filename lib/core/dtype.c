/* dtype.c: sizes and names of the element types. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "paged.h"
#include "kernels/kernels.h"

/* Returns the byte size of one element of dtype, 0 if dtype is not one: the kernels' own
 * pk_dtype_size, so that what a client sizes is what the kernels lay out. The one definition
 * is theirs, a static inline of kernels/kernels.h, because device code cannot call into a
 * library and the kernels depend on nothing but paged.h's enums; the core reading their
 * header keeps it so, where the kernels calling the core would tie them to libpaged. */
size_t paged_dtype_size(paged_dtype dtype)
{
    return pk_dtype_size((int32_t) dtype);
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
