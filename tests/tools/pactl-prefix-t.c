/* pactl-prefix-t.c: pactl pin, unpin, evict of a prefix, ttl, and what info shows of the prefix cache. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "paged.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"
#include "tests/tools/tpactl.h"

#define B 16
#define NB 4
#define POOL "pfx"

static struct pagedd daemon_;
static char hex[NB][33];        /* the prompt's block hashes as pactl takes them */

/* Runs pactl -f json with the command and up to 6 more arguments (NULL-terminated) and
 * returns its parsed answer (NULL when it failed); *status gets its exit status. */
static struct tj *pactl_json(int *status, const char *cmd, const char *a1, const char *a2, const char *a3,
                             const char *a4, const char *a5, const char *a6)
{
    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", cmd, a1, a2, a3, a4, a5, a6, NULL);
    *status = r.status;
    struct tj *j = r.status == 0 ? tp_run_json(&r) : NULL;
    if (r.status != 0)
        diag("pactl %s: exit %d: %.*s", cmd, r.status, (int) strcspn(r.err, "\n"), r.err);
    tp_run_free(&r);
    return j;
}

/* Returns the number under key in pactl info's JSON for POOL, or -1. */
static double info_num(const char *key)
{
    int status;
    struct tj *j = pactl_json(&status, "info", POOL, NULL, NULL, NULL, NULL, NULL);
    double v = j != NULL && tj_get(j, key) != NULL ? tj_num(j, key) : -1;
    tj_free(j);
    return v;
}

/* Runs a prefix command over the prompt's hashes; returns its "blocks", or -1. */
static double prefix_cmd(const char *cmd)
{
    int status;
    struct tj *j = pactl_json(&status, cmd, POOL, hex[0], hex[1], hex[2], hex[3], NULL);
    double v = j != NULL && tj_get(j, "blocks") != NULL ? tj_num(j, "blocks") : -1;
    tj_free(j);
    return v;
}

/* Returns how many of POOL's blocks `pactl list blocks` shows pinned by this uid, in state
 * "pinned", or -1 when it failed. */
static int count_pinned_blocks(void)
{
    int status, n = 0;
    struct tj *j = pactl_json(&status, "list", "blocks", POOL, NULL, NULL, NULL, NULL);
    const struct tj *blocks = tj_get(j, "blocks");
    if (blocks == NULL) {
        tj_free(j);
        return -1;
    }
    for (size_t i = 0; i < blocks->count; i++) {
        const struct tj *b = tj_at(blocks, i);
        const char *state = tj_str(b, "state");
        if (state != NULL && strcmp(state, "pinned") == 0 && tj_get(b, "pinned")->boolean
            && tj_num(b, "pinner_uid") == (double) geteuid())
            n++;
    }
    tj_free(j);
    return n;
}

/* Makes POOL with a prompt of NB blocks published and cached by client c; fills hex. */
static void make_prompt(paged_client *c)
{
    paged_pool_desc d = { .name = POOL, .num_layers = 1, .num_kv_heads = 1, .head_dim = 64, .block_size = B,
                          .dtype = PAGED_DTYPE_F32, .num_blocks = 32, .mode = 0600 };
    paged_pool *p = NULL;
    int32_t tokens[NB * B], ids[NB], found[NB];
    paged_hash h[NB];
    for (int i = 0; i < NB * B; i++)
        tokens[i] = 5 * i + 3;
    if (paged_pool_create(c, &d, &p) != PAGED_OK || paged_alloc(p, NB, ids) != PAGED_OK
        || paged_publish(p, NULL, 0, NB, tokens, ids) != NB || paged_free(p, NB, ids) != PAGED_OK
        || paged_hash_blocks(NULL, tokens, NB * B, B, 0, h) != NB)
        bail("cannot make the prompt: %s", paged_client_error(c));
    for (int i = 0; i < NB; i++)
        snprintf(hex[i], sizeof hex[i], "%016llx%016llx", (unsigned long long) h[i].hi,
                 (unsigned long long) h[i].lo);
    /* Two lookups: NB + 2 blocks asked for, NB found, then NB and NB. */
    int32_t longer[(NB + 2) * B];
    memcpy(longer, tokens, sizeof tokens);
    for (int i = NB * B; i < (NB + 2) * B; i++)
        longer[i] = -i;
    int32_t more[NB + 2];
    if (paged_lookup(p, NULL, 0, NB + 2, longer, more) != NB || paged_free(p, NB, more) != PAGED_OK
        || paged_lookup(p, NULL, 0, NB, tokens, found) != NB || paged_free(p, NB, found) != PAGED_OK)
        bail("cannot look the prompt up: %s", paged_client_error(c));
}

/* Runs the cases; returns 0 (TAP reports the results). */
int main(void)
{
    tp_init(&daemon_);
    const char *const args[] = { "--threads", "1", "--log-level", "warning", "--prefix-ttl=45000", NULL };
    tp_start_daemon(&daemon_, args);
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = "maker", .timeout_ms = 10000 };
    paged_client *c = NULL;
    if (paged_client_connect(&o, &c) != PAGED_OK)
        bail("cannot connect");
    make_prompt(c);

    ok(info_num("lookup_tokens") == (NB + 2 + NB) * B && info_num("hit_tokens") == 2 * NB * B,
       "info: 160 tokens looked up, 128 found");
    is_int(45000, (int) info_num("ttl_ms"), "info: a new pool's ttl is prefix-ttl's 45000 ms");
    is_int(NB, (int) prefix_cmd("pin"), "pin: a prefix of 4 blocks pinned");
    is_int(NB, (int) info_num("pinned"), "info: 4 pinned");
    is_int(NB, count_pinned_blocks(), "list blocks: 4 blocks in state pinned, pinned by the test's uid");
    int status;
    struct tj *j = pactl_json(&status, "evict", POOL, NULL, NULL, NULL, NULL, NULL);
    is_int(0, j != NULL ? (int) tj_num(j, "evicted") : -1, "evict of the pool: pinned blocks stay");
    tj_free(j);
    is_int(NB, (int) prefix_cmd("unpin"), "unpin: the prefix unpinned");
    is_int(NB, (int) prefix_cmd("pin"), "pin: pinned again");
    j = pactl_json(&status, "unpin", POOL, NULL, NULL, NULL, NULL, NULL);
    is_int(NB, j != NULL ? (int) tj_num(j, "blocks") : -1, "unpin POOL: every pin dropped, 4");
    tj_free(j);
    is_int(0, (int) info_num("pinned"), "info: none pinned");
    j = pactl_json(&status, "ttl", POOL, "60000", NULL, NULL, NULL, NULL);
    is_int(60000, j != NULL ? (int) tj_num(j, "ttl_ms") : -1, "ttl: set to 60000 ms");
    tj_free(j);
    is_int(60000, (int) info_num("ttl_ms"), "info: ttl 60000 ms");
    is_int(NB, (int) prefix_cmd("evict"), "evict POOL HASH...: the prefix evicted");
    ok(info_num("cached") == 0 && info_num("free") == 32, "info: nothing cached, all free");
    is_int(0, (int) prefix_cmd("pin"), "pin of an evicted prefix: none found");

    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "pin", POOL, "xyz", NULL);
    ok(r.status == 2 && strstr(r.err, "is not 32 hex digits") != NULL, "pin with a bad hash: usage error");
    tp_run_free(&r);
    tp_run_pactl(&r, "-s", daemon_.socket, "ttl", POOL, "12x", NULL);
    ok(r.status == 2 && strstr(r.err, "not a number of milliseconds") != NULL, "ttl 12x: usage error");
    tp_run_free(&r);
    tp_run_pactl(&r, "-s", daemon_.socket, "pin", "nosuch", hex[0], NULL);
    ok(r.status == 1 && strstr(r.err, "no such pool 'nosuch'") != NULL, "pin in a missing pool: named");
    tp_run_free(&r);
    tp_run_pactl(&r, "-s", daemon_.socket, "info", POOL, NULL);
    ok(r.status == 0 && strstr(r.out, "ttl            60000 ms") != NULL
           && strstr(r.out, "tokens         160 looked up, 128 found (80.0%)") != NULL,
       "info's text shows the ttl and the tokens");
    tp_run_free(&r);

    paged_client_close(c);
    tp_stop_daemon(&daemon_);
    return 0;
}
