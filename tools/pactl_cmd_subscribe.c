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

/* Returns the name of a block event's action, as pactl prints it. */
static const char *block_action_name(uint32_t action)
{
    switch (action) {
    case PAGED_BLOCK_STORED: return "stored";
    case PAGED_BLOCK_OFFLOADED: return "offloaded";
    case PAGED_BLOCK_RELOADED: return "reloaded";
    case PAGED_BLOCK_REMOVED: return "removed";
    default: return "unknown";
    }
}

/* Returns the name of a block event's tier, as pactl prints it. */
static const char *block_tier_name(uint32_t tier)
{
    switch (tier) {
    case PAGED_TIER_POOL: return "pool";
    case PAGED_TIER_HOST: return "host";
    case PAGED_TIER_FILE: return "file";
    default: return "unknown";
    }
}

/* Prints one entry of a BLOCKS event e as a line of text: the time, "blocks", the pool, the
 * action, the tier, the tenant (a uid, or "shared") and the hash. */
static void block_text(const struct pcore_msg_event *e, const struct pcore_block_entry *b)
{
    char when[FMT_BUF], hash[FMT_BUF], tenant[16];
    if (b->tenant == UINT32_MAX)
        snprintf(tenant, sizeof tenant, "shared");
    else
        snprintf(tenant, sizeof tenant, "%u", (unsigned) b->tenant);
    printf("%s %-12s pool ", fmt_time(when, sizeof when, e->time_ns), "blocks");
    print_quoted(e->pool, sizeof e->pool);
    printf(" action %s tier %s tenant %s hash %s\n", block_action_name(b->action), block_tier_name(b->tier),
           tenant, fmt_hash(hash, sizeof hash, &b->hash));
}

/* Prints one entry of a BLOCKS event e as a JSON object on its own line; tenant is null for
 * a pool's shared prefix scope. */
static void block_json(const struct pcore_msg_event *e, const struct pcore_block_entry *b)
{
    char hash[FMT_BUF];
    struct json j;
    json_init(&j, stdout);
    json_object_begin(&j, NULL);
    json_str(&j, "event", "blocks");
    json_u64(&j, "time_ns", e->time_ns);
    json_strn(&j, "pool", e->pool, sizeof e->pool);
    json_str(&j, "action", block_action_name(b->action));
    json_str(&j, "tier", block_tier_name(b->tier));
    if (b->tenant == UINT32_MAX)
        json_null(&j, "tenant");
    else
        json_u64(&j, "tenant", b->tenant);
    json_str(&j, "hash", fmt_hash(hash, sizeof hash, &b->hash));
    json_end(&j);
}

/* Prints a BLOCKS event of len bytes, one line per entry. Returns 0, or -1 when its count
 * and length disagree. */
static int blocks_print(const struct pactl_ctx *ctx, const struct pcore_msg_event *e, size_t len)
{
    const size_t fixed = sizeof *e;
    if (e->count > PCORE_EVENT_MAX_BLOCKS || len != fixed + (size_t) e->count * sizeof(struct pcore_block_entry))
        return -1;
    for (uint32_t i = 0; i < e->count; i++) {
        struct pcore_block_entry b;
        memcpy(&b, (const unsigned char *) e + fixed + (size_t) i * sizeof b, sizeof b);
        if (ctx->format == PACTL_FORMAT_JSON)
            block_json(e, &b);
        else
            block_text(e, &b);
    }
    fflush(stdout);
    return 0;
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
        if (e->event == PCORE_EVENT_BLOCKS) {
            if (blocks_print(ctx, e, len) < 0)
                return pactl_fail(pactl_cause("malformed blocks event from the daemon (%zu bytes, %u entries)",
                                              len, (unsigned) e->count));
        } else
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
    /* Without options the bare header (flags 0), which a daemon that predates the flags takes too. */
    struct pcore_msg_subscribe req = { .hdr.type = PCORE_MSG_SUBSCRIBE,
                                       .flags = (ctx->all ? PCORE_SUBSCRIBE_INSPECT : 0)
                                                | (ctx->blocks ? PCORE_SUBSCRIBE_BLOCKS : 0) };
    size_t req_len = req.flags != 0 ? sizeof req : sizeof req.hdr;
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
    .options = "ab",
    .args = "",
    .summary = "print events as they happen (-a: pactl's own connections too; -b: prefix blocks)",
    .min_args = 0,
    .max_args = 0,
    .exec = subscribe_exec,
};
