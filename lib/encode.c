/* encode.c: the one encoder of submission entries, from the paged_request both APIs fill. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include "lib/client.h"

/* Encodes a paged_request as a submission entry; see client.h. */
int pc_encode_sqe(paged_client *c, const paged_request *r, struct pcore_sqe *e)
{
    memset(e, 0, sizeof *e);
    if ((unsigned) r->op >= PCORE_OP_COUNT_) {
        pc_set_err(c, "unknown opcode %d", (int) r->op);
        return PAGED_E_INVAL;
    }
    e->opcode = (uint8_t) r->op;
    e->layer = r->layer;
    if (r->op != PAGED_OP_NOP) {
        if (r->pool == NULL || r->pool->c != c) {
            pc_set_err(c, "%s: no pool, or a pool of another client", pc_op_name(r->op));
            return PAGED_E_INVAL;
        }
        e->pool = r->pool->info.id;
    }
    switch (r->op) {
    case PAGED_OP_NOP:
        break;
    case PAGED_OP_ALLOC:
        e->u.alloc.count = r->u.blocks.count;
        e->u.alloc.ids_off = r->u.blocks.ids_off;
        break;
    case PAGED_OP_FREE:
    case PAGED_OP_FORK:
        e->u.blocks.count = r->u.blocks.count;
        e->u.blocks.ids_off = r->u.blocks.ids_off;
        break;
    case PAGED_OP_APPEND:
        if (r->layer == PAGED_ALL_LAYERS) {
            e->flags = PCORE_SQE_ALL_LAYERS;
            e->layer = 0;
        }
        e->u.append.num_tokens = r->u.append.num_tokens;
        e->u.append.dtype = (uint32_t) r->u.append.dtype;
        e->u.append.k_off = r->u.append.k_off;
        e->u.append.v_off = r->u.append.v_off;
        e->u.append.slots_off = r->u.append.slots_off;
        break;
    case PAGED_OP_DECODE:
    case PAGED_OP_PREFILL:
        e->u.attn.num_seqs = r->u.attn.num_seqs;
        e->u.attn.num_q_heads = r->u.attn.num_q_heads;
        e->u.attn.dtype = (uint32_t) r->u.attn.dtype;
        e->u.attn.bt_stride = r->u.attn.bt_stride;
        e->u.attn.q_off = r->u.attn.q_off;
        e->u.attn.out_off = r->u.attn.out_off;
        e->u.attn.bt_off = r->u.attn.block_tables_off;
        e->u.attn.lens_off = r->u.attn.seq_lens_off;
        e->u.attn.qo_indptr_off = r->op == PAGED_OP_PREFILL ? r->u.attn.qo_indptr_off : 0;
        e->u.attn.attn.sm_scale = r->u.attn.opts.sm_scale;
        e->u.attn.attn.soft_cap = r->u.attn.opts.soft_cap;
        e->u.attn.attn.window = r->u.attn.opts.window;
        e->u.attn.attn.has_alibi = r->u.attn.opts.has_alibi != 0;
        e->u.attn.attn.alibi_off = r->u.attn.opts.alibi_off;
        break;
    case PAGED_OP_COPY:
        if (r->u.copy.dst_pool != NULL && r->u.copy.dst_pool->c != c) {
            pc_set_err(c, "copy: dst_pool is a pool of another client");
            return PAGED_E_INVAL;
        }
        e->u.copy.count = r->u.copy.count;
        e->u.copy.dst_pool = r->u.copy.dst_pool != NULL ? r->u.copy.dst_pool->info.id : 0;
        e->u.copy.src_off = r->u.copy.src_off;
        e->u.copy.dst_off = r->u.copy.dst_off;
        break;
    case PAGED_OP_PUBLISH:
    case PAGED_OP_LOOKUP:
        e->u.prefix.num_blocks = r->u.prefix.num_blocks;
        e->u.prefix.tokens_off = r->u.prefix.tokens_off;
        e->u.prefix.ids_off = r->u.prefix.ids_off;
        e->u.prefix.salt = r->u.prefix.salt;
        e->u.prefix.parent = r->u.prefix.parent;
        break;
    }
    if ((r->dep.flags & ~(PAGED_DEP_WAIT | PAGED_DEP_SIGNAL | PAGED_DEP_HOST)) != 0) {
        pc_set_err(c, "%s: unknown dep.flags 0x%x", pc_op_name(r->op), r->dep.flags);
        return PAGED_E_INVAL;
    }
    /* Which ops may carry dependencies is the daemon's to say (it names the field). */
    if (r->dep.flags & PAGED_DEP_WAIT) {
        e->flags |= PCORE_SQE_WAIT;
        e->dep.wait_off = r->dep.wait_off;
        e->dep.wait_value = r->dep.wait_value;
    }
    if (r->dep.flags & PAGED_DEP_HOST)
        e->flags |= PCORE_SQE_HOST_WORDS;
    if (r->dep.flags & PAGED_DEP_SIGNAL) {
        e->flags |= PCORE_SQE_SIGNAL;
        e->dep.signal_off = r->dep.signal_off;
        e->dep.signal_value = r->dep.signal_value;
    }
    return PAGED_OK;
}
