/* tenants-t.c: each uid has its own prefix scope in a pool unless the owner shares it; hashes stay the client's. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paged.h"
#include "tests/hard/hard.h"
#include "tests/tap/pagedd.h"

/* The pools: 1 layer, 1 KV head, head_dim 64, blocks of 16, f32, 64 blocks. */
#define B 16
#define N 64
#define NB 4             /* blocks of the prompt */
#define SALT 42u
#define TENANT_UID 65534 /* nobody */

/* The child's report, one int per step (a step that did not run stays -999). */
enum {
    R_CONNECT, R_ATTACH_PERUID, R_ATTACH_SHARED, R_LOOKUP_PERUID, R_LOOKUP_SHARED, R_SHARED_IDS,
    R_PUBLISH_OWN, R_SECOND_LOOKUP, R_SECOND_IDS, R_LIST_WITHHELD, R_LIST_OWN, R_LIST_SHARED,
    R_COUNT
};

static struct pagedd daemon_;
static int32_t prompt[NB * B];
static paged_hash prompt_hash[NB];
static int32_t owner_ids[NB];    /* the blocks root published in each pool (same ids in both);
                                    the tenant's child gets them through its go pipe */

/* Connects a libpaged client named name; returns it or NULL. */
static paged_client *connect_as(const char *name)
{
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = name, .timeout_ms = 10000 };
    paged_client *c = NULL;
    return paged_client_connect(&o, &c) == PAGED_OK ? c : NULL;
}

/* Returns whether ids[0..NB) are the blocks want[0..NB). */
static int same_ids(const int32_t *ids, const int32_t *want)
{
    return memcmp(ids, want, NB * sizeof *ids) == 0;
}

/*
 * Lists the blocks of pool name through a fresh control connection and counts the published
 * ones of scope tenant among ids (NULL: any block): *shown those whose hash is the prompt's
 * block hash at their place in ids (any place for NULL), *withheld those listed as withheld
 * with a zero hash. Returns 0, or -1 when the list could not be had.
 */
static int count_listed(const char *name, uint32_t tenant, const int32_t *ids, int *shown, int *withheld)
{
    static struct pcore_block_item items[N];
    struct rc_client c;
    *shown = *withheld = 0;
    if (rc_connect(daemon_.socket, "lister", PCORE_HELLO_CONTROL | PCORE_HELLO_INSPECT, &c) != 0)
        return -1;
    long n = rc_list(&c, PCORE_LIST_BLOCKS, name, items, sizeof items[0], N);
    rc_close(&c);
    if (n < 0 || n > N)
        return -1;
    for (long k = 0; k < n; k++) {
        if (items[k].tenant != tenant || items[k].published == PCORE_BLOCK_UNPUBLISHED)
            continue;
        for (int i = 0; i < NB; i++) {
            if (ids != NULL && items[k].block != ids[i])
                continue;
            if (items[k].published == PCORE_BLOCK_PUBLISHED
                && memcmp(&items[k].hash, &prompt_hash[i], sizeof(paged_hash)) == 0)
                (*shown)++;
            else if (items[k].published == PCORE_BLOCK_WITHHELD && items[k].hash.lo == 0 && items[k].hash.hi == 0)
                (*withheld)++;
        }
    }
    return 0;
}

/*
 * The second tenant, uid nobody: looks the prompt up in both pools, publishes it in the
 * per-uid pool from blocks of its own, looks it up from a second connection, and lists the
 * per-uid pool's blocks. Fills res (R_COUNT ints).
 */
static void tenant_steps(int *res)
{
    paged_client *c = connect_as("tenant"), *c2 = connect_as("tenant-2");
    paged_pool *pu = NULL, *ps = NULL, *pu2 = NULL;
    res[R_CONNECT] = c != NULL && c2 != NULL;
    if (c == NULL || c2 == NULL)
        return;
    res[R_ATTACH_PERUID] = paged_pool_attach(c, "peruid", &pu);
    res[R_ATTACH_SHARED] = paged_pool_attach(c, "shared", &ps);
    if (pu == NULL || ps == NULL || paged_pool_attach(c2, "peruid", &pu2) != PAGED_OK)
        return;
    int32_t ids[NB], own[NB], ids2[NB];
    res[R_LOOKUP_PERUID] = paged_lookup(pu, NULL, SALT, NB, prompt, ids);
    res[R_LOOKUP_SHARED] = paged_lookup(ps, NULL, SALT, NB, prompt, ids);
    res[R_SHARED_IDS] = res[R_LOOKUP_SHARED] == NB && same_ids(ids, owner_ids);
    if (paged_alloc(pu, NB, own) != PAGED_OK)
        return;
    res[R_PUBLISH_OWN] = paged_publish(pu, NULL, SALT, NB, prompt, own);
    res[R_SECOND_LOOKUP] = paged_lookup(pu2, NULL, SALT, NB, prompt, ids2);
    res[R_SECOND_IDS] = res[R_SECOND_LOOKUP] == NB && same_ids(ids2, own);
    int shown, withheld;
    if (count_listed("peruid", 0, owner_ids, &shown, &withheld) == 0)
        res[R_LIST_WITHHELD] = withheld * 10 + shown;
    if (count_listed("peruid", TENANT_UID, own, &shown, &withheld) == 0)
        res[R_LIST_OWN] = shown * 10 + withheld;
    if (count_listed("shared", UINT32_MAX, owner_ids, &shown, &withheld) == 0)
        res[R_LIST_SHARED] = shown * 10 + withheld;
    paged_client_close(c2);
    paged_client_close(c);
}

/* The second tenant once forked (uid and gid nobody): waits for owner_ids on go, then runs
 * tenant_steps into res. Returns nothing. */
static void tenant_main(int go, int *res, void *ctx)
{
    (void) ctx;
    if (hard_read_full(go, owner_ids, sizeof owner_ids, 30000))
        tenant_steps(res);
}

/* Creates pool name with mode through c; bails when it cannot. Returns the pool. */
static paged_pool *create_pool(paged_client *c, const char *name, uint32_t mode)
{
    paged_pool_desc d = { .name = name, .num_layers = 1, .num_kv_heads = 1, .head_dim = 64, .block_size = B,
                          .dtype = PAGED_DTYPE_F32, .num_blocks = N, .mode = mode };
    paged_pool *p = NULL;
    int rc = paged_pool_create(c, &d, &p);
    if (rc != PAGED_OK)
        bail("cannot create pool %s (mode %#x): %s (%s)", name, mode, paged_strerror(rc), paged_client_error(c));
    return p;
}

/* The mode word: the sharing bit is kept and reported with the memory bit in effect (sealed:
 * the mode grants others access), unknown bits are refused. */
static void test_modes(paged_client *c, paged_pool *pu, paged_pool *ps)
{
    paged_pool_info info;
    paged_pool_get_info(pu, &info);
    is_int(0666 | PAGED_POOL_SEALED, info.mode, "peruid: paged_pool_get_info's mode is 0666, sealed, no sharing bit");
    paged_pool_get_info(ps, &info);
    is_int(0666 | PAGED_POOL_SHARED_PREFIXES | PAGED_POOL_SEALED, info.mode,
           "shared: mode 0666 | PAGED_POOL_SHARED_PREFIXES | PAGED_POOL_SEALED");
    paged_pool *p = create_pool(c, "bare", PAGED_POOL_SHARED_PREFIXES);
    paged_pool_get_info(p, &info);
    is_int(0600 | PAGED_POOL_SHARED_PREFIXES | PAGED_POOL_EXPORTED, info.mode,
           "the sharing bit alone: permission bits 0600, exported");
    paged_pool_detach(p);
    paged_pool_desc d = { .name = "odd", .num_layers = 1, .num_kv_heads = 1, .head_dim = 64, .block_size = B,
                          .dtype = PAGED_DTYPE_F32, .num_blocks = N, .mode = 0600 | 0x100000 };
    is_int(PAGED_E_INVAL, paged_pool_create(c, &d, &p), "a mode with an unknown bit (0x100000): PAGED_E_INVAL");
    ok(strstr(paged_client_error(c), "PAGED_POOL_SHARED_PREFIXES") != NULL,
       "the reason names what a mode may hold (%s)", paged_client_error(c));
}

/* Root's own scope: a second root client (attached as pu and ps) hits in both pools, and the
 * listing shows root the prompt's hashes as paged_hash_blocks computes them. */
static void test_same_uid(paged_pool *pu, paged_pool *ps)
{
    int32_t ids[NB];
    is_int(NB, paged_lookup(pu, NULL, SALT, NB, prompt, ids), "peruid: a second client of the same uid hits");
    ok(same_ids(ids, owner_ids), "peruid: and gets the publisher's blocks");
    is_int(NB, paged_lookup(ps, NULL, SALT, NB, prompt, ids), "shared: a second client of the same uid hits");
    int shown, withheld;
    int rc = count_listed("peruid", 0, owner_ids, &shown, &withheld);
    ok(rc == 0 && shown == NB && withheld == 0,
       "LIST blocks peruid: the %d published blocks carry paged_hash_blocks' hashes, scope uid 0 (%d, %d)",
       NB, shown, withheld);
    rc = count_listed("shared", UINT32_MAX, owner_ids, &shown, &withheld);
    ok(rc == 0 && shown == NB && withheld == 0,
       "LIST blocks shared: the same hashes, in the shared scope (%d, %d)", shown, withheld);
    paged_free(pu, NB, ids);
}

/* The second uid (its report res, whole if got): misses in the per-uid pool, hits in the
 * shared one, publishes its own copy that root's lookups (through pu) do not find, and sees
 * only its own hashes. */
static void test_other_uid(paged_pool *pu, const int *res, int got)
{
    ok(got && res[R_CONNECT] == 1 && res[R_ATTACH_PERUID] == 0 && res[R_ATTACH_SHARED] == 0,
       "nobody connects twice and attaches both 0666 pools (%d, %d, %d)", res[R_CONNECT], res[R_ATTACH_PERUID],
       res[R_ATTACH_SHARED]);
    is_int(0, res[R_LOOKUP_PERUID], "peruid: nobody's LOOKUP of root's published prompt misses");
    is_int(NB, res[R_LOOKUP_SHARED], "shared (the owner's choice): nobody's LOOKUP of the prompt hits");
    is_int(1, res[R_SHARED_IDS], "shared: and gets root's blocks");
    is_int(NB, res[R_PUBLISH_OWN], "peruid: nobody's PUBLISH of the same prompt publishes its own %d blocks", NB);
    is_int(NB, res[R_SECOND_LOOKUP], "peruid: nobody's second client hits nobody's blocks");
    is_int(1, res[R_SECOND_IDS], "peruid: those of nobody's first client, not root's");
    is_int(NB * 10, res[R_LIST_WITHHELD], "LIST blocks as nobody: root's %d blocks are listed, hashes withheld", NB);
    is_int(NB * 10, res[R_LIST_OWN], "LIST blocks as nobody: its own %d blocks with paged_hash_blocks' hashes", NB);
    is_int(NB * 10, res[R_LIST_SHARED], "LIST blocks as nobody: the shared pool's hashes are shown to all");

    int32_t ids[NB];
    is_int(NB, paged_lookup(pu, NULL, SALT, NB, prompt, ids), "peruid: root still finds the prompt");
    ok(same_ids(ids, owner_ids), "peruid: in root's blocks, never in those nobody published");
    paged_free(pu, NB, ids);
    int shown, withheld;
    int rc = count_listed("peruid", TENANT_UID, NULL, &shown, &withheld);
    ok(rc == 0 && shown == NB && withheld == 0,
       "LIST blocks as root: nobody's %d blocks, scope uid %d, with the prompt's hashes (%d, %d)", NB,
       TENANT_UID, shown, withheld);
}

/* Runs the cases; returns 0 (TAP reports). */
int main(void)
{
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    plan_lazy();
    for (int t = 0; t < NB * B; t++)
        prompt[t] = (int32_t) tap_rng_below(&rng, 50000);
    if (paged_hash_blocks(NULL, prompt, NB * B, B, SALT, prompt_hash) != NB)
        bail("paged_hash_blocks");

    /* Other uids must reach the socket: a world-searchable directory, a 0666 socket. */
    pagedd_mkdir(&daemon_);
    if (chmod(daemon_.dir, 0755) != 0)
        sysbail("chmod %s", daemon_.dir);
    int go = -1, report = -1;
    pid_t tenant = getuid() == 0 ? hard_fork_tenant(TENANT_UID, tenant_main, NULL, R_COUNT, &go, &report) : -1;
    const char *args[] = { "--socket-mode=0666", "--backend", "cpu", NULL };
    int st;
    if (pagedd_start(&daemon_, args, NULL, &st) != 0)
        bail("pagedd did not start (status %d)", st);

    paged_client *c = connect_as("owner"), *c2 = connect_as("owner-2");
    if (c == NULL || c2 == NULL)
        bail("cannot connect");
    paged_pool *pu = create_pool(c, "peruid", 0666);
    paged_pool *ps = create_pool(c, "shared", 0666 | PAGED_POOL_SHARED_PREFIXES);
    int32_t ids2[NB];
    if (paged_alloc(pu, NB, owner_ids) != PAGED_OK || paged_alloc(ps, NB, ids2) != PAGED_OK
        || !same_ids(ids2, owner_ids))
        bail("root's ALLOCs: %s", paged_client_error(c));
    is_int(NB, paged_publish(pu, NULL, SALT, NB, prompt, owner_ids), "peruid: root publishes the prompt");
    is_int(NB, paged_publish(ps, NULL, SALT, NB, prompt, owner_ids), "shared: root publishes the prompt");
    test_modes(c, pu, ps);
    paged_pool *pu2 = NULL, *ps2 = NULL;
    if (paged_pool_attach(c2, "peruid", &pu2) != PAGED_OK || paged_pool_attach(c2, "shared", &ps2) != PAGED_OK)
        bail("the second client cannot attach: %s", paged_client_error(c2));
    test_same_uid(pu2, ps2);

    if (tenant > 0) {
        int res[R_COUNT];
        if (write(go, owner_ids, sizeof owner_ids) != (ssize_t) sizeof owner_ids)
            sysbail("write to the tenant");
        close(go);
        int got = hard_child_report(report, tenant, res, sizeof res, 60000, &st);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
            skip(13, "root, but setuid to nobody (%d) is refused here", TENANT_UID);
        else
            test_other_uid(pu2, res, got);
    } else
        skip(13, "not root: no second uid to try (CI runs this as root)");

    paged_client_close(c2);
    paged_client_close(c);
    st = pagedd_stop(&daemon_);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exited cleanly on SIGTERM (status %d)", st);
    pagedd_cleanup(&daemon_);
    return 0;
}
