/* prefill_d256.cu: the prefill kernels of head dim 256 (one file per head dim so builds run in parallel). */
/* SPDX-License-Identifier: MIT */
#include "kernels/prefill_impl.cuh"

PK_PREFILL_INSTANCES(256)
