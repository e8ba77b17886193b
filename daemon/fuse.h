/* fuse.h: whether a batch's APPEND launch can ride in its DECODE launch's kernel. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_FUSE_H
#define PAGED_DAEMON_FUSE_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/backend.h"

/*
 * Pure: no I/O; it grows only the caller's scratch. A worker decoding layer by layer submits,
 * per layer, an APPEND of each sequence's newest token and a DECODE of the sequences; the
 * engine plans them as two launches (the APPENDs of the pass, then the DECODEs). The CUDA
 * decode kernel can write those tokens itself, from the one CTA that reads each of them
 * (pk_decode_args.new_k), which saves a launch and a kernel per layer. That is the same
 * result only when:
 *
 *  - the batch is exactly those two launches, the APPENDs first (no other launch could read
 *    or write the tokens between them);
 *  - the k-th DECODE's partner is the k-th APPEND (both launches keep the order the engine
 *    took the requests in): one of its own client's, earlier in its ring, on the same pool
 *    and the one layer the DECODE reads, in its dtype, with no skipped slot, whose token i
 *    goes to the last position (seq_lens[i] - 1) of the DECODE's sequence i;
 *  - the queries are 16-bit and the cache is not f32 (the kernel that does it);
 *  - no block that receives a token appears anywhere else in the DECODE launch's block
 *    tables (another CTA might read it before it is written).
 *
 * Blocks an APPEND writes are held by its client alone (a writable block has one
 * reference), so only that client's rows can name them.
 */

/* A fusion found by pf_plan. */
struct pf_fusion {
    uint32_t append, decode;      /* the launches: the APPENDs' and the DECODEs' */
    uint32_t *partner;            /* for each op of the DECODE launch, in order, the batch
                                   * index of the APPEND whose tokens it appends */
};

/*
 * Decides for batch (ops in launch order). partner must hold batch->nops entries; *marks
 * (*marks_cap bytes, all zero) is scratch of a byte per pool block, grown here when short
 * and left all zero. Returns 1 and fills *out when the APPEND launch can ride in the
 * DECODE launch, 0 when not (also when out of memory).
 */
int pf_plan(const struct pd_batch *batch, uint32_t *partner, uint8_t **marks, size_t *marks_cap,
            struct pf_fusion *out);

#endif
