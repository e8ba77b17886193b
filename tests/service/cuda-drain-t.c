/* cuda-drain-t.c: CUDA refusing a metadata upload or a batch's event record: one request fails at most. */
/* SPDX-License-Identifier: MIT */
/* Both refusals are planted; the daemon drains its stream and serves on. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paged.h"
#include "kernels/kernels.h"
#include "lib/core/proto.h"
#include "tests/service/arena-io.h"
#include "tests/service/childrec.h"
#include "tests/service/rawclient.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"

/*
 * pagedd runs the cuda backend with every DECODE's metadata uploaded (PAGEDD_META_INLINE=0),
 * its UPLOAD_AT-th metadata upload refused (PAGEDD_FAIL_UPLOAD_AT) and its EVENT_AT-th batch's
 * event record refused (PAGEDD_FAIL_EVENT_AT), each as CUDA refuses a call with an error that
 * leaves the context usable. Neither batch can be left to finish in the background: the
 * daemon waits for its stream to drain (daemon/cuda/flight.h) and completes the batch then, failed
 * where its upload was refused and done where only its event was. A client process fills two
 * sequences (the first upload and event) and runs DECODEs one at a time, each over lengths of
 * its own so that every one uploads: exactly one fails, with PAGED_E_DEVICE, and every other
 * output matches pk_ref_decode; afterwards STATUS says the backend is healthy, the pool has
 * every block back once the client is gone, and pagedd exits 0, having logged both refusals.
 */

#define H 2
#define QH 8
#define D 64
#define B 16
#define N 64
#define NSEQ 2
#define MAXBLK 4
#define CTX 60              /* tokens filled; DECODE i reads CTX - i % 7 and CTX - 1 - i % 5 of them */
#define UPLOAD_AT 4         /* the fill uploads first: this is DECODE 2's */
#define EVENT_AT 8          /* batch 8: DECODE 7's (DECODE 2 records none) */
#define NDEC 12
#define TOL 1e-4f
#define WAIT_MS 60000

enum rec_kind { REC_DONE = CR_FIRST_KIND };

static struct pagedd daemon_;
static uint64_t seed;

/* The client: fills its sequences, then decodes one request at a time and reports. */
static void client_main(int who, int cmd_fd)
{
    (void) cmd_fd;
    char why[256];
    int32_t ids[NSEQ * MAXBLK];
    static float q[NSEQ * QH * D], out[NSEQ * QH * D];
    tap_rng rng;
    tap_rng_seed(&rng, seed);
    struct aio_decoder d = {
        .a = { .cuda = 1, .ids = ids, .nseq = NSEQ, .maxblk = MAXBLK },
        .ref = { .num_layers = 1, .num_blocks = N, .num_kv_heads = H, .head_dim = D, .block_size = B,
                 .dtype = PAGED_DTYPE_F32, .k_scale = 1.0f, .v_scale = 1.0f },
    };
    if (aio_decoder_open(&d, daemon_.socket, "drain-client", "drain", CTX, QH, &rng, q, why, sizeof why) < 0)
        cr_fatal("client %d: %s", who, why);
    struct aio_client a = d.a;

    int failed = 0, device_failed = 0, right = 0;
    for (int i = 0; i < NDEC; i++) {
        const int32_t lens[NSEQ] = { CTX - i % 7, CTX - 1 - i % 5 };
        memcpy(a.host + d.lens_off, lens, sizeof lens);
        /* Outputs poisoned first: an output the device has not written yet fails the check. */
        if (aio_poison(1, a.data, d.out_off, sizeof out) < 0)
            cr_fatal("client %d: poisoning the outputs", who);
        paged_completion c;
        if (aio_decoder_call(&d, (uint64_t) i, &c) < 0)
            cr_fatal("client %d: DECODE %d was not answered: %s", who, i, paged_client_error(a.c));
        if (c.status != PAGED_OK) {
            failed++;
            device_failed += c.status == PAGED_E_DEVICE;
            continue;
        }
        right += aio_get(1, a.data, d.out_off, out, sizeof out) == 0 && aio_decoder_matches(&d, QH, q, out, lens, TOL);
    }
    cr_check(failed == 1 && device_failed == 1, "client %d: one DECODE of %d fails, with PAGED_E_DEVICE (%d failed, "
             "%d so)", who, NDEC, failed, device_failed);
    cr_check(right == NDEC - 1, "client %d: every other DECODE's output matches the reference (%d of %d)", who, right,
             NDEC - 1);
    cr_check(paged_nop(a.c) == PAGED_OK, "client %d: a NOP still completes OK", who);
    free(d.ref.base);
    cr_send(REC_DONE, 1, 0, NULL);
    paged_client_close(a.c);
    _exit(0);
}

/* Starts the daemon with the planted refusals and the client, then checks STATUS, the pool,
 * the log and the exit; returns 0. */
int main(void)
{
    seed = aio_device_test_begin();
    char upload_at[48], event_at[48];
    snprintf(upload_at, sizeof upload_at, "PAGEDD_FAIL_UPLOAD_AT=%d", UPLOAD_AT);
    snprintf(event_at, sizeof event_at, "PAGEDD_FAIL_EVENT_AT=%d", EVENT_AT);
    const char *extra[] = { "--backend=cuda", "--log-level=debug", NULL };
    const char *env[] = { upload_at, event_at, "PAGEDD_META_INLINE=0", NULL };
    int st = 0, started = pagedd_start(&daemon_, extra, env, &st);
    if (started != 0)
        bail("pagedd --backend cuda did not start (status %d)", st);
    ok(pagedd_log_contains(&daemon_, "(PAGEDD_FAIL_UPLOAD_AT)")
       && pagedd_log_contains(&daemon_, "(PAGEDD_FAIL_EVENT_AT)"),
       "the daemon says upload %d and the event of batch %d will fail", UPLOAD_AT, EVENT_AT);

    struct rc_client ctl;
    aio_pool_create(&ctl, &daemon_, "drain-t", "drain", 1, H, D, B, PAGED_DTYPE_F32, N);

    struct cr_clients kids;
    cr_spawn(&kids, 1, client_main);
    ok(cr_await(kids.rec_fd, REC_DONE, 0, 1, WAIT_MS), "the client ran its DECODEs through both refusals");
    cr_reap(&kids);

    struct pcore_msg_hdr h = { PCORE_MSG_STATUS, 0, 0, sizeof h };
    struct pcore_msg_status_reply sr;
    memset(&sr, 0, sizeof sr);
    is_int(sizeof sr, rc_control(&ctl, &h, sizeof h, &sr, sizeof sr, NULL), "STATUS answers");
    ok(sr.backend == PAGED_BACKEND_CUDA && sr.healthy == 1, "STATUS: the cuda backend is healthy (%.100s)", sr.health);
    struct pcore_pool_item it;
    memset(&it, 0, sizeof it);
    int settled = rc_pool_item_until(&ctl, "drain", rc_pool_free_is, N, 5000, &it) == 0;
    ok(settled, "the pool has all %d blocks free once the client is gone (%u)", N, it.free);
    rc_close(&ctl);
    st = pagedd_stop(&daemon_);
    ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exits 0 on SIGTERM");
    ok(pagedd_log_contains(&daemon_, "fails on purpose (PAGEDD_FAIL_UPLOAD_AT)")
           && pagedd_log_contains(&daemon_, "metadata upload failed"),
       "the log names the refused upload and what it cost");
    ok(pagedd_log_contains(&daemon_, "fails on purpose (PAGEDD_FAIL_EVENT_AT)")
           && pagedd_log_contains(&daemon_, "batch event failed"),
       "the log names the refused event record");
    ok(!pagedd_log_contains(&daemon_, "the context is lost"), "no refusal was taken for a lost context");
    pagedd_cleanup(&daemon_);
    return 0;
}
