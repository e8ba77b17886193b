/* pactl_pool.c: what pactl's commands on one named pool share (evict, destroy): the request and its JSON answer. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/pactl_pool.h"

#include <stdio.h>
#include <string.h>

#include "tools/pactl_fetch.h"
#include "tools/pactl_json.h"

/* Checks the name, connects and makes the request; returns the exit status. */
int pactl_pool_call(struct pactl_ctx *ctx, const char *cmd, uint32_t type, const char *pool,
                    uint32_t *count)
{
    char *cause = NULL;
    if (strlen(pool) >= PCORE_NAME_MAX)
        return pactl_usage_error("%s: pool name longer than %u bytes", cmd, PCORE_NAME_MAX - 1);
    if (pactl_connect(ctx) < 0)
        return PACTL_EXIT_FAIL;
    if (pactl_fetch_pool_ref(&ctx->conn, type, pool, count, &cause) < 0)
        return pactl_fail(cause);
    return PACTL_EXIT_OK;
}

/* Prints {"pool": pool, key: count}; returns nothing. */
void pactl_pool_json(const char *pool, const char *key, uint32_t count)
{
    struct json j;
    json_init(&j, stdout);
    json_object_begin(&j, NULL);
    json_str(&j, "pool", pool);
    json_u64(&j, key, count);
    json_end(&j);
}
