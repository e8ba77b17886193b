/* host.c: the host tier's index of one pool: slots, their (tenant, hash) index, LRU. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/tier/host.h"

#include <stdlib.h>

#include "daemon/tier/keymap.h"
#include "daemon/util/heap.h"

#define NIL (-1)

enum slot_state { S_FREE, S_STORED, S_TAKEN };

/* One slot: its key (stored or taken), its stamp (stored), its links (the free list through
 * next; the LRU list through prev and next). */
typedef struct host_slot {
    paged_hash hash;
    uint64_t stamp;
    uint32_t tenant;
    int32_t prev, next;
    uint8_t state;
} host_slot;

struct pt_host {
    host_slot *slots;
    pt_keymap index;           /* (tenant, hash) -> stored slot */
    uint32_t capacity;
    uint32_t nfree, nstored, ntaken;
    int32_t free_head;         /* singly linked through next */
    int32_t lru_head, lru_tail; /* head: the least recently stored */
};

/* Returns whether slot is an index into h's slots. */
static int in_range(const pt_host *h, int32_t slot)
{
    return slot >= 0 && (uint32_t) slot < h->capacity;
}

/* Pushes slot on the free list; returns nothing. */
static void push_free(pt_host *h, int32_t slot)
{
    h->slots[slot].state = S_FREE;
    h->slots[slot].prev = NIL;
    h->slots[slot].next = h->free_head;
    h->free_head = slot;
    h->nfree++;
}

/* Pops a slot off the free list (which must not be empty); returns it. */
static int32_t pop_free(pt_host *h)
{
    int32_t slot = h->free_head;
    h->free_head = h->slots[slot].next;
    h->nfree--;
    return slot;
}

/* Appends slot at the most recent end of the LRU list; returns nothing. */
static void lru_append(pt_host *h, int32_t slot)
{
    host_slot *s = &h->slots[slot];
    s->prev = h->lru_tail;
    s->next = NIL;
    if (h->lru_tail != NIL)
        h->slots[h->lru_tail].next = slot;
    else
        h->lru_head = slot;
    h->lru_tail = slot;
}

/* Unlinks slot from the LRU list; returns nothing. */
static void lru_unlink(pt_host *h, int32_t slot)
{
    host_slot *s = &h->slots[slot];
    if (s->prev != NIL)
        h->slots[s->prev].next = s->next;
    else
        h->lru_head = s->next;
    if (s->next != NIL)
        h->slots[s->next].prev = s->prev;
    else
        h->lru_tail = s->prev;
    s->prev = s->next = NIL;
}

/* Makes a slot that holds its key stored: in the index, most recent, stamped now; returns
 * nothing. */
static void store(pt_host *h, int32_t slot, uint64_t now)
{
    host_slot *s = &h->slots[slot];
    pt_keymap_put(&h->index, s->tenant, &s->hash, (uint32_t) slot);
    s->state = S_STORED;
    s->stamp = now;
    lru_append(h, slot);
    h->nstored++;
}

/* Takes a stored slot out of the index and the LRU list, its state left to the caller;
 * returns nothing. */
static void unstore(pt_host *h, int32_t slot)
{
    host_slot *s = &h->slots[slot];
    pt_keymap_del(&h->index, s->tenant, &s->hash);
    lru_unlink(h, slot);
    h->nstored--;
}

/* Drops the least recently stored unit, out hearing of it first, its slot to the free list;
 * returns nothing. */
static void drop_oldest(pt_host *h, pt_host_out_fn *out, void *ctx)
{
    int32_t slot = h->lru_head;
    if (out != NULL)
        out(ctx, slot, h->slots[slot].tenant, &h->slots[slot].hash);
    unstore(h, slot);
    push_free(h, slot);
}

/* Makes an index of capacity free slots; see host.h. */
pt_host *pt_host_create(uint32_t capacity)
{
    if (capacity > (uint32_t) INT32_MAX)
        return NULL;
    pt_host *h = pd_calloc(1, sizeof *h);
    if (h == NULL)
        return NULL;
    h->slots = pd_calloc(capacity == 0 ? 1 : capacity, sizeof *h->slots);
    if (h->slots == NULL || pt_keymap_init(&h->index, capacity) < 0) {
        free(h->slots);
        free(h);
        return NULL;
    }
    h->capacity = capacity;
    h->free_head = h->lru_head = h->lru_tail = NIL;
    for (uint32_t i = capacity; i > 0; i--)
        push_free(h, (int32_t) (i - 1));
    return h;
}

/* Frees h; see host.h. */
void pt_host_destroy(pt_host *h)
{
    if (h == NULL)
        return;
    pt_keymap_free(&h->index);
    free(h->slots);
    free(h);
}

/* Looks (tenant, hash) up; see host.h. */
int32_t pt_host_find(const pt_host *h, uint32_t tenant, const paged_hash *hash)
{
    uint32_t slot = pt_keymap_get(&h->index, tenant, hash);
    return slot == PT_KEYMAP_EMPTY ? NIL : (int32_t) slot;
}

/* Stores (tenant, hash), pushing the oldest out when no slot is free; see host.h. */
int32_t pt_host_put(pt_host *h, uint32_t tenant, const paged_hash *hash, uint64_t now, int *fresh,
                    pt_host_out_fn *out, void *ctx)
{
    if (fresh != NULL)
        *fresh = 0;
    int32_t slot = pt_host_find(h, tenant, hash);
    if (slot != NIL) {
        lru_unlink(h, slot);
        lru_append(h, slot);
        h->slots[slot].stamp = now;
        return slot;
    }
    if (h->free_head == NIL) {
        if (h->lru_head == NIL)
            return NIL;
        drop_oldest(h, out, ctx);
    }
    slot = pop_free(h);
    h->slots[slot].tenant = tenant;
    h->slots[slot].hash = *hash;
    store(h, slot, now);
    if (fresh != NULL)
        *fresh = 1;
    return slot;
}

/* Takes a stored slot for a reload; see host.h. */
int pt_host_take(pt_host *h, int32_t slot)
{
    if (!in_range(h, slot) || h->slots[slot].state != S_STORED)
        return PAGED_E_INVAL;
    unstore(h, slot);
    h->slots[slot].state = S_TAKEN;
    h->ntaken++;
    return 0;
}

/* Puts a taken slot back, or frees it when its key was stored again; see host.h. */
int pt_host_restore(pt_host *h, int32_t slot, uint64_t now)
{
    if (!in_range(h, slot) || h->slots[slot].state != S_TAKEN)
        return PAGED_E_INVAL;
    h->ntaken--;
    const host_slot *s = &h->slots[slot];
    if (pt_host_find(h, s->tenant, &s->hash) != NIL)
        push_free(h, slot);
    else
        store(h, slot, now);
    return 0;
}

/* Frees a taken slot; see host.h. */
int pt_host_release(pt_host *h, int32_t slot)
{
    if (!in_range(h, slot) || h->slots[slot].state != S_TAKEN)
        return PAGED_E_INVAL;
    h->ntaken--;
    push_free(h, slot);
    return 0;
}

/* Drops (tenant, hash) without telling out; see host.h. */
int pt_host_remove(pt_host *h, uint32_t tenant, const paged_hash *hash)
{
    int32_t slot = pt_host_find(h, tenant, hash);
    if (slot == NIL)
        return 0;
    unstore(h, slot);
    push_free(h, slot);
    return 1;
}

/* Returns whether a unit stamped stamp has lived ttl_ns or more at now (ttl_ns 0: never). */
static int expired(uint64_t stamp, uint64_t now, uint64_t ttl_ns)
{
    return ttl_ns != 0 && now >= stamp && now - stamp >= ttl_ns;
}

/* Drops the units that outlived ttl_ns, oldest first; see host.h. */
uint32_t pt_host_expire(pt_host *h, uint64_t now, uint64_t ttl_ns, pt_host_out_fn *out, void *ctx)
{
    uint32_t dropped = 0;
    while (h->lru_head != NIL && expired(h->slots[h->lru_head].stamp, now, ttl_ns)) {
        drop_oldest(h, out, ctx);
        dropped++;
    }
    return dropped;
}

/* Returns when the oldest unit expires; see host.h. */
uint64_t pt_host_next_expiry(const pt_host *h, uint64_t ttl_ns)
{
    if (ttl_ns == 0 || h->lru_head == NIL)
        return UINT64_MAX;
    uint64_t stamp = h->slots[h->lru_head].stamp;
    return stamp > UINT64_MAX - ttl_ns ? UINT64_MAX : stamp + ttl_ns;
}

/* Drops every stored unit, oldest first; see host.h. */
uint32_t pt_host_drop_all(pt_host *h, pt_host_out_fn *out, void *ctx)
{
    uint32_t dropped = 0;
    while (h->lru_head != NIL) {
        drop_oldest(h, out, ctx);
        dropped++;
    }
    return dropped;
}

/* Lists the stored slots, the most recently stored first; see host.h. */
uint32_t pt_host_recent_first(const pt_host *h, int32_t *slots)
{
    uint32_t n = 0;
    for (int32_t s = h->lru_tail; s != NIL; s = h->slots[s].prev)
        slots[n++] = s;
    return n;
}

/* Reports the key of a stored or taken slot; see host.h. */
int pt_host_slot_key(const pt_host *h, int32_t slot, uint32_t *tenant, paged_hash *hash)
{
    if (!in_range(h, slot) || h->slots[slot].state == S_FREE)
        return PAGED_E_INVAL;
    *tenant = h->slots[slot].tenant;
    *hash = h->slots[slot].hash;
    return 0;
}

/* Fills *out with the counts; see host.h. */
void pt_host_get_counts(const pt_host *h, pt_host_counts *out)
{
    out->capacity = h->capacity;
    out->free = h->nfree;
    out->stored = h->nstored;
    out->taken = h->ntaken;
}

/* Walks the free list, checking states and length against nfree; returns NULL or the
 * problem. */
static const char *check_free_list(const pt_host *h)
{
    uint32_t n = 0;
    for (int32_t s = h->free_head; s != NIL; s = h->slots[s].next) {
        if (!in_range(h, s))
            return "free list: a link out of range";
        if (h->slots[s].state != S_FREE)
            return "free list: a slot that is not free";
        if (++n > h->nfree)
            return "free list: longer than the free count (or a cycle)";
    }
    return n == h->nfree ? NULL : "free list: shorter than the free count";
}

/* Walks the LRU list, checking links, states, stamps and the index against nstored;
 * returns NULL or the problem. */
static const char *check_lru_list(const pt_host *h)
{
    uint32_t n = 0;
    int32_t prev = NIL;
    for (int32_t s = h->lru_head; s != NIL; prev = s, s = h->slots[s].next) {
        if (!in_range(h, s))
            return "LRU list: a link out of range";
        const host_slot *hs = &h->slots[s];
        if (hs->state != S_STORED)
            return "LRU list: a slot that is not stored";
        if (hs->prev != prev)
            return "LRU list: a back link that does not match";
        if (prev != NIL && h->slots[prev].stamp > hs->stamp)
            return "LRU list: stamps not in order, oldest first";
        if (pt_keymap_get(&h->index, hs->tenant, &hs->hash) != (uint32_t) s)
            return "LRU list: a stored slot the index does not lead to";
        if (++n > h->nstored)
            return "LRU list: longer than the stored count (or a cycle)";
    }
    if (h->lru_tail != prev)
        return "LRU list: the tail is not its last slot";
    return n == h->nstored ? NULL : "LRU list: shorter than the stored count";
}

/* Counts the slots in each state, the index's entries and where they lead; returns NULL or
 * the problem. */
static const char *check_states(const pt_host *h)
{
    uint32_t count[3] = { 0, 0, 0 };
    for (uint32_t i = 0; i < h->capacity; i++) {
        if (h->slots[i].state > S_TAKEN)
            return "a slot in no known state";
        count[h->slots[i].state]++;
    }
    if (count[S_FREE] != h->nfree || count[S_STORED] != h->nstored || count[S_TAKEN] != h->ntaken)
        return "the counts do not match the slots' states";
    if (h->nfree + h->nstored + h->ntaken != h->capacity)
        return "free + stored + taken != capacity";
    if (h->index.count != h->nstored)
        return "the index's count is not the stored count";
    uint32_t entries = 0;
    for (uint64_t i = 0; i <= h->index.mask; i++) {
        const pt_keymap_entry *e = &h->index.entries[i];
        if (e->val == PT_KEYMAP_EMPTY)
            continue;
        entries++;
        if (e->val >= h->capacity || h->slots[e->val].state != S_STORED)
            return "the index leads to a slot that is not stored";
        const host_slot *s = &h->slots[e->val];
        if (s->tenant != e->tenant || s->hash.lo != e->hash.lo || s->hash.hi != e->hash.hi)
            return "the index leads to a slot of another key";
    }
    return entries == h->index.count ? NULL : "the index's entries do not match its count";
}

/* Cross-checks the slots, lists, index and counts; see host.h. */
const char *pt_host_check(const pt_host *h)
{
    const char *problem = check_states(h);
    if (problem == NULL)
        problem = check_free_list(h);
    if (problem == NULL)
        problem = check_lru_list(h);
    return problem;
}
