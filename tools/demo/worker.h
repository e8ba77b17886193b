/* worker.h: one paged-demo worker process: a libpaged client serving a batch of sequences. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_DEMO_WORKER_H
#define PAGED_TOOLS_DEMO_WORKER_H

#include <stdint.h>

#include "tools/demo/model.h"

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
};

/* What a worker reports back; small enough for one atomic pipe write. */
struct demo_result {
    uint32_t index;
    int32_t status;             /* PAGED_OK, or the first error */
    char error[200];            /* what failed, when status is an error */
    uint32_t published;         /* prefix blocks this worker published */
    uint32_t adopted;           /* prefix tokens its sequences adopted from the cache */
    uint64_t decode_tokens;
    uint64_t outputs;           /* (sequence, layer, step) outputs checked */
    uint64_t mismatches;        /* of those, outputs that differ from the reference */
    int64_t start_ns, end_ns;   /* CLOCK_MONOTONIC bounds of the decode phase */
};

/* Runs a worker from connect to close and fills *r. Returns r->status. */
int demo_worker_run(const struct demo_worker_args *a, struct demo_result *r);

#endif
