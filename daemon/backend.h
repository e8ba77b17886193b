/* backend.h: the backend vtable: where pool memory lives, how it is exported, how ops run. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_BACKEND_H
#define PAGED_DAEMON_BACKEND_H

/*
 * The engine validates a request (daemon/engine/validate.h), runs the allocator part itself, and
 * hands the rest (APPEND, DECODE, PREFILL, COPY) to the backend through this table. A
 * backend owns: the memory of each pool (pool_create/pool_destroy), its export to clients
 * (pool_export: a memfd, a CUDA VMM descriptor or a legacy IPC handle), each client's data
 * arena where the host arena does not serve (arena_create/arena_destroy: the cuda device
 * arena), running one engine pass's ops as a batch (run_batch), and its health. Everything
 * is called from the engine thread only.
 *
 * A batch is a list of launches run in order: each sees the effects of those before it.
 * A launch is one op, or several DECODEs that the engine found compatible (pb_mergeable in
 * daemon/engine/batch.h: same pool, query dtype, query heads and attention options) run as ONE
 * kernel launch with per-sequence query and output pointers (pk_decode_args.q_seq/out_seq)
 * and, where their layers differ, per-sequence layers (seq_layer), or several APPENDs it
 * found compatible (pb_append_mergeable: same pool, number of layers and source dtype) run
 * as ONE launch of the segmented form (pk_append_args.k_seg/v_seg/seg_indptr, slots
 * concatenated, and seg_layer where their first layers differ). A launch the kernels refuse
 * is run op by op, each op on its own layer. run_batch returns once every output of the
 * batch is visible to its client, so the engine may post the completions then; except that
 * a backend whose device runs asynchronously (cuda) may return as soon as the batch is
 * queued when every op of it signals (PCORE_SQE_SIGNAL): it sets batch->early, writes each
 * op's signal word after the batch's work, and settle() waits for everything queued. Where
 * the engine allows it (batch->may_defer: no op waits or signals), a backend with done() may
 * also return once the batch is queued, with a ticket (batch->ticket): the engine posts the
 * completions once done() says the ticket's work is finished; batches finish in ticket order.
 *
 * Dependencies (pv_op.wait_off, .signal_off) of ops whose client has a data arena of the
 * backend's own (arenas.data): the backend writes each signal word after the batch's work.
 * The engine holds a waiting request until its word is reached, looking at host words
 * itself and at data-arena words through probe(), and hands it over with PCORE_SQE_WAIT
 * cleared; only under dependency-waits = inline does an op reach run_batch still waiting,
 * and then the backend holds the batch's work until each waited word is reached (at most
 * batch->dep_timeout_ns, then PAGED_E_TIMEOUT, or late_fn when the batch completed early).
 *
 * Several devices: a backend serves one device. A daemon serving several (GPUs, or the cpu
 * backend's PAGEDD_CPU_DEVICES) opens one backend per device and puts them behind a device
 * set (daemon/devices/devices.h), itself a backend: it routes each pool, arena and op to the
 * backend of its device by the device argument of pool_create and arena_create, and splits
 * a batch into one batch per device. A single device's backend gets device 0 always.
 *
 * Adding a backend: a folder daemon/NAME/ whose interface header NAME.h declares its open
 * function, a file there defining a const struct pd_backend_ops, and a line in
 * pd_backend_open (daemon/backend.c).
 */

#include <stddef.h>
#include <stdint.h>

#include "daemon/settings.h"
#include "daemon/engine/validate.h"
#include "kernels/kernels.h"
#include "lib/core/proto.h"

typedef struct pd_backend pd_backend;
typedef struct pd_pool_mem pd_pool_mem;  /* a backend's own record of one pool's memory */
typedef struct pd_arena pd_arena;        /* a backend's own record of one client's data arena */

/* What STATUS and WELCOME report about the backend. */
struct pd_backend_info {
    uint32_t kind;                /* enum paged_backend */
    int32_t device_ordinal;       /* -1 for cpu */
    uint8_t device_uuid[16];
    char device_name[64];
    uint64_t device_mem_free;     /* cuda: free device memory; cpu: 0 */
    int healthy;                  /* 0 after a sticky device error */
    char health[128];             /* "ok" or what went wrong */
};

/* How a pool or arena is handed to a client (the fields of POOL_REPLY and WELCOME). */
struct pd_export {
    uint32_t mem_kind;            /* enum pcore_mem_kind */
    int fd;                       /* a new descriptor to send (the caller closes it), or -1 */
    uint64_t alloc_bytes;         /* size of the exported object */
    uint8_t ipc_handle[64];       /* PCORE_MEM_CUDA_IPC */
};

/* One client's arenas as the backend runs an op for it. */
struct pd_arenas {
    unsigned char *host;          /* host arena, mapped read-write by the daemon */
    uint64_t host_size;
    pd_arena *data;               /* NULL where the host arena is the data arena (cpu) */
    uint64_t data_size;
};

/* One validated op of a batch, with what the backend needs to run it. */
struct pd_batch_op {
    const pk_cache *cache;        /* its pool's geometry and the daemon's view of its memory */
    pd_pool_mem *mem;             /* its pool's memory */
    const pk_cache *dst_cache;    /* a COPY into another pool: that pool's; else NULL */
    pd_pool_mem *dst_mem;         /* and its memory (the device set's routing); else NULL */
    struct pd_arenas arenas;      /* its client's arenas */
    const struct pv_op *op;       /* APPEND, DECODE, PREFILL or COPY */
    uint32_t user;                /* the engine's own index; the backend leaves it alone */
    uint32_t client;              /* the engine's index of its client (for pb_plan) */
    uint32_t holder;              /* its client's connection id (for late_fn) */
    int status;                   /* set by run_batch: PAGED_OK or a paged_error */
};

/* One launch of a batch: ops [first, first + count). count > 1 only for mergeable DECODEs or
 * mergeable APPENDs (all of one opcode). */
struct pd_launch {
    uint32_t first;
    uint32_t count;
    int merged;                   /* set by run_batch: the count ops ran as one kernel launch */
};

/* What run_batch runs: the ops in launch order (a launch's ops adjacent) and the launches. */
struct pd_batch {
    struct pd_batch_op *ops;
    uint32_t nops;
    struct pd_launch *launches;
    uint32_t nlaunches;
    uint64_t wait_ns;             /* set by run_batch: of its time, how long it waited for the
                                   * device (0 where it does not wait, as on the cpu backend) */
    uint64_t dep_timeout_ns;      /* the longest a waited word may keep the batch waiting */
    int early;                    /* set by run_batch: it returned with the work still queued */
    int may_defer;                /* set by the engine: run_batch may return before the work is
                                   * done, setting ticket, when the backend has done() */
    uint64_t ticket;              /* set by run_batch: nonzero when it deferred the batch */
    /* Set by a backend that queues work on a device (0 otherwise), for the engine's activity
     * log: host time laying out the metadata, issuing its upload, and queueing the launches
     * (with the dependency waits and signals and the completion event). */
    uint64_t stage_ns, upload_ns, queue_ns;
    int upload_skipped;           /* the device held the batch's metadata already */
    int meta_inline;              /* its DECODE launches carried the metadata in their parameters */
    uint32_t fused_appends;       /* APPENDs that rode in their DECODEs' launch (daemon/engine/fuse.h) */
};

/* What probe() found of a word. */
enum pd_probe { PD_PROBE_SHORT = 0, PD_PROBE_REACHED = 1, PD_PROBE_PENDING = 2 };

struct pd_backend_ops {
    const char *name;             /* "cpu", "cuda" */
    /* Allocates and zeroes a pool's memory for cache (base ignored) on device (an index below
     * b->ndevices); stores the record and
     * fills cache->base with the daemon's view of it (host pointer or device pointer).
     * Returns PAGED_OK or a paged_error with *cause. */
    int (*pool_create)(pd_backend *b, uint32_t device, pk_cache *cache, pd_pool_mem **out, char **cause);
    /* Frees a pool's memory; every client has detached. */
    void (*pool_destroy)(pd_backend *b, pd_pool_mem *mem);
    /* Fills *out with what lets a client map the pool, read-write or read-only. Returns
     * PAGED_OK or a paged_error with *cause. */
    int (*pool_export)(pd_backend *b, pd_pool_mem *mem, int writable, struct pd_export *out,
                       char **cause);
    /* Creates a client's data arena of size bytes on device and its export; NULL in a backend
     * whose data arena is the host arena. Returns PAGED_OK or a paged_error with *cause. */
    int (*arena_create)(pd_backend *b, uint32_t device, uint64_t size, pd_arena **out, struct pd_export *exp,
                        char **cause);
    /* Frees a client's data arena, then unmaps map (map_size bytes; NULL: none): the client's
     * channel, whose host arena host_register may have pinned. The backend may do both
     * later, in that order, once nothing queued can use them. */
    void (*arena_destroy)(pd_backend *b, pd_arena *arena, void *map, uint64_t map_size);
    /* Lets the backend's device wait for and write dependency words in the client's host
     * arena (PCORE_SQE_HOST_WORDS) from now on, until arena_destroy; NULL in a backend whose
     * host-arena words the engine handles. Returns PAGED_OK or a paged_error with *cause. */
    int (*host_register)(pd_backend *b, pd_arena *arena, void *host, uint64_t size, char **cause);
    /* Looks at the dependency word at off in a client's data arena (arena) without making any
     * device queue wait for it (the engine's isolated waits): returns PD_PROBE_REACHED when it
     * has reached value (the protocol's wrapping comparison), PD_PROBE_SHORT when the last look
     * found it short (and starts the next), PD_PROBE_PENDING while a look is on its way, or a
     * negative paged_error. fresh says the request is new: what a look started before it found
     * does not count for it (its word may have moved since). NULL in a backend whose data
     * arena is the host arena. */
    int (*probe)(pd_backend *b, pd_arena *arena, uint64_t off, uint32_t value, int fresh);
    /* Runs the launches of batch in order and returns once every output is visible to its
     * client, with each op's status set: an op's error is its own (a refused launch fails
     * only its ops; a merged launch that is refused is retried op by op), except that a
     * device fault the backend cannot pin on one launch fails every op of the batch that
     * had not failed already. */
    void (*run_batch)(pd_backend *b, struct pd_batch *batch);
    /* Returns once everything run_batch queued has finished (late waits reported through
     * late_fn); NULL in a backend whose run_batch never returns early. */
    void (*settle)(pd_backend *b);
    /* Retires what finished and watches what waits (daemon/cuda/flight.h's watchdog); returns
     * whether anything is still queued. NULL in a backend with nothing to watch. */
    int (*tick)(pd_backend *b);
    /* Returns 1 when the work of the deferred batch with ticket (and of every earlier one)
     * has finished, 0 while it runs, or a negative paged_error when a device fault lost it
     * (its ops failed). NULL in a backend that never defers. */
    int (*done)(pd_backend *b, uint64_t ticket);
    /* Returns whether run_batch could queue another batch now without first waiting for one
     * already queued (as of the last tick or done). NULL: it always can. */
    int (*room)(pd_backend *b);
    /* Logs the backend's own measurements since the last call at level, if it keeps any (the
     * engine calls it when it logs its own activity, once idle, at that level). NULL: none. */
    void (*report)(pd_backend *b, enum pd_log_level level);
    /* Allocates size bytes of zeroed host memory for a pool's host tier, pinned where the
     * device copies to and from it (cuda). Returns PAGED_OK or a paged_error with *cause.
     * NULL: the tiers map anonymous memory themselves. */
    int (*host_alloc)(pd_backend *b, uint64_t size, void **out, char **cause);
    /* Frees what host_alloc gave (size: as asked). */
    void (*host_free)(pd_backend *b, void *p, uint64_t size);
    /* Copies n blocks of a pool into units of host memory (to_units) or units into blocks, every
     * layer's keys then values (daemon/tier/tiers.h), after everything queued before it and
     * before anything queued after it, and returns once the copies are done. Returns PAGED_OK
     * or a paged_error with *cause. NULL: the pool's memory is host memory (cpu), and the
     * tiers copy it themselves. */
    int (*units_copy)(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, int to_units, uint32_t n,
                      const int32_t *blocks, unsigned char *const *units, char **cause);
    /* Copies each of n blocks into save[i] (unless NULL), then load[i] into it, as units_copy
     * does each, overlapping the saves with the loads where the device can (a reload into
     * blocks that its own allocation evicted), and returns once all are done. Returns
     * PAGED_OK or a paged_error with *cause. NULL: the tiers save, then load. */
    int (*units_swap)(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, uint32_t n, const int32_t *blocks,
                      unsigned char *const *save, unsigned char *const *load, char **cause);
    /* Allocates size bytes of device memory for the peers' staging buffers (daemon/peer/).
     * Returns PAGED_OK or a paged_error with *cause. NULL: pools are host memory (cpu), and
     * the peers stage in host memory. */
    int (*dev_alloc)(pd_backend *b, uint64_t size, void **out, char **cause);
    /* Frees what dev_alloc gave (size: as asked). */
    void (*dev_free)(pd_backend *b, void *p, uint64_t size);
    /* Stores pk_unit_sum of each of n units of unit_bytes laid out one after another from
     * units (dev_alloc's memory) in sums[i], host memory, and returns once done. Returns
     * PAGED_OK or a paged_error with *cause. NULL with dev_alloc. */
    int (*units_sums)(pd_backend *b, const void *units, uint32_t n, uint64_t unit_bytes, uint64_t *sums,
                      char **cause);
    /* Copies n blocks of a pool into units (to_units) or units into blocks, as units_copy
     * does, the units lying one after another from units in dev_alloc's memory, and stores
     * each unit's pk_unit_sum in sums[i] (host memory), taken in the same pass over the bytes.
     * Returns PAGED_OK, PAGED_E_NOTSUP (with *cause) when one pass cannot reach these units
     * (units_copy and units_sums then do it), or a paged_error with *cause. NULL: likewise
     * units_copy and units_sums. */
    int (*units_move)(pd_backend *b, pd_pool_mem *mem, const pk_cache *cache, int to_units, uint32_t n,
                      const int32_t *blocks, unsigned char *units, uint64_t *sums, char **cause);
    /* Fills *out about device (an index below b->ndevices). */
    void (*info)(pd_backend *b, uint32_t device, struct pd_backend_info *out);
    /* Makes the backend's device current on the calling thread; the device set calls it
     * before each op it hands to a backend of several. Returns PAGED_OK or a paged_error with
     * *cause. NULL: nothing to do (host memory). */
    int (*enter)(pd_backend *b, char **cause);
    /* Lets b's kernels and copies read and write the memory of other (a backend of the same
     * kind on another device of the set: peer access). Returns PAGED_OK, or a paged_error
     * with *cause when the devices cannot reach each other. NULL: any memory is reachable. */
    int (*reach)(pd_backend *b, pd_backend *other, char **cause);
    /* Frees the backend (pools and arenas are gone by then). */
    void (*destroy)(pd_backend *b);
};

struct pd_backend {
    const struct pd_backend_ops *ops;
    void *priv;
    /* Set by the engine: told of each waited word that timed out in a batch completed early
     * (holder: the connection id; off and value: the word and what it waited for). */
    void (*late_fn)(void *ctx, uint32_t holder, uint64_t off, uint32_t value);
    void *late_ctx;
    /* Set by the backend: a deferred batch runs on after run_batch returns (a GPU's stream,
     * or the cpu backend under PAGEDD_CPU_DONE_US), so two batches queued back to back
     * overlap one's completions with the other's work (the engine's split passes). */
    int runs_behind;
    /* The devices it serves: 1, or a device set's. */
    uint32_t ndevices;
};

/*
 * Opens the backend cfg asks for: cpu, cuda (an error naming why when it is not built or
 * no device is usable), or auto (cuda when built in and a device is present, else cpu), on
 * every device cfg->device names (cuda: every visible GPU when it names none; cpu: one, or
 * PAGEDD_CPU_DEVICES), behind a device set where there are several. Returns it, or NULL
 * with *cause.
 */
pd_backend *pd_backend_open(const struct pd_config *cfg, char **cause);

/* Closes a backend. NULL is ignored. */
void pd_backend_close(pd_backend *b);

#endif
