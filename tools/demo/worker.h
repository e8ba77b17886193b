/* worker.h: one paged-demo worker process: a libpaged client serving a batch of sequences. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_DEMO_WORKER_H
#define PAGED_TOOLS_DEMO_WORKER_H

#include <stdint.h>

#include "tools/demo/model.h"

struct demo_result;

/* Where a worker is; its reports say it, and the parent's progress lines follow the least
 * advanced worker. */
enum demo_phase {
    DEMO_PHASE_BUILD = 0,       /* connecting, opening the pool, building the prompts */
    DEMO_PHASE_DECODE = 1,      /* prompts built (at the first barrier), or decoding */
    DEMO_PHASE_CHECK = 2,       /* decoded (at the second barrier), or checking outputs */
    DEMO_PHASE_DONE = 3,        /* the final report */
};

/* What a worker is told to do. */
struct demo_worker_args {
    const char *socket;         /* the daemon's socket */
    const char *pool_name;
    const struct demo_model *model;
    uint32_t pool_blocks;       /* size of the pool, if this worker creates it */
    uint32_t index;             /* 0 publishes the shared prefix, the others adopt it */
    uint32_t num_seqs;          /* sequences decoded together, as one batch */
    uint32_t prefix_len;        /* shared prompt prefix, in tokens */
    uint32_t suffix_len;        /* each sequence's own prompt tokens after the prefix */
    uint32_t steps;             /* decode steps */
    uint64_t seed;
    int published_fd;           /* worker 0: write a byte per other worker once published */
    int wait_fd;                /* the others: read one byte (or EOF) before adopting */
    uint32_t num_workers;
    /* Called by every worker before and after its decode loop, failed or not: returns when
     * all workers got there, so that they decode at the same time and none is checking
     * its outputs (which is CPU-heavy) while another is being timed. */
    void (*barrier)(void *ctx);
    void *barrier_ctx;
    /* Called with the worker's result so far: when its phase changes (before it crosses a
     * barrier, so the parent has it once the worker arrived) and at most every
     * DEMO_REPORT_MS within a phase. The final result is the caller's to send. */
    void (*report)(void *ctx, const struct demo_result *r);
    void *report_ctx;
};

/* The least time between two reports of a worker within one phase, in milliseconds. */
#define DEMO_REPORT_MS 250

/* What a worker reports back; small enough for one atomic pipe write. */
struct demo_result {
    uint32_t index;
    int32_t phase;              /* enum demo_phase */
    int32_t status;             /* PAGED_OK, or the first error */
    char error[200];            /* what failed, when status is an error */
    int32_t pid;                /* the worker's process */
    uint32_t client_id;         /* the daemon's id of its client (pactl's HOLDERS), 0: none */
    int32_t backend;            /* the daemon's paged_backend, 0: not connected */
    int32_t created;            /* 1: it created the pool, 0: it attached to it */
    uint32_t pool_id;           /* the pool's id, 0 until it is open */
    uint32_t pool_blocks;       /* the pool's size in blocks */
    uint64_t pool_bytes;        /* and in bytes */
    uint32_t seqs_built;        /* sequences whose prompts are built */
    uint32_t published;         /* prefix blocks this worker published */
    uint32_t adopted;           /* prefix tokens its sequences adopted from the cache */
    uint32_t adopted_seqs;      /* its sequences that adopted some */
    uint32_t steps_done;        /* decode steps done */
    uint64_t decode_tokens;
    uint64_t outputs;           /* (sequence, layer, step) outputs checked so far */
    uint64_t mismatches;        /* of those, outputs that differ from the reference */
    int64_t start_ns, end_ns;   /* CLOCK_MONOTONIC bounds of the decode phase */
};

/* Runs a worker from connect to close and fills *r. Returns r->status. */
int demo_worker_run(const struct demo_worker_args *a, struct demo_result *r);

#endif
