/* spinhint-t.c: pagedd tells the clients beyond the CPUs it may use and can spare not to spin. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/client.h"
#include "lib/core/proto.h"
#include "lib/core/ring.h"
#include "paged.h"
#include "tests/service/rawclient.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"

/* The most clients this test connects; machines with more CPUs skip it. */
#define MAX_TEST_CLIENTS 200

static struct pagedd daemon_;
static struct rc_client clients[MAX_TEST_CLIENTS];

/* Returns the spin hint the daemon left in client c's completion ring. */
static uint32_t nospin(struct rc_client *c)
{
    return atomic_load_explicit(pcore_ring_word(&c->cq.ctl->consumer_nospin), memory_order_relaxed);
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
    struct pcore_msg_event e;
    for (long tries = 0; tries < bound; tries++)
        if (rc_wait_msg(sub, PCORE_MSG_EVENT, 10000, &e, sizeof e) == 1 && e.event == PCORE_EVENT_DISCONNECT)
            return 1;
    return 0;
}

/* Returns whether LIST clients on control connection sub reports for each of the first n
 * clients the hint its ring holds, and none for the control connection. */
static int listed_hints_agree(struct rc_client *sub, long n)
{
    static struct pcore_client_item items[MAX_TEST_CLIENTS + 4];
    long got = rc_list(sub, PCORE_LIST_CLIENTS, "", items, sizeof items[0], MAX_TEST_CLIENTS + 4);
    if (got != n + 1)
        return diag("LIST clients gave %ld items, not %ld", got, n + 1) && 0;
    long matched = 0;
    for (long k = 0; k < got; k++) {
        if (items[k].control_only) {
            if (items[k].nospin != 0)
                return diag("the control connection is listed with a hint") && 0;
            continue;
        }
        for (long i = 0; i < n; i++)
            if (clients[i].id == items[k].id)
                matched += items[k].nospin == nospin(&clients[i]);
    }
    return matched == n;
}

/* Connects client i or bails. */
static void connect_client(long i)
{
    char name[32];
    snprintf(name, sizeof name, "w%ld", i);
    if (rc_connect(daemon_.socket, name, 0, &clients[i]) != 0)
        bail("client %ld cannot connect: %s", i, clients[i].errmsg);
}

/*
 * With a daemon that lets spinners clients spin (env: its PAGEDD_SPINNERS, or NULL for the
 * default of the CPUs less two): connects that many clients, then one more, which is told
 * not to; lets clients go and checks the hints follow, and that libpaged honours its hint.
 * Returns nothing.
 */
static void scenario(long spinners, const char *env, long cpus)
{
    char setting[64];
    snprintf(setting, sizeof setting, "PAGEDD_SPINNERS=%s", env != NULL ? env : "");
    const char *const extra[] = { "--max-clients", "1024", NULL };
    const char *const daemon_env[] = { setting, NULL };
    int started = pagedd_start(&daemon_, extra, env != NULL ? daemon_env : NULL, NULL);
    if (started != 0)
        bail("pagedd did not start");
    const char *how = env != NULL ? "PAGEDD_SPINNERS" : "default";
    struct rc_client sub;
    if (rc_connect(daemon_.socket, "sub", PCORE_HELLO_CONTROL, &sub) != 0)
        bail("control connection failed");
    struct pcore_msg_hdr h = { PCORE_MSG_SUBSCRIBE, 0, 0, sizeof h };
    struct pcore_msg_hdr reply;
    is_int(sizeof reply, rc_control(&sub, &h, sizeof h, &reply, sizeof reply, NULL), "%s: SUBSCRIBE answers OK",
           how);

    for (long i = 0; i < spinners; i++)
        connect_client(i);
    if (spinners > 0)
        is_int(spinners, count_hint(0, spinners, 0),
               "%s: %ld clients on %ld CPUs (and a control connection): every client may spin", how, spinners, cpus);
    connect_client(spinners);
    ok(nospin(&clients[spinners]) == 1 && count_hint(0, spinners, 0) == spinners,
       "%s: one client more: it is told not to spin, the %ld before it still may", how, spinners);
    ok(listed_hints_agree(&sub, spinners + 1), "%s: LIST clients reports each client's hint as its ring holds it",
       how);

    /* The newest leaves: the others keep spinning. The CONNECT events come first. */
    rc_close(&clients[spinners]);
    ok(await_disconnect(&sub, spinners + 8), "%s: the newest client's disconnection is announced", how);
    is_int(spinners, count_hint(0, spinners, 0), "%s: back to %ld clients: every client may spin", how, spinners);

    /* A libpaged client one more: its waits sleep at once (a wait for nothing, bounded by a
     * 2 ms timeout, goes through the spin-or-sleep choice); then the oldest leaves, and its
     * waits spin again. */
    paged_connect_opts opts = { .socket_path = daemon_.socket, .name = "libpaged", .spin_us = 50 };
    paged_client *lc = NULL;
    if (paged_client_connect(&opts, &lc) != PAGED_OK)
        bail("libpaged client cannot connect");
    paged_completion comp;
    int w1 = paged_wait(lc, &comp, 1, 2);
    ok(w1 <= 0 && lc->waiter.nospin_waits == 1,
       "%s: libpaged client beyond the spinners: its wait slept without spinning (%d, %llu)", how, w1,
       (unsigned long long) lc->waiter.nospin_waits);
    if (spinners > 0) {
        rc_close(&clients[0]);
        ok(await_disconnect(&sub, spinners + 8), "%s: the oldest client's disconnection is announced", how);
        int w2 = paged_wait(lc, &comp, 1, 2);
        ok(w2 <= 0 && lc->waiter.nospin_waits == 1,
           "%s: the oldest gone: the libpaged client's next wait spins first (%llu waits without)", how,
           (unsigned long long) lc->waiter.nospin_waits);
        is_int(spinners - 1, count_hint(1, spinners, 0), "%s: the other clients may still spin", how);
    } else {
        int w2 = paged_wait(lc, &comp, 1, 2);
        ok(w2 <= 0 && lc->waiter.nospin_waits == 2,
           "%s: no CPU to spare: the libpaged client's next wait sleeps at once too", how);
    }
    paged_client_close(lc);
    for (long i = 1; i < spinners; i++)
        rc_close(&clients[i]);
    rc_close(&sub);
    is_int(0, pagedd_stop(&daemon_), "%s: pagedd exits cleanly", how);
    pagedd_cleanup(&daemon_);
}

/* Narrows this process's CPUs (and so the next daemon's) to the first n of set; returns
 * whether it could. */
static int narrow_cpus(const cpu_set_t *set, int n)
{
    cpu_set_t few;
    CPU_ZERO(&few);
    for (int c = 0, k = 0; c < CPU_SETSIZE && k < n; c++)
        if (CPU_ISSET(c, set)) {
            CPU_SET(c, &few);
            k++;
        }
    return sched_setaffinity(0, sizeof few, &few) == 0;
}

/* Runs the scenario with the default number of spinners (unless the machine has too many
 * CPUs for this test), then with 2 set by PAGEDD_SPINNERS, so that a client that may spin is
 * seen on every machine; then, where there are at least 4 CPUs, with the daemon allowed only
 * 3 of them (as a cpuset or systemd's CPUAffinity= allows): one spinner, whatever is online. */
int main(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < 1)
        bail("cannot read this process's CPUs");
    long cpus = CPU_COUNT(&set);
    plan_lazy();
    long spinners = cpus > 2 ? cpus - 2 : 0;
    if (spinners + 1 <= MAX_TEST_CLIENTS)
        scenario(spinners, NULL, cpus);
    else
        diag("%ld CPUs would need %ld clients: the default is not tried", cpus, spinners + 1);
    scenario(2, "2", cpus);
    if (cpus >= 4 && narrow_cpus(&set, 3)) {
        scenario(1, NULL, 3);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            sysbail("restoring this process's CPUs");
    } else {
        diag("%ld CPUs: the daemon confined to 3 of them is not tried", cpus);
    }
    return 0;
}
