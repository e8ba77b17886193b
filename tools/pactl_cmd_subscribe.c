/* pactl_cmd_subscribe.c: pactl subscribe: print the daemon's events as they happen. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/core/utf8.h"
#include "tools/pactl_fmt.h"
#include "tools/pactl_json.h"
#include "tools/pactl.h"

/* Set by SIGINT and SIGTERM; the loop ends when it sees it. */
static volatile sig_atomic_t subscribe_stop;

/* Records that the user asked pactl to stop. */
static void subscribe_on_signal(int sig)
{
    (void) sig;
    subscribe_stop = 1;
}

/* Writes s (at most max bytes, stopping at a NUL) to stdout in double quotes, escaped as
 * pcore_utf8_escape does inside quotes: UTF-8 as it is, control characters and bytes that
 * are no UTF-8 as \xHH, \" and \\; so a name can neither move the terminal's cursor nor be
 * mistaken for the fields after it. */
static void print_quoted(const char *s, size_t max)
{
    char text[FMT_NAME_BUF];
    pcore_utf8_escape(text, sizeof text, s, max < PCORE_NAME_MAX ? max : PCORE_NAME_MAX, 1);
    printf("\"%s\"", text);
}

/* Prints an event of type name as a line of text: the same fields as its JSON form. */
static void event_text(const char *type, const struct pcore_msg_event *e)
{
    char when[FMT_BUF];
    printf("%s %-12s client %u pid %u name ", fmt_time(when, sizeof when, e->time_ns), type,
           (unsigned) e->client_id, (unsigned) e->pid);
    print_quoted(e->client_name, sizeof e->client_name);
    fputs(" pool ", stdout);
    print_quoted(e->pool, sizeof e->pool);
    printf(" count %u\n", (unsigned) e->count);
    fflush(stdout);
}

/* Prints an event of type name as a JSON object on its own line. */
static void event_json(const char *type, const struct pcore_msg_event *e)
{
    struct json j;
    json_init(&j, stdout);
    json_object_begin(&j, NULL);
    json_str(&j, "event", type);
    json_u64(&j, "time_ns", e->time_ns);
    json_u64(&j, "client_id", e->client_id);
    json_u64(&j, "pid", e->pid);
    json_strn(&j, "client_name", e->client_name, sizeof e->client_name);
    json_strn(&j, "pool", e->pool, sizeof e->pool);
    json_u64(&j, "count", e->count);
    json_end(&j);
}

/* Prints an event of type name in the chosen format. */
static void event_print(const struct pactl_ctx *ctx, const char *type, const struct pcore_msg_event *e)
{
    if (ctx->format == PACTL_FORMAT_JSON)
        event_json(type, e);
    else
        event_text(type, e);
}

/* Prints the daemon's shutdown notice as a last event, "shutdown", at the time it came,
 * with the fields of the others (about no client and no pool). */
static void event_shutdown(const struct pactl_ctx *ctx)
{
    struct pcore_msg_event e;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(&e, 0, sizeof e);
    e.time_ns = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
    event_print(ctx, "shutdown", &e);
}

/*
 * Waits for the socket with SIGINT and SIGTERM blocked except inside ppoll, so a signal
 * can never slip in between the check of the flag and the wait. Returns 1 when the socket
 * is readable, 0 when a signal asked to stop, -1 on error.
 */
static int subscribe_wait(int fd, const sigset_t *waitmask)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    for (;;) {
        if (subscribe_stop)
            return 0;
        int rc = ppoll(&p, 1, NULL, waitmask);
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
}

/* Prints events until interrupted or the daemon goes away; returns the exit status. */
static int subscribe_loop(struct pactl_ctx *ctx, const sigset_t *waitmask)
{
    char *cause = NULL;
    for (;;) {
        int rc = subscribe_wait(ctx->conn.fd, waitmask);
        if (rc == 0)
            return PACTL_EXIT_OK;
        if (rc < 0)
            return pactl_fail(pactl_cause("waiting for events: %s", strerror(errno)));
        size_t len;
        const struct pcore_msg_hdr *h = pactl_conn_recv(&ctx->conn, 0, &len, &cause);
        if (h == NULL)
            return pactl_fail(cause);
        if (h->type == PCORE_MSG_SHUTDOWN) {
            event_shutdown(ctx);
            return PACTL_EXIT_OK;
        }
        if (h->type != PCORE_MSG_EVENT)
            continue;
        if (len < sizeof(struct pcore_msg_event))
            return pactl_fail(pactl_cause("malformed event from the daemon (%zu bytes)", len));
        const struct pcore_msg_event *e = (const struct pcore_msg_event *) h;
        event_print(ctx, fmt_event(e->event), e);
        if (ferror(stdout))
            return pactl_finish_output();
    }
}

/* Runs "subscribe"; returns the exit status. */
static int subscribe_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    (void) argc;
    (void) argv;
    /* Without -a the bare header (flags 0), which a daemon that predates the flags takes too. */
    struct pcore_msg_subscribe req = { .hdr.type = PCORE_MSG_SUBSCRIBE,
                                       .flags = ctx->all ? PCORE_SUBSCRIBE_INSPECT : 0 };
    size_t req_len = ctx->all ? sizeof req : sizeof req.hdr;
    struct sigaction sa;
    sigset_t block, waitmask;
    char *cause = NULL;
    size_t len;

    /* Signals stay blocked outside ppoll from before the request, so none is lost. */
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &waitmask);
    sigdelset(&waitmask, SIGINT);
    sigdelset(&waitmask, SIGTERM);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = subscribe_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    if (pactl_connect(ctx) < 0)
        return PACTL_EXIT_FAIL;
    if (pactl_conn_call(&ctx->conn, &req, req_len, PCORE_MSG_OK, sizeof req.hdr, &len,
                        &cause) == NULL)
        return pactl_fail(cause);
    return subscribe_loop(ctx, &waitmask);
}

const struct pactl_cmd pactl_cmd_subscribe = {
    .name = "subscribe",
    .options = "a",
    .args = "",
    .summary = "print events as they happen (-a: pactl's own connections too)",
    .min_args = 0,
    .max_args = 0,
    .exec = subscribe_exec,
};
