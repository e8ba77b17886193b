/* pactl_cmd_stat.c: pactl stat: per-op request counts, errors, volume and service latency; the engine's batching. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>

#include "lib/core/names.h"
#include "tools/pactl_fetch.h"
#include "tools/pactl_fmt.h"
#include "tools/pactl_json.h"
#include "tools/pactl.h"

/* Returns a / b, or 0 when b is 0. */
static double ratio(uint64_t a, uint64_t b)
{
    return b != 0 ? (double) a / (double) b : 0.0;
}

/* Prints what the engine did: batches, launches, time in the backend, merging. */
static void engine_text(const struct pcore_engine_stats *e)
{
    char backend[FMT_BUF], wait[FMT_BUF], gather[FMT_BUF];
    printf("\nengine\n");
    printf("  batches            %" PRIu64 " (%.2f launches each, %s in the backend, %s of it waiting for "
           "the device)\n", e->batches, ratio(e->launches, e->batches),
           e->batches ? fmt_latency(backend, sizeof backend, e->backend_ns / e->batches) : "-",
           e->batches ? fmt_latency(wait, sizeof wait, e->device_wait_ns / e->batches) : "-");
    printf("  with a DECODE      %" PRIu64 " (%.2f DECODEs of %.2f clients each, %s gathering)\n",
           e->decode_batches, ratio(e->decode_requests, e->decode_batches),
           ratio(e->decode_clients, e->decode_batches),
           e->decode_batches ? fmt_latency(gather, sizeof gather, e->gather_ns / e->decode_batches) : "-");
    printf("  completed early    %" PRIu64 " (queued on the device, every request signalling)\n",
           e->early_batches);
    printf("  merged DECODEs     %" PRIu64 " of %" PRIu64 " in %" PRIu64 " launches\n",
           e->merged_decode_requests, e->decode_requests, e->merged_decode_launches);
    printf("  merged APPENDs     %" PRIu64 " of %" PRIu64 " in %" PRIu64 " launches\n",
           e->merged_append_requests, e->append_requests, e->merged_append_launches);
}

/* Adds the engine's counters to the JSON object being written. */
static void engine_json(struct json *j, const struct pcore_engine_stats *e)
{
    json_object_begin(j, "engine");
    json_u64(j, "batches", e->batches);
    json_u64(j, "launches", e->launches);
    json_u64(j, "decode_batches", e->decode_batches);
    json_u64(j, "decode_requests", e->decode_requests);
    json_u64(j, "decode_clients", e->decode_clients);
    json_u64(j, "merged_decode_launches", e->merged_decode_launches);
    json_u64(j, "merged_decode_requests", e->merged_decode_requests);
    json_u64(j, "append_requests", e->append_requests);
    json_u64(j, "merged_append_launches", e->merged_append_launches);
    json_u64(j, "merged_append_requests", e->merged_append_requests);
    json_u64(j, "backend_ns", e->backend_ns);
    json_u64(j, "device_wait_ns", e->device_wait_ns);
    json_u64(j, "gather_ns", e->gather_ns);
    json_u64(j, "early_batches", e->early_batches);
    json_end(j);
}

/* Prints one row per op. */
static void stat_text(const struct pcore_msg_stats_reply *s)
{
    char bytes[FMT_BUF], p50[FMT_BUF], p99[FMT_BUF];
    printf("%-8s %10s %8s %12s %12s %10s %10s\n", "OP", "REQUESTS", "ERRORS", "TOKENS", "BYTES",
           "P50", "P99");
    for (uint32_t i = 0; i < s->num_ops; i++) {
        const struct pcore_op_stats *o = &s->ops[i];
        int seen = o->requests > 0;
        printf("%-8s %10" PRIu64 " %8" PRIu64 " %12" PRIu64 " %12s %10s %10s\n", pcore_op_name(i),
               o->requests, o->errors, o->tokens, fmt_bytes(bytes, sizeof bytes, o->bytes),
               seen ? fmt_latency(p50, sizeof p50, o->latency_p50_ns) : "-",
               seen ? fmt_latency(p99, sizeof p99, o->latency_p99_ns) : "-");
    }
    engine_text(&s->engine);
}

/* Prints an object with one member per op. */
static void stat_json(const struct pcore_msg_stats_reply *s)
{
    struct json j;
    json_init(&j, stdout);
    json_object_begin(&j, NULL);
    json_object_begin(&j, "ops");
    for (uint32_t i = 0; i < s->num_ops; i++) {
        const struct pcore_op_stats *o = &s->ops[i];
        json_object_begin(&j, pcore_op_name(i));
        json_u64(&j, "requests", o->requests);
        json_u64(&j, "errors", o->errors);
        json_u64(&j, "tokens", o->tokens);
        json_u64(&j, "bytes", o->bytes);
        json_u64(&j, "latency_p50_ns", o->latency_p50_ns);
        json_u64(&j, "latency_p99_ns", o->latency_p99_ns);
        json_end(&j);
    }
    json_end(&j);
    engine_json(&j, &s->engine);
    json_end(&j);
}

/* Runs "stat"; returns the exit status. */
static int stat_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    (void) argc;
    (void) argv;
    struct pcore_msg_stats_reply s;
    char *cause = NULL;
    if (pactl_connect(ctx) < 0)
        return PACTL_EXIT_FAIL;
    if (pactl_fetch_stats(&ctx->conn, &s, &cause) < 0)
        return pactl_fail(cause);
    if (ctx->format == PACTL_FORMAT_JSON)
        stat_json(&s);
    else
        stat_text(&s);
    return PACTL_EXIT_OK;
}

const struct pactl_cmd pactl_cmd_stat = {
    .name = "stat",
    .options = "",
    .args = "",
    .summary = "per-op requests, errors, tokens, bytes and latency; the engine's batching",
    .min_args = 0,
    .max_args = 0,
    .exec = stat_exec,
};
