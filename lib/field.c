/* field.c: the names of request fields that error completions point at. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "paged.h"
#include "lib/proto.h"

/* One name per enum paged_field, as the caller knows the field (paged_request, paged_attn_args). */
static const char *const field_names[PAGED_FIELD_COUNT_] = {
    [PAGED_FIELD_NONE] = "none",
    [PAGED_FIELD_OPCODE] = "opcode",
    [PAGED_FIELD_POOL] = "pool",
    [PAGED_FIELD_LAYER] = "layer",
    [PAGED_FIELD_COUNT] = "count",
    [PAGED_FIELD_DTYPE] = "dtype",
    [PAGED_FIELD_HEADS] = "num_q_heads",
    [PAGED_FIELD_IDS] = "ids",
    [PAGED_FIELD_K] = "k",
    [PAGED_FIELD_V] = "v",
    [PAGED_FIELD_SLOTS] = "slots",
    [PAGED_FIELD_Q] = "q",
    [PAGED_FIELD_OUT] = "out",
    [PAGED_FIELD_BLOCK_TABLE] = "block_tables",
    [PAGED_FIELD_SEQ_LENS] = "seq_lens",
    [PAGED_FIELD_QO_INDPTR] = "qo_indptr",
    [PAGED_FIELD_ALIBI] = "alibi_slopes",
    [PAGED_FIELD_SRC] = "src",
    [PAGED_FIELD_DST] = "dst",
    [PAGED_FIELD_TOKENS] = "tokens",
    [PAGED_FIELD_WINDOW] = "window",
    [PAGED_FIELD_SCALE] = "sm_scale",
    [PAGED_FIELD_FLAGS] = "flags",
    [PAGED_FIELD_WAIT] = "dep.wait_off",
    [PAGED_FIELD_SIGNAL] = "dep.signal_off",
};

/* Returns the name of a completion's err_field, or "none" for one this library does not know. */
const char *paged_field_name(uint32_t field)
{
    if (field >= PAGED_FIELD_COUNT_ || field_names[field] == NULL)
        return "none";
    return field_names[field];
}
