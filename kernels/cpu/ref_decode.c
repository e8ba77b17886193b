/* ref_decode.c: the reference DECODE, one query token per sequence. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

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

    int32_t group = a->num_q_heads / a->cache.num_kv_heads;
    pk_ref_rows rows;
    if (pk_ref_rows_init(&rows, a->seq_lens, a->num_seqs, a->cache.head_dim) != 0)
        return PAGED_E_NOMEM;
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
        pk_ref_attend_heads(&rows, &seq, q, out, row0, a->num_q_heads, group, seq.seq_len - 1, a->q_dtype, &a->opts);
    }
    pk_ref_rows_free(&rows);
    return 0;
}
