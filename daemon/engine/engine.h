/* engine.h: the request engine's interface: passes over the clients' rings, and their completions. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_ENGINE_ENGINE_H
#define PAGED_DAEMON_ENGINE_ENGINE_H

#include "lib/core/proto.h"

struct pd_server;
struct pd_conn;
struct pd_engine;

/* Creates the engine (engine.c); returns it or NULL when out of memory. */
struct pd_engine *pd_engine_create(void);

/* Frees the engine (engine.c). NULL is ignored. */
void pd_engine_destroy(struct pd_engine *e);

/* Runs one engine pass over every ready client (engine.c): takes up to budget submissions
 * of each, runs them as one batch (DECODEs of several clients merged into one launch where
 * they are compatible), and posts the completions. Returns how many completed; a client
 * whose ring is corrupt is disconnected at the end of the pass. */
unsigned pd_engine_pass(struct pd_server *srv, unsigned budget);

/* The same pass over c alone (engine.c): for harnesses that drive one connection. */
unsigned pd_engine_drain(struct pd_server *srv, struct pd_conn *c, unsigned budget);

/* Logs, at INFO, what the engine did since it was last called (batches, launches, backend
 * time, DECODE requests and clients per batch, time spent gathering), and starts counting
 * afresh (engine.c). The server calls it when the last client that ran a DECODE leaves. */
void pd_engine_idle(struct pd_server *srv);

/* Copies the engine's counters since it was made into out (engine.c): STATS sends them. */
void pd_engine_stats(const struct pd_server *srv, struct pcore_engine_stats *out);

/* Returns whether c has submissions waiting that it could run now (engine.c). */
int pd_engine_pending(struct pd_conn *c);

/* Returns whether the engine withholds completions until the device finishes their batches
 * (engine.c, Deferred batches): the server must keep passing to post them. */
int pd_engine_withheld(const struct pd_server *srv);

/* Returns once the device work of every batch the backend completed early has finished, so
 * that blocks and memory it uses may be released or reused: at once when c is not NULL and
 * had no request in such a batch since the last settle. */
void pd_engine_settle(struct pd_server *srv, struct pd_conn *c);

/* Returns whether the backend had batches queued (completed early) when the engine last
 * looked: the server then wakes it within 10 ms, so that its watchdog runs. */
int pd_engine_inflight(const struct pd_server *srv);

/* Completes every queued submission of c with PAGED_E_SHUTDOWN, as room allows (engine.c). */
void pd_engine_cancel(struct pd_server *srv, struct pd_conn *c);

#endif
