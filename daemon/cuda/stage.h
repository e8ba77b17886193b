/* stage.h: the cuda backend's staging of a batch: its metadata laid out, its launches' arguments built. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_CUDA_STAGE_H
#define PAGED_DAEMON_CUDA_STAGE_H

/*
 * Every launch's metadata (block tables, lengths, qo_indptr, slots, block ids, ALiBi slopes,
 * and a merged launch's per-sequence or per-segment pointer and layer arrays) is laid out
 * twice by the same code: once to size it (host NULL), then, with the buffers grown, to copy
 * it into the batch slot's pinned buffer (host) and build each launch's arguments with the
 * device addresses the copies will have in the device staging (dev). One cudaMemcpyAsync then
 * moves all of it before the first launch, or the launches carry it in their parameters
 * (backend.c decides). Each array starts 256-aligned, the padding zeroed, so the bytes
 * staged are defined and equal bytes mean equal metadata.
 */

#include <stddef.h>

#include "daemon/engine/batch.h"
#include "daemon/cuda/mem.h"
#include "daemon/engine/fuse.h"
#include "kernels/kernels.h"

/* One launch of a batch as prepared: its kind and the kernel library's arguments. */
struct pd_cu_launch {
    int kind;                     /* PAGED_OP_APPEND, _DECODE (merged or not), _PREFILL, _COPY */
    union {
        pk_append_args append;
        pk_decode_args decode;
        pk_prefill_args prefill;
        pk_copy_args copy;
    } a;
};

/* A batch's staging, one pass of it. */
struct pd_cu_stage {
    size_t total;                 /* bytes laid out so far */
    unsigned char *host;          /* the second pass: the batch's slot's pinned buffer, filled
                                   * and addressed (NULL in the first: only sized) */
    unsigned char *dev;           /* the second pass: the device staging the host bytes go to */
};

/*
 * Lays out the metadata of every launch of batch (batch.h's launches: single ops, merged
 * DECODEs, merged APPENDs) in st and builds launches[l] for each, giving each op PAGED_OK or
 * why it cannot run (an op without a device arena: PAGED_E_INVAL; an opcode the backend does
 * not run: PAGED_E_NOTSUP); with fusion (not NULL), gives its DECODE launch the newest tokens
 * of its partner APPENDs. Returns nothing; st->total says how many bytes it laid out.
 */
void pd_cu_stage_batch(struct pd_cu_stage *st, struct pd_batch *batch, struct pd_cu_launch *launches,
                       const struct pf_fusion *fusion);

/* Returns the device address of the data arena of op's client, or NULL when it has none. */
unsigned char *pd_cu_op_data(const struct pd_batch_op *op);

#endif
