/* tiers-t.c: the host and file tiers with a real pagedd and client processes: offload, reload, restart, damage. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

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

/* The pool: 2 layers, 2 KV heads, head_dim 64, blocks of 16 tokens, f32, 8 blocks; a unit
 * (one block, every layer's K and V) is 2 * 2 * 2 * 16 * 64 * 4 = 32 KiB, and the host tier
 * holds 4 of them. */
#define L KP_L
#define H KP_H
#define D KP_D
#define B KP_B
#define N 8
#define NB KP_NB
#define HOST_UNITS 4
#define UNIT KP_UNIT
#define SALT 11u
#define POOL "tiers"

enum { P_A, P_B, P_C, NPROMPTS };

/* What a child reports through shared memory. */
struct report {
    struct kp_found f;          /* what its LOOKUP found (found: a count of its own elsewhere) */
    paged_prefix_counts mine;   /* the child's own prefix figures after its LOOKUP */
};

/* What the two children of the race report through shared memory. */
struct race {
    int reloader_done;          /* set by the reloader when it ends (atomic) */
    int rounds, rounds_ok;      /* the reloader's rounds, and those whose reload was whole and right */
    int decodes, decodes_same;  /* the racer's decodes, and those equal to its prompt's outputs */
    int racer_status, reloader_status;
};

static struct pagedd daemon_;
static struct race *race;
static char file_dir[512];
static struct kp_prompt *prompts;   /* shared with children (MAP_SHARED) */
static struct report *report;

/* Connects a libpaged client; returns it or NULL. */
static paged_client *connect_client(const char *name)
{
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = name, .timeout_ms = 10000 };
    paged_client *c = NULL;
    return paged_client_connect(&o, &c) == PAGED_OK ? c : NULL;
}

/* Child: publishes prompt k (report->f.status). CUDA is used in child processes only: a
 * process that forks must not have set it up. */
static void child_publish(paged_pool *p, int k)
{
    report->f.status = kp_publish(p, N, &prompts[k], 1000 * (k + 1), (uint64_t) k + 1, SALT);
}

/* Child: looks prompt k up and checks what it found against what was published, into *report. */
static void child_check(paged_pool *p, int k)
{
    kp_check(p, N, &prompts[k], SALT, &report->f);
    if (paged_prefix_stats(kp_child_client, &report->mine) != PAGED_OK)
        report->f.status = PAGED_E_PROTO;
}

/* Child: takes every block of the pool (pushing whatever is cached out to the tiers), then
 * lets them go; report->f.status is the allocation's. */
static void child_pressure(paged_pool *p, int k)
{
    (void) k;
    int32_t ids[N];
    report->f.status = paged_alloc(p, N, ids);
    if (report->f.status == PAGED_OK)
        report->f.status = paged_free(p, N, ids);
}

/* Runs fn(pool, k) in a child process with a client of its own attached to POOL, after
 * clearing the report. Returns the child's exit status (0: it ran). */
static int in_child(void (*fn)(paged_pool *, int), int k)
{
    memset(report, 0, sizeof *report);
    report->f.found = -999;
    return kp_in_child(daemon_.socket, "tiers-child", POOL, fn, k, &report->f.status);
}

/* rc_pool_item_until's conditions. */
static int host_stored_is(const struct pcore_pool_item *it, uint32_t want)
{
    return it->host_stored == want && it->referenced == 0;
}

/* Returns POOL's LIST item (zeroed when it cannot be had). */
static struct pcore_pool_item pool_item(struct rc_client *ctl)
{
    struct pcore_pool_item it;
    memset(&it, 0, sizeof it);
    if (rc_pool_item(ctl, POOL, &it) != 0)
        diag("no LIST item for " POOL);
    return it;
}

/* Waits until POOL's host tier stores want units and nothing is referenced; reports it. */
static struct pcore_pool_item wait_host(struct rc_client *ctl, uint32_t want, const char *what)
{
    struct pcore_pool_item it;
    int rc = rc_pool_item_until(ctl, POOL, host_stored_is, want, 10000, &it);
    if (!ok(rc == 0, "%s: the host tier stores %u units", what, want))
        diag("host_stored %u, referenced %u", it.host_stored, it.referenced);
    return it;
}

/* Creates POOL with a host tier of HOST_UNITS units on client c; returns the status. */
static int create_pool(paged_client *c, paged_pool **p)
{
    paged_pool_desc d = {
        .name = POOL, .num_layers = L, .num_kv_heads = H, .head_dim = D, .block_size = B,
        .dtype = PAGED_DTYPE_F32, .num_blocks = N, .mode = 0600,
        .host_tier_bytes = (uint64_t) HOST_UNITS * UNIT * sizeof(float),
    };
    return paged_pool_create(c, &d, p);
}

/* Checks a child's look-up of prompt k: want blocks found, with the published bytes, and
 * (all found) the published decodes. */
static void check_found(int k, int want, const char *what)
{
    in_child(child_check, k);
    kp_expect_found(&report->f, want, what, "decoding over them gives the published outputs, bit for bit");
}

/* Starts the daemon with the file tier; bails when it does not start. */
static void start_daemon(void)
{
    char arg[600];
    snprintf(arg, sizeof arg, "--file-tier=%s", file_dir);
    const char *args[] = { arg, NULL };
    if (pagedd_start(&daemon_, args, NULL, NULL) != 0)
        bail("pagedd did not start");
}

/* Writes the path of the unit file of block b of prompt k (in the test's uid's scope) to
 * path. Returns nothing. */
static void unit_file(int k, int b, char *path, size_t len)
{
    paged_hash h[NB];
    paged_hash_blocks(NULL, prompts[k].tokens, NB * B, B, SALT, h);
    snprintf(path, len, "%s/%u-%s/%08x-%016llx%016llx.unit", file_dir, (unsigned) getuid(), POOL,
             (unsigned) getuid(), (unsigned long long) h[b].hi, (unsigned long long) h[b].lo);
}

/* One block event the test expects: what, where, and which block of which prompt. */
struct want {
    uint32_t action, tier;
    int prompt, block;
};

static paged_events *sub;        /* a block-event subscriber for the whole first daemon */

/* Reads block events from sub until it has n entries (10 s at most) and checks that they are
 * exactly want[0..n) in some order: each expected entry once, nothing else. Reports it. */
static void expect_events(const struct want *want, int n, const char *what)
{
    paged_block_event got[64];
    int have = 0, bad = 0;
    for (int rounds = 0; have < n && rounds < 64; rounds++) {
        paged_event e;
        if (paged_events_next(sub, &e, 10000) != PAGED_OK)
            break;
        if (e.type != PAGED_EVENT_BLOCKS || strcmp(e.pool, POOL) != 0)
            continue;
        for (uint32_t i = 0; i < e.num_blocks; i++)
            if (have < 64)
                got[have++] = e.blocks[i];
            else
                bad++;
    }
    int used[64] = { 0 };
    for (int w = 0; w < n; w++) {
        paged_hash h[NB];
        paged_hash_blocks(NULL, prompts[want[w].prompt].tokens, NB * B, B, SALT, h);
        int match = -1;
        for (int g = 0; g < have && match < 0; g++)
            if (!used[g] && got[g].action == want[w].action && got[g].tier == want[w].tier
                && got[g].tenant == (uint32_t) getuid() && got[g].hash.lo == h[want[w].block].lo
                && got[g].hash.hi == h[want[w].block].hi)
                match = g;
        if (match < 0) {
            if (bad++ == 0)
                diag("%s: no event %u tier %u for block %d of prompt %d", what, want[w].action, want[w].tier,
                     want[w].block, want[w].prompt);
        } else
            used[match] = 1;
    }
    ok(bad == 0 && have == n, "%s: the block events are exactly the %d expected (%d read)", what, n, have);
}

/* Fills want with one entry (action, tier) for each block of prompt; returns NB. */
static int each_block(struct want *want, uint32_t action, uint32_t tier, int prompt)
{
    for (int b = 0; b < NB; b++)
        want[b] = (struct want) { action, tier, prompt, b };
    return NB;
}

/* Offload to the host tier and reload from it: bit-identical, same decode, counted. */
static void test_host(paged_pool *p, struct rc_client *ctl)
{
    struct want want[32];
    in_child(child_publish, P_A);
    is_int(PAGED_OK, report->f.status, "host: prompt A written, decoded and published");
    expect_events(want, each_block(want, PAGED_BLOCK_STORED, PAGED_TIER_POOL, P_A), "host: publish");
    struct pcore_pool_item it = pool_item(ctl);
    ok(it.host_units == HOST_UNITS && it.host_stored == 0 && it.cached == NB,
       "host: LIST shows a host tier of %d units, empty, and A's %d blocks cached", HOST_UNITS, NB);
    in_child(child_pressure, 0);
    is_int(PAGED_OK, report->f.status, "host: a client takes the whole pool");
    it = wait_host(ctl, NB, "host: A pushed out of the pool");
    expect_events(want, each_block(want, PAGED_BLOCK_OFFLOADED, PAGED_TIER_HOST, P_A), "host: offload");
    ok(it.offloaded_bytes == (uint64_t) NB * UNIT * sizeof(float) && it.cached == 0,
       "host: %d units' bytes offloaded (%llu), nothing cached in the pool", NB,
       (unsigned long long) it.offloaded_bytes);
    check_found(P_A, NB, "host reload");
    ok(report->mine.lookups == 1 && report->mine.lookup_tokens == NB * B && report->mine.host_hit_tokens == NB * B
           && report->mine.pool_hit_tokens == 0 && report->mine.reloaded_bytes == (uint64_t) NB * UNIT * sizeof(float),
       "host reload: the client's own figures: one lookup of %d tokens, all from the host tier", NB * B);
    expect_events(want, each_block(want, PAGED_BLOCK_RELOADED, PAGED_TIER_HOST, P_A), "host reload");
    it = wait_host(ctl, 0, "host reload");
    ok(it.host_hit_tokens == NB * B && it.reloads == 1 && it.reloaded_bytes == it.offloaded_bytes,
       "host reload: counted: %d tokens from the host tier, one reload, the bytes back (%llu, %llu, %llu)",
       NB * B, (unsigned long long) it.host_hit_tokens, (unsigned long long) it.reloads,
       (unsigned long long) it.reloaded_bytes);
    ok(it.cached == NB, "host reload: A's blocks are published in the pool again (%u cached)", it.cached);
    paged_pool_counts pc;
    int rc = paged_pool_stats(p, &pc);
    ok(rc == PAGED_OK && pc.host_hit_tokens == it.host_hit_tokens && pc.offloaded_bytes == it.offloaded_bytes
           && pc.reloads == 1 && pc.host_units == HOST_UNITS && pc.cached == NB && pc.lookup_tokens == it.lookup_tokens,
       "host reload: paged_pool_stats says what LIST says (%d)", rc);
}

/* Through the host tier to the file tier and back. */
static void test_file(struct rc_client *ctl)
{
    struct want want[32];
    int n;
    in_child(child_publish, P_B);
    is_int(PAGED_OK, report->f.status, "file: prompt B written and published");
    expect_events(want, each_block(want, PAGED_BLOCK_STORED, PAGED_TIER_POOL, P_B), "file: publish B");
    /* A (older) leaves the pool first, then B; B's units push A's out of the host tier. */
    in_child(child_pressure, 0);
    is_int(PAGED_OK, report->f.status, "file: a client takes the whole pool");
    struct pcore_pool_item it = wait_host(ctl, NB, "file: B in the host tier");
    n = each_block(want, PAGED_BLOCK_OFFLOADED, PAGED_TIER_HOST, P_A);
    n += each_block(want + n, PAGED_BLOCK_OFFLOADED, PAGED_TIER_HOST, P_B);
    n += each_block(want + n, PAGED_BLOCK_OFFLOADED, PAGED_TIER_FILE, P_A);
    expect_events(want, n, "file: A to files through the host tier, B to the host tier");
    ok(it.file_units == NB && it.written_bytes == (uint64_t) NB * UNIT * sizeof(float),
       "file: A's %d units written to files (%u files, %llu bytes)", NB, it.file_units,
       (unsigned long long) it.written_bytes);
    check_found(P_A, NB, "file reload");
    ok(report->mine.file_hit_tokens == NB * B && report->mine.host_hit_tokens == 0,
       "file reload: the client's own figures count %d tokens from the file tier", NB * B);
    /* A's units come back through the host tier two at a time (a round takes half of it), the
     * first two pushing B's two oldest out to files. */
    n = each_block(want, PAGED_BLOCK_RELOADED, PAGED_TIER_FILE, P_A);
    want[n++] = (struct want) { PAGED_BLOCK_OFFLOADED, PAGED_TIER_FILE, P_B, 0 };
    want[n++] = (struct want) { PAGED_BLOCK_OFFLOADED, PAGED_TIER_FILE, P_B, 1 };
    expect_events(want, n, "file reload");
    it = pool_item(ctl);
    is_int(NB * B, (int) it.file_hit_tokens, "file reload: %d tokens counted from the file tier", NB * B);
    check_found(P_B, NB, "file: B, half pushed on to files meanwhile");
    n = each_block(want, PAGED_BLOCK_RELOADED, PAGED_TIER_FILE, P_B);
    want[2].tier = want[3].tier = PAGED_TIER_HOST;
    expect_events(want, n, "file: B reloaded from files and the host tier");
}

/* A restarted daemon serves the file tier; damaged files are refused. */
static void test_restart(void)
{
    /* A's units are in files (the file tier keeps what it wrote after a reload), and the
     * orderly stop wrote what the pool and the host tier held (tiers-shutdown-t checks it). */
    is_int(0, WEXITSTATUS(pagedd_stop(&daemon_)), "restart: the daemon stops");
    start_daemon();
    paged_client *c = connect_client("tiers-restart");
    paged_pool *p = NULL;
    is_int(PAGED_OK, c != NULL ? create_pool(c, &p) : PAGED_E_NOTCONN, "restart: the pool created again");
    struct rc_client ctl;
    if (rc_connect(daemon_.socket, "ctl", PCORE_HELLO_CONTROL, &ctl) != 0)
        bail("control connection");
    struct pcore_pool_item it = pool_item(&ctl);
    ok(it.file_units >= NB, "restart: the file tier's units are found (%u)", it.file_units);
    check_found(P_A, NB, "restart: A from the files");

    /* Damage: stop, flip a payload byte of one file and truncate another, start again. */
    is_int(0, WEXITSTATUS(pagedd_stop(&daemon_)), "damage: the daemon stops");
    rc_close(&ctl);
    paged_client_close(c);
    char path[1024];
    int flipped = 0, truncated = 0;
    unit_file(P_A, 1, path, sizeof path);
    int fd = open(path, O_RDWR);
    struct stat st;
    unsigned char byte;
    if (fd >= 0 && fstat(fd, &st) == 0 && pread(fd, &byte, 1, st.st_size - 7) == 1) {
        byte ^= 0x20;
        flipped = pwrite(fd, &byte, 1, st.st_size - 7) == 1;
    }
    if (fd >= 0)
        close(fd);
    unit_file(P_A, 3, path, sizeof path);
    truncated = stat(path, &st) == 0 && truncate(path, st.st_size - 100) == 0;
    ok(flipped && truncated, "damage: the payload of A's second block's file flipped, its fourth's truncated");
    start_daemon();
    c = connect_client("tiers-damage");
    is_int(PAGED_OK, c != NULL ? create_pool(c, &p) : PAGED_E_NOTCONN, "damage: the pool created again");
    if (rc_connect(daemon_.socket, "ctl", PCORE_HELLO_CONTROL, &ctl) != 0)
        bail("control connection");
    it = pool_item(&ctl);
    ok(it.tier_damaged == 1, "damage: the truncated file was refused when the pool opened its tier (%llu)",
       (unsigned long long) it.tier_damaged);
    in_child(child_check, P_A);
    is_int(1, report->f.found, "damage: A is found up to its damaged second block");
    ok(report->f.same_bytes, "damage: what A finds holds the published bytes");
    it = pool_item(&ctl);
    ok(it.tier_damaged == 2, "damage: the flipped file was refused at its reload (%llu damaged)",
       (unsigned long long) it.tier_damaged);
    ok(pagedd_log_contains(&daemon_, "checksum"), "damage: the log names the checksum");

    /* Evict by prefix takes A out of every tier. */
    int found = paged_prefix_evict(p, NULL, SALT, NB, prompts[P_A].tokens);
    ok(found >= 0, "evict: A's prefix evicted (%d blocks)", found);
    check_found(P_A, 0, "evict");
    rc_close(&ctl);
    paged_client_close(c);
}

/* The racer: publishes prompt C, holds it, and decodes over it until the reloader is done
 * (at most 20000 times), counting the decodes equal to the published outputs; writes a byte
 * to ready once it holds C. */
static void racer(paged_pool *p, int ready)
{
    const struct kp_prompt *pr = &prompts[P_C];
    int32_t ids[NB];
    race->racer_status = kp_publish(p, N, &prompts[P_C], 3000, 3, SALT);
    if (race->racer_status == PAGED_OK && paged_lookup(p, NULL, SALT, NB, pr->tokens, ids) != NB)
        race->racer_status = PAGED_E_NOENT;
    if (write(ready, "r", 1) != 1 || race->racer_status != PAGED_OK)
        return;
    for (int i = 0; i < 20000 && !__atomic_load_n(&race->reloader_done, __ATOMIC_ACQUIRE); i++) {
        float out[L][H * D];
        int rc = kp_decode(p, pr, ids, out);
        race->decodes++;
        race->decodes_same += rc == PAGED_OK && memcmp(out, pr->out, sizeof out) == 0;
    }
}

/* The reloader: 16 rounds of looking A up (reloading it), checking it and letting it go, then
 * pushing it out of the pool again; sets reloader_done at the end. */
static void reloader(paged_pool *p)
{
    const struct kp_prompt *pr = &prompts[P_A];
    void *base = NULL;
    race->reloader_status = paged_pool_map(p, &base);
    for (int r = 0; r < 16 && race->reloader_status == PAGED_OK; r++) {
        int32_t ids[NB], take[N - NB];
        race->rounds++;
        int found = paged_lookup(p, NULL, SALT, NB, pr->tokens, ids), same = found == NB;
        static float unit[UNIT];
        for (int b = 0; b < found; b++) {
            kp_read_unit(base, N, ids[b], unit);
            same = same && memcmp(unit, pr->units[b], sizeof unit) == 0;
        }
        race->rounds_ok += same;
        if (found > 0)
            (void) paged_free(p, (uint32_t) found, ids);
        race->reloader_status = paged_alloc(p, N - NB, take);
        if (race->reloader_status == PAGED_OK)
            race->reloader_status = paged_free(p, N - NB, take);
    }
    __atomic_store_n(&race->reloader_done, 1, __ATOMIC_RELEASE);
}

/* Forks a child with a client of its own attached to POOL running the racer (ready: the pipe
 * it writes to) or the reloader (ready < 0). Returns its pid. */
static pid_t spawn_racer(int ready)
{
    pid_t pid = fork();
    if (pid < 0)
        bail("fork");
    if (pid == 0) {
        paged_client *c = connect_client(ready >= 0 ? "racer" : "reloader");
        paged_pool *p = NULL;
        int rc = c != NULL ? paged_pool_attach(c, POOL, &p) : PAGED_E_NOTCONN;
        if (rc == PAGED_OK && ready >= 0)
            racer(p, ready);
        else if (rc == PAGED_OK)
            reloader(p);
        else if (ready >= 0)
            race->racer_status = rc;
        else
            race->reloader_status = rc;
        if (ready >= 0 && rc != PAGED_OK)
            (void) write(ready, "r", 1);
        paged_client_close(c);
        _exit(0);
    }
    return pid;
}

/* Reloads racing with another client's decodes: neither sees the other's work. */
static void test_race(struct rc_client *ctl)
{
    memset(race, 0, sizeof *race);
    int fds[2];
    if (pipe(fds) != 0)
        bail("pipe");
    pid_t r = spawn_racer(fds[1]);
    char byte;
    if (read(fds[0], &byte, 1) != 1)
        diag("the racer wrote nothing");
    close(fds[0]);
    close(fds[1]);
    pid_t l = spawn_racer(-1);
    waitpid(l, NULL, 0);
    waitpid(r, NULL, 0);
    is_int(PAGED_OK, race->racer_status, "race: the racer published and holds prompt C");
    is_int(PAGED_OK, race->reloader_status, "race: the reloader's calls succeeded");
    ok(race->rounds == 16 && race->rounds_ok == 16, "race: 16 of 16 reloads of A were whole and right (%d of %d)",
       race->rounds_ok, race->rounds);
    ok(race->decodes > 0 && race->decodes_same == race->decodes,
       "race: all %d of the racer's decodes over C, made meanwhile, gave C's outputs", race->decodes);
    struct pcore_pool_item it;
    int rc = rc_pool_item_until(ctl, POOL, host_stored_is, NB, 10000, &it);
    ok(rc == 0 && it.free + it.cached == N,
       "race: afterwards nothing is held and no block is lost (%u free, %u cached)", it.free, it.cached);
}

/* rc_pool_item_until's condition: nothing in the pool or the host tier. */
static int all_dropped(const struct pcore_pool_item *it, uint32_t want)
{
    (void) want;
    return it->cached == 0 && it->referenced == 0 && it->host_stored == 0;
}

/* Child: takes every block it can, one at a time (N at most), and lets them go; report->f.found
 * is how many it got. */
static void child_take_all(paged_pool *p, int k)
{
    (void) k;
    int32_t ids[N];
    int n = 0;
    while (n < N && paged_alloc(p, 1, &ids[n]) == PAGED_OK)
        n++;
    report->f.found = n;
    report->f.status = n > 0 ? paged_free(p, (uint32_t) n, ids) : PAGED_OK;
}

/* A pinned prefix stays in the pool: pressure takes the rest and never offloads it. */
static void test_pin(paged_client *c, paged_pool *p, struct rc_client *ctl)
{
    (void) c;
    in_child(child_check, P_C);   /* C into the pool (the host tier's), then cached */
    is_int(NB, report->f.found, "pin: C is in the pool");
    is_int(NB, paged_prefix_pin(p, NULL, SALT, NB, prompts[P_C].tokens), "pin: C's 4 blocks pinned");
    struct pcore_pool_item before = pool_item(ctl);
    in_child(child_take_all, 0);
    is_int(N - NB, report->f.found, "pin: a client takes every block but C's");
    struct pcore_pool_item it;
    int rc = rc_pool_item_until(ctl, POOL, rc_pool_free_is, N - NB, 10000, &it);
    const uint64_t moved = it.offloaded_bytes - before.offloaded_bytes;
    ok(rc == 0 && it.pinned == NB && moved == (uint64_t) (N - NB - before.free) * UNIT * sizeof(float),
       "pin: C stays pinned in the pool; the %u other blocks cached went to the host tier (%llu bytes)",
       before.cached - NB, (unsigned long long) moved);
    check_found(P_C, NB, "pin: C, pinned through the pressure");
    is_int(NB, paged_prefix_unpin(p, NULL, SALT, NB, prompts[P_C].tokens), "pin: C unpinned");
}

/* A holder child's work: takes *(uint32_t *) ctx blocks of p. Returns the status. */
static int take_blocks(paged_pool *p, void *ctx)
{
    int32_t ids[N];
    return paged_alloc(p, *(const uint32_t *) ctx, ids);
}

/* Forks a child that holds n blocks of POOL until the returned descriptor is closed, once it
 * holds them. Returns the descriptor; *pid gets the child. */
static int hold_blocks(uint32_t n, pid_t *pid)
{
    return kp_hold_in_child(daemon_.socket, POOL, take_blocks, &n, pid);
}

/* A reload into blocks that its own allocation evicts: the evicted prompt goes to the host
 * tier while the other comes back (on the cuda backend, the two copies overlapped). */
static void test_swap(struct rc_client *ctl)
{
    /* A is in the host tier, C cached in the pool; hold the pool's other half. */
    pid_t holder;
    int release = hold_blocks(N - NB, &holder);
    check_found(P_A, NB, "swap: A comes back into C's blocks");
    check_found(P_C, NB, "swap: C comes back into A's blocks");
    close(release);
    waitpid(holder, NULL, 0);
    struct pcore_pool_item it;
    int rc = rc_pool_item_until(ctl, POOL, rc_pool_free_is, N - NB, 10000, &it);
    ok(rc == 0 && it.cached == NB && it.referenced == 0 && it.tier_failures == 0,
       "swap: C cached, the holder's blocks free, no failure (%u free, %u cached, %llu failures)", it.free,
       it.cached, (unsigned long long) it.tier_failures);
    check_found(P_A, NB, "swap: A, pushed out again by C's reload, comes back whole");
}

/* The pool's time to live drops units from the host tier too; the file tier keeps its own. */
static void test_ttl(paged_client *c, struct rc_client *ctl)
{
    /* A's and B's blocks are in the pool and in files; push them to the host tier first. */
    in_child(child_pressure, 0);
    is_int(PAGED_OK, report->f.status, "ttl: a client pushes A and B out of the pool");
    struct pcore_pool_item before = wait_host(ctl, NB, "ttl: the host tier full"), it;
    is_int(PAGED_OK, paged_pool_set_ttl(c, POOL, 200), "ttl: the pool's time to live set to 200 ms");
    int rc = rc_pool_item_until(ctl, POOL, all_dropped, 0, 10000, &it);
    ok(rc == 0, "ttl: the pool and the host tier drop what they held (%u cached, %u units)", it.cached,
       it.host_stored);
    ok(it.file_units == before.file_units, "ttl: the file tier keeps its %u units (%u)", before.file_units,
       it.file_units);
    is_int(PAGED_OK, paged_pool_set_ttl(c, POOL, 0), "ttl: back to none");
    check_found(P_A, NB, "ttl: A comes back from its files");
    check_found(P_B, NB / 2, "ttl: B's two blocks with files come back, the two only in the host tier are gone");
    it = pool_item(ctl);
    is_int((NB + NB / 2) * B, (int) (it.file_hit_tokens - before.file_hit_tokens),
           "ttl: the blocks found counted as tokens found in the file tier");
}

/* A host tier past host-tier-max-mb is refused, naming the setting. */
static void test_limit(paged_client *c)
{
    paged_pool_desc d = {
        .name = "too-big", .num_layers = L, .num_kv_heads = H, .head_dim = D, .block_size = B,
        .dtype = PAGED_DTYPE_F32, .num_blocks = N, .host_tier_bytes = 8192ull << 20,
    };
    paged_pool *p = NULL;
    is_int(PAGED_E_LIMIT, paged_pool_create(c, &d, &p), "limit: an 8 GiB host tier is refused");
    ok(strstr(paged_client_error(c), "host-tier-max-mb") != NULL, "limit: the error names host-tier-max-mb (%s)",
       paged_client_error(c));
}

/* Runs the tests. */
int main(void)
{
    plan_lazy();
    prompts = mmap(NULL, sizeof *prompts * NPROMPTS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    report = mmap(NULL, sizeof *report, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    race = mmap(NULL, sizeof *race, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (prompts == MAP_FAILED || report == MAP_FAILED || race == MAP_FAILED)
        bail("mmap");
    pagedd_mkdir(&daemon_);
    snprintf(file_dir, sizeof file_dir, "%s/units", daemon_.dir);
    if (mkdir(file_dir, 0700) != 0)
        bail("mkdir %s", file_dir);
    start_daemon();
    paged_client *c = connect_client("tiers");
    paged_pool *p = NULL;
    if (c == NULL || create_pool(c, &p) != PAGED_OK)
        bail("cannot create the pool: %s", c != NULL ? paged_client_error(c) : "no connection");
    struct rc_client ctl;
    if (rc_connect(daemon_.socket, "ctl", PCORE_HELLO_CONTROL, &ctl) != 0)
        bail("control connection");
    kp_on_cuda = paged_client_backend(c) == PAGED_BACKEND_CUDA;
    if (paged_events_open(daemon_.socket, PAGED_EVENTS_BLOCKS, &sub) != PAGED_OK)
        bail("cannot subscribe to block events");
    test_host(p, &ctl);
    test_file(&ctl);
    test_limit(c);
    paged_events_close(sub);
    test_ttl(c, &ctl);
    test_race(&ctl);
    test_swap(&ctl);
    test_pin(c, p, &ctl);
    rc_close(&ctl);
    paged_client_close(c);
    test_restart();
    pagedd_stop(&daemon_);
    pagedd_cleanup(&daemon_);
    return 0;
}
