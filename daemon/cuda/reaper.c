/* reaper.c: the cuda backend frees departed clients' arenas on a thread of its own. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/cuda/reaper.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/util/knobs.h"
#include "daemon/util/heap.h"
#include "daemon/util/log.h"
#include "lib/core/shm.h"

struct pd_cu_reap {
    struct pd_cu_reap *next;
    void *host;
    struct pd_cu_mem mem;
    void *map;
    uint64_t map_size;
};

/* Unpins host (unless NULL), frees *mem, then unmaps map (unless NULL); returns nothing. */
static void free_now(struct pd_cu_reaper *r, void *host, struct pd_cu_mem *mem, void *map, uint64_t map_size)
{
    if (host != NULL) {
        cudaError_t e = cudaHostUnregister(host);
        if (e != cudaSuccess) {
            (void) cudaGetLastError();
            pd_log(PD_LOG_WARNING, "cuda: unpinning a client's host arena: %s", cudaGetErrorString(e));
        }
    }
    pd_cu_mem_free(r->dev, mem);
    if (map != NULL)
        pcore_shm_unmap(map, map_size);
}

/* Frees one queued arena's memory and its entry; returns nothing. */
static void reap(struct pd_cu_reaper *r, struct pd_cu_reap *x)
{
    free_now(r, x->host, &x->mem, x->map, x->map_size);
    free(x);
}

/* The reaper's thread: frees what is queued, in order, until told to stop with nothing
 * left. Returns NULL. */
static void *reaper_main(void *arg)
{
    struct pd_cu_reaper *r = arg;
    /* The runtime's calls act on the current device; a new thread starts at device 0. */
    if (cudaSetDevice(r->dev->ordinal) != cudaSuccess)
        (void) cudaGetLastError();
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (r->head == NULL && !r->stop)
            pthread_cond_wait(&r->work, &r->mu);
        if (r->head == NULL)
            break;
        struct pd_cu_reap *x = r->head;
        r->head = x->next;
        if (r->head == NULL)
            r->tail = NULL;
        r->busy = 1;
        pthread_mutex_unlock(&r->mu);
        if (r->delay_ms != 0) {
            struct timespec ts = { (time_t) (r->delay_ms / 1000u), (long) (r->delay_ms % 1000u) * 1000000L };
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
        }
        reap(r, x);
        pthread_mutex_lock(&r->mu);
        r->busy = 0;
        if (r->head == NULL)
            pthread_cond_broadcast(&r->idle);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* Initializes the reaper; see reaper.h. */
void pd_cu_reaper_init(struct pd_cu_reaper *r, struct pd_cu_device *dev)
{
    memset(r, 0, sizeof *r);
    r->dev = dev;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->work, NULL);
    pthread_cond_init(&r->idle, NULL);
    r->delay_ms = (unsigned) pd_knob(PD_KNOB_REAP_DELAY_MS);
    if (r->delay_ms > 0)
        pd_log(PD_LOG_INFO, "cuda: departed clients' memory is freed %u ms late (PAGEDD_REAP_DELAY_MS)",
               r->delay_ms);
}

/* Starts the thread (signals blocked: they belong to the engine's signalfd); returns
 * whether it runs. */
static int start(struct pd_cu_reaper *r)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&r->thread, NULL, reaper_main, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        pd_log(PD_LOG_WARNING, "cuda: cannot start the thread that frees departed clients' memory (%s): "
               "freeing it on the engine's", strerror(err));
        return 0;
    }
    r->started = 1;
    return 1;
}

/* Queues an arena's memory for the thread; see reaper.h. */
void pd_cu_reaper_put(struct pd_cu_reaper *r, void *host, struct pd_cu_mem *mem, void *map, uint64_t map_size)
{
    struct pd_cu_reap *x = pd_calloc(1, sizeof *x);
    if (x == NULL) {
        free_now(r, host, mem, map, map_size);   /* no queue entry: on this thread, then */
        return;
    }
    x->host = host;
    x->mem = *mem;
    x->map = map;
    x->map_size = map_size;
    memset(mem, 0, sizeof *mem);
    pthread_mutex_lock(&r->mu);
    if (!r->started && !r->stop && !start(r)) {
        pthread_mutex_unlock(&r->mu);
        reap(r, x);
        return;
    }
    if (r->tail != NULL)
        r->tail->next = x;
    else
        r->head = x;
    r->tail = x;
    pthread_cond_signal(&r->work);
    pthread_mutex_unlock(&r->mu);
}

/* Waits for the queue to empty; see reaper.h. */
void pd_cu_reaper_drain(struct pd_cu_reaper *r)
{
    pthread_mutex_lock(&r->mu);
    while (r->started && (r->head != NULL || r->busy))
        pthread_cond_wait(&r->idle, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

/* Drains and stops; see reaper.h. */
void pd_cu_reaper_stop(struct pd_cu_reaper *r)
{
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_signal(&r->work);
    int started = r->started;
    pthread_mutex_unlock(&r->mu);
    if (started)
        pthread_join(r->thread, NULL);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->work);
    pthread_cond_destroy(&r->idle);
}
