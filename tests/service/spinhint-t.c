/* spinhint-t.c: pagedd tells its clients not to spin once they would outnumber the CPUs. */
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

/* Returns how many of the first n clients have hint want. */
static long count_hint(long n, uint32_t want)
{
    long k = 0;
    for (long i = 0; i < n; i++)
        k += nospin(&clients[i]) == want;
    return k;
}

/* Connects client i or bails. */
static void connect_client(long i)
{
    char name[32];
    snprintf(name, sizeof name, "w%ld", i);
    if (rc_connect(daemon_.socket, name, 0, &clients[i]) != 0)
        bail("client %ld cannot connect: %s", i, clients[i].errmsg);
}

/* Connects clients until they and the engine need every CPU, then one more, then lets one go. */
int main(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1)
        bail("cannot count the online CPUs");
    /* The daemon asks for no spinning from clients + 2 > CPUs on, i.e. from cpus - 1 clients. */
    long limit = cpus - 1 < 1 ? 1 : cpus - 1;
    if (limit > MAX_TEST_CLIENTS)
        skip_all("%ld CPUs would need %ld clients", cpus, limit);
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

    for (long i = 0; i < limit - 1; i++)
        connect_client(i);
    if (limit >= 2)
        is_int(limit - 1, count_hint(limit - 1, 0),
               "%ld clients on %ld CPUs (and a control connection): every client may spin", limit - 1, cpus);
    connect_client(limit - 1);
    is_int(limit, count_hint(limit, 1), "%ld clients on %ld CPUs: every client is told not to spin", limit, cpus);

    /* One leaves: once its DISCONNECT event is out, the others may spin again. The CONNECT
     * events of every client come first. */
    rc_close(&clients[limit - 1]);
    struct paged_msg_event e;
    int seen = 0;
    for (long tries = 0; tries < limit + 8 && !seen; tries++)
        seen = rc_wait_msg(&sub, PAGED_MSG_EVENT, 10000, &e, sizeof e) == 1 && e.event == PAGED_EVENT_DISCONNECT;
    ok(seen, "the last client's disconnection is announced");
    if (limit >= 2)
        is_int(limit - 1, count_hint(limit - 1, 0), "back to %ld clients: every client may spin again", limit - 1);

    for (long i = 0; i < limit - 1; i++)
        rc_close(&clients[i]);
    rc_close(&sub);
    is_int(0, td_stop(&daemon_), "pagedd exits cleanly");
    td_cleanup(&daemon_);
    return 0;
}
