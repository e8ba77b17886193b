/* batch.c: planning an engine pass: which requests join it, and which DECODEs share a launch. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/batch.h"

#include <string.h>

#include "paged.h"

/* Returns whether [a, a + alen) and [b, b + blen), both non-empty, overlap. */
static int overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
    return alen != 0 && blen != 0 && a < b + blen && b < a + alen;
}

/* Returns the bytes of a validated DECODE's or PREFILL's query (and output) tensor. */
static uint64_t tensor_bytes(const struct pv_op *op)
{
    uint64_t rows = op->opcode == PAGED_OP_PREFILL ? (uint64_t) op->total_q : op->count;
    return rows * op->num_q_heads * op->pool->head_dim * paged_dtype_size((paged_dtype) op->dtype);
}

/* Decides whether the next request may join; see batch.h. */
int pb_may_join(const struct pb_client *cl, unsigned opcode)
{
    if (opcode == PAGED_OP_NOP)
        return 1;
    if (cl->decode_taken && opcode != PAGED_OP_DECODE)
        return 0;
    /* They take rights over blocks away at once, from ops that run later. */
    if (cl->backend_taken
        && (opcode == PAGED_OP_FREE || opcode == PAGED_OP_FORK || opcode == PAGED_OP_PUBLISH))
        return 0;
    if (cl->host_is_data) {
        if (cl->writer_taken && opcode != PAGED_OP_DECODE)
            return 0;
        if (cl->backend_taken && (opcode == PAGED_OP_ALLOC || opcode == PAGED_OP_LOOKUP))
            return 0;
    }
    return 1;
}

/* Decides whether a DECODE must wait because of an earlier op of its client; see batch.h. */
int pb_decode_conflicts(const struct pb_client *cl, const struct pv_op *w, const struct pv_op *op,
                        const struct paged_sqe *sqe)
{
    if (w->opcode != PAGED_OP_DECODE && w->opcode != PAGED_OP_PREFILL)
        return 0;   /* APPEND and COPY run before every DECODE and write no arena */
    uint64_t wlen = tensor_bytes(w), len = tensor_bytes(op);
    /* Two DECODEs may run in one launch, in any order. A PREFILL runs before every DECODE,
     * so a DECODE reading or overwriting its output sees what it should. */
    if (w->opcode == PAGED_OP_DECODE
        && (overlap(w->out_off, wlen, op->q_off, len) || overlap(w->out_off, wlen, op->out_off, len)
            || overlap(w->q_off, wlen, op->out_off, len)))
        return 1;
    if (!cl->host_is_data)
        return 0;
    /* The arrays of op were read from the arena when it was validated, before w writes. */
    const struct paged_req_attn *a = &sqe->u.attn;
    if (overlap(w->out_off, wlen, a->bt_off, (uint64_t) op->count * op->bt_stride * 4)
        || overlap(w->out_off, wlen, a->lens_off, (uint64_t) op->count * 4))
        return 1;
    return op->alibi != NULL && overlap(w->out_off, wlen, a->attn.alibi_off, (uint64_t) op->num_q_heads * 4);
}

/* Records a taken op; returns nothing. */
void pb_taken(struct pb_client *cl, const struct pv_op *op)
{
    cl->backend_taken = 1;
    if (op->opcode == PAGED_OP_DECODE)
        cl->decode_taken = 1;
    if (op->opcode == PAGED_OP_DECODE || op->opcode == PAGED_OP_PREFILL)
        cl->writer_taken = 1;
}

/* Returns whether two DECODEs may share a launch; see batch.h. */
int pb_mergeable(const struct pv_op *a, const struct pv_op *b)
{
    if (a->pool->user != b->pool->user || a->layer_begin != b->layer_begin || a->dtype != b->dtype
        || a->num_q_heads != b->num_q_heads || a->sm_scale != b->sm_scale
        || a->soft_cap != b->soft_cap || a->window != b->window)
        return 0;
    if ((a->alibi == NULL) != (b->alibi == NULL))
        return 0;
    return a->alibi == NULL || memcmp(a->alibi, b->alibi, (size_t) a->num_q_heads * sizeof *a->alibi) == 0;
}

/* Returns whether the group g can take op without its padded table growing too large. */
static int group_room(const struct pb_group *g, const struct pv_op *op)
{
    uint64_t stride = op->bt_stride > g->max_stride ? op->bt_stride : g->max_stride;
    return (g->seqs + op->count) * stride <= PB_MAX_MERGED_BT;
}

/* Plans the launches; see batch.h. */
uint32_t pb_plan(const struct pd_batch_op *in, uint32_t n, struct pd_batch_op *out,
                 struct pd_launch *launches, struct pb_group *groups, uint32_t *next)
{
    uint32_t nl = 0, no = 0, ng = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct pv_op *op = in[i].op;
        if (op->opcode != PAGED_OP_DECODE) {
            launches[nl++] = (struct pd_launch) { no, 1, 0 };
            out[no++] = in[i];
            continue;
        }
        /* The latest groups first: requests of one layer tend to arrive together. */
        uint32_t g = UINT32_MAX;
        for (uint32_t k = ng, seen = 0; k > 0 && seen < PB_GROUP_SCAN; k--, seen++)
            if (pb_mergeable(in[groups[k - 1].head].op, op) && group_room(&groups[k - 1], op)) {
                g = k - 1;
                break;
            }
        next[i] = UINT32_MAX;
        if (g == UINT32_MAX) {
            groups[ng++] = (struct pb_group) { i, i, 1, op->count, op->bt_stride };
            continue;
        }
        struct pb_group *gr = &groups[g];
        next[gr->tail] = i;
        gr->tail = i;
        gr->count++;
        gr->seqs += op->count;
        if (op->bt_stride > gr->max_stride)
            gr->max_stride = op->bt_stride;
    }
    for (uint32_t g = 0; g < ng; g++) {
        launches[nl++] = (struct pd_launch) { no, groups[g].count, 0 };
        for (uint32_t i = groups[g].head; i != UINT32_MAX; i = next[i])
            out[no++] = in[i];
    }
    return nl;
}
