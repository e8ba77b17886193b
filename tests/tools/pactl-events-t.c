/* pactl-events-t.c: pactl subscribe: text and JSON lines alike, pactl's own hidden unless -a, names escaped. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/proto.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"
#include "tests/tools/tpactl.h"

static struct pagedd daemon_;

/* One event line, text or JSON, in the same fields. */
struct ev {
    char event[32];
    char time[64];        /* as the text form shows it: local time with milliseconds */
    unsigned client, pid, count;
    char name[256], pool[256];
};

/* Formats a CLOCK_REALTIME time in nanoseconds as the text form does. Returns buf. */
static char *local_ms(char *buf, size_t size, uint64_t ns)
{
    time_t t = (time_t) (ns / 1000000000u);
    struct tm tm;
    char day[32] = "?";
    if (localtime_r(&t, &tm) != NULL)
        strftime(day, sizeof day, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(buf, size, "%s.%03u", day, (unsigned) (ns / 1000000u % 1000u));
    return buf;
}

/* Parses a JSON subscriber line into *e; returns 1, or 0 when it is not one. */
static int parse_json(const char *line, struct ev *e)
{
    char err[200];
    struct tj *v = tj_parse(line, strlen(line), err, sizeof err);
    if (v == NULL || tj_str(v, "event") == NULL || tj_str(v, "client_name") == NULL || tj_str(v, "pool") == NULL
        || tj_get(v, "time_ns") == NULL || tj_get(v, "client_id") == NULL || tj_get(v, "pid") == NULL
        || tj_get(v, "count") == NULL || v->count != 7) {
        diag("not a subscriber's JSON line (%s): %s", v == NULL ? err : "members", line);
        tj_free(v);
        return 0;
    }
    snprintf(e->event, sizeof e->event, "%s", tj_str(v, "event"));
    local_ms(e->time, sizeof e->time, (uint64_t) tj_num(v, "time_ns"));
    e->client = (unsigned) tj_num(v, "client_id");
    e->pid = (unsigned) tj_num(v, "pid");
    e->count = (unsigned) tj_num(v, "count");
    snprintf(e->name, sizeof e->name, "\"%s\"", tj_str(v, "client_name"));
    snprintf(e->pool, sizeof e->pool, "\"%s\"", tj_str(v, "pool"));
    tj_free(v);
    return 1;
}

/* Parses a text subscriber line (names as printed, quotes included) into *e; returns 1 or 0. */
static int parse_text(const char *line, struct ev *e)
{
    char day[16], clock[16];
    int n = 0;
    if (sscanf(line, "%15s %15s %31s client %u pid %u name %255s pool %255s count %u%n", day, clock, e->event,
               &e->client, &e->pid, e->name, e->pool, &e->count, &n) != 8 || line[n] != '\0') {
        diag("not a subscriber's text line: %s", line);
        return 0;
    }
    snprintf(e->time, sizeof e->time, "%s %s", day, clock);
    return 1;
}

/* Reads lines of fd (JSON or text) until the disconnect of the client named name; stores
 * up to max events in evs. Returns how many, or -1 when a line did not parse or the
 * disconnect did not come. */
static int read_until_gone(int fd, int json, const char *name, struct ev *evs, int max)
{
    char line[1024], quoted[80];
    snprintf(quoted, sizeof quoted, "\"%s\"", name);
    long long deadline = tp_now_ms() + TP_EVENT_MS;
    for (int n = 0; n < max;) {
        if (tp_read_line(fd, line, sizeof line, (int) (deadline - tp_now_ms())) < 0)
            return -1;
        struct ev *e = &evs[n];
        if (!(json ? parse_json(line, e) : parse_text(line, e)))
            return -1;
        n++;
        if (strcmp(e->event, "disconnect") == 0 && strcmp(e->name, quoted) == 0)
            return n;
    }
    return -1;
}

/* Counts the events of type about clients named "pactl" among n. */
static int count_pactl(const struct ev *evs, int n, const char *type)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += strcmp(evs[i].event, type) == 0 && strcmp(evs[i].name, "\"pactl\"") == 0;
    return k;
}

/* Starts holders named text-probe-N until the text subscriber on fd shows one's disconnect:
 * its subscription is live from then on. Returns 1 once it did. */
static int probe_text(int fd)
{
    struct ev evs[16];
    for (int attempt = 0; attempt < 5; attempt++) {
        char name[32];
        uint32_t id;
        snprintf(name, sizeof name, "text-probe-%d", attempt);
        struct tp_child h = tp_start_holder(daemon_.socket, name, "t1", "0", "0", &id);
        tp_stop_holder(&h);
        if (read_until_gone(fd, 0, name, evs, 16) > 0)
            return 1;
    }
    return 0;
}

/* Checks the inspection filter and that the text and JSON lines carry the same fields. */
static void test_daemon_events(void)
{
    char *const plain[] = { tp_pactl, "-s", daemon_.socket, "-f", "json", "subscribe", NULL };
    char *const all[] = { tp_pactl, "subscribe", "-s", daemon_.socket, "--all", "-f", "json", NULL };
    char *const text[] = { tp_pactl, "-s", daemon_.socket, "subscribe", NULL };
    struct tp_child sp = tp_spawn(plain), sa = tp_spawn(all), st = tp_spawn(text);
    int bad = 0, gone = 0;
    ok(tp_probe_subscription(daemon_.socket, sp.out, "probe", &bad, &gone) && gone,
       "subscribe: live (a worker's connect and disconnect seen)");
    gone = 0;
    ok(tp_probe_subscription(daemon_.socket, sa.out, "probe-all", &bad, &gone) && gone,
       "subscribe -a (options after the command): live");
    ok(probe_text(st.out), "subscribe in text: live");
    /* Each saw the others' probes too: one more worker's disconnect lines them all up. */
    struct ev evs[64];
    uint32_t id;
    struct tp_child h = tp_start_holder(daemon_.socket, "sync", "t1", "0", "0", &id);
    tp_stop_holder(&h);
    ok(read_until_gone(sp.out, 1, "sync", evs, 64) > 0 && read_until_gone(sa.out, 1, "sync", evs, 64) > 0
           && read_until_gone(st.out, 0, "sync", evs, 64) > 0, "all three subscribers at the same event");

    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "status", NULL);
    ok(r.status == 0, "a pactl call while they run");
    tp_run_free(&r);
    h = tp_start_holder(daemon_.socket, "marker", "t1", "2", "0", &id);
    tp_stop_holder(&h);

    struct ev pe[64], ae[64], te[64];
    int np = read_until_gone(sp.out, 1, "marker", pe, 64);
    int na = read_until_gone(sa.out, 1, "marker", ae, 64);
    int nt = read_until_gone(st.out, 0, "marker", te, 64);
    ok(np > 0 && count_pactl(pe, np, "connect") == 0 && count_pactl(pe, np, "disconnect") == 0,
       "subscribe: no event line for the pactl call (%d lines up to the marker's disconnect)", np);
    ok(na > 0 && count_pactl(ae, na, "disconnect") == 1 && count_pactl(ae, na, "connect") >= 1,
       "subscribe -a: the pactl call's connect and disconnect");
    is_int(0, bad, "every JSON line parses");

    /* The plain JSON and the text subscriber saw the same events: compare them field by field. */
    int same = np > 0 && np == nt;
    for (int i = 0; same && i < np; i++) {
        same = strcmp(pe[i].event, te[i].event) == 0 && strcmp(pe[i].time, te[i].time) == 0
               && pe[i].client == te[i].client && pe[i].pid == te[i].pid && pe[i].count == te[i].count
               && strcmp(pe[i].name, te[i].name) == 0 && strcmp(pe[i].pool, te[i].pool) == 0;
        if (!same)
            diag("line %d differs: json %s %s %u %u %s %s %u, text %s %s %u %u %s %s %u", i, pe[i].event, pe[i].time,
                 pe[i].client, pe[i].pid, pe[i].name, pe[i].pool, pe[i].count, te[i].event, te[i].time, te[i].client,
                 te[i].pid, te[i].name, te[i].pool, te[i].count);
    }
    ok(same, "text and JSON lines carry the same fields, time included (%d and %d lines)", nt, np);
    const struct ev *last = np > 0 ? &pe[np - 1] : NULL, *detach = np > 1 ? &pe[np - 2] : NULL;
    ok(detach != NULL && strcmp(detach->event, "detach") == 0 && detach->client == id && detach->count == 2
           && strcmp(detach->pool, "\"t1\"") == 0 && last->client == id && strcmp(last->pool, "\"\"") == 0,
       "the marker's detach from t1 counts its 2 block references; its disconnect names no pool");

    ok(!pagedd_log_contains(&daemon_, "\"pactl\"): disconnected")
           && pagedd_log_wait(&daemon_, "\"marker\"): disconnected", TP_EVENT_MS),
       "the daemon logs a worker's disconnect at info, not pactl's");

    /* Their pipes stay open until they are gone: one may still be writing the others' ends. */
    struct tp_child *subs[] = { &sp, &sa, &st };
    for (size_t i = 0; i < 3; i++) {
        kill(subs[i]->pid, SIGTERM);
        is_int(0, tp_reap(subs[i]->pid, TP_RUN_MS), "subscriber %zu exits 0 on SIGTERM", i);
    }
    for (size_t i = 0; i < 3; i++) {
        close(subs[i]->in);
        close(subs[i]->out);
    }
}

/* The name and pool the fake daemon's event carries: a terminal escape, a quote, a
 * backslash, a newline, UTF-8 (é), a C1 control (CSI), a byte that is no UTF-8. */
static const char evil_name[] = "ev\x1b[31m\"il\\\n\xc3\xa9\xc2\x9b";
static const char evil_pool[] = "p\xff\x01";

/* Sends a message of len bytes on c; exits the fake daemon when it cannot. */
static void fake_send(int c, const void *m, size_t len)
{
    if (send(c, m, len, MSG_NOSIGNAL) != (ssize_t) len)
        _exit(1);
}

/* Starts a fake pagedd on path that welcomes one pactl, answers its SUBSCRIBE, sends one
 * event with evil names and then SHUTDOWN. Returns its pid. */
static pid_t fake_daemon(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof sa) != 0 || listen(fd, 4) != 0)
        sysbail("fake daemon on %s", path);
    pid_t pid = bfork();
    if (pid != 0) {
        close(fd);
        return pid;
    }
    struct pollfd p = { .fd = fd, .events = POLLIN };
    if (poll(&p, 1, TP_RUN_MS) != 1)
        _exit(1);
    int c = accept(fd, NULL, NULL);
    char buf[512];
    struct pcore_msg_welcome w;
    memset(&w, 0, sizeof w);
    w.hdr = (struct pcore_msg_hdr) { PCORE_MSG_WELCOME, 1, 0, sizeof w };
    w.version = PCORE_PROTO_VERSION;
    w.client_id = 9;
    p.fd = c;
    if (c < 0 || poll(&p, 1, TP_RUN_MS) != 1 || recv(c, buf, sizeof buf, 0) <= 0)
        _exit(1);
    fake_send(c, &w, sizeof w);
    if (poll(&p, 1, TP_RUN_MS) != 1 || recv(c, buf, sizeof buf, 0) <= 0)
        _exit(1);
    struct pcore_msg_hdr okr = { PCORE_MSG_OK, 2, 0, sizeof okr };
    fake_send(c, &okr, sizeof okr);
    struct pcore_msg_event e;
    memset(&e, 0, sizeof e);
    e.hdr = (struct pcore_msg_hdr) { PCORE_MSG_EVENT, 0, 0, sizeof e };
    e.event = PCORE_EVENT_ATTACH;
    e.client_id = 5;
    e.pid = 42;
    e.count = 7;
    e.time_ns = 1000000000ull * 1700000000ull + 123000000ull;
    memcpy(e.client_name, evil_name, sizeof evil_name);
    memcpy(e.pool, evil_pool, sizeof evil_pool);
    fake_send(c, &e, sizeof e);
    struct pcore_msg_hdr bye = { PCORE_MSG_SHUTDOWN, 0, 0, sizeof bye };
    fake_send(c, &bye, sizeof bye);
    /* Stays until pactl hangs up, so the messages are read, not lost with the socket. */
    p.events = POLLIN;
    poll(&p, 1, TP_RUN_MS);
    _exit(0);
}

/* Checks names escaped in both forms, and the shutdown line, against the fake daemon. */
static void test_escapes(void)
{
    char path[400], when[64];
    snprintf(path, sizeof path, "%s/fake.sock", daemon_.dir);
    local_ms(when, sizeof when, 1000000000ull * 1700000000ull + 123000000ull);

    pid_t fake = fake_daemon(path);
    struct tp_run r;
    tp_run_pactl(&r, "-s", path, "subscribe", NULL);
    char want[512];
    snprintf(want, sizeof want,
             "%s attach       client 5 pid 42 name \"ev\\x1b[31m\\\"il\\\\\\x0a\xc3\xa9\\xc2\\x9b\" "
             "pool \"p\\xff\\x01\" count 7\n",
             when);
    const char *second = strchr(r.out, '\n');
    ok(r.status == 0 && strncmp(r.out, want, strlen(want)) == 0,
       "text: the name and pool quoted, UTF-8 as it is, control characters, quote, backslash, stray bytes escaped");
    if (strncmp(r.out, want, strlen(want)) != 0)
        diag("got: %s", r.out);
    char line[256] = "";
    struct ev e;
    if (second != NULL)
        snprintf(line, sizeof line, "%.*s", (int) strcspn(second + 1, "\n"), second + 1);
    ok(parse_text(line, &e) && strcmp(e.event, "shutdown") == 0 && e.client == 0 && strcmp(e.name, "\"\"") == 0
           && strlen(e.time) == 23 && e.time[4] == '-' && e.time[19] == '.',
       "text: a last shutdown line with a time and the others' fields (%s)", line);
    tp_run_free(&r);
    tp_reap(fake, TP_RUN_MS);

    fake = fake_daemon(path);
    tp_run_pactl(&r, "-s", path, "-f", "json", "subscribe", NULL);
    char err[200];
    second = strchr(r.out, '\n');
    struct tj *v = tj_parse(r.out, second != NULL ? (size_t) (second - r.out) : 0, err, sizeof err);
    ok(v != NULL && tj_str(v, "client_name") != NULL && strcmp(tj_str(v, "client_name"), evil_name) == 0
           && tj_str(v, "pool") != NULL && strcmp(tj_str(v, "pool"), "p\xef\xbf\xbd\x01") == 0,
       "json: the name parses back to its bytes, the pool's stray byte as U+FFFD");
    tj_free(v);
    v = second != NULL ? tj_parse(second + 1, strlen(second + 1), err, sizeof err) : NULL;
    ok(v != NULL && tj_str(v, "event") != NULL && strcmp(tj_str(v, "event"), "shutdown") == 0
           && tj_num(v, "time_ns") > 1.7e18 && v->count == 7,
       "json: a last shutdown object with a time and the others' members");
    tj_free(v);
    tp_run_free(&r);
    tp_reap(fake, TP_RUN_MS);
}

/* Runs the checks against one daemon that logs at info. */
int main(void)
{
    tp_init(&daemon_);
    const char *const args[] = { "--threads", "1", "--log-level", "info", NULL };
    tp_start_daemon(&daemon_, args);
    uint32_t id;
    struct tp_child owner = tp_start_holder(daemon_.socket, "owner", "t1", "0", "0", &id);

    test_daemon_events();
    test_escapes();

    tp_stop_holder(&owner);
    tp_stop_daemon(&daemon_);
    return 0;
}
