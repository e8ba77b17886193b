/* pactl_cmd_kill_client.c: pactl kill-client: disconnect a client, releasing everything it held. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/pactl_json.h"
#include "tools/pactl.h"

/* Parses a client id: decimal digits only, fitting 32 bits. Returns 0 or -1. */
static int parse_id(const char *s, uint32_t *id)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > UINT32_MAX)
        return -1;
    *id = (uint32_t) v;
    return 0;
}

/* Runs "kill-client ID"; returns the exit status. */
static int kill_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    (void) argc;
    struct pcore_msg_kill req;
    uint32_t id;
    char *cause = NULL;
    size_t len;
    if (parse_id(argv[0], &id) < 0)
        return pactl_usage_error("kill-client: '%s' is not a client id", argv[0]);
    if (pactl_connect(ctx) < 0)
        return PACTL_EXIT_FAIL;
    memset(&req, 0, sizeof req);
    req.hdr.type = PCORE_MSG_KILL_CLIENT;
    req.client_id = id;
    if (pactl_conn_call(&ctx->conn, &req, sizeof req, PCORE_MSG_OK,
                        sizeof(struct pcore_msg_hdr), &len, &cause) == NULL)
        return pactl_fail(cause);
    if (ctx->format == PACTL_FORMAT_JSON) {
        struct json j;
        json_init(&j, stdout);
        json_object_begin(&j, NULL);
        json_u64(&j, "killed", id);
        json_end(&j);
    } else
        printf("killed client %u\n", (unsigned) id);
    return PACTL_EXIT_OK;
}

const struct pactl_cmd pactl_cmd_kill_client = {
    .name = "kill-client",
    .options = "",
    .args = "id",
    .needs = "a client id",
    .summary = "disconnect a client, releasing all it held",
    .min_args = 1,
    .max_args = 1,
    .exec = kill_exec,
};
