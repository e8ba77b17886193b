/* cuda-fault-t.c: a device fault in the cuda backend: requests fail with PAGED_E_DEVICE, the daemon serves on. */
/* SPDX-License-Identifier: MIT */
/* The fault is planted with PAGEDD_FAULT_AFTER; the daemon still exits cleanly. */
#include "config.h"

#include <cuda_runtime_api.h>
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
 * pagedd runs the cuda backend with PAGEDD_FAULT_AFTER=FAULT_AT: its FAULT_AT-th batch queues
 * a kernel that traps, and the device context is lost for good, as after a hardware fault. A
 * client process (the parent never touches CUDA) fills a context (batch 1) and then runs
 * DECODEs one at a time: the first FAULT_AT - 2 complete OK with finite outputs, the one in
 * the faulting batch and every one after it fail with PAGED_E_DEVICE, each promptly, while a
 * NOP and an ALLOC (no device work) still complete OK. STATUS then says the backend is
 * unhealthy and why; the client leaves (its device arena freed on a lost context) and pagedd
 * exits 0 on SIGTERM, having logged the loss once.
 */

#define H 2
#define QH 8
#define D 64
#define B 16
#define N 64
#define NSEQ 2
#define MAXBLK 4
#define CTX 50
#define FAULT_AT 6          /* the batch that faults: the fill is batch 1 */
#define NDEC 12             /* DECODEs the client runs */
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
    if (aio_decoder_open(&d, daemon_.socket, "fault-client", "fault", CTX, QH, &rng, q, why, sizeof why) < 0)
        cr_fatal("client %d: %s", who, why);
    free(d.ref.base);
    struct aio_client a = d.a;

    /* Batch 1 was the fill; DECODE i runs in batch i + 2. */
    int status[NDEC], finite_ok = 1;
    for (int i = 0; i < NDEC; i++) {
        paged_completion c;
        if (aio_decoder_call(&d, (uint64_t) i, &c) < 0)
            cr_fatal("client %d: DECODE %d was not answered: %s", who, i, paged_client_error(a.c));
        status[i] = c.status;
        if (c.status == PAGED_OK) {
            finite_ok &= aio_get(1, a.data, d.out_off, out, sizeof out) == 0;
            for (size_t k = 0; k < NSEQ * QH * D; k++)
                finite_ok &= out[k] == out[k] && out[k] < 1e30f && out[k] > -1e30f;
        }
    }
    int before = 0, after = 0;
    for (int i = 0; i < NDEC; i++) {
        before += i < FAULT_AT - 2 && status[i] == PAGED_OK;
        after += i >= FAULT_AT - 2 && status[i] == PAGED_E_DEVICE;
    }
    cr_check(before == FAULT_AT - 2 && finite_ok, "client %d: the %d DECODEs before the faulting batch complete OK, "
             "their outputs finite", who, FAULT_AT - 2);
    cr_check(after == NDEC - (FAULT_AT - 2), "client %d: the DECODE in the faulting batch and the %d after it fail "
             "with PAGED_E_DEVICE (%d of %d)", who, NDEC - (FAULT_AT - 1), after, NDEC - (FAULT_AT - 2));
    cr_check(paged_nop(a.c) == PAGED_OK, "client %d: a NOP still completes OK", who);
    int32_t one = -1;
    int rc = paged_alloc(a.pool, 1, &one);
    cr_check(rc == PAGED_OK && paged_free(a.pool, 1, &one) == PAGED_OK,
             "client %d: an ALLOC and a FREE (no device work) still complete OK (%s)", who, paged_strerror(rc));
    cr_send(REC_DONE, 1, 0, NULL);
    paged_client_close(a.c);
    _exit(0);
}

/* Starts the faulting daemon and the client, then checks STATUS and the exit; returns 0. */
int main(void)
{
    seed = aio_device_test_begin();
    char after[48];
    snprintf(after, sizeof after, "PAGEDD_FAULT_AFTER=%d", FAULT_AT);
    const char *extra[] = { "--backend=cuda", "--log-level=debug", NULL };
    const char *env[] = { after, NULL };
    int st = 0, started = pagedd_start(&daemon_, extra, env, &st);
    if (started != 0)
        bail("pagedd --backend cuda did not start (status %d)", st);
    ok(pagedd_log_contains(&daemon_, "(PAGEDD_FAULT_AFTER)"), "the daemon says batch %d will fault",
       FAULT_AT);

    struct rc_client ctl;
    aio_pool_create(&ctl, &daemon_, "fault-t", "fault", 1, H, D, B, PAGED_DTYPE_F32, N);

    struct cr_clients kids;
    cr_spawn(&kids, 1, client_main);
    ok(cr_await(kids.rec_fd, REC_DONE, 0, 1, WAIT_MS), "the client ran its DECODEs through the fault");
    cr_reap(&kids);

    struct pcore_msg_hdr h = { PCORE_MSG_STATUS, 0, 0, sizeof h };
    struct pcore_msg_status_reply sr;
    memset(&sr, 0, sizeof sr);
    is_int(sizeof sr, rc_control(&ctl, &h, sizeof h, &sr, sizeof sr, NULL), "STATUS still answers after the fault");
    ok(sr.backend == PAGED_BACKEND_CUDA && sr.healthy == 0 && strstr(sr.health, "sticky CUDA error") != NULL,
       "STATUS: the cuda backend is unhealthy and says why (%.100s)", sr.health);
    rc_close(&ctl);
    st = pagedd_stop(&daemon_);
    ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exits 0 on SIGTERM with its device context lost");
    ok(pagedd_log_contains(&daemon_, "faults on purpose")
       && pagedd_log_contains(&daemon_, "the context is lost"),
       "the log names the planted fault and the lost context");
    pagedd_cleanup(&daemon_);
    return 0;
}
