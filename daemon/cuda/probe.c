/* probe.c: the cuda backend looks at clients' dependency words without making any queue wait for them. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/cuda/probe.h"
#include "daemon/util/heap.h"

/* Marks a look empty; see probe.h. */
void pd_cu_look_init(struct pd_cu_look *l)
{
    memset(l, 0, sizeof *l);
    l->slot = UINT32_MAX;
}

/* Returns the pinned word of slot s. */
static volatile uint32_t *slot_word(const struct pd_cu_prober *p, uint32_t s)
{
    return &p->chunks[s / PD_CU_PROBE_CHUNK][s % PD_CU_PROBE_CHUNK];
}

/* Hands look l a slot, a reused one or the next of the chunks (pinning another chunk when they
 * are used up). Returns cudaSuccess or the runtime's error. */
static cudaError_t take_slot(struct pd_cu_prober *p, struct pd_cu_look *l)
{
    if (p->nfree != 0) {
        l->slot = p->free_slots[--p->nfree];
        return cudaSuccess;
    }
    if (p->used == p->nchunks * PD_CU_PROBE_CHUNK) {
        uint32_t **v = pd_realloc(p->chunks, (size_t) (p->nchunks + 1) * sizeof *v);
        if (v == NULL)
            return cudaErrorMemoryAllocation;
        p->chunks = v;
        void *words = NULL;
        cudaError_t e = cudaHostAlloc(&words, PD_CU_PROBE_CHUNK * sizeof(uint32_t), cudaHostAllocDefault);
        if (e != cudaSuccess)
            return e;
        p->chunks[p->nchunks++] = words;
    }
    l->slot = p->used++;
    return cudaSuccess;
}

/* Makes what look l needs on its first use: the prober's stream, l's event and slot. Returns
 * cudaSuccess or the runtime's error. */
static cudaError_t look_setup(struct pd_cu_prober *p, struct pd_cu_look *l)
{
    cudaError_t e = cudaSuccess;
    if (p->stream == NULL)
        e = cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess && l->done == NULL)
        e = cudaEventCreateWithFlags(&l->done, cudaEventDisableTiming);
    if (e == cudaSuccess && l->slot == UINT32_MAX)
        e = take_slot(p, l);
    return e;
}

/* Looks at a word; see probe.h. */
int pd_cu_look(struct pd_cu_prober *p, struct pd_cu_look *l, const unsigned char *dptr, uint64_t off, uint32_t value,
               int fresh, cudaError_t *err)
{
    if (fresh) {
        l->stale = l->busy;
        l->fresh = 0;
    }
    if (l->busy) {
        cudaError_t e = cudaEventQuery(l->done);
        if (e == cudaErrorNotReady)
            return 2;
        l->busy = 0;
        if (e != cudaSuccess) {
            *err = e;
            return -1;
        }
        l->fresh = !l->stale;
        l->stale = 0;
    }
    int seen = 2;
    if (l->fresh && l->off == off) {
        l->fresh = 0;
        if ((int32_t) (*slot_word(p, l->slot) - value) >= 0)
            return 1;
        seen = 0;
    }
    cudaError_t e = look_setup(p, l);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync((void *) (uintptr_t) slot_word(p, l->slot), dptr + off, sizeof(uint32_t),
                            cudaMemcpyDeviceToHost, p->stream);
    if (e == cudaSuccess)
        e = cudaEventRecord(l->done, p->stream);
    if (e != cudaSuccess) {
        *err = e;
        return -1;
    }
    l->busy = 1;
    l->fresh = 0;
    l->stale = 0;
    l->off = off;
    p->looks++;
    return seen;
}

/* Gives a look's event and slot back; see probe.h. */
void pd_cu_look_free(struct pd_cu_prober *p, struct pd_cu_look *l)
{
    /* Errors change nothing here: the arena goes, and a fault shows in the next batch. */
    if (l->busy && cudaEventSynchronize(l->done) != cudaSuccess)
        (void) cudaGetLastError();
    if (l->done != NULL)
        cudaEventDestroy(l->done);
    if (l->slot != UINT32_MAX) {
        if (p->nfree == p->free_cap) {
            uint32_t cap = p->free_cap != 0 ? 2 * p->free_cap : 64;
            uint32_t *v = pd_realloc(p->free_slots, (size_t) cap * sizeof *v);
            if (v != NULL) {
                p->free_slots = v;
                p->free_cap = cap;
            }
        }
        if (p->nfree < p->free_cap)
            p->free_slots[p->nfree++] = l->slot;
    }
    pd_cu_look_init(l);
}

/* Frees the prober; see probe.h. */
void pd_cu_prober_free(struct pd_cu_prober *p)
{
    for (uint32_t i = 0; i < p->nchunks; i++)
        cudaFreeHost(p->chunks[i]);
    free(p->chunks);
    free(p->free_slots);
    if (p->stream != NULL)
        cudaStreamDestroy(p->stream);
    memset(p, 0, sizeof *p);
}
