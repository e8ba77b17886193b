/* pactl_cmd_list.c: pactl list: the daemon's pools, clients, or blocks in use. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "tools/pactl_fetch.h"
#include "tools/pactl_fmt.h"
#include "tools/pactl_items.h"
#include "tools/pactl_json.h"
#include "tools/pactl.h"

/* Prints a list of pools of a daemon of ndevices devices. */
static void list_pools(const struct pactl_ctx *ctx, const struct pactl_list *l, uint32_t ndevices)
{
    const struct pcore_pool_item *p = l->items;
    if (ctx->format == PACTL_FORMAT_JSON) {
        struct json j;
        json_init(&j, stdout);
        json_object_begin(&j, NULL);
        json_array_begin(&j, "pools");
        for (size_t i = 0; i < l->count; i++)
            items_pool_json(&j, NULL, &p[i], ndevices);
        json_end(&j);
        json_end(&j);
        return;
    }
    items_pool_heading();
    for (size_t i = 0; i < l->count; i++)
        items_pool_row(&p[i], ndevices);
}

/* Prints a list of clients. */
static void list_clients(const struct pactl_ctx *ctx, const struct pactl_list *l)
{
    const struct pcore_client_item *c = l->items;
    if (ctx->format == PACTL_FORMAT_JSON) {
        struct json j;
        json_init(&j, stdout);
        json_object_begin(&j, NULL);
        json_array_begin(&j, "clients");
        for (size_t i = 0; i < l->count; i++)
            items_client_json(&j, &c[i]);
        json_end(&j);
        json_end(&j);
        return;
    }
    items_client_heading();
    for (size_t i = 0; i < l->count; i++)
        items_client_row(&c[i]);
}

/* Prints a list of blocks, naming their pools from the list of pools. */
static void list_blocks(const struct pactl_ctx *ctx, const struct pactl_list *l,
                        const struct pactl_list *pools)
{
    const struct pcore_block_item *b = l->items;
    if (ctx->format == PACTL_FORMAT_JSON) {
        struct json j;
        json_init(&j, stdout);
        json_object_begin(&j, NULL);
        json_array_begin(&j, "blocks");
        for (size_t i = 0; i < l->count; i++)
            items_block_json(&j, &b[i], pools);
        json_end(&j);
        json_end(&j);
        return;
    }
    items_block_heading();
    for (size_t i = 0; i < l->count; i++)
        items_block_row(&b[i], pools);
}

/* Returns the pool named name in a list of pools, or NULL. */
static const struct pcore_pool_item *find_pool(const struct pactl_list *pools, const char *name)
{
    const struct pcore_pool_item *p = pools->items;
    for (size_t i = 0; i < pools->count; i++)
        if (strncmp(p[i].name, name, sizeof p[i].name) == 0)
            return &p[i];
    return NULL;
}

/* Keeps only the blocks of pool id in a list of blocks, whatever the daemon's filter did. */
static void keep_pool_blocks(struct pactl_list *blocks, uint32_t id)
{
    struct pcore_block_item *b = blocks->items;
    size_t n = 0;
    for (size_t i = 0; i < blocks->count; i++)
        if (b[i].pool_id == id)
            b[n++] = b[i];
    blocks->count = n;
}

/* Runs "list [pools|clients|blocks [POOL]]"; returns the exit status. */
static int list_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    const char *kind = argc > 0 ? argv[0] : "pools";
    const char *pool = argc > 1 ? argv[1] : NULL;
    uint32_t what;
    char *cause = NULL;
    if (strcmp(kind, "pools") == 0)
        what = PCORE_LIST_POOLS;
    else if (strcmp(kind, "clients") == 0)
        what = PCORE_LIST_CLIENTS;
    else if (strcmp(kind, "blocks") == 0)
        what = PCORE_LIST_BLOCKS;
    else
        return pactl_usage_error("list: unknown kind '%s' (pools, clients or blocks)", kind);
    if (pool != NULL && what != PCORE_LIST_BLOCKS)
        return pactl_usage_error("list %s takes no pool name", kind);
    if (pool != NULL && strlen(pool) >= PCORE_NAME_MAX)
        return pactl_usage_error("list: pool name longer than %u bytes", PCORE_NAME_MAX - 1);
    if (pactl_connect(ctx) < 0)
        return PACTL_EXIT_FAIL;

    struct pactl_list pools, items;
    if (pactl_fetch_list(&ctx->conn, PCORE_LIST_POOLS, NULL, &pools, &cause) < 0)
        return pactl_fail(cause);
    if (what == PCORE_LIST_POOLS) {
        /* The daemon's devices: a sharded pool's shards go round them. */
        uint32_t ndevices;
        if (pactl_fetch_ndevices(&ctx->conn, &ndevices, &cause) < 0) {
            pactl_list_free(&pools);
            return pactl_fail(cause);
        }
        list_pools(ctx, &pools, ndevices);
        pactl_list_free(&pools);
        return PACTL_EXIT_OK;
    }
    const struct pcore_pool_item *filter = pool != NULL ? find_pool(&pools, pool) : NULL;
    if (pool != NULL && filter == NULL) {
        char name[PCORE_NAME_MAX];
        pactl_list_free(&pools);
        return pactl_fail(pactl_cause("no such pool '%s'",
                                      fmt_safe(name, sizeof name, pool, PCORE_NAME_MAX)));
    }
    if (pactl_fetch_list(&ctx->conn, what, pool, &items, &cause) < 0) {
        pactl_list_free(&pools);
        return pactl_fail(cause);
    }
    if (what == PCORE_LIST_CLIENTS)
        list_clients(ctx, &items);
    else {
        if (filter != NULL)
            keep_pool_blocks(&items, filter->id);
        list_blocks(ctx, &items, &pools);
    }
    pactl_list_free(&items);
    pactl_list_free(&pools);
    return PACTL_EXIT_OK;
}

const struct pactl_cmd pactl_cmd_list = {
    .name = "list",
    .options = "",
    .args = "[pools | clients | blocks [pool]]",
    .summary = "pools (the default), clients, or blocks in use",
    .min_args = 0,
    .max_args = 2,
    .exec = list_exec,
};
