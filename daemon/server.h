/* server.h: the daemon's one event loop: socket, clients, control messages, rings, signals. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_SERVER_H
#define PAGED_DAEMON_SERVER_H

#include <stdint.h>

#include "daemon/backend.h"
#include "daemon/settings.h"
#include "daemon/conn.h"
#include "daemon/pool.h"
#include "daemon/stats.h"
#include "daemon/tally.h"
#include "daemon/engine/engine.h"

struct pd_peers;

/* Reads the configuration again for SIGHUP; returns 0 or -1 with *cause. */
typedef int pd_reload_fn(void *ctx, struct pd_config *out, char **cause);

struct pd_server {
    struct pd_config cfg;
    pd_backend *backend;
    struct pd_backend_info binfo;
    int listen_fd;
    int epoll_fd;
    int signal_fd;
    struct pd_watch listen_watch, signal_watch, peers_watch;
    struct pd_peers *peers;           /* other daemons (daemon/peer/peer.h); NULL: none */
    int remote_done;                  /* a peers' fetch ended: a LOOKUP can run, pass at once */
    uint64_t accept_paused_until;     /* out of descriptors: accept again after this */
    struct pd_conn *conns;            /* every connection, newest first */
    struct pd_conn *dead;             /* killed during this loop turn: freed at its end */
    struct pd_tally tally;            /* connections per uid: pending, control, clients */
    uid_t self_uid;                   /* the daemon's own: trusted as root is (daemon/tally.h) */
    uint64_t refusal_logged_ns;       /* when a limit refusal was last logged */
    uint32_t refusals_unlogged;       /* refusals since then that were not */
    uint32_t spinners;                /* clients whose waits may spin (pd_server_spin_hint) */
    uint32_t next_client_id;
    struct pd_pool *pools;
    uint32_t n_pools;
    uint32_t next_pool_id;
    uint64_t mem_limit;               /* most bytes of one pool (host memory on cpu) */
    int block_events;                 /* a subscriber asked for block events: pools record them */
    struct pd_stats stats;
    struct pd_engine *engine;         /* the request engine (daemon/engine/engine.h) */
    struct pd_engine_env engine_env;  /* what it works with: these connections, stats, backend */
    uint64_t start_ns;
    int stop;                         /* SIGTERM or SIGINT seen */
    int stop_signal;
    pd_reload_fn *reload;
    void *reload_ctx;
};

/*
 * Opens the backend and the listening socket as cfg says (creating the socket's directory,
 * mode 0755, if missing) and blocks SIGTERM, SIGINT and SIGHUP into a signalfd. Returns the
 * server ready to run, or NULL with *cause.
 */
struct pd_server *pd_server_create(const struct pd_config *cfg, pd_reload_fn *reload,
                                   void *reload_ctx, char **cause);

/* Serves until SIGTERM or SIGINT, then shuts down cleanly: every client's queued requests
 * complete with PAGED_E_SHUTDOWN and it gets PCORE_MSG_SHUTDOWN. Returns 0. */
int pd_server_run(struct pd_server *srv);

/* Tells every client whether its completion waits may spin: the first spinners clients may
 * (the CPUs online less one for the engine and one for everything else), the others are
 * told to sleep at once, since a spinning client beyond those would take the CPU the engine
 * needs to complete requests. Called whenever the set of clients changes. Returns nothing. */
void pd_server_spin_hint(struct pd_server *srv);

/* Frees everything, closes every connection and removes the socket file. */
void pd_server_destroy(struct pd_server *srv);


/* ---- for the server's modules (control.c, list.c, events.c). */

/* Closes c at the end of this loop turn: releases everything it held; reason is logged at
 * level (an inspection connection's info at debug). */
void pd_server_kill(struct pd_server *srv, struct pd_conn *c, enum pd_log_level level,
                    const char *reason);

/* Kills every connection that lost a reply (pd_conn_send could not queue it), then unlinks
 * and frees every connection pd_server_kill marked dead; the event loop calls it after each
 * turn, when nothing refers to them any more. Returns nothing. */
void pd_server_sweep(struct pd_server *srv);

/* Says whether one more connection of kind from uid fits the per-uid and global limits of
 * the settings (daemon/tally.h). Returns 0, or PAGED_E_LIMIT with why naming the limit. */
int pd_server_admit(const struct pd_server *srv, uid_t uid, enum pd_tally_kind kind, char *why, size_t size);

/* Logs the refusal of a connection over a limit (why: the refusal's text; c: the connection, or
 * NULL for one refused at accept) as a warning, at most one a second: the ones in between are
 * counted and the next line says how many. Returns nothing. */
void pd_server_log_refusal(struct pd_server *srv, const struct pd_conn *c, const char *why);

/* Sets c's epoll interest from its state: read while nothing waits to go out, write while
 * something does. Whoever queues a message for a connection other than the one whose event
 * it handles (an event for a subscriber) calls it, or the queue would wait for the peer's
 * next message. */
void pd_server_watch(struct pd_server *srv, struct pd_conn *c);

#endif
