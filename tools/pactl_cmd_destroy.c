/* pactl_cmd_destroy.c: pactl destroy: remove a pool's name; its memory goes at the last detach. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "tools/pactl_fetch.h"
#include "tools/pactl_fmt.h"
#include "tools/pactl_json.h"
#include "tools/pactl.h"

/* Runs "destroy POOL" (the daemon decides who may: the owner and root); returns the exit
 * status. */
static int destroy_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    (void) argc;
    const char *pool = argv[0];
    char *cause = NULL, name[PCORE_NAME_MAX];
    uint32_t attached;
    if (strlen(pool) >= PCORE_NAME_MAX)
        return pactl_usage_error("destroy: pool name longer than %u bytes", PCORE_NAME_MAX - 1);
    if (pactl_connect(ctx) < 0)
        return PACTL_EXIT_FAIL;
    if (pactl_fetch_pool_ref(&ctx->conn, PCORE_MSG_POOL_DESTROY, pool, &attached, &cause) < 0)
        return pactl_fail(cause);
    if (ctx->format == PACTL_FORMAT_JSON) {
        struct json j;
        json_init(&j, stdout);
        json_object_begin(&j, NULL);
        json_str(&j, "pool", pool);
        json_u64(&j, "still_attached", attached);
        json_end(&j);
        return PACTL_EXIT_OK;
    }
    fmt_safe(name, sizeof name, pool, PCORE_NAME_MAX);
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
