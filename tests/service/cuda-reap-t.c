/* cuda-reap-t.c: a data arena asked for while a departed client's is still being freed waits, instead of failing. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paged.h"
#include "lib/core/proto.h"
#include "tests/service/arena-io.h"
#include "tests/service/childrec.h"
#include "tests/service/rawclient.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"

/*
 * pagedd's cuda backend frees a departed client's arenas on a thread of its own
 * (daemon/cuda/reaper.h); here it does so REAP_DELAY_MS late (PAGEDD_REAP_DELAY_MS). Two pools fill
 * the GPU but for SPARE bytes, room for one client's ARENA-byte data arena and not two. Client A
 * takes its arena and leaves; as soon as the daemon has seen it go, client B asks for an arena
 * as large: the memory is free only once A's arena is, so the daemon must wait for the reaper
 * (it logs that it does) and then serve B, instead of refusing it for want of memory. Both
 * clients allocate blocks and run a NOP; the pool has every block back at the end, and pagedd
 * exits 0. It needs the GPU's memory to itself: make check builds it without running it
 * (other tests use the GPU meanwhile), tools/gpu-run.sh runs it alone.
 */

#define LAYERS 32
#define H 8
#define D 128
#define B 32
#define ARENA (4ull << 30)          /* the largest data arena pagedd gives */
#define SPARE (6ull << 30)          /* left free beside the pool: one arena and the contexts */
#define REAP_DELAY_MS 1500
#define NSEQ 2
#define MAXBLK 4
#define WAIT_MS 60000

enum rec_kind { REC_DONE = CR_FIRST_KIND };

static struct pagedd daemon_;
static int role;            /* the client the next cr_spawn runs: 0 A, 1 B */

/* A client: opens with an ARENA-byte data arena, allocates its blocks, writes its arena's
 * last byte, runs a NOP, reports and leaves. */
static void client_main(int who, int cmd_fd)
{
    (void) who;
    (void) cmd_fd;
    char why[256];
    int32_t ids[NSEQ * MAXBLK];
    struct aio_client a = { .cuda = 1, .ids = ids, .nseq = NSEQ, .maxblk = MAXBLK };
    int opened = aio_open(&a, daemon_.socket, role == 0 ? "reap-a" : "reap-b", "reap", 1u << 20, ARENA, why,
                          sizeof why) == 0;
    cr_check(opened, "client %c: connected with a %llu-byte data arena and took %d blocks%s%s", 'A' + role,
             (unsigned long long) ARENA, NSEQ * MAXBLK, opened ? "" : ": ", opened ? "" : why);
    if (opened) {
        const unsigned char one = 1;
        cr_check(aio_put(1, a.data, ARENA - 1, &one, 1) == 0 && paged_nop(a.c) == PAGED_OK,
                 "client %c: its arena's last byte takes a write and a NOP completes", 'A' + role);
        paged_client_close(a.c);
    }
    cr_send(REC_DONE, 1, 0, NULL);
    _exit(0);
}

/* Says whether want connections are attached to the pool. */
static int attached_is(const struct pcore_pool_item *it, uint32_t want)
{
    return it->attached == want;
}

/* Runs one client process (which 0: A, 1: B) to its end; returns whether it reported done. */
static int run_client(int which)
{
    struct cr_clients kids;
    role = which;
    cr_spawn(&kids, 1, client_main);
    int done = cr_await(kids.rec_fd, REC_DONE, 0, 1, WAIT_MS);
    cr_reap(&kids);
    return done;
}

/* Starts the daemon, fills the GPU with a pool, runs A then B; returns 0. */
int main(void)
{
    uint64_t free_b = 0;
    if (!aio_devices(&free_b))
        skip_all("no CUDA device");
    plan_lazy();
    char delay[48];
    snprintf(delay, sizeof delay, "PAGEDD_REAP_DELAY_MS=%d", REAP_DELAY_MS);
    /* At debug: the line that says an allocation waits for the reaper is one. */
    const char *extra[] = { "--backend=cuda", "--log-level=debug", NULL };
    const char *env[] = { delay, NULL };
    int st = 0, started = pagedd_start(&daemon_, extra, env, &st);
    if (started != 0)
        bail("pagedd --backend cuda did not start (status %d)", st);
    ok(pagedd_log_contains(&daemon_, "(PAGEDD_REAP_DELAY_MS)"),
       "the daemon says it frees departed clients' memory late");

    const uint64_t block_bytes = (uint64_t) LAYERS * 2 * H * B * D * 2;
    if (free_b < SPARE + 2 * ARENA)
        skip_all("the GPU has %llu bytes free: too few to fill it but for one arena", (unsigned long long) free_b);
    /* Two pools of half each: pagedd keeps any one pool within the host's memory too. */
    const uint32_t blocks = (uint32_t) ((free_b - SPARE) / block_bytes / 2);
    struct rc_client ctl;
    aio_pool_create(&ctl, &daemon_, "reap-t", "reap", LAYERS, H, D, B, PAGED_DTYPE_F16, blocks);
    ok(rc_pool_create(&ctl, "fill", LAYERS, H, D, B, PAGED_DTYPE_F16, blocks, 0600, PCORE_ATTACH_WRITE, NULL, NULL)
           == 0,
       "a second pool of %u blocks fills the GPU but for %llu bytes", blocks, (unsigned long long) SPARE);

    /* The control connection made the pools, so it is attached to them too. */
    struct pcore_pool_item it;
    memset(&it, 0, sizeof it);
    ok(run_client(0), "client A ran and left");
    int settled = rc_pool_item_until(&ctl, "reap", attached_is, 1, 10000, &it) == 0;
    ok(settled, "the daemon saw client A go (%u attached: the control connection)", it.attached);
    ok(run_client(1), "client B ran and left");
    ok(pagedd_log_contains(&daemon_, "waits for departed clients' memory to be freed"),
       "client B's arena waited for client A's to be freed");
    settled = rc_pool_item_until(&ctl, "reap", attached_is, 1, 10000, &it) == 0;
    ok(settled && it.free == blocks,
       "the pool has all %u blocks free once both clients are gone (%u)", blocks, it.free);
    rc_close(&ctl);
    st = pagedd_stop(&daemon_);
    ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exits 0 on SIGTERM");
    pagedd_cleanup(&daemon_);
    return 0;
}
