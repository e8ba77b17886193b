/* prefixctl.h: PREFIX, the prefix cache's controls: pin, unpin, evict by prefix, time to live. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_PREFIXCTL_H
#define PAGED_DAEMON_PREFIXCTL_H

#include <stddef.h>

struct pd_server;
struct pd_conn;

/*
 * Handles a PREFIX message of len bytes (its length already matches its header; at least
 * the fixed part): checks every field, the caller's permission and the pin limits, acts on
 * the pool and replies OK with the op's count or an ERROR naming the field or rule. Returns
 * nothing.
 */
void pd_prefixctl_handle(struct pd_server *srv, struct pd_conn *c, const void *buf, size_t len);

#endif
