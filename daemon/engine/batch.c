/* batch.c: planning an engine pass: which requests join it, and which APPENDs and DECODEs share a launch. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/engine/batch.h"

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
                        const struct pcore_sqe *sqe)
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
    const struct pcore_req_attn *a = &sqe->u.attn;
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
    if (a->pool->user != b->pool->user || a->pool->shard != b->pool->shard || a->dtype != b->dtype
        || a->num_q_heads != b->num_q_heads || a->sm_scale != b->sm_scale
        || a->soft_cap != b->soft_cap || a->window != b->window)
        return 0;
    if ((a->alibi == NULL) != (b->alibi == NULL))
        return 0;
    return a->alibi == NULL || memcmp(a->alibi, b->alibi, (size_t) a->num_q_heads * sizeof *a->alibi) == 0;
}

/* Returns whether two APPENDs may share a launch; see batch.h. */
int pb_append_mergeable(const struct pv_op *a, const struct pv_op *b)
{
    return a->opcode == PAGED_OP_APPEND && b->opcode == PAGED_OP_APPEND
           && a->pool->user == b->pool->user && a->pool->shard == b->pool->shard && a->num_layers == b->num_layers
           && a->dtype == b->dtype;
}

/* Returns whether the group g can take op without its padded table growing too large. */
static int group_room(const struct pb_group *g, const struct pv_op *op)
{
    uint64_t stride = op->bt_stride > g->max_stride ? op->bt_stride : g->max_stride;
    return (g->seqs + op->count) * stride <= PB_MAX_MERGED_BT;
}

/* Stores in *lo and *hi the smallest and largest slot an APPEND writes (lo > hi when it
 * writes none); returns nothing. */
static void slot_range(const struct pv_op *op, int32_t *lo, int32_t *hi)
{
    int32_t l = INT32_MAX, h = -1;
    for (uint32_t t = 0; t < op->num_tokens; t++) {
        int32_t s = op->slots[t];
        if (s < 0)
            continue;
        if (s < l)
            l = s;
        if (s > h)
            h = s;
    }
    *lo = l;
    *hi = h;
}

/*
 * Returns whether the APPEND group g (of the non-DECODE groups, whose first members come in
 * the order taken) can take op, of client, writing slots [lo, hi]: a compatible first member,
 * room for its tokens, and no overlap with the slots of its client's members in g.
 */
static int append_fits(const struct pd_batch_op *in, const struct pb_group *g, const struct pv_op *op,
                       uint32_t client, int32_t lo, int32_t hi)
{
    if (!pb_append_mergeable(in[g->head].op, op)
        || g->tokens + op->num_tokens > PB_MAX_MERGED_TOKENS)
        return 0;
    /* The ops of one client are adjacent, so g holds ops of client only if its latest is. */
    return g->client != client || lo > hi || g->slot_lo > g->slot_hi || hi < g->slot_lo
           || g->slot_hi < lo;
}

/*
 * Places the non-DECODE op in[i] (of a client whose earlier non-DECODE ops run at launch
 * positions up to *pos, UINT32_MAX for none) into one of the ng groups at front (in order of
 * their first member) or a new one; updates *pos. Returns the new number of groups.
 */
static uint32_t place_other(const struct pd_batch_op *in, uint32_t i, struct pb_group *front,
                            uint32_t ng, uint32_t *next, uint32_t *pos)
{
    const struct pv_op *op = in[i].op;
    uint32_t client = in[i].client;
    int32_t lo = INT32_MAX, hi = -1;
    uint32_t g = UINT32_MAX;
    if (op->opcode == PAGED_OP_APPEND && op->num_tokens <= PB_MAX_MERGED_TOKENS) {
        slot_range(op, &lo, &hi);
        for (uint32_t k = ng, seen = 0; k > 0 && seen < PB_GROUP_SCAN; k--, seen++) {
            /* Joining runs op at the group's position: not before an earlier op of its
             * client that runs later (groups further back start earlier still). */
            if (*pos != UINT32_MAX && front[k - 1].head < *pos)
                break;
            if (append_fits(in, &front[k - 1], op, client, lo, hi)) {
                g = k - 1;
                break;
            }
        }
    }
    next[i] = UINT32_MAX;
    if (g == UINT32_MAX) {
        front[ng] = (struct pb_group) { .head = i, .tail = i, .count = 1,
                                        .tokens = op->num_tokens, .client = client,
                                        .slot_lo = lo, .slot_hi = hi };
        *pos = i;
        return ng + 1;
    }
    struct pb_group *gr = &front[g];
    next[gr->tail] = i;
    gr->tail = i;
    gr->count++;
    gr->tokens += op->num_tokens;
    if (gr->client != client) {
        gr->client = client;
        gr->slot_lo = lo;
        gr->slot_hi = hi;
    } else if (lo <= hi) {
        if (lo < gr->slot_lo)
            gr->slot_lo = lo;
        if (hi > gr->slot_hi)
            gr->slot_hi = hi;
    }
    if (*pos == UINT32_MAX || gr->head > *pos)
        *pos = gr->head;
    return ng;
}

/*
 * Places the DECODE in[i] into one of the nd groups of back (newest first: back[-k] is the
 * k-th, counting from 1) or a new one. Returns the new number of groups.
 */
static uint32_t place_decode(const struct pd_batch_op *in, uint32_t i, struct pb_group *back,
                             uint32_t nd, uint32_t *next)
{
    const struct pv_op *op = in[i].op;
    /* The latest groups first: compatible requests (one model's) tend to arrive together. */
    struct pb_group *gr = NULL;
    for (uint32_t k = nd, seen = 0; k > 0 && seen < PB_GROUP_SCAN; k--, seen++) {
        struct pb_group *c = back - (k - 1);
        if (pb_mergeable(in[c->head].op, op) && group_room(c, op)) {
            gr = c;
            break;
        }
    }
    next[i] = UINT32_MAX;
    if (gr == NULL) {
        *(back - nd) = (struct pb_group) { .head = i, .tail = i, .count = 1, .seqs = op->count,
                                           .max_stride = op->bt_stride };
        return nd + 1;
    }
    next[gr->tail] = i;
    gr->tail = i;
    gr->count++;
    gr->seqs += op->count;
    if (op->bt_stride > gr->max_stride)
        gr->max_stride = op->bt_stride;
    return nd;
}

/* Appends the launch of group g (its members in order) to out and launches; returns nothing. */
static void emit(const struct pd_batch_op *in, const struct pb_group *g, const uint32_t *next,
                 struct pd_batch_op *out, uint32_t *no, struct pd_launch *launches, uint32_t *nl)
{
    launches[(*nl)++] = (struct pd_launch) { *no, g->count, 0 };
    for (uint32_t i = g->head; i != UINT32_MAX; i = next[i])
        out[(*no)++] = in[i];
}

/* Plans the launches; see batch.h. The non-DECODE groups fill groups from the front, in
 * order of their first member; the DECODE groups fill it from the back. */
uint32_t pb_plan(const struct pd_batch_op *in, uint32_t n, struct pd_batch_op *out,
                 struct pd_launch *launches, struct pb_group *groups, uint32_t *next)
{
    if (n == 0)
        return 0;
    uint32_t nl = 0, no = 0, nf = 0, nd = 0;
    struct pb_group *back = &groups[n - 1];
    uint32_t client = UINT32_MAX, pos = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        if (i == 0 || in[i].client != client) {
            client = in[i].client;
            pos = UINT32_MAX;
        }
        if (in[i].op->opcode == PAGED_OP_DECODE)
            nd = place_decode(in, i, back, nd, next);
        else
            nf = place_other(in, i, groups, nf, next, &pos);
    }
    for (uint32_t g = 0; g < nf; g++)
        emit(in, &groups[g], next, out, &no, launches, &nl);
    for (uint32_t g = 0; g < nd; g++)
        emit(in, back - g, next, out, &no, launches, &nl);
    return nl;
}
