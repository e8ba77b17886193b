/* pactl_items.c: how pactl shows pools, clients and blocks, as table rows and as JSON objects. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/pactl_items.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tools/pactl_fmt.h"

/* Returns how a pool's prefix cache is scoped, from its mode word: "shared" or "per-uid". */
const char *items_pool_prefixes(const struct pcore_pool_item *p)
{
    return (p->mode & PAGED_POOL_SHARED_PREFIXES) ? "shared" : "per-uid";
}

/* Returns whether a pool's memory is sent to the clients that attach it, from its mode word:
 * "sealed" or "exported". A daemon older than the attribute sets neither bit and exports every
 * pool, so a word without PAGED_POOL_SEALED reads "exported". */
const char *items_pool_memory(const struct pcore_pool_item *p)
{
    return (p->mode & PAGED_POOL_SEALED) ? "sealed" : "exported";
}

/* Returns a pool's shards: its pcore_pool_item's shards, or 1 for 0 (a daemon older than
 * tensor-parallel pools leaves the field zero). */
uint32_t items_pool_shards(const struct pcore_pool_item *p)
{
    return p->shards > 1 ? p->shards : 1;
}

/* Returns shard r's device: the pool's device plus r, modulo the daemon's devices. */
uint32_t items_pool_shard_device(const struct pcore_pool_item *p, uint32_t r, uint32_t ndevices)
{
    return (uint32_t) (((uint64_t) p->device + r) % (ndevices > 0 ? ndevices : 1));
}

/* Writes the shards' devices as "0,1" (as many as fit in buf); returns buf. */
char *items_pool_devices(char *buf, size_t size, const struct pcore_pool_item *p, uint32_t ndevices)
{
    size_t at = 0;
    buf[0] = '\0';
    for (uint32_t r = 0; r < items_pool_shards(p) && at < size; r++) {
        int n = snprintf(buf + at, size - at, "%s%u", r > 0 ? "," : "",
                         (unsigned) items_pool_shard_device(p, r, ndevices));
        if (n < 0)
            break;
        at += (size_t) n;
    }
    return buf;
}

/* Prints the column names of the pool table. */
void items_pool_heading(void)
{
    printf("%4s  %-16s %6s %5s %6s %4s %5s %-8s %7s %7s %7s %7s %7s %5s %-8s %-8s %6s %10s  %s\n", "ID",
           "NAME", "LAYERS", "HEADS", "SHARDS", "DIM", "BLOCK", "DTYPE", "BLOCKS", "FREE", "USED", "CACHED",
           "CLIENTS", "MODE", "PREFIXES", "MEMORY", "OWNER", "SIZE", "DEV");
}

/* Prints one pool as a table row; a destroyed pool's name is marked with a star, the SHARDS
 * column of a pool that is not tensor-parallel is "-", and DEV lists its shards' devices. */
void items_pool_row(const struct pcore_pool_item *p, uint32_t ndevices)
{
    char name[PCORE_NAME_MAX + 2], size[FMT_BUF], mode[16], shards[16] = "-", devs[128];
    fmt_safe(name, sizeof name - 1, p->name, sizeof p->name);
    snprintf(mode, sizeof mode, "%04o", (unsigned) (p->mode & 07777));
    if (items_pool_shards(p) > 1)
        snprintf(shards, sizeof shards, "%u", (unsigned) items_pool_shards(p));
    if (p->destroyed)
        strcat(name, "*");
    printf("%4u  %-16s %6u %5u %6s %4u %5u %-8s %7u %7u %7u %7u %7u %5s %-8s %-8s %6u %10s  %s\n",
           (unsigned) p->id, name, (unsigned) p->num_layers, (unsigned) p->num_kv_heads, shards,
           (unsigned) p->head_dim, (unsigned) p->block_size, fmt_dtype(p->dtype),
           (unsigned) p->num_blocks, (unsigned) p->free, (unsigned) p->referenced,
           (unsigned) p->cached, (unsigned) p->attached, mode, items_pool_prefixes(p),
           items_pool_memory(p), (unsigned) p->owner_uid, fmt_bytes(size, sizeof size, p->bytes),
           items_pool_devices(devs, sizeof devs, p, ndevices));
}

/* Writes one pool as a JSON object: its device (shard 0's) and devices (each shard's, in
 * order) among the rest. */
void items_pool_json(struct json *j, const char *key, const struct pcore_pool_item *p, uint32_t ndevices)
{
    char mode[16];
    snprintf(mode, sizeof mode, "%04o", (unsigned) (p->mode & 07777));
    json_object_begin(j, key);
    json_u64(j, "id", p->id);
    json_strn(j, "name", p->name, sizeof p->name);
    json_u64(j, "num_layers", p->num_layers);
    json_u64(j, "num_kv_heads", p->num_kv_heads);
    json_u64(j, "shards", items_pool_shards(p));
    json_u64(j, "device", items_pool_shard_device(p, 0, ndevices));
    json_array_begin(j, "devices");
    for (uint32_t r = 0; r < items_pool_shards(p); r++)
        json_u64(j, NULL, items_pool_shard_device(p, r, ndevices));
    json_end(j);
    json_u64(j, "head_dim", p->head_dim);
    json_u64(j, "block_size", p->block_size);
    json_str(j, "dtype", fmt_dtype(p->dtype));
    json_u64(j, "num_blocks", p->num_blocks);
    json_u64(j, "free", p->free);
    json_u64(j, "referenced", p->referenced);
    json_u64(j, "cached", p->cached);
    json_u64(j, "attached", p->attached);
    json_u64(j, "owner_uid", p->owner_uid);
    json_str(j, "mode", mode);
    json_str(j, "prefixes", items_pool_prefixes(p));
    json_str(j, "memory", items_pool_memory(p));
    json_bool(j, "destroyed", p->destroyed != 0);
    json_u64(j, "bytes", p->bytes);
    json_u64(j, "evictions", p->evictions);
    json_u64(j, "lookups", p->lookups);
    json_u64(j, "lookup_hits", p->lookup_hits);
    json_u64(j, "lookup_tokens", p->lookup_tokens);
    json_u64(j, "hit_tokens", p->hit_tokens);
    json_u64(j, "expired", p->expired);
    json_u64(j, "pinned", p->pinned);
    json_u64(j, "ttl_ms", p->ttl_ms);
    json_u64(j, "host_units", p->host_units);
    json_u64(j, "host_stored", p->host_stored);
    json_u64(j, "file_units", p->file_units);
    json_u64(j, "file_bytes", p->file_bytes);
    json_u64(j, "host_hit_tokens", p->host_hit_tokens);
    json_u64(j, "file_hit_tokens", p->file_hit_tokens);
    json_u64(j, "offloaded_bytes", p->offloaded_bytes);
    json_u64(j, "written_bytes", p->written_bytes);
    json_u64(j, "reloaded_bytes", p->reloaded_bytes);
    json_u64(j, "reloads", p->reloads);
    json_u64(j, "reload_ns", p->reload_ns);
    json_u64(j, "offload_ns", p->offload_ns);
    json_u64(j, "tier_dropped", p->tier_dropped);
    json_u64(j, "tier_damaged", p->tier_damaged);
    json_u64(j, "tier_failures", p->tier_failures);
    json_end(j);
}

/* Prints the column names of the client table. */
void items_client_heading(void)
{
    printf("%4s %8s %6s  %-20s %-7s %-5s %5s %7s %10s %7s %9s\n", "ID", "PID", "UID", "NAME",
           "KIND", "WAITS", "POOLS", "BLOCKS", "REQUESTS", "ERRORS", "CONNECTED");
}

/* Prints one client as a table row: the name escaped (fmt_safe) and padded by columns, not bytes. */
void items_client_row(const struct pcore_client_item *c)
{
    char name[FMT_NAME_BUF], up[FMT_BUF];
    printf("%4u %8u %6u  %s %-7s %-5s %5u %7" PRIu64 " %10" PRIu64 " %7" PRIu64 " %9s\n",
           (unsigned) c->id, (unsigned) c->pid, (unsigned) c->uid,
           fmt_column(name, sizeof name, c->name, sizeof c->name, 20),
           c->control_only ? "control" : "worker", c->control_only ? "-" : c->nospin ? "sleep" : "spin",
           (unsigned) c->pools, c->blocks, c->requests, c->errors, fmt_uptime(up, sizeof up, c->connected_ns));
}

/* Writes one client as a JSON object. */
void items_client_json(struct json *j, const struct pcore_client_item *c)
{
    json_object_begin(j, NULL);
    json_u64(j, "id", c->id);
    json_u64(j, "pid", c->pid);
    json_u64(j, "uid", c->uid);
    json_strn(j, "name", c->name, sizeof c->name);
    json_bool(j, "control_only", c->control_only != 0);
    json_bool(j, "waits_spin", !c->control_only && !c->nospin);
    json_u64(j, "pools", c->pools);
    json_u64(j, "blocks", c->blocks);
    json_u64(j, "requests", c->requests);
    json_u64(j, "errors", c->errors);
    json_u64(j, "connected_ns", c->connected_ns);
    json_u64(j, "lookups", c->prefix.lookups);
    json_u64(j, "lookup_tokens", c->prefix.lookup_tokens);
    json_u64(j, "pool_hit_tokens", c->prefix.pool_hit_tokens);
    json_u64(j, "host_hit_tokens", c->prefix.host_hit_tokens);
    json_u64(j, "file_hit_tokens", c->prefix.file_hit_tokens);
    json_u64(j, "reloaded_bytes", c->prefix.reloaded_bytes);
    json_u64(j, "reload_ns", c->prefix.reload_ns);
    json_u64(j, "offloaded_bytes", c->prefix.offloaded_bytes);
    json_end(j);
}

/* Prints the column names of the block table. */
void items_block_heading(void)
{
    printf("%-16s %7s %5s %-10s %-32s %-10s  %s\n", "POOL", "BLOCK", "REFS", "STATE", "HASH",
           "SCOPE", "HOLDERS");
}

/* Formats the prefix scope a block was published in, one word ("uid=1000", "shared", "-");
 * returns buf. */
static const char *block_scope(char *buf, size_t size, const struct pcore_block_item *b)
{
    if (!b->published)
        snprintf(buf, size, "-");
    else if (b->tenant == UINT32_MAX)
        snprintf(buf, size, "shared");
    else
        snprintf(buf, size, "uid=%u", (unsigned) b->tenant);
    return buf;
}

/* Returns the number of holder ids an item actually carries. */
static uint32_t block_holders_shown(const struct pcore_block_item *b)
{
    uint32_t n = b->num_holders;
    return n < 4 ? n : 4;
}

/* Prints one block as a table row: the first holders' ids (gN for a tensor-parallel pool's
 * group N), then how many more there are. */
void items_block_row(const struct pcore_block_item *b, const struct pactl_list *pools)
{
    char pool[PCORE_NAME_MAX], hash[FMT_BUF], holders[96], scope[24];
    const char *name = pactl_pool_name(pools, b->pool_id);
    if (name != NULL)
        fmt_safe(pool, sizeof pool, name, PCORE_NAME_MAX);
    else
        snprintf(pool, sizeof pool, "#%u", (unsigned) b->pool_id);
    if (b->published == PCORE_BLOCK_PUBLISHED)
        fmt_hash(hash, sizeof hash, &b->hash);
    else
        snprintf(hash, sizeof hash, "%s", b->published == PCORE_BLOCK_WITHHELD ? "withheld" : "-");
    size_t off = 0;
    holders[0] = '\0';
    for (uint32_t i = 0; i < block_holders_shown(b); i++) {
        const uint32_t h = b->holders[i];
        const int group = h >= PCORE_GROUP_HOLDER_BASE;
        off += (size_t) snprintf(holders + off, sizeof holders - off, "%s%s%u", i ? "," : "", group ? "g" : "",
                                 (unsigned) (group ? h - PCORE_GROUP_HOLDER_BASE : h));
    }
    if (b->num_holders > 4)
        snprintf(holders + off, sizeof holders - off, " +%u", (unsigned) (b->num_holders - 4));
    else if (b->num_holders == 0)
        snprintf(holders, sizeof holders, "-");
    printf("%-16s %7d %5u %-10s %-32s %-10s  %s\n", pool, (int) b->block, (unsigned) b->refcount,
           b->refcount > 0 ? "referenced" : b->pinned ? "pinned" : "cached", hash,
           block_scope(scope, sizeof scope, b), holders);
}

/* Writes one block as a JSON object. */
void items_block_json(struct json *j, const struct pcore_block_item *b,
                      const struct pactl_list *pools)
{
    char hash[FMT_BUF];
    const char *name = pactl_pool_name(pools, b->pool_id);
    json_object_begin(j, NULL);
    json_u64(j, "pool_id", b->pool_id);
    if (name != NULL)
        json_strn(j, "pool", name, PCORE_NAME_MAX);
    else
        json_null(j, "pool");
    json_i64(j, "block", b->block);
    json_u64(j, "refcount", b->refcount);
    json_str(j, "state", b->refcount > 0 ? "referenced" : b->pinned ? "pinned" : "cached");
    json_bool(j, "pinned", b->pinned != 0);
    if (b->pinned && b->pinner_uid != UINT32_MAX)
        json_u64(j, "pinner_uid", b->pinner_uid);
    else
        json_null(j, "pinner_uid");
    json_bool(j, "published", b->published != 0);
    if (b->published == PCORE_BLOCK_PUBLISHED)
        json_str(j, "hash", fmt_hash(hash, sizeof hash, &b->hash));
    else
        json_null(j, "hash");
    json_bool(j, "hash_withheld", b->published == PCORE_BLOCK_WITHHELD);
    if (b->published && b->tenant != UINT32_MAX)
        json_u64(j, "scope_uid", b->tenant);
    else
        json_null(j, "scope_uid");
    json_u64(j, "num_holders", b->num_holders);
    json_array_begin(j, "holders");
    for (uint32_t i = 0; i < block_holders_shown(b); i++)
        json_u64(j, NULL, b->holders[i]);
    json_end(j);
    json_end(j);
}
