/* prefill.cuh: what the prefill entry point shares with the per-head-dim prefill kernel instances. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_PREFILL_CUH
#define PAGED_KERNELS_PREFILL_CUH

#include "kernels/common.cuh"

/*
 * The prefill kernel of one (head dim, cache dtype, query dtype): launches it on stream for
 * the (already checked) arguments and returns 0 or a negative paged_error. Defined in
 * prefill_impl.cuh, instantiated in prefill_d*.cu.
 */
template <int D, typename KT, typename QT> int pk_prefill_run(const pk_prefill_args *a, cudaStream_t stream);

#endif
