/* validate-setup.c: the pools and allocator state fuzz-validate runs against. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "fuzz/validate-setup.h"

#include <stdlib.h>

#include "paged.h"

const struct fv_pool fv_pools[FV_NUM_POOLS] = {
    { 1, 2, 2, 64, 8, 64, PAGED_DTYPE_F32, 1.0f, 1.0f, 1 },
    { 2, 2, 2, 64, 8, 64, PAGED_DTYPE_F16, 1.0f, 1.0f, 1 },
    { 3, 2, 2, 64, 8, 64, PAGED_DTYPE_BF16, 1.0f, 1.0f, 1 },
    { 4, 2, 2, 64, 8, 64, PAGED_DTYPE_FP8_E4M3, 0.5f, 2.0f, 1 },
    { 5, 2, 2, 64, 8, 64, PAGED_DTYPE_BF16, 1.0f, 1.0f, 0 },
    { 6, 1, 4, 128, 16, 32, PAGED_DTYPE_F16, 1.0f, 1.0f, 1 },
};

/* Computes the hashes of n blocks of tokens first, first + 1, ...; returns 0 or -1. */
static int hashes_of(int32_t first, uint32_t n, uint32_t block_size, paged_hash *out)
{
    size_t ntok = (size_t) n * block_size;
    int32_t *tokens = malloc(ntok * sizeof *tokens);
    if (tokens == NULL)
        return -1;
    for (size_t i = 0; i < ntok; i++)
        tokens[i] = first + (int32_t) i;
    paged_hash parent = { 0 };
    long got = paged_hash_blocks(&parent, tokens, ntok, block_size, FV_SALT, out);
    free(tokens);
    return got == (long) n ? 0 : -1;
}

/* Builds the allocator state validate-setup.h describes; returns it or NULL. */
pa_alloc *fv_build_alloc(const struct fv_pool *s)
{
    uint32_t q = s->num_blocks / 16;
    pa_alloc *a = pa_create(s->num_blocks);
    int32_t *ids = malloc(sizeof *ids * 4 * q);
    paged_hash *h = malloc(sizeof *h * 2 * q);
    int ok = a != NULL && ids != NULL && h != NULL && q != 0;
    /* The client's four groups, then the other holder's four. */
    ok = ok && pa_alloc_blocks(a, FV_HOLDER, 4 * q, ids) == 0;
    ok = ok && pa_fork_blocks(a, FV_HOLDER, q, ids + q, NULL) == 0;
    ok = ok && hashes_of(FV_TOKENS_MINE, q, s->block_size, h) == 0;
    ok = ok && pa_publish(a, FV_HOLDER, FV_TENANT, q, ids + 2 * q, h, NULL) == (int) q;
    ok = ok && pa_alloc_blocks(a, FV_OTHER, 4 * q, ids) == 0;
    ok = ok && hashes_of(FV_TOKENS_OTHER, 2 * q, s->block_size, h) == 0;
    ok = ok && pa_publish(a, FV_OTHER, FV_TENANT, 2 * q, ids, h, NULL) == (int) (2 * q);
    ok = ok && pa_lookup(a, FV_HOLDER, FV_TENANT, q, h, ids) == q;
    ok = ok && pa_free_blocks(a, FV_OTHER, q, ids + q, NULL) == 0;
    free(ids);
    free(h);
    if (!ok && a != NULL) {
        pa_destroy(a);
        a = NULL;
    }
    return a;
}
