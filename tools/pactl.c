/* pactl.c: pactl, the control utility of pagedd: options, the command table, main. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/sock.h"
#include "paged.h"
#include "tools/pactl.h"

/* Every command pactl knows, in the order the help text lists them. */
static const struct pactl_cmd *const pactl_cmds[] = {
    &pactl_cmd_status,
    &pactl_cmd_devices,
    &pactl_cmd_list,
    &pactl_cmd_info,
    &pactl_cmd_stat,
    &pactl_cmd_subscribe,
    &pactl_cmd_kill_client,
    &pactl_cmd_evict,
    &pactl_cmd_pin,
    &pactl_cmd_unpin,
    &pactl_cmd_ttl,
    &pactl_cmd_peers,
    &pactl_cmd_destroy,
};
#define PACTL_NUM_CMDS (sizeof pactl_cmds / sizeof pactl_cmds[0])

/* The usage line pactl prints after a usage error that is not about one command. */
#define USAGE_LINE "usage: pactl [-s socket] [-f text|json] command [argument ...] (pactl -h lists the commands)\n"

/* Prints the usage line of one command to fp. */
static void usage_cmd(FILE *fp, const struct pactl_cmd *cmd)
{
    fprintf(fp, "usage: pactl [-s socket] [-f text|json] %s%s%s%s%s%s\n", cmd->name,
            cmd->options[0] != '\0' ? " [-" : "", cmd->options, cmd->options[0] != '\0' ? "]" : "",
            cmd->args[0] != '\0' ? " " : "", cmd->args);
}

/* Prints the whole usage text to fp. */
static void usage(FILE *fp)
{
    fputs("usage: pactl [-s socket] [-f text|json] command [argument ...]\n"
          "       pactl -h | -V\n"
          "\n"
          "Options (before or after the command):\n"
          "  -s, --socket PATH     the daemon's socket (default: $PAGED_SOCKET,\n"
          "                        $XDG_RUNTIME_DIR/paged/pagedd.sock, /run/paged/pagedd.sock)\n"
          "  -f, --format FORMAT   text (default) or json\n"
          "  -a, --all             subscribe: show pactl's own connections too\n"
          "  -b, --blocks          subscribe: show what happens to each prefix block too\n"
          "  -h, --help            print this help and exit\n"
          "  -V, --version         print pactl's version and exit\n"
          "\n"
          "Commands:\n", fp);
    for (size_t i = 0; i < PACTL_NUM_CMDS; i++) {
        char head[64];
        snprintf(head, sizeof head, "%s%s%s%s %s", pactl_cmds[i]->name,
                 pactl_cmds[i]->options[0] != '\0' ? " [-" : "", pactl_cmds[i]->options,
                 pactl_cmds[i]->options[0] != '\0' ? "]" : "", pactl_cmds[i]->args);
        /* A long synopsis gets its own line so the summaries stay in one column. */
        if (strlen(head) > 20)
            fprintf(fp, "  %s\n  %-20s %s\n", head, "", pactl_cmds[i]->summary);
        else
            fprintf(fp, "  %-20s %s\n", head, pactl_cmds[i]->summary);
    }
}

/*
 * Says what is wrong with nargs arguments to cmd, as "pactl: status takes no arguments",
 * "pactl: info needs a pool name", then the command's usage line; returns PACTL_EXIT_USAGE.
 */
static int args_error(const struct pactl_cmd *cmd, int nargs)
{
    if (nargs < cmd->min_args)
        fprintf(stderr, "pactl: %s needs %s\n", cmd->name, cmd->needs != NULL ? cmd->needs : "more arguments");
    else if (cmd->max_args == 0)
        fprintf(stderr, "pactl: %s takes no arguments\n", cmd->name);
    else if (cmd->max_args == 1)
        fprintf(stderr, "pactl: %s takes one argument, %s\n", cmd->name,
                cmd->needs != NULL ? cmd->needs : cmd->args);
    else
        fprintf(stderr, "pactl: %s takes at most %d arguments: %s\n", cmd->name, cmd->max_args, cmd->args);
    usage_cmd(stderr, cmd);
    return PACTL_EXIT_USAGE;
}

/* Prints "pactl: CAUSE" and frees it; returns PACTL_EXIT_FAIL. */
int pactl_fail(char *cause)
{
    fprintf(stderr, "pactl: %s\n", cause);
    free(cause);
    return PACTL_EXIT_FAIL;
}

/* Prints "pactl: MESSAGE" (fmt formatted with ap) on a line of stderr. */
static void complain(const char *fmt, va_list ap)
{
    fputs("pactl: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

/* Prints a usage complaint; returns PACTL_EXIT_USAGE. */
int pactl_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    complain(fmt, ap);
    va_end(ap);
    return PACTL_EXIT_USAGE;
}

/* Prints "pactl: MESSAGE" and the general usage line to stderr; returns PACTL_EXIT_USAGE. */
static int __attribute__((format(printf, 1, 2))) usage_line_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    complain(fmt, ap);
    va_end(ap);
    fputs(USAGE_LINE, stderr);
    return PACTL_EXIT_USAGE;
}

/* Connects the context to its daemon; returns 0, or -1 after printing why not. */
int pactl_connect(struct pactl_ctx *ctx)
{
    char *cause = NULL;
    if (pactl_conn_open(&ctx->conn, ctx->socket_path, &cause) < 0) {
        pactl_conn_close(&ctx->conn);
        pactl_fail(cause);
        return -1;
    }
    ctx->connected = 1;
    return 0;
}

/* Flushes standard output; returns PACTL_EXIT_OK or PACTL_EXIT_FAIL with a message. */
int pactl_finish_output(void)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "pactl: writing the output: %s\n", strerror(errno));
        return PACTL_EXIT_FAIL;
    }
    return PACTL_EXIT_OK;
}

/* Returns the command called name, or NULL. */
static const struct pactl_cmd *find_cmd(const char *name)
{
    for (size_t i = 0; i < PACTL_NUM_CMDS; i++)
        if (strcmp(pactl_cmds[i]->name, name) == 0)
            return pactl_cmds[i];
    return NULL;
}

/* Parses the options (before or after the command), finds the command and runs it; returns
 * the exit status. */
int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "socket", required_argument, NULL, 's' },
        { "format", required_argument, NULL, 'f' },
        { "all", no_argument, NULL, 'a' },
        { "blocks", no_argument, NULL, 'b' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    struct pactl_ctx ctx = { .format = PACTL_FORMAT_TEXT };
    char defpath[128];
    int opt;

    ctx.conn.fd = -1;
    /* getopt moves the options after the command ahead of it; "--" ends them, for an
     * argument that starts with '-'. The leading ':' tells a missing argument apart. */
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":s:f:abhV", longopts, NULL)) != -1) {
        switch (opt) {
        case 's':
            ctx.socket_path = optarg;
            break;
        case 'f':
            if (strcmp(optarg, "text") == 0)
                ctx.format = PACTL_FORMAT_TEXT;
            else if (strcmp(optarg, "json") == 0)
                ctx.format = PACTL_FORMAT_JSON;
            else
                return usage_line_error("unknown format '%s' (text or json)", optarg);
            break;
        case 'a':
            ctx.all = 1;
            break;
        case 'b':
            ctx.blocks = 1;
            break;
        case 'h':
            usage(stdout);
            return pactl_finish_output();
        case 'V':
            printf("pactl (paged) %s\n", PACKAGE_VERSION);
            return pactl_finish_output();
        case ':':
            return usage_line_error("option %s needs an argument", argv[optind - 1]);
        default:
            if (optopt != 0)
                return usage_line_error("unknown option -%c", optopt);
            return usage_line_error("unknown option %s", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return usage_line_error("no command given");
    const struct pactl_cmd *cmd = find_cmd(argv[optind]);
    if (cmd == NULL)
        return usage_line_error("unknown command '%s'", argv[optind]);
    if (ctx.all && strchr(cmd->options, 'a') == NULL) {
        fprintf(stderr, "pactl: -a (--all) is an option of subscribe, not of %s\n", cmd->name);
        usage_cmd(stderr, cmd);
        return PACTL_EXIT_USAGE;
    }
    if (ctx.blocks && strchr(cmd->options, 'b') == NULL) {
        fprintf(stderr, "pactl: -b (--blocks) is an option of subscribe, not of %s\n", cmd->name);
        usage_cmd(stderr, cmd);
        return PACTL_EXIT_USAGE;
    }
    int nargs = argc - optind - 1;
    if (nargs < cmd->min_args || nargs > cmd->max_args)
        return args_error(cmd, nargs);
    if (ctx.socket_path == NULL) {
        if (pcore_sock_client_path(defpath, sizeof defpath) < 0) {
            fputs("pactl: the default socket path is too long (set -s or $PAGED_SOCKET)\n",
                  stderr);
            return PACTL_EXIT_FAIL;
        }
        ctx.socket_path = defpath;
    }

    int rc = cmd->exec(&ctx, nargs, argv + optind + 1);
    if (rc == PACTL_EXIT_USAGE)
        usage_cmd(stderr, cmd);
    if (ctx.connected)
        pactl_conn_close(&ctx.conn);
    if (rc == PACTL_EXIT_OK)
        rc = pactl_finish_output();
    return rc;
}
