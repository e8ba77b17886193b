/* internal.h: what the cuda backend's files share: its record, its error handling, its batch runner. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_CUDA_INTERNAL_H
#define PAGED_DAEMON_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "daemon/backend.h"
#include "daemon/cuda/flight.h"
#include "daemon/cuda/mem.h"
#include "daemon/cuda/reaper.h"
#include "daemon/cuda/stage.h"
#include "daemon/cuda/units.h"
#include "daemon/engine/fuse.h"

/*
 * The cuda backend's core is two files: backend.c sets the device up and owns its memory (pools,
 * arenas, health; its top comment says how batches run), and batch.c runs the engine's
 * batches on the stream. This header holds what they share.
 */

/* Smallest staging buffer, and the largest decode workspace the backend will allocate (the
 * kernels split less when they get less). */
#define PD_CUDA_STAGE_MIN (64u << 10)
#define PD_CUDA_WS_MAX (512ull << 20)

struct cuda_backend {
    pd_backend *backend;          /* the table this is the private part of */
    struct pd_cu_device dev;
    cudaStream_t stream;
    struct pd_cu_units units;     /* the tiers' second copy stream and its event (units.h) */
    uint64_t *sums_dev;           /* the peers' unit sums land here (staging.c), sums_cap of them */
    uint32_t sums_cap;
    uint8_t uuid[16];
    char name[64];
    unsigned char *d_stage;       /* device staging */
    size_t stage_cap;             /* bytes of d_stage */
    /* What the last upload put in d_stage (its first last_len bytes; 0: not known). A batch
     * whose metadata is the same bytes, as every layer of a decode step is, skips its upload. */
    unsigned char *last_stage;
    size_t last_len, last_cap;
    /* The batch being run: whether its APPEND launch rides in its DECODE launch (fuse.h),
     * and the scratch pf_plan decides with. PAGEDD_FUSE=0 turns it off. */
    int fuse_enabled, fused;
    struct pf_fusion fusion;
    uint32_t *partner;
    size_t partner_cap;
    struct pf_scratch fuse_scratch;
    struct pd_cu_flight flight;   /* batches queued and completed early (flight.h) */
    struct pd_cu_prober prober;   /* looks at clients' dependency words (probe.h) */
    uint64_t dep_timeout_ns;      /* the watchdog's: the last batch's dep_timeout_ns */
    void *ws;                     /* decode/prefill workspace */
    size_t ws_cap;
    struct pd_cu_launch *launch;  /* the launches of the batch being run */
    size_t launch_cap;
    /* The batch being run carries its metadata in its DECODE launches' parameters
     * (pk_decode_args.meta_host) and has not uploaded it: meta_host, meta_len bytes, is its
     * slot's staging. PAGEDD_META_INLINE=0 turns it off. */
    int meta_inline_enabled, meta_pending;
    const unsigned char *meta_host;
    size_t meta_len;
    /* The last metadata carried so (its hash and length): the same again is uploaded instead,
     * so that the batches after it (a decode step's other layers) find it on the device. */
    uint64_t inlined_hash;
    size_t inlined_len;
    /* When dependency words are waited for and written by kernels (kernels.h,
     * pk_cuda_dep_wait) instead of stream memory operations: 0 never, 1 in batches with the
     * words of several clients (under MPS), 2 always; PAGEDD_DEP_KERNELS sets it. */
    int dep_kernels;
    int refuse_merged;            /* PAGEDD_REFUSE_MERGED (backend.h): a test aid */
    /* PAGEDD_FAULT_AFTER=N, a test aid: batch N (counting from 1) queues a kernel that traps
     * before its launches, losing the context as a device fault would. 0: never. */
    uint64_t fault_after, batches;
    /* PAGEDD_FAIL_UPLOAD_AT=N, a test aid: the Nth metadata upload fails as a CUDA call
     * refused with a non-sticky error would, and is not made. 0: never. */
    uint64_t fail_upload_at, uploads;
    char who[32];                 /* "cuda device N", for the log */
    int healthy;
    char health[128];
    unsigned warned;              /* non-sticky errors logged so far */
    struct pd_cu_reaper reaper;   /* frees departed clients' arenas (reaper.h) */
};

/*
 * Handles a failure of what: e is the error a call returned (cudaSuccess when the kernel
 * library only said PAGED_E_DEVICE). Clears a non-sticky error; a sticky one marks the
 * backend unhealthy and is logged once. Returns PAGED_E_DEVICE.
 */
int pd_cu_error(struct cuda_backend *cb, const char *what, cudaError_t e);

/* Waits for everything queued on the stream and retires every batch in flight (reporting
 * late waits); a failed synchronization is a device error. Returns nothing. */
void pd_cu_settle(pd_backend *b);

/* Runs a batch on the stream (backend.h's run_batch; batch.c). Returns nothing. */
void pd_cu_run_batch(pd_backend *b, struct pd_batch *batch);

#endif
