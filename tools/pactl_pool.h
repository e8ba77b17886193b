/* pactl_pool.h: what pactl's commands on one named pool share (evict, destroy): the request and its JSON answer. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_PACTL_POOL_H
#define PAGED_TOOLS_PACTL_POOL_H

#include <stdint.h>

#include "tools/pactl.h"

/*
 * For command cmd: checks the pool name's length, connects and sends a request of type
 * (PCORE_MSG_EVICT, PCORE_MSG_POOL_DESTROY) naming pool. Returns PACTL_EXIT_OK with the OK's
 * count in *count, or the exit status after printing why not (a usage error, the daemon's
 * refusal in its own words).
 */
int pactl_pool_call(struct pactl_ctx *ctx, const char *cmd, uint32_t type, const char *pool,
                    uint32_t *count);

/* Prints the JSON answer {"pool": pool, key: count} on a line. Returns nothing. */
void pactl_pool_json(const char *pool, const char *key, uint32_t count);

#endif
