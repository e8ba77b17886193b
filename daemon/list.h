/* list.h: replies that describe the daemon: STATUS, STATS and LIST packets. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_LIST_H
#define PAGED_DAEMON_LIST_H

#include <stdint.h>

#include "lib/core/proto.h"

struct pd_server;
struct pd_conn;

/* Starts LIST m for c: its packets follow as c's socket takes them. Returns nothing. */
void pd_list_start(struct pd_server *srv, struct pd_conn *c, const struct pcore_msg_list *m);

/* Makes the next packets of c's LIST in progress, if any, while its queue is empty. Returns
 * nothing. */
void pd_list_continue(struct pd_server *srv, struct pd_conn *c);

/* Replies STATUS_REPLY to c, echoing seq. Returns nothing. */
void pd_reply_status(struct pd_server *srv, struct pd_conn *c, uint32_t seq);

/* Replies STATS_REPLY to c (the request counters and the engine's), echoing seq. Returns
 * nothing. */
void pd_reply_stats(struct pd_server *srv, struct pd_conn *c, uint32_t seq);

#endif
