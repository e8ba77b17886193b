/* reaper.h: the cuda backend frees departed clients' arenas on a thread of its own. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_CUDA_REAPER_H
#define PAGED_DAEMON_CUDA_REAPER_H

/*
 * Unpinning a client's host arena and unmapping and releasing its device arena take 10 to
 * 140 ms on an H100 host (measured: 21-138 ms per client), during which the engine would
 * serve nobody. Once the backend has settled (nothing queued can touch the memory any
 * more), it hands both to the reaper, whose thread frees them while the engine goes on.
 * Without a thread (it could not be started) the reaper frees inline.
 */

#include <pthread.h>

#include "daemon/cuda/mem.h"

struct pd_cu_reap;                 /* one queued arena (reaper.c) */

struct pd_cu_reaper {
    struct pd_cu_device *dev;      /* the backend's device (its driver entry points) */
    pthread_mutex_t mu;
    pthread_cond_t work;           /* something queued, or stop */
    pthread_cond_t idle;           /* the queue became empty and nothing is being freed */
    struct pd_cu_reap *head, *tail;
    int busy;                      /* the thread is freeing one it took */
    int stop;
    int started;                   /* the thread runs */
    /* PAGEDD_REAP_DELAY_MS=N, a test aid: the thread waits N ms before freeing each arena,
     * so that a test can ask for the memory while it is still on its way back. */
    unsigned delay_ms;
    pthread_t thread;
};

/* Initializes r for device dev; the thread starts with the first arena. Returns nothing. */
void pd_cu_reaper_init(struct pd_cu_reaper *r, struct pd_cu_device *dev);

/*
 * Frees, on the reaper's thread and in this order, the pinned host range host (NULL: none;
 * unregistered with cudaHostUnregister), the device memory *mem (taken over: *mem is
 * cleared) and the shared mapping map of map_size bytes (NULL: none; the channel that holds
 * host). Nothing queued on the device may use any of them any more. Returns nothing.
 */
void pd_cu_reaper_put(struct pd_cu_reaper *r, void *host, struct pd_cu_mem *mem, void *map, uint64_t map_size);

/* Waits until everything handed over so far has been freed (before an allocation that
 * needs the memory back). Returns nothing. */
void pd_cu_reaper_drain(struct pd_cu_reaper *r);

/* Frees what is queued, stops the thread and releases r's resources. Returns nothing. */
void pd_cu_reaper_stop(struct pd_cu_reaper *r);

#endif
