/* cpu_attn.h: the CPU backend's attention work item, shared by decode and prefill. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_CPU_CPU_ATTN_H
#define PAGED_KERNELS_CPU_CPU_ATTN_H

#include "kernels/kernels.h"

/*
 * Query vectors one pass over the keys serves: a KV row converted to float is used by
 * this many queries (the query heads of a GQA group, times query rows in prefill).
 */
#define PK_CPU_QVECS 8

/*
 * One work item: some consecutive query rows of one sequence, with every query head of
 * one KV head's group, against that sequence's paged context.
 */
typedef struct pk_cpu_rows {
    const pk_cache *cache;
    int32_t layer;
    const int32_t *table;         /* the sequence's block table */
    int32_t seq_len;
    int32_t kv_head;
    int32_t num_q_heads;          /* query heads per row (the row stride of q and out) */
    int32_t q_dtype;
    const void *q;                /* the item's first row: [rows][num_q_heads][head_dim] */
    void *out;                    /* same shape */
    int32_t rows;
    int32_t pos0;                 /* context position of row 0 */
    int32_t pos_step;             /* 1: row r stands at pos0 + r (causal); 0: all at pos0 */
    const pk_attn_opts *opts;
    const float *k_table;         /* fp8 caches: byte -> value, k_scale applied */
    const float *v_table;         /* same with v_scale */
} pk_cpu_rows;

/* Computes and stores the outputs of every (row, query head) of the item. */
void pk_cpu_attend_rows(const pk_cpu_rows *w);

#endif
