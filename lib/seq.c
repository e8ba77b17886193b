/* seq.c: sequences: block tables and slot mappings kept as tokens are added, fork, copy-on-write, prefix sharing. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "lib/client.h"

/* Returns a new empty sequence linked into pool p, or NULL. */
static paged_seq *seq_new(paged_pool *p, uint64_t salt)
{
    paged_seq *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->pool = p;
    s->salt = salt;
    s->tokens_ok = 1; /* the ids of its zero tokens are known */
    s->next = p->seqs;
    if (p->seqs != NULL)
        p->seqs->prev = s;
    p->seqs = s;
    return s;
}

/* Unlinks and frees a sequence without telling the daemon. */
void pc_seq_free(paged_seq *s)
{
    paged_pool *p = s->pool;
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        p->seqs = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    free(s->blocks);
    free(s->tokens);
    free(s);
}

/* Makes room for nblocks blocks (and their tokens). Returns PAGED_OK or PAGED_E_NOMEM. */
static int seq_reserve(paged_seq *s, uint32_t nblocks)
{
    if (nblocks <= s->cap)
        return PAGED_OK;
    uint32_t cap = s->cap != 0 ? s->cap : 4;
    while (cap < nblocks) {
        if (cap > UINT32_MAX / 2)
            return PAGED_E_NOMEM;
        cap *= 2;
    }
    size_t ntok;
    if (__builtin_mul_overflow((size_t) cap, (size_t) s->pool->info.block_size * sizeof(int32_t), &ntok))
        return PAGED_E_NOMEM;
    int32_t *b = realloc(s->blocks, (size_t) cap * sizeof *b);
    if (b == NULL)
        return PAGED_E_NOMEM;
    s->blocks = b;
    int32_t *t = realloc(s->tokens, ntok);
    if (t == NULL)
        return PAGED_E_NOMEM;
    s->tokens = t;
    s->cap = cap;
    return PAGED_OK;
}

/* Extends the chain hash over blocks [from, to) of the sequence's tokens. */
static void seq_chain(paged_seq *s, uint32_t from, uint32_t to)
{
    uint32_t bs = s->pool->info.block_size;
    for (uint32_t i = from; i < to; i++) {
        paged_hash next;
        paged_hash_blocks(&s->chain, s->tokens + (size_t) i * bs, bs, bs, s->salt, &next);
        s->chain = next;
    }
}

/* Gives back n freshly allocated blocks after a failure, keeping the failure's message. */
static void undo_alloc(paged_seq *s, uint32_t n, const int32_t *ids)
{
    paged_client *c = s->pool->c;
    char saved[PC_ERR_MAX];
    memcpy(saved, c->err, sizeof saved);
    paged_free(s->pool, n, ids);
    memcpy(c->err, saved, sizeof saved);
}

/* Creates an empty sequence in a pool. */
int paged_seq_create(paged_pool *p, uint64_t salt, paged_seq **out)
{
    if (out != NULL)
        *out = NULL;
    if (p == NULL || out == NULL)
        return PAGED_E_INVAL;
    paged_seq *s = seq_new(p, salt);
    if (s == NULL)
        return PAGED_E_NOMEM;
    *out = s;
    return PAGED_OK;
}

/* Frees the sequence's block references and the handle. */
void paged_seq_destroy(paged_seq *s)
{
    if (s == NULL)
        return;
    if (s->nblocks > 0)
        paged_free(s->pool, s->nblocks, s->blocks);
    pc_seq_free(s);
}

/* Returns the number of tokens in the sequence. */
uint32_t paged_seq_len(const paged_seq *s)
{
    return s != NULL ? s->len : 0;
}

/* Returns the block table and its length. */
const int32_t *paged_seq_blocks(const paged_seq *s, uint32_t *num_blocks)
{
    if (num_blocks != NULL)
        *num_blocks = s != NULL ? s->nblocks : 0;
    return s != NULL ? s->blocks : NULL;
}

/* Replaces the shared partial last block by a private copy (ALLOCed as fresh), then drops
 * the old reference. Returns PAGED_OK or an error with the table unchanged. */
static int seq_cow(paged_seq *s, int32_t fresh)
{
    int32_t old = s->blocks[s->nblocks - 1];
    int rc = paged_copy(s->pool, 1, &old, &fresh);
    if (rc == PAGED_OK)
        rc = paged_free(s->pool, 1, &old);
    if (rc < 0)
        return rc;
    s->blocks[s->nblocks - 1] = fresh;
    s->last_shared = 0;
    return PAGED_OK;
}

/* Adds n tokens, allocating and copying blocks as needed; see paged.h. */
int paged_seq_extend(paged_seq *s, uint32_t n, const int32_t *tokens, int32_t *slots)
{
    if (s == NULL || (n > 0 && slots == NULL))
        return PAGED_E_INVAL;
    if (n == 0)
        return PAGED_OK;
    paged_client *c = s->pool->c;
    uint32_t bs = s->pool->info.block_size;
    uint64_t total = (uint64_t) s->len + n;
    if (total > INT32_MAX) {
        pc_set_err(c, "extend: a sequence holds at most 2^31-1 tokens");
        return PAGED_E_INVAL;
    }
    uint32_t want = (uint32_t) ((total + bs - 1) / bs);
    uint32_t need = want - s->nblocks;
    int cow = s->len % bs != 0 && s->last_shared;
    int rc = seq_reserve(s, want);
    if (rc < 0)
        return rc;
    uint32_t nalloc = need + (uint32_t) cow;
    int32_t *ids = NULL;
    if (nalloc > 0) {
        ids = malloc((size_t) nalloc * sizeof *ids);
        if (ids == NULL)
            return PAGED_E_NOMEM;
        rc = paged_alloc(s->pool, nalloc, ids);
        if (rc < 0) {
            free(ids);
            return rc;
        }
    }
    if (cow) {
        /* Copy-on-write: the last block is shared with a fork, and writing into it in place
         * would change the other sequence's tokens too. */
        rc = seq_cow(s, ids[0]);
        if (rc < 0) {
            undo_alloc(s, nalloc, ids);
            free(ids);
            return rc;
        }
    }
    if (need > 0)
        memcpy(s->blocks + s->nblocks, ids + cow, (size_t) need * sizeof *ids);
    free(ids);
    s->nblocks = want;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t pos = (uint64_t) s->len + i;
        slots[i] = (int32_t) ((int64_t) s->blocks[pos / bs] * bs + (int64_t) (pos % bs));
    }
    if (tokens == NULL)
        s->tokens_ok = 0;
    else if (s->tokens_ok)
        memcpy(s->tokens + s->len, tokens, (size_t) n * sizeof *tokens);
    s->len = (uint32_t) total;
    return PAGED_OK;
}

/* Starts an empty sequence with the longest cached prefix of tokens; see paged.h. */
long paged_seq_adopt_prefix(paged_seq *s, const int32_t *tokens, uint32_t n)
{
    if (s == NULL || (n > 0 && tokens == NULL))
        return PAGED_E_INVAL;
    paged_client *c = s->pool->c;
    if (s->len != 0 || s->nblocks != 0) {
        pc_set_err(c, "adopt_prefix: the sequence is not empty");
        return PAGED_E_INVAL;
    }
    uint32_t bs = s->pool->info.block_size;
    uint32_t nb = n / bs;
    if (nb == 0)
        return 0;
    int rc = seq_reserve(s, nb);
    if (rc < 0)
        return rc;
    paged_hash zero = { 0, 0 };
    rc = paged_lookup(s->pool, &zero, s->salt, nb, tokens, s->blocks);
    if (rc < 0)
        return rc;
    uint32_t found = (uint32_t) rc;
    s->nblocks = found;
    s->len = found * bs;
    memcpy(s->tokens, tokens, (size_t) s->len * sizeof *tokens);
    s->tokens_ok = 1;
    /* Found blocks are published (someone else's), so full and immutable. */
    s->chain = zero;
    seq_chain(s, 0, found);
    s->published = found;
    s->last_shared = 0;
    return (long) s->len;
}

/* Publishes the full blocks not yet published; returns how many the daemon newly entered. */
int paged_seq_publish(paged_seq *s)
{
    if (s == NULL)
        return PAGED_E_INVAL;
    uint32_t bs = s->pool->info.block_size;
    uint32_t full = s->len / bs;
    if (full <= s->published)
        return 0;
    if (!s->tokens_ok) {
        pc_set_err(s->pool->c, "publish: the sequence's token ids are unknown "
                   "(extended with NULL tokens)");
        return PAGED_E_INVAL;
    }
    uint32_t count = full - s->published;
    int rc = paged_publish(s->pool, &s->chain, s->salt, count,
                           s->tokens + (size_t) s->published * bs, s->blocks + s->published);
    if (rc < 0)
        return rc;
    /* Blocks already cached under the same hash stay ours and unpublished, but they are
     * full, so never written again: the chain simply continues. */
    seq_chain(s, s->published, full);
    s->published = full;
    return rc;
}

/* Creates a sequence sharing every block of s. */
int paged_seq_fork(paged_seq *s, paged_seq **out)
{
    if (out != NULL)
        *out = NULL;
    if (s == NULL || out == NULL)
        return PAGED_E_INVAL;
    paged_seq *t = seq_new(s->pool, s->salt);
    if (t == NULL)
        return PAGED_E_NOMEM;
    int rc = seq_reserve(t, s->nblocks);
    if (rc == PAGED_OK && s->nblocks > 0)
        rc = paged_fork(s->pool, s->nblocks, s->blocks);
    if (rc < 0) {
        pc_seq_free(t);
        return rc;
    }
    if (s->nblocks > 0)
        memcpy(t->blocks, s->blocks, (size_t) s->nblocks * sizeof *t->blocks);
    if (s->tokens_ok && s->len > 0)
        memcpy(t->tokens, s->tokens, (size_t) s->len * sizeof *t->tokens);
    t->len = s->len;
    t->nblocks = s->nblocks;
    t->tokens_ok = s->tokens_ok;
    t->published = s->published;
    t->chain = s->chain;
    if (s->len % s->pool->info.block_size != 0) {
        /* Both now reference the partial last block: the next write to either copies it. */
        s->last_shared = 1;
        t->last_shared = 1;
    }
    *out = t;
    return PAGED_OK;
}
