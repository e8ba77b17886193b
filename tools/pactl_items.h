/* pactl_items.h: how pactl shows pools, clients and blocks, as table rows and as JSON objects. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_PACTL_ITEMS_H
#define PAGED_TOOLS_PACTL_ITEMS_H

#include "lib/core/proto.h"
#include "tools/pactl_fetch.h"
#include "tools/pactl_json.h"

/* Returns how a pool's prefix cache is scoped: "shared" (PAGED_POOL_SHARED_PREFIXES in its
 * mode) or "per-uid". */
const char *items_pool_prefixes(const struct pcore_pool_item *p);
/* Returns whether a pool's memory reaches its clients: "sealed" (PAGED_POOL_SEALED in its mode)
 * or "exported" (PAGED_POOL_EXPORTED, or neither bit, as an older daemon reports). */
const char *items_pool_memory(const struct pcore_pool_item *p);
/* Returns a pool's shards: 1 when it is not tensor-parallel (or the daemon is older than
 * sharded pools and reports 0). */
uint32_t items_pool_shards(const struct pcore_pool_item *p);
/* Returns the device of shard r of pool p on a daemon of ndevices devices (STATUS's devices; 0,
 * from a daemon older than several devices, reads as 1): the pool's device plus r, modulo
 * ndevices. */
uint32_t items_pool_shard_device(const struct pcore_pool_item *p, uint32_t r, uint32_t ndevices);
/* Writes the devices of pool p's shards, in shard order and separated by commas ("1", "0,1"),
 * into buf; returns buf. */
char *items_pool_devices(char *buf, size_t size, const struct pcore_pool_item *p, uint32_t ndevices);
/* Table heading and row of a pool; ndevices as items_pool_shard_device takes it. */
void items_pool_heading(void);
void items_pool_row(const struct pcore_pool_item *p, uint32_t ndevices);
/* A pool as a JSON object (a member named key, or NULL in an array). */
void items_pool_json(struct json *j, const char *key, const struct pcore_pool_item *p, uint32_t ndevices);

/* Table heading and row of a client. */
void items_client_heading(void);
void items_client_row(const struct pcore_client_item *c);
void items_client_json(struct json *j, const struct pcore_client_item *c);

/* Table heading and row of a block; pools names the pool ids (it may be empty). */
void items_block_heading(void);
void items_block_row(const struct pcore_block_item *b, const struct pactl_list *pools);
void items_block_json(struct json *j, const struct pcore_block_item *b,
                      const struct pactl_list *pools);

#endif
