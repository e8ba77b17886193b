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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/proto.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"
#include "tests/tools/tjson.h"

/* Every wait in this test is bounded by one of these. */
#define READY_MS 20000
#define RUN_MS 20000
#define EVENT_MS 3000

static char pactl[PATH_MAX], holder[PATH_MAX];
/* The daemon; its directory holds the test's other sockets and files too. */
static struct pagedd daemon_;

/* A child with pipes to its standard input and from its standard output. */
struct child {
    pid_t pid;
    int in;   /* write end of its stdin, or -1 */
    int out;  /* read end of its stdout, or -1 */
};

/* What a finished command printed, and how it ended. */
struct run {
    int status;       /* exit status, or 128 + signal, or -1 if it had to be killed */
    char *out, *err;
    size_t out_len, err_len;
};

/* Returns CLOCK_MONOTONIC in milliseconds. */
static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The signal mask from before main blocked SIGCHLD; children get it back. */
static sigset_t saved_mask;

/* In a new child: restores the signal mask the test changed. */
static void child_mask(void)
{
    sigprocmask(SIG_SETMASK, &saved_mask, NULL);
}

/* Starts argv (pactl, a holder) with its stdin and stdout piped to us, its stderr shared.
 * Bails on failure; returns the child. */
static struct child spawn(char *const argv[])
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
        sysbail("pipe");
    pid_t pid = bfork();
    if (pid == 0) {
        child_mask();
        dup2(in[0], 0);
        dup2(out[1], 1);
        execv(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    return (struct child) { pid, in[1], out[0] };
}

/* Waits up to ms for pid, sleeping in sigtimedwait until a child exits; kills it if it is
 * still there. Returns its exit status, 128 + signal, or -1 when it had to be killed. */
static int reap(pid_t pid, int ms)
{
    long long deadline = now_ms() + ms;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int status;
    for (;;) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            break;
        long long left = deadline - now_ms();
        if (got < 0 || left <= 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        struct timespec ts = { .tv_sec = left / 1000, .tv_nsec = left % 1000 * 1000000 };
        sigtimedwait(&chld, NULL, &ts);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Reads one line (without its newline) from fd into buf within ms. Returns its length, or
 * -1 on timeout or end of file. */
static long read_line(int fd, char *buf, size_t size, int ms)
{
    long long deadline = now_ms() + ms;
    size_t n = 0;
    while (n + 1 < size) {
        long long left = deadline - now_ms();
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (left <= 0 || poll(&p, 1, (int) left) <= 0)
            return -1;
        char c;
        if (read(fd, &c, 1) != 1)
            return -1;
        if (c == '\n')
            break;
        buf[n++] = c;
    }
    buf[n] = '\0';
    return (long) n;
}

/* Appends what fd has to *buf; returns 0 at end of file, 1 if more may come. */
static int drain(int fd, char **buf, size_t *len)
{
    char tmp[4096];
    ssize_t n = read(fd, tmp, sizeof tmp);
    if (n <= 0)
        return 0;
    *buf = brealloc(*buf, *len + (size_t) n + 1);
    memcpy(*buf + *len, tmp, (size_t) n);
    *len += (size_t) n;
    (*buf)[*len] = '\0';
    return 1;
}

/* Runs pactl with the given arguments (NULL-terminated) and collects its output. */
static void run_pactl(struct run *r, ...)
{
    char *argv[16];
    int argc = 0, out[2], err[2];
    va_list ap;
    argv[argc++] = pactl;
    va_start(ap, r);
    for (char *a; argc < 15 && (a = va_arg(ap, char *)) != NULL;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    memset(r, 0, sizeof *r);
    r->out = bstrdup("");
    r->err = bstrdup("");
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
        sysbail("pipe");
    pid_t pid = bfork();
    if (pid == 0) {
        child_mask();
        dup2(out[1], 1);
        dup2(err[1], 2);
        execv(argv[0], argv);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    long long deadline = now_ms() + RUN_MS;
    int open_out = 1, open_err = 1;
    while ((open_out || open_err) && now_ms() < deadline) {
        struct pollfd p[2] = { { .fd = open_out ? out[0] : -1, .events = POLLIN },
                               { .fd = open_err ? err[0] : -1, .events = POLLIN } };
        if (poll(p, 2, (int) (deadline - now_ms())) <= 0)
            continue;
        if (p[0].revents && !drain(out[0], &r->out, &r->out_len))
            open_out = 0;
        if (p[1].revents && !drain(err[0], &r->err, &r->err_len))
            open_err = 0;
    }
    close(out[0]);
    close(err[0]);
    r->status = reap(pid, 1000);
}

/* Frees a run's output. */
static void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

/* Parses a run's standard output as one JSON document; returns it or NULL (with a diagnostic). */
static struct tj *run_json(const struct run *r)
{
    char err[200];
    struct tj *v = tj_parse(r->out, r->out_len, err, sizeof err);
    if (v == NULL)
        diag("invalid JSON (%s): %s", err, r->out);
    return v;
}

/* Returns whether text is exactly one line, ending with a newline. */
static int one_line(const char *text)
{
    const char *nl = strchr(text, '\n');
    return nl != NULL && nl[1] == '\0';
}

/* Starts pagedd (cpu backend, two threads, warnings only) on the test socket and waits for
 * its READY; bails if it does not come. Returns nothing. */
static void start_daemon(void)
{
    const char *const args[] = { "--backend", "cpu", "--threads", "2", "--log-level", "warning", NULL };
    int st;
    if (pagedd_start(&daemon_, args, NULL, &st) != 0)
        bail("pagedd did not become ready (wait status %d)", st);
}

/* Starts a holder client (see pactl-holder.c) and waits for its "ready ID"; returns it. */
static struct child start_holder(const char *name, const char *hold, const char *cache,
                                 uint32_t *id)
{
    char *const argv[] = { holder, daemon_.socket, (char *) name, "t1", (char *) hold, (char *) cache,
                           NULL };
    struct child h = spawn(argv);
    char line[256];
    unsigned got;
    if (read_line(h.out, line, sizeof line, READY_MS) < 0 || sscanf(line, "ready %u", &got) != 1)
        bail("holder %s did not start: %s", name, line);
    *id = got;
    return h;
}

/* Tells a holder to finish and waits for it; returns its exit status. */
static int stop_holder(struct child *h)
{
    close(h->in);
    close(h->out);
    return reap(h->pid, RUN_MS);
}

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
    struct run r;
    run_pactl(&r, "-s", daemon_.socket, "-f", "json", "list", "pools", NULL);
    struct tj *v = r.status == 0 ? run_json(&r) : NULL;
    run_free(&r);
    return v;
}

/* Checks status, in both formats. */
static void test_status(void)
{
    struct run r;
    run_pactl(&r, "-s", daemon_.socket, "status", NULL);
    is_int(0, r.status, "status: exit 0");
    ok(strstr(r.out, "backend        cpu\n") != NULL, "status text: backend cpu");
    ok(strstr(r.out, "pools          1\n") != NULL, "status text: one pool");
    ok(strstr(r.out, "health         ok\n") != NULL, "status text: healthy");
    run_free(&r);

    run_pactl(&r, "-s", daemon_.socket, "-f", "json", "status", NULL);
    struct tj *v = run_json(&r);
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
    run_free(&r);
}

/* Checks list pools and info, in both formats. */
static void test_pools(void)
{
    struct run r;
    run_pactl(&r, "-s", daemon_.socket, "list", NULL);
    is_int(0, r.status, "list: exit 0");
    ok(strncmp(r.out, "  ID  NAME", 10) == 0 && strstr(r.out, "\n   1  t1 ") != NULL,
       "list text: heading and pool t1");
    run_free(&r);

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
    is_int(getuid(), (long long) tj_num(p, "owner_uid"), "list pools json: owner");
    tj_free(v);

    run_pactl(&r, "-s", daemon_.socket, "info", "t1", NULL);
    is_int(0, r.status, "info: exit 0");
    ok(strstr(r.out, "blocks         64: 56 free, 6 referenced, 2 cached\n") != NULL,
       "info text: block counts");
    ok(strstr(r.out, "head dim       64\n") != NULL, "info text: geometry");
    run_free(&r);
    run_pactl(&r, "-s", daemon_.socket, "-f", "json", "info", "t1", NULL);
    v = run_json(&r);
    is_string("t1", tj_str(v, "name"), "info json: the pool object");
    is_int(2, (long long) tj_num(v, "num_kv_heads"), "info json: kv heads");
    tj_free(v);
    run_free(&r);

    run_pactl(&r, "-s", daemon_.socket, "info", "nosuch", NULL);
    ok(r.status == 1 && one_line(r.err) && strstr(r.err, "no such pool 'nosuch'") != NULL,
       "info of a missing pool: exit 1, one line");
    run_free(&r);
}

/* Checks list clients and list blocks, in both formats. */
static void test_clients_blocks(uint32_t id_a, uint32_t id_b)
{
    struct run r;
    run_pactl(&r, "-s", daemon_.socket, "list", "clients", NULL);
    is_int(0, r.status, "list clients: exit 0");
    ok(strstr(r.out, "hold-a") != NULL && strstr(r.out, "hold-b") != NULL
           && strstr(r.out, "control") != NULL, "list clients text: both holders and pactl");
    run_free(&r);

    run_pactl(&r, "-s", daemon_.socket, "-f", "json", "list", "clients", NULL);
    struct tj *v = run_json(&r);
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
    run_free(&r);

    run_pactl(&r, "-s", daemon_.socket, "-f", "json", "list", "blocks", "t1", NULL);
    v = run_json(&r);
    const struct tj *blocks = tj_get(v, "blocks");
    size_t held_a = 0, cached = 0, held_b = 0;
    for (size_t i = 0; blocks != NULL && i < blocks->count; i++) {
        const struct tj *bl = tj_at(blocks, i);
        const struct tj *h0 = tj_at(tj_get(bl, "holders"), 0);
        if (tj_num(bl, "refcount") == 0 && tj_get(bl, "published")->boolean
            && tj_str(bl, "hash") != NULL && strlen(tj_str(bl, "hash")) == 32)
            cached++;
        else if (h0 != NULL && h0->number == id_a)
            held_a++;
        else if (h0 != NULL && h0->number == id_b)
            held_b++;
    }
    ok(blocks != NULL && blocks->count == 8, "list blocks json: 8 blocks in use");
    ok(held_a == 5 && held_b == 1 && cached == 2,
       "list blocks json: 5 held by hold-a, 1 by hold-b, 2 cached with hashes");
    tj_free(v);
    run_free(&r);

    run_pactl(&r, "-s", daemon_.socket, "list", "blocks", NULL);
    size_t lines = 0;
    for (const char *s = r.out; (s = strchr(s, '\n')) != NULL; s++)
        lines++;
    ok(r.status == 0 && lines == 9 && strstr(r.out, "cached") != NULL,
       "list blocks text: heading and 8 rows");
    run_free(&r);

    run_pactl(&r, "-s", daemon_.socket, "list", "blocks", "nosuch", NULL);
    ok(r.status == 1 && one_line(r.err), "list blocks of a missing pool: exit 1, one line");
    run_free(&r);
}

/* Checks stat, in both formats. */
static void test_stat(void)
{
    struct run r;
    run_pactl(&r, "-s", daemon_.socket, "stat", NULL);
    ok(r.status == 0 && strstr(r.out, "\ndecode ") != NULL && strstr(r.out, "\nalloc ") != NULL,
       "stat text: a row per op");
    ok(strstr(r.out, "\nengine\n") != NULL && strstr(r.out, "merged DECODEs") != NULL,
       "stat text: the engine's section");
    run_free(&r);
    run_pactl(&r, "-s", daemon_.socket, "-f", "json", "stat", NULL);
    struct tj *v = run_json(&r);
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
    run_free(&r);
}

/* Checks evict: the cached blocks go, the held ones stay. */
static void test_evict(void)
{
    struct run r;
    run_pactl(&r, "-s", daemon_.socket, "-f", "json", "evict", "t1", NULL);
    struct tj *v = run_json(&r);
    ok(r.status == 0, "evict: exit 0");
    is_int(2, (long long) tj_num(v, "evicted"), "evict json: 2 cached blocks evicted");
    tj_free(v);
    run_free(&r);
    v = pools_json();
    const struct tj *p = tj_at(tj_get(v, "pools"), 0);
    ok(tj_num(p, "cached") == 0 && tj_num(p, "free") == 58 && tj_num(p, "referenced") == 6,
       "after evict: 0 cached, 58 free, 6 still referenced");
    tj_free(v);
    run_pactl(&r, "-s", daemon_.socket, "evict", "t1", NULL);
    is_string("evicted 0 cached blocks from pool 't1'\n", r.out, "evict text: nothing left");
    run_free(&r);
    run_pactl(&r, "-s", daemon_.socket, "evict", "nosuch", NULL);
    ok(r.status == 1 && one_line(r.err) && strstr(r.err, "nosuch") != NULL,
       "evict of a missing pool: exit 1, the daemon's one-line message");
    run_free(&r);
}

/* Reads subscriber lines until an event of type for client id arrives (or time runs out).
 * Every line must be valid JSON; *bad counts the ones that are not. Returns 1 if found. */
static int await_event(int fd, const char *type, uint32_t id, int *bad)
{
    long long deadline = now_ms() + EVENT_MS;
    char line[1024], err[200];
    while (now_ms() < deadline) {
        long n = read_line(fd, line, sizeof line, (int) (deadline - now_ms()));
        if (n < 0)
            return 0;
        struct tj *v = tj_parse(line, (size_t) n, err, sizeof err);
        if (v == NULL) {
            diag("subscriber line is not JSON (%s): %s", err, line);
            (*bad)++;
            continue;
        }
        int hit = tj_str(v, "event") != NULL && strcmp(tj_str(v, "event"), type) == 0
                  && tj_num(v, "client_id") == id;
        tj_free(v);
        if (hit)
            return 1;
    }
    return 0;
}

/*
 * Starts probe clients named prefix-N until the subscriber's output fd shows one's connect
 * event: the subscription starts a moment after pactl does, and a probe that comes too early
 * is simply missed, so up to five. With disconnected, also waits for that probe's disconnect
 * event and says in *disconnected whether it came. *bad counts lines that are not JSON.
 * Returns whether a connect event came.
 */
static int probe_subscription(int fd, const char *prefix, int *bad, int *disconnected)
{
    int connected = 0;
    for (int attempt = 0; attempt < 5 && !connected; attempt++) {
        uint32_t id;
        char name[32];
        snprintf(name, sizeof name, "%s-%d", prefix, attempt);
        struct child h = start_holder(name, "0", "0", &id);
        connected = await_event(fd, "connect", id, bad);
        stop_holder(&h);
        if (connected && disconnected != NULL)
            *disconnected = await_event(fd, "disconnect", id, bad);
    }
    return connected;
}

/* Checks subscribe: a client that comes and goes shows up as connect and disconnect. */
static void test_subscribe(void)
{
    char *const argv[] = { pactl, "-s", daemon_.socket, "-f", "json", "subscribe", NULL };
    struct child s = spawn(argv);
    int bad = 0, disconnected = 0;
    int connected = probe_subscription(s.out, "probe", &bad, &disconnected);
    ok(connected, "subscribe: connect event of a new client");
    ok(disconnected, "subscribe: disconnect event of that client after it exits");
    is_int(0, bad, "subscribe: every line is one valid JSON object");
    kill(s.pid, SIGTERM);
    close(s.in);
    close(s.out);
    is_int(0, reap(s.pid, RUN_MS), "subscribe: exits 0 on SIGTERM");
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
                   && poll(&p, 1, RUN_MS) == 1 && recv(fd, &w, sizeof w, 0) == (ssize_t) sizeof w
                   && w.hdr.type == PCORE_MSG_WELCOME;
    close(fd);
    return welcomed;
}

/* Checks subscribe when pactl falls behind (its output not read while 4000 clients come and
 * go): once it reads again, every one of the 8000 events is printed or counted by a "lost"
 * line. */
static void test_subscribe_lost(void)
{
    char *const argv[] = { pactl, "-s", daemon_.socket, "-f", "json", "subscribe", NULL };
    struct child s = spawn(argv);
    int bad = 0;
    ok(probe_subscription(s.out, "lost-probe", &bad, NULL), "subscribe behind: the subscription is live");
    enum { CHURN = 4000 };
    int welcomed = 0;
    for (int i = 0; i < CHURN; i++)
        welcomed += churn_once("churn");
    is_int(CHURN, welcomed, "subscribe behind: %d clients came and went while its output was not read", CHURN);
    long shown = 0, lost = 0, lost_lines = 0;
    long long deadline = now_ms() + RUN_MS;
    char line[1024], err[200];
    while (shown + lost < 2 * CHURN && now_ms() < deadline) {
        long n = read_line(s.out, line, sizeof line, (int) (deadline - now_ms()));
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
    is_int(0, reap(s.pid, RUN_MS), "subscribe behind: exits 0 on SIGTERM");
}

/* Checks kill-client: the client goes, its blocks come back. */
static void test_kill(uint32_t id_a)
{
    struct run r;
    char id[16];
    snprintf(id, sizeof id, "%u", (unsigned) id_a);
    run_pactl(&r, "-s", daemon_.socket, "kill-client", id, NULL);
    is_int(0, r.status, "kill-client: exit 0");
    char want[64];
    snprintf(want, sizeof want, "killed client %s\n", id);
    is_string(want, r.out, "kill-client text: confirmation");
    run_free(&r);

    run_pactl(&r, "-s", daemon_.socket, "-f", "json", "list", "clients", NULL);
    struct tj *v = run_json(&r);
    ok(v != NULL && find_client(v, "hold-a") == NULL && find_client(v, "hold-b") != NULL,
       "after kill-client: hold-a is gone, hold-b stays");
    tj_free(v);
    run_free(&r);
    v = pools_json();
    const struct tj *p = tj_at(tj_get(v, "pools"), 0);
    ok(tj_num(p, "referenced") == 1 && tj_num(p, "free") == 63 && tj_num(p, "attached") == 1,
       "after kill-client: hold-a's 5 blocks are free again");
    tj_free(v);

    run_pactl(&r, "-s", daemon_.socket, "-f", "json", "kill-client", "99999", NULL);
    ok(r.status == 1 && one_line(r.err) && strstr(r.err, "no client 99999") != NULL
           && r.out_len == 0,
       "kill-client of a missing client: exit 1, one line, no output");
    run_free(&r);
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
        if (poll(&p, 1, RUN_MS) == 1) {
            int c = accept(fd, NULL, NULL);
            char buf[512];
            p.fd = c;
            if (c >= 0 && poll(&p, 1, RUN_MS) == 1 && read(c, buf, sizeof buf) > 0
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
    struct run r;
    char path[PATH_MAX + 16];

    snprintf(path, sizeof path, "%s/none.sock", daemon_.dir);
    run_pactl(&r, "-s", path, "status", NULL);
    ok(r.status == 1 && one_line(r.err) && strstr(r.err, "no daemon listening on") != NULL
           && strstr(r.err, "is pagedd running?") != NULL,
       "no daemon: exit 1 and one line");
    run_free(&r);

    snprintf(path, sizeof path, "%s/file", daemon_.dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        sysbail("%s", path);
    fclose(f);
    run_pactl(&r, "-s", path, "status", NULL);
    ok(r.status == 1 && one_line(r.err) && strstr(r.err, "is not a pagedd socket") != NULL,
       "a regular file: exit 1, 'not a pagedd socket'");
    run_free(&r);

    snprintf(path, sizeof path, "%s/stream.sock", daemon_.dir);
    pid_t fake = fake_server(path, SOCK_STREAM, FAKE_GARBAGE);
    run_pactl(&r, "-s", path, "list", NULL);
    ok(r.status == 1 && one_line(r.err) && strstr(r.err, "is not a pagedd socket") != NULL,
       "a stream socket: exit 1, 'not a pagedd socket'");
    run_free(&r);
    kill(fake, SIGTERM);
    reap(fake, RUN_MS);

    snprintf(path, sizeof path, "%s/other.sock", daemon_.dir);
    fake = fake_server(path, SOCK_SEQPACKET, FAKE_GARBAGE);
    run_pactl(&r, "-s", path, "status", NULL);
    ok(r.status == 1 && one_line(r.err) && strstr(r.err, "is not a pagedd socket") != NULL,
       "a seqpacket socket answering garbage: exit 1, 'not a pagedd socket'");
    run_free(&r);
    reap(fake, RUN_MS);
    unlink(path);

    fake = fake_server(path, SOCK_SEQPACKET, FAKE_ERROR_VERSION);
    run_pactl(&r, "-s", path, "status", NULL);
    ok(r.status == 1 && one_line(r.err) && strstr(r.err, "protocol version mismatch") != NULL
           && strstr(r.err, "version 99") != NULL,
       "a daemon refusing our protocol version: exit 1, one line with its reason");
    run_free(&r);
    reap(fake, RUN_MS);
    unlink(path);

    fake = fake_server(path, SOCK_SEQPACKET, FAKE_WELCOME_OTHER);
    run_pactl(&r, "-s", path, "status", NULL);
    ok(r.status == 1 && one_line(r.err) && strstr(r.err, "protocol version mismatch") != NULL
           && strstr(r.err, "version 99") != NULL,
       "a daemon welcoming us with another protocol version: exit 1, one line");
    run_free(&r);
    reap(fake, RUN_MS);

    static const char *const usage_cases[][4] = {
        { NULL }, { "frob", NULL }, { "list", "frob", NULL }, { "-f", "xml", "status", NULL },
        { "kill-client", "x1", NULL }, { "info", NULL }, { "status", "extra", NULL },
        { "list", "pools", "t1", NULL },
    };
    for (size_t i = 0; i < sizeof usage_cases / sizeof usage_cases[0]; i++) {
        const char *const *c = usage_cases[i];
        run_pactl(&r, "-s", daemon_.socket, c[0], c[0] ? c[1] : NULL, c[0] && c[1] ? c[2] : NULL, NULL);
        ok(r.status == 2 && strstr(r.err, "usage: pactl") != NULL && r.out_len == 0,
           "bad usage #%zu (%s %s): exit 2 with usage", i, c[0] ? c[0] : "nothing",
           c[0] && c[1] ? c[1] : "");
        run_free(&r);
    }
    run_pactl(&r, "-h", NULL);
    ok(r.status == 0 && strstr(r.out, "kill-client") != NULL, "-h: help on stdout, exit 0");
    run_free(&r);
}

/* Finds a program under the build tree; returns 0 if it is there. */
static int find_program(char *out, const char *top, const char *rel)
{
    snprintf(out, PATH_MAX, "%s/%s", top, rel);
    return access(out, X_OK);
}

/* Runs the checks against one daemon. */
int main(void)
{
    const char *top = getenv("top_builddir");
    if (top == NULL)
        top = ".";
    if (access(pagedd_path(), X_OK) != 0)
        skip_all("daemon/pagedd is not built");
    if (find_program(pactl, top, "tools/pactl") != 0 || find_program(holder, top, "tests/tools/pactl-holder") != 0)
        skip_all("tools/pactl or tests/tools/pactl-holder is not built");
    pagedd_mkdir(&daemon_);
    signal(SIGPIPE, SIG_IGN);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &saved_mask);
    plan_lazy();

    start_daemon();
    uint32_t id_a, id_b;
    struct child a = start_holder("hold-a", "5", "0", &id_a);
    struct child b = start_holder("hold-b", "1", "2", &id_b);

    test_status();
    test_pools();
    test_clients_blocks(id_a, id_b);
    test_stat();
    test_evict();
    test_subscribe();
    test_subscribe_lost();
    test_kill(id_a);
    test_errors();

    stop_holder(&a);
    is_int(0, stop_holder(&b), "hold-b exits 0");
    int st = pagedd_stop(&daemon_);
    is_int(0, st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, "pagedd exits 0 on SIGTERM");
    pagedd_cleanup(&daemon_);
    return 0;
}
