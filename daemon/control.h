/* control.h: HELLO and the control messages of the socket: pools, listings, kill, evict. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_CONTROL_H
#define PAGED_DAEMON_CONTROL_H

#include <stddef.h>
#include <stdint.h>

struct pd_server;
struct pd_conn;
struct pd_pool;

/* Handles the first message of new connection c (len bytes at msg), which must be a HELLO:
 * makes it ready with its channel and sends WELCOME, or refuses it. Returns nothing. */
void pd_control_hello(struct pd_server *srv, struct pd_conn *c, const void *msg, size_t len);

/* Handles one control message (len bytes at msg) of ready connection c. Returns nothing. */
void pd_control_handle(struct pd_server *srv, struct pd_conn *c, const void *msg, size_t len);

/* Refuses connection c: sends an ERROR with status and msg, then closes it once that is
 * out. Returns nothing. */
void pd_control_refuse(struct pd_server *srv, struct pd_conn *c, int status, const char *msg);

/* Finds the pool a request names: by name when name is not empty, else by id. Sends the
 * error (answering seq) and returns NULL when there is none. */
struct pd_pool *pd_control_find_pool(struct pd_server *srv, struct pd_conn *c, uint32_t seq, const char *name,
                                     uint32_t pool_id);

#endif
