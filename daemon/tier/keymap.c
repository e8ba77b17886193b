/* keymap.c: the tiers' map from (tenant, hash) keys to 32-bit values. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/tier/keymap.h"

#include <stdlib.h>

#include "daemon/alloc/u64map.h"
#include "daemon/util/heap.h"

/* Returns the table index a key starts its probe at. */
static uint32_t home_of(const pt_keymap *m, uint32_t tenant, const paged_hash *hash)
{
    return (uint32_t) pd_map_mix(hash->lo ^ pd_map_mix(hash->hi ^ tenant)) & m->mask;
}

/* Returns whether entry e holds (tenant, hash). */
static int entry_is(const pt_keymap_entry *e, uint32_t tenant, const paged_hash *hash)
{
    return e->tenant == tenant && e->hash.lo == hash->lo && e->hash.hi == hash->hi;
}

/* Returns the index of the entry holding (tenant, hash), or of the empty one where it would
 * go. */
static uint32_t index_of(const pt_keymap *m, uint32_t tenant, const paged_hash *hash)
{
    uint32_t i = home_of(m, tenant, hash);
    while (m->entries[i].val != PT_KEYMAP_EMPTY && !entry_is(&m->entries[i], tenant, hash))
        i = (i + 1) & m->mask;
    return i;
}

/* Allocates an empty table of size entries (a power of two); returns 0 or PAGED_E_NOMEM. */
static int alloc_table(pt_keymap *m, uint64_t size)
{
    m->entries = pd_malloc((size_t) size * sizeof *m->entries);
    if (m->entries == NULL)
        return PAGED_E_NOMEM;
    for (uint64_t i = 0; i < size; i++)
        m->entries[i].val = PT_KEYMAP_EMPTY;
    m->mask = (uint32_t) (size - 1);
    m->count = 0;
    return 0;
}

/* Returns the table size (a power of two, at least 2) that keeps keys keys at load 1/2, or
 * 0 when that exceeds 2^31. */
static uint64_t size_for(uint64_t keys)
{
    uint64_t size = 2;
    while (size < keys * 2)
        size *= 2;
    return size > ((uint64_t) 1 << 31) ? 0 : size;
}

/* Makes an empty map; see keymap.h. */
int pt_keymap_init(pt_keymap *m, uint32_t keys)
{
    uint64_t size = size_for(keys);
    if (size == 0)
        return PAGED_E_NOMEM;
    return alloc_table(m, size);
}

/* Frees the table; see keymap.h. */
void pt_keymap_free(pt_keymap *m)
{
    free(m->entries);
    m->entries = NULL;
    m->count = 0;
}

/* Grows the table for extra more keys; see keymap.h. */
int pt_keymap_reserve(pt_keymap *m, uint32_t extra)
{
    uint64_t want = (uint64_t) m->count + extra;
    if (want * 2 <= (uint64_t) m->mask + 1)
        return 0;
    uint64_t size = size_for(want);
    if (size == 0)
        return PAGED_E_NOMEM;
    pt_keymap bigger;
    if (alloc_table(&bigger, size) < 0)
        return PAGED_E_NOMEM;
    for (uint64_t i = 0; i <= m->mask; i++) {
        const pt_keymap_entry *e = &m->entries[i];
        if (e->val != PT_KEYMAP_EMPTY)
            pt_keymap_put(&bigger, e->tenant, &e->hash, e->val);
    }
    free(m->entries);
    *m = bigger;
    return 0;
}

/* Looks a key up; see keymap.h. */
uint32_t pt_keymap_get(const pt_keymap *m, uint32_t tenant, const paged_hash *hash)
{
    return m->entries[index_of(m, tenant, hash)].val;
}

/* Stores a key that is absent; see keymap.h. */
void pt_keymap_put(pt_keymap *m, uint32_t tenant, const paged_hash *hash, uint32_t val)
{
    pt_keymap_entry *e = &m->entries[index_of(m, tenant, hash)];
    e->tenant = tenant;
    e->hash = *hash;
    e->val = val;
    m->count++;
}

/* Removes a key that is present; backward-shift deletion keeps every probe as short as if
 * the key had never been stored. See keymap.h. */
void pt_keymap_del(pt_keymap *m, uint32_t tenant, const paged_hash *hash)
{
    uint32_t hole = index_of(m, tenant, hash);
    uint32_t j = hole;
    for (;;) {
        j = (j + 1) & m->mask;
        const pt_keymap_entry *e = &m->entries[j];
        if (e->val == PT_KEYMAP_EMPTY)
            break;
        uint32_t home = home_of(m, e->tenant, &e->hash);
        /* Move the entry back if the hole lies between its home and where it sits. */
        if (((j - home) & m->mask) >= ((j - hole) & m->mask)) {
            m->entries[hole] = *e;
            hole = j;
        }
    }
    m->entries[hole].val = PT_KEYMAP_EMPTY;
    m->count--;
}
