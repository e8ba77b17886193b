/* pactl_cmd_devices.c: pactl devices: the devices the daemon serves, their pools, clients and health. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tools/pactl_fetch.h"
#include "tools/pactl_fmt.h"
#include "tools/pactl_json.h"
#include "tools/pactl.h"

/* Returns whether device d is a GPU: it has a CUDA ordinal (a cpu backend's device has -1). */
static int is_gpu(const struct pcore_device_item *d)
{
    return d->ordinal >= 0;
}

/* Prints device d as a JSON object of j: a cpu device's uuid and mem_free are null. Returns nothing. */
static void device_json(struct json *j, const struct pcore_device_item *d)
{
    char uuid[FMT_BUF];
    json_object_begin(j, NULL);
    json_u64(j, "index", d->index);
    json_i64(j, "ordinal", d->ordinal);
    json_strn(j, "name", d->name, sizeof d->name);
    if (is_gpu(d)) {
        json_str(j, "uuid", fmt_uuid(uuid, sizeof uuid, d->uuid));
        json_u64(j, "mem_free", d->mem_free);
    } else {
        json_null(j, "uuid");
        json_null(j, "mem_free");
    }
    json_u64(j, "pools", d->pools);
    json_u64(j, "pool_bytes", d->pool_bytes);
    json_u64(j, "clients", d->clients);
    json_bool(j, "healthy", d->healthy != 0);
    json_strn(j, "health", d->healthy ? "ok" : d->health, sizeof d->health);
    json_end(j);
}

/* Prints device d as one row of the text table: its name escaped (fmt_column) and padded by
 * columns, CUDA and FREE "-" on the cpu backend. Returns nothing. */
static void device_row(const struct pcore_device_item *d)
{
    char name[4 * sizeof d->name + 32], cuda[16] = "-", mem[FMT_BUF], avail[FMT_BUF] = "-", health[160];
    if (is_gpu(d)) {
        snprintf(cuda, sizeof cuda, "%d", (int) d->ordinal);
        fmt_bytes(avail, sizeof avail, d->mem_free);
    }
    printf("%4u %4s  %s %5u %10s %10s %7u  %s\n", (unsigned) d->index, cuda,
           fmt_column(name, sizeof name, d->name, sizeof d->name, 32), (unsigned) d->pools,
           fmt_bytes(mem, sizeof mem, d->pool_bytes), avail, (unsigned) d->clients,
           d->healthy ? "ok" : fmt_safe(health, sizeof health, d->health, sizeof d->health));
}

/* Runs "devices"; returns the exit status. */
static int devices_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    (void) argc, (void) argv;
    char *cause = NULL;
    if (pactl_connect(ctx) < 0)
        return PACTL_EXIT_FAIL;
    struct pactl_list l;
    if (pactl_fetch_list(&ctx->conn, PCORE_LIST_DEVICES, NULL, &l, &cause) < 0)
        return pactl_fail(cause);
    const struct pcore_device_item *d = l.items;
    if (ctx->format == PACTL_FORMAT_JSON) {
        struct json j;
        json_init(&j, stdout);
        json_object_begin(&j, NULL);
        json_array_begin(&j, "devices");
        for (size_t i = 0; i < l.count; i++)
            device_json(&j, &d[i]);
        json_end(&j);
        json_end(&j);
    } else {
        printf("%4s %4s  %-32s %5s %10s %10s %7s  %s\n", "DEV", "CUDA", "NAME", "POOLS", "POOL MEM", "FREE",
               "CLIENTS", "HEALTH");
        for (size_t i = 0; i < l.count; i++)
            device_row(&d[i]);
    }
    pactl_list_free(&l);
    return PACTL_EXIT_OK;
}

const struct pactl_cmd pactl_cmd_devices = {
    .name = "devices",
    .options = "",
    .args = "",
    .summary = "the devices the daemon serves: pools, memory, clients, health",
    .min_args = 0,
    .max_args = 0,
    .exec = devices_exec,
};
