/* pactl_cmd_status.c: pactl status: the daemon's version, backend, devices, uptime, load and health. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>

#include "tools/pactl_fetch.h"
#include "tools/pactl_fmt.h"
#include "tools/pactl_json.h"
#include "tools/pactl.h"

/* Prints the status as "key  value" lines. */
static void status_text(const struct pcore_msg_status_reply *s)
{
    char a[FMT_BUF], b[FMT_BUF], text[128];
    uint64_t free_bytes = s->mem_total > s->mem_used ? s->mem_total - s->mem_used : 0;
    printf("version        %s\n", fmt_safe(text, sizeof text, s->version, sizeof s->version));
    printf("pid            %u\n", (unsigned) s->pid);
    printf("backend        %s\n", fmt_backend(s->backend));
    fmt_safe(text, sizeof text, s->device_name, sizeof s->device_name);
    if (s->device_ordinal >= 0)
        printf("device         %d: %s\n", (int) s->device_ordinal, text);
    else
        printf("device         %s\n", text[0] != '\0' ? text : "host memory");
    printf("devices        %u\n", (unsigned) (s->devices > 0 ? s->devices : 1));
    printf("uptime         %s\n", fmt_uptime(a, sizeof a, s->uptime_ns));
    printf("clients        %u\n", (unsigned) s->clients);
    printf("pools          %u\n", (unsigned) s->pools);
    printf("memory used    %s of %s\n", fmt_bytes(a, sizeof a, s->mem_used),
           fmt_bytes(b, sizeof b, s->mem_total));
    printf("memory free    %s\n", fmt_bytes(a, sizeof a, free_bytes));
    if (s->backend == PAGED_BACKEND_CUDA)
        printf("device free    %s\n", fmt_bytes(a, sizeof a, s->device_mem_free));
    printf("health         %s\n", s->healthy ? "ok"
           : fmt_safe(text, sizeof text, s->health, sizeof s->health));
}

/* Prints the status as one JSON object. */
static void status_json(const struct pcore_msg_status_reply *s)
{
    struct json j;
    json_init(&j, stdout);
    json_object_begin(&j, NULL);
    json_strn(&j, "version", s->version, sizeof s->version);
    json_u64(&j, "pid", s->pid);
    json_str(&j, "backend", fmt_backend(s->backend));
    json_i64(&j, "device_ordinal", s->device_ordinal);
    json_strn(&j, "device_name", s->device_name, sizeof s->device_name);
    json_u64(&j, "devices", s->devices > 0 ? s->devices : 1);
    json_u64(&j, "uptime_ns", s->uptime_ns);
    json_u64(&j, "clients", s->clients);
    json_u64(&j, "pools", s->pools);
    json_u64(&j, "mem_used", s->mem_used);
    json_u64(&j, "mem_free", s->mem_total > s->mem_used ? s->mem_total - s->mem_used : 0);
    json_u64(&j, "mem_total", s->mem_total);
    json_u64(&j, "device_mem_free", s->device_mem_free);
    json_bool(&j, "healthy", s->healthy != 0);
    json_strn(&j, "health", s->healthy ? "ok" : s->health, sizeof s->health);
    json_end(&j);
}

/* Runs "status"; returns the exit status. */
static int status_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    (void) argc;
    (void) argv;
    struct pcore_msg_status_reply s;
    char *cause = NULL;
    if (pactl_connect(ctx) < 0)
        return PACTL_EXIT_FAIL;
    if (pactl_fetch_status(&ctx->conn, &s, &cause) < 0)
        return pactl_fail(cause);
    if (ctx->format == PACTL_FORMAT_JSON)
        status_json(&s);
    else
        status_text(&s);
    return PACTL_EXIT_OK;
}

const struct pactl_cmd pactl_cmd_status = {
    .name = "status",
    .options = "",
    .args = "",
    .summary = "the daemon's version, backend, uptime, load and health",
    .min_args = 0,
    .max_args = 0,
    .exec = status_exec,
};
