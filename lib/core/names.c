/* names.c: the names of request ops and request fields, the one table every layer reads. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "lib/core/names.h"

#include "paged.h"
#include "lib/core/proto.h"

/* Every op of enum paged_op has its name below. */
_Static_assert(PCORE_OP_COUNT_ == PAGED_OP_LOOKUP + 1, "op_names misses an op of enum paged_op");

/* One name per enum paged_op: the public spelling, lower case, that libpaged's messages,
 * paged_op_name, pagedd's log and pactl's keys all show. */
static const char *const op_names[PCORE_OP_COUNT_] = {
    [PAGED_OP_NOP] = "nop",
    [PAGED_OP_ALLOC] = "alloc",
    [PAGED_OP_FREE] = "free",
    [PAGED_OP_APPEND] = "append",
    [PAGED_OP_DECODE] = "decode",
    [PAGED_OP_PREFILL] = "prefill",
    [PAGED_OP_FORK] = "fork",
    [PAGED_OP_COPY] = "copy",
    [PAGED_OP_PUBLISH] = "publish",
    [PAGED_OP_LOOKUP] = "lookup",
};

/* One name per enum pcore_field, as the caller knows the field (paged_request,
 * paged_attn_args). */
static const char *const field_names[PCORE_FIELD_COUNT_] = {
    [PCORE_FIELD_NONE] = "none",
    [PCORE_FIELD_OPCODE] = "opcode",
    [PCORE_FIELD_POOL] = "pool",
    [PCORE_FIELD_LAYER] = "layer",
    [PCORE_FIELD_COUNT] = "count",
    [PCORE_FIELD_DTYPE] = "dtype",
    [PCORE_FIELD_HEADS] = "num_q_heads",
    [PCORE_FIELD_IDS] = "ids",
    [PCORE_FIELD_K] = "k",
    [PCORE_FIELD_V] = "v",
    [PCORE_FIELD_SLOTS] = "slots",
    [PCORE_FIELD_Q] = "q",
    [PCORE_FIELD_OUT] = "out",
    [PCORE_FIELD_BLOCK_TABLE] = "block_tables",
    [PCORE_FIELD_SEQ_LENS] = "seq_lens",
    [PCORE_FIELD_QO_INDPTR] = "qo_indptr",
    [PCORE_FIELD_ALIBI] = "alibi_slopes",
    [PCORE_FIELD_SRC] = "src",
    [PCORE_FIELD_DST] = "dst",
    [PCORE_FIELD_TOKENS] = "tokens",
    [PCORE_FIELD_DST_POOL] = "dst_pool",
    [PCORE_FIELD_WINDOW] = "window",
    [PCORE_FIELD_SCALE] = "sm_scale",
    [PCORE_FIELD_FLAGS] = "flags",
    [PCORE_FIELD_WAIT] = "dep.wait_off",
    [PCORE_FIELD_SIGNAL] = "dep.signal_off",
};

/* Looks op up in op_names; returns its name or NULL. */
const char *pcore_op_name(uint32_t op)
{
    return op < PCORE_OP_COUNT_ ? op_names[op] : NULL;
}

/* Looks field up in field_names; returns its name or NULL. */
const char *pcore_field_name(uint32_t field)
{
    return field < PCORE_FIELD_COUNT_ ? field_names[field] : NULL;
}
