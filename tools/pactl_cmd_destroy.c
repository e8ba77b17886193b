/* pactl_cmd_destroy.c: pactl destroy: remove a pool's name; its memory goes at the last detach. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>

#include "tools/pactl_fmt.h"
#include "tools/pactl_pool.h"
#include "tools/pactl.h"

/* Runs "destroy POOL" (the daemon decides who may: the owner and root); returns the exit
 * status. */
static int destroy_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    (void) argc;
    char name[PCORE_NAME_MAX];
    uint32_t attached;
    int rc = pactl_pool_call(ctx, "destroy", PCORE_MSG_POOL_DESTROY, argv[0], &attached);
    if (rc != PACTL_EXIT_OK)
        return rc;
    if (ctx->format == PACTL_FORMAT_JSON) {
        pactl_pool_json(argv[0], "still_attached", attached);
        return PACTL_EXIT_OK;
    }
    fmt_safe(name, sizeof name, argv[0], PCORE_NAME_MAX);
    if (attached == 0)
        printf("destroyed pool '%s'\n", name);
    else
        printf("destroyed pool '%s': its memory is freed when the last of its %u attached client%s "
               "detaches\n", name, (unsigned) attached, attached == 1 ? "" : "s");
    return PACTL_EXIT_OK;
}

const struct pactl_cmd pactl_cmd_destroy = {
    .name = "destroy",
    .options = "",
    .args = "pool",
    .needs = "a pool name",
    .summary = "remove a pool; its memory goes when its last client detaches",
    .min_args = 1,
    .max_args = 1,
    .exec = destroy_exec,
};
