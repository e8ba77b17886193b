/* prefix.c: the prefix cache's controls: pin, unpin and evict a prefix by its tokens, a pool's time to live. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "lib/client.h"
#include "lib/core/sock.h"

/* Sends a PREFIX message m (op, pool and ttl set) followed by count hashes; returns the OK's
 * count, or an error (explained in c->err). */
static int prefix_call(paged_client *c, struct pcore_msg_prefix *m, const paged_hash *hashes, uint32_t count)
{
    size_t len = sizeof *m + (size_t) count * sizeof *hashes;
    unsigned char *buf = malloc(len);
    if (buf == NULL) {
        pc_set_err(c, "no memory for a prefix request of %u hashes", count);
        return PAGED_E_NOMEM;
    }
    m->hdr.type = PCORE_MSG_PREFIX;
    m->count = count;
    memcpy(buf, m, sizeof *m);
    if (count > 0)
        memcpy(buf + sizeof *m, hashes, (size_t) count * sizeof *hashes);
    struct pcore_msg_hdr r;
    int fds[PSOCK_MAX_FDS], nfds = 0;
    int rc = pc_ctl_call(c, buf, len, PCORE_MSG_OK, &r, sizeof r, fds, 0, &nfds);
    free(buf);
    return rc < 0 ? rc : r.status;
}

/* Hashes num_blocks blocks of tokens for pool p and sends PREFIX op with them; returns the
 * length of the prefix the daemon found, or an error. */
static int prefix_tokens(paged_pool *p, uint32_t op, const paged_hash *parent, uint64_t salt,
                         uint32_t num_blocks, const int32_t *tokens)
{
    if (p == NULL)
        return PAGED_E_INVAL;
    paged_client *c = p->c;
    c->err[0] = '\0';
    struct pcore_msg_prefix m;
    memset(&m, 0, sizeof m);
    m.op = op;
    m.pool_id = p->info.id;
    if (op == PCORE_PREFIX_UNPIN && num_blocks == 0)
        return prefix_call(c, &m, NULL, 0);
    if (num_blocks == 0 || num_blocks > PCORE_PREFIX_MAX_HASHES || tokens == NULL) {
        pc_set_err(c, "num_blocks %u not from 1 to %u, or tokens NULL", num_blocks, PCORE_PREFIX_MAX_HASHES);
        return PAGED_E_INVAL;
    }
    paged_hash *hashes = malloc((size_t) num_blocks * sizeof *hashes);
    if (hashes == NULL) {
        pc_set_err(c, "no memory for %u hashes", num_blocks);
        return PAGED_E_NOMEM;
    }
    const uint32_t bs = p->info.block_size;
    int rc = PAGED_E_INVAL;
    if (paged_hash_blocks(parent, tokens, (size_t) num_blocks * bs, bs, salt, hashes) == (long) num_blocks)
        rc = prefix_call(c, &m, hashes, num_blocks);
    else
        pc_set_err(c, "cannot hash %u blocks of %u tokens", num_blocks, bs);
    free(hashes);
    return rc;
}

/* Pins the longest cached prefix of tokens; returns its length in blocks or an error. */
int paged_prefix_pin(paged_pool *p, const paged_hash *parent, uint64_t salt, uint32_t num_blocks,
                     const int32_t *tokens)
{
    return prefix_tokens(p, PCORE_PREFIX_PIN, parent, salt, num_blocks, tokens);
}

/* Drops the pins of the longest cached prefix of tokens (num_blocks 0: every pin the caller
 * may drop); returns its length (how many pins) or an error. */
int paged_prefix_unpin(paged_pool *p, const paged_hash *parent, uint64_t salt, uint32_t num_blocks,
                       const int32_t *tokens)
{
    return prefix_tokens(p, PCORE_PREFIX_UNPIN, parent, salt, num_blocks, tokens);
}

/* Takes the longest cached prefix of tokens out of the cache; returns its length or an error. */
int paged_prefix_evict(paged_pool *p, const paged_hash *parent, uint64_t salt, uint32_t num_blocks,
                       const int32_t *tokens)
{
    return prefix_tokens(p, PCORE_PREFIX_EVICT, parent, salt, num_blocks, tokens);
}

/* Sets a pool's time to live; returns PAGED_OK or an error. */
int paged_pool_set_ttl(paged_client *c, const char *name, uint64_t ttl_ms)
{
    if (c == NULL)
        return PAGED_E_INVAL;
    c->err[0] = '\0';
    if (name == NULL || name[0] == '\0' || strlen(name) >= PCORE_NAME_MAX) {
        pc_set_err(c, "pool name must be 1 to %u bytes", PCORE_NAME_MAX - 1);
        return PAGED_E_INVAL;
    }
    struct pcore_msg_prefix m;
    memset(&m, 0, sizeof m);
    m.op = PCORE_PREFIX_TTL;
    m.ttl_ms = ttl_ms;
    memcpy(m.name, name, strlen(name));
    int rc = prefix_call(c, &m, NULL, 0);
    return rc < 0 ? rc : PAGED_OK;
}
