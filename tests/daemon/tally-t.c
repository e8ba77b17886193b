/* tally-t.c: the per-uid connection tally: shares, global bounds, the reserve for root and the daemon's uid. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "daemon/tally.h"
#include "paged.h"
#include "tests/tap/basic.h"

#define SELF 500

/* Small limits, so that every edge is a few connections away. */
static const struct pd_tally_limits lim = {
    .per_uid = { 2, 1, 2 },
    .global = { 4, 3, 5 },
    .reserve = { 1, 1, 0 },
    .per_uid_key = { "max-pending-per-uid", "max-control-per-uid", "max-clients-per-uid" },
    .global_key = { NULL, NULL, "max-clients" },
    .self = SELF,
};

/* Admits and counts one connection of kind for uid; returns the admission's result. */
static int take(struct pd_tally *t, uid_t uid, enum pd_tally_kind kind, char *why, size_t size)
{
    int rc = pd_tally_admit(t, &lim, uid, kind, why, size);
    if (rc == 0 && pd_tally_add(t, uid, kind) != 0)
        bail("pd_tally_add: out of memory");
    return rc;
}

/* A uid's share, then the global bound, then the reserve; returns nothing. */
static void pending_cases(void)
{
    struct pd_tally t = { 0 };
    char why[256];
    is_int(0, take(&t, 1000, PD_TALLY_PENDING, why, sizeof why), "uid 1000: first pending admitted");
    is_int(0, take(&t, 1000, PD_TALLY_PENDING, why, sizeof why), "uid 1000: second pending admitted");
    is_int(PAGED_E_LIMIT, take(&t, 1000, PD_TALLY_PENDING, why, sizeof why), "uid 1000: a third is over its share");
    is_string("uid 1000 already has 2 connections that have not said HELLO (max-pending-per-uid)", why,
              "the refusal names the uid, the count and the setting");
    is_int(0, take(&t, 1001, PD_TALLY_PENDING, why, sizeof why), "uid 1001 is admitted beside a full uid 1000");
    is_int(0, take(&t, 1001, PD_TALLY_PENDING, why, sizeof why), "uid 1001: its second too");
    is_int(PAGED_E_LIMIT, take(&t, 1002, PD_TALLY_PENDING, why, sizeof why), "uid 1002: the global bound of 4 is met");
    is_string("pagedd already has 4 connections that have not said HELLO of all uids (the bound for all uids)", why,
              "the refusal names the global bound");
    is_int(0, take(&t, 0, PD_TALLY_PENDING, why, sizeof why), "root: admitted past the global bound (the reserve)");
    is_int(PAGED_E_LIMIT, take(&t, SELF, PD_TALLY_PENDING, why, sizeof why),
           "the daemon's uid: the reserve is used up");
    is_string("pagedd already has 5 connections that have not said HELLO of all uids (the bound of 4 and the 1 kept "
              "for root and the daemon's uid)", why, "its refusal names the bound and the reserve");
    pd_tally_remove(&t, 0, PD_TALLY_PENDING);
    is_int(0, take(&t, SELF, PD_TALLY_PENDING, why, sizeof why), "the daemon's uid: admitted once root's is gone");
    is_int(5, t.total[PD_TALLY_PENDING], "5 pending in all");
    is_int(3, t.len, "3 uids have entries");
    pd_tally_free(&t);
}

/* HELLOs taken, control connections and clients; returns nothing. */
static void ready_cases(void)
{
    struct pd_tally t = { 0 };
    char why[256];
    for (int i = 0; i < 3; i++)
        take(&t, 1000 + (uid_t) i, PD_TALLY_PENDING, why, sizeof why);
    pd_tally_move(&t, 1000, PD_TALLY_PENDING, PD_TALLY_CONTROL);
    is_int(1, pd_tally_count(&t, 1000, PD_TALLY_CONTROL), "a HELLO taken moves uid 1000's connection to control");
    is_int(0, pd_tally_count(&t, 1000, PD_TALLY_PENDING), "and out of pending");
    is_int(2, t.total[PD_TALLY_PENDING], "2 pending left in all");
    is_int(PAGED_E_LIMIT, pd_tally_admit(&t, &lim, 1000, PD_TALLY_CONTROL, why, sizeof why),
           "uid 1000: a second control connection is over its share of 1");
    is_string("uid 1000 already has 1 control connections (max-control-per-uid)", why, "the refusal says so");
    is_int(0, pd_tally_admit(&t, &lim, 1001, PD_TALLY_CONTROL, why, sizeof why), "uid 1001 may still have one");
    pd_tally_move(&t, 1001, PD_TALLY_PENDING, PD_TALLY_CONTROL);
    pd_tally_move(&t, 1002, PD_TALLY_PENDING, PD_TALLY_CONTROL);
    is_int(PAGED_E_LIMIT, pd_tally_admit(&t, &lim, 1003, PD_TALLY_CONTROL, why, sizeof why),
           "uid 1003: the global bound of 3 control connections is met");
    is_int(0, take(&t, 0, PD_TALLY_CONTROL, why, sizeof why), "root: its reserved control connection");
    is_int(PAGED_E_LIMIT, take(&t, 0, PD_TALLY_CONTROL, why, sizeof why), "root: one more than the reserve is refused");
    pd_tally_remove(&t, 1001, PD_TALLY_CONTROL);
    is_int(0, take(&t, 0, PD_TALLY_CONTROL, why, sizeof why), "root has no share: a second control connection of it "
           "fits once another uid's is gone");
    is_int(2, pd_tally_count(&t, 0, PD_TALLY_CONTROL), "root counts 2");
    for (uid_t u = 2000; u < 2005; u++)
        take(&t, u, PD_TALLY_CLIENT, why, sizeof why);
    is_int(PAGED_E_LIMIT, take(&t, 0, PD_TALLY_CLIENT, why, sizeof why), "clients: no reserve, root is refused too");
    is_string("pagedd already has 5 clients of all uids (max-clients)", why, "the refusal names max-clients");
    pd_tally_free(&t);
    ok(t.v == NULL && t.len == 0 && t.total[PD_TALLY_CLIENT] == 0, "pd_tally_free empties the tally");
}

/* Many uids coming and going: the counts stay exact and empty entries go; returns nothing. */
static void churn_case(void)
{
    struct pd_tally t = { 0 };
    char why[256];
    int admitted = 0;
    for (uid_t u = 3000; u < 3100; u++)
        admitted += pd_tally_add(&t, u, PD_TALLY_CLIENT) == 0 && pd_tally_add(&t, u, PD_TALLY_CLIENT) == 0;
    is_int(100, admitted, "100 uids with 2 clients each are counted");
    is_int(100, t.len, "100 entries");
    is_int(PAGED_E_LIMIT, pd_tally_admit(&t, &lim, 3050, PD_TALLY_CLIENT, why, sizeof why),
           "uid 3050 is at its share of 2 among them");
    for (uid_t u = 3000; u < 3100; u += 2)
        pd_tally_remove(&t, u, PD_TALLY_CLIENT);
    for (uid_t u = 3000; u < 3100; u++)
        pd_tally_remove(&t, u, PD_TALLY_CLIENT);
    is_int(50, t.len, "the uids left with nothing have no entry (50 left)");
    is_int(50, t.total[PD_TALLY_CLIENT], "50 clients in all");
    int right = 1;
    for (uid_t u = 3000; u < 3100; u++)
        right &= pd_tally_count(&t, u, PD_TALLY_CLIENT) == (u % 2 == 0 ? 0u : 1u);
    ok(right, "each uid counts what it has left");
    pd_tally_remove(&t, 3000, PD_TALLY_CLIENT);
    is_int(50, t.total[PD_TALLY_CLIENT], "removing what a uid does not have changes nothing");
    pd_tally_free(&t);
}

/* Runs the cases; returns 0 (TAP reports the results). */
int main(void)
{
    plan_lazy();
    pending_cases();
    ready_cases();
    churn_case();
    return 0;
}
