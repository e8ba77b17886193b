/* ref_attn.h: the reference attention of one query over one sequence's paged context. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_CPU_REF_ATTN_H
#define PAGED_KERNELS_CPU_REF_ATTN_H

#include "kernels/kernels.h"

/* One sequence's context in one layer of a pool. */
typedef struct pk_ref_seq {
    const pk_cache *cache;
    int32_t layer;
    const int32_t *table;         /* the sequence's block table */
    int32_t seq_len;
} pk_ref_seq;

/* One query vector: its head, its position in the context and its values. */
typedef struct pk_ref_query {
    int32_t q_head;               /* picks the ALiBi slope */
    int32_t kv_head;              /* the KV head its GQA group reads */
    int32_t pos;                  /* keys j <= pos are visible, minus the window */
    const double *q;              /* head_dim values */
} pk_ref_query;

/*
 * Computes softmax(logits) V for query q over the context of seq as kernels.h defines it,
 * all in double, into out (head_dim doubles); logits is scratch for seq_len doubles.
 */
void pk_ref_attend(const pk_ref_seq *seq, const pk_ref_query *q, const pk_attn_opts *opts,
                   double *logits, double *out);

/* Loads row row (head_dim elements of a q/out tensor of dtype) into dst as doubles. */
void pk_ref_load_row(double *dst, const void *src, size_t row, int32_t head_dim, int32_t dtype);

/* Stores head_dim doubles as row row of a q/out tensor of dtype, rounded through float. */
void pk_ref_store_row(void *dst, size_t row, int32_t head_dim, int32_t dtype, const double *src);

/* The scratch of one reference call: the logits of its longest context, one query row and
 * one output row, in double. */
typedef struct pk_ref_rows {
    double *logits, *q, *o;
    int32_t head_dim;
} pk_ref_rows;

/* Attends the query rows of sequence s of a reference call: args is the call's
 * pk_decode_args or pk_prefill_args, rows its scratch, group its GQA group size (query heads
 * per KV head). Returns nothing. */
typedef void pk_ref_seq_fn(const void *args, int32_t s, pk_ref_rows *rows, int32_t group);

/* Runs a reference call whose shapes were checked over num_seqs sequences of cache with
 * num_q_heads query heads: fn for each sequence in order, with scratch for the longest of
 * seq_lens. Returns 0, or PAGED_E_NOMEM before any output is written. */
int pk_ref_each_seq(const pk_cache *cache, int32_t num_q_heads, const int32_t *seq_lens, int32_t num_seqs,
                    pk_ref_seq_fn *fn, const void *args);

/* Attends the num_q_heads query heads of one token at position pos of seq: row row0 + h of q
 * (dtype) through KV head h / group, each result stored as row row0 + h of out. Returns
 * nothing. */
void pk_ref_attend_heads(pk_ref_rows *r, const pk_ref_seq *seq, const void *q, void *out, size_t row0,
                         int32_t num_q_heads, int32_t group, int32_t pos, int32_t dtype, const pk_attn_opts *opts);

#endif
