/* batch.h: planning an engine pass: which requests join it, and which APPENDs and DECODEs share a launch. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_ENGINE_BATCH_H
#define PAGED_DAEMON_ENGINE_BATCH_H

/*
 * Pure: no I/O, no allocation. The engine (daemon/engine/engine.c) takes each client's requests in
 * ring order into a pass; the allocator ops (NOP, ALLOC, FREE, FORK, PUBLISH, LOOKUP) run at
 * once, the rest wait for the backend. The pass then runs as one batch:
 *
 *   1. every APPEND, PREFILL and COPY in the order they were taken, one launch each, except
 *      that APPENDs pb_append_mergeable finds compatible are gathered into one launch, which
 *      runs at the position of its first member (the rules for that are below);
 *   2. the DECODEs, those that pb_mergeable finds compatible gathered into one launch.
 *
 * The allocator ops run when they are taken, the backend's ops later, and step 2 moves a
 * DECODE behind ops taken after it; so a client's requests join a pass only while that
 * cannot change what any request sees (pb_may_join, pb_decode_conflicts):
 *
 *   - once a DECODE of a client is in the pass, only its further DECODEs (and NOPs) join, and
 *     only those whose query and output do not overlap the output of an earlier one, nor
 *     their output the query of an earlier one: DECODEs of a launch run in any order;
 *   - a FREE, FORK or PUBLISH does not join after a request of its client that waits for the
 *     backend: it would take away, before that request runs, a right over a block (held,
 *     writable) that the request was validated with;
 *   - where the data arena is the host arena (cpu backend), nothing but a DECODE joins after
 *     a DECODE or PREFILL (they write the arena at launch, later than the request after them
 *     was validated from it), and such a DECODE's block table, lengths and slopes must not
 *     overlap their outputs; nor does an ALLOC or LOOKUP (it writes its ids into the arena
 *     at once) join after any request that waits for the backend.
 *
 * The first request that may not join ends the client's part of the pass and stays in its
 * ring for the next pass. So every op waiting for the backend still has, when it runs, the
 * rights it was validated with, and across clients nothing conflicts: an op reads only blocks
 * its client holds and writes only blocks its client holds alone, until the pass ends; the
 * ops that are not DECODEs run in the order they were taken, which is also the order of every
 * allocator change.
 *
 * Layers do not enter these arguments: rights are over whole blocks (every layer of a block
 * at once), and a DECODE writes only its client's data arena, whatever layer it reads. So
 * a merged launch carries its members' layers with it (pk_decode_args.seq_layer, one per
 * sequence; pk_append_args.seg_layer, one per segment) and members need not share a layer:
 * clients that have drifted to different layers still share one launch. Every layer in
 * those arrays is a member's own, which pv_validate checked against its pool (so the
 * kernels, which trust device arrays, only ever see layers in range).
 *
 * Merged APPENDs (pb_plan). Gathering an APPEND into a group moves it forward, to the group's
 * first member, past the ops taken between the two. Those of other clients cannot conflict:
 * an APPEND writes only slots of blocks its client holds alone (pv_validate checks
 * pa_writable: held, refcount 1, not published), which no op of another client reads or
 * writes, and it reads only its own client's data arena, which only its client's ops write.
 * Those of its own client can, so an APPEND joins a group only if no backend op of its client
 * taken before it (PREFILL, COPY, another APPEND not in the group) runs after the group's
 * position; and, as the members of a launch run in any order, only if its slots do not
 * overlap (as ranges) those of its client's members already in the group: two of its
 * APPENDs of different layers with disjoint slots write different (layer, slot) pairs, and
 * so do two of any layers with disjoint slots. Members have the same pool, number of layers
 * and source dtype, each its own first layer; a group stops growing at PB_MAX_MERGED_TOKENS
 * tokens, so larger APPENDs run alone. DECODEs still run after every APPEND, as before.
 */

#include <stdint.h>

#include "daemon/backend.h"
#include "daemon/engine/validate.h"
#include "lib/core/proto.h"

/* The most block-table entries (sequences x padded stride) of one merged launch, so that
 * merging a long-context request with many short ones cannot make a huge padded table. */
#define PB_MAX_MERGED_BT (1u << 22)
/* The most tokens (slot entries, skipped ones included) of one merged APPEND launch, so that
 * its staged slots stay small; an APPEND of more runs alone. */
#define PB_MAX_MERGED_TOKENS (1u << 14)
/* How many of the latest groups an APPEND or DECODE is compared with before it opens a new one. */
#define PB_GROUP_SCAN 64u

/* What the rules know of one client's requests already in the pass. */
struct pb_client {
    int host_is_data;             /* its data arena is its host arena (cpu backend) */
    int decode_taken;             /* a valid DECODE of it waits for the backend */
    int backend_taken;            /* any valid op of it waits for the backend */
    int writer_taken;             /* a valid DECODE or PREFILL (writes the data arena) waits */
};

/*
 * Returns whether the client's next request, of opcode (as the entry says, before it is
 * validated), may join the pass after what cl records; 0 ends its part of the pass.
 */
int pb_may_join(const struct pb_client *cl, unsigned opcode);

/*
 * Returns whether the validated DECODE op (sqe: its entry) must wait for the next pass
 * because of w, an op of the same client that waits for the backend in this pass.
 */
int pb_decode_conflicts(const struct pb_client *cl, const struct pv_op *w, const struct pv_op *op,
                        const struct pcore_sqe *sqe);

/* Records in cl that op (valid) joined the pass and waits for the backend. */
void pb_taken(struct pb_client *cl, const struct pv_op *op);

/* Returns whether DECODEs a and b may run in one launch: same pool and shard, query dtype, query
 * heads, scale, soft cap, window, and no ALiBi or the same slopes. Their layers may differ
 * (each sequence of the launch reads its own). */
int pb_mergeable(const struct pv_op *a, const struct pv_op *b);

/* Returns whether APPENDs a and b may run in one launch: same pool and shard, number of layers and
 * source dtype. Their first layers may differ (each segment of the launch has its own). */
int pb_append_mergeable(const struct pv_op *a, const struct pv_op *b);

/* One group of ops that share a launch while pb_plan builds it (DECODEs, APPENDs, or one
 * PREFILL or COPY alone). */
struct pb_group {
    uint32_t head, tail;          /* first and last member (indices into the input) */
    uint32_t count;               /* members */
    uint64_t seqs;                /* DECODE: their sequences */
    uint32_t max_stride;          /* DECODE: their largest bt_stride */
    uint64_t tokens;              /* APPEND: their tokens */
    uint32_t client;              /* APPEND: the client of the latest member */
    int32_t slot_lo, slot_hi;     /* APPEND: the range of that client's members' slots
                                   * (lo > hi: none) */
};

/*
 * Orders the n ops of in (in the order they were taken, the ops of one client adjacent:
 * pd_batch_op.client) into out as launches: first every op that is not a DECODE, in order,
 * one launch each except that each group of mergeable APPENDs (see the top of this file)
 * is one launch at the position of its first member; then the DECODEs, each group of
 * mergeable ones as one launch, groups in order of their first member. A group's members
 * are adjacent in out, in the order taken. A DECODE group stops growing at PB_MAX_MERGED_BT
 * padded table entries, an APPEND group at PB_MAX_MERGED_TOKENS tokens. launches must hold
 * n entries; groups and next are scratch of n entries. Returns the number of launches.
 */
uint32_t pb_plan(const struct pd_batch_op *in, uint32_t n, struct pd_batch_op *out,
                 struct pd_launch *launches, struct pb_group *groups, uint32_t *next);

#endif
