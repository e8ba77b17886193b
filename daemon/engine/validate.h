/* validate.h: the request validator: a submission entry in, an error or a ready op out. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_ENGINE_VALIDATE_H
#define PAGED_DAEMON_ENGINE_VALIDATE_H

/*
 * Pure: no I/O, no system calls, no global state, nothing changed but the op it fills.
 * Given a private copy of one submission entry, the client's arenas and the pools it is
 * attached to, pv_validate either names what is wrong (status, field, element index) or
 * produces a struct pv_op that the engine can run without looking at shared memory again:
 * every array the op reads (block ids, block tables, lengths, qo_indptr, slots, token ids,
 * ALiBi slopes) is copied out of the host arena exactly once, and checked in the copy. The
 * tensors (q, k, v, out) stay in the data arena, checked for range and alignment only: a
 * client that scribbles on them while a request runs spoils its own results and nothing else.
 *
 * Checked, in this order: opcode; flags; dependency words; pool attached; write permission; layer; counts;
 * dtype; heads; every offset and length in the right arena (overflow-safe); every element of
 * every array. Block ids must be held by the attachment's holder for reads (pa_held), and
 * writable by it for writes (pa_writable: held once, not shared, not published).
 */

#include <stdint.h>

#include "daemon/alloc/alloc.h"
#include "lib/core/proto.h"

/* Bounds on one request, so that its private copies stay small. */
#define PV_MAX_BLOCKS (1u << 20)   /* ids per ALLOC, FREE, FORK, COPY, PUBLISH, LOOKUP */
#define PV_MAX_TOKENS (1u << 20)   /* APPEND tokens, PREFILL query rows */
#define PV_MAX_SEQS (1u << 16)     /* DECODE and PREFILL sequences */
#define PV_MAX_BT (1u << 24)       /* block-table entries (num_seqs * bt_stride) */
#define PV_MAX_Q_HEADS 4096u

/* What the validator knows of one pool the client is attached to. */
struct pv_pool {
    uint32_t id;
    uint32_t num_layers, num_kv_heads, head_dim, block_size, num_blocks;
    int32_t dtype;               /* enum paged_dtype of the cache */
    const pa_alloc *alloc;       /* read only here: pa_held, pa_writable, pa_held_total */
    int writable;                /* this client's attachment may write */
    uint32_t tenant;             /* the prefix scope of this client's PUBLISH and LOOKUP */
    uint32_t holder;             /* holder of the attachment's block references: the client id,
                                  * or its group's in a sharded pool (daemon/shard.h) */
    uint32_t shard;              /* the shard it reaches (0 when not sharded), for the engine */
    uint32_t device;             /* the device of that shard's memory */
    void *user;                  /* the engine's own pool, untouched here */
};

/* The client's side of a request. */
struct pv_env {
    const unsigned char *host;   /* host arena: shared memory, read once per element */
    uint64_t host_size;
    uint64_t data_size;          /* data arena (the host arena itself on the cpu backend) */
    uint64_t held_total;         /* block references the client's holders hold in all pools */
    uint64_t max_blocks;         /* per-client limit on them, 0 for none */
    int host_words;              /* dependency words may lie in the host arena */
    uint32_t device;             /* the client's device: APPEND, DECODE and PREFILL run on its pools only */
    /* Returns the pool id the client is attached to, or NULL. */
    const struct pv_pool *(*find_pool)(void *ctx, uint32_t id);
    void *ctx;
};

/* Why a request was refused. */
struct pv_error {
    int status;                  /* negative paged_error */
    uint16_t field;              /* enum pcore_field */
    uint32_t index;              /* element within the field */
};

/* A request that passed: everything the engine needs, in private memory. */
struct pv_op {
    uint8_t opcode;              /* enum paged_op */
    uint8_t flags;               /* PCORE_SQE_* */
    uint64_t tag;
    uint64_t wait_off, signal_off;  /* PCORE_SQE_WAIT, PCORE_SQE_SIGNAL: words of the data arena,
                                     * or of the host arena with PCORE_SQE_HOST_WORDS */
    uint32_t wait_value, signal_value;
    const struct pv_pool *pool;  /* NULL for NOP */
    const struct pv_pool *pool2; /* COPY into another pool: the destination's; else NULL */
    int32_t layer_begin;         /* DECODE, PREFILL, APPEND */
    int32_t num_layers;          /* APPEND: 1 or all */
    uint32_t count;              /* blocks, tokens or sequences, per op */
    uint32_t num_tokens;         /* APPEND: entries in slots (skipped ones included) */
    int32_t dtype;               /* APPEND: of k and v; DECODE, PREFILL: of q and out */
    uint64_t out_ids_off;        /* ALLOC, LOOKUP: where the ids found go (host arena) */
    int32_t *ids;                /* FREE, FORK, PUBLISH ids; COPY sources */
    int32_t *ids2;               /* COPY destinations */
    int32_t *slots;              /* APPEND */
    uint64_t k_off, v_off;       /* APPEND: data arena */
    uint64_t q_off, out_off;     /* DECODE, PREFILL: data arena */
    uint32_t num_q_heads;
    uint32_t bt_stride;
    int32_t *block_tables;       /* [count][bt_stride], entries past a row's length zeroed */
    int32_t *seq_lens;           /* [count] */
    int32_t *qo_indptr;          /* PREFILL: [count + 1] */
    int32_t total_q;             /* PREFILL: qo_indptr[count] */
    int32_t max_qo_len;
    float sm_scale;              /* resolved: 1/sqrt(D) when the request said 0 */
    float soft_cap;
    int32_t window;
    float *alibi;                /* [num_q_heads] or NULL */
    paged_hash *hashes;          /* PUBLISH, LOOKUP: computed here from the token ids */
    uint64_t tokens;             /* for stats: tokens appended or attended */
    uint64_t kv_bytes;           /* for stats: K/V bytes the op reads or writes */
    void *mem;                   /* the one allocation behind every array above */
};

/*
 * Validates sqe (already a private copy) for env. Returns PAGED_OK with *op filled (free
 * it with pv_op_free), or a negative paged_error with *err naming the field and element
 * (and *op empty). PAGED_E_NOMEM when the private copies cannot be allocated.
 */
int pv_validate(const struct pcore_sqe *sqe, const struct pv_env *env, struct pv_op *op,
                struct pv_error *err);

/* Frees what pv_validate allocated for op; an empty op is fine. */
void pv_op_free(struct pv_op *op);

/* Returns whether an opcode writes to its pool (needs a writable attachment). */
int pv_op_writes(unsigned opcode);

/* Returns whether an opcode is run by the backend (APPEND, DECODE, PREFILL, COPY) rather than
 * by the allocator: the ops that may carry dependency words. */
int pv_backend_op(unsigned opcode);

#endif
