/* service.h: what paged-bench's service benchmark shares between its parent, its clients and the in-process run. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_BENCH_SERVICE_H
#define PAGED_TOOLS_BENCH_SERVICE_H

#include <stdint.h>

#include "tools/bench/bench.h"

/*
 * The synthetic model: 32 layers, 32 query heads over 8 KV heads of dimension 128, bf16,
 * blocks of 16 tokens. A decode step of a batch is, per layer, APPEND one token per
 * sequence, then DECODE the batch on that layer: what a worker's attention needs.
 */
#define SVC_LAYERS 32
#define SVC_HQ 32
#define SVC_HKV 8
#define SVC_D 128
#define SVC_B 16
#define SVC_ELEM 2             /* bytes of a bf16 element */
#define SVC_PROMPT_CHUNK 64    /* prompt tokens per APPEND while filling the context */

/* One service run's sizes. */
struct svc_run {
    unsigned batch;            /* sequences per client */
    unsigned context;          /* tokens in each sequence before the first step */
    unsigned warmup, steps;    /* untimed, then timed decode steps */
};

/* Returns the blocks each sequence needs for the whole run. */
static inline unsigned svc_blocks_per_seq(const struct svc_run *r)
{
    return (r->context + r->warmup + r->steps + SVC_B - 1) / SVC_B;
}

/* What a client writes to its result file: this header, then nlat request latencies and
 * nsteps step times (int64 nanoseconds each). */
#define SVC_RESULT_MAGIC 0x50424e43u
struct svc_result {
    uint32_t magic;
    uint32_t nlat;
    uint32_t nsteps;
    uint32_t reserved;
    int64_t start_ns;          /* CLOCK_MONOTONIC at the first timed step */
    int64_t end_ns;            /* and after the last */
    /* The longest timed request: its latency, the daemon's share of it (service_ns of its
     * completion), when it was submitted, and where in the run it was. */
    int64_t worst_ns, worst_service_ns, worst_t0;
    uint32_t worst_step, worst_layer;
};

/* The in-process comparison's result: the same steps, the same kernels, no service. */
struct svc_inproc {
    double step_ns;            /* median time of one 32-layer step */
    double tokens_per_s;       /* sequences * steps / the timed loop's time */
    /* The same steps with each layer awaited by the host before the next is launched (the
     * GPU writes a word of mapped host memory after the layer; the host spins on it), as a
     * worker whose next layer's queries come from its CPU would run them; NAN on the cpu
     * backend, where every layer is awaited anyway. */
    double awaited_step_ns;
    double awaited_tokens_per_s;
};

/* Runs the steps of r for seqs sequences with the kernels called in this process on
 * backend be (BENCH_CPU or BENCH_CUDA). Dies on failure. */
void svc_inproc_run(const struct bench_opts *o, enum bench_backend be, const struct svc_run *r,
                    unsigned seqs, struct svc_inproc *out);

#endif
