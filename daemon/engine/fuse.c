/* fuse.c: whether a batch's APPEND launch can ride in its DECODE launch's kernel (fuse.h). */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/engine/fuse.h"
#include "daemon/util/heap.h"
#include "daemon/engine/validate.h"

/* Returns the slot of sequence j's last position in DECODE op d (its validated table row). */
static int32_t last_slot(const struct pv_op *d, const pk_cache *c, uint32_t j)
{
    int32_t pos = d->seq_lens[j] - 1;
    return d->block_tables[(size_t) j * d->bt_stride + (size_t) (pos / c->block_size)] * c->block_size
           + pos % c->block_size;
}

/* Returns whether APPEND a writes exactly the newest tokens of DECODE d, d being later in
 * the same client's ring. */
static int appends_for(const struct pd_batch_op *a, const struct pd_batch_op *d)
{
    const struct pv_op *ao = a->op, *dop = d->op;
    if (ao->opcode != PAGED_OP_APPEND || a->client != d->client || a->user >= d->user || a->cache != d->cache
        || ao->num_layers != 1 || ao->layer_begin != dop->layer_begin || ao->num_tokens != dop->count
        || ao->count != ao->num_tokens || ao->dtype != dop->dtype || a->arenas.data != d->arenas.data)
        return 0;
    for (uint32_t j = 0; j < dop->count; j++)
        if (ao->slots[j] != last_slot(dop, d->cache, j))
            return 0;
    return 1;
}

/* Makes *marks hold n zero bytes; returns 0 or -1. */
static int marks_reserve(uint8_t **marks, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 0;
    uint8_t *p = pd_calloc(n, 1);
    if (p == NULL)
        return -1;
    free(*marks);
    *marks = p;
    *cap = n;
    return 0;
}

/*
 * Checks that each block receiving a token of the DECODE launch's ops [first, first + n) is
 * named once only across the launch's used table entries (its own row's last one). Leaves
 * marks zero. Returns 1 when so, 0 when not.
 */
static int tokens_unaliased(const struct pd_batch *batch, uint32_t first, uint32_t n, uint8_t *marks)
{
    const pk_cache *c = batch->ops[first].cache;
    int ok = 1;
    for (uint32_t i = first; i < first + n && ok; i++)
        for (uint32_t j = 0; j < batch->ops[i].op->count; j++) {
            int32_t b = last_slot(batch->ops[i].op, c, j) / c->block_size;
            if (marks[b] != 0)
                ok = 0;                 /* two sequences' newest tokens in one block */
            marks[b] = 1;
        }
    for (uint32_t i = first; i < first + n && ok; i++) {
        const struct pv_op *d = batch->ops[i].op;
        for (uint32_t j = 0; j < d->count; j++) {
            uint32_t used = (uint32_t) ((d->seq_lens[j] + c->block_size - 1) / c->block_size);
            const int32_t *row = d->block_tables + (size_t) j * d->bt_stride;
            for (uint32_t e = 0; e < used; e++)
                if (marks[row[e]] != 0 && marks[row[e]]++ > 1)
                    ok = 0;             /* named twice */
        }
    }
    for (uint32_t i = first; i < first + n; i++)
        for (uint32_t j = 0; j < batch->ops[i].op->count; j++)
            marks[last_slot(batch->ops[i].op, c, j) / c->block_size] = 0;
    return ok;
}

/* Returns whether the single DECODE d (of cache c) is the one sc scanned last: same shape,
 * lengths and tables. */
static int seen_before(const struct pf_scratch *sc, const struct pv_op *d, const pk_cache *c)
{
    size_t lens = d->count, cells = (size_t) d->count * d->bt_stride;
    return sc->seen_len == 4 + lens + cells && sc->seen[0] == (int32_t) d->count
           && sc->seen[1] == (int32_t) d->bt_stride && sc->seen[2] == c->block_size
           && sc->seen[3] == c->num_blocks && memcmp(sc->seen + 4, d->seq_lens, lens * 4) == 0
           && memcmp(sc->seen + 4 + lens, d->block_tables, cells * 4) == 0;
}

/* Remembers the single DECODE d (of cache c) and its answer in sc (forgets, when out of
 * memory). Returns nothing. */
static void remember(struct pf_scratch *sc, const struct pv_op *d, const pk_cache *c, int unaliased)
{
    size_t lens = d->count, cells = (size_t) d->count * d->bt_stride, n = 4 + lens + cells;
    sc->seen_len = 0;
    if (n > sc->seen_cap) {
        int32_t *p = pd_realloc(sc->seen, n * sizeof *p);
        if (p == NULL)
            return;
        sc->seen = p;
        sc->seen_cap = n;
    }
    sc->seen[0] = (int32_t) d->count;
    sc->seen[1] = (int32_t) d->bt_stride;
    sc->seen[2] = c->block_size;
    sc->seen[3] = c->num_blocks;
    memcpy(sc->seen + 4, d->seq_lens, lens * 4);
    memcpy(sc->seen + 4 + lens, d->block_tables, cells * 4);
    sc->seen_len = n;
    sc->seen_unaliased = unaliased;
}

/* Frees the scratch; see fuse.h. */
void pf_scratch_free(struct pf_scratch *sc)
{
    free(sc->marks);
    free(sc->seen);
    memset(sc, 0, sizeof *sc);
}

/* Decides whether the batch's APPEND launch rides in its DECODE launch; see fuse.h. */
int pf_plan(const struct pd_batch *batch, uint32_t *partner, struct pf_scratch *sc, struct pf_fusion *out)
{
    if (batch->nlaunches != 2)
        return 0;
    const struct pd_launch *la = &batch->launches[0], *ld = &batch->launches[1];
    if (la->count != ld->count || batch->ops[la->first].op->opcode != PAGED_OP_APPEND
        || batch->ops[ld->first].op->opcode != PAGED_OP_DECODE)
        return 0;
    const pk_cache *c = batch->ops[ld->first].cache;
    if (c->dtype == PAGED_DTYPE_F32)
        return 0;
    for (uint32_t i = ld->first; i < ld->first + ld->count; i++) {
        const struct pd_batch_op *d = &batch->ops[i];
        if (d->op->opcode != PAGED_OP_DECODE || d->op->count == 0 || d->arenas.data == NULL
            || (d->op->dtype != PAGED_DTYPE_F16 && d->op->dtype != PAGED_DTYPE_BF16))
            return 0;
        /* Both launches keep the order the engine took the requests in, client by client and
         * in ring order, so the k-th DECODE's APPEND is the k-th APPEND. */
        uint32_t k = la->first + (i - ld->first);
        if (!appends_for(&batch->ops[k], d))
            return 0;
        partner[i] = k;
    }
    const struct pv_op *only = ld->count == 1 ? batch->ops[ld->first].op : NULL;
    int unaliased;
    if (only != NULL && seen_before(sc, only, c)) {
        unaliased = sc->seen_unaliased;
    } else {
        if (marks_reserve(&sc->marks, &sc->marks_cap, (size_t) c->num_blocks) < 0)
            return 0;
        unaliased = tokens_unaliased(batch, ld->first, ld->count, sc->marks);
        if (only != NULL)
            remember(sc, only, c, unaliased);
    }
    if (!unaliased)
        return 0;
    out->append = 0;
    out->decode = 1;
    out->partner = partner;
    return 1;
}
