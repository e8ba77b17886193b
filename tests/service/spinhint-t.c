/* spinhint-t.c: pagedd tells the clients beyond the CPUs it can spare not to spin. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/proto.h"
#include "lib/ring.h"
#include "tests/service/rawclient.h"
#include "tests/service/spawn.h"
#include "tests/tap/basic.h"

/* The most clients this test connects; machines with more CPUs skip it. */
#define MAX_TEST_CLIENTS 200

static struct td_daemon daemon_;
static struct rc_client clients[MAX_TEST_CLIENTS];

/* Returns the spin hint the daemon left in client c's completion ring. */
static uint32_t nospin(struct rc_client *c)
{
    return atomic_load_explicit(paged_ring_word(&c->cq.ctl->consumer_nospin), memory_order_relaxed);
}

/* Returns how many of clients [from, to) have hint want. */
static long count_hint(long from, long to, uint32_t want)
{
    long k = 0;
    for (long i = from; i < to; i++)
        k += nospin(&clients[i]) == want;
    return k;
}

/* Waits (bounded) on subscriber sub for a DISCONNECT event; returns whether one came. */
static int await_disconnect(struct rc_client *sub, long bound)
{
    struct paged_msg_event e;
    for (long tries = 0; tries < bound; tries++)
        if (rc_wait_msg(sub, PAGED_MSG_EVENT, 10000, &e, sizeof e) == 1 && e.event == PAGED_EVENT_DISCONNECT)
            return 1;
    return 0;
}

/* Connects client i or bails. */
static void connect_client(long i)
{
    char name[32];
    snprintf(name, sizeof name, "w%ld", i);
    if (rc_connect(daemon_.socket, name, 0, &clients[i]) != 0)
        bail("client %ld cannot connect: %s", i, clients[i].errmsg);
}

/* Connects as many clients as may spin (the CPUs less two), then one more, which is told not
 * to; lets clients go and checks the hints follow. */
int main(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1)
        bail("cannot count the online CPUs");
    long spinners = cpus > 2 ? cpus - 2 : 0;
    if (spinners + 1 > MAX_TEST_CLIENTS)
        skip_all("%ld CPUs would need %ld clients", cpus, spinners + 1);
    plan_lazy();
    const char *const extra[] = { "--max-clients", "1024", NULL };
    if (td_start(&daemon_, extra, NULL) != 0)
        bail("pagedd did not start");
    struct rc_client sub;
    if (rc_connect(daemon_.socket, "sub", PAGED_HELLO_CONTROL, &sub) != 0)
        bail("control connection failed");
    struct paged_msg_hdr h = { PAGED_MSG_SUBSCRIBE, 0, 0, sizeof h };
    struct paged_msg_hdr reply;
    is_int(sizeof reply, rc_control(&sub, &h, sizeof h, &reply, sizeof reply, NULL), "SUBSCRIBE answers OK");

    for (long i = 0; i < spinners; i++)
        connect_client(i);
    if (spinners > 0)
        is_int(spinners, count_hint(0, spinners, 0),
               "%ld clients on %ld CPUs (and a control connection): every client may spin", spinners, cpus);
    connect_client(spinners);
    ok(nospin(&clients[spinners]) == 1 && count_hint(0, spinners, 0) == spinners,
       "one client more: it is told not to spin, the %ld before it still may", spinners);

    /* The newest leaves: the others keep spinning. The CONNECT events come first. */
    rc_close(&clients[spinners]);
    ok(await_disconnect(&sub, spinners + 8), "the newest client's disconnection is announced");
    is_int(spinners, count_hint(0, spinners, 0), "back to %ld clients: every client may spin", spinners);

    /* One more again, then the oldest leaves: the newest may spin now. */
    if (spinners > 0) {
        connect_client(spinners);
        ok(nospin(&clients[spinners]) == 1, "one client more again: told not to spin");
        rc_close(&clients[0]);
        ok(await_disconnect(&sub, 8), "the oldest client's disconnection is announced");
        is_int(spinners, count_hint(1, spinners + 1, 0), "the oldest gone: the newest may spin too");
        rc_close(&clients[spinners]);
    }
    for (long i = 1; i < spinners; i++)
        rc_close(&clients[i]);
    rc_close(&sub);
    is_int(0, td_stop(&daemon_), "pagedd exits cleanly");
    td_cleanup(&daemon_);
    return 0;
}
