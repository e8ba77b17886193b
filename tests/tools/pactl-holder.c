/* pactl-holder.c: a test client for pactl-t: holds blocks of a pool through libpaged until told to go. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "paged.h"

/*
 * usage: pactl-holder SOCKET NAME POOL HOLD CACHE [MODE [SHARDS [DEVICE]]]
 * Connects as NAME (its data arena on the daemon's device DEVICE, 0 when not given), creates
 * POOL (1 layer, 2 KV heads, head dim 64, 16-token blocks, bf16, 64 blocks, mode MODE: a number
 * as C writes it, 0600 when not given; SHARDS shards, none when not given or 0, the holder then
 * shard 0 of its uid's default group; on device DEVICE, the creator's when not given) or attaches to it,
 * takes HOLD + CACHE blocks, publishes the last CACHE of them and frees those (so they stay
 * cached, unreferenced), prints "ready ID", then keeps everything until its standard input
 * ends.
 */

/* Prints what failed and exits 1. */
static void die(paged_client *c, const char *what, int rc)
{
    printf("error: %s: %s (%s)\n", what, paged_strerror(rc), c != NULL ? paged_client_error(c) : "");
    fflush(stdout);
    exit(1);
}

/* Runs the holder; returns the exit status. */
int main(int argc, char **argv)
{
    if (argc < 6 || argc > 9) {
        fprintf(stderr, "usage: pactl-holder SOCKET NAME POOL HOLD CACHE [MODE [SHARDS [DEVICE]]]\n");
        return 2;
    }
    uint32_t hold = (uint32_t) strtoul(argv[4], NULL, 10);
    uint32_t cache = (uint32_t) strtoul(argv[5], NULL, 10);
    uint32_t device = argc == 9 ? (uint32_t) strtoul(argv[8], NULL, 10) : 0;
    paged_connect_opts opts = { .socket_path = argv[1], .name = argv[2], .device = device };
    paged_client *c = NULL;
    paged_pool *p = NULL;
    int rc = paged_client_connect(&opts, &c);
    if (rc != PAGED_OK)
        die(NULL, "connect", rc);
    paged_pool_desc desc = {
        .name = argv[3], .num_layers = 1, .num_kv_heads = 2, .head_dim = 64, .block_size = 16,
        .dtype = PAGED_DTYPE_BF16, .num_blocks = 64,
        .mode = argc >= 7 ? (uint32_t) strtoul(argv[6], NULL, 0) : 0600,
        .shards = argc >= 8 ? (uint32_t) strtoul(argv[7], NULL, 10) : 0,
        .device = argc == 9 ? PAGED_DEVICE(device) : 0,
    };
    rc = paged_pool_create(c, &desc, &p);
    if (rc == PAGED_E_EXIST)
        rc = paged_pool_attach(c, argv[3], &p);
    if (rc != PAGED_OK)
        die(c, "pool", rc);
    int32_t ids[64];
    if (hold + cache > 64)
        die(c, "too many blocks", PAGED_E_INVAL);
    if (hold + cache > 0 && (rc = paged_alloc(p, hold + cache, ids)) != PAGED_OK)
        die(c, "alloc", rc);
    if (cache > 0) {
        int32_t tokens[64 * 16];
        for (uint32_t i = 0; i < cache * 16; i++)
            tokens[i] = (int32_t) (i * 31 + 7);
        rc = paged_publish(p, NULL, 7, cache, tokens, ids + hold);
        if (rc < 0)
            die(c, "publish", rc);
        if ((rc = paged_free(p, cache, ids + hold)) != PAGED_OK)
            die(c, "free", rc);
    }
    printf("ready %u\n", (unsigned) paged_client_id(c));
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0)
        continue;
    paged_pool_detach(p);
    paged_client_close(c);
    return 0;
}
