/* flight.c: the cuda backend's batches in flight: staging slots, their events, the watchdog over waited words. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "daemon/cuda/flight.h"
#include "daemon/util/knobs.h"
#include "daemon/util/heap.h"
#include "daemon/util/log.h"
#include "lib/core/clock.h"
#include "lib/core/wake.h"

/* Makes the slots' events and the watchdog's stream and word; see flight.h. */
cudaError_t pd_cu_flight_init(struct pd_cu_flight *f, pd_backend *b)
{
    *f = (struct pd_cu_flight) { .b = b, .depth = (unsigned) pd_knob(PD_KNOB_INFLIGHT) };
    if (pd_knob_is_set(PD_KNOB_INFLIGHT))
        pd_log(PD_LOG_INFO, "cuda: up to %u batches queued at once (PAGEDD_INFLIGHT)", f->depth);
    f->poll_gap_ns = pd_knob(PD_KNOB_POLL_GAP_US) * 1000u;
    if (pd_knob_is_set(PD_KNOB_POLL_GAP_US))
        pd_log(PD_LOG_INFO, "cuda: an unfinished batch is queried at most every %llu us (PAGEDD_POLL_GAP_US)",
               (unsigned long long) pd_knob(PD_KNOB_POLL_GAP_US));
    f->timing = pd_knob(PD_KNOB_DEVICE_TIMING) != 0;
    const unsigned flags = f->timing ? cudaEventDefault : cudaEventDisableTiming;
    for (unsigned i = 0; i < PD_CU_SLOTS; i++) {
        cudaError_t e = cudaEventCreateWithFlags(&f->slot[i].done, flags);
        if (e == cudaSuccess && f->timing)
            e = cudaEventCreateWithFlags(&f->slot[i].start, cudaEventDefault);
        if (e != cudaSuccess)
            return e;
    }
    if (f->timing)
        pd_log(PD_LOG_INFO, "cuda: timing every batch on the device (PAGEDD_DEVICE_TIMING)");
    cudaError_t e = cudaStreamCreateWithFlags(&f->rescue, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **) &f->word, sizeof *f->word, cudaHostAllocDefault);
    return e;
}

/* Frees everything; see flight.h. */
void pd_cu_flight_free(struct pd_cu_flight *f)
{
    /* Errors change nothing here: the backend is going away. */
    for (unsigned i = 0; i < PD_CU_SLOTS; i++) {
        struct pd_cu_slot *s = &f->slot[i];
        if (s->done != NULL)
            cudaEventDestroy(s->done);
        if (s->start != NULL)
            cudaEventDestroy(s->start);
        if (s->h_stage != NULL)
            cudaFreeHost(s->h_stage);
        free(s->waits);
        *s = (struct pd_cu_slot) { 0 };
    }
    if (f->rescue != NULL)
        cudaStreamDestroy(f->rescue);
    if (f->word != NULL)
        cudaFreeHost(f->word);
    f->rescue = NULL;
    f->word = NULL;
}

/* Marks slot s free without reports; see flight.h. */
void pd_cu_flight_release(struct pd_cu_slot *s)
{
    s->busy = 0;
    s->sync = 0;
    s->nwaits = 0;
}

/* Marks every slot free; see flight.h. */
void pd_cu_flight_release_all(struct pd_cu_flight *f)
{
    for (unsigned i = 0; i < PD_CU_SLOTS; i++) {
        /* After a device fault: whatever was still queued is lost with it. */
        if (f->slot[i].busy && f->slot[i].ticket > f->lost)
            f->lost = f->slot[i].ticket;
        pd_cu_flight_release(&f->slot[i]);
    }
    f->head_since_ns = 0;
}

/* Says whether the batch with ticket has finished; see flight.h. */
int pd_cu_flight_done(const struct pd_cu_flight *f, uint64_t ticket)
{
    if (ticket <= f->lost)
        return -1;
    for (unsigned i = 0; i < PD_CU_SLOTS; i++)
        if (f->slot[i].busy && f->slot[i].ticket <= ticket)
            return 0;
    return 1;
}

/* Says whether a slot is free for the next batch; see flight.h. */
int pd_cu_flight_room(const struct pd_cu_flight *f)
{
    unsigned busy = 0;
    for (unsigned i = 0; i < PD_CU_SLOTS; i++)
        busy += f->slot[i].busy != 0;
    return busy < f->depth && !f->slot[f->next].busy;
}

/* Reports the slot's late words to the backend's late_fn and frees the slot; returns nothing. */
static void retire(struct pd_cu_flight *f, struct pd_cu_slot *s)
{
    for (uint32_t i = 0; i < s->nwaits; i++)
        if (s->waits[i].late && f->b->late_fn != NULL)
            f->b->late_fn(f->b->late_ctx, s->waits[i].holder, s->waits[i].off, s->waits[i].value);
    pd_cu_flight_release(s);
}

/* Releases the head slot's words that are still short of their values by writing them from the
 * watchdog's stream, and marks them late. Returns cudaSuccess or the runtime's error. The read
 * and the write are two steps: a word its client moves on in between is set back to the
 * awaited value, which only a client already late by the whole timeout can suffer, and it is
 * disconnected or told PAGED_E_TIMEOUT. */
static cudaError_t rescue(struct pd_cu_flight *f, struct pd_cu_slot *s)
{
    for (uint32_t i = 0; i < s->nwaits; i++) {
        struct pd_cu_wait *w = &s->waits[i];
        /* cudaMemcpyDefault: the word is device memory, or mapped host memory (host words). */
        cudaError_t e = cudaMemcpyAsync(f->word, (const void *) (uintptr_t) w->addr, 4, cudaMemcpyDefault,
                                        f->rescue);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(f->rescue);
        if (e != cudaSuccess)
            return e;
        if ((int32_t) (*f->word - w->value) >= 0)
            continue;
        *f->word = w->value;
        e = cudaMemcpyAsync((void *) (uintptr_t) w->addr, f->word, 4, cudaMemcpyDefault, f->rescue);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(f->rescue);
        if (e != cudaSuccess)
            return e;
        w->late = 1;
        pd_log(PD_LOG_DEBUG, "cuda: released a wait for word %llu of client %u (value %u) after the timeout",
               (unsigned long long) w->off, w->holder, w->value);
    }
    return cudaSuccess;
}

/* Adds finished slot s's time on the stream, and the idle gap between the batch timed before
 * it and s, to the sums; returns nothing. Timing is a measurement aid: a failed query only
 * leaves the batch out. */
static void time_slot(struct pd_cu_flight *f, const struct pd_cu_slot *s)
{
    float busy = 0.0f, gap = -1.0f;
    if (cudaEventElapsedTime(&busy, s->start, s->done) != cudaSuccess) {
        (void) cudaGetLastError();
        return;
    }
    f->timed++;
    f->busy_ns += (uint64_t) (busy * 1e6f);
    if (f->last_timed != NULL && cudaEventElapsedTime(&gap, f->last_timed->done, s->start) != cudaSuccess)
        (void) cudaGetLastError();
    else if (gap >= 0.0f && gap < 1.0f) {   /* longer: the engine had nothing to run */
        f->gaps++;
        f->gap_ns += (uint64_t) (gap * 1e6f);
    }
    f->last_timed = s;
}

/* Records s's start event when timing; see flight.h. */
cudaError_t pd_cu_flight_mark_start(struct pd_cu_flight *f, struct pd_cu_slot *s, cudaStream_t stream)
{
    return f->timing ? cudaEventRecord(s->start, stream) : cudaSuccess;
}

/* Logs and resets the query counts and the timing sums; see flight.h. */
void pd_cu_flight_report(struct pd_cu_flight *f, enum pd_log_level level)
{
    if (f->queries != 0)
        pd_log(level, "cuda: %llu event queries; %llu polls answered by one under %llu us old",
               (unsigned long long) f->queries, (unsigned long long) f->skipped,
               (unsigned long long) (f->poll_gap_ns / 1000u));
    f->queries = f->skipped = 0;
    if (!f->timing || f->timed == 0)
        return;
    pd_log(level, "cuda: %llu batches timed on the device: %.1f us each on the stream; %llu gaps "
           "under 1 ms between batches, %.1f us each",
           (unsigned long long) f->timed, (double) f->busy_ns / 1e3 / (double) f->timed,
           (unsigned long long) f->gaps, f->gaps != 0 ? (double) f->gap_ns / 1e3 / (double) f->gaps : 0.0);
    f->timed = f->busy_ns = f->gaps = f->gap_ns = 0;
    f->last_timed = NULL;
}

/* Retires the finished slots, oldest first, and watches the head; returns whether any batch
 * is still in flight. */
int pd_cu_flight_poll(struct pd_cu_flight *f, uint64_t timeout_ns)
{
    for (unsigned k = 0; k < PD_CU_SLOTS; k++) {
        struct pd_cu_slot *s = &f->slot[(f->next + k) % PD_CU_SLOTS];
        if (!s->busy)
            continue;
        if (s->ticket == f->queried_ticket && pcore_now_ns() - f->queried_ns < f->poll_gap_ns) {
            f->skipped++;
            return 1;
        }
        cudaError_t e = cudaEventQuery(s->done);
        f->queries++;
        if (e == cudaErrorNotReady) {
            uint64_t now = pcore_now_ns();
            f->queried_ticket = s->ticket;
            f->queried_ns = now;
            if (f->head_since_ns == 0)
                f->head_since_ns = now;
            else if (now - f->head_since_ns > timeout_ns && s->nwaits != 0) {
                cudaError_t r = rescue(f, s);
                if (r != cudaSuccess) {
                    pd_log(PD_LOG_ERROR, "cuda: the dependency watchdog cannot release a wait: %s",
                           cudaGetErrorString(r));
                    f->error = r;   /* ends the waiting loops */
                }
                f->head_since_ns = now;
            }
            return 1;
        }
        f->head_since_ns = 0;
        if (e == cudaSuccess && f->timing)
            time_slot(f, s);
        if (e != cudaSuccess) {
            /* A device fault: the caller's synchronization reports it (a deferred batch's
             * through pd_cu_flight_done); nothing is late. */
            if (s->ticket > f->lost) {
                f->lost = s->ticket;
                f->fault = e;
            }
            pd_cu_flight_release(s);
            continue;
        }
        if (!s->sync)
            retire(f, s);
    }
    return 0;
}

/* Waits, watching, until the event of s has completed; returns its status. */
static cudaError_t wait_slot(struct pd_cu_flight *f, struct pd_cu_slot *s, uint64_t timeout_ns)
{
    for (;;) {
        cudaError_t e = cudaEventQuery(s->done);
        if (e != cudaErrorNotReady)
            return e;
        pd_cu_flight_poll(f, timeout_ns);
        if (f->error != cudaSuccess) {
            e = f->error;
            f->error = cudaSuccess;
            return e;
        }
        pcore_cpu_relax();
    }
}

/* Waits for slot s's batch; see flight.h. */
cudaError_t pd_cu_flight_wait(struct pd_cu_flight *f, struct pd_cu_slot *s, uint64_t timeout_ns)
{
    cudaError_t e = wait_slot(f, s, timeout_ns);
    if (e == cudaSuccess)
        pd_cu_flight_poll(f, timeout_ns);   /* every earlier slot is done: report them */
    return e;
}

/* Waits until nothing is in flight; see flight.h. */
cudaError_t pd_cu_flight_settle(struct pd_cu_flight *f, uint64_t timeout_ns)
{
    for (unsigned k = 0; k < PD_CU_SLOTS; k++) {
        struct pd_cu_slot *s = &f->slot[(f->next + k) % PD_CU_SLOTS];
        if (!s->busy)
            continue;
        cudaError_t e = wait_slot(f, s, timeout_ns);
        if (e != cudaSuccess)
            return e;
    }
    pd_cu_flight_poll(f, timeout_ns);
    return cudaSuccess;
}

/* Waits for the stream behind slot s; see flight.h. */
cudaError_t pd_cu_flight_drain(struct pd_cu_flight *f, struct pd_cu_slot *s, cudaStream_t stream,
                               uint64_t timeout_ns)
{
    cudaError_t e = pd_cu_flight_settle(f, timeout_ns);
    if (e != cudaSuccess)
        return e;
    uint64_t since = pcore_now_ns();
    for (;;) {
        e = cudaStreamQuery(stream);
        if (e != cudaErrorNotReady)
            return e;
        if (pcore_now_ns() - since > timeout_ns) {
            e = rescue(f, s);
            if (e != cudaSuccess)
                return e;
            since = pcore_now_ns();
        }
        pcore_cpu_relax();
    }
}

/* Makes *p (pinned host memory of *cap bytes) hold need bytes; returns cudaSuccess or the
 * runtime's error (with *p NULL and *cap 0). */
static cudaError_t pinned_grow(unsigned char **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return cudaSuccess;
    size_t n = *cap != 0 ? *cap : 64u << 10;
    while (n < need)
        n *= 2;
    if (*p != NULL)
        cudaFreeHost(*p);
    *p = NULL;
    *cap = 0;
    cudaError_t e = cudaHostAlloc((void **) p, n, cudaHostAllocDefault);
    if (e != cudaSuccess) {
        *p = NULL;
        return e;
    }
    *cap = n;
    return cudaSuccess;
}

/* Takes the next slot; see flight.h. */
cudaError_t pd_cu_flight_begin(struct pd_cu_flight *f, size_t stage, uint32_t nwaits, uint64_t timeout_ns,
                               struct pd_cu_slot **out)
{
    while (!pd_cu_flight_room(f)) {
        /* Wait for the oldest: the slots are taken round-robin from next. */
        unsigned oldest = f->next;
        while (!f->slot[oldest].busy)
            oldest = (oldest + 1) % PD_CU_SLOTS;
        cudaError_t e = pd_cu_flight_wait(f, &f->slot[oldest], timeout_ns);
        if (e != cudaSuccess)
            return e;
    }
    struct pd_cu_slot *s = &f->slot[f->next];
    if (stage > s->stage_cap) {
        /* Freeing pinned memory synchronizes the device, which would wait, unwatched, for any
         * word a queued batch waits for: settle first. */
        cudaError_t e = pd_cu_flight_settle(f, timeout_ns);
        if (e != cudaSuccess)
            return e;
    }
    cudaError_t e = pinned_grow(&s->h_stage, &s->stage_cap, stage != 0 ? stage : 1);
    if (e != cudaSuccess)
        return e;
    if (nwaits > s->waits_cap) {
        struct pd_cu_wait *w = pd_realloc(s->waits, (size_t) nwaits * sizeof *w);
        if (w == NULL)
            return cudaErrorMemoryAllocation;
        s->waits = w;
        s->waits_cap = nwaits;
    }
    s->nwaits = 0;
    *out = s;
    return cudaSuccess;
}

/* Records the slot's event; see flight.h. */
cudaError_t pd_cu_flight_end(struct pd_cu_flight *f, struct pd_cu_slot *s, cudaStream_t stream, int sync)
{
    if (f->fail_event_at != 0 && ++f->events == f->fail_event_at) {
        pd_log(PD_LOG_WARNING, "cuda: the event of batch %llu fails on purpose (PAGEDD_FAIL_EVENT_AT)",
               (unsigned long long) f->events);
        return cudaErrorInvalidValue;
    }
    cudaError_t e = cudaEventRecord(s->done, stream);
    if (e != cudaSuccess)
        return e;
    s->busy = 1;
    s->sync = sync;
    s->ticket = ++f->tickets;
    f->next = (f->next + 1) % PD_CU_SLOTS;
    return cudaSuccess;
}
