/* u64map.c: the block allocator's map from 64-bit keys to 32-bit values: making and growing it. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/alloc/u64map.h"

#include <stdlib.h>

#include "daemon/util/heap.h"
#include "paged.h"

/* Allocates an empty map; see u64map.h. */
int pd_map_init(pd_u64map *m, uint32_t cap)
{
    m->slots = pd_malloc((size_t) cap * sizeof *m->slots);
    if (m->slots == NULL)
        return PAGED_E_NOMEM;
    for (uint32_t i = 0; i < cap; i++)
        m->slots[i].val = PD_MAP_EMPTY;
    m->mask = cap - 1;
    m->count = 0;
    return 0;
}

/* Grows the map for extra more keys; see u64map.h. */
int pd_map_reserve(pd_u64map *m, uint32_t extra)
{
    uint64_t want = ((uint64_t) m->count + extra) * 2;
    uint64_t cap = (uint64_t) m->mask + 1;
    if (want <= cap)
        return 0;
    while (cap < want)
        cap *= 2;
    if (cap > ((uint64_t) 1 << 31))
        return PAGED_E_NOMEM;
    pd_u64map bigger;
    if (pd_map_init(&bigger, (uint32_t) cap) < 0)
        return PAGED_E_NOMEM;
    for (uint32_t i = 0; i <= m->mask; i++)
        if (m->slots[i].val != PD_MAP_EMPTY)
            pd_map_put(&bigger, m->slots[i].key, m->slots[i].val);
    free(m->slots);
    *m = bigger;
    return 0;
}

/* Frees the table; see u64map.h. */
void pd_map_free(pd_u64map *m)
{
    free(m->slots);
    m->slots = NULL;
}
