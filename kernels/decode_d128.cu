/* decode_d128.cu: the decode kernels of head dim 128 (one file per head dim so builds run in parallel). */
/* SPDX-License-Identifier: MIT */
#include "kernels/decode_impl.cuh"

PK_DECODE_INSTANCES(128)
