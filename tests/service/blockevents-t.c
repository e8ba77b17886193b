/* blockevents-t.c: block events with a real pagedd: paged_events subscribers, their scopes, pactl subscribe -b. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/clock.h"
#include "lib/core/proto.h"
#include "paged.h"
#include "tests/service/rawclient.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"

/* The pool: 1 layer, 1 KV head, head_dim 64, blocks of 16, f32, 16 blocks, open to every uid. */
#define B 16
#define N 16
#define NB 4             /* blocks of a prompt */
#define SALT 11u
#define POOL "blocks"
#define WAIT_MS 10000    /* the longest any expected event may take: a failure bound */
#define OTHER_UID 65534  /* the other user of the scope case: nobody */

enum { P_PACTL, P_A, P_B, P_ROOT, P_OTHER, NPROMPTS };

static struct pagedd daemon_;
static int32_t prompts[NPROMPTS][NB * B];
static paged_hash hashes[NPROMPTS][NB];    /* what paged_hash_blocks says of each prompt */

/* Connects a libpaged client; returns it or NULL. */
static paged_client *connect_client(const char *name)
{
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = name, .timeout_ms = 10000 };
    paged_client *c = NULL;
    return paged_client_connect(&o, &c) == PAGED_OK ? c : NULL;
}

/* Runs, in a child process as uid ((uid_t) -1: the test's), a client attached to POOL that
 * takes want blocks and publishes the first NB of them as prompt k when k >= 0 (want > NB:
 * allocation pressure). Returns the child's exit status: 0 when it did so, 77 when it could
 * not become uid. */
static int client_as(uid_t uid, int k, uint32_t want)
{
    pid_t pid = fork();
    if (pid < 0)
        sysbail("fork");
    if (pid == 0) {
        if (uid != (uid_t) -1 && (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0))
            _exit(77);
        paged_client *c = connect_client("publisher");
        paged_pool *p = NULL;
        int32_t ids[N];
        int ok = c != NULL && paged_pool_attach(c, POOL, &p) == PAGED_OK && paged_alloc(p, want, ids) == PAGED_OK
                 && (k < 0 || paged_publish(p, NULL, SALT, NB, prompts[k], ids) == NB);
        paged_client_close(c);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Collects up to max block entries from ev until max came or WAIT_MS passed, skipping other
 * events; *lost adds up LOST events. Returns how many came. */
static uint32_t collect(paged_events *ev, paged_block_event *out, uint32_t max, uint64_t *lost)
{
    uint32_t n = 0;
    uint64_t deadline = pcore_now_ns() + (uint64_t) WAIT_MS * 1000000u;
    while (n < max) {
        uint64_t now = pcore_now_ns();
        if (now >= deadline)
            break;
        paged_event e;
        int rc = paged_events_next(ev, &e, (int) ((deadline - now) / 1000000u) + 1);
        if (rc == PAGED_E_TIMEOUT)
            break;
        if (rc < 0) {
            diag("paged_events_next: %s (%s)", paged_strerror(rc), paged_events_error(ev));
            break;
        }
        if (e.type == PAGED_EVENT_LOST && lost != NULL)
            *lost += e.count;
        if (e.type != PAGED_EVENT_BLOCKS)
            continue;
        if (strcmp(e.pool, POOL) != 0)
            diag("block event of pool '%s'", e.pool);
        for (uint32_t i = 0; i < e.num_blocks && n < max; i++)
            out[n++] = e.blocks[i];
    }
    return n;
}

/* Returns whether the n entries are action and tenant in tier pool with prompt k's hashes
 * from first on, in order. */
static int entries_are(const paged_block_event *b, uint32_t n, uint32_t action, uint32_t tenant, int k, int first)
{
    for (uint32_t i = 0; i < n; i++) {
        const paged_hash *h = &hashes[k][first + (int) i];
        if (b[i].action != action || b[i].tier != PAGED_TIER_POOL || b[i].tenant != tenant || b[i].hash.lo != h->lo
            || b[i].hash.hi != h->hi) {
            diag("entry %u: action %u tier %u tenant %u hash %016llx%016llx", i, b[i].action, b[i].tier,
                 b[i].tenant, (unsigned long long) b[i].hash.hi, (unsigned long long) b[i].hash.lo);
            return 0;
        }
    }
    return 1;
}

/* Returns whether the n entries are REMOVED entries of tenant for exactly prompt k's hashes
 * first to first + count - 1, in any order (the allocator's eviction order among equally old
 * blocks). */
static int removed_set(const paged_block_event *b, uint32_t n, uint32_t tenant, int k, int first, int count)
{
    if (n != (uint32_t) count)
        return 0;
    int seen[NB] = { 0 };
    for (uint32_t i = 0; i < n; i++) {
        int found = -1;
        for (int j = first; j < first + count; j++)
            if (b[i].hash.lo == hashes[k][j].lo && b[i].hash.hi == hashes[k][j].hi)
                found = j;
        if (found < 0 || seen[found] || b[i].action != PAGED_BLOCK_REMOVED || b[i].tier != PAGED_TIER_POOL
            || b[i].tenant != tenant)
            return 0;
        seen[found] = 1;
    }
    return 1;
}

/* Reads events from ev until a DISCONNECT of a client named name or WAIT_MS; counts block
 * events it saw in *blocks. Returns whether it came. */
static int await_disconnect(paged_events *ev, const char *name, int *blocks)
{
    uint64_t deadline = pcore_now_ns() + (uint64_t) WAIT_MS * 1000000u;
    for (;;) {
        uint64_t now = pcore_now_ns();
        paged_event e;
        if (now >= deadline || paged_events_next(ev, &e, (int) ((deadline - now) / 1000000u) + 1) != PAGED_OK)
            return 0;
        *blocks += e.type == PAGED_EVENT_BLOCKS;
        if (e.type == PAGED_EVENT_DISCONNECT && strcmp(e.client_name, name) == 0)
            return 1;
    }
}

/* Sends EVICT for POOL on ctl; returns the blocks evicted or a negative error. */
static long evict_pool(struct rc_client *ctl)
{
    struct pcore_msg_pool_ref m;
    struct pcore_msg_hdr reply;
    memset(&m, 0, sizeof m);
    m.hdr.type = PCORE_MSG_EVICT;
    m.hdr.len = sizeof m;
    snprintf(m.name, sizeof m.name, "%s", POOL);
    long rc = rc_control(ctl, &m, sizeof m, &reply, sizeof reply, NULL);
    return rc < 0 ? rc : reply.status;
}

/* Reads one line from fd into buf within WAIT_MS. Returns its length, or -1. */
static long read_line(int fd, char *buf, size_t size)
{
    size_t n = 0;
    uint64_t deadline = pcore_now_ns() + (uint64_t) WAIT_MS * 1000000u;
    while (n + 1 < size) {
        uint64_t now = pcore_now_ns();
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (now >= deadline || poll(&p, 1, (int) ((deadline - now) / 1000000u) + 1) <= 0)
            return -1;
        if (read(fd, buf + n, 1) != 1)
            return -1;
        if (buf[n] == '\n') {
            buf[n] = '\0';
            return (long) n;
        }
        n++;
    }
    return -1;
}

/* pactl subscribe -b prints one line per entry of what a client published; recording is
 * off once it goes, and nothing recorded meanwhile reaches a later subscriber. */
static void test_pactl(struct rc_client *ctl)
{
    char pactl[1024];
    const char *top = getenv("top_builddir");
    snprintf(pactl, sizeof pactl, "%s/tools/pactl", top != NULL ? top : "..");
    int out[2];
    if (pipe(out) != 0)
        sysbail("pipe");
    pid_t pid = fork();
    if (pid < 0)
        sysbail("fork");
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        execl(pactl, "pactl", "-s", daemon_.socket, "subscribe", "--blocks", (char *) NULL);
        _exit(127);
    }
    close(out[1]);
    ok(pagedd_log_wait_count(&daemon_, "block events: recording on", 1, WAIT_MS),
       "pactl subscribe --blocks turns recording on");
    is_int(0, client_as((uid_t) -1, P_PACTL, NB), "a client publishes a prompt");
    int good = 0;
    /* Its other lines (the publisher's connect, attach, ...) come first: a bounded number. */
    for (int i = 0, lines = 0; i < NB && lines < 32; i++) {
        char line[512], want[256], hex[40];
        long n;
        do
            n = read_line(out[0], line, sizeof line);
        while (n > 0 && ++lines < 32 && strstr(line, " blocks ") == NULL);
        snprintf(hex, sizeof hex, "%016llx%016llx", (unsigned long long) hashes[P_PACTL][i].hi,
                 (unsigned long long) hashes[P_PACTL][i].lo);
        snprintf(want, sizeof want, " blocks       pool \"%s\" action stored tier pool tenant %u hash %s", POOL,
                 (unsigned) getuid(), hex);
        const char *at = n > 0 ? strstr(line, " blocks ") : NULL;
        if (at != NULL && strcmp(at, want) == 0)
            good++;
        else
            diag("pactl line %d: '%s', want '<time>%s'", i, n > 0 ? line : "(none)", want);
    }
    is_int(NB, good, "pactl prints one 'blocks' line per stored block, hashes as paged_hash_blocks");
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    close(out[0]);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "pactl subscribe exits 0 on SIGTERM");
    ok(pagedd_log_wait_count(&daemon_, "block events: recording off", 1, WAIT_MS),
       "recording is off once the last block subscriber went");
    is_int(NB, (int) evict_pool(ctl), "EVICT without block subscribers evicts the prompt (recorded nowhere)");
}

/* A block subscriber sees the STORED entries of a publication and the REMOVED entries of
 * prefix eviction, pool EVICT and allocation pressure, in order; a plain subscriber sees
 * none. */
static void test_stream(paged_events *blocks, paged_events *plain, struct rc_client *ctl, paged_client *owner,
                        paged_pool *pool)
{
    paged_block_event got[2 * N];
    uint64_t lost = 0;
    const uint32_t me = (uint32_t) getuid();
    is_int(0, client_as((uid_t) -1, P_A, NB), "a client publishes prompt A");
    uint32_t n = collect(blocks, got, NB, &lost);
    is_int(NB, (int) n, "the block subscriber gets %d entries", NB);
    ok(n == NB && entries_are(got, n, PAGED_BLOCK_STORED, me, P_A, 0),
       "they are STORED, tier pool, tenant our uid, A's hashes in order");

    is_int(2, paged_prefix_evict(pool, &hashes[P_A][1], SALT, 2, prompts[P_A] + 2 * B),
           "paged_prefix_evict of A's last two blocks");
    n = collect(blocks, got, 2, &lost);
    /* The allocator takes a prefix out back to front. */
    ok(n == 2 && entries_are(got, 1, PAGED_BLOCK_REMOVED, me, P_A, 3)
           && entries_are(got + 1, 1, PAGED_BLOCK_REMOVED, me, P_A, 2),
       "REMOVED for exactly those two, in the order they went (the last first)");

    is_int(2, (int) evict_pool(ctl), "EVICT of the pool evicts A's first two blocks");
    n = collect(blocks, got, 2, &lost);
    ok(removed_set(got, n, me, P_A, 0, 2), "REMOVED for exactly those two");

    is_int(0, client_as((uid_t) -1, P_B, NB), "a client publishes prompt B");
    n = collect(blocks, got, NB, &lost);
    ok(n == NB && entries_are(got, n, PAGED_BLOCK_STORED, me, P_B, 0), "STORED for B's blocks in order");
    is_int(0, client_as((uid_t) -1, -1, N), "a client takes every block of the pool");
    n = collect(blocks, got, NB, &lost);
    ok(removed_set(got, n, me, P_B, 0, NB), "allocation pressure: REMOVED for exactly B's blocks");
    is_int(0, (int) lost, "no entry was lost");

    /* A marker every subscriber gets: the plain one must see no block event before it. */
    paged_pool_desc d = { .name = "marker", .num_layers = 1, .num_kv_heads = 1, .head_dim = 64, .block_size = B,
                          .dtype = PAGED_DTYPE_F32, .num_blocks = 4, .mode = 0600 };
    paged_pool *marker = NULL;
    is_int(PAGED_OK, paged_pool_create(owner, &d, &marker), "a marker pool is created");
    int block_events = 0, found = 0;
    uint64_t deadline = pcore_now_ns() + (uint64_t) WAIT_MS * 1000000u;
    while (!found && pcore_now_ns() < deadline) {
        paged_event e;
        if (paged_events_next(plain, &e, WAIT_MS) != PAGED_OK)
            break;
        block_events += e.type == PAGED_EVENT_BLOCKS;
        found = e.type == PAGED_EVENT_POOL_CREATE && strcmp(e.pool, "marker") == 0;
    }
    ok(found, "the plain subscriber sees the marker pool's creation");
    is_int(0, block_events, "and no block event before it");
    paged_pool_destroy(owner, "marker");
    paged_pool_detach(marker);
}

/* A subscriber of another uid sees only the entries of its own prefix scope; root sees all.
 * The plain subscriber reads up to the other's disconnect. */
static void test_scope(paged_events *blocks, paged_events *plain)
{
    if (geteuid() != 0) {
        skip(6, "not root");
        return;
    }
    int ready[2], result[2];
    if (pipe(ready) != 0 || pipe(result) != 0)
        sysbail("pipe");
    pid_t pid = fork();
    if (pid < 0)
        sysbail("fork");
    if (pid == 0) {
        close(ready[0]);
        close(result[0]);
        paged_events *ev = NULL;
        int res[2] = { -1, 0 };
        if (setgroups(0, NULL) == 0 && setgid(OTHER_UID) == 0 && setuid(OTHER_UID) == 0
            && paged_events_open(daemon_.socket, PAGED_EVENTS_BLOCKS, &ev) == PAGED_OK) {
            char c = 'r';
            if (write(ready[1], &c, 1) != 1)
                _exit(1);
            paged_block_event got[2 * NB];
            uint32_t n = collect(ev, got, NB, NULL);
            res[0] = (int) n;
            res[1] = n == NB && entries_are(got, n, PAGED_BLOCK_STORED, OTHER_UID, P_OTHER, 0);
        }
        paged_events_close(ev);
        _exit(write(result[1], res, sizeof res) == (ssize_t) sizeof res ? 0 : 1);
    }
    close(ready[1]);
    close(result[1]);
    char c;
    struct pollfd p = { .fd = ready[0], .events = POLLIN };
    ok(poll(&p, 1, WAIT_MS) == 1 && read(ready[0], &c, 1) == 1, "a subscriber of uid %d subscribes", OTHER_UID);
    /* Root's first, so that an entry it should not see would come before the other's. */
    int pub_root = client_as((uid_t) -1, P_ROOT, NB);
    int pub_other = client_as(OTHER_UID, P_OTHER, NB);
    ok(pub_root == 0 && pub_other == 0, "root and uid %d each publish a prompt", OTHER_UID);
    int res[2] = { -1, 0 };
    ssize_t got_res = read(result[0], res, sizeof res);
    int status = 0;
    waitpid(pid, &status, 0);
    ok(got_res == (ssize_t) sizeof res && res[0] == NB && res[1],
       "uid %d sees exactly its own %d STORED entries (got %d)", OTHER_UID, NB, res[0]);
    paged_block_event all[2 * NB];
    uint32_t n = collect(blocks, all, 2 * NB, NULL);
    ok(n == 2 * NB && entries_are(all, NB, PAGED_BLOCK_STORED, 0, P_ROOT, 0)
           && entries_are(all + NB, NB, PAGED_BLOCK_STORED, OTHER_UID, P_OTHER, 0),
       "root's subscriber sees both, in order");
    int plain_blocks = 0;
    ok(await_disconnect(plain, "paged_events", &plain_blocks), "the other's disconnect is announced");
    is_int(0, plain_blocks, "the plain subscriber saw no block event meanwhile");
    close(ready[0]);
    close(result[0]);
}

/* Recording stays on while one block subscriber is left and goes off with the last. */
static void test_off(paged_events *first, paged_events *plain)
{
    paged_events *second = NULL;
    is_int(PAGED_OK, paged_events_open(daemon_.socket, PAGED_EVENTS_BLOCKS, &second), "a second block subscriber");
    int blocks = 0;
    paged_events_close(first);
    ok(await_disconnect(plain, "paged_events", &blocks), "the first block subscriber's disconnect is announced");
    is_int(2, pagedd_log_count(&daemon_, "block events: recording on"),
           "recording went on twice in all (pactl's, then ours)");
    is_int(1, pagedd_log_count(&daemon_, "block events: recording off"), "and is still on with the second left");
    paged_events_close(second);
    ok(await_disconnect(plain, "paged_events", &blocks), "the second's disconnect is announced");
    ok(pagedd_log_wait_count(&daemon_, "block events: recording off", 2, WAIT_MS),
       "recording is off once the last block subscriber went");
    is_int(0, blocks, "the plain subscriber saw no block event");
}

/* A SUBSCRIBE with unknown flags or reserved bits is refused, naming them. */
static void test_refusals(struct rc_client *ctl)
{
    struct pcore_msg_subscribe m = { .hdr = { PCORE_MSG_SUBSCRIBE, 0, 0, sizeof m }, .flags = 0x4 };
    struct pcore_msg_hdr reply;
    is_int(PAGED_E_INVAL, (int) rc_control(ctl, &m, sizeof m, &reply, sizeof reply, NULL), "SUBSCRIBE flags 0x4");
    ok(strstr(ctl->errmsg, "flags 0x4 unknown") != NULL, "refused naming the flags: %s", ctl->errmsg);
    m.flags = PCORE_SUBSCRIBE_BLOCKS;
    m.reserved = 1;
    is_int(PAGED_E_INVAL, (int) rc_control(ctl, &m, sizeof m, &reply, sizeof reply, NULL), "SUBSCRIBE reserved 1");
    paged_events *ev = NULL;
    is_int(PAGED_E_INVAL, paged_events_open(daemon_.socket, 0x80, &ev), "paged_events_open: unknown flags");
    ok(ev == NULL, "and no handle");
}

/* Runs the cases against a real daemon; returns 0 (TAP reports the results). */
int main(void)
{
    plan_lazy();
    for (int k = 0; k < NPROMPTS; k++) {
        for (int i = 0; i < NB * B; i++)
            prompts[k][i] = 100 * (k + 1) + i;
        if (paged_hash_blocks(NULL, prompts[k], NB * B, B, SALT, hashes[k]) != NB)
            bail("paged_hash_blocks");
    }
    /* Another uid must reach the socket: a world-searchable directory, a 0666 socket. */
    pagedd_mkdir(&daemon_);
    if (chmod(daemon_.dir, 0755) != 0)
        sysbail("chmod %s", daemon_.dir);
    const char *const args[] = { "--socket-mode=0666", "--log-level=debug", NULL };
    if (pagedd_start(&daemon_, args, NULL, NULL) != 0)
        bail("pagedd did not start");
    paged_client *owner = connect_client("owner");
    struct rc_client ctl;
    if (owner == NULL || rc_connect(daemon_.socket, "ctl", PCORE_HELLO_CONTROL, &ctl) != 0)
        bail("cannot connect");
    paged_pool_desc d = { .name = POOL, .num_layers = 1, .num_kv_heads = 1, .head_dim = 64, .block_size = B,
                          .dtype = PAGED_DTYPE_F32, .num_blocks = N, .mode = 0666 };
    paged_pool *pool = NULL;
    if (paged_pool_create(owner, &d, &pool) != PAGED_OK)
        bail("cannot create the pool: %s", paged_client_error(owner));
    test_pactl(&ctl);
    paged_events *blocks = NULL, *plain = NULL;
    if (paged_events_open(daemon_.socket, PAGED_EVENTS_BLOCKS, &blocks) != PAGED_OK
        || paged_events_open(daemon_.socket, 0, &plain) != PAGED_OK)
        bail("cannot subscribe");
    ok(paged_events_fd(blocks) >= 0, "paged_events_fd gives a descriptor");
    test_stream(blocks, plain, &ctl, owner, pool);
    test_scope(blocks, plain);
    test_off(blocks, plain);
    test_refusals(&ctl);
    paged_events_close(plain);
    rc_close(&ctl);
    paged_client_close(owner);
    is_int(0, pagedd_stop(&daemon_), "the daemon exits 0");
    pagedd_cleanup(&daemon_);
    return 0;
}
