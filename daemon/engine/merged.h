/* merged.h: what the backends share about merged launches: their arrays, the refusing test aid, the log line. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_ENGINE_MERGED_H
#define PAGED_DAEMON_ENGINE_MERGED_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/backend.h"

/*
 * Pure: no I/O, no allocation. A merged DECODE launch (daemon/engine/batch.h says which DECODEs
 * merge) takes per-sequence query and output pointers, the block tables padded to the
 * largest stride, the lengths side by side and, where the ops' first layers differ, each
 * sequence's layer; a merged APPEND takes the slots side by side, the segment offsets, the
 * per-segment key and value pointers and, where the layers differ, each segment's first
 * layer. The backends lay these arrays out in their own memory (the cuda backend in its
 * staging buffer) and fill them with the functions below.
 */

/* Returns the base address the kernels see of the data arena of op's client, or NULL to
 * leave op out of the launch. */
typedef unsigned char *pm_data_fn(const struct pd_batch_op *op);

/* What a merged launch needs, over the ops it keeps. */
struct pm_shape {
    size_t items;                 /* DECODE: sequences; APPEND: segments (ops kept) */
    size_t stride;                /* DECODE: the largest block-table stride (at least 1) */
    size_t tokens;                /* APPEND: slots */
    int32_t layer;                /* the first layer of the first op kept (ops[0]'s if none) */
    int layers_differ;            /* the kept ops' first layers differ: per-item layers needed */
};

/* Fills *out for a merged DECODE (decode 1) or APPEND (decode 0) over the count ops that
 * data keeps; returns nothing. */
void pm_shape(const struct pd_batch_op *ops, uint32_t count, pm_data_fn *data, int decode,
              struct pm_shape *out);

/* Fills the arrays of a merged DECODE of shape sh (from pm_shape); layer may be NULL when
 * sh->layers_differ is 0. Returns nothing. */
void pm_decode_fill(const struct pd_batch_op *ops, uint32_t count, pm_data_fn *data,
                    const struct pm_shape *sh, const void **q, void **out, int32_t *tables,
                    int32_t *lens, int32_t *layer);

/* Fills the arrays of a merged APPEND (indptr holds sh->items + 1 offsets); layer may be
 * NULL when sh->layers_differ is 0. Returns nothing. */
void pm_append_fill(const struct pd_batch_op *ops, uint32_t count, pm_data_fn *data,
                    int32_t *slots, int32_t *indptr, const void **k, const void **v, int32_t *layer);

/*
 * Says whether PAGEDD_REFUSE_MERGED=1 (a test aid) asks the backend who ("cpu", "cuda device
 * 0") to take every launch of several requests as refused by the kernels, so that the tests
 * reach the fallback that runs such a launch's requests one by one; logs it when so. Returns
 * 1 or 0.
 */
int pm_refuse_merged(const char *who);

/* Logs (at debug level) that backend who runs the count requests of a merged launch of
 * opcode one by one, the launch having been refused with rc. Returns nothing. */
void pm_log_unmerged(const char *who, int opcode, uint32_t count, int rc);

#endif
