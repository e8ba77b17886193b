/* pactl_cmd_evict.c: pactl evict: drop a pool's cached prefix blocks that nobody references, or one prefix. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>

#include "tools/pactl_fmt.h"
#include "tools/pactl_pool.h"
#include "tools/pactl_prefix.h"
#include "tools/pactl.h"

/* Runs "evict POOL [HASH...]"; returns the exit status. */
static int evict_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    if (argc > 1)
        return pactl_prefix_run(ctx, "evict", PCORE_PREFIX_EVICT, "evicted", argv[0], argc - 1, argv + 1);
    char name[PCORE_NAME_MAX];
    uint32_t evicted;
    int rc = pactl_pool_call(ctx, "evict", PCORE_MSG_EVICT, argv[0], &evicted);
    if (rc != PACTL_EXIT_OK)
        return rc;
    if (ctx->format == PACTL_FORMAT_JSON)
        pactl_pool_json(argv[0], "evicted", evicted);
    else
        printf("evicted %u cached block%s from pool '%s'\n", (unsigned) evicted, evicted == 1 ? "" : "s",
               fmt_safe(name, sizeof name, argv[0], PCORE_NAME_MAX));
    return PACTL_EXIT_OK;
}

const struct pactl_cmd pactl_cmd_evict = {
    .name = "evict",
    .options = "",
    .args = "pool [hash...]",
    .needs = "a pool name",
    .summary = "drop the pool's unreferenced cached prefix blocks, or one prefix (its block hashes)",
    .min_args = 1,
    .max_args = 1 + (int) PCORE_PREFIX_MAX_HASHES,
    .exec = evict_exec,
};
