/* pactl_cmd_info.c: pactl info: everything the daemon reports about one pool. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tools/pactl_fetch.h"
#include "tools/pactl_fmt.h"
#include "tools/pactl_items.h"
#include "tools/pactl_json.h"
#include "tools/pactl.h"

/* Prints the lines about a pool's host and file tiers. */
static void tiers_text(const struct pcore_pool_item *p, uint64_t block_bytes)
{
    char a[FMT_BUF], b[FMT_BUF], c[FMT_BUF];
    printf("host tier      %u of %u units stored (%s of %s)\n", (unsigned) p->host_stored, (unsigned) p->host_units,
           fmt_bytes(a, sizeof a, block_bytes * p->host_stored), fmt_bytes(b, sizeof b, block_bytes * p->host_units));
    if (p->file_units > 0 || p->written_bytes > 0)
        printf("file tier      %u units (%s)\n", (unsigned) p->file_units, fmt_bytes(a, sizeof a, p->file_bytes));
    printf("tier traffic   %s offloaded, %s written to files, %s reloaded\n",
           fmt_bytes(a, sizeof a, p->offloaded_bytes), fmt_bytes(b, sizeof b, p->written_bytes),
           fmt_bytes(c, sizeof c, p->reloaded_bytes));
    printf("reloads        %" PRIu64 ", %.3f ms each on average\n", p->reloads,
           p->reloads > 0 ? (double) p->reload_ns / 1e6 / (double) p->reloads : 0.0);
    printf("tier losses    %" PRIu64 " units dropped, %" PRIu64 " damaged files refused, %" PRIu64
           " failed copies or writes\n", p->tier_dropped, p->tier_damaged, p->tier_failures);
}

/* Prints one pool of a daemon of ndevices devices as "key  value" lines. */
static void info_text(const struct pcore_pool_item *p, uint32_t ndevices)
{
    char name[PCORE_NAME_MAX], a[FMT_BUF], b[FMT_BUF], devs[128];
    uint64_t block_bytes = p->num_blocks > 0 ? p->bytes / p->num_blocks : 0;
    printf("pool           %s\n", fmt_safe(name, sizeof name, p->name, sizeof p->name));
    printf("id             %u\n", (unsigned) p->id);
    if (p->destroyed)
        printf("state          destroyed: freed when its last client detaches\n");
    printf("layers         %u\n", (unsigned) p->num_layers);
    printf("kv heads       %u\n", (unsigned) p->num_kv_heads);
    const uint32_t shards = items_pool_shards(p);
    if (shards > 1)
        printf("shards         %u: tensor-parallel, each of %u KV head%s and %s of memory\n", (unsigned) shards,
               (unsigned) (p->num_kv_heads / shards), p->num_kv_heads / shards == 1 ? "" : "s",
               fmt_bytes(a, sizeof a, p->bytes / shards));
    if (shards > 1)
        printf("devices        %s: one per shard, in shard order\n",
               items_pool_devices(devs, sizeof devs, p, ndevices));
    else
        printf("device         %u\n", (unsigned) items_pool_shard_device(p, 0, ndevices));
    printf("head dim       %u\n", (unsigned) p->head_dim);
    printf("block size     %u tokens (%s each)\n", (unsigned) p->block_size,
           fmt_bytes(a, sizeof a, block_bytes));
    printf("dtype          %s\n", fmt_dtype(p->dtype));
    printf("blocks         %u: %u free, %u referenced, %u cached\n", (unsigned) p->num_blocks,
           (unsigned) p->free, (unsigned) p->referenced, (unsigned) p->cached);
    printf("memory         %s, %s in use\n", fmt_bytes(a, sizeof a, p->bytes),
           fmt_bytes(b, sizeof b, block_bytes * ((uint64_t) p->referenced + p->cached)));
    printf("owner          uid %u, mode %04o\n", (unsigned) p->owner_uid,
           (unsigned) (p->mode & 07777));
    printf("clients        %u attached\n", (unsigned) p->attached);
    printf("prefixes       %s: a LOOKUP finds blocks published by %s\n", items_pool_prefixes(p),
           (p->mode & PAGED_POOL_SHARED_PREFIXES) ? "any uid" : "its own uid only");
    printf("memory access  %s: %s\n", items_pool_memory(p),
           (p->mode & PAGED_POOL_SEALED) ? "no client receives the memory; every access is a request"
                                         : "attaching clients receive the memory and may map it");
    printf("prefix cache   %" PRIu64 " lookups, %" PRIu64 " blocks found, %" PRIu64
           " evicted (%" PRIu64 " by the ttl)\n", p->lookups, p->lookup_hits, p->evictions, p->expired);
    const uint64_t hits = p->hit_tokens + p->host_hit_tokens + p->file_hit_tokens;
    printf("tokens         %" PRIu64 " looked up, %" PRIu64 " found", p->lookup_tokens, hits);
    if (p->lookup_tokens > 0)
        printf(" (%.1f%%)", 100.0 * (double) hits / (double) p->lookup_tokens);
    if (p->host_units > 0)
        printf(": %" PRIu64 " in the pool, %" PRIu64 " in the host tier, %" PRIu64 " in the file tier",
               p->hit_tokens, p->host_hit_tokens, p->file_hit_tokens);
    printf("\n");
    if (p->host_units > 0)
        tiers_text(p, block_bytes);
    printf("pinned         %u blocks\n", (unsigned) p->pinned);
    if (p->ttl_ms == 0)
        printf("ttl            none: cached blocks stay until room is needed\n");
    else
        printf("ttl            %" PRIu64 " ms after a cached block's last use\n", p->ttl_ms);
}

/* Runs "info POOL"; returns the exit status. */
static int info_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    (void) argc;
    const char *pool = argv[0];
    char *cause = NULL, name[PCORE_NAME_MAX];
    struct pactl_list pools;
    if (strlen(pool) >= PCORE_NAME_MAX)
        return pactl_usage_error("info: pool name longer than %u bytes", PCORE_NAME_MAX - 1);
    if (pactl_connect(ctx) < 0)
        return PACTL_EXIT_FAIL;
    if (pactl_fetch_list(&ctx->conn, PCORE_LIST_POOLS, pool, &pools, &cause) < 0)
        return pactl_fail(cause);
    uint32_t ndevices;
    if (pactl_fetch_ndevices(&ctx->conn, &ndevices, &cause) < 0) {
        pactl_list_free(&pools);
        return pactl_fail(cause);
    }
    const struct pcore_pool_item *p = pools.items, *found = NULL;
    for (size_t i = 0; i < pools.count && found == NULL; i++)
        if (strncmp(p[i].name, pool, sizeof p[i].name) == 0)
            found = &p[i];
    if (found == NULL) {
        pactl_list_free(&pools);
        return pactl_fail(pactl_cause("no such pool '%s'",
                                      fmt_safe(name, sizeof name, pool, PCORE_NAME_MAX)));
    }
    if (ctx->format == PACTL_FORMAT_JSON) {
        struct json j;
        json_init(&j, stdout);
        items_pool_json(&j, NULL, found, ndevices);
    } else
        info_text(found, ndevices);
    pactl_list_free(&pools);
    return PACTL_EXIT_OK;
}

const struct pactl_cmd pactl_cmd_info = {
    .name = "info",
    .options = "",
    .args = "pool",
    .needs = "a pool name",
    .summary = "one pool's geometry, blocks, owner and prefix cache",
    .min_args = 1,
    .max_args = 1,
    .exec = info_exec,
};
