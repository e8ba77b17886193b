/* peer.h: other daemons' published prefixes: the peer module's whole interface to the server and the engine. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_PEER_PEER_H
#define PAGED_DAEMON_PEER_PEER_H

/*
 * A daemon with peer-listen takes connections of peer daemons; one with peers connects to
 * each, in order, and keeps trying one that failed. Both go over UCX (daemon/peer/link.c):
 * one context and one worker, progressed on the server's thread only, whose event descriptor
 * is part of the server's epoll set (pd_peers_fd); pd_peers_poll runs everything that arrived
 * and arms the descriptor before the server sleeps. Each connection starts with a
 * challenge-response over the shared key (daemon/peer/auth.c); nothing else is taken from a
 * peer before it. A LOOKUP of a pool with PAGED_POOL_PEERS that finds fewer blocks than asked
 * in the pool and its tiers asks the peers (pd_peers_prefetch, daemon/peer/fetch.c): the first
 * that answers with blocks has them pulled with an RMA get, checked and published here under
 * the same hashes. That runs beside the engine, bounded by peer-timeout: the LOOKUP stays at
 * the head of its client's ring (holding up that client only) until the fetch is over, and
 * then runs as any LOOKUP, finding what the fetch published. A peer serves
 * (daemon/peer/serve.c) only the published blocks of its pools with PAGED_POOL_PEERS of the
 * same name, geometry and prefix scope.
 */

#include <stdint.h>

#include "daemon/backend.h"
#include "daemon/pool.h"
#include "daemon/settings.h"
#include "lib/core/proto.h"

struct pd_peers;

/* Returns whether cfg asks for peers (peer-listen or peers set). */
int pd_peers_wanted(const struct pd_config *cfg);

/*
 * Opens the peer module cfg asks for: reads and checks the key file, creates the UCX context
 * and worker, listens on peer-listen and starts connecting to each of peers. b and *pools are
 * the server's backend and pool list, read when a peer asks for blocks. Returns PAGED_OK and
 * *out, or an error with *cause (malloc'd) naming what failed and why.
 */
int pd_peers_open(const struct pd_config *cfg, pd_backend *b, struct pd_pool *const *pools,
                  struct pd_peers **out, char **cause);

/* Returns the descriptor that becomes readable when the peers need pd_peers_poll. */
int pd_peers_fd(const struct pd_peers *ps);

/* Runs what the peers sent (handshakes, requests, releases), drops expired staging buffers,
 * reconnects failed peers when due, and arms the descriptor. Returns 1 when armed (the server
 * may sleep on pd_peers_fd), 0 when more is pending (it should poll again soon). */
int pd_peers_poll(struct pd_peers *ps);

/* Returns the longest time in ms the server may sleep before pd_peers_poll has timed work
 * (a staging buffer to expire, a reconnection), or -1 for none. */
int pd_peers_timeout_ms(const struct pd_peers *ps);

/* What the module calls when the fetch it started for client conn_id is over (whatever it
 * found). */
typedef void (*pd_peers_done_fn)(void *ctx, uint32_t conn_id);

/* Sets the function told when a fetch is over. Returns nothing. */
void pd_peers_set_done(struct pd_peers *ps, pd_peers_done_fn fn, void *ctx);

/*
 * The engine's remote start (ctx: the peers): starts asking the peers in order, for the LOOKUP
 * of client conn_id in pool p, for the blocks of hashes[0..n) (the chain's next ones, that p
 * and its tiers lack) published under tenant in their pool of p's name. The blocks the first
 * peer that has some sends are pulled, checked and published in p as cached blocks, so that
 * the LOOKUP, run again once the done function is told, finds them. Bounded by peer-timeout.
 * Returns 1 when started, 0 when no peer is connected or every fetch slot is taken.
 */
int pd_peers_prefetch(void *ctx, struct pd_pool *p, uint32_t conn_id, uint32_t tenant, uint32_t n,
                      const paged_hash *hashes);

/* Returns how many peers the module knows (connected, connecting or failed). */
uint32_t pd_peers_count(const struct pd_peers *ps);

/* Fills *out with peer i's row for LIST (i below pd_peers_count). Returns nothing. */
void pd_peers_item(const struct pd_peers *ps, uint32_t i, struct pcore_peer_item *out);

/* Closes every connection and frees the module. NULL is ignored. */
void pd_peers_close(struct pd_peers *ps);

#endif
