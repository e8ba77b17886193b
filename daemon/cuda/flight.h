/* flight.h: the cuda backend's batches in flight: staging slots, their events, the watchdog over waited words. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_CUDA_FLIGHT_H
#define PAGED_DAEMON_CUDA_FLIGHT_H

/*
 * A batch whose requests all signal (PCORE_SQE_SIGNAL) is completed by the engine as soon as
 * it is queued, so several batches may be on the stream at once. Each one owns a slot: the
 * pinned host buffer its metadata upload reads from (the next batch must not overwrite it
 * before the copy has run), an event recorded after its last operation, and its waited words
 * (the stream waits for them with cuStreamBatchMemOp before the batch's launches). Slots are
 * taken round-robin; one is reused once its event has completed.
 *
 * The watchdog. A stream waiting for a word that its client never writes would hold every
 * later batch of every client. So whenever the engine looks (pd_cu_flight_poll, and in every
 * wait of the backend), the oldest batch still queued (the head) is timed from when it became
 * the head; past the dependency timeout, each of its words that is still short of its value
 * is read and, if so, written with that value from a stream of the watchdog's own, which
 * releases the wait, and marked late. Retiring a slot reports its late words to the backend's
 * late_fn (the engine disconnects those clients: their completions were posted long before),
 * except for a batch the backend waits for itself (sync), whose late words become the
 * PAGED_E_TIMEOUT of their requests.
 */

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "daemon/backend.h"
/* PD_CU_SLOTS, and PD_CU_DEPTH and PD_CU_POLL_GAP_NS, the defaults of PAGEDD_INFLIGHT and
 * PAGEDD_POLL_GAP_US. */
#include "daemon/util/knobs.h"

/* One waited word of a batch. */
struct pd_cu_wait {
    CUdeviceptr addr;             /* the word, as the daemon maps it */
    uint32_t value;
    uint32_t op;                  /* the op's index in its batch */
    uint32_t holder;              /* the client (connection id) */
    uint64_t off;                 /* the word's offset in the client's data (or host) arena */
    int late;                     /* the watchdog wrote it */
};

struct pd_cu_slot {
    cudaEvent_t done;             /* recorded after the batch's last operation */
    cudaEvent_t start;            /* with PAGEDD_DEVICE_TIMING: recorded before its first */
    unsigned char *h_stage;       /* pinned metadata staging */
    size_t stage_cap;
    struct pd_cu_wait *waits;     /* [nwaits] */
    uint32_t nwaits, waits_cap;
    int busy;                     /* queued and not yet retired */
    int sync;                     /* the backend waits for it and reads its late words itself */
    uint64_t ticket;              /* its batch's number (pd_cu_flight_end), 1 up */
};

struct pd_cu_flight {
    struct pd_cu_slot slot[PD_CU_SLOTS];
    unsigned next;                /* the slot the next batch takes: the oldest */
    unsigned depth;               /* most batches queued at once */
    uint64_t head_since_ns;       /* when the oldest busy slot became the oldest (0: none) */
    cudaStream_t rescue;          /* the watchdog's stream */
    uint32_t *word;               /* pinned: one word the watchdog reads or writes */
    pd_backend *b;                /* whose late_fn hears of late words */
    cudaError_t error;            /* the watchdog's own last failure, for the waiting loops */
    uint64_t tickets;             /* batches ended so far: the last ticket given */
    uint64_t lost;                /* the last ticket whose batch a device fault lost (0: none) */
    cudaError_t fault;            /* that fault */
    /* PAGEDD_DEVICE_TIMING=1 (a benchmarking aid): the slots' events time each batch on the
     * stream and the idle gap before it; pd_cu_flight_report logs and resets the sums. */
    int timing;
    uint64_t timed, busy_ns, gaps, gap_ns;
    /* PAGEDD_FAIL_EVENT_AT=N, a test aid: the Nth batch's event is not recorded, its record
     * failing as a CUDA call refused with a non-sticky error would. 0: never. */
    uint64_t fail_event_at, events;
    const struct pd_cu_slot *last_timed;   /* the batch retired before, whose end starts a gap */
    /* The last query that found the oldest batch unfinished: its ticket and when it answered. */
    uint64_t queried_ticket, queried_ns, poll_gap_ns;
    uint64_t queries, skipped;    /* event queries made, and polls answered without one */
};

/* Makes the slots' events and the watchdog's stream and word, and reads PAGEDD_INFLIGHT;
 * returns cudaSuccess or the runtime's error. */
cudaError_t pd_cu_flight_init(struct pd_cu_flight *f, pd_backend *b);

/* With timing on, records slot s's start event on stream before its first operation;
 * returns cudaSuccess or the runtime's error. */
cudaError_t pd_cu_flight_mark_start(struct pd_cu_flight *f, struct pd_cu_slot *s, cudaStream_t stream);

/* Logs at level the event queries made since the last report and, with timing on, the
 * batches timed (time on the stream, idle gaps under a millisecond before them), and starts
 * afresh; returns nothing. */
void pd_cu_flight_report(struct pd_cu_flight *f, enum pd_log_level level);

/* Frees everything (the device is idle); returns nothing. */
void pd_cu_flight_free(struct pd_cu_flight *f);

/*
 * Takes the next slot for a batch with stage bytes of metadata and nwaits waited words:
 * waits (watched over, at most about timeout_ns past its own waits) until fewer than depth
 * batches are queued, retiring them, and grows the slot's buffers. Returns cudaSuccess with *out set, or
 * the runtime's error.
 */
cudaError_t pd_cu_flight_begin(struct pd_cu_flight *f, size_t stage, uint32_t nwaits, uint64_t timeout_ns,
                               struct pd_cu_slot **out);

/* Records the slot's event on stream after the batch and marks it in flight (sync: the caller
 * will wait for it with pd_cu_flight_wait). Returns cudaSuccess or the runtime's error. */
cudaError_t pd_cu_flight_end(struct pd_cu_flight *f, struct pd_cu_slot *s, cudaStream_t stream, int sync);

/* Retires every slot whose batch has finished and watches the head; returns whether any
 * batch is still in flight. */
int pd_cu_flight_poll(struct pd_cu_flight *f, uint64_t timeout_ns);

/* Waits, watching, until slot s's batch (and so every earlier one) has finished; returns
 * cudaSuccess or the error the device reported. */
cudaError_t pd_cu_flight_wait(struct pd_cu_flight *f, struct pd_cu_slot *s, uint64_t timeout_ns);

/* Waits, watching, until no batch is in flight; returns cudaSuccess or the device's error. */
cudaError_t pd_cu_flight_settle(struct pd_cu_flight *f, uint64_t timeout_ns);

/* Waits, watching, until stream is idle, where the batch of slot s (begun, not ended: its
 * event could not be recorded, or it never got that far) is the last one queued; its waits
 * are released past timeout_ns like a head's. Returns the stream's status. */
cudaError_t pd_cu_flight_drain(struct pd_cu_flight *f, struct pd_cu_slot *s, cudaStream_t stream,
                               uint64_t timeout_ns);

/* Returns 1 when the batch with ticket (and so every earlier one) has finished, 0 while it
 * is queued, -1 when a device fault lost it (f->fault says which). Looks, does not poll. */
int pd_cu_flight_done(const struct pd_cu_flight *f, uint64_t ticket);

/* Returns whether pd_cu_flight_begin would take a slot without waiting (fewer than depth
 * batches queued, as of the last poll). Looks, does not poll. */
int pd_cu_flight_room(const struct pd_cu_flight *f);

/* Marks slot s free without reports; returns nothing. */
void pd_cu_flight_release(struct pd_cu_slot *s);

/* Marks every slot free without reports (after a device fault); returns nothing. */
void pd_cu_flight_release_all(struct pd_cu_flight *f);

#endif
