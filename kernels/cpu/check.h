/* check.h: the argument checks the reference and the CPU backend kernels share. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_CPU_CHECK_H
#define PAGED_KERNELS_CPU_CHECK_H

#include "kernels/kernels.h"

/*
 * The largest head dimension the CPU kernels take: the backend keeps a few tiles of
 * head_dim floats on the stack (about 100 KiB in all at this size), so the bound keeps a
 * work item's stack use fixed whatever the pool.
 */
#define PK_CPU_MAX_HEAD_DIM 512

/*
 * Each returns 0 when the CPU kernels can run the op as given, else a negative
 * paged_error naming what is wrong. Besides the geometry and dtypes, they check what is
 * cheap to check on the host (sequence lengths against the block table width, query
 * offsets), but not block ids or slots: those the daemon validates.
 */
int pk_check_cache(const pk_cache *c);
int pk_check_append(const pk_append_args *a);
int pk_check_decode(const pk_decode_args *a);
int pk_check_prefill(const pk_prefill_args *a);
int pk_check_copy(const pk_copy_args *a);

#endif
