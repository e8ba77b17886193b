/* field.c: the names of request fields that error completions point at. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "paged.h"
#include "lib/core/proto.h"

/* One name per enum pcore_field, as the caller knows the field (paged_request, paged_attn_args). */
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
    [PCORE_FIELD_WINDOW] = "window",
    [PCORE_FIELD_SCALE] = "sm_scale",
    [PCORE_FIELD_FLAGS] = "flags",
    [PCORE_FIELD_WAIT] = "dep.wait_off",
    [PCORE_FIELD_SIGNAL] = "dep.signal_off",
};

/* Returns the name of a completion's err_field, or "none" for one this library does not know. */
const char *paged_field_name(uint32_t field)
{
    if (field >= PCORE_FIELD_COUNT_ || field_names[field] == NULL)
        return "none";
    return field_names[field];
}
