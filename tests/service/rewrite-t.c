/* rewrite-t.c: a client that rewrites a submitted entry's opcode gets PAGED_E_OPCODE for that request and goes on. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <signal.h>
#include <stdint.h>

#include "lib/client.h"
#include "lib/core/proto.h"
#include "paged.h"
#include "tests/service/proc.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"

/*
 * The submission ring is the client's own memory, so a client can change an entry after
 * submitting it; pagedd reads it once and echoes the opcode it read in the completion. To
 * make that deterministic the test freezes the daemon (SIGSTOP), submits a NOP, rewrites the
 * published entry's opcode, and lets the daemon go on: the NOP must complete as the NOP it
 * was, with PAGED_E_OPCODE, and the client must go on working.
 */

static struct pagedd daemon_;

/* Returns the submission entry the client published last (its ring is the test's memory). */
static struct pcore_sqe *last_published(paged_client *c)
{
    uint32_t i = (c->sq.tail - 1) & c->sq.mask;
    return (struct pcore_sqe *) (c->sq.entries + (size_t) i * c->sq.entry_size);
}

/* Submits a NOP tagged tag while the daemon is frozen, rewrites its opcode to opcode, lets the
 * daemon go on and checks the completion and the client's next requests; what names the case. */
static void rewrite_case(paged_client *c, uint16_t opcode, uint64_t tag, const char *what)
{
    if (td_freeze(&daemon_) != 0)
        sysbail("stopping the daemon");
    paged_request req = { .op = PAGED_OP_NOP, .tag = tag };
    int rc = paged_prep(c, &req);
    if (rc == PAGED_OK)
        rc = paged_submit(c);
    is_int(1, rc, "%s: a NOP is submitted to the frozen daemon", what);
    last_published(c)->opcode = opcode;
    kill(daemon_.pid, SIGCONT);
    paged_completion comp = { 0 };
    rc = paged_wait(c, &comp, 1, 10000);
    is_int(1, rc, "%s: its completion arrives (%s)", what, rc < 0 ? paged_strerror(rc) : "ok");
    ok(rc == 1 && comp.tag == tag && comp.op == PAGED_OP_NOP,
       "%s: as the NOP submitted, tag %llu", what, (unsigned long long) tag);
    is_int(PAGED_E_OPCODE, comp.status, "%s: with status PAGED_E_OPCODE", what);
    is_int(PAGED_OK, paged_nop(c), "%s: the client goes on: a NOP completes", what);
    req.tag = tag + 1;
    rc = paged_prep(c, &req);
    if (rc == PAGED_OK)
        rc = paged_submit(c);
    if (rc == 1)
        rc = paged_wait(c, &comp, 1, 10000);
    ok(rc == 1 && comp.tag == tag + 1 && comp.status == PAGED_OK, "%s: and so does an asynchronous one", what);
}

/* Starts pagedd and one libpaged client, rewrites two entries' opcodes; returns 0. */
int main(void)
{
    plan_lazy();
    if (pagedd_start(&daemon_, NULL, NULL, NULL) != 0)
        bail("pagedd did not start");
    paged_connect_opts opts = { .socket_path = daemon_.socket, .name = "rewrite" };
    paged_client *c = NULL;
    if (paged_client_connect(&opts, &c) != PAGED_OK)
        bail("connecting to pagedd");
    is_int(PAGED_OK, paged_nop(c), "a NOP completes before any rewrite");
    rewrite_case(c, 200, 10, "opcode 200");
    rewrite_case(c, PAGED_OP_ALLOC, 20, "opcode ALLOC");
    paged_client_close(c);
    ok(!pagedd_log_contains(&daemon_, "corrupt"), "the daemon saw no corrupt ring");
    is_int(0, pagedd_stop(&daemon_), "pagedd exits cleanly");
    pagedd_cleanup(&daemon_);
    return 0;
}
