/* pactl-names-t.c: client names as given: UTF-8 kept, shown escaped in pactl's text and the daemon's log. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/proto.h"
#include "lib/core/utf8.h"
#include "tests/service/rawclient.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"
#include "tests/tools/tjson.h"
#include "tests/tools/tpactl.h"

static struct pagedd daemon_;

/* A name as a client gives it, as the daemon keeps it, and as text shows it. */
struct name_case {
    const char *what;
    const char *given;     /* the bytes the client sends */
    const char *kept;      /* what JSON gives back: well-formed UTF-8, U+FFFD for the rest */
    const char *table;     /* in pactl's table: escaped, unquoted */
    const char *logged;    /* in the daemon's log: escaped, in double quotes */
    int raw;               /* sent as a raw HELLO rather than through libpaged */
    uint32_t id;           /* the daemon's id for it, once connected */
};

/* Thirty-five é (70 bytes): libpaged cuts it to 63 bytes at a character boundary. */
#define E35 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9" \
            "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9" \
            "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9" \
            "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
#define E31 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9" \
            "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9" \
            "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9" \
            "\xc3\xa9"
/* Sixty-two x: a raw HELLO's 63rd byte, 0xc3, starts a sequence the field cuts off. */
#define X62 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
#define FFFD "\xef\xbf\xbd"
/* Two CJK ideographs (two columns each) and an emoji (two columns). */
#define CJK "cjk-\xe5\x90\x8d\xe5\x89\x8d-\xf0\x9f\x98\x80"

static struct name_case cases[] = {
    { "UTF-8 (é)", "utf8-\xc3\xa9t\xc3\xa9", "utf8-\xc3\xa9t\xc3\xa9", "utf8-\xc3\xa9t\xc3\xa9 ",
      "\"utf8-\xc3\xa9t\xc3\xa9\"", 0, 0 },
    /* 4 + 4 + 1 + 2 columns: 9 spaces of padding to 20, and the column's separator. */
    { "CJK and an emoji", CJK, CJK, CJK "          worker", "\"" CJK "\"", 0, 0 },
    { "a quote", "quote\"q", "quote\"q", " quote\"q ", "\"quote\\\"q\"", 0, 0 },
    { "a backslash", "back\\slash", "back\\slash", " back\\\\slash ", "\"back\\\\slash\"", 0, 0 },
    { "newline, tab, ESC", "ctl\n\t\x1b[31m", "ctl\n\t\x1b[31m", " ctl\\x0a\\x09\\x1b[31m ",
      "\"ctl\\x0a\\x09\\x1b[31m\"", 0, 0 },
    { "a C1 control (CSI)", "c1\xc2\x9b" "2J", "c1\xc2\x9b" "2J", " c1\\xc2\\x9b2J ", "\"c1\\xc2\\x9b2J\"", 0, 0 },
    { "invalid UTF-8", "bad\xff-\xe2\x82", "bad" FFFD "-" FFFD, " bad" FFFD "-" FFFD " ", "\"bad" FFFD "-" FFFD "\"",
      0, 0 },
    { "70 bytes of é, cut by libpaged", E35, E31, " " E31 " ", "\"" E31 "\"", 0, 0 },
    { "raw HELLO: UTF-8, quote, backslash, ESC, DEL, a stray byte", "raw-\xc3\xa9\"\\\x1b\x7f\xfe",
      "raw-\xc3\xa9\"\\\x1b\x7f" FFFD, " raw-\xc3\xa9\"\\\\\\x1b\\x7f" FFFD " ",
      "\"raw-\xc3\xa9\\\"\\\\\\x1b\\x7f" FFFD "\"", 1, 0 },
    { "raw HELLO: a sequence cut by the 63-byte field", X62 "\xc3", X62, " " X62 " ", "\"" X62 "\"", 1, 0 },
};
#define NCASES (sizeof cases / sizeof cases[0])

/* Says whether text (len bytes) is well-formed UTF-8 with no control character but '\n'.
 * Returns 1 or 0, with a diagnostic naming the first offending byte's offset. */
static int text_is_clean(const char *what, const char *text, size_t len)
{
    const unsigned char *p = (const unsigned char *) text;
    for (size_t i = 0; i < len;) {
        size_t n = pcore_utf8_seq_len(p + i, len - i);
        int control = n == 1 ? (p[i] < 0x20 && p[i] != '\n') || p[i] == 0x7f
                             : n == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0;
        if (n == 0 || control) {
            diag("%s: byte 0x%02x at %zu is %s", what, p[i], i, n == 0 ? "no UTF-8" : "a control character");
            return 0;
        }
        i += n;
    }
    return 1;
}

/* Connects case k as a raw worker (no libpaged): its HELLO's name field holds exactly the
 * given bytes. Returns 0 or the daemon's error. */
static int connect_raw(struct name_case *k, struct rc_client *rc)
{
    struct pcore_msg_hello h;
    rc_fill_hello(&h, "", 0);
    memcpy(h.name, k->given, strlen(k->given));
    int status = rc_connect_hello(daemon_.socket, &h, rc);
    k->id = rc->welcome.client_id;
    return status;
}

/* Reads JSON subscriber lines from fd until every case's connect event came (or TP_EVENT_MS
 * pass); checks each one's client_name. Returns nothing. */
static void check_events(int fd)
{
    int seen[NCASES] = { 0 }, left = (int) NCASES;
    long long deadline = tp_now_ms() + TP_EVENT_MS;
    char line[1024], err[200];
    while (left > 0 && tp_now_ms() < deadline) {
        long n = tp_read_line(fd, line, sizeof line, (int) (deadline - tp_now_ms()));
        if (n < 0)
            break;
        struct tj *v = tj_parse(line, (size_t) n, err, sizeof err);
        const char *ev = tj_str(v, "event");
        for (size_t i = 0; ev != NULL && strcmp(ev, "connect") == 0 && i < NCASES; i++)
            if (!seen[i] && tj_num(v, "client_id") == cases[i].id) {
                const char *got = tj_str(v, "client_name");
                ok(got != NULL && strcmp(got, cases[i].kept) == 0, "subscribe json: %s: the connect event's name",
                   cases[i].what);
                seen[i] = 1;
                left--;
            }
        tj_free(v);
    }
    is_int(0, left, "subscribe json: a connect event for every client");
}

/* Checks the JSON client list: each name parses back to the bytes the client gave. */
static void check_json(void)
{
    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", "list", "clients", NULL);
    struct tj *v = r.status == 0 ? tp_run_json(&r) : NULL;
    ok(v != NULL, "list clients json: exit 0, one valid JSON document");
    ok(text_is_clean("list clients json", r.out, r.out_len), "list clients json: no raw control character");
    const struct tj *clients = tj_get(v, "clients");
    for (size_t i = 0; i < NCASES; i++) {
        const char *got = NULL;
        for (size_t j = 0; clients != NULL && j < clients->count; j++)
            if (tj_num(tj_at(clients, j), "id") == cases[i].id)
                got = tj_str(tj_at(clients, j), "name");
        ok(got != NULL && strcmp(got, cases[i].kept) == 0, "list clients json: %s: the name as given", cases[i].what);
        if (got != NULL && strcmp(got, cases[i].kept) != 0) {
            char shown[4 * PCORE_NAME_MAX];
            pcore_utf8_escape(shown, sizeof shown, got, SIZE_MAX, 1);
            diag("got \"%s\"", shown);
        }
    }
    tj_free(v);
    tp_run_free(&r);
}

/* Returns the row of the text client table for client id (a pointer into out, up to its
 * newline), or NULL. */
static const char *table_row(const char *out, uint32_t id, size_t *len)
{
    char start[32];
    snprintf(start, sizeof start, "%4u ", (unsigned) id);
    for (const char *p = out; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p != NULL ? p + 1 : NULL)
        if (strncmp(p, start, strlen(start)) == 0) {
            *len = strcspn(p, "\n");
            return p;
        }
    return NULL;
}

/* Checks the text client table: names escaped, columns padded by characters. */
static void check_table(void)
{
    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "list", "clients", NULL);
    is_int(0, r.status, "list clients: exit 0");
    ok(text_is_clean("list clients", r.out, r.out_len), "list clients: well-formed UTF-8, no raw control character");
    for (size_t i = 0; i < NCASES; i++) {
        size_t len = 0;
        const char *row = table_row(r.out, cases[i].id, &len);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int) len, row != NULL ? row : "");
        ok(strstr(line, cases[i].table) != NULL, "list clients: %s: shown as '%s'", cases[i].what, cases[i].table);
    }
    tp_run_free(&r);
}

/* Checks the daemon's log: each client's connect line names it escaped, in quotes. */
static void check_log(void)
{
    for (size_t i = 0; i < NCASES; i++) {
        char needle[512];
        snprintf(needle, sizeof needle, "client %u (pid ", (unsigned) cases[i].id);
        int found = pagedd_log_wait(&daemon_, needle, TP_EVENT_MS);
        snprintf(needle, sizeof needle, "%s): connected", cases[i].logged);
        ok(found && pagedd_log_contains(&daemon_, needle), "log: %s: named %s", cases[i].what, cases[i].logged);
    }
    FILE *f = fopen(daemon_.log, "r");
    char *text = bcalloc(1, 1 << 20);
    size_t n = f != NULL ? fread(text, 1, (1 << 20) - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    ok(n > 0 && text_is_clean("log", text, n), "log: well-formed UTF-8, no raw control character");
    free(text);
}

/* Runs the checks against one daemon that logs at info. */
int main(void)
{
    tp_init(&daemon_);
    const char *const args[] = { "--threads", "1", "--log-level", "info", NULL };
    tp_start_daemon(&daemon_, args);
    char *const sub_argv[] = { tp_pactl, "-s", daemon_.socket, "-f", "json", "subscribe", NULL };
    struct tp_child sub = tp_spawn(sub_argv);
    int bad = 0;
    if (!tp_probe_subscription(daemon_.socket, sub.out, "names-probe", &bad, NULL))
        bail("the subscriber saw no connect event");

    struct tp_child holders[NCASES];
    struct rc_client raw[NCASES];
    for (size_t i = 0; i < NCASES; i++) {
        if (cases[i].raw)
            is_int(0, connect_raw(&cases[i], &raw[i]), "%s: welcomed", cases[i].what);
        else
            holders[i] = tp_start_holder(daemon_.socket, cases[i].given, "t1", "0", "0", &cases[i].id);
    }
    check_events(sub.out);
    check_json();
    check_table();
    check_log();

    for (size_t i = 0; i < NCASES; i++) {
        if (cases[i].raw)
            rc_close(&raw[i]);
        else
            is_int(0, tp_stop_holder(&holders[i]), "holder %zu exits 0", i);
    }
    kill(sub.pid, SIGTERM);
    close(sub.in);
    close(sub.out);
    tp_reap(sub.pid, TP_RUN_MS);
    tp_stop_daemon(&daemon_);
    return 0;
}
