/* pactl_cmd_ttl.c: pactl ttl: how long a pool keeps a cached prefix block nobody uses. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "tools/pactl_fetch.h"
#include "tools/pactl_fmt.h"
#include "tools/pactl_pool.h"
#include "tools/pactl.h"

/* Runs "ttl POOL MS"; returns the exit status. */
static int ttl_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    (void) argc;
    char *cause = NULL, name[PCORE_NAME_MAX];
    const char *pool = argv[0];
    if (strlen(pool) >= PCORE_NAME_MAX)
        return pactl_usage_error("ttl: pool name longer than %u bytes", PCORE_NAME_MAX - 1);
    uint64_t ms = 0;
    const char *s = argv[1];
    if (*s == '\0')
        return pactl_usage_error("ttl: milliseconds expected, got ''");
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9' || ms > PCORE_PREFIX_MAX_TTL_MS)
            return pactl_usage_error("ttl: '%.40s' is not a number of milliseconds up to %llu", argv[1],
                                     (unsigned long long) PCORE_PREFIX_MAX_TTL_MS);
        ms = ms * 10 + (uint64_t) (*s - '0');
    }
    uint32_t unused;
    if (pactl_connect(ctx) < 0)
        return PACTL_EXIT_FAIL;
    if (pactl_fetch_prefix(&ctx->conn, PCORE_PREFIX_TTL, pool, NULL, 0, ms, &unused, &cause) < 0)
        return pactl_fail(cause);
    if (ctx->format == PACTL_FORMAT_JSON)
        pactl_pool_json(pool, "ttl_ms", (uint32_t) (ms > UINT32_MAX ? UINT32_MAX : ms));
    else if (ms == 0)
        printf("pool '%s' keeps cached blocks until room is needed\n",
               fmt_safe(name, sizeof name, pool, PCORE_NAME_MAX));
    else
        printf("pool '%s' drops a cached block %llu ms after its last use\n",
               fmt_safe(name, sizeof name, pool, PCORE_NAME_MAX), (unsigned long long) ms);
    return PACTL_EXIT_OK;
}

const struct pactl_cmd pactl_cmd_ttl = {
    .name = "ttl",
    .options = "",
    .args = "pool milliseconds",
    .needs = "a pool name and a time to live",
    .summary = "drop the pool's cached blocks that long after their last use (0: never)",
    .min_args = 2,
    .max_args = 2,
    .exec = ttl_exec,
};
