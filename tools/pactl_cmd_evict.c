/* pactl_cmd_evict.c: pactl evict: drop a pool's cached prefix blocks that nobody references. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "tools/pactl_fetch.h"
#include "tools/pactl_fmt.h"
#include "tools/pactl_json.h"
#include "tools/pactl.h"

/* Runs "evict POOL"; returns the exit status. */
static int evict_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    (void) argc;
    const char *pool = argv[0];
    char *cause = NULL, name[PCORE_NAME_MAX];
    uint32_t evicted;
    if (strlen(pool) >= PCORE_NAME_MAX)
        return pactl_usage_error("evict: pool name longer than %u bytes", PCORE_NAME_MAX - 1);
    if (pactl_connect(ctx) < 0)
        return PACTL_EXIT_FAIL;
    if (pactl_fetch_pool_ref(&ctx->conn, PCORE_MSG_EVICT, pool, &evicted, &cause) < 0)
        return pactl_fail(cause);
    if (ctx->format == PACTL_FORMAT_JSON) {
        struct json j;
        json_init(&j, stdout);
        json_object_begin(&j, NULL);
        json_str(&j, "pool", pool);
        json_u64(&j, "evicted", evicted);
        json_end(&j);
    } else
        printf("evicted %u cached block%s from pool '%s'\n", (unsigned) evicted, evicted == 1 ? "" : "s",
               fmt_safe(name, sizeof name, pool, PCORE_NAME_MAX));
    return PACTL_EXIT_OK;
}

const struct pactl_cmd pactl_cmd_evict = {
    .name = "evict",
    .options = "",
    .args = "pool",
    .needs = "a pool name",
    .summary = "drop the pool's unreferenced cached prefix blocks",
    .min_args = 1,
    .max_args = 1,
    .exec = evict_exec,
};
