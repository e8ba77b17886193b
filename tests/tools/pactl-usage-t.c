/* pactl-usage-t.c: pactl's usage messages, options before and after the command, one wording for a missing pool. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"
#include "tests/tools/tpactl.h"

/* The daemon the checks that connect talk to. */
static struct pagedd daemon_;

/* One bad call: its arguments (NULL-terminated) and the first line pactl must print. */
struct usage_case {
    const char *args[5];
    const char *says;
    int command_line;   /* the usage line is the command's ("usage: ... status"), not the general one */
};

static const struct usage_case cases[] = {
    { { "status", "extra" }, "pactl: status takes no arguments", 1 },
    { { "stat", "-f", "json", "extra" }, "pactl: stat takes no arguments", 1 },
    { { "info" }, "pactl: info needs a pool name", 1 },
    { { "info", "a", "b" }, "pactl: info takes one argument, a pool name", 1 },
    { { "kill-client" }, "pactl: kill-client needs a client id", 1 },
    { { "destroy" }, "pactl: destroy needs a pool name", 1 },
    { { "list", "blocks", "t1", "x" }, "pactl: list takes at most 2 arguments: [pools | clients | blocks [pool]]", 1 },
    { { "list", "frob" }, "pactl: list: unknown kind 'frob' (pools, clients or blocks)", 1 },
    { { "kill-client", "x1" }, "pactl: kill-client: 'x1' is not a client id", 1 },
    { { "-a", "status" }, "pactl: -a (--all) is an option of subscribe, not of status", 1 },
    { { "--bogus", "status" }, "pactl: unknown option --bogus", 0 },
    { { "status", "-x" }, "pactl: unknown option -x", 0 },
    { { "status", "-s" }, "pactl: option -s needs an argument", 0 },
    { { "-f", "xml", "status" }, "pactl: unknown format 'xml' (text or json)", 0 },
    { { "frob" }, "pactl: unknown command 'frob'", 0 },
    { { NULL }, "pactl: no command given", 0 },
};

/* Counts the lines of text. */
static size_t count_lines(const char *text)
{
    size_t n = 0;
    for (const char *s = text; (s = strchr(s, '\n')) != NULL; s++)
        n++;
    return n;
}

/* Checks every bad call: exit 2, nothing on stdout, the message and one usage line on stderr. */
static void test_usage(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct usage_case *c = &cases[i];
        struct tp_run r;
        tp_run_pactl(&r, "-s", daemon_.socket, c->args[0], c->args[1], c->args[2], c->args[3], NULL);
        char want[256];
        snprintf(want, sizeof want, "%s\nusage: pactl [-s socket] [-f text|json] ", c->says);
        const char *usage = strchr(r.err, '\n');
        int usage_right = usage != NULL
                          && (c->command_line ? strstr(usage, "command [argument") == NULL
                                              : strstr(usage, "command [argument ...] (pactl -h") != NULL);
        ok(r.status == 2 && r.out_len == 0 && strncmp(r.err, want, strlen(want)) == 0
               && count_lines(r.err) == 2 && usage_right,
           "%s %s: exit 2, '%s' and one %s usage line", c->args[0] ? c->args[0] : "(nothing)",
           c->args[0] && c->args[1] ? c->args[1] : "", c->says, c->command_line ? "command's" : "general");
        if (r.status != 2 || count_lines(r.err) != 2)
            diag("exit %d, stderr: %s", r.status, r.err);
        tp_run_free(&r);
    }
    struct tp_run r;
    tp_run_pactl(&r, "-h", NULL);
    ok(r.status == 0 && strstr(r.out, "kill-client") != NULL && strstr(r.out, "destroy pool") != NULL
           && r.err_len == 0, "-h: the whole help on stdout, exit 0");
    tp_run_free(&r);
}

/* Checks options after the command, and "--" ending them. */
static void test_options_after(void)
{
    struct tp_run r;
    tp_run_pactl(&r, "status", "-f", "json", "-s", daemon_.socket, NULL);
    struct tj *v = r.status == 0 ? tp_run_json(&r) : NULL;
    ok(v != NULL && tj_str(v, "backend") != NULL, "status -f json -s SOCKET: options after the command apply");
    tj_free(v);
    tp_run_free(&r);
    tp_run_pactl(&r, "-s", daemon_.socket, "list", "--format=json", "pools", NULL);
    v = r.status == 0 ? tp_run_json(&r) : NULL;
    ok(v != NULL && tj_get(v, "pools") != NULL, "list --format=json pools: an option between the arguments");
    tj_free(v);
    tp_run_free(&r);
    tp_run_pactl(&r, "-s", daemon_.socket, "info", "--", "-x", NULL);
    ok(r.status == 1 && strcmp(r.err, "pactl: no such pool '-x'\n") == 0,
       "info -- -x: after --, -x is the pool's name (%.*s)", (int) strcspn(r.err, "\n"), r.err);
    tp_run_free(&r);
}

/* Checks that every command that names a missing pool says it in the same words. */
static void test_no_such_pool(void)
{
    static const char *const cmds[][2] = { { "info", NULL }, { "list", "blocks" }, { "evict", NULL },
                                           { "destroy", NULL } };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        struct tp_run r;
        if (cmds[i][1] != NULL)
            tp_run_pactl(&r, "-s", daemon_.socket, cmds[i][0], cmds[i][1], "nosuch", NULL);
        else
            tp_run_pactl(&r, "-s", daemon_.socket, cmds[i][0], "nosuch", NULL);
        ok(r.status == 1 && r.out_len == 0 && strcmp(r.err, "pactl: no such pool 'nosuch'\n") == 0,
           "%s %s of a missing pool: exit 1, \"pactl: no such pool 'nosuch'\"", cmds[i][0],
           cmds[i][1] != NULL ? cmds[i][1] : "");
        if (r.status != 1)
            diag("exit %d, stderr: %s", r.status, r.err);
        tp_run_free(&r);
    }
}

/* Runs the checks against one daemon. */
int main(void)
{
    tp_init(&daemon_);
    const char *const args[] = { "--threads", "1", "--log-level", "warning", NULL };
    tp_start_daemon(&daemon_, args);

    test_usage();
    test_options_after();
    test_no_such_pool();

    tp_stop_daemon(&daemon_);
    return 0;
}
