/* strikes-t.c: timed-out dependency waits counted per uid: how they add up, run out and are logged. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdint.h>

#include "daemon/engine/strikes.h"
#include "tests/tap/basic.h"

#define SEC 1000000000ull
#define T0 (1000 * SEC)        /* a clock well past zero, as CLOCK_MONOTONIC is */

/* Drives one table through strikes of two uids at chosen times; returns 0. */
int main(void)
{
    plan_lazy();
    struct pd_strikes s = { 0 };
    is_int(0, (int) pd_strikes_count(&s, 1000, T0), "an empty table counts nothing");
    is_int(1, (int) pd_strikes_add(&s, 1000, T0), "a first strike counts 1");
    is_int(2, (int) pd_strikes_add(&s, 1000, T0 + 59 * SEC), "a second 59 s later adds up to 2");
    is_int(2, (int) pd_strikes_count(&s, 1000, T0 + 59 * SEC + 1), "and is counted so");
    is_int(0, (int) pd_strikes_count(&s, 2000, T0 + 59 * SEC), "another uid has none");
    is_int(1, (int) pd_strikes_add(&s, 2000, T0 + 60 * SEC), "its own first strike counts 1");
    is_int(2, (int) pd_strikes_count(&s, 1000, T0 + 60 * SEC), "without touching the first uid's");
    is_int(2, (int) pd_strikes_count(&s, 1000, T0 + 59 * SEC + PD_STRIKE_WINDOW_NS - 1),
           "the count holds until a minute after its last strike");
    is_int(0, (int) pd_strikes_count(&s, 1000, T0 + 59 * SEC + PD_STRIKE_WINDOW_NS),
           "and is forgotten at the minute");
    is_int(1, (int) pd_strikes_add(&s, 1000, T0 + 59 * SEC + PD_STRIKE_WINDOW_NS),
           "a strike after that starts again from 1");
    is_int(1, (int) pd_strikes_count(&s, 2000, T0 + 60 * SEC + PD_STRIKE_WINDOW_NS - 1),
           "the other uid's strike runs out on its own clock");
    is_int(1, pd_strikes_warn(&s, 1000), "a refusal is to be logged once after the count grew");
    is_int(0, pd_strikes_warn(&s, 1000), "not twice");
    pd_strikes_add(&s, 1000, T0 + 60 * SEC + PD_STRIKE_WINDOW_NS);
    is_int(1, pd_strikes_warn(&s, 1000), "and again once the count grew again");
    is_int(0, pd_strikes_warn(&s, 3000), "a uid without strikes has nothing to log");
    /* Many uids, each with a strike, all but the last run out before it: the table drops them. */
    const uint64_t t1 = T0 + 10 * PD_STRIKE_WINDOW_NS;
    for (uid_t u = 0; u < 100; u++)
        pd_strikes_add(&s, 5000 + u, t1 + u * SEC);
    pd_strikes_add(&s, 9999, t1 + 99 * SEC + PD_STRIKE_WINDOW_NS - 1);
    int live = 0;
    for (uid_t u = 0; u < 100; u++)
        live += pd_strikes_count(&s, 5000 + u, t1 + 99 * SEC + PD_STRIKE_WINDOW_NS - 1) != 0;
    is_int(1, live, "of 100 uids struck a second apart, only the last still counts a minute later");
    ok(s.len <= 3, "the table keeps only uids that struck lately (%u entries)", s.len);
    pd_strikes_free(&s);
    ok(s.v == NULL && s.len == 0, "freeing empties the table");
    return 0;
}
