/* stats-t.c: paged_stats reports what the daemon counted per op, as a client's requests add up. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "paged.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"

/* The ops this test reads: every paged_op up to LOOKUP. */
#define NOPS (PAGED_OP_LOOKUP + 1)

static struct pagedd daemon_;

/* Reads the daemon's statistics into st, checking that every op came; returns nothing. */
static void read_stats(paged_client *c, paged_op_stats *st, const char *what)
{
    memset(st, 0, NOPS * sizeof *st);
    int n = paged_stats(c, st, NOPS);
    ok(n >= NOPS, "%s: paged_stats reports %d ops (%s)", what, n, n < 0 ? paged_strerror(n) : "ok");
}

/* Starts pagedd, runs known requests between two readings and checks the differences; returns 0. */
int main(void)
{
    plan_lazy();
    if (pagedd_start(&daemon_, NULL, NULL, NULL) != 0)
        bail("pagedd did not start");
    paged_connect_opts opts = { .socket_path = daemon_.socket, .name = "stats" };
    paged_client *c = NULL;
    if (paged_client_connect(&opts, &c) != PAGED_OK)
        bail("connecting to pagedd");
    paged_pool_desc d = { .name = "stats", .num_layers = 1, .num_kv_heads = 1, .head_dim = 64,
                          .block_size = 16, .dtype = PAGED_DTYPE_F16, .num_blocks = 8 };
    paged_pool *p = NULL;
    if (paged_pool_create(c, &d, &p) != PAGED_OK)
        bail("creating a pool: %s", paged_client_error(c));

    paged_op_stats a[NOPS], b[NOPS];
    read_stats(c, a, "before");
    for (int i = 0; i < 7; i++)
        if (paged_nop(c) != PAGED_OK)
            bail("a NOP failed");
    int32_t ids[3];
    is_int(PAGED_OK, paged_alloc(p, 3, ids), "ALLOC of 3 blocks");
    is_int(PAGED_OK, paged_free(p, 3, ids), "FREE of them");
    int32_t stranger = ids[0];
    is_int(PAGED_E_NOTHELD, paged_free(p, 1, &stranger), "FREE of a block no longer held fails");
    read_stats(c, b, "after");

    is_int(7, (long long) (b[PAGED_OP_NOP].requests - a[PAGED_OP_NOP].requests), "7 more NOPs counted");
    is_int(0, (long long) (b[PAGED_OP_NOP].errors - a[PAGED_OP_NOP].errors), "no NOP failed");
    is_int(1, (long long) (b[PAGED_OP_ALLOC].requests - a[PAGED_OP_ALLOC].requests), "1 more ALLOC");
    is_int(2, (long long) (b[PAGED_OP_FREE].requests - a[PAGED_OP_FREE].requests), "2 more FREEs");
    is_int(1, (long long) (b[PAGED_OP_FREE].errors - a[PAGED_OP_FREE].errors), "one of them failed");
    is_int(0, (long long) (b[PAGED_OP_DECODE].requests - a[PAGED_OP_DECODE].requests), "no DECODE");
    ok(b[PAGED_OP_NOP].latency_p50_ns > 0 && b[PAGED_OP_NOP].latency_p99_ns >= b[PAGED_OP_NOP].latency_p50_ns,
       "NOP latency: p50 %llu ns > 0, p99 %llu ns >= p50", (unsigned long long) b[PAGED_OP_NOP].latency_p50_ns,
       (unsigned long long) b[PAGED_OP_NOP].latency_p99_ns);

    /* A short array gets the first ops only; no array, just the count. */
    paged_op_stats short_[NOPS];
    memset(short_, 0xa5, sizeof short_);
    int n = paged_stats(c, short_, 2);
    ok(n >= NOPS, "with room for 2 ops it still says how many the daemon counts (%d)", n);
    ok(short_[PAGED_OP_NOP].requests >= b[PAGED_OP_NOP].requests && short_[2].requests == 0xa5a5a5a5a5a5a5a5ull,
       "and fills entries 0 and 1 only");
    is_int(n, paged_stats(c, NULL, 0), "max_ops 0 with no array returns the count");
    is_int(PAGED_E_INVAL, paged_stats(c, NULL, 1), "no array for 1 op is PAGED_E_INVAL");
    is_int(PAGED_E_INVAL, paged_stats(NULL, a, NOPS), "no client is PAGED_E_INVAL");

    paged_pool_detach(p);
    paged_client_close(c);
    is_int(0, pagedd_stop(&daemon_), "pagedd exits cleanly");
    pagedd_cleanup(&daemon_);
    return 0;
}
