/* prefix_hash.c: chained XXH3-128 content hashes of full token blocks, for the prefix cache. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <xxhash.h>

#include "paged.h"

/*
 * Hashes block i as XXH3-128 over (parent.lo, parent.hi, salt, tokens[0..block_size)), each
 * as the host stores them; the parent of block 0 is *parent, or zero if parent is NULL. Returns the
 * number of hashes written, or PAGED_E_INVAL.
 */
long paged_hash_blocks(const paged_hash *parent_hash, const int32_t *tokens, size_t ntokens,
                       uint32_t block_size, uint64_t salt, paged_hash *out)
{
    if (block_size == 0)
        return PAGED_E_INVAL;
    size_t nblocks = ntokens / block_size;
    if (nblocks > 0 && (tokens == NULL || out == NULL))
        return PAGED_E_INVAL;
    if (nblocks > (size_t) 0x7fffffff)
        return PAGED_E_INVAL;
    if (nblocks == 0)
        return 0;
    XXH3_state_t *state = XXH3_createState();
    if (state == NULL)
        return PAGED_E_NOMEM;
    paged_hash parent = parent_hash != NULL ? *parent_hash : (paged_hash) { 0, 0 };
    for (size_t b = 0; b < nblocks; b++) {
        uint64_t head[3] = { parent.lo, parent.hi, salt };
        XXH3_128bits_reset(state);
        XXH3_128bits_update(state, head, sizeof head);
        XXH3_128bits_update(state, tokens + b * block_size, (size_t) block_size * sizeof(int32_t));
        XXH128_hash_t h = XXH3_128bits_digest(state);
        parent.lo = h.low64;
        parent.hi = h.high64;
        out[b] = parent;
    }
    XXH3_freeState(state);
    return (long) nblocks;
}
