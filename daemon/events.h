/* events.h: EVENT messages to subscribers: announcements, the count of those missed, evictions. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_EVENTS_H
#define PAGED_DAEMON_EVENTS_H

#include <stdint.h>

struct pd_server;
struct pd_conn;
struct pd_pool;

/* Announces event (enum pcore_event) about client c (NULL: none) and pool to every
 * subscriber (the connect and disconnect of an inspection connection only to those that
 * subscribed with PCORE_SUBSCRIBE_INSPECT); dropped for those who do not keep up, who are
 * then told how many they missed by a LOST event. Returns nothing. */
void pd_events_announce(struct pd_server *srv, uint32_t event, const struct pd_conn *c,
                        const char *pool, uint32_t count);

/* Sends subscriber c a LOST event counting the events it missed, once its queue has
 * drained (nothing when it missed none, is no subscriber or still has a queue). Returns
 * nothing. */
void pd_events_report_lost(struct pd_server *srv, struct pd_conn *c);

/* Announces the evictions a pool's allocator counted since the last call. Returns nothing. */
void pd_events_flush_evictions(struct pd_server *srv, struct pd_pool *p);

/* Returns whether a ready subscriber asked for block events (PCORE_SUBSCRIBE_BLOCKS). */
int pd_events_blocks_wanted(const struct pd_server *srv);

/* Sets every pool's block log enabled exactly while a ready subscriber asks for block events
 * (clearing the logs when nobody does any more); called when such a subscriber comes or
 * goes. Returns nothing. */
void pd_events_blocks_update(struct pd_server *srv);

/* Sends the block events p's log recorded since the last call to every block subscriber, in
 * order, as BLOCKS events of at most PCORE_EVENT_MAX_BLOCKS entries: to one that is neither
 * root nor the daemon's uid only the entries of its own prefix scope (pd_pool_may_see_tenant).
 * The entries the log could not record, and those of messages a slow subscriber could not
 * queue, reach it as a LOST event that counts them. Clears the log. Returns nothing. */
void pd_events_flush_blocks(struct pd_server *srv, struct pd_pool *p);

#endif
