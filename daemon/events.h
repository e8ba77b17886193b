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

#endif
