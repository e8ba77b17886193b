/* fuse.h: whether a batch's APPEND launch can ride in its DECODE launch's kernel. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_ENGINE_FUSE_H
#define PAGED_DAEMON_ENGINE_FUSE_H

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
 * What pf_plan keeps between batches (zero it before the first; pf_scratch_free frees it): a
 * byte per pool block, all zero between calls, for the scan for blocks named twice; and the
 * last single-DECODE launch it scanned (its shape, lengths and tables) with the answer, since
 * every layer of a decode step asks again about the same tables.
 */
struct pf_scratch {
    uint8_t *marks;
    size_t marks_cap;
    int32_t *seen;                /* shape (4 ints), lengths, tables of the last scan */
    size_t seen_len, seen_cap;    /* ints; seen_len 0: none */
    int seen_unaliased;           /* its answer */
};

/* Frees what the scratch holds; returns nothing. */
void pf_scratch_free(struct pf_scratch *sc);

/*
 * Decides for batch (ops in launch order). partner must hold batch->nops entries; sc is the
 * caller's scratch, grown here when short. Returns 1 and fills *out when the APPEND launch
 * can ride in the DECODE launch, 0 when not (also when out of memory).
 */
int pf_plan(const struct pd_batch *batch, uint32_t *partner, struct pf_scratch *sc, struct pf_fusion *out);

#endif
