/* seq-t.c: sequences against a real pagedd: slots and block tables, fork with copy-on-write, prefix sharing. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "paged.h"
#include "tests/client/daemon_harness.h"
#include "tests/tap/basic.h"

#define PL 2u
#define PH 2u
#define PD 64u
#define PB 16u
#define PN 64u

static tap_rng rng;
static const float *pool_mem; /* the pool, mapped */

/* Returns the floats of (layer, kv, block): H x B x D of them. */
static const float *block_at(uint32_t layer, uint32_t kv, int32_t block)
{
    return pool_mem + (((size_t) layer * 2 + kv) * PN + (size_t) block) * PH * PB * PD;
}

/* Returns the floats of token offset off of (layer, kv, block, head). */
static const float *token_at(uint32_t layer, uint32_t kv, int32_t block, uint32_t head, uint32_t off)
{
    return block_at(layer, kv, block) + ((size_t) head * PB + off) * PD;
}

/* Appends random K and V for the n slots (all layers); stores them in k and v
 * ([L][n][H][D]) for the caller to compare. Returns the APPEND's status. */
static int append_random(paged_pool *p, uint32_t n, const int32_t *slots, float *k, float *v)
{
    size_t count = (size_t) PL * n * PH * PD;
    harness_fill(&rng, k, count);
    harness_fill(&rng, v, count);
    return paged_append(p, PAGED_ALL_LAYERS, n, PAGED_DTYPE_F32, k, v, slots);
}

/* Checks that token i of an append (n tokens) sits at slot in every layer, K and V. */
static int token_matches(uint32_t n, uint32_t i, int32_t slot, const float *k, const float *v)
{
    int same = 1;
    for (uint32_t l = 0; l < PL; l++)
        for (uint32_t h = 0; h < PH; h++) {
            size_t src = (((size_t) l * n + i) * PH + h) * PD;
            same &= memcmp(token_at(l, 0, slot / (int32_t) PB, h, (uint32_t) slot % PB), k + src,
                           PD * sizeof(float)) == 0;
            same &= memcmp(token_at(l, 1, slot / (int32_t) PB, h, (uint32_t) slot % PB), v + src,
                           PD * sizeof(float)) == 0;
        }
    return same;
}

/* Fills n random token ids. */
static void random_tokens(int32_t *t, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        t[i] = (int32_t) tap_rng_below(&rng, 50000);
}

/* Checks that slots[0..n) are the slots of positions first.. in the sequence's blocks. */
static int slots_follow_table(const paged_seq *s, uint32_t first, uint32_t n, const int32_t *slots)
{
    uint32_t nb;
    const int32_t *b = paged_seq_blocks(s, &nb);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t pos = first + i;
        if (pos / PB >= nb || slots[i] != b[pos / PB] * (int32_t) PB + (int32_t) (pos % PB))
            return 0;
    }
    return 1;
}

/* Slots and block tables as tokens are added across block boundaries. */
static paged_seq *test_extend(paged_pool *p)
{
    paged_seq *s = NULL;
    is_int(PAGED_OK, paged_seq_create(p, 7, &s), "extend: sequence created");
    is_int(0, paged_seq_len(s), "extend: a new sequence is empty");
    int32_t tok[60], slots[60];
    random_tokens(tok, 60);
    is_int(PAGED_OK, paged_seq_extend(s, 10, tok, slots), "extend: 10 tokens");
    uint32_t nb;
    const int32_t *b = paged_seq_blocks(s, &nb);
    ok(nb == 1 && paged_seq_len(s) == 10, "extend: 10 tokens take 1 block");
    ok(slots_follow_table(s, 0, 10, slots) && slots[0] == b[0] * (int32_t) PB,
       "extend: slots 0..9 are block %d's offsets 0..9", b[0]);
    is_int(PAGED_OK, paged_seq_extend(s, 10, tok + 10, slots + 10), "extend: 10 more, across the boundary");
    b = paged_seq_blocks(s, &nb);
    ok(nb == 2 && b[0] != b[1], "extend: 20 tokens take 2 distinct blocks");
    ok(slots_follow_table(s, 10, 10, slots + 10) && slots[16] == b[1] * (int32_t) PB,
       "extend: token 16 is the second block's first slot");
    is_int(PAGED_OK, paged_seq_extend(s, 0, NULL, NULL), "extend: 0 tokens is a no-op");
    is_int(PAGED_OK, paged_seq_extend(s, 40, tok + 20, slots + 20), "extend: 40 more");
    b = paged_seq_blocks(s, &nb);
    ok(nb == 4 && paged_seq_len(s) == 60, "extend: 60 tokens take 4 blocks");
    ok(slots_follow_table(s, 0, 60, slots), "extend: all 60 slots follow the block table");
    int distinct = 1;
    for (uint32_t i = 0; i < nb; i++)
        for (uint32_t j = 0; j < i; j++)
            distinct &= b[i] != b[j];
    ok(distinct, "extend: the blocks are distinct");

    float *k = bmalloc(PL * 60 * PH * PD * sizeof *k), *v = bmalloc(PL * 60 * PH * PD * sizeof *v);
    is_int(PAGED_OK, append_random(p, 60, slots, k, v), "extend: K and V appended at the slots");
    int same = 1;
    for (uint32_t i = 0; i < 60; i++)
        same &= token_matches(60, i, slots[i], k, v);
    ok(same, "extend: the pool holds every token at its slot");
    free(k);
    free(v);
    return s;
}

/* Fork: blocks shared; the shared partial last block is copied on the first write. */
static void test_fork(paged_pool *p, paged_seq *s)
{
    uint32_t nb, tb;
    const int32_t *sb = paged_seq_blocks(s, &nb);
    int32_t s_last = sb[nb - 1];
    size_t bytes = PH * PB * PD * sizeof(float);
    float *saved = bmalloc(PL * 2 * bytes);
    for (uint32_t l = 0; l < PL; l++)
        for (uint32_t kv = 0; kv < 2; kv++)
            memcpy((char *) saved + (l * 2 + kv) * bytes, block_at(l, kv, s_last), bytes);

    paged_seq *t = NULL;
    is_int(PAGED_OK, paged_seq_fork(s, &t), "fork: sequence forked");
    const int32_t *tbl = paged_seq_blocks(t, &tb);
    ok(tb == nb && memcmp(tbl, sb, nb * sizeof *sb) == 0 && paged_seq_len(t) == paged_seq_len(s),
       "fork: the fork has the same %u blocks and length", nb);

    int32_t tok[3], slots[3];
    random_tokens(tok, 3);
    is_int(PAGED_OK, paged_seq_extend(t, 3, tok, slots), "fork: the fork extends by 3");
    tbl = paged_seq_blocks(t, &tb);
    sb = paged_seq_blocks(s, &nb);
    ok(tb == nb && tbl[nb - 1] != s_last && memcmp(tbl, sb, (nb - 1) * sizeof *sb) == 0,
       "fork: only the shared last block was replaced (%d -> %d)", s_last, tbl[nb - 1]);
    ok(slots_follow_table(t, 60, 3, slots) && slots[0] == tbl[nb - 1] * (int32_t) PB + 12,
       "fork: the new tokens go to offsets 12..14 of the copy");
    int copied = 1;
    for (uint32_t l = 0; l < PL; l++)
        for (uint32_t kv = 0; kv < 2; kv++)
            for (uint32_t h = 0; h < PH; h++)
                copied &= memcmp(token_at(l, kv, tbl[nb - 1], h, 0),
                                 (char *) saved + (l * 2 + kv) * bytes + (size_t) h * PB * PD * sizeof(float),
                                 12 * PD * sizeof(float)) == 0;
    ok(copied, "fork: the copy holds the 12 tokens written before the fork");

    float k[PL * 3 * PH * PD], v[PL * 3 * PH * PD];
    is_int(PAGED_OK, append_random(p, 3, slots, k, v), "fork: the fork's APPEND into its copy succeeds");
    int same = 1;
    for (uint32_t i = 0; i < 3; i++)
        same &= token_matches(3, i, slots[i], k, v);
    ok(same, "fork: the fork's new tokens are in its copy");
    int untouched = 1;
    for (uint32_t l = 0; l < PL; l++)
        for (uint32_t kv = 0; kv < 2; kv++)
            untouched &= memcmp(block_at(l, kv, s_last), (char *) saved + (l * 2 + kv) * bytes, bytes) == 0;
    ok(untouched, "fork: the original's last block is unchanged after the fork wrote");

    /* The original writes too: into a block of its own, leaving the fork's alone. */
    is_int(PAGED_OK, paged_seq_extend(s, 2, tok, slots), "fork: the original extends by 2");
    float k2[PL * 2 * PH * PD], v2[PL * 2 * PH * PD];
    is_int(PAGED_OK, append_random(p, 2, slots, k2, v2), "fork: the original's APPEND succeeds");
    same = 1;
    for (uint32_t i = 0; i < 3; i++)
        same &= token_matches(3, i, (int32_t) (tbl[nb - 1] * (int32_t) PB + 12 + (int32_t) i), k, v);
    ok(same, "fork: the fork's tokens survive the original's write");

    /* At a block boundary nothing is shared to copy: the next token takes a new block. */
    paged_seq *u = NULL, *w = NULL;
    int32_t tok32[32], s32[32], one;
    random_tokens(tok32, 32);
    paged_seq_create(p, 7, &u);
    paged_seq_extend(u, 32, tok32, s32);
    is_int(PAGED_OK, paged_seq_fork(u, &w), "fork: a 32-token sequence forked");
    paged_seq_extend(w, 1, tok32, &one);
    const int32_t *ub = paged_seq_blocks(u, &nb), *wb = paged_seq_blocks(w, &tb);
    ok(tb == 3 && nb == 2 && wb[0] == ub[0] && wb[1] == ub[1] && wb[2] != ub[0] && wb[2] != ub[1],
       "fork: at a block boundary the fork keeps both full blocks and adds a third");
    paged_seq_destroy(w);
    paged_seq_destroy(u);
    paged_seq_destroy(t);
    free(saved);
}

/* Prefix sharing: one client publishes, another adopts. */
static void test_prefix(const struct pagedd *h, paged_pool *p1)
{
    paged_client *c2 = harness_client(h);
    paged_pool *p2 = NULL;
    if (paged_pool_attach(c2, "seq", &p2) != PAGED_OK)
        bail("attach from the second client");
    int32_t prompt[70], slots[70];
    random_tokens(prompt, 70);
    paged_seq *a = NULL;
    paged_seq_create(p1, 99, &a);
    is_int(PAGED_OK, paged_seq_extend(a, 40, prompt, slots), "prefix: 40 prompt tokens");
    float *k = bmalloc(PL * 70 * PH * PD * sizeof *k), *v = bmalloc(PL * 70 * PH * PD * sizeof *v);
    append_random(p1, 40, slots, k, v);
    is_int(2, paged_seq_publish(a), "prefix: publish enters the 2 full blocks");
    is_int(0, paged_seq_publish(a), "prefix: publishing again enters none");

    paged_seq *b = NULL;
    paged_seq_create(p2, 99, &b);
    is_int(32, paged_seq_adopt_prefix(b, prompt, 40), "prefix: another client adopts 32 tokens");
    uint32_t na, nb;
    const int32_t *ab = paged_seq_blocks(a, &na), *bb = paged_seq_blocks(b, &nb);
    ok(nb == 2 && bb[0] == ab[0] && bb[1] == ab[1] && paged_seq_len(b) == 32,
       "prefix: it has the publisher's two blocks");
    int32_t bslots[8];
    is_int(PAGED_OK, paged_seq_extend(b, 8, prompt + 32, bslots), "prefix: the adopter extends past the prefix");
    bb = paged_seq_blocks(b, &nb);
    ok(nb == 3 && bb[2] != ab[2] && bslots[0] == bb[2] * (int32_t) PB,
       "prefix: into a block of its own, from offset 0");
    float kb[PL * 8 * PH * PD], vb[PL * 8 * PH * PD];
    is_int(PAGED_OK, append_random(p2, 8, bslots, kb, vb), "prefix: the adopter appends its own tokens");
    int same = 1;
    for (uint32_t i = 0; i < 32; i++)
        same &= token_matches(40, i, slots[i], k, v);
    ok(same, "prefix: the shared blocks still hold the publisher's K and V");

    paged_seq *c = NULL, *d = NULL;
    paged_seq_create(p2, 100, &c);
    is_int(0, paged_seq_adopt_prefix(c, prompt, 40), "prefix: another salt finds nothing");
    paged_seq_create(p2, 99, &d);
    int32_t changed[40];
    memcpy(changed, prompt, sizeof changed);
    changed[20] ^= 1;
    is_int(16, paged_seq_adopt_prefix(d, changed, 40), "prefix: a change in block 1 keeps only block 0");
    is_int(PAGED_E_INVAL, paged_seq_adopt_prefix(b, prompt, 40),
           "prefix: adopting into a non-empty sequence is PAGED_E_INVAL");
    paged_seq *e = NULL;
    paged_seq_create(p2, 99, &e);
    is_int(0, paged_seq_adopt_prefix(e, prompt, PB - 1), "prefix: less than a block adopts nothing");

    /* The chain continues across publishes. */
    is_int(PAGED_OK, paged_seq_extend(a, 30, prompt + 40, slots + 40), "prefix: the publisher grows to 70 tokens");
    append_random(p1, 30, slots + 40, k, v);
    is_int(2, paged_seq_publish(a), "prefix: publishing enters blocks 2 and 3");
    paged_seq *f = NULL;
    paged_seq_create(p2, 99, &f);
    is_int(64, paged_seq_adopt_prefix(f, prompt, 70), "prefix: an adopter now finds all 4 blocks");

    paged_seq *g = NULL;
    int32_t gs[20];
    paged_seq_create(p1, 99, &g);
    paged_seq_extend(g, 20, NULL, gs);
    is_int(PAGED_E_INVAL, paged_seq_publish(g), "prefix: a sequence without token ids cannot publish");

    paged_seq_destroy(g);
    paged_seq_destroy(f);
    paged_seq_destroy(e);
    paged_seq_destroy(d);
    paged_seq_destroy(c);
    paged_seq_destroy(b);
    paged_seq_destroy(a);
    free(k);
    free(v);
    paged_pool_detach(p2);
    paged_client_close(c2);
}

/* Runs the sequence tests on one pool of one daemon; returns 0 (TAP reports failures). */
int main(void)
{
    plan_lazy();
    tap_rng_seed(&rng, tap_seed());
    struct pagedd h;
    harness_start(&h);
    paged_client *c = harness_client(&h);
    paged_pool_desc d = { .name = "seq", .num_layers = PL, .num_kv_heads = PH, .head_dim = PD,
                          .block_size = PB, .dtype = PAGED_DTYPE_F32, .num_blocks = PN };
    paged_pool *p = NULL;
    if (paged_pool_create(c, &d, &p) != PAGED_OK)
        bail("pool: %s", paged_client_error(c));
    void *base = NULL;
    if (paged_pool_map(p, &base) != PAGED_OK)
        bail("map: %s", paged_client_error(c));
    pool_mem = base;

    paged_seq *s = test_extend(p);
    test_fork(p, s);
    paged_seq_destroy(s);
    test_prefix(&h, p);

    struct harness_counts n = { 0 };
    ok(harness_pool_counts(&h, "seq", &n) == 0, "destroy: the daemon lists the pool");
    is_int(0, n.referenced, "destroy: no block is referenced once every sequence is destroyed");
    is_int(PN, n.free + n.cached, "destroy: free plus cached blocks are all %u again", PN);
    is_int(4, n.cached, "destroy: the 4 published blocks stay cached");
    int32_t all[PN];
    is_int(PAGED_OK, paged_alloc(p, PN, all), "destroy: all %u blocks can be taken again", PN);
    paged_free(p, PN, all);
    paged_pool_detach(p);
    paged_client_close(c);
    harness_stop(&h);
    return 0;
}
