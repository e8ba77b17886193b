/* peers-t.c: published prefixes moved between two pagedd over UCX TCP on loopback: found, refused, corrupted, lost. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/proto.h"
#include "paged.h"
#include "tests/client/daemon_harness.h"
#include "tests/service/arena-io.h"
#include "tests/service/kvprompt.h"
#include "tests/service/rawclient.h"
#include "daemon/peer/wire.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"

#ifdef HAVE_UCX

/* The pool on every daemon: 2 layers, 2 KV heads, head_dim 64, blocks of 16 tokens, f32, 8
 * blocks; a prompt is 4 blocks. */
#define L KP_L
#define H KP_H
#define D KP_D
#define B KP_B
#define N 8
#define NB KP_NB
#define UNIT KP_UNIT
#define SALT 7u
#define POOL "shared-prefixes"
#define TIMEOUT_MS 400

/* One daemon of the test, with a client that made the pool and a control connection. */
struct node {
    struct pagedd d;
    paged_client *c;
    paged_pool *p;
    struct rc_client ctl;
    unsigned port;               /* its peer-listen port, or 0 */
};

static struct kp_prompt *prompt; /* shared with the children */
static struct kp_found *report;
static char key_path[512], wrong_key_path[512];

/* Returns 64 random bits of the kernel's; bails when they cannot be read. */
static uint64_t random_seed(void)
{
    uint64_t s = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, &s, sizeof s) != (ssize_t) sizeof s)
        sysbail("/dev/urandom");
    close(fd);
    return s;
}

/* Writes a key file of 32 random bytes at path with mode; bails on failure. Returns nothing. */
static void write_key(const char *path, mode_t mode)
{
    uint64_t k[4] = { random_seed(), random_seed(), random_seed(), random_seed() };
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, k, sizeof k) != (ssize_t) sizeof k || fchmod(fd, mode) != 0)
        sysbail("writing %s", path);
    close(fd);
}

/* Connects a libpaged client to n; returns it or NULL. */
static paged_client *connect_to(const struct node *n, const char *name)
{
    paged_connect_opts o = { .socket_path = n->d.socket, .name = name, .timeout_ms = 10000 };
    paged_client *c = NULL;
    return paged_client_connect(&o, &c) == PAGED_OK ? c : NULL;
}

/* Reads n's peer-listen port from its log (written once it listens). Returns it, or 0. */
static unsigned read_port(const struct node *n)
{
    const char *needle = "listening for peers on 127.0.0.1:";
    if (!pagedd_log_wait(&n->d, needle, 10000))
        return 0;
    FILE *f = fopen(n->d.log, "r");
    char line[512];
    unsigned port = 0;
    while (f != NULL && port == 0 && fgets(line, sizeof line, f) != NULL) {
        const char *at = strstr(line, needle);
        if (at != NULL)
            port = (unsigned) strtoul(at + strlen(needle), NULL, 10);
    }
    if (f != NULL)
        fclose(f);
    return port;
}

/*
 * Starts daemon n: listening for peers on a free loopback port when listen, with peer and then
 * peer2 (ports, 0: none) as its peers, the key file key, and the knob setting knob (NAME=VALUE,
 * may be NULL); on device (a cuda daemon's --device) with every transport UCX has where device
 * is 0 or more, else with UCX_TLS=tcp; then makes the pool with PAGED_POOL_PEERS and a control
 * connection. Bails when any of it fails. Returns nothing.
 */
static void start_node_on(struct node *n, int listen, unsigned peer, unsigned peer2, const char *key,
                          const char *knob, int device)
{
    char listen_arg[64], peers_arg[96], key_arg[600], timeout_arg[64], device_arg[32];
    snprintf(listen_arg, sizeof listen_arg, "--peer-listen=127.0.0.1:0");
    if (peer2 != 0)
        snprintf(peers_arg, sizeof peers_arg, "--peers=127.0.0.1:%u,127.0.0.1:%u", peer, peer2);
    else
        snprintf(peers_arg, sizeof peers_arg, "--peers=127.0.0.1:%u", peer);
    snprintf(key_arg, sizeof key_arg, "--peer-key=%s", key);
    snprintf(timeout_arg, sizeof timeout_arg, "--peer-timeout=%d", TIMEOUT_MS);
    const char *args[6] = { key_arg, timeout_arg, NULL, NULL, NULL, NULL };
    int i = 2;
    if (listen)
        args[i++] = listen_arg;
    if (peer != 0)
        args[i++] = peers_arg;
    if (device >= 0) {
        snprintf(device_arg, sizeof device_arg, "--device=%d", device);
        args[i++] = device_arg;
    }
    const char *env[] = { device >= 0 ? "UCX_TLS=all" : "UCX_TLS=tcp", "UCX_WARN_UNUSED_ENV_VARS=n", knob, NULL };
    memset(n, 0, sizeof *n);
    if (pagedd_start(&n->d, args, env, NULL) != 0)
        bail("pagedd did not start with peers");
    if (listen && (n->port = read_port(n)) == 0)
        bail("no peer-listen port in the log");
    n->c = connect_to(n, "peers-owner");
    paged_pool_desc desc = {
        .name = POOL, .num_layers = L, .num_kv_heads = H, .head_dim = D, .block_size = B,
        .dtype = PAGED_DTYPE_F32, .num_blocks = N, .mode = 0600 | PAGED_POOL_PEERS,
    };
    if (n->c == NULL || paged_pool_create(n->c, &desc, &n->p) != PAGED_OK)
        bail("cannot create the pool: %s", n->c != NULL ? paged_client_error(n->c) : "no connection");
    if (rc_connect(n->d.socket, "ctl", PCORE_HELLO_CONTROL, &n->ctl) != 0)
        bail("control connection");
}

/* start_node_on on no device, with UCX_TLS=tcp. Returns nothing. */
static void start_node2(struct node *n, int listen, unsigned peer, unsigned peer2, const char *key,
                        const char *knob)
{
    start_node_on(n, listen, peer, peer2, key, knob, -1);
}

/* start_node2 with one peer at most. Returns nothing. */
static void start_node(struct node *n, int listen, unsigned peer, const char *key, const char *knob)
{
    start_node2(n, listen, peer, 0, key, knob);
}

/* Stops n (SIGTERM), checking that it exits 0 (a sanitizer's report would make it fail), and
 * removes its directory. Returns nothing. */
static void stop_node(struct node *n)
{
    rc_close(&n->ctl);
    paged_client_close(n->c);
    if (n->d.pid != 0) {
        int status = pagedd_stop(&n->d);
        ok(status == 0, "pagedd on peer port %u exits 0 (status %d)", n->port, status);
    }
    pagedd_cleanup(&n->d);
}

/* Child: writes a prompt of fresh random keys, values and queries into NB blocks of p, records
 * its units and decodes, publishes and frees them. Sets report->status. */
static void child_publish(paged_pool *p)
{
    uint64_t s = random_seed();
    report->status = kp_publish(p, N, prompt, (int32_t) (s % 100000u), s, SALT);
}

/* Child: looks the prompt up in p and checks what it found, into *report. */
static void child_lookup(paged_pool *p)
{
    kp_check(p, N, prompt, SALT, report);
}

/* Starts fn in a child process with a client of its own attached to n's pool, the report
 * cleared. Returns the child's pid. */
static pid_t start_child(const struct node *n, void (*fn)(paged_pool *))
{
    memset(report, 0, sizeof *report);
    report->found = -999;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        sysbail("fork");
    if (pid == 0) {
        paged_client *c = connect_to(n, "peers-child");
        paged_pool *p = NULL;
        int rc = c != NULL ? paged_pool_attach(c, POOL, &p) : PAGED_E_NOTCONN;
        if (rc == PAGED_OK && kp_on_cuda)
            harness_use_arena_device(c);   /* B serves the second GPU: the test's tensors go there */
        if (rc == PAGED_OK)
            fn(p);
        else
            report->status = rc;
        paged_client_close(c);
        _exit(rc == PAGED_OK ? 0 : 1);
    }
    return pid;
}

/* Runs fn as start_child does and waits for it. Returns its exit status (0: it ran). */
static int in_child(const struct node *n, void (*fn)(paged_pool *))
{
    int status = 0;
    waitpid(start_child(n, fn), &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Runs pactl -s n's socket [-f json] peers into out (size bytes, NUL-terminated). Returns its
 * exit status, or -1 when it could not be run. */
static int pactl_peers(const struct node *n, int json, char *out, size_t size)
{
    const char *top = getenv("top_builddir");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/tools/pactl' -s '%s' %s peers", top != NULL ? top : "..", n->d.socket,
             json ? "-f json" : "");
    FILE *f = popen(cmd, "r");
    if (f == NULL)
        return -1;
    size_t got = fread(out, 1, size - 1, f);
    out[got] = '\0';
    int status = pclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Waits until n's pool named pool has want blocks free and none referenced; reports what. */
static void expect_free_in(struct node *n, const char *pool, uint32_t want, const char *what)
{
    struct pcore_pool_item it;
    int rc = rc_pool_item_until(&n->ctl, pool, rc_pool_free_is, want, 10000, &it);
    ok(rc == 0 && it.referenced == 0, "%s: %u blocks free, none referenced (%u free, %u referenced)", what, want,
       it.free, it.referenced);
}

/* Waits until n's pool has want blocks free and none referenced; reports what. */
static void expect_free(struct node *n, uint32_t want, const char *what)
{
    expect_free_in(n, POOL, want, what);
}
/* A client of A publishes a prompt; a client of B, A's peer, looks it up: reported as tests of
 * what (the whole prompt found, with A's bytes and A's decode, bit for bit). Returns nothing. */
static void publish_and_find(const struct node *a, const struct node *b, const char *what)
{
    in_child(a, child_publish);
    is_int(PAGED_OK, report->status, "%s: a client of A writes, decodes and publishes a prompt", what);
    in_child(b, child_lookup);
    is_int(NB, report->found, "%s: a client of B finds all %d blocks", what, NB);
    ok(report->same_bytes, "%s: they hold A's bytes, bit for bit", what);
    ok(report->same_decode, "%s: decoding over them on B equals the decode on A, bit for bit (status %d)", what,
       report->status);
}

/* A publishes; B, its peer, finds the whole prompt, bit for bit, and publishes it itself. */
static void test_found(void)
{
    struct node a, b;
    start_node(&a, 1, 0, key_path, NULL);
    start_node(&b, 0, a.port, key_path, NULL);
    ok(pagedd_log_wait(&b.d, "authenticated", 10000) && pagedd_log_wait(&a.d, "authenticated", 10000),
       "found: the two daemons authenticate each other");
    publish_and_find(&a, &b, "found");
    expect_free(&b, N - NB, "found: B keeps the blocks cached");
    static char out[8192];
    char want[128];
    snprintf(want, sizeof want, "\"address\":\"127.0.0.1:%u\"", a.port);
    int rc = pactl_peers(&b, 1, out, sizeof out);
    ok(rc == 0 && strstr(out, want) != NULL && strstr(out, "\"state\":\"authenticated\"") != NULL
           && strstr(out, "\"blocks_fetched\":4") != NULL,
       "found: pactl -f json peers on B shows A authenticated, 4 blocks fetched");
    if (rc != 0 || strstr(out, "\"blocks_fetched\":4") == NULL)
        diag("pactl: %s", out);
    ok(strstr(out, "\"transports\":\"tcp/lo") != NULL && strstr(out, "\"tcp_only\":true") != NULL,
       "found: pactl -f json peers on B says the blocks moved over TCP on loopback, and only TCP");
    rc = pactl_peers(&b, 0, out, sizeof out);
    ok(rc == 0 && strstr(out, "GB/S") != NULL && strstr(out, "authenticated over tcp/lo") != NULL
           && strstr(out, "(TCP only)") != NULL,
       "found: pactl peers prints its table, with the transports");
    ok(pagedd_log_contains(&b.d, "only TCP is left between the daemons"), "found: B's log says only TCP is left");
    stop_node(&a);
    in_child(&b, child_lookup);
    ok(report->found == NB && report->same_decode, "found: with A gone, B finds them in its own pool (%d)",
       report->found);
    stop_node(&b);
}

/* Three daemons: B asks A, which has nothing, then C, which has the prompt; with A dead, C
 * still serves B. */
static void test_three(void)
{
    struct node a, b, c;
    start_node(&a, 1, 0, key_path, NULL);
    start_node(&c, 1, 0, key_path, NULL);
    start_node2(&b, 0, a.port, c.port, key_path, NULL);
    ok(pagedd_log_wait(&a.d, "authenticated", 10000) && pagedd_log_wait(&c.d, "authenticated", 10000),
       "three: B authenticates with A and with C");
    in_child(&c, child_publish);
    is_int(PAGED_OK, report->status, "three: a client of C publishes a prompt");
    in_child(&b, child_lookup);
    ok(report->found == NB && report->same_bytes && report->same_decode,
       "three: A has none of it, and B finds all %d blocks at C, bit for bit (%d)", NB, report->found);
    stop_node(&a);
    in_child(&c, child_publish);
    is_int(PAGED_OK, report->status, "three: with A stopped, C publishes another prompt");
    in_child(&b, child_lookup);
    ok(report->found == NB && report->same_decode, "three: B still finds it at C (%d)", report->found);
    expect_free(&b, N - 2 * NB, "three: B holds nothing, both prompts cached");
    stop_node(&b);
    stop_node(&c);
}

/* A peer with another key: never authenticated, B finds nothing, takes nothing. */
static void test_wrong_key(void)
{
    struct node a, b;
    start_node(&a, 1, 0, key_path, NULL);
    start_node(&b, 0, a.port, wrong_key_path, NULL);
    ok(pagedd_log_wait(&b.d, "authentication failed", 10000) || pagedd_log_wait(&b.d, "connection lost", 10000),
       "wrong key: B logs the failed handshake");
    ok(pagedd_log_wait(&a.d, "authentication failed", 10000), "wrong key: A logs the failed handshake");
    in_child(&a, child_publish);
    is_int(PAGED_OK, report->status, "wrong key: a client of A publishes a prompt");
    in_child(&b, child_lookup);
    is_int(0, report->found, "wrong key: B's lookup finds nothing");
    expect_free(&b, N, "wrong key: no block of B leaked");
    static char out[8192];
    int rc = pactl_peers(&b, 0, out, sizeof out);
    ok(rc == 0 && strstr(out, "failed: ") != NULL, "wrong key: pactl peers on B shows the peer failed and why");
    if (rc != 0 || strstr(out, "failed: ") == NULL)
        diag("pactl: %s", out);
    stop_node(&b);
    stop_node(&a);
}

/* A peer that corrupts what it serves: B keeps only its local prefix, and counts it. */
static void test_corrupt(void)
{
    struct node a, b;
    start_node(&a, 1, 0, key_path, "PAGEDD_PEER_CORRUPT=1");
    start_node(&b, 0, a.port, key_path, NULL);
    ok(pagedd_log_wait(&b.d, "authenticated", 10000), "corrupt: B authenticates A");
    in_child(&a, child_publish);
    is_int(PAGED_OK, report->status, "corrupt: a client of A publishes a prompt");
    in_child(&b, child_lookup);
    is_int(0, report->found, "corrupt: B's lookup finds nothing");
    ok(pagedd_log_contains(&b.d, "checksum does not match"), "corrupt: B logs the bad checksum");
    expect_free(&b, N, "corrupt: no block of B leaked");
    stop_node(&b);
    stop_node(&a);
}

/* A peer that never answers: B's lookup misses after the timeout; killed while it holds a
 * request, B's lookup misses at once. Neither takes a block. */
static void test_stall(void)
{
    struct node a, b;
    start_node(&a, 1, 0, key_path, "PAGEDD_PEER_STALL=1");
    start_node(&b, 0, a.port, key_path, NULL);
    ok(pagedd_log_wait(&b.d, "authenticated", 10000), "stall: B authenticates A");
    in_child(&a, child_publish);
    is_int(PAGED_OK, report->status, "stall: a client of A publishes a prompt");
    const uint64_t limit = (uint64_t) (TIMEOUT_MS + 2000) * 1000000u;
    in_child(&b, child_lookup);
    ok(report->found == 0 && report->lookup_ns >= (uint64_t) (TIMEOUT_MS - 50) * 1000000u && report->lookup_ns < limit,
       "stall: B's lookup misses after the peer-timeout of %d ms (%d found, %llu ms)", TIMEOUT_MS, report->found,
       (unsigned long long) (report->lookup_ns / 1000000u));
    ok(pagedd_log_contains(&b.d, "no answer within peer-timeout"), "stall: B logs the timeout");
    pid_t child = start_child(&b, child_lookup);
    ok(pagedd_log_wait(&a.d, "request 2 left unanswered", 10000), "stall: A holds B's second request");
    /* That LOOKUP holds up its own client only: another client of B is answered meanwhile. */
    int status = 0;
    int32_t id = -1;
    int rc = paged_alloc(b.p, 1, &id);
    const int waiting = report->lookup_ns == 0 && waitpid(child, &status, WNOHANG) == 0;
    ok(rc == PAGED_OK && waiting, "stall: another client of B is answered while that lookup waits for A (%s, %s)",
       paged_strerror(rc), waiting ? "still waiting" : "it had ended");
    is_int(PAGED_OK, paged_free(b.p, 1, &id), "stall: and frees its block");
    kill(a.d.pid, SIGKILL);
    waitpid(a.d.pid, &status, 0);
    a.d.pid = 0;
    waitpid(child, &status, 0);
    ok(report->found == 0 && report->lookup_ns < limit, "stall: A killed meanwhile, B's lookup misses (%d, %llu ms)",
       report->found, (unsigned long long) (report->lookup_ns / 1000000u));
    expect_free(&b, N, "stall: no block of B leaked");
    in_child(&b, child_lookup);
    ok(report->found == 0 && report->lookup_ns < limit, "stall: with A dead, a lookup misses (%llu ms)",
       (unsigned long long) (report->lookup_ns / 1000000u));
    stop_node(&b);
    stop_node(&a);          /* killed already: this closes its client and control connection */
}

/* A key file group or others may read: pagedd refuses to start, naming it and why. */
static void test_key_mode(void)
{
    struct pagedd d = { 0 };
    pagedd_mkdir(&d);
    char path[600], arg[700];
    snprintf(path, sizeof path, "%s/open-key", d.dir);
    write_key(path, 0644);
    snprintf(arg, sizeof arg, "--peer-key=%s", path);
    const char *args[] = { arg, "--peers=127.0.0.1:9", NULL };
    const char *env[] = { "UCX_TLS=tcp", NULL };
    ok(pagedd_start(&d, args, env, NULL) != 0, "key mode: pagedd with a key file of mode 0644 does not start");
    ok(pagedd_log_contains(&d, path) && pagedd_log_contains(&d, "0644"),
       "key mode: its log names the file and the mode");
    if (d.pid != 0)
        pagedd_stop(&d);
    pagedd_cleanup(&d);
}

/* A prompt of LONG_NB blocks, more than one FETCH may name. */
#define LONG_N 640
#define LONG_NB 600
#define LONG_CHUNK 64            /* blocks appended per call */
_Static_assert(LONG_NB > 2 * PD_PEER_MAX_ASK, "the long prompt takes three FETCHes");

/* Makes pool "long" of LONG_N blocks on a and on b (*pa, *pb) and publishes on a a prompt of
 * LONG_NB blocks of fresh random keys and values (its blocks in ids, its tokens in tokens),
 * reporting that as a test of what. Bails when a pool cannot be made. Returns nothing. */
static void publish_long(struct node *a, struct node *b, paged_pool **pa, paged_pool **pb, int32_t *ids,
                         int32_t *tokens, const char *what)
{
    paged_pool_desc desc = {
        .name = "long", .num_layers = L, .num_kv_heads = H, .head_dim = D, .block_size = B,
        .dtype = PAGED_DTYPE_F32, .num_blocks = LONG_N, .mode = 0600 | PAGED_POOL_PEERS,
    };
    if (paged_pool_create(a->c, &desc, pa) != PAGED_OK || paged_pool_create(b->c, &desc, pb) != PAGED_OK)
        bail("cannot create the long pools");
    static int32_t slots[LONG_CHUNK * B];
    static float k[LONG_CHUNK * B * H * D], v[LONG_CHUNK * B * H * D];
    uint64_t seed = random_seed();
    for (size_t i = 0; i < LONG_NB * B; i++)
        tokens[i] = (int32_t) (kp_rnd(&seed) * 1000.0f) + 1000;
    int rc = paged_alloc(*pa, LONG_NB, ids);
    for (int first = 0; rc == PAGED_OK && first < LONG_NB; first += LONG_CHUNK) {
        const int nb = LONG_NB - first < LONG_CHUNK ? LONG_NB - first : LONG_CHUNK;
        for (int t = 0; t < nb * B; t++)
            slots[t] = ids[first + t / B] * B + t % B;
        for (int l = 0; rc == PAGED_OK && l < L; l++) {
            for (size_t i = 0; i < (size_t) nb * B * H * D; i++) {
                k[i] = kp_rnd(&seed);
                v[i] = kp_rnd(&seed);
            }
            rc = paged_append(*pa, l, (uint32_t) (nb * B), PAGED_DTYPE_F32, k, v, slots);
        }
    }
    if (rc == PAGED_OK)
        rc = paged_publish(*pa, NULL, SALT, LONG_NB, tokens, ids);
    is_int(LONG_NB, rc, "%s: a client of A publishes a prompt of %d blocks", what, LONG_NB);
}

/* B fetches the long prompt from A in several requests, each part but the first asked once the
 * one before it was staged whole, all three at once, and every block comes bit for bit. */
static void test_long_chain(void)
{
    struct node a, b;
    start_node(&a, 1, 0, key_path, NULL);
    start_node(&b, 0, a.port, key_path, NULL);
    ok(pagedd_log_wait(&b.d, "authenticated", 10000), "long: B authenticates A");
    paged_pool *pa = NULL, *pb = NULL;
    static int32_t ids[LONG_NB], found[LONG_NB], tokens[LONG_NB * B];
    publish_long(&a, &b, &pa, &pb, ids, tokens, "long");
    int rc = paged_lookup(pb, NULL, SALT, LONG_NB, tokens, found);
    is_int(LONG_NB, rc, "long: B's LOOKUP finds all %d blocks, more than one request of %u asks", LONG_NB,
           PD_PEER_MAX_ASK);
    void *base_a = NULL, *base_b = NULL;
    int same = rc == LONG_NB && paged_pool_map(pa, &base_a) == PAGED_OK && paged_pool_map(pb, &base_b) == PAGED_OK;
    static float ua[KP_UNIT], ub[KP_UNIT];
    for (int i = 0; same && i < LONG_NB; i++) {
        kp_read_unit(base_a, LONG_N, ids[i], ua);
        kp_read_unit(base_b, LONG_N, found[i], ub);
        same = memcmp(ua, ub, sizeof ua) == 0;
    }
    ok(same, "long: every block on B holds A's bytes, bit for bit");
    static char out[8192];
    rc = pactl_peers(&b, 1, out, sizeof out);
    ok(rc == 0 && strstr(out, "\"blocks_fetched\":600") != NULL && strstr(out, "\"failures\":0") != NULL,
       "long: pactl -f json peers on B counts %d blocks fetched and no failure", LONG_NB);
    if (rc != 0 || strstr(out, "\"blocks_fetched\":600") == NULL)
        diag("pactl: %s", out);
    ok(pagedd_log_contains(&b.d, "in 3 parts and"), "long: B's log says the fetch took 3 parts (256, 256 and 88 "
       "blocks)");
    is_int(PAGED_OK, paged_free(pb, LONG_NB, found), "long: B frees them");
    is_int(PAGED_OK, paged_free(pa, LONG_NB, ids), "long: A frees them");
    stop_node(&a);
    stop_node(&b);
}

/* The long prompt from a peer that corrupts what it serves: B has asked for the next parts
 * while the first is pulled, the first fails its check, and B drops them all: it finds nothing,
 * keeps no block, and both daemons exit cleanly (under the sanitizers: nothing leaked). */
static void test_long_corrupt(void)
{
    struct node a, b;
    start_node(&a, 1, 0, key_path, "PAGEDD_PEER_CORRUPT=1");
    start_node(&b, 0, a.port, key_path, NULL);
    ok(pagedd_log_wait(&b.d, "authenticated", 10000), "long corrupt: B authenticates A");
    paged_pool *pa = NULL, *pb = NULL;
    static int32_t ids[LONG_NB], found[LONG_NB], tokens[LONG_NB * B];
    publish_long(&a, &b, &pa, &pb, ids, tokens, "long corrupt");
    is_int(0, paged_lookup(pb, NULL, SALT, LONG_NB, tokens, found), "long corrupt: B's LOOKUP finds nothing");
    ok(pagedd_log_contains(&b.d, "checksum does not match"), "long corrupt: B logs the bad checksum");
    expect_free_in(&b, "long", LONG_N, "long corrupt: no block of B leaked");
    is_int(PAGED_OK, paged_free(pa, LONG_NB, ids), "long corrupt: A frees its prompt");
    stop_node(&b);
    stop_node(&a);
}

/*
 * On the GPUs: A (device 0) publishes; B (device 1 where there are two: one daemon a GPU) finds
 * the whole prompt, bit for bit, with the same decode. Both stage in device memory when their
 * UCX moves GPU memory, or in host memory where host_staging sets PAGEDD_PEER_STAGING=host;
 * each daemon's log says which, and the test expects what it was told (want_device).
 */
static void test_found_cuda(int devices, int host_staging, int want_device)
{
    const char *what = host_staging ? "cuda, host staging" : "cuda";
    const char *knob = host_staging ? "PAGEDD_PEER_STAGING=host" : NULL;
    struct node a, b;
    start_node_on(&a, 1, 0, 0, key_path, knob, 0);
    start_node_on(&b, 0, a.port, 0, key_path, knob, devices >= 2 ? 1 : 0);
    ok(pagedd_log_wait(&b.d, "authenticated", 10000) && pagedd_log_wait(&a.d, "authenticated", 10000),
       "%s: the two daemons (devices 0 and %d) authenticate each other", what, devices >= 2 ? 1 : 0);
    const char *mode = want_device && !host_staging ? "blocks move in device memory" : "move through host staging";
    ok(pagedd_log_wait(&a.d, mode, 1000) && pagedd_log_wait(&b.d, mode, 1000), "%s: both logs say the %s", what,
       mode);
    publish_and_find(&a, &b, what);
    expect_free(&b, N - NB, what);
    static char out[8192];
    int rc = pactl_peers(&b, 1, out, sizeof out);
    ok(rc == 0 && strstr(out, "\"blocks_fetched\":4") != NULL && strstr(out, "\"failures\":0") != NULL,
       "%s: pactl -f json peers on B counts 4 blocks fetched, no failure", what);
    diag("%s: pactl peers on B: %s", what, out);
    stop_node(&a);
    stop_node(&b);
}

/* Runs the tests: on the cpu backend every case; on cuda (PAGED_TEST_BACKEND=cuda) the cases
 * that read pools through kvprompt's device copies, on two GPUs where there are two. */
int main(void)
{
    const char *backend = getenv("PAGED_TEST_BACKEND");
    const int cuda = backend != NULL && backend[0] != '\0' && strcmp(backend, "cpu") != 0;
    int devices = 0;
    if (cuda && strcmp(backend, "cuda") != 0)
        skip_all("PAGED_TEST_BACKEND=%s: the peers' test runs on cpu or cuda", backend);
    if (cuda && (devices = aio_devices(NULL)) == 0)
        skip_all("no CUDA device");
    plan_lazy();
    kp_on_cuda = cuda;
    prompt = mmap(NULL, sizeof *prompt, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    report = mmap(NULL, sizeof *report, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (prompt == MAP_FAILED || report == MAP_FAILED)
        sysbail("mmap");
    struct pagedd keys = { 0 };
    pagedd_mkdir(&keys);
    snprintf(key_path, sizeof key_path, "%s/peer.key", keys.dir);
    snprintf(wrong_key_path, sizeof wrong_key_path, "%s/wrong.key", keys.dir);
    write_key(key_path, 0600);
    write_key(wrong_key_path, 0600);
    if (cuda) {
        /* PAGED_TEST_PEER_DEVICE=1: this UCX moves GPU memory, so the daemons must stage there. */
        const char *want = getenv("PAGED_TEST_PEER_DEVICE");
        const int want_device = want != NULL && strcmp(want, "1") == 0;
        test_found_cuda(devices, 0, want_device);
        test_found_cuda(devices, 1, want_device);
    } else {
        test_key_mode();
        test_found();
        test_three();
        test_wrong_key();
        test_corrupt();
        test_stall();
        test_long_chain();
        test_long_corrupt();
    }
    pagedd_cleanup(&keys);
    return 0;
}

#else

/* Says the test is skipped: the daemon has no peers without UCX. */
int main(void)
{
    skip_all("built without UCX");
}

#endif
