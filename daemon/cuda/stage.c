/* stage.c: the cuda backend's staging of a batch: its metadata laid out, its launches' arguments built. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include "daemon/cuda/stage.h"
#include "daemon/engine/merged.h"

/* Takes bytes of staging (256-aligned: whatever vector width a kernel reads with). When
 * filling, stores the device address in *dev and returns the host address to write at;
 * else stores NULL and returns NULL. */
static void *stage_take(struct pd_cu_stage *st, size_t bytes, void **dev)
{
    size_t off = (st->total + 255) & ~(size_t) 255;
    size_t pad_from = st->total;
    st->total = off + bytes;
    if (st->host == NULL) {
        *dev = NULL;
        return NULL;
    }
    memset(st->host + pad_from, 0, off - pad_from);   /* defined bytes (stage.h) */
    *dev = st->dev + off;
    return st->host + off;
}

/* Stages a copy of an array (src NULL: none); returns its device address when filling,
 * else NULL. */
static void *stage_put(struct pd_cu_stage *st, const void *src, size_t bytes)
{
    if (src == NULL)
        return NULL;
    void *dev;
    void *h = stage_take(st, bytes, &dev);
    if (h != NULL && bytes != 0)
        memcpy(h, src, bytes);
    return dev;
}

/* Stages one op and builds its launch; sets the op's status (PAGED_OK or why it cannot run). */
static void prepare_one(struct pd_cu_stage *st, struct pd_batch_op *bop,
                        struct pd_cu_launch *cl)
{
    const struct pv_op *op = bop->op;
    memset(cl, 0, sizeof *cl);
    cl->kind = op->opcode;
    bop->status = PAGED_OK;
    if (bop->arenas.data == NULL) {
        bop->status = PAGED_E_INVAL;   /* every client of this backend has a device arena */
        return;
    }
    unsigned char *data = bop->arenas.data->mem.dptr;
    size_t nseq = op->count;
    switch (op->opcode) {
    case PAGED_OP_APPEND:
        cl->a.append = (pk_append_args) {
            .cache = *bop->cache, .layer_begin = op->layer_begin, .num_layers = op->num_layers,
            .num_tokens = (int32_t) op->num_tokens, .src_dtype = op->dtype,
            .k = data + op->k_off, .v = data + op->v_off,
            .slot_mapping = stage_put(st, op->slots, (size_t) op->num_tokens * 4),
        };
        break;
    case PAGED_OP_DECODE:
    case PAGED_OP_PREFILL: {
        const int32_t *bt = stage_put(st, op->block_tables, nseq * op->bt_stride * 4);
        const int32_t *lens = stage_put(st, op->seq_lens, nseq * 4);
        pk_attn_opts opts = { op->sm_scale, op->soft_cap, op->window,
                              stage_put(st, op->alibi, (size_t) op->num_q_heads * 4) };
        if (op->opcode == PAGED_OP_DECODE) {
            cl->a.decode = (pk_decode_args) {
                .cache = *bop->cache, .layer = op->layer_begin, .num_seqs = (int32_t) nseq,
                .num_q_heads = (int32_t) op->num_q_heads, .q_dtype = op->dtype,
                .q = data + op->q_off, .out = data + op->out_off,
                .block_tables = bt, .bt_stride = (int32_t) op->bt_stride, .seq_lens = lens,
                .opts = opts,
            };
            break;
        }
        cl->a.prefill = (pk_prefill_args) {
            .cache = *bop->cache, .layer = op->layer_begin, .num_seqs = (int32_t) nseq,
            .num_q_heads = (int32_t) op->num_q_heads, .q_dtype = op->dtype, .causal = 1,
            .total_q = op->total_q, .max_qo_len = op->max_qo_len,
            .q = data + op->q_off, .out = data + op->out_off,
            .qo_indptr = stage_put(st, op->qo_indptr, (nseq + 1) * 4),
            .block_tables = bt, .bt_stride = (int32_t) op->bt_stride, .seq_lens = lens,
            .opts = opts,
        };
        break;
    }
    case PAGED_OP_COPY:
        cl->a.copy = (pk_copy_args) {
            .cache = *bop->cache, .num_pairs = (int32_t) nseq,
            .src_blocks = stage_put(st, op->ids, nseq * 4),
            .dst_blocks = stage_put(st, op->ids2, nseq * 4),
            .dst_base = bop->dst_cache != NULL ? bop->dst_cache->base : NULL,
            .dst_num_blocks = bop->dst_cache != NULL ? bop->dst_cache->num_blocks : 0,
        };
        break;
    default:
        bop->status = PAGED_E_NOTSUP;
        break;
    }
}

/* Returns the device address of the data arena of op's client, or NULL when it has none (a
 * merged launch leaves the op out; begin_merged gave it PAGED_E_INVAL). */
unsigned char *pd_cu_op_data(const struct pd_batch_op *op)
{
    return op->arenas.data != NULL ? op->arenas.data->mem.dptr : NULL;
}

/*
 * Starts merged launch cl of kind (PAGED_OP_DECODE or PAGED_OP_APPEND) over count ops:
 * clears it and gives each op PAGED_OK, or PAGED_E_INVAL when it has no device arena (it is
 * left out of the launch). Returns nothing.
 */
static void begin_merged(struct pd_cu_launch *cl, int kind, struct pd_batch_op *ops, uint32_t count)
{
    memset(cl, 0, sizeof *cl);
    cl->kind = kind;
    for (uint32_t i = 0; i < count; i++)
        ops[i].status = pd_cu_op_data(&ops[i]) != NULL ? PAGED_OK : PAGED_E_INVAL;
}

/*
 * Stages count mergeable DECODEs (daemon/engine/batch.h says which) as one launch: per-sequence
 * query and output pointers, the block tables padded to the largest stride, the lengths
 * side by side, the slopes of the first, and each sequence's layer if the ops' layers differ
 * (every one of them checked by pv_validate against the pool). An op without a device arena
 * is left out with PAGED_E_INVAL; the others get PAGED_OK. Returns nothing.
 */
static void prepare_merged(struct pd_cu_stage *st, struct pd_batch_op *ops,
                           uint32_t count, struct pd_cu_launch *cl)
{
    const struct pv_op *first = ops[0].op;
    begin_merged(cl, PAGED_OP_DECODE, ops, count);
    struct pm_shape sh;
    pm_shape(ops, count, pd_cu_op_data, 1, &sh);
    void *dq, *dout, *dbt, *dlens, *dlayer = NULL;
    const void **hq = stage_take(st, sh.items * sizeof *hq, &dq);
    void **hout = stage_take(st, sh.items * sizeof *hout, &dout);
    int32_t *hbt = stage_take(st, sh.items * sh.stride * 4, &dbt);
    int32_t *hlens = stage_take(st, sh.items * 4, &dlens);
    int32_t *hlayer = sh.layers_differ ? stage_take(st, sh.items * 4, &dlayer) : NULL;
    const float *alibi = stage_put(st, first->alibi, (size_t) first->num_q_heads * 4);
    if (st->host != NULL)
        pm_decode_fill(ops, count, pd_cu_op_data, &sh, hq, hout, hbt, hlens, hlayer);
    cl->a.decode = (pk_decode_args) {
        .cache = *ops[0].cache, .layer = sh.layer, .num_seqs = (int32_t) sh.items,
        .num_q_heads = (int32_t) first->num_q_heads, .q_dtype = first->dtype,
        .q_seq = dq, .out_seq = dout, .block_tables = dbt, .bt_stride = (int32_t) sh.stride,
        .seq_lens = dlens, .opts = { first->sm_scale, first->soft_cap, first->window, alibi },
        .seq_layer = dlayer,
    };
}

/*
 * Stages count mergeable APPENDs (daemon/engine/batch.h says which) as one launch of the segmented
 * form: the slots of every op side by side, the segment offsets, per segment the key and
 * value pointers into its client's data arena, and each segment's first layer if the ops'
 * layers differ (every one checked by pv_validate against the pool). An op without a device
 * arena is left out with PAGED_E_INVAL; the others get PAGED_OK. Returns nothing.
 */
static void prepare_merged_append(struct pd_cu_stage *st, struct pd_batch_op *ops,
                                  uint32_t count, struct pd_cu_launch *cl)
{
    const struct pv_op *first = ops[0].op;
    begin_merged(cl, PAGED_OP_APPEND, ops, count);
    struct pm_shape sh;
    pm_shape(ops, count, pd_cu_op_data, 0, &sh);
    void *dslots, *dindptr, *dk, *dv, *dlayer = NULL;
    int32_t *hslots = stage_take(st, sh.tokens * 4, &dslots);
    int32_t *hindptr = stage_take(st, (sh.items + 1) * 4, &dindptr);
    const void **hk = stage_take(st, sh.items * sizeof *hk, &dk);
    const void **hv = stage_take(st, sh.items * sizeof *hv, &dv);
    int32_t *hlayer = sh.layers_differ ? stage_take(st, sh.items * 4, &dlayer) : NULL;
    if (st->host != NULL)
        pm_append_fill(ops, count, pd_cu_op_data, hslots, hindptr, hk, hv, hlayer);
    /* batch.h bounds a merged APPEND far below INT32_MAX tokens. */
    cl->a.append = (pk_append_args) {
        .cache = *ops[0].cache, .layer_begin = sh.layer, .num_layers = first->num_layers,
        .num_tokens = (int32_t) sh.tokens, .src_dtype = first->dtype, .slot_mapping = dslots,
        .num_segments = (int32_t) sh.items, .seg_indptr = dindptr, .k_seg = dk, .v_seg = dv,
        .seg_layer = dlayer,
    };
}

/*
 * Gives the fused DECODE launch of fusion (among launches) the newest tokens its partner
 * APPENDs hold: the rows of a single op where its APPEND has them, or, merged, a staged
 * pointer per sequence. Returns nothing.
 */
static void prepare_fused(struct pd_cu_stage *st, struct pd_batch *batch, struct pd_cu_launch *launches,
                          const struct pf_fusion *fusion)
{
    const struct pd_launch *ld = &batch->launches[fusion->decode];
    pk_decode_args *d = &launches[fusion->decode].a.decode;
    const struct pd_batch_op *first = &batch->ops[ld->first];
    size_t row = (size_t) first->cache->num_kv_heads * (size_t) first->cache->head_dim
                 * pk_dtype_size(first->op->dtype);
    if (ld->count == 1) {
        const struct pd_batch_op *a = &batch->ops[fusion->partner[ld->first]];
        d->new_k = pd_cu_op_data(a) + a->op->k_off;
        d->new_v = pd_cu_op_data(a) + a->op->v_off;
        return;
    }
    size_t items = 0;
    for (uint32_t i = ld->first; i < ld->first + ld->count; i++)
        items += batch->ops[i].op->count;
    void *dk, *dv;
    const void **hk = stage_take(st, items * sizeof *hk, &dk);
    const void **hv = stage_take(st, items * sizeof *hv, &dv);
    d->new_k_seq = dk;
    d->new_v_seq = dv;
    if (st->host == NULL)
        return;
    size_t s = 0;
    for (uint32_t i = ld->first; i < ld->first + ld->count; i++) {
        const struct pd_batch_op *a = &batch->ops[fusion->partner[i]];
        for (uint32_t j = 0; j < batch->ops[i].op->count; j++, s++) {
            hk[s] = pd_cu_op_data(a) + a->op->k_off + j * row;
            hv[s] = pd_cu_op_data(a) + a->op->v_off + j * row;
        }
    }
}

/* Stages every launch of batch; see stage.h. */
void pd_cu_stage_batch(struct pd_cu_stage *st, struct pd_batch *batch, struct pd_cu_launch *launches,
                       const struct pf_fusion *fusion)
{
    for (uint32_t l = 0; l < batch->nlaunches; l++) {
        const struct pd_launch *la = &batch->launches[l];
        if (la->count > 1 && batch->ops[la->first].op->opcode == PAGED_OP_APPEND)
            prepare_merged_append(st, batch->ops + la->first, la->count, &launches[l]);
        else if (la->count > 1)
            prepare_merged(st, batch->ops + la->first, la->count, &launches[l]);
        else
            prepare_one(st, batch->ops + la->first, &launches[l]);
    }
    if (fusion != NULL)
        prepare_fused(st, batch, launches, fusion);
}
