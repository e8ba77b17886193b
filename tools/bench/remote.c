/* remote.c: paged-bench remote: a published prefix adopted from a peer daemon over UCX, against recomputing it. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/clock.h"
#include "tools/bench/daemon.h"
#ifdef HAVE_CUDA
#include "tools/bench/gpu.h"
#endif
#include "tools/bench/remote.h"
#include "tools/bench/tiers.h"
#include "tools/common/spawn.h"
#include "tools/pactl_fetch.h"

/*
 * Two daemons of this host: A listens for peers on a loopback port, B has A as its peer, both
 * with one key file. A client of A publishes a prompt of the tiers benchmark's model; a client
 * of B then runs requests for it: a LOOKUP that B's pool misses, so that B fetches the prompt
 * from A (the adopt), then the request's own suffix (APPEND and PREFILL per layer, as the tiers
 * benchmark's). Between requests B evicts the prompt, so every request adopts it anew. The
 * recompute path runs the whole prompt and suffix through paged's PREFILL on B instead. The
 * reference rate is a plain TCP stream over loopback between two processes, measured in the
 * same run: what the bytes could do over the transport UCX chose here, which B's LIST of peers
 * names.
 */

#ifdef HAVE_UCX

#define RB_STREAM_CHUNK (1u << 20)

/* The work directory (removed at exit). */
static char work_dir[1100];

/* Removes the work directory; registered with atexit. */
static void remove_work_dir(void)
{
    if (work_dir[0] != '\0')
        spawn_rmdir(work_dir);
    work_dir[0] = '\0';
}

/* Writes a fresh 32-byte key, mode 0600, to path. Dies on failure. */
static void write_key(const char *path)
{
    unsigned char key[32];
    uint64_t s = (uint64_t) pcore_now_ns() ^ ((uint64_t) getpid() << 32);
    for (size_t i = 0; i < sizeof key; i++)
        key[i] = (unsigned char) (bench_mix64(s + i) >> 24);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, key, sizeof key) != (ssize_t) sizeof key || close(fd) != 0)
        bench_die("remote: writing the key file %s: %s", path, strerror(errno));
}

/* Returns the peer-listen port daemon d logged, waiting up to 10 s. Dies without one. */
static unsigned listen_port(const struct bd_daemon *d)
{
    const char *needle = "listening for peers on 127.0.0.1:";
    for (int tries = 0; tries < 1000; tries++) {
        FILE *f = fopen(d->log, "r");
        char line[512];
        while (f != NULL && fgets(line, sizeof line, f) != NULL) {
            const char *at = strstr(line, needle);
            if (at != NULL) {
                fclose(f);
                return (unsigned) strtoul(at + strlen(needle), NULL, 10);
            }
        }
        if (f != NULL)
            fclose(f);
        nanosleep(&(struct timespec) { 0, 10000000 }, NULL);
    }
    bench_die("remote: daemon A logged no peer-listen port (%s)", d->log);
}

/* Fills *it with the first peer in the LIST of the daemon at socket; returns 0, or -1 when
 * it lists none. Dies when the LIST fails. */
static int peer_item(const char *socket, struct pcore_peer_item *it)
{
    struct pactl_list list;
    tb_list(socket, PCORE_LIST_PEERS, NULL, &list);
    int rc = -1;
    if (list.count != 0) {
        *it = *(const struct pcore_peer_item *) list.items;
        rc = 0;
    }
    pactl_list_free(&list);
    return rc;
}

/* Waits up to 20 s for the daemon at socket to have its peer authenticated; fills *it. Dies
 * when it does not. */
static void await_peer(const char *socket, struct pcore_peer_item *it)
{
    for (int tries = 0; tries < 2000; tries++) {
        if (peer_item(socket, it) == 0 && it->state == PCORE_PEER_AUTHENTICATED)
            return;
        nanosleep(&(struct timespec) { 0, 10000000 }, NULL);
    }
    bench_die("remote: daemon B's peer was not authenticated within 20 s");
}

/* Returns the rate in GB/s of a TCP stream of bytes over loopback from a child process to
 * this one, best of reps. Dies on a socket error. */
static double loopback_gbps(size_t bytes, int reps)
{
    double best = 0;
    for (int r = 0; r < reps; r++) {
        int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof sa;
        if (ls < 0 || bind(ls, (struct sockaddr *) &sa, sizeof sa) != 0 || listen(ls, 1) != 0
            || getsockname(ls, (struct sockaddr *) &sa, &len) != 0)
            bench_die("remote: a loopback socket: %s", strerror(errno));
        pid_t pid = fork();
        if (pid < 0)
            bench_die("remote: fork: %s", strerror(errno));
        if (pid == 0) {
            int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            static char buf[RB_STREAM_CHUNK];
            memset(buf, 0x5a, sizeof buf);
            if (s < 0 || connect(s, (struct sockaddr *) &sa, sizeof sa) != 0)
                _exit(1);
            for (size_t sent = 0; sent < bytes;) {
                ssize_t n = write(s, buf, bytes - sent < sizeof buf ? bytes - sent : sizeof buf);
                if (n <= 0)
                    _exit(2);
                sent += (size_t) n;
            }
            _exit(0);
        }
        int s = accept(ls, NULL, NULL);
        close(ls);
        if (s < 0)
            bench_die("remote: accept: %s", strerror(errno));
        static char buf[RB_STREAM_CHUNK];
        const uint64_t t0 = pcore_now_ns();
        size_t got = 0;
        while (got < bytes) {
            ssize_t n = read(s, buf, sizeof buf);
            if (n <= 0)
                break;
            got += (size_t) n;
        }
        const uint64_t t1 = pcore_now_ns();
        close(s);
        int status = 0;
        waitpid(pid, &status, 0);
        if (got != bytes || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            bench_die("remote: the loopback stream moved %zu of %zu bytes", got, bytes);
        const double gbps = (double) bytes / (double) (t1 - t0);
        if (gbps > best)
            best = gbps;
    }
    return best;
}

/* Creates pool name with PAGED_POOL_PEERS on cl's daemon, of num_blocks blocks. Dies on failure. */
static void peers_pool(struct tb_client *cl, struct tb_pool *tp, const char *name, uint32_t num_blocks)
{
    memset(tp, 0, sizeof *tp);
    snprintf(tp->name, sizeof tp->name, "%s", name);
    tp->num_blocks = num_blocks;
    paged_pool_desc desc = {
        .name = tp->name, .num_layers = cl->g->layers, .num_kv_heads = TB_HKV, .head_dim = TB_D,
        .block_size = TB_B, .dtype = PAGED_DTYPE_BF16, .num_blocks = num_blocks,
        .mode = 0600 | PAGED_POOL_PEERS,
    };
    int rc = paged_pool_create(cl->c, &desc, &tp->p);
    if (rc != PAGED_OK)
        tb_fail(cl, rc, "creating a pool with PAGED_POOL_PEERS");
    tp->ids = bench_alloc((size_t) num_blocks * sizeof *tp->ids, "block ids");
}

/* Evicts prompt 0 from tp's pool (it is cached, held by nobody). Dies when it is not all
 * there. */
static void evict_prompt(struct tb_client *cl, struct tb_pool *tp)
{
    const struct tb_geom *g = cl->g;
    int32_t *tokens = bench_alloc((size_t) g->tokens * sizeof *tokens, "prompt tokens");
    tb_prompt_tokens(g, cl->seed, 0, tokens);
    int n = paged_prefix_evict(tp->p, NULL, TB_SALT, g->prompt_blocks, tokens);
    free(tokens);
    if (n < 0)
        tb_fail(cl, n, "evicting the prompt");
}

/* What one path's requests measured. */
struct rb_path {
    unsigned n;
    double mean_ns, lookup_ns;   /* means of the requests and of their LOOKUPs */
    double best_lookup_ns;
    double best_fetch_gbps;      /* the best transfer rate B's peer counters gave a LOOKUP */
};

/* Runs n adopt requests on B (each: evict, LOOKUP fetching from A, suffix) into *p, after
 * one untimed; B's peer counters (socket_b) before and after each LOOKUP give its transfer
 * rate: the bytes fetched over the time B spent fetching them. Returns nothing. */
static void adopt_path(struct tb_client *cl, struct tb_pool *tp, struct rb_path *p, const char *socket_b)
{
    const struct tb_geom *g = cl->g;
    p->best_lookup_ns = INFINITY;
    for (int i = -1; i < (int) p->n; i++) {
        struct pcore_peer_item before, after;
        if (peer_item(socket_b, &before) != 0)
            bench_die("remote: daemon B lists no peer");
        const uint64_t t0 = pcore_now_ns();
        const unsigned found = tb_lookup_prompt(cl, tp, 0);
        const uint64_t t1 = pcore_now_ns();
        if (found != g->prompt_blocks)
            bench_die("remote: B's LOOKUP found %u of the prompt's %u blocks (peer-timeout too short, or a peer "
                      "failure: see daemon B's log)", found, g->prompt_blocks);
        if (peer_item(socket_b, &after) != 0)
            bench_die("remote: daemon B lists no peer");
        tb_suffix(cl, tp, NULL);
        const uint64_t t2 = pcore_now_ns();
        tb_release(cl, tp, g->prompt_blocks + g->suffix_blocks);
        evict_prompt(cl, tp);
        if (i < 0)
            continue;
        p->mean_ns += (double) (t2 - t0) / p->n;
        p->lookup_ns += (double) (t1 - t0) / p->n;
        if ((double) (t1 - t0) < p->best_lookup_ns)
            p->best_lookup_ns = (double) (t1 - t0);
        const uint64_t moved = after.bytes - before.bytes, spent = after.fetch_ns - before.fetch_ns;
        if (spent > 0 && (double) moved / (double) spent > p->best_fetch_gbps)
            p->best_fetch_gbps = (double) moved / (double) spent;
    }
}

/* Runs n recompute requests on B into *p, after one untimed. Returns nothing. */
static void recompute_path(struct tb_client *cl, struct rb_path *p)
{
    const struct tb_geom *g = cl->g;
    const uint32_t blocks = g->prompt_blocks + g->suffix_blocks;
    struct tb_pool tp;
    tb_pool_create(cl, &tp, "remote-recompute", blocks, 0);
    for (int i = -1; i < (int) p->n; i++) {
        const uint64_t t0 = pcore_now_ns();
        tb_recompute(cl, &tp);
        const uint64_t t1 = pcore_now_ns();
        tb_release(cl, &tp, blocks);
        if (i >= 0)
            p->mean_ns += (double) (t1 - t0) / p->n;
    }
    tb_pool_destroy(cl, &tp);
}

/* Returns x over y, NAN when either is n/a. */
static double ratio(double x, double y)
{
    return isnan(x) || isnan(y) || y <= 0 ? NAN : x / y;
}

/* Measures and adds the remote tables. Returns nothing. */
static void remote_tables(const struct bench_opts *o, const struct tb_geom *g, struct tb_client *ca,
                          struct tb_client *cb, const char *socket_b, int two_devices, struct br_report *r)
{
    struct tb_pool pa, pb;
    const uint32_t blocks = g->prompt_blocks + g->suffix_blocks;
    peers_pool(ca, &pa, "remote", blocks);
    peers_pool(cb, &pb, "remote", blocks);
    tb_publish_prompt(ca, &pa, 0);
    const uint64_t bytes = (uint64_t) g->prompt_blocks * g->unit_bytes;
    const int reps = o->quick ? 2 : 3;
    struct rb_path adopt = { .n = (unsigned) reps }, rec = { .n = (unsigned) reps };
    adopt_path(cb, &pb, &adopt, socket_b);
    if (!o->remote_no_recompute)
        recompute_path(cb, &rec);
    else
        rec.mean_ns = NAN;
    struct pcore_peer_item peer;
    if (peer_item(socket_b, &peer) != 0)
        bench_die("remote: daemon B lists no peer");
    const size_t stream = bytes < (1ull << 30) ? (size_t) bytes : (size_t) 1 << 30;
    const double tcp = loopback_gbps(stream, reps);
    /* The reference: the faster of the two ways a copy engine moves the bytes between the
     * devices (the peers' gets are pulls). */
    double push = 0.0, pull = 0.0;
    if (two_devices)
        tb_p2p_gbps(stream, &push, &pull);
    const double p2p = push > pull ? push : pull;

    char title[1200];
    snprintf(title, sizeof title,
             "remote: a %u-token prompt (%u layers, %d/%d heads, D %d, bf16; %u blocks, %llu bytes) published on "
             "daemon A, adopted by daemon B over UCX (transports: %.96s%s): a LOOKUP that B's pool misses fetches "
             "it from A in parts of up to 256 blocks, checks and publishes it; then a %u-token suffix (APPEND + "
             "PREFILL per layer). fetch: B's bytes fetched over its time fetching (its peer counters). recompute: "
             "per layer APPEND + causal PREFILL of all %u tokens on B (paged's share only). limit: a TCP stream "
             "over loopback between two processes, this run%s. Mean of %d after one untimed",
             g->tokens, g->layers, TB_HQ, TB_HKV, TB_D, g->prompt_blocks, (unsigned long long) bytes,
             peer.transports[0] != '\0' ? peer.transports : "?", peer.tcp_only ? ", TCP only" : "", g->suffix,
             g->tokens + g->suffix,
             two_devices ? "; A on device 0, B on device 1; P2P: the faster of a copy from device 0 to 1 run by device "
                           "0 (push) and one run by device 1 (pull, as B's gets are), this run" : "",
             reps);
    struct br_table *tab = br_table(r, "remote", title);
    br_col(tab, "path", "path", 0, 0);
    br_col(tab, "bytes", "bytes", 0, 0);
    br_col(tab, "mean_ms", "request ms", 2, 1);
    br_col(tab, "lookup_ms", "LOOKUP ms", 2, 1);
    br_col(tab, "gbps", "GB/s", 2, 1);
    br_col(tab, "limit_gbps", "limit GB/s", 2, 1);
    br_col(tab, "pct", "% of limit", 1, 1);
    br_col(tab, "p2p_push_gbps", "push GB/s", 2, 1);
    br_col(tab, "p2p_pull_gbps", "pull GB/s", 2, 1);
    br_col(tab, "p2p_gbps", "P2P GB/s", 2, 1);
    br_col(tab, "pct_p2p", "% of P2P", 1, 1);
    br_col(tab, "fetch_gbps", "fetch GB/s", 2, 1);
    br_col(tab, "fetch_pct_p2p", "fetch % of P2P", 1, 1);
    br_col(tab, "speedup", "x recompute", 2, 1);
    const double gbps = (double) bytes / adopt.best_lookup_ns;
    int row = br_row(tab);
    br_set_str(tab, row, "path", "adopt");
    br_set_int(tab, row, "bytes", (long long) bytes);
    br_set_num(tab, row, "mean_ms", adopt.mean_ns / 1e6);
    br_set_num(tab, row, "lookup_ms", adopt.lookup_ns / 1e6);
    br_set_num(tab, row, "gbps", gbps);
    br_set_num(tab, row, "limit_gbps", tcp);
    br_set_num(tab, row, "pct", 100.0 * ratio(gbps, tcp));
    br_set_num(tab, row, "p2p_push_gbps", push > 0 ? push : NAN);
    br_set_num(tab, row, "p2p_pull_gbps", pull > 0 ? pull : NAN);
    br_set_num(tab, row, "p2p_gbps", p2p > 0 ? p2p : NAN);
    br_set_num(tab, row, "pct_p2p", p2p > 0 ? 100.0 * gbps / p2p : NAN);
    br_set_num(tab, row, "fetch_gbps", adopt.best_fetch_gbps);
    br_set_num(tab, row, "fetch_pct_p2p", p2p > 0 ? 100.0 * adopt.best_fetch_gbps / p2p : NAN);
    br_set_num(tab, row, "speedup", ratio(rec.mean_ns, adopt.mean_ns));
    row = br_row(tab);
    br_set_str(tab, row, "path", "recompute");
    br_set_num(tab, row, "mean_ms", rec.mean_ns / 1e6);
    br_print_table(tab, stdout);
    br_summary(r, "remote_adopt_gbps", "remote: adopt rate (best LOOKUP)", gbps, "GB/s", 2);
    if (p2p > 0)
        br_summary(r, "remote_adopt_pct_p2p", "remote: adopt rate over the peer copy between the devices",
                   100.0 * gbps / p2p, "%", 1);
    br_summary(r, "remote_fetch_gbps", "remote: transfer rate (B's fetch, its peer counters)", adopt.best_fetch_gbps,
               "GB/s", 2);
    if (p2p > 0)
        br_summary(r, "remote_fetch_pct_p2p", "remote: transfer rate over the peer copy between the devices",
                   100.0 * adopt.best_fetch_gbps / p2p, "%", 1);
    br_summary(r, "remote_adopt_speedup", "remote: recompute time over adopt time", ratio(rec.mean_ns, adopt.mean_ns),
               "x", 2);
    tb_pool_destroy(cb, &pb);
    tb_pool_destroy(ca, &pa);
}

/* Appends x and y to the NULL-terminated list args (room for both and the NULL), each
 * unless NULL or empty. Returns nothing. */
static void add_args(const char **args, const char *x, const char *y)
{
    size_t n = 0;
    while (args[n] != NULL)
        n++;
    if (x != NULL && *x != '\0')
        args[n++] = x;
    if (y != NULL && *y != '\0')
        args[n++] = y;
    args[n] = NULL;
}

#endif /* HAVE_UCX */

/* Runs paged-bench remote; see remote.h. */
void bench_remote(const struct bench_opts *o, struct br_report *r)
{
#ifndef HAVE_UCX
    (void) o;
    (void) r;
    printf("remote: this paged is built without UCX (./configure --with-ucx): nothing to measure\n");
#else
    struct tb_geom g;
    memset(&g, 0, sizeof g);
    g.layers = o->tier_layers ? o->tier_layers : o->quick ? 4 : 32;
    g.prompts = 1;
    g.tokens = o->tier_tokens ? o->tier_tokens : o->quick ? 1024 : 32768;
    g.suffix = o->tier_suffix ? o->tier_suffix : 64;
    g.prompt_blocks = g.tokens / TB_B;
    g.suffix_blocks = (g.suffix + TB_B - 1) / TB_B;
    g.unit_bytes = (uint64_t) g.layers * 2 * TB_HKV * TB_B * TB_D * TB_ELEM;

    const char *tmp = getenv("TMPDIR");
    snprintf(work_dir, sizeof work_dir, "%s/paged-bench-remote-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(work_dir) == NULL)
        bench_die("remote: mkdtemp %s: %s", work_dir, strerror(errno));
    atexit(remove_work_dir);
    char key[1200], key_arg[1300];
    snprintf(key, sizeof key, "%s/peer.key", work_dir);
    write_key(key);
    snprintf(key_arg, sizeof key_arg, "--peer-key=%s", key);

    char self[1024], built[1100];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0 || (size_t) len >= sizeof self - 1)
        bench_die("cannot find this program's path (/proc/self/exe)");
    self[len] = '\0';
    const char *pagedd = bd_pagedd_path(o, self, built, sizeof built);
    struct bd_daemon a, b;
    /* Where the daemons run on GPUs and there are two, A serves the first and B the second
     * (one daemon a GPU). PAGED_BENCH_LOG_LEVEL sets both daemons' log level (debug: each
     * part of each fetch, in the log PAGED_BENCH_DAEMON_LOG keeps). */
    int two_devices = 0;
#ifdef HAVE_CUDA
    two_devices = strcmp(bd_backend(o), "cpu") != 0 && bg_device_count() >= 2;
#endif
    char level_arg[48] = "";
    const char *level = getenv("PAGED_BENCH_LOG_LEVEL");
    if (level != NULL && *level != '\0')
        snprintf(level_arg, sizeof level_arg, "--log-level=%.30s", level);
    const char *extra_a[6] = { "--peer-listen=127.0.0.1:0", key_arg };
    add_args(extra_a, two_devices ? "--device=0" : NULL, level_arg);
    bd_start_args(&a, pagedd, bd_backend(o), o->threads, o->waits, extra_a);
    char peers_arg[64];
    snprintf(peers_arg, sizeof peers_arg, "--peers=127.0.0.1:%u", listen_port(&a));
    const char *extra_b[6] = { peers_arg, key_arg, "--peer-timeout=60000" };
    add_args(extra_b, two_devices ? "--device=1" : NULL, level_arg);
    bd_start_args(&b, pagedd, bd_backend(o), o->threads, o->waits, extra_b);
    struct pcore_peer_item peer;
    await_peer(b.socket, &peer);

    struct tb_client ca, cb;
    tb_client_open(&ca, a.socket, &g, o->seed);
    tb_client_open(&cb, b.socket, &g, o->seed);
    remote_tables(o, &g, &ca, &cb, b.socket, two_devices, r);
    tb_client_close(&cb);
    tb_client_close(&ca);
    bd_stop(&b);
    bd_stop(&a);
    remove_work_dir();
#endif
}
