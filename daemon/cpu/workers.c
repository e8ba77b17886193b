/* workers.c: the CPU backend's thread pool: run one op's work items over N threads. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/cpu/workers.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/util/heap.h"

/*
 * One job at a time: the engine publishes it under the mutex with a new generation number,
 * workers take a snapshot of it under the mutex and claim chunks from a 64-bit word whose
 * top bits hold the generation and low bits the next item, so a worker still finishing a
 * claim of an old job can never take items of a new one. The last chunk to finish signals
 * the engine. Chunks are a fraction of the items per worker so an uneven item (a long
 * sequence) does not leave the others idle at the end.
 */
#define GEN_SHIFT 40
#define ITEM_MASK ((UINT64_C(1) << GEN_SHIFT) - 1)

struct pd_workers {
    unsigned n;                 /* workers including the caller */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t start;       /* a new job or stop */
    pthread_cond_t done;        /* the last chunk of the job finished */
    uint64_t generation;        /* bumped per job, under mu */
    int stop;
    pd_work_fn *fn;
    const void *arg;
    size_t items;
    size_t chunk;
    _Atomic uint64_t next;      /* generation << GEN_SHIFT | first unclaimed item */
    atomic_size_t finished;     /* items done in the current job */
};

/* A snapshot of one job, taken under the mutex. */
struct job {
    uint64_t gen;
    pd_work_fn *fn;
    const void *arg;
    size_t items;
    size_t chunk;
};

/* Claims and runs chunks of job j until none are left or a newer job began; returns nothing. */
static void work(pd_workers *w, const struct job *j)
{
    uint64_t tag = (j->gen << GEN_SHIFT) & ~ITEM_MASK;
    for (;;) {
        uint64_t v = atomic_load_explicit(&w->next, memory_order_relaxed);
        size_t begin;
        do {
            if ((v & ~ITEM_MASK) != tag)
                return;
            begin = (size_t) (v & ITEM_MASK);
            if (begin >= j->items)
                return;
        } while (!atomic_compare_exchange_weak_explicit(&w->next, &v, v + j->chunk,
                                                        memory_order_relaxed, memory_order_relaxed));
        size_t end = begin + j->chunk < j->items ? begin + j->chunk : j->items;
        j->fn(j->arg, begin, end);
        size_t done = atomic_fetch_add_explicit(&w->finished, end - begin, memory_order_acq_rel)
                      + (end - begin);
        if (done == j->items) {
            pthread_mutex_lock(&w->mu);
            pthread_cond_signal(&w->done);
            pthread_mutex_unlock(&w->mu);
        }
    }
}

/* A worker thread: waits for each new generation and works on it; returns NULL at stop. */
static void *worker_main(void *p)
{
    pd_workers *w = p;
    uint64_t seen = 0;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->stop && w->generation == seen)
            pthread_cond_wait(&w->start, &w->mu);
        if (w->stop)
            break;
        seen = w->generation;
        struct job j = { w->generation, w->fn, w->arg, w->items, w->chunk };
        pthread_mutex_unlock(&w->mu);
        work(w, &j);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Creates the pool; returns it, or NULL with *cause. */
pd_workers *pd_workers_create(unsigned n, char **cause)
{
    if (n == 0)
        n = 1;
    pd_workers *w = pd_calloc(1, sizeof *w);
    if (w == NULL || (w->threads = pd_calloc(n, sizeof *w->threads)) == NULL) {
        free(w);
        if (asprintf(cause, "out of memory for %u worker threads", n) < 0)
            *cause = NULL;
        return NULL;
    }
    w->n = n;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->start, NULL);
    pthread_cond_init(&w->done, NULL);
    /* Signals belong to the engine thread (its signalfd); workers block them all. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    unsigned started = 1;
    for (; started < n; started++) {
        int err = pthread_create(&w->threads[started], NULL, worker_main, w);
        if (err != 0) {
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            w->n = started;
            pd_workers_destroy(w);
            if (asprintf(cause, "cannot start worker thread %u: %s", started, strerror(err)) < 0)
                *cause = NULL;
            return NULL;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return w;
}

/* Stops and frees the pool; returns nothing. */
void pd_workers_destroy(pd_workers *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->start);
    pthread_mutex_unlock(&w->mu);
    for (unsigned i = 1; i < w->n; i++)
        pthread_join(w->threads[i], NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->start);
    pthread_cond_destroy(&w->done);
    free(w->threads);
    free(w);
}

/* Returns the number of workers. */
unsigned pd_workers_count(const pd_workers *w)
{
    return w->n;
}

/* Runs a job over every worker and waits for it; returns nothing. */
void pd_workers_run(pd_workers *w, pd_work_fn *fn, const void *arg, size_t items)
{
    if (items == 0)
        return;
    /* A job too small to share is cheaper to run here than to wake anybody for. */
    if (w->n == 1 || items == 1 || items > ITEM_MASK / 2) {
        fn(arg, 0, items);
        return;
    }
    size_t chunk = items / ((size_t) w->n * 4);
    if (chunk == 0)
        chunk = 1;
    pthread_mutex_lock(&w->mu);
    w->fn = fn;
    w->arg = arg;
    w->items = items;
    w->chunk = chunk;
    w->generation++;
    atomic_store_explicit(&w->finished, 0, memory_order_relaxed);
    atomic_store_explicit(&w->next, (w->generation << GEN_SHIFT) & ~ITEM_MASK, memory_order_release);
    struct job j = { w->generation, fn, arg, items, chunk };
    pthread_cond_broadcast(&w->start);
    pthread_mutex_unlock(&w->mu);
    work(w, &j);
    pthread_mutex_lock(&w->mu);
    while (atomic_load_explicit(&w->finished, memory_order_acquire) < items)
        pthread_cond_wait(&w->done, &w->mu);
    pthread_mutex_unlock(&w->mu);
}
