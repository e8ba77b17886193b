/* probe.h: the cuda backend looks at clients' dependency words without making any queue wait for them. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_CUDA_PROBE_H
#define PAGED_DAEMON_CUDA_PROBE_H

/*
 * A word of a client's data arena is device memory that the client's own stream writes. To
 * learn whether it has reached a value without a stream of the daemon's waiting for it (a
 * wait that a client could hold forever, and that every later call which synchronizes the
 * device would wait behind), the backend copies it, four bytes, to pinned host memory on a
 * stream of its own and records an event after the copy: a look. The engine asks again on
 * its next pass; once the event has completed, the copy says whether the word was reached,
 * and a short word gets the next look. A copy never waits for anything but the copy engine,
 * so every look finishes in microseconds whatever the client does. Each arena has at most
 * one look on its way (a client's ring holds one waiting request at its head).
 */

#include <stdint.h>

#include <cuda_runtime_api.h>

/* Words of pinned host memory allocated at once for looks. */
#define PD_CU_PROBE_CHUNK 1024u

/* What one arena's looks use. */
struct pd_cu_look {
    cudaEvent_t done;             /* recorded after its copy (made at the first look) */
    uint32_t slot;                /* its word in the prober's pinned chunks; UINT32_MAX: none yet */
    uint64_t off;                 /* the word copied by the last look */
    int busy;                     /* a look is on its way */
    int fresh;                    /* the last look finished and its copy was not read yet */
    int stale;                    /* the look on its way was started for an earlier request */
};

/* The backend's looks: their stream and the pinned words their copies land in. */
struct pd_cu_prober {
    cudaStream_t stream;          /* made at the first look */
    uint32_t **chunks;            /* [nchunks] pinned, PD_CU_PROBE_CHUNK words each */
    uint32_t nchunks;
    uint32_t *free_slots;         /* slots given back, to reuse */
    uint32_t nfree, free_cap;
    uint32_t used;                /* slots handed out of the chunks so far */
    uint64_t looks;               /* copies made, for the log */
};

/* Marks look l as having no event and no slot yet; returns nothing. */
void pd_cu_look_init(struct pd_cu_look *l);

/*
 * Looks at the word at dptr + off (a device address in a client's data arena): returns 1
 * when a finished look found it at or past value (the wrapping comparison), 0 when one found
 * it short (and starts the next), 2 while a look is on its way (starting one when none is),
 * or -1 with *err set to the runtime's error. With fresh, a look already on its way (started
 * for an earlier request) is disregarded. See backend.h's probe.
 */
int pd_cu_look(struct pd_cu_prober *p, struct pd_cu_look *l, const unsigned char *dptr, uint64_t off, uint32_t value,
               int fresh, cudaError_t *err);

/* Waits for l's look, if one is on its way (a copy: microseconds), and gives its event and
 * slot back; the arena may then be freed. Returns nothing. */
void pd_cu_look_free(struct pd_cu_prober *p, struct pd_cu_look *l);

/* Frees the prober's stream and pinned words (the device is idle). Returns nothing. */
void pd_cu_prober_free(struct pd_cu_prober *p);

#endif
