/* pactl.h: pactl's command table entry and the context every command runs with. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_PACTL_PACTL_H
#define PAGED_TOOLS_PACTL_PACTL_H

#include "tools/pactl_conn.h"

/* Exit statuses: as documented in pactl(1). */
#define PACTL_EXIT_OK 0
#define PACTL_EXIT_FAIL 1
#define PACTL_EXIT_USAGE 2

enum pactl_format {
    PACTL_FORMAT_TEXT,
    PACTL_FORMAT_JSON,
};

/* What a command runs with: the options and, once pactl_connect succeeds, the connection. */
struct pactl_ctx {
    const char *socket_path;
    enum pactl_format format;
    int all;                      /* -a: subscribe shows inspection connections too */
    int blocks;                   /* -b: subscribe shows block events too */
    int connected;
    struct pactl_conn conn;
};

/*
 * One command. exec gets the command's own arguments (argv[0] is the first argument after
 * the command's name; pactl's options, before or after the command, taken out), already
 * checked against min_args and max_args; it checks their values before it connects, and
 * returns an exit status: PACTL_EXIT_USAGE makes pactl print the command's usage line after
 * whatever exec printed.
 */
struct pactl_cmd {
    const char *name;
    const char *options;          /* the letters of the command options it takes ("a"), or "" */
    const char *args;             /* the arguments, as the usage line shows them */
    const char *needs;            /* what a call without its arguments lacks ("a pool name"),
                                   * where min_args > 0 */
    const char *summary;          /* one line for the help text */
    int min_args;
    int max_args;
    int (*exec)(struct pactl_ctx *ctx, int argc, char **argv);
};

extern const struct pactl_cmd pactl_cmd_status;
extern const struct pactl_cmd pactl_cmd_list;
extern const struct pactl_cmd pactl_cmd_info;
extern const struct pactl_cmd pactl_cmd_stat;
extern const struct pactl_cmd pactl_cmd_subscribe;
extern const struct pactl_cmd pactl_cmd_kill_client;
extern const struct pactl_cmd pactl_cmd_evict;
extern const struct pactl_cmd pactl_cmd_destroy;
extern const struct pactl_cmd pactl_cmd_pin;
extern const struct pactl_cmd pactl_cmd_unpin;
extern const struct pactl_cmd pactl_cmd_ttl;
extern const struct pactl_cmd pactl_cmd_peers;
extern const struct pactl_cmd pactl_cmd_devices;

/* Connects ctx to the daemon. Returns 0, or prints why not and returns -1. */
int pactl_connect(struct pactl_ctx *ctx);

/* Prints "pactl: CAUSE" on stderr, frees cause, and returns PACTL_EXIT_FAIL. */
int pactl_fail(char *cause);

/* Prints "pactl: MESSAGE" on stderr and returns PACTL_EXIT_USAGE. */
int pactl_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Finishes standard output: returns PACTL_EXIT_OK, or PACTL_EXIT_FAIL after saying why if
 * writing it failed (a full disk, a closed pipe). */
int pactl_finish_output(void);

#endif
