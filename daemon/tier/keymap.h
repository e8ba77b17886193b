/* keymap.h: an open-addressing map from (tenant, hash) keys to 32-bit values, for the tiers. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_TIER_KEYMAP_H
#define PAGED_DAEMON_TIER_KEYMAP_H

#include <stdint.h>

#include "paged.h"

/* The value that marks an empty entry; no stored value may equal it. */
#define PT_KEYMAP_EMPTY UINT32_MAX

/* An entry: the key and its value, val == PT_KEYMAP_EMPTY when empty. */
typedef struct pt_keymap_entry {
    paged_hash hash;
    uint32_t tenant;
    uint32_t val;
} pt_keymap_entry;

/* Linear probing, load at most 1/2 (pt_keymap_reserve keeps it so), backward-shift
 * deletion, so an empty entry always ends a probe. */
typedef struct pt_keymap {
    pt_keymap_entry *entries;
    uint32_t mask;             /* table size - 1, the size a power of two */
    uint32_t count;
} pt_keymap;

/* Makes an empty map with room for keys keys; returns 0 or PAGED_E_NOMEM. */
int pt_keymap_init(pt_keymap *m, uint32_t keys);
/* Frees the map's table; returns nothing. */
void pt_keymap_free(pt_keymap *m);
/* Makes room for extra more keys, rehashing into a larger table; returns 0 or
 * PAGED_E_NOMEM (and the map as it was). */
int pt_keymap_reserve(pt_keymap *m, uint32_t extra);

/* Returns the value stored under (tenant, hash), or PT_KEYMAP_EMPTY. */
uint32_t pt_keymap_get(const pt_keymap *m, uint32_t tenant, const paged_hash *hash);
/* Stores val under (tenant, hash), which must be absent, in room reserved beforehand;
 * returns nothing. */
void pt_keymap_put(pt_keymap *m, uint32_t tenant, const paged_hash *hash, uint32_t val);
/* Removes (tenant, hash), which must be present; returns nothing. */
void pt_keymap_del(pt_keymap *m, uint32_t tenant, const paged_hash *hash);

#endif
