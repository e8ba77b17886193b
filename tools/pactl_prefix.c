/* pactl_prefix.c: what pactl's pin, unpin and evict of a prefix share: its hashes and the PREFIX request. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/pactl_prefix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/pactl_fetch.h"
#include "tools/pactl_fmt.h"
#include "tools/pactl_pool.h"

/* Reads 16 hex digits at s into *out; returns 0, or -1 when one is not a hex digit. */
static int read_hex64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char ch = s[i];
        unsigned d;
        if (ch >= '0' && ch <= '9')
            d = (unsigned) (ch - '0');
        else if (ch >= 'a' && ch <= 'f')
            d = (unsigned) (ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F')
            d = (unsigned) (ch - 'A' + 10);
        else
            return -1;
        v = v << 4 | d;
    }
    *out = v;
    return 0;
}

/* Parses a hash as fmt_hash writes it (32 hex digits, high half first); returns 0 or -1. */
static int parse_hash(const char *s, paged_hash *out)
{
    if (strlen(s) != 32 || read_hex64(s, &out->hi) < 0 || read_hex64(s + 16, &out->lo) < 0)
        return -1;
    return 0;
}

/* Checks, sends and prints a PREFIX request; returns the exit status. */
int pactl_prefix_run(struct pactl_ctx *ctx, const char *cmd, uint32_t op, const char *done, const char *pool,
                     int argc, char **argv)
{
    char *cause = NULL, name[PCORE_NAME_MAX];
    if (strlen(pool) >= PCORE_NAME_MAX)
        return pactl_usage_error("%s: pool name longer than %u bytes", cmd, PCORE_NAME_MAX - 1);
    if ((argc < 1 && op != PCORE_PREFIX_UNPIN) || argc > (int) PCORE_PREFIX_MAX_HASHES)
        return pactl_usage_error("%s: 1 to %u hashes", cmd, PCORE_PREFIX_MAX_HASHES);
    paged_hash *hashes = calloc(argc > 0 ? (size_t) argc : 1, sizeof *hashes);
    if (hashes == NULL)
        return pactl_fail(pactl_cause("no memory for %d hashes", argc));
    for (int i = 0; i < argc; i++)
        if (parse_hash(argv[i], &hashes[i]) < 0) {
            free(hashes);
            return pactl_usage_error("%s: hash %d '%.40s' is not 32 hex digits", cmd, i + 1, argv[i]);
        }
    uint32_t found = 0;
    int rc = PACTL_EXIT_OK;
    if (pactl_connect(ctx) < 0)
        rc = PACTL_EXIT_FAIL;
    else if (pactl_fetch_prefix(&ctx->conn, op, pool, hashes, (uint32_t) argc, 0, &found, &cause) < 0)
        rc = pactl_fail(cause);
    free(hashes);
    if (rc != PACTL_EXIT_OK)
        return rc;
    if (ctx->format == PACTL_FORMAT_JSON)
        pactl_pool_json(pool, "blocks", found);
    else if (argc == 0)
        printf("%s %u block%s of pool '%s'\n", done, (unsigned) found, found == 1 ? "" : "s",
               fmt_safe(name, sizeof name, pool, PCORE_NAME_MAX));
    else
        printf("%s a prefix of %u block%s of pool '%s'\n", done, (unsigned) found, found == 1 ? "" : "s",
               fmt_safe(name, sizeof name, pool, PCORE_NAME_MAX));
    return PACTL_EXIT_OK;
}
