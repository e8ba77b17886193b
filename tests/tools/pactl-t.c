/* pactl-t.c: pactl against a real pagedd: every command in text and JSON, events, and errors. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/proto.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"
#include "tests/tools/tjson.h"
#include "tests/tools/tpactl.h"

/* The daemon; its directory holds the test's other sockets and files too. */
static struct pagedd daemon_;

/* Returns the client whose name is name in a JSON client list, or NULL. */
static const struct tj *find_client(const struct tj *list, const char *name)
{
    const struct tj *clients = tj_get(list, "clients");
    for (size_t i = 0; clients != NULL && i < clients->count; i++)
        if (tj_str(tj_at(clients, i), "name") && strcmp(tj_str(tj_at(clients, i), "name"), name) == 0)
            return tj_at(clients, i);
    return NULL;
}

/* Returns pool t1's object from "list pools" JSON (first pool), fetching it anew. */
static struct tj *pools_json(void)
{
    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", "list", "pools", NULL);
    struct tj *v = r.status == 0 ? tp_run_json(&r) : NULL;
    tp_run_free(&r);
    return v;
}

/* Checks status, in both formats. */
static void test_status(void)
{
    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "status", NULL);
    is_int(0, r.status, "status: exit 0");
    ok(strstr(r.out, "backend        cpu\n") != NULL, "status text: backend cpu");
    ok(strstr(r.out, "pools          1\n") != NULL, "status text: one pool");
    ok(strstr(r.out, "health         ok\n") != NULL, "status text: healthy");
    tp_run_free(&r);

    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", "status", NULL);
    struct tj *v = tp_run_json(&r);
    ok(v != NULL, "status json: valid JSON");
    is_string("cpu", tj_str(v, "backend"), "status json: backend");
    is_string(PACKAGE_VERSION, tj_str(v, "version"), "status json: version");
    is_int(1, (long long) tj_num(v, "pools"), "status json: pools");
    ok(tj_num(v, "clients") >= 3, "status json: at least the two holders and pactl connected");
    /* 1 layer x K,V x 64 blocks x 2 heads x 16 tokens x 64 dims x 2 bytes. */
    is_int(1 * 2 * 64 * 2 * 16 * 64 * 2, (long long) tj_num(v, "mem_total"),
           "status json: mem_total is the pool's size");
    is_int(8 * 2 * 2 * 16 * 64 * 2, (long long) tj_num(v, "mem_used"),
           "status json: mem_used is 8 blocks (6 held, 2 cached)");
    is_int((long long) tj_num(v, "mem_total") - (long long) tj_num(v, "mem_used"),
           (long long) tj_num(v, "mem_free"), "status json: mem_free = total - used");
    ok(tj_get(v, "healthy") && tj_get(v, "healthy")->boolean, "status json: healthy");
    tj_free(v);
    tp_run_free(&r);
}

/* Checks list pools and info, in both formats. */
static void test_pools(void)
{
    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "list", NULL);
    is_int(0, r.status, "list: exit 0");
    ok(strncmp(r.out, "  ID  NAME", 10) == 0 && strstr(r.out, "\n   1  t1 ") != NULL,
       "list text: heading and pool t1");
    tp_run_free(&r);

    struct tj *v = pools_json();
    const struct tj *p = tj_at(tj_get(v, "pools"), 0);
    ok(v != NULL && tj_get(v, "pools")->count == 1, "list pools json: one pool");
    is_string("t1", tj_str(p, "name"), "list pools json: name");
    is_int(64, (long long) tj_num(p, "num_blocks"), "list pools json: 64 blocks");
    is_int(56, (long long) tj_num(p, "free"), "list pools json: 56 free");
    is_int(6, (long long) tj_num(p, "referenced"), "list pools json: 6 referenced");
    is_int(2, (long long) tj_num(p, "cached"), "list pools json: 2 cached");
    is_int(2, (long long) tj_num(p, "attached"), "list pools json: 2 clients attached");
    is_string("bf16", tj_str(p, "dtype"), "list pools json: dtype");
    is_string("0600", tj_str(p, "mode"), "list pools json: mode");
    is_string("per-uid", tj_str(p, "prefixes"), "list pools json: prefixes per-uid (the default)");
    is_string("exported", tj_str(p, "memory"), "list pools json: memory exported (owner-only mode, no bit)");
    is_int(getuid(), (long long) tj_num(p, "owner_uid"), "list pools json: owner");
    tj_free(v);

    tp_run_pactl(&r, "-s", daemon_.socket, "info", "t1", NULL);
    is_int(0, r.status, "info: exit 0");
    ok(strstr(r.out, "blocks         64: 56 free, 6 referenced, 2 cached\n") != NULL,
       "info text: block counts");
    ok(strstr(r.out, "head dim       64\n") != NULL, "info text: geometry");
    ok(strstr(r.out, "prefixes       per-uid: ") != NULL, "info text: the prefix cache is per-uid");
    tp_run_free(&r);
    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", "info", "t1", NULL);
    v = tp_run_json(&r);
    is_string("t1", tj_str(v, "name"), "info json: the pool object");
    is_int(2, (long long) tj_num(v, "num_kv_heads"), "info json: kv heads");
    tj_free(v);
    tp_run_free(&r);

    tp_run_pactl(&r, "-s", daemon_.socket, "info", "nosuch", NULL);
    ok(r.status == 1 && tp_one_line(r.err) && strstr(r.err, "no such pool 'nosuch'") != NULL,
       "info of a missing pool: exit 1, one line");
    tp_run_free(&r);
}

/* Checks list clients and list blocks, in both formats. */
static void test_clients_blocks(uint32_t id_a, uint32_t id_b)
{
    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "list", "clients", NULL);
    is_int(0, r.status, "list clients: exit 0");
    ok(strstr(r.out, "hold-a") != NULL && strstr(r.out, "hold-b") != NULL
           && strstr(r.out, "control") != NULL, "list clients text: both holders and pactl");
    tp_run_free(&r);

    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", "list", "clients", NULL);
    struct tj *v = tp_run_json(&r);
    const struct tj *a = find_client(v, "hold-a"), *b = find_client(v, "hold-b");
    ok(a != NULL && b != NULL, "list clients json: both holders listed");
    is_int(id_a, (long long) tj_num(a, "id"), "list clients json: hold-a's id");
    is_int(5, (long long) tj_num(a, "blocks"), "list clients json: hold-a holds 5 blocks");
    is_int(1, (long long) tj_num(b, "blocks"), "list clients json: hold-b holds 1 block");
    ok(tj_get(a, "control_only") && !tj_get(a, "control_only")->boolean
           && tj_get(find_client(v, "pactl"), "control_only")
           && tj_get(find_client(v, "pactl"), "control_only")->boolean,
       "list clients json: control_only tells pactl from the workers");
    ok(tj_get(a, "waits_spin") && tj_get(b, "waits_spin") && tj_get(find_client(v, "pactl"), "waits_spin")
           && !tj_get(find_client(v, "pactl"), "waits_spin")->boolean,
       "list clients json: waits_spin for every client, false for pactl's control connection");
    tj_free(v);
    tp_run_free(&r);

    /* hold-b published its 2 cached blocks from tokens i * 31 + 7, salt 7 (pactl-holder.c). */
    int32_t tokens[2 * 16];
    paged_hash h[2];
    char hex[2][33];
    for (int i = 0; i < 2 * 16; i++)
        tokens[i] = i * 31 + 7;
    paged_hash_blocks(NULL, tokens, 2 * 16, 16, 7, h);
    for (int i = 0; i < 2; i++)
        snprintf(hex[i], sizeof hex[i], "%016llx%016llx", (unsigned long long) h[i].hi, (unsigned long long) h[i].lo);
    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", "list", "blocks", "t1", NULL);
    v = tp_run_json(&r);
    const struct tj *blocks = tj_get(v, "blocks");
    size_t held_a = 0, cached = 0, held_b = 0;
    for (size_t i = 0; blocks != NULL && i < blocks->count; i++) {
        const struct tj *bl = tj_at(blocks, i);
        const struct tj *h0 = tj_at(tj_get(bl, "holders"), 0);
        const char *hash = tj_str(bl, "hash");
        if (tj_num(bl, "refcount") == 0 && tj_get(bl, "published")->boolean && hash != NULL
            && (strcmp(hash, hex[0]) == 0 || strcmp(hash, hex[1]) == 0)
            && tj_num(bl, "scope_uid") == getuid() && !tj_get(bl, "hash_withheld")->boolean)
            cached++;
        else if (h0 != NULL && h0->number == id_a)
            held_a++;
        else if (h0 != NULL && h0->number == id_b)
            held_b++;
    }
    ok(blocks != NULL && blocks->count == 8, "list blocks json: 8 blocks in use");
    ok(held_a == 5 && held_b == 1 && cached == 2,
       "list blocks json: 5 held by hold-a, 1 by hold-b, 2 cached with paged_hash_blocks' hashes, scope_uid ours");
    tj_free(v);
    tp_run_free(&r);

    tp_run_pactl(&r, "-s", daemon_.socket, "list", "blocks", NULL);
    size_t lines = 0;
    for (const char *s = r.out; (s = strchr(s, '\n')) != NULL; s++)
        lines++;
    ok(r.status == 0 && lines == 9 && strstr(r.out, "cached") != NULL,
       "list blocks text: heading and 8 rows");
    char row[64];
    snprintf(row, sizeof row, "%s uid=%-6u", hex[0], (unsigned) getuid());
    ok(strstr(r.out, row) != NULL, "list blocks text: a cached block's hash and scope (%s)", row);
    tp_run_free(&r);

    tp_run_pactl(&r, "-s", daemon_.socket, "list", "blocks", "nosuch", NULL);
    ok(r.status == 1 && tp_one_line(r.err), "list blocks of a missing pool: exit 1, one line");
    tp_run_free(&r);
}

/* Checks stat, in both formats. */
static void test_stat(void)
{
    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "stat", NULL);
    ok(r.status == 0 && strstr(r.out, "\ndecode ") != NULL && strstr(r.out, "\nalloc ") != NULL,
       "stat text: a row per op");
    ok(strstr(r.out, "\nengine\n") != NULL && strstr(r.out, "merged DECODEs") != NULL,
       "stat text: the engine's section");
    tp_run_free(&r);
    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", "stat", NULL);
    struct tj *v = tp_run_json(&r);
    const struct tj *ops = tj_get(v, "ops");
    ok(ops != NULL && ops->count == 10, "stat json: ten ops");
    ok(tj_num(tj_get(ops, "alloc"), "requests") >= 2, "stat json: both holders' ALLOCs counted");
    ok(tj_num(tj_get(ops, "publish"), "requests") >= 1, "stat json: PUBLISH counted");
    ok(tj_num(tj_get(ops, "free"), "requests") >= 1, "stat json: FREE counted");
    ok(tj_num(tj_get(ops, "alloc"), "latency_p99_ns") >= tj_num(tj_get(ops, "alloc"), "latency_p50_ns"),
       "stat json: p99 >= p50");
    const struct tj *eng = tj_get(v, "engine");
    ok(eng != NULL && eng->count == 14, "stat json: the engine's 14 counters");
    ok(tj_num(eng, "launches") >= tj_num(eng, "batches") && tj_num(eng, "batches") >= tj_num(eng, "early_batches")
           && tj_num(eng, "decode_requests") >= tj_num(eng, "merged_decode_requests")
           && tj_num(eng, "backend_ns") >= tj_num(eng, "device_wait_ns"),
       "stat json: engine counters add up");
    tj_free(v);
    tp_run_free(&r);
}

/* Checks evict: the cached blocks go, the held ones stay. */
static void test_evict(void)
{
    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", "evict", "t1", NULL);
    struct tj *v = tp_run_json(&r);
    ok(r.status == 0, "evict: exit 0");
    is_int(2, (long long) tj_num(v, "evicted"), "evict json: 2 cached blocks evicted");
    tj_free(v);
    tp_run_free(&r);
    v = pools_json();
    const struct tj *p = tj_at(tj_get(v, "pools"), 0);
    ok(tj_num(p, "cached") == 0 && tj_num(p, "free") == 58 && tj_num(p, "referenced") == 6,
       "after evict: 0 cached, 58 free, 6 still referenced");
    tj_free(v);
    tp_run_pactl(&r, "-s", daemon_.socket, "evict", "t1", NULL);
    is_string("evicted 0 cached blocks from pool 't1'\n", r.out, "evict text: nothing left");
    tp_run_free(&r);
    tp_run_pactl(&r, "-s", daemon_.socket, "evict", "nosuch", NULL);
    ok(r.status == 1 && tp_one_line(r.err) && strstr(r.err, "nosuch") != NULL,
       "evict of a missing pool: exit 1, the daemon's one-line message");
    tp_run_free(&r);
}

/* Checks subscribe: a client that comes and goes shows up as connect and disconnect. */
static void test_subscribe(void)
{
    char *const argv[] = { tp_pactl, "-s", daemon_.socket, "-f", "json", "subscribe", NULL };
    struct tp_child s = tp_spawn(argv);
    int bad = 0, disconnected = 0;
    int connected = tp_probe_subscription(daemon_.socket, s.out, "probe", &bad, &disconnected);
    ok(connected, "subscribe: connect event of a new client");
    ok(disconnected, "subscribe: disconnect event of that client after it exits");
    is_int(0, bad, "subscribe: every line is one valid JSON object");
    kill(s.pid, SIGTERM);
    close(s.in);
    close(s.out);
    is_int(0, tp_reap(s.pid, TP_RUN_MS), "subscribe: exits 0 on SIGTERM");
}

/* Connects to the daemon as a control client named name, waits for its WELCOME and hangs up:
 * a connect and a disconnect event. Returns 1 when the daemon welcomed it. */
static int churn_once(const char *name)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t len = strlen(daemon_.socket);
    if (len >= sizeof sa.sun_path)
        return 0;
    memcpy(sa.sun_path, daemon_.socket, len + 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct pcore_msg_hello h;
    memset(&h, 0, sizeof h);
    h.hdr = (struct pcore_msg_hdr) { PCORE_MSG_HELLO, 1, 0, sizeof h };
    h.magic = PCORE_HELLO_MAGIC;
    h.version = PCORE_PROTO_VERSION;
    h.flags = PCORE_HELLO_CONTROL;
    h.pid = (uint32_t) getpid();
    snprintf(h.name, sizeof h.name, "%s", name);
    struct pcore_msg_welcome w;
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int welcomed = connect(fd, (struct sockaddr *) &sa, sizeof sa) == 0
                   && send(fd, &h, sizeof h, MSG_NOSIGNAL) == (ssize_t) sizeof h
                   && poll(&p, 1, TP_RUN_MS) == 1 && recv(fd, &w, sizeof w, 0) == (ssize_t) sizeof w
                   && w.hdr.type == PCORE_MSG_WELCOME;
    close(fd);
    return welcomed;
}

/* Checks subscribe when pactl falls behind (its output not read while 4000 clients come and
 * go): once it reads again, every one of the 8000 events is printed or counted by a "lost"
 * line. */
static void test_subscribe_lost(void)
{
    char *const argv[] = { tp_pactl, "-s", daemon_.socket, "-f", "json", "subscribe", NULL };
    struct tp_child s = tp_spawn(argv);
    int bad = 0;
    ok(tp_probe_subscription(daemon_.socket, s.out, "lost-probe", &bad, NULL),
       "subscribe behind: the subscription is live");
    enum { CHURN = 4000 };
    int welcomed = 0;
    for (int i = 0; i < CHURN; i++)
        welcomed += churn_once("churn");
    is_int(CHURN, welcomed, "subscribe behind: %d clients came and went while its output was not read", CHURN);
    long shown = 0, lost = 0, lost_lines = 0;
    long long deadline = tp_now_ms() + TP_RUN_MS;
    char line[1024], err[200];
    while (shown + lost < 2 * CHURN && tp_now_ms() < deadline) {
        long n = tp_read_line(s.out, line, sizeof line, (int) (deadline - tp_now_ms()));
        if (n < 0)
            break;
        struct tj *v = tj_parse(line, (size_t) n, err, sizeof err);
        if (v == NULL) {
            bad++;
            continue;
        }
        const char *ev = tj_str(v, "event"), *who = tj_str(v, "client_name");
        if (ev != NULL && strcmp(ev, "lost") == 0) {
            lost += (long) tj_num(v, "count");
            lost_lines++;
        } else if (ev != NULL && who != NULL && strcmp(who, "churn") == 0
                   && (strcmp(ev, "connect") == 0 || strcmp(ev, "disconnect") == 0))
            shown++;
        tj_free(v);
    }
    ok(lost_lines >= 1 && lost > 0, "subscribe behind: 'lost' lines count %ld missed events", lost);
    is_int(2 * CHURN, shown + lost, "subscribe behind: every event printed (%ld) or counted lost (%ld)", shown, lost);
    is_int(0, bad, "subscribe behind: every line is one valid JSON object");
    kill(s.pid, SIGTERM);
    close(s.in);
    close(s.out);
    is_int(0, tp_reap(s.pid, TP_RUN_MS), "subscribe behind: exits 0 on SIGTERM");
}

/* Checks kill-client: the client goes, its blocks come back. */
static void test_kill(uint32_t id_a)
{
    struct tp_run r;
    char id[16];
    snprintf(id, sizeof id, "%u", (unsigned) id_a);
    tp_run_pactl(&r, "-s", daemon_.socket, "kill-client", id, NULL);
    is_int(0, r.status, "kill-client: exit 0");
    char want[64];
    snprintf(want, sizeof want, "killed client %s\n", id);
    is_string(want, r.out, "kill-client text: confirmation");
    tp_run_free(&r);

    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", "list", "clients", NULL);
    struct tj *v = tp_run_json(&r);
    ok(v != NULL && find_client(v, "hold-a") == NULL && find_client(v, "hold-b") != NULL,
       "after kill-client: hold-a is gone, hold-b stays");
    tj_free(v);
    tp_run_free(&r);
    v = pools_json();
    const struct tj *p = tj_at(tj_get(v, "pools"), 0);
    ok(tj_num(p, "referenced") == 1 && tj_num(p, "free") == 63 && tj_num(p, "attached") == 1,
       "after kill-client: hold-a's 5 blocks are free again");
    tj_free(v);

    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", "kill-client", "99999", NULL);
    ok(r.status == 1 && tp_one_line(r.err) && strstr(r.err, "no client 99999") != NULL
           && r.out_len == 0,
       "kill-client of a missing client: exit 1, one line, no output");
    tp_run_free(&r);
}

/* What a fake server answers to the first message it gets. */
enum fake_reply {
    FAKE_GARBAGE,        /* eight bytes that are no message of ours */
    FAKE_ERROR_VERSION,  /* an ERROR saying the versions differ, as a newer pagedd would */
    FAKE_WELCOME_OTHER,  /* a WELCOME of protocol version 99 */
};

/* Writes the answer of kind to c; returns what write returned. */
static ssize_t fake_answer(int c, enum fake_reply kind)
{
    struct pcore_msg_error e;
    struct pcore_msg_welcome w;
    memset(&e, 0, sizeof e);
    memset(&w, 0, sizeof w);
    switch (kind) {
    case FAKE_ERROR_VERSION:
        e.hdr = (struct pcore_msg_hdr) { PCORE_MSG_ERROR, 0, PAGED_E_VERSION, sizeof e };
        snprintf(e.message, sizeof e.message,
                 "client speaks protocol version %u, this daemon speaks version 99",
                 PCORE_PROTO_VERSION);
        return write(c, &e, sizeof e);
    case FAKE_WELCOME_OTHER:
        w.hdr = (struct pcore_msg_hdr) { PCORE_MSG_WELCOME, 1, 0, sizeof w };
        w.version = 99;
        return write(c, &w, sizeof w);
    default:
        return write(c, "garbage!", 8);
    }
}

/* Starts a process that accepts one connection on path (a socket of type type), answers
 * whatever arrives as kind says, and exits. Returns its pid. */
static pid_t fake_server(const char *path, int type, enum fake_reply kind)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, type, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof sa) != 0 || listen(fd, 4) != 0)
        sysbail("fake server on %s", path);
    pid_t pid = bfork();
    if (pid == 0) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, TP_RUN_MS) == 1) {
            int c = accept(fd, NULL, NULL);
            char buf[512];
            p.fd = c;
            if (c >= 0 && poll(&p, 1, TP_RUN_MS) == 1 && read(c, buf, sizeof buf) > 0
                && fake_answer(c, kind) < 0)
                _exit(1);
        }
        _exit(0);
    }
    close(fd);
    return pid;
}

/* Checks what pactl says when no pagedd is behind the path. */
static void test_errors(void)
{
    struct tp_run r;
    char path[PATH_MAX + 16];

    snprintf(path, sizeof path, "%s/none.sock", daemon_.dir);
    tp_run_pactl(&r, "-s", path, "status", NULL);
    ok(r.status == 1 && tp_one_line(r.err) && strstr(r.err, "no daemon listening on") != NULL
           && strstr(r.err, "is pagedd running?") != NULL,
       "no daemon: exit 1 and one line");
    tp_run_free(&r);

    snprintf(path, sizeof path, "%s/file", daemon_.dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        sysbail("%s", path);
    fclose(f);
    tp_run_pactl(&r, "-s", path, "status", NULL);
    ok(r.status == 1 && tp_one_line(r.err) && strstr(r.err, "is not a pagedd socket") != NULL,
       "a regular file: exit 1, 'not a pagedd socket'");
    tp_run_free(&r);

    snprintf(path, sizeof path, "%s/stream.sock", daemon_.dir);
    pid_t fake = fake_server(path, SOCK_STREAM, FAKE_GARBAGE);
    tp_run_pactl(&r, "-s", path, "list", NULL);
    ok(r.status == 1 && tp_one_line(r.err) && strstr(r.err, "is not a pagedd socket") != NULL,
       "a stream socket: exit 1, 'not a pagedd socket'");
    tp_run_free(&r);
    kill(fake, SIGTERM);
    tp_reap(fake, TP_RUN_MS);

    snprintf(path, sizeof path, "%s/other.sock", daemon_.dir);
    fake = fake_server(path, SOCK_SEQPACKET, FAKE_GARBAGE);
    tp_run_pactl(&r, "-s", path, "status", NULL);
    ok(r.status == 1 && tp_one_line(r.err) && strstr(r.err, "is not a pagedd socket") != NULL,
       "a seqpacket socket answering garbage: exit 1, 'not a pagedd socket'");
    tp_run_free(&r);
    tp_reap(fake, TP_RUN_MS);
    unlink(path);

    fake = fake_server(path, SOCK_SEQPACKET, FAKE_ERROR_VERSION);
    tp_run_pactl(&r, "-s", path, "status", NULL);
    ok(r.status == 1 && tp_one_line(r.err) && strstr(r.err, "protocol version mismatch") != NULL
           && strstr(r.err, "version 99") != NULL,
       "a daemon refusing our protocol version: exit 1, one line with its reason");
    tp_run_free(&r);
    tp_reap(fake, TP_RUN_MS);
    unlink(path);

    fake = fake_server(path, SOCK_SEQPACKET, FAKE_WELCOME_OTHER);
    tp_run_pactl(&r, "-s", path, "status", NULL);
    ok(r.status == 1 && tp_one_line(r.err) && strstr(r.err, "protocol version mismatch") != NULL
           && strstr(r.err, "version 99") != NULL,
       "a daemon welcoming us with another protocol version: exit 1, one line");
    tp_run_free(&r);
    tp_reap(fake, TP_RUN_MS);
}

/* Starts a holder that creates pool with mode (permission and attribute bits) and holds
 * nothing; checks that it came up. Returns it (pid -1 when it did not). */
static struct tp_child memory_holder(const char *pool, uint32_t mode)
{
    char mode_arg[24], line[256] = "";
    snprintf(mode_arg, sizeof mode_arg, "%#o", (unsigned) mode);
    char *const argv[] = { tp_holder, daemon_.socket, (char *) pool, (char *) pool, "0", "0", mode_arg, NULL };
    struct tp_child h = tp_spawn(argv);
    int up = tp_read_line(h.out, line, sizeof line, TP_READY_MS) >= 0 && strncmp(line, "ready ", 6) == 0;
    ok(up, "pool %s created with mode %s: %s", pool, mode_arg, line);
    if (!up) {
        tp_stop_holder(&h);
        h.pid = -1;
    }
    return h;
}

/* Checks how info, list pools and their JSON show a pool's memory, sealed or exported, beside
 * the permission bits alone in the mode. Returns nothing. */
static void test_memory(void)
{
    struct tp_child s = memory_holder("sealed", 0600 | PAGED_POOL_SEALED);
    struct tp_child e = memory_holder("exported", 0644 | PAGED_POOL_EXPORTED);
    struct tp_run r;

    tp_run_pactl(&r, "-s", daemon_.socket, "info", "sealed", NULL);
    ok(strstr(r.out, "memory access  sealed: no client receives the memory") != NULL,
       "info text: a PAGED_POOL_SEALED pool's memory is sealed");
    ok(strstr(r.out, "mode 0600\n") != NULL, "info text: a sealed pool's mode shows the permission bits only");
    tp_run_free(&r);
    tp_run_pactl(&r, "-s", daemon_.socket, "info", "exported", NULL);
    ok(strstr(r.out, "memory access  exported: attaching clients receive the memory") != NULL,
       "info text: a PAGED_POOL_EXPORTED pool's memory is exported");
    tp_run_free(&r);

    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", "info", "sealed", NULL);
    struct tj *v = tp_run_json(&r);
    is_string("sealed", tj_str(v, "memory"), "info json: memory sealed");
    is_string("0600", tj_str(v, "mode"), "info json: a sealed pool's mode is the permission bits");
    tj_free(v);
    tp_run_free(&r);
    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", "info", "exported", NULL);
    v = tp_run_json(&r);
    is_string("exported", tj_str(v, "memory"), "info json: memory exported, though the mode grants others read");
    is_string("0644", tj_str(v, "mode"), "info json: an exported pool's mode is the permission bits");
    tj_free(v);
    tp_run_free(&r);

    tp_run_pactl(&r, "-s", daemon_.socket, "list", "pools", NULL);
    ok(strstr(r.out, " MODE PREFIXES MEMORY    OWNER ") != NULL, "list pools text: a MEMORY column after PREFIXES");
    ok(strstr(r.out, " 0600 per-uid  sealed   ") != NULL && strstr(r.out, " 0644 per-uid  exported ") != NULL,
       "list pools text: the sealed and the exported pool's rows");
    tp_run_free(&r);

    if (s.pid > 0)
        is_int(0, tp_stop_holder(&s), "the sealed pool's holder exits 0");
    if (e.pid > 0)
        is_int(0, tp_stop_holder(&e), "the exported pool's holder exits 0");
}

/* Finds pool name's row in a list pools table (out); returns 1 with its HEADS column in *heads
 * and its SHARDS column in shards (len bytes), or 0 when there is no such row. */
static int pool_columns(const char *out, const char *name, unsigned *heads, char *shards, size_t len)
{
    char key[64], got[16];
    snprintf(key, sizeof key, "  %s ", name);
    const char *at = strstr(out, key);
    if (at == NULL)
        return 0;
    while (at > out && at[-1] != '\n')
        at--;
    unsigned id, layers;
    if (sscanf(at, "%u %*s %u %u %15s", &id, &layers, heads, got) != 4)
        return 0;
    snprintf(shards, len, "%s", got);
    return 1;
}

/* Checks how list pools, info and their JSON show a tensor-parallel pool of 2 shards beside
 * the unsharded t1. Returns nothing. */
static void test_shards(void)
{
    char line[256] = "";
    char *const argv[] = { tp_holder, daemon_.socket, "shard-holder", "sharded", "1", "0", "0600", "2", NULL };
    struct tp_child h = tp_spawn(argv);
    ok(tp_read_line(h.out, line, sizeof line, TP_READY_MS) >= 0 && strncmp(line, "ready ", 6) == 0,
       "pool sharded created with 2 shards: %s", line);
    struct tp_run r;

    tp_run_pactl(&r, "-s", daemon_.socket, "list", "pools", NULL);
    ok(strstr(r.out, " LAYERS HEADS SHARDS  DIM ") != NULL, "list pools text: a SHARDS column after HEADS");
    char col[16] = "";
    unsigned heads = 0;
    int found = pool_columns(r.out, "sharded", &heads, col, sizeof col);
    ok(found && strcmp(col, "2") == 0 && heads == 2,
       "list pools text: the sharded pool's row: 2 KV heads over 2 shards (HEADS %u, SHARDS '%s')", heads, col);
    found = pool_columns(r.out, "t1", &heads, col, sizeof col);
    ok(found && strcmp(col, "-") == 0 && heads == 2, "list pools text: an unsharded pool's SHARDS is '-' ('%s')", col);
    tp_run_free(&r);

    struct tj *v = pools_json();
    const struct tj *pools = tj_get(v, "pools");
    double sharded = -1, plain = -1;
    for (size_t i = 0; pools != NULL && i < pools->count; i++) {
        const char *name = tj_str(tj_at(pools, i), "name");
        if (name != NULL && strcmp(name, "sharded") == 0)
            sharded = tj_num(tj_at(pools, i), "shards");
        else if (name != NULL && strcmp(name, "t1") == 0)
            plain = tj_num(tj_at(pools, i), "shards");
    }
    ok(sharded == 2 && plain == 1, "list pools json: shards 2 for the sharded pool, 1 for t1 (%g, %g)", sharded,
       plain);
    tj_free(v);

    tp_run_pactl(&r, "-s", daemon_.socket, "info", "sharded", NULL);
    ok(strstr(r.out, "kv heads       2\nshards         2: tensor-parallel, each of 1 KV head and 256.0 KiB of memory\n")
       != NULL, "info text: the pool's 2 KV heads, then its 2 shards of 1 head and half the memory each");
    tp_run_free(&r);
    tp_run_pactl(&r, "-s", daemon_.socket, "info", "t1", NULL);
    ok(r.status == 0 && strstr(r.out, "shards ") == NULL, "info text: no shards line for an unsharded pool");
    tp_run_free(&r);
    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", "info", "sharded", NULL);
    v = tp_run_json(&r);
    is_int(2, (long long) tj_num(v, "shards"), "info json: shards 2");
    is_int(2, (long long) tj_num(v, "num_kv_heads"), "info json: num_kv_heads is the pool's, over every shard");
    tj_free(v);
    tp_run_free(&r);

    /* The holder's block is its group's: the default group, the pool's first. */
    tp_run_pactl(&r, "-s", daemon_.socket, "list", "blocks", "sharded", NULL);
    ok(r.status == 0 && strstr(r.out, "  g0\n") != NULL, "list blocks text: the block held by the holder's group "
       "shows the group as its holder, g0");
    tp_run_free(&r);

    is_int(0, tp_stop_holder(&h), "the sharded pool's holder exits 0");
}

/* Runs the checks against one daemon. */
int main(void)
{
    tp_init(&daemon_);
    /* The cpu backend whatever $PAGED_TEST_BACKEND says: the figures below are its own. */
    const char *const args[] = { "--backend", "cpu", "--threads", "2", "--log-level", "warning", NULL };
    tp_start_daemon(&daemon_, args);
    uint32_t id_a, id_b;
    struct tp_child a = tp_start_holder(daemon_.socket, "hold-a", "t1", "5", "0", &id_a);
    struct tp_child b = tp_start_holder(daemon_.socket, "hold-b", "t1", "1", "2", &id_b);

    test_status();
    test_pools();
    test_clients_blocks(id_a, id_b);
    test_stat();
    test_evict();
    test_subscribe();
    test_subscribe_lost();
    test_kill(id_a);
    test_errors();
    test_memory();
    test_shards();

    tp_stop_holder(&a);
    is_int(0, tp_stop_holder(&b), "hold-b exits 0");
    tp_stop_daemon(&daemon_);
    return 0;
}
