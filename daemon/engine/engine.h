/* engine.h: the request engine's whole interface: passes over the clients' rings, and their completions. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_ENGINE_ENGINE_H
#define PAGED_DAEMON_ENGINE_ENGINE_H

#include <stdint.h>

#include "daemon/util/log.h"
#include "lib/core/proto.h"

struct pd_backend;
struct pd_conn;
struct pd_stats;
struct pd_engine;
struct pd_pool;

/*
 * What the engine works with: the one thing it knows of its owner (pagedd's server, a test).
 * The owner fills it, passes it to pd_engine_create and keeps it, unchanged but for the
 * limits, until pd_engine_destroy: the engine keeps a pointer to it. The engine reads the
 * connections and the limits afresh at every pass, and calls back only from within its own
 * functions, never from another thread.
 */
struct pd_engine_env {
    struct pd_backend *backend;       /* runs the batches; pd_engine_create makes the engine its
                                       * late_fn, so it is closed before the engine is destroyed */
    struct pd_conn *const *conns;     /* the head of the owner's connection list (pd_conn.next);
                                       * a pass takes the requests of those that are ready */
    uint64_t max_blocks_per_client;   /* block references one client may hold; 0: no limit */
    uint32_t dependency_timeout_ms;   /* longest a request waits for its dep.wait_off word */
    int dependency_inline;            /* dependency-waits = inline: a backend with a probe() leaves
                                       * its clients' words to its device (engine.c, Dependencies) */
    uint32_t dependency_strikes;      /* timed-out waits within PD_STRIKE_WINDOW_NS that get a uid's
                                       * unreached waits refused (strikes.h); 0: never */
    struct pd_stats *stats;           /* every completion is counted there */
    int sigpipe_ignored;              /* SIGPIPE is ignored: completion wake-ups need no guard */
    void *ctx;                        /* passed to the callbacks */
    /* Disconnects c (a corrupt ring, a dependency word late on the device), which has been
     * sent an ERROR saying why; reason is for the log at level. c must stay in the list,
     * marked PD_CONN_DEAD, until the engine's function returns: the owner frees it later. */
    void (*kill)(void *ctx, struct pd_conn *c, enum pd_log_level level, const char *reason);
    /* An ALLOC or LOOKUP ran, after which the pools' allocators may have counted evictions
     * (pd_pool.evicted_pending) to announce; called at the end of such a pass. NULL: none. */
    void (*flush_evictions)(void *ctx);
    /* Starts asking the daemon's peers (daemon/peer/peer.h, pd_peers_prefetch) for
     * hashes[0..n), the next blocks of a chain that a LOOKUP of client conn_id in pool p (one
     * with PAGED_POOL_PEERS) did not find in the pool and its tiers, to be published in p. The
     * LOOKUP then waits at the head of its client's ring until pd_engine_remote_done. Returns
     * 1 when started, 0 when the LOOKUP runs without. NULL: no peers. */
    int (*remote_start)(void *ctx, struct pd_pool *p, uint32_t conn_id, uint32_t tenant, uint32_t n,
                        const paged_hash *hashes);
    void *remote_ctx;                 /* passed to remote_start */
};

/* Creates the engine over env (kept, not copied) and makes it env->backend's late_fn.
 * Returns it, or NULL when out of memory. */
struct pd_engine *pd_engine_create(const struct pd_engine_env *env);

/* Frees the engine (its backend is closed already, or no longer points at it). NULL is
 * ignored. */
void pd_engine_destroy(struct pd_engine *e);

/* Runs one engine pass over every ready client: takes up to budget submissions of each, runs
 * them as one batch (DECODEs of several clients merged into one launch where they are
 * compatible), and posts the completions. Returns how many completed; a client whose ring is
 * corrupt is disconnected (env->kill) at the end of the pass. */
unsigned pd_engine_pass(struct pd_engine *e, unsigned budget);

/* The same pass over c alone: for harnesses that drive one connection. */
unsigned pd_engine_drain(struct pd_engine *e, struct pd_conn *c, unsigned budget);

/* Logs, at INFO, what the engine did since it was last called (batches, launches, backend
 * time, DECODE requests and clients per batch, time spent gathering), and starts counting
 * afresh. The server calls it when the last client that ran a DECODE leaves. */
void pd_engine_idle(struct pd_engine *e);

/* Copies the engine's counters since it was made into out: STATS sends them. */
void pd_engine_stats(const struct pd_engine *e, struct pcore_engine_stats *out);

/* Tells the engine that the peers' fetch for client conn_id's LOOKUP is over: the LOOKUP
 * runs at the client's next pass, finding what the fetch published. A client gone meanwhile
 * is ignored. Returns nothing. */
void pd_engine_remote_done(struct pd_engine *e, uint32_t conn_id);

/* Returns whether c has submissions waiting that it could run now. */
int pd_engine_pending(struct pd_conn *c);

/* Returns whether the engine withholds completions until the device finishes their batches
 * (engine.c, Deferred batches): the owner must keep passing to post them. */
int pd_engine_withheld(const struct pd_engine *e);

/* Returns once the device work of every batch the backend completed early has finished, so
 * that blocks and memory it uses may be released or reused: at once when c is not NULL and
 * had no request in such a batch since the last settle, or e is NULL. */
void pd_engine_settle(struct pd_engine *e, struct pd_conn *c);

/* Returns whether the backend had batches queued (completed early) when the engine last
 * looked: the server then wakes it within 10 ms, so that its watchdog runs. */
int pd_engine_inflight(const struct pd_engine *e);

/* Completes every queued submission of c with PAGED_E_SHUTDOWN, as room allows. */
void pd_engine_cancel(struct pd_engine *e, struct pd_conn *c);

#endif
