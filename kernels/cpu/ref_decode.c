/* ref_decode.c: the reference DECODE, one query token per sequence. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "kernels/cpu/check.h"
#include "kernels/cpu/ref_attn.h"

/* Attends sequence s of a DECODE (args): its one query token, at the end of its context, on
 * its layer (seq_layer) or on a->layer. Returns nothing. */
static void decode_seq(const void *args, int32_t s, pk_ref_rows *rows, int32_t group)
{
    const pk_decode_args *a = args;
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
    pk_ref_attend_heads(rows, &seq, q, out, row0, a->num_q_heads, group, seq.seq_len - 1, a->q_dtype, &a->opts);
}

/* Runs a whole DECODE sequence by sequence, query head by query head; returns 0 or a
 * negative paged_error. */
int pk_ref_decode(const pk_decode_args *a)
{
    int err = pk_check_decode(a);
    if (err != 0)
        return err;
    return pk_ref_each_seq(&a->cache, a->num_q_heads, a->seq_lens, a->num_seqs, decode_seq, a);
}
