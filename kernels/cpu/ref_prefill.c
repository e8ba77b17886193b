/* ref_prefill.c: the reference PREFILL, ragged query rows against a paged context. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>

#include "kernels/cpu/check.h"
#include "kernels/cpu/ref_attn.h"

/* Runs a whole PREFILL row by row and head by head; returns 0 or a negative paged_error. */
int pk_ref_prefill(const pk_prefill_args *a)
{
    int err = pk_check_prefill(a);
    if (err != 0)
        return err;
    if (a->num_seqs == 0)
        return 0;

    int32_t head_dim = a->cache.head_dim;
    int32_t group = a->num_q_heads / a->cache.num_kv_heads;
    int32_t max_len = 1;
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
            .layer = a->layer,
            .table = a->block_tables + (size_t) s * (size_t) a->bt_stride,
            .seq_len = a->seq_lens[s],
        };
        int32_t qo_len = a->qo_indptr[s + 1] - a->qo_indptr[s];
        for (int32_t r = 0; r < qo_len; r++) {
            /* Causal rows sit at the end of the context; without the mask all of them
             * stand at the last position, which is where the window is measured from. */
            int32_t pos = a->causal ? seq.seq_len - qo_len + r : seq.seq_len - 1;
            size_t row0 = ((size_t) a->qo_indptr[s] + (size_t) r) * (size_t) a->num_q_heads;
            for (int32_t h = 0; h < a->num_q_heads; h++) {
                pk_ref_load_row(qrow, a->q, row0 + (size_t) h, head_dim, a->q_dtype);
                pk_ref_query query = { .q_head = h, .kv_head = h / group, .pos = pos, .q = qrow };
                pk_ref_attend(&seq, &query, &a->opts, logits, orow);
                pk_ref_store_row(a->out, row0 + (size_t) h, head_dim, a->q_dtype, orow);
            }
        }
    }
    free(logits);
    free(qrow);
    free(orow);
    return 0;
}
