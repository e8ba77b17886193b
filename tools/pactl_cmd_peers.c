/* pactl_cmd_peers.c: pactl peers: the daemon's peer daemons, their state and what was fetched from them. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "tools/pactl_fetch.h"
#include "tools/pactl_fmt.h"
#include "tools/pactl_json.h"
#include "tools/pactl.h"

/* Returns the state of peer p as pactl shows it: "connecting", "authenticated" or "failed". */
static const char *state_name(const struct pcore_peer_item *p)
{
    return p->state == PCORE_PEER_AUTHENTICATED ? "authenticated" : p->state == PCORE_PEER_FAILED ? "failed"
                                                                                                 : "connecting";
}

/* Returns the rate of p's fetches in GB/s (bytes over the time the fetches took), 0 without any. */
static double rate_gbs(const struct pcore_peer_item *p)
{
    return p->fetch_ns != 0 ? (double) p->bytes / (double) p->fetch_ns : 0.0;
}

/* Prints peer p as a JSON object of j. Returns nothing. */
static void peer_json(struct json *j, const struct pcore_peer_item *p)
{
    json_object_begin(j, NULL);
    json_strn(j, "address", p->addr, sizeof p->addr);
    json_str(j, "direction", p->outgoing ? "outgoing" : "incoming");
    json_str(j, "state", state_name(p));
    if (p->state == PCORE_PEER_FAILED)
        json_strn(j, "why", p->why, sizeof p->why);
    else
        json_null(j, "why");
    json_u64(j, "blocks_fetched", p->blocks);
    json_u64(j, "bytes_fetched", p->bytes);
    json_u64(j, "fetch_ns", p->fetch_ns);
    json_u64(j, "fetches", p->fetches);
    json_u64(j, "failures", p->failures);
    json_u64(j, "auth_failures", p->auth_failures);
    json_u64(j, "blocks_served", p->served_blocks);
    json_strn(j, "transports", p->transports, sizeof p->transports);
    json_bool(j, "tcp_only", p->tcp_only != 0);
    json_end(j);
}

/* Prints peer p as one row of the text table. Returns nothing. */
static void peer_row(const struct pcore_peer_item *p)
{
    char addr[96], why[160], bytes[32], over[112];
    fmt_safe(addr, sizeof addr, p->addr, sizeof p->addr);
    fmt_bytes(bytes, sizeof bytes, p->bytes);
    printf("%-24s %-8s %10llu %10s %7.2f %8llu %8llu  %s", addr, p->outgoing ? "out" : "in",
           (unsigned long long) p->blocks, bytes, rate_gbs(p), (unsigned long long) p->fetches,
           (unsigned long long) (p->failures + p->auth_failures), state_name(p));
    if (p->state == PCORE_PEER_FAILED)
        printf(": %s", fmt_safe(why, sizeof why, p->why, sizeof p->why));
    else if (p->transports[0] != '\0')
        printf(" over %s%s", fmt_safe(over, sizeof over, p->transports, sizeof p->transports),
               p->tcp_only ? " (TCP only)" : "");
    printf("\n");
}

/* Runs "peers"; returns the exit status. */
static int peers_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    (void) argc, (void) argv;
    char *cause = NULL;
    if (pactl_connect(ctx) < 0)
        return PACTL_EXIT_FAIL;
    struct pactl_list l;
    if (pactl_fetch_list(&ctx->conn, PCORE_LIST_PEERS, NULL, &l, &cause) < 0)
        return pactl_fail(cause);
    const struct pcore_peer_item *p = l.items;
    if (ctx->format == PACTL_FORMAT_JSON) {
        struct json j;
        json_init(&j, stdout);
        json_object_begin(&j, NULL);
        json_array_begin(&j, "peers");
        for (size_t i = 0; i < l.count; i++)
            peer_json(&j, &p[i]);
        json_end(&j);
        json_end(&j);
    } else {
        printf("%-24s %-8s %10s %10s %7s %8s %8s  %s\n", "ADDRESS", "DIR", "BLOCKS", "BYTES", "GB/S", "FETCHES",
               "FAILURES", "STATE");
        for (size_t i = 0; i < l.count; i++)
            peer_row(&p[i]);
    }
    pactl_list_free(&l);
    return PACTL_EXIT_OK;
}

const struct pactl_cmd pactl_cmd_peers = {
    .name = "peers",
    .options = "",
    .args = "",
    .summary = "the daemon's peer daemons: state, blocks fetched, rate, failures",
    .min_args = 0,
    .max_args = 0,
    .exec = peers_exec,
};
