/* kcase.h: one kernel case laid out for timing: input sets to rotate, block tables, slots, arguments. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_BENCH_KCASE_H
#define PAGED_TOOLS_BENCH_KCASE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "tools/bench/shapes.h"

/*
 * A case is a shape times nsets independent input sets. The sets share one pool whose
 * blocks are a random permutation handed out set by set, so every set reads (or, for
 * append, writes) its own scattered blocks; each set has its own queries and outputs (for
 * append: its own new K and V). Rotating through the sets, run after run, keeps the
 * cache from holding what the next run reads. The host arrays here are laid out exactly
 * as the device copies are, so both backends build their arguments the same way.
 */
struct bk_case {
    const struct bk_shape *s;
    int nsets;
    pk_cache cache;             /* geometry; base is set by the backend */
    size_t in_bytes;            /* per set: queries (append: new K, and as much again for V) */
    size_t out_bytes;           /* per set: outputs (append: 0) */
    int32_t bt_stride;          /* block-table columns */
    size_t tables_per_set;      /* seqs * bt_stride */
    int32_t *tables;            /* [nsets][seqs][bt_stride] */
    int32_t *lens;              /* [seqs], the same in every set */
    int32_t *indptr;            /* prefill: [seqs + 1] */
    size_t slots_per_set;       /* append: tokens */
    int32_t *slots;             /* append: [nsets][tokens] */
};

/* Where a backend put a case's arrays: the same layouts as the host arrays, in its memory. */
struct bk_mem {
    void *pool;
    char *in;                   /* [nsets][in_bytes] (append: [nsets][2][in_bytes / 2]) */
    char *out;                  /* [nsets][out_bytes] */
    const int32_t *tables, *lens, *indptr, *slots;
    void *workspace;
    size_t workspace_size;
};

/* Returns how many sets to rotate: enough that together they exceed 4 times the cache
 * (one more than 4 * cache / set_bytes), at most what budget bytes hold (at least 1); with
 * quick, at most 4. */
int bk_sets(double set_bytes, size_t cache_bytes, double budget, int quick);

/* Lays out a case of shape s with nsets sets, block tables and slots drawn from seed.
 * Dies on failure. */
void bk_case_build(struct bk_case *c, const struct bk_shape *s, int nsets, uint64_t seed);

/* Frees the host arrays. */
void bk_case_free(struct bk_case *c);

/* Fills the arguments of set i of a case placed at m. */
void bk_case_decode_args(const struct bk_case *c, const struct bk_mem *m, int set, pk_decode_args *a);
void bk_case_prefill_args(const struct bk_case *c, const struct bk_mem *m, int set, pk_prefill_args *a);
void bk_case_append_args(const struct bk_case *c, const struct bk_mem *m, int set, pk_append_args *a);

/* The scale fp8 caches are filled and read with: values in [-1, 1) stored as x / scale. */
#define BK_FP8_SCALE 0.0078125f

#endif
