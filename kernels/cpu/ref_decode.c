/* ref_decode.c: the reference DECODE, one query token per sequence. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>

#include "kernels/cpu/check.h"
#include "kernels/cpu/ref_attn.h"

/* Runs a whole DECODE query head by query head, each sequence on its layer (seq_layer) or on
 * a->layer; returns 0 or a negative paged_error. */
int pk_ref_decode(const pk_decode_args *a)
{
    int err = pk_check_decode(a);
    if (err != 0)
        return err;
    if (a->num_seqs == 0)
        return 0;

    int32_t head_dim = a->cache.head_dim;
    int32_t group = a->num_q_heads / a->cache.num_kv_heads;
    int32_t max_len = 0;
    for (int32_t s = 0; s < a->num_seqs; s++)
        if (a->seq_lens[s] > max_len)
            max_len = a->seq_lens[s];
    double *logits = malloc((size_t) max_len * sizeof *logits);
    double *qrow = malloc((size_t) head_dim * sizeof *qrow);
    double *orow = malloc((size_t) head_dim * sizeof *orow);
    if (logits == NULL || qrow == NULL || orow == NULL) {
        free(logits);
        free(qrow);
        free(orow);
        return PAGED_E_NOMEM;
    }

    for (int32_t s = 0; s < a->num_seqs; s++) {
        pk_ref_seq seq = {
            .cache = &a->cache,
            .layer = pk_decode_seq_layer(a, s),
            .table = a->block_tables + (size_t) s * (size_t) a->bt_stride,
            .seq_len = a->seq_lens[s],
        };
        /* Either form is addressed as a base pointer and a row index. */
        const void *q = a->q_seq != NULL ? a->q_seq[s] : a->q;
        void *out = a->q_seq != NULL ? a->out_seq[s] : a->out;
        size_t row0 = a->q_seq != NULL ? 0 : (size_t) s * (size_t) a->num_q_heads;
        for (int32_t h = 0; h < a->num_q_heads; h++) {
            pk_ref_load_row(qrow, q, row0 + (size_t) h, head_dim, a->q_dtype);
            pk_ref_query query = {
                .q_head = h,
                .kv_head = h / group,
                .pos = seq.seq_len - 1,
                .q = qrow,
            };
            pk_ref_attend(&seq, &query, &a->opts, logits, orow);
            pk_ref_store_row(out, row0 + (size_t) h, head_dim, a->q_dtype, orow);
        }
    }
    free(logits);
    free(qrow);
    free(orow);
    return 0;
}
