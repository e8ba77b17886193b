/* prefixctl-t.c: the prefix cache's controls with a real pagedd and client processes: pins, eviction, ttl. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/core/clock.h"
#include "lib/core/proto.h"
#include "paged.h"
#include "tests/service/rawclient.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"

/* The pool: 1 layer, 1 KV head, head_dim 64, blocks of 16, f32, 32 blocks. Pin limits: a
 * quarter of the blocks per uid (root: none), half per pool, as pagedd's defaults. */
#define B 16
#define N 32
#define NB 4             /* blocks of a prompt */
#define SALT 7u
#define POOL "prefixctl"
#define TTL_MS 300u

enum { P_PINNED, P_OTHER, P_EVICTED, P_EXPIRING, P_LONG, NPROMPTS };

static struct pagedd daemon_;
static int32_t prompts[NPROMPTS][N * B];   /* long enough for the pool limit's prompt */
static uint64_t asked_tokens, hit_tokens;  /* what this test's LOOKUPs asked for and found */

/* Connects a libpaged client; returns it or NULL. */
static paged_client *connect_client(const char *name)
{
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = name, .timeout_ms = 10000 };
    paged_client *c = NULL;
    return paged_client_connect(&o, &c) == PAGED_OK ? c : NULL;
}

/* What a child process does: fills res[0..NRES) from its own client c, attached to a pool p. */
typedef void child_fn(paged_pool *p, int *res, int arg);
#define NRES 8

/* The uid of the other user of the cross-uid case: nobody. */
#define OTHER_UID 65534

/* Runs fn in a child process, as uid ((uid_t) -1: the test's), with a client of its own
 * attached to pool; copies its NRES results to res (-999 for those it could not report).
 * Returns the child's exit status: 77 when it could not become uid. */
static int in_child_as(uid_t uid, const char *pool, child_fn *fn, int arg, int *res)
{
    int fds[2];
    for (int i = 0; i < NRES; i++)
        res[i] = -999;
    if (pipe(fds) != 0)
        bail("pipe");
    pid_t pid = fork();
    if (pid < 0)
        bail("fork");
    if (pid == 0) {
        close(fds[0]);
        int out[NRES];
        for (int i = 0; i < NRES; i++)
            out[i] = -999;
        if (uid != (uid_t) -1 && (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0))
            _exit(77);
        paged_client *c = connect_client("child");
        paged_pool *p = NULL;
        if (c != NULL && paged_pool_attach(c, pool, &p) == PAGED_OK)
            fn(p, out, arg);
        paged_client_close(c);
        _exit(write(fds[1], out, sizeof out) == (ssize_t) sizeof out ? 0 : 1);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], res, NRES * sizeof *res);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
        return 77;
    if (n != (ssize_t) (NRES * sizeof *res) || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        diag("child %ld: read %zd bytes, status %#x", (long) pid, n, status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* in_child_as as the test's uid on POOL. Returns nothing. */
static void in_child(child_fn *fn, int arg, int *res)
{
    in_child_as((uid_t) -1, POOL, fn, arg, res);
}

/* Child: publishes prompt arg's first NB blocks (res[0]: how many) and goes, leaving them cached. */
static void child_publish(paged_pool *p, int *res, int arg)
{
    int32_t ids[NB];
    if (paged_alloc(p, NB, ids) == PAGED_OK)
        res[0] = paged_publish(p, NULL, SALT, NB, prompts[arg], ids);
}

/* Child: publishes N / 2 + 1 blocks of prompt arg (res[0]) and goes. */
static void child_publish_long(paged_pool *p, int *res, int arg)
{
    int32_t ids[N / 2 + 1];
    if (paged_alloc(p, N / 2 + 1, ids) == PAGED_OK)
        res[0] = paged_publish(p, NULL, SALT, N / 2 + 1, prompts[arg], ids);
}

/* Child: takes arg blocks (res[0]: the status), one more (res[1]), then looks up the pinned
 * and the other prompt (res[2], res[3]: blocks found, asking NB of each). */
static void child_pressure(paged_pool *p, int *res, int arg)
{
    static int32_t ids[N + 1], found[NB];
    res[0] = paged_alloc(p, (uint32_t) arg, ids);
    res[1] = paged_alloc(p, 1, ids + arg);
    res[2] = paged_lookup(p, NULL, SALT, NB, prompts[P_PINNED], found);
    res[3] = paged_lookup(p, NULL, SALT, NB, prompts[P_OTHER], found);
}

/* Child: looks prompt arg up (res[0]: blocks found, asking NB). */
static void child_lookup(paged_pool *p, int *res, int arg)
{
    int32_t found[NB];
    res[0] = paged_lookup(p, NULL, SALT, NB, prompts[arg], found);
}

/* Counts a child's lookups of NB blocks that found the given numbers (negative: none ran). */
static void count_lookup(int found)
{
    if (found < 0)
        return;
    asked_tokens += NB * B;
    hit_tokens += (uint64_t) found * B;
}

/* rc_pool_item_until's condition: want blocks cached. */
static int cached_is(const struct pcore_pool_item *it, uint32_t want)
{
    return it->cached == want && it->referenced == 0;
}

/* Waits until POOL has want cached blocks and none referenced (a child that left is
 * reclaimed by the daemon after it went); reports it. */
static void wait_cached(struct rc_client *ctl, uint32_t want, const char *what)
{
    struct pcore_pool_item it;
    int rc = rc_pool_item_until(ctl, POOL, cached_is, want, 10000, &it);
    if (!ok(rc == 0, "%s: %u blocks cached", what, want))
        diag("cached %u, referenced %u", it.cached, it.referenced);
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

/* Waits for the next event of type on sub (10 s at most); returns 1 with *e, or 0. */
static int next_event_of(struct rc_client *sub, uint32_t type, struct pcore_msg_event *e)
{
    for (int i = 0; i < 64; i++) {
        if (rc_wait_msg(sub, PCORE_MSG_EVENT, 10000, e, sizeof *e) != 1)
            return 0;
        if (e->event == type)
            return 1;
    }
    return 0;
}

/* A pinned prefix survives the pressure that evicts every other cached block; unpinned, it
 * is evicted as any other. */
static void test_pin(paged_pool *p, struct rc_client *ctl)
{
    int res[NRES];
    in_child(child_publish, P_PINNED, res);
    is_int(NB, res[0], "publisher: prompt A published");
    in_child(child_publish, P_OTHER, res);
    is_int(NB, res[0], "publisher: prompt B published");
    wait_cached(ctl, 2 * NB, "both publishers gone");
    is_int(NB, paged_prefix_pin(p, NULL, SALT, NB, prompts[P_PINNED]), "pin: prompt A's 4 blocks pinned");
    struct pcore_pool_item it = pool_item(ctl);
    ok(it.pinned == NB && it.cached == 2 * NB, "pin: LIST says 4 pinned of 8 cached (%u, %u)", it.pinned,
       it.cached);
    in_child(child_pressure, N - NB, res);
    is_int(PAGED_OK, res[0], "pressure: a client takes every block but the pinned ones");
    is_int(PAGED_E_NOSPC, res[1], "pressure: one more is refused: pinned blocks are not evicted");
    is_int(NB, res[2], "pressure: the pinned prompt is still found");
    is_int(0, res[3], "pressure: the other prompt was evicted");
    count_lookup(res[2]);
    count_lookup(res[3]);
    wait_cached(ctl, NB, "pressure gone");
    /* The pressure's client looked the pinned prompt up: referenced and released, it must be
     * pinned still. */
    in_child(child_pressure, N - NB, res);
    ok(res[0] == PAGED_OK && res[1] == PAGED_E_NOSPC && res[2] == NB,
       "pressure again: the pinned prompt, looked up and released, still survives (%d, %d, %d)", res[0], res[1],
       res[2]);
    count_lookup(res[2]);
    count_lookup(res[3]);
    wait_cached(ctl, NB, "second pressure gone");

    is_int(NB, paged_prefix_unpin(p, NULL, SALT, NB, prompts[P_PINNED]), "unpin: prompt A unpinned");
    it = pool_item(ctl);
    is_int(0, it.pinned, "unpin: LIST says none pinned");
    in_child(child_pressure, N, res);
    is_int(PAGED_OK, res[0], "unpinned: a client takes the whole pool");
    is_int(0, res[2], "unpinned: prompt A was evicted to make room");
    count_lookup(res[2]);
    count_lookup(res[3]);
    wait_cached(ctl, 0, "unpinned pressure gone");
}

/* Pins are limited per pool (and per uid but root's). */
static void test_limits(paged_client *c, paged_pool *p, struct rc_client *ctl)
{
    int res[NRES];
    in_child(child_publish_long, P_LONG, res);
    is_int(N / 2 + 1, res[0], "limits: a prompt of 17 blocks published");
    wait_cached(ctl, N / 2 + 1, "limits: its publisher gone");
    is_int(PAGED_E_LIMIT, paged_prefix_pin(p, NULL, SALT, N / 2 + 1, prompts[P_LONG]),
           "limits: pinning 17 of 32 blocks passes the pool's limit of 16");
    ok(strstr(paged_client_error(c), "(pin-limit-pool)") != NULL,
       "limits: the refusal names the setting (%s)", paged_client_error(c));
    is_int(0, (int) pool_item(ctl).pinned, "limits: nothing pinned by the refusal");
    if (geteuid() != 0)
        is_int(PAGED_E_LIMIT, paged_prefix_pin(p, NULL, SALT, N / 4 + 1, prompts[P_LONG]),
               "limits: pinning 9 blocks passes a uid's limit of 8");
    else
        is_int(N / 4 + 1, paged_prefix_pin(p, NULL, SALT, N / 4 + 1, prompts[P_LONG]),
               "limits: root pins 9 blocks, past a uid's limit of 8");
    is_int(N / 2 + 1, paged_prefix_evict(p, NULL, SALT, N / 2 + 1, prompts[P_LONG]),
           "limits: the long prompt evicted, pins and all");
    struct pcore_pool_item it = pool_item(ctl);
    ok(it.pinned == 0 && it.cached == 0 && it.free == N, "limits: nothing pinned or cached, all free");
}

/* Eviction by prefix frees the prompt's cached blocks and tells subscribers. */
static void test_evict(paged_pool *p, struct rc_client *ctl, struct rc_client *sub)
{
    int res[NRES];
    in_child(child_publish, P_EVICTED, res);
    is_int(NB, res[0], "evict: prompt C published");
    wait_cached(ctl, NB, "evict: its publisher gone");
    is_int(NB, paged_prefix_evict(p, NULL, SALT, NB, prompts[P_EVICTED]), "evict: prompt C's 4 blocks found");
    struct pcore_msg_event e;
    ok(next_event_of(sub, PCORE_EVENT_EVICT, &e) && e.count == NB && strcmp(e.pool, POOL) == 0,
       "evict: subscribers hear of 4 blocks evicted from " POOL);
    is_int(NB, (int) pool_item(ctl).free - (N - NB), "evict: its blocks are free");
    in_child(child_lookup, P_EVICTED, res);
    is_int(0, res[0], "evict: prompt C is no longer found");
    count_lookup(res[0]);
    is_int(0, paged_prefix_evict(p, NULL, SALT, NB, prompts[P_EVICTED]), "evict: again, nothing found");
    int32_t bad[NB * B];
    memset(bad, 0, sizeof bad);
    is_int(PAGED_E_INVAL, paged_prefix_pin(p, NULL, SALT, 0, bad), "args: 0 blocks refused");
}

/* A cached block is dropped its time to live after its last reference went, a pinned one
 * is not; the pool counts what expired. */
static void test_ttl(paged_client *c, paged_pool *p, struct rc_client *ctl, struct rc_client *sub)
{
    int res[NRES];
    in_child(child_publish, P_PINNED, res);
    is_int(NB, res[0], "ttl: prompt A published again");
    wait_cached(ctl, NB, "ttl: its publisher gone");
    is_int(NB, paged_prefix_pin(p, NULL, SALT, NB, prompts[P_PINNED]), "ttl: prompt A pinned");
    is_int(PAGED_OK, paged_pool_set_ttl(c, POOL, TTL_MS), "ttl: the owner sets a ttl of 300 ms");
    is_int(TTL_MS, (int) pool_item(ctl).ttl_ms, "ttl: LIST shows it");
    is_int(PAGED_E_INVAL, paged_pool_set_ttl(c, POOL, 31ull * 24 * 3600 * 1000), "ttl: 31 days refused");
    is_int(PAGED_E_NOENT, paged_pool_set_ttl(c, "nosuchpool", 1), "ttl: an unknown pool refused");
    uint64_t t0 = pcore_now_ns();
    in_child(child_publish, P_EXPIRING, res);
    is_int(NB, res[0], "ttl: prompt D published");
    struct pcore_msg_event e;
    int heard = next_event_of(sub, PCORE_EVENT_EXPIRE, &e);
    uint64_t waited_ms = (pcore_now_ns() - t0) / 1000000u;
    ok(heard && e.count == NB && strcmp(e.pool, POOL) == 0, "ttl: subscribers hear of 4 blocks expired");
    ok(waited_ms >= TTL_MS, "ttl: not before the ttl (%llu ms after the publisher started)",
       (unsigned long long) waited_ms);
    struct pcore_pool_item it = pool_item(ctl);
    ok(it.expired == NB && it.cached == NB && it.pinned == NB,
       "ttl: 4 expired, the 4 pinned still cached (%llu, %u, %u)", (unsigned long long) it.expired, it.cached,
       it.pinned);
    in_child(child_lookup, P_EXPIRING, res);
    is_int(0, res[0], "ttl: the expired prompt is not found");
    count_lookup(res[0]);
    in_child(child_lookup, P_PINNED, res);
    is_int(NB, res[0], "ttl: the pinned prompt is");
    count_lookup(res[0]);
    is_int(PAGED_OK, paged_pool_set_ttl(c, POOL, 0), "ttl: set back to none");
    is_int(NB, paged_prefix_unpin(p, NULL, 0, 0, NULL), "unpin all: the owner drops the 4 pins left");
    is_int(0, (int) pool_item(ctl).pinned, "unpin all: none pinned");
}

/* Child, as another uid, in a pool of shared prefixes where root pinned prompt A: tries
 * to drop root's pins (res[0] unpin, res[1] evict), to set the ttl (res[2]), to pin 9 blocks
 * of the long prompt past its limit of 8 (res[3]), pins 4 of them (res[4]), and pins in a
 * pool it may only read (res[5]). */
static void child_other_uid(paged_pool *p, int *res, int arg)
{
    (void) arg;
    paged_client *c = connect_client("other-2");
    paged_pool *ro = NULL;
    res[0] = paged_prefix_unpin(p, NULL, SALT, NB, prompts[P_PINNED]);
    res[1] = paged_prefix_evict(p, NULL, SALT, NB, prompts[P_PINNED]);
    res[2] = c != NULL ? paged_pool_set_ttl(c, "xpool", 5) : -999;
    res[3] = paged_prefix_pin(p, NULL, SALT, N / 4 + 1, prompts[P_LONG]);
    res[4] = paged_prefix_pin(p, NULL, SALT, NB, prompts[P_LONG]);
    if (c != NULL && paged_pool_attach(c, "ropool", &ro) == PAGED_OK)
        res[5] = paged_prefix_pin(ro, NULL, SALT, NB, prompts[P_PINNED]);
    paged_client_close(c);
}

/* Child, as root, on the pool it is attached to: publishes prompt A and 9 blocks of the long
 * prompt (res[0], res[1]). */
static void child_publish_two(paged_pool *p, int *res, int arg)
{
    (void) arg;
    int32_t ids[N / 4 + 1];
    if (paged_alloc(p, NB, ids) == PAGED_OK)
        res[0] = paged_publish(p, NULL, SALT, NB, prompts[P_PINNED], ids);
    if (paged_alloc(p, N / 4 + 1, ids) == PAGED_OK)
        res[1] = paged_publish(p, NULL, SALT, N / 4 + 1, prompts[P_LONG], ids);
}

/* Another uid may not drop root's pins nor set the ttl, is held to its pin limit, may not pin
 * in a pool it cannot write; the owner's unpin of no prefix drops every uid's pins. */
static void test_other_uid(paged_client *c)
{
    if (geteuid() != 0) {
        skip(10, "not root: no second uid to try");
        return;
    }
    paged_pool_desc d = { .name = "xpool", .num_layers = 1, .num_kv_heads = 1, .head_dim = 64, .block_size = B,
                          .dtype = PAGED_DTYPE_F32, .num_blocks = N, .mode = 0666 | PAGED_POOL_SHARED_PREFIXES };
    paged_pool *x = NULL, *ro = NULL;
    if (paged_pool_create(c, &d, &x) != PAGED_OK)
        bail("cannot create xpool: %s", paged_client_error(c));
    d.name = "ropool";
    d.mode = 0644;
    if (paged_pool_create(c, &d, &ro) != PAGED_OK)
        bail("cannot create ropool: %s", paged_client_error(c));
    int res[NRES], ro_res[NRES];
    in_child_as((uid_t) -1, "xpool", child_publish_two, 0, res);
    in_child_as((uid_t) -1, "ropool", child_publish_two, 0, ro_res);
    ok(res[0] == NB && res[1] == N / 4 + 1 && ro_res[0] == NB, "other uid: root published the prompts");
    is_int(NB, paged_prefix_pin(x, NULL, SALT, NB, prompts[P_PINNED]), "other uid: root pins prompt A");
    if (in_child_as(OTHER_UID, "xpool", child_other_uid, 0, res) == 77) {
        skip(8, "root, but setuid to nobody (%d) is refused here", OTHER_UID);
        return;
    }
    is_int(PAGED_E_PERM, res[0], "other uid: may not unpin root's pins");
    is_int(PAGED_E_PERM, res[1], "other uid: may not evict root's pinned prefix");
    is_int(PAGED_E_PERM, res[2], "other uid: may not set the ttl of a pool it does not own");
    is_int(PAGED_E_LIMIT, res[3], "other uid: 9 blocks pass its pin limit of 8");
    is_int(NB, res[4], "other uid: pins 4 blocks within it");
    is_int(PAGED_E_PERM, res[5], "other uid: may not pin in a pool it may only read");
    struct pcore_pool_item it;
    struct rc_client ctl;
    if (rc_connect(daemon_.socket, "ctl2", PCORE_HELLO_CONTROL, &ctl) != 0 || rc_pool_item(&ctl, "xpool", &it) != 0)
        bail("no LIST item for xpool");
    rc_close(&ctl);
    is_int(2 * NB, (int) it.pinned, "other uid: 8 blocks pinned in xpool, 4 each");
    is_int(2 * NB, paged_prefix_unpin(x, NULL, 0, 0, NULL), "the owner's unpin of no prefix drops both uids' pins");
}

/* The pool's token counters say what the test's lookups asked for and found. */
static void test_counters(struct rc_client *ctl)
{
    struct pcore_pool_item it = pool_item(ctl);
    ok(it.lookup_tokens == asked_tokens && it.hit_tokens == hit_tokens,
       "counters: %llu tokens looked up, %llu found, as the test counted (%llu, %llu)",
       (unsigned long long) it.lookup_tokens, (unsigned long long) it.hit_tokens,
       (unsigned long long) asked_tokens, (unsigned long long) hit_tokens);
    ok(asked_tokens > hit_tokens && hit_tokens > 0, "counters: the test both hit and missed");
}

/* A PREFIX message with room for two hashes. */
struct prefix2 {
    struct pcore_msg_prefix m;
    paged_hash h[2];
};

/* Sends the first len bytes of *msg on ctl; returns the status (0 for an OK) and checks that
 * the daemon's message names what (NULL: any message). */
static int send_prefix(struct rc_client *ctl, struct prefix2 *msg, size_t len, const char *what)
{
    struct pcore_msg_hdr reply;
    msg->m.hdr.type = PCORE_MSG_PREFIX;
    msg->m.hdr.len = (uint32_t) len;
    long rc = rc_control(ctl, msg, len, &reply, sizeof reply, NULL);
    if (rc < 0 && what != NULL && strstr(ctl->errmsg, what) == NULL) {
        diag("the daemon said '%s', not '%s'", ctl->errmsg, what);
        return 1;
    }
    return rc < 0 ? (int) rc : 0;
}

/* Every malformed PREFIX is refused, naming the field; the daemon goes on. */
static void test_refusals(struct rc_client *ctl)
{
    struct prefix2 good, m;
    memset(&good, 0, sizeof good);
    good.m.op = PCORE_PREFIX_PIN;
    good.m.count = 1;
    snprintf(good.m.name, sizeof good.m.name, "%s", POOL);
    const size_t one = sizeof good.m + sizeof good.h[0];
    m = good;
    is_int(0, send_prefix(ctl, &m, one, NULL), "PREFIX pin of an unknown hash: OK");
    m = good;
    m.m.op = 9;
    is_int(PAGED_E_INVAL, send_prefix(ctl, &m, one, "op 9 unknown"), "PREFIX op 9: refused naming op");
    m = good;
    m.m.reserved = 1;
    is_int(PAGED_E_INVAL, send_prefix(ctl, &m, one, "reserved"), "PREFIX reserved 1: refused");
    m = good;
    m.m.count = 2;
    is_int(PAGED_E_PROTO, send_prefix(ctl, &m, one, "count 2 does not match"), "PREFIX count past its bytes");
    is_int(PAGED_E_PROTO, send_prefix(ctl, &m, one + 3, "count 2 does not match"), "PREFIX of a partial hash");
    m = good;
    m.m.count = 0;
    is_int(PAGED_E_INVAL, send_prefix(ctl, &m, sizeof m.m, "count 0 not from 1"), "PREFIX pin of 0 hashes");
    m = good;
    m.m.ttl_ms = 5;
    is_int(PAGED_E_INVAL, send_prefix(ctl, &m, one, "ttl_ms is 5"), "PREFIX pin with a ttl: refused");
    m = good;
    m.m.op = PCORE_PREFIX_TTL;
    is_int(PAGED_E_INVAL, send_prefix(ctl, &m, one, "ttl: count 1"), "PREFIX ttl with a hash: refused");
    m.m.count = 0;
    m.m.ttl_ms = PCORE_PREFIX_MAX_TTL_MS + 1;
    is_int(PAGED_E_INVAL, send_prefix(ctl, &m, sizeof m.m, "over"), "PREFIX ttl over 30 days: refused");
    m = good;
    m.m.name[0] = '\0';
    m.m.pool_id = 999;
    is_int(PAGED_E_NOENT, send_prefix(ctl, &m, one, "no such pool with id 999"), "PREFIX of pool id 999");
    m = good;
    memset(m.m.name, 'x', sizeof m.m.name);
    is_int(PAGED_E_PROTO, send_prefix(ctl, &m, one, "not NUL-terminated"), "PREFIX name unterminated");
    m = good;
    is_int(PAGED_E_PROTO, send_prefix(ctl, &m, sizeof m.m - 8, "PREFIX is"), "PREFIX shorter than its fixed part");
    m = good;
    is_int(0, send_prefix(ctl, &m, one, NULL), "after every refusal the daemon still answers PREFIX");
}

/* Runs the cases against a real daemon; returns 0 (TAP reports the results). */
int main(void)
{
    plan_lazy();
    for (int k = 0; k < NPROMPTS; k++)
        for (int i = 0; i < N * B; i++)
            prompts[k][i] = 1000 * (k + 1) + i;
    /* Another uid must reach the socket: a world-searchable directory, a 0666 socket. */
    pagedd_mkdir(&daemon_);
    if (chmod(daemon_.dir, 0755) != 0)
        sysbail("chmod %s", daemon_.dir);
    const char *const args[] = { "--socket-mode=0666", NULL };
    if (pagedd_start(&daemon_, args, NULL, NULL) != 0)
        bail("pagedd did not start");
    paged_client *c = connect_client("owner");
    struct rc_client ctl, sub;
    if (c == NULL || rc_connect(daemon_.socket, "ctl", PCORE_HELLO_CONTROL, &ctl) != 0
        || rc_connect(daemon_.socket, "sub", PCORE_HELLO_CONTROL, &sub) != 0)
        bail("cannot connect");
    struct pcore_msg_hdr h = { PCORE_MSG_SUBSCRIBE, 0, 0, sizeof h }, reply;
    if (rc_control(&sub, &h, sizeof h, &reply, sizeof reply, NULL) != (long) sizeof reply)
        bail("cannot subscribe");
    paged_pool_desc d = { .name = POOL, .num_layers = 1, .num_kv_heads = 1, .head_dim = 64, .block_size = B,
                          .dtype = PAGED_DTYPE_F32, .num_blocks = N, .mode = 0600 };
    paged_pool *p = NULL;
    if (paged_pool_create(c, &d, &p) != PAGED_OK)
        bail("cannot create the pool: %s", paged_client_error(c));
    test_pin(p, &ctl);
    test_limits(c, p, &ctl);
    test_evict(p, &ctl, &sub);
    test_ttl(c, p, &ctl, &sub);
    test_counters(&ctl);
    test_refusals(&ctl);
    test_other_uid(c);
    rc_close(&sub);
    rc_close(&ctl);
    paged_client_close(c);
    is_int(0, pagedd_stop(&daemon_), "the daemon exits 0");
    return 0;
}
