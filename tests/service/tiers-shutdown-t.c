/* tiers-shutdown-t.c: an orderly shutdown writes the pool's blocks and host tier to the file tier. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/core/proto.h"
#include "paged.h"
#include "tests/service/kvprompt.h"
#include "tests/service/rawclient.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"

/*
 * The geometry is kvprompt's: a unit is 32 KiB, a unit file 32 KiB and 88 bytes, so a file
 * tier of 1 MiB holds 31 of them. Pool "tiers" has 8 blocks and a host tier of 4 units; pool
 * "bound" 24 blocks and 16 units.
 */
#define NB KP_NB
#define UNIT_BYTES (KP_UNIT * sizeof(float))
#define SALT 11u
#define BOUND_FILES 31               /* 1 MiB / (32768 + 88) */

enum { P_A, P_B, P_C, P_D, P_FIRST_BOUND, NBOUND = 10, NPROMPTS = P_FIRST_BOUND + NBOUND };

/* A pool the test uses: its name, blocks and host tier's units. */
struct pool_spec {
    const char *name;
    uint32_t blocks, host_units;
};

static const struct pool_spec tiers_pool = { "tiers", 8, 4 };
static const struct pool_spec bound_pool = { "bound", 24, 16 };
static const struct pool_spec broken_pool = { "broken", 8, 4 };
static const struct pool_spec after_pool = { "after", 8, 4 };

static struct pagedd daemon_;
static char file_dir[512];
static struct kp_prompt *prompts;   /* shared with children (MAP_SHARED) */
static struct kp_found *report;     /* a child's report (MAP_SHARED) */
static const struct pool_spec *cur; /* the pool the children attach to */

/* Connects a libpaged client; returns it or NULL. */
static paged_client *connect_client(const char *name)
{
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = name, .timeout_ms = 10000 };
    paged_client *c = NULL;
    return paged_client_connect(&o, &c) == PAGED_OK ? c : NULL;
}

/* Creates pool spec on client c; returns the status. */
static int create_pool(paged_client *c, const struct pool_spec *spec)
{
    paged_pool_desc d = {
        .name = spec->name, .num_layers = KP_L, .num_kv_heads = KP_H, .head_dim = KP_D, .block_size = KP_B,
        .dtype = PAGED_DTYPE_F32, .num_blocks = spec->blocks, .mode = 0600,
        .host_tier_bytes = (uint64_t) spec->host_units * UNIT_BYTES,
    };
    paged_pool *p = NULL;
    return paged_pool_create(c, &d, &p);
}

/* Child: publishes prompt k, its tokens and seed its own (report->status). */
static void child_publish(paged_pool *p, int k)
{
    report->status = kp_publish(p, cur->blocks, &prompts[k], 1000 * (k + 1), (uint64_t) k + 1, SALT);
}

/* Child: looks prompt k up and checks it against what was published (*report). */
static void child_check(paged_pool *p, int k)
{
    kp_check(p, cur->blocks, &prompts[k], SALT, report);
}

/* Child: takes every block of the pool, pushing what is cached to the host tier, and lets
 * them go (report->status). */
static void child_pressure(paged_pool *p, int k)
{
    (void) k;
    int32_t ids[64];
    report->status = paged_alloc(p, cur->blocks, ids);
    if (report->status == PAGED_OK)
        report->status = paged_free(p, cur->blocks, ids);
}

/* Runs fn(pool, k) in a child with a client of its own attached to the current pool, the
 * report cleared first. Returns nothing. */
static void in_child(void (*fn)(paged_pool *, int), int k)
{
    memset(report, 0, sizeof *report);
    report->found = -999;
    kp_in_child(daemon_.socket, "shutdown-child", cur->name, fn, k, &report->status);
}

/* A holder child's work: publishes prompt *(int *) ctx in p and takes its blocks again (a
 * LOOKUP). Returns the status. */
static int publish_prompt_held(paged_pool *p, void *ctx)
{
    const int k = *(const int *) ctx;
    int32_t ids[NB];
    int rc = kp_publish(p, cur->blocks, &prompts[k], 1000 * (k + 1), (uint64_t) k + 1, SALT);
    if (rc == PAGED_OK && paged_lookup(p, NULL, SALT, NB, prompts[k].tokens, ids) != NB)
        rc = PAGED_E_NOENT;
    return rc;
}

/* Forks a child that publishes prompt k and then holds its blocks (a LOOKUP) until the
 * returned descriptor is closed; *pid gets the child. Returns the descriptor. */
static int publish_and_hold(int k, pid_t *pid)
{
    return kp_hold_in_child(daemon_.socket, cur->name, publish_prompt_held, &k, pid);
}

/* Returns the current pool's LIST item, once pred(item, want) holds (10 s at most; zeroed
 * when it cannot be had). */
static struct pcore_pool_item item_until(struct rc_client *ctl, int (*pred)(const struct pcore_pool_item *, uint32_t),
                                         uint32_t want)
{
    struct pcore_pool_item it;
    memset(&it, 0, sizeof it);
    if (rc_pool_item_until(ctl, cur->name, pred, want, 10000, &it) != 0)
        diag("pool '%s': LIST never met the condition (host %u, files %u, cached %u, referenced %u)", cur->name,
             it.host_stored, it.file_units, it.cached, it.referenced);
    return it;
}

/* item_until's condition: returns whether the host tier stores want units and nothing is
 * referenced. */
static int host_stored_is(const struct pcore_pool_item *it, uint32_t want)
{
    return it->host_stored == want && it->referenced == 0;
}

/* item_until's condition: returns whether the pool holds want blocks referenced. */
static int referenced_is(const struct pcore_pool_item *it, uint32_t want)
{
    return it->referenced == want;
}

/* item_until's condition: returns 1, for any item. */
static int any_item(const struct pcore_pool_item *it, uint32_t want)
{
    (void) it, (void) want;
    return 1;
}

/* Starts the daemon on the file tier with arg (NULL: none) added; bails when it does not. */
static void start_daemon(const char *arg)
{
    char dir[600];
    snprintf(dir, sizeof dir, "--file-tier=%s", file_dir);
    const char *args[] = { dir, arg, NULL };
    if (pagedd_start(&daemon_, args, NULL, NULL) != 0)
        bail("pagedd did not start");
}

/* Writes the path of the current pool's directory in the file tier to path. */
static void pool_dir(char *path, size_t len)
{
    snprintf(path, len, "%s/%u-%s", file_dir, (unsigned) getuid(), cur->name);
}

/* Writes the path of the unit file of block b of prompt k to path. */
static void unit_file(int k, int b, char *path, size_t len)
{
    paged_hash h[NB];
    char dir[600];
    paged_hash_blocks(NULL, prompts[k].tokens, NB * KP_B, KP_B, SALT, h);
    pool_dir(dir, sizeof dir);
    snprintf(path, len, "%s/%08x-%016llx%016llx.unit", dir, (unsigned) getuid(), (unsigned long long) h[b].hi,
             (unsigned long long) h[b].lo);
}

/* Counts the current pool's unit files into *units and its other files into *others;
 * returns nothing. */
static void count_files(int *units, int *others)
{
    char dir[600];
    pool_dir(dir, sizeof dir);
    *units = *others = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (n > 5 && strcmp(e->d_name + n - 5, ".unit") == 0)
            (*units)++;
        else
            (*others)++;
    }
    closedir(d);
}

/* Returns the modification time of block b of prompt k's unit file in ns, or 0 (none). */
static uint64_t file_mtime(int k, int b)
{
    char path[1024];
    struct stat st;
    unit_file(k, b, path, sizeof path);
    if (stat(path, &st) != 0)
        return 0;
    return (uint64_t) st.st_mtim.tv_sec * 1000000000u + (uint64_t) st.st_mtim.tv_nsec;
}

/* Checks a child's look-up of prompt k: want blocks found with the published bytes, and (all
 * found) the published decode. */
static void check_found(int k, int want, const char *what)
{
    in_child(child_check, k);
    kp_expect_found(report, want, what, "a decode over them gives the one before the restart");
}

/* Stops the daemon orderly; reports it. */
static void stop_daemon(const char *what)
{
    is_int(0, WEXITSTATUS(pagedd_stop(&daemon_)), "%s: the daemon stops orderly", what);
}

/* Blocks in every place: A only in files, B only in the host tier, C cached in the pool, D
 * referenced; the shutdown writes B, C and D, and the next daemon serves all four. */
static void test_everywhere(void)
{
    cur = &tiers_pool;
    start_daemon(NULL);
    paged_client *c = connect_client("shutdown");
    if (c == NULL || create_pool(c, cur) != PAGED_OK)
        bail("cannot create the pool: %s", c != NULL ? paged_client_error(c) : "no connection");
    kp_on_cuda = paged_client_backend(c) == PAGED_BACKEND_CUDA;
    struct rc_client ctl;
    if (rc_connect(daemon_.socket, "ctl", PCORE_HELLO_CONTROL, &ctl) != 0)
        bail("control connection");
    in_child(child_publish, P_A);
    is_int(PAGED_OK, report->status, "prompt A published");
    in_child(child_pressure, 0);
    item_until(&ctl, host_stored_is, NB);
    in_child(child_publish, P_B);
    is_int(PAGED_OK, report->status, "prompt B published");
    in_child(child_pressure, 0);
    item_until(&ctl, host_stored_is, NB);
    in_child(child_publish, P_C);
    is_int(PAGED_OK, report->status, "prompt C published");
    pid_t holder;
    int release = publish_and_hold(P_D, &holder);
    struct pcore_pool_item it = item_until(&ctl, referenced_is, NB);
    ok(it.file_units == NB && it.host_stored == NB && it.cached == NB && it.referenced == NB,
       "before: A in files, B in the host tier, C cached, D referenced (%u files, %u host, %u cached, %u held)",
       it.file_units, it.host_stored, it.cached, it.referenced);
    int units, others;
    count_files(&units, &others);
    is_int(NB, units, "before: %d unit files on disk", NB);
    rc_close(&ctl);
    paged_client_close(c);

    stop_daemon("shutdown");
    close(release);
    waitpid(holder, NULL, 0);
    count_files(&units, &others);
    ok(units == 4 * NB && others == 0, "shutdown: %d unit files on disk, nothing else (%d, %d)", 4 * NB, units,
       others);
    ok(pagedd_log_contains(&daemon_, "pool 'tiers': wrote 12 units to the file tier in"),
       "shutdown: the log says the pool wrote 12 units");
    ok(pagedd_log_contains(&daemon_, "(8 of the pool's blocks, 4 of the host tier's)"),
       "shutdown: 8 of them the pool's blocks, 4 the host tier's");

    start_daemon(NULL);
    c = connect_client("restarted");
    is_int(PAGED_OK, c != NULL ? create_pool(c, cur) : PAGED_E_NOTCONN, "restart: the pool created again");
    if (rc_connect(daemon_.socket, "ctl", PCORE_HELLO_CONTROL, &ctl) != 0)
        bail("control connection");
    it = item_until(&ctl, any_item, 0);
    is_int(4 * NB, (int) it.file_units, "restart: the file tier holds %d units", 4 * NB);
    check_found(P_A, NB, "restart: A, from files before the shutdown");
    check_found(P_B, NB, "restart: B, from the host tier");
    check_found(P_C, NB, "restart: C, cached in the pool");
    check_found(P_D, NB, "restart: D, referenced in the pool");
    rc_close(&ctl);
    paged_client_close(c);
    stop_daemon("again");
    ok(pagedd_log_contains(&daemon_, "pool 'tiers': wrote 0 units to the file tier in"),
       "again: a shutdown with everything in files writes nothing");
    count_files(&units, &others);
    is_int(4 * NB, units, "again: still %d unit files", 4 * NB);
}

/* Returns the rank of block b of bound prompt j (0..NBOUND) among the pool's and the host
 * tier's units, most recently used first: prompts 4 to 9 in the pool, 3 and 2 in the host
 * tier (and so on), the last block of a prompt the most recent. */
static int rank_of(int j, int b)
{
    return (NBOUND - 1 - j) * NB + (NB - 1 - b);
}

/* file-tier-mb too small for everything: the most recently used units are written, the
 * newest file the most recent unit. */
static void test_bound(void)
{
    cur = &bound_pool;
    start_daemon("--file-tier-mb=1");
    paged_client *c = connect_client("bound");
    if (c == NULL || create_pool(c, cur) != PAGED_OK)
        bail("cannot create the pool: %s", c != NULL ? paged_client_error(c) : "no connection");
    struct rc_client ctl;
    if (rc_connect(daemon_.socket, "ctl", PCORE_HELLO_CONTROL, &ctl) != 0)
        bail("control connection");
    int published = 0;
    for (int j = 0; j < NBOUND; j++) {
        in_child(child_publish, P_FIRST_BOUND + j);
        published += report->status == PAGED_OK;
    }
    is_int(NBOUND, published, "bound: %d prompts published, the first 4 pushed to the host tier", NBOUND);
    struct pcore_pool_item it = item_until(&ctl, host_stored_is, 16);
    ok(it.cached == 24 && it.file_units == 0, "bound: 24 blocks cached, 16 units in the host tier, no file (%u, %u)",
       it.cached, it.file_units);
    rc_close(&ctl);
    paged_client_close(c);
    stop_daemon("bound");

    int units, others;
    count_files(&units, &others);
    is_int(BOUND_FILES, units, "bound: %d unit files, what 1 MiB holds", BOUND_FILES);
    int right = 0, order = 1;
    uint64_t newer = UINT64_MAX;
    for (int r = 0; r < NBOUND * NB; r++)
        for (int j = 0; j < NBOUND; j++)
            for (int b = 0; b < NB; b++) {
                if (rank_of(j, b) != r)
                    continue;
                const uint64_t t = file_mtime(P_FIRST_BOUND + j, b);
                right += (r < BOUND_FILES) == (t != 0);
                if (r < BOUND_FILES) {
                    order = order && t != 0 && t <= newer;  /* equal: a file system of coarse times */
                    newer = t;
                }
            }
    is_int(NBOUND * NB, right, "bound: the %d most recently used units have files, the %d others none",
           BOUND_FILES, NBOUND * NB - BOUND_FILES);
    ok(order, "bound: the files are dated in the order of their use, the most recent newest");
    ok(pagedd_log_contains(&daemon_, "pool 'bound': wrote 31 units to the file tier in")
           && pagedd_log_contains(&daemon_, "(24 of the pool's blocks, 7 of the host tier's); 9 left out for "
                                  "file-tier-mb"),
       "bound: the log says 31 written, 24 of the pool's and 7 of the host tier's, 9 left out");

    start_daemon(NULL);
    c = connect_client("bound-again");
    is_int(PAGED_OK, c != NULL ? create_pool(c, cur) : PAGED_E_NOTCONN, "bound: the pool created again");
    for (int j = NBOUND - 1; j >= 0; j--) {
        char what[64];
        snprintf(what, sizeof what, "bound: prompt %d", j);
        check_found(P_FIRST_BOUND + j, j >= 3 ? NB : 0, what);
    }
    is_int(PAGED_OK, paged_pool_destroy(c, cur->name), "bound: the pool destroyed");
    paged_client_close(c);
    stop_daemon("destroyed");
    char dir[600];
    struct stat st;
    pool_dir(dir, sizeof dir);
    ok(stat(dir, &st) != 0, "destroyed: its files are gone, and the shutdown wrote none");
}

/* Publishes prompt k into pool spec, created on c; reports it. */
static void publish_into(paged_client *c, const struct pool_spec *spec, int k)
{
    cur = spec;
    is_int(PAGED_OK, create_pool(c, spec), "failure: pool '%s' created", spec->name);
    in_child(child_publish, k);
    is_int(PAGED_OK, report->status, "failure: a prompt published in pool '%s'", spec->name);
}

/* A pool whose writes fail logs it once, and the shutdown goes on: the next pool writes, the
 * daemon exits 0. The pool's directory is replaced by a plain file, which stops root too. */
static void test_failure(void)
{
    start_daemon(NULL);
    paged_client *c = connect_client("failure");
    if (c == NULL)
        bail("no connection");
    publish_into(c, &after_pool, P_A);      /* the pools are written newest first: "broken", then this */
    publish_into(c, &broken_pool, P_B);
    paged_client_close(c);
    char dir[600], moved[640];
    pool_dir(dir, sizeof dir);
    snprintf(moved, sizeof moved, "%s.moved", dir);
    int fd = rename(dir, moved) == 0 ? open(dir, O_CREAT | O_WRONLY, 0600) : -1;
    ok(fd >= 0, "failure: the directory of pool 'broken' replaced by a plain file");
    if (fd >= 0)
        close(fd);
    stop_daemon("failure");
    is_int(1, pagedd_log_count(&daemon_, "pool 'broken': 4 units not written to the file tier: cannot create"),
           "failure: the log says once that the 4 units were not written, and why");
    ok(pagedd_log_contains(&daemon_, "pool 'broken': wrote 0 units to the file tier in"),
       "failure: and that the pool wrote none");
    cur = &after_pool;
    int units, others;
    count_files(&units, &others);
    ok(units == NB && pagedd_log_contains(&daemon_, "pool 'after': wrote 4 units to the file tier in"),
       "failure: the next pool still wrote its %d units (%d files)", NB, units);
}

/* Runs the tests. */
int main(void)
{
    plan_lazy();
    prompts = mmap(NULL, sizeof *prompts * NPROMPTS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    report = mmap(NULL, sizeof *report, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (prompts == MAP_FAILED || report == MAP_FAILED)
        bail("mmap");
    pagedd_mkdir(&daemon_);
    snprintf(file_dir, sizeof file_dir, "%s/units", daemon_.dir);
    if (mkdir(file_dir, 0700) != 0)
        bail("mkdir %s", file_dir);
    test_everywhere();
    test_bound();
    test_failure();
    pagedd_cleanup(&daemon_);
    return 0;
}
