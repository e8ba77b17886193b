/* u64map.h: an open-addressing map from 64-bit keys to 32-bit values, for the block allocator. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_ALLOC_U64MAP_H
#define PAGED_DAEMON_ALLOC_U64MAP_H

#include <stdint.h>

/* The value that marks an empty slot; no stored value may equal it. */
#define PD_MAP_EMPTY UINT32_MAX

/* A slot: key and value, val == PD_MAP_EMPTY when empty. */
typedef struct pd_map_slot {
    uint64_t key;
    uint32_t val;
} pd_map_slot;

/* Linear probing, load at most 1/2 (pd_map_reserve keeps it so), backward-shift deletion. */
typedef struct pd_u64map {
    pd_map_slot *slots;
    uint32_t mask;            /* capacity - 1, capacity a power of two */
    uint32_t count;
} pd_u64map;

/* Allocates an empty map of capacity cap (a power of two); returns 0 or PAGED_E_NOMEM. */
int pd_map_init(pd_u64map *m, uint32_t cap);

/* Makes room for extra more keys, rehashing into a larger table; returns 0 or PAGED_E_NOMEM
 * (and the map as it was). */
int pd_map_reserve(pd_u64map *m, uint32_t extra);

/* Frees the map's table; returns nothing. */
void pd_map_free(pd_u64map *m);

/* Mixes a key (client ids and block ids are far from uniform); returns the mixed bits. */
static inline uint64_t pd_map_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* Returns the slot holding key, or the empty slot where it would go. */
static inline uint32_t pd_map_slot_of(const pd_u64map *m, uint64_t key)
{
    uint32_t i = (uint32_t) pd_map_mix(key) & m->mask;
    /* Bounded: the load stays at most 1/2, so an empty slot always ends the probe. */
    while (m->slots[i].val != PD_MAP_EMPTY && m->slots[i].key != key)
        i = (i + 1) & m->mask;
    return i;
}

/* Returns the value stored under key, or PD_MAP_EMPTY. */
static inline uint32_t pd_map_get(const pd_u64map *m, uint64_t key)
{
    return m->slots[pd_map_slot_of(m, key)].val;
}

/* Stores val under key, which must be absent, in capacity reserved beforehand; returns
 * nothing. */
static inline void pd_map_put(pd_u64map *m, uint64_t key, uint32_t val)
{
    uint32_t i = pd_map_slot_of(m, key);
    m->slots[i].key = key;
    m->slots[i].val = val;
    m->count++;
}

/*
 * Removes key, which must be present; returns nothing. Backward-shift deletion instead of
 * tombstones keeps probe lengths what they would be had the key never been inserted.
 */
static inline void pd_map_del(pd_u64map *m, uint64_t key)
{
    uint32_t hole = pd_map_slot_of(m, key);
    uint32_t j = hole;
    for (;;) {
        j = (j + 1) & m->mask;
        if (m->slots[j].val == PD_MAP_EMPTY)
            break;
        uint32_t home = (uint32_t) pd_map_mix(m->slots[j].key) & m->mask;
        /* Move the entry back if the hole lies between its home and where it sits. */
        if (((j - home) & m->mask) >= ((j - hole) & m->mask)) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole].val = PD_MAP_EMPTY;
    m->count--;
}

#endif
