/* ref_prefill.c: the reference PREFILL, ragged query rows against a paged context. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "kernels/cpu/check.h"
#include "kernels/cpu/ref_attn.h"

/* Attends sequence s of a PREFILL (args): its query rows, row by row, on a->layer. Returns
 * nothing. */
static void prefill_seq(const void *args, int32_t s, pk_ref_rows *rows, int32_t group)
{
    const pk_prefill_args *a = args;
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
        pk_ref_attend_heads(rows, &seq, a->q, a->out, row0, a->num_q_heads, group, pos, a->q_dtype, &a->opts);
    }
}

/* Runs a whole PREFILL sequence by sequence, row by row and head by head; returns 0 or a
 * negative paged_error. */
int pk_ref_prefill(const pk_prefill_args *a)
{
    int err = pk_check_prefill(a);
    if (err != 0)
        return err;
    return pk_ref_each_seq(&a->cache, a->num_q_heads, a->seq_lens, a->num_seqs, prefill_seq, a);
}
