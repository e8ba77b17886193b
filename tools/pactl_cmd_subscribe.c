/* pactl_cmd_subscribe.c: pactl subscribe: print the daemon's events as they happen. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

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

/* Prints one event as a line of text. */
static void event_text(const struct pcore_msg_event *e)
{
    char when[FMT_BUF], who[PCORE_NAME_MAX + 64], name[PCORE_NAME_MAX], pool[PCORE_NAME_MAX];
    fmt_safe(name, sizeof name, e->client_name, sizeof e->client_name);
    fmt_safe(pool, sizeof pool, e->pool, sizeof e->pool);
    snprintf(who, sizeof who, "client %u (pid %u, %s)", (unsigned) e->client_id,
             (unsigned) e->pid, name[0] != '\0' ? name : "unnamed");
    printf("%s %-12s ", fmt_time(when, sizeof when, e->time_ns), fmt_event(e->event));
    switch (e->event) {
    case PCORE_EVENT_CONNECT:
    case PCORE_EVENT_DISCONNECT:
        printf("%s\n", who);
        break;
    case PCORE_EVENT_POOL_CREATE:
    case PCORE_EVENT_POOL_DESTROY:
        printf("pool '%s' by %s\n", pool, who);
        break;
    case PCORE_EVENT_ATTACH:
    case PCORE_EVENT_DETACH:
        printf("pool '%s', %s\n", pool, who);
        break;
    case PCORE_EVENT_EVICT:
        printf("pool '%s', %u cached blocks\n", pool, (unsigned) e->count);
        break;
    case PCORE_EVENT_LOST:
        printf("%u events missed: they came faster than this reader took them\n", (unsigned) e->count);
        break;
    default:
        printf("%s, pool '%s', count %u\n", who, pool, (unsigned) e->count);
        break;
    }
    fflush(stdout);
}

/* Prints one event as a JSON object on its own line. */
static void event_json(const struct pcore_msg_event *e)
{
    struct json j;
    json_init(&j, stdout);
    json_object_begin(&j, NULL);
    json_str(&j, "event", fmt_event(e->event));
    json_u64(&j, "time_ns", e->time_ns);
    json_u64(&j, "client_id", e->client_id);
    json_u64(&j, "pid", e->pid);
    json_strn(&j, "client_name", e->client_name, sizeof e->client_name);
    json_strn(&j, "pool", e->pool, sizeof e->pool);
    json_u64(&j, "count", e->count);
    json_end(&j);
}

/* Prints the daemon's shutdown notice in the chosen format. */
static void event_shutdown(const struct pactl_ctx *ctx)
{
    if (ctx->format == PACTL_FORMAT_JSON) {
        struct json j;
        json_init(&j, stdout);
        json_object_begin(&j, NULL);
        json_str(&j, "event", "shutdown");
        json_end(&j);
    } else {
        printf("daemon shutting down\n");
        fflush(stdout);
    }
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
        if (ctx->format == PACTL_FORMAT_JSON)
            event_json((const struct pcore_msg_event *) h);
        else
            event_text((const struct pcore_msg_event *) h);
        if (ferror(stdout))
            return pactl_finish_output();
    }
}

/* Runs "subscribe"; returns the exit status. */
static int subscribe_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    (void) argc;
    (void) argv;
    struct pcore_msg_hdr req = { .type = PCORE_MSG_SUBSCRIBE };
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
    if (pactl_conn_call(&ctx->conn, &req, sizeof req, PCORE_MSG_OK, sizeof req, &len,
                        &cause) == NULL)
        return pactl_fail(cause);
    return subscribe_loop(ctx, &waitmask);
}

const struct pactl_cmd pactl_cmd_subscribe = {
    .name = "subscribe",
    .args = "",
    .summary = "print events as they happen, until interrupted",
    .min_args = 0,
    .max_args = 0,
    .exec = subscribe_exec,
};
