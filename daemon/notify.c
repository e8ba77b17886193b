/* notify.c: readiness reports to systemd (sd_notify) when pagedd is built with libsystemd. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/notify.h"

#include <unistd.h>

#include "lib/core/clock.h"

#ifdef HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

/* Reports READY=1; returns nothing. */
void pd_notify_ready(void)
{
#ifdef HAVE_SYSTEMD
    sd_notifyf(0, "READY=1\nSTATUS=serving\nMAINPID=%lu", (unsigned long) getpid());
#endif
}

/* Reports RELOADING=1 with the monotonic time systemd asks for; returns nothing. */
void pd_notify_reloading(void)
{
#ifdef HAVE_SYSTEMD
    sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long) (pcore_now_ns() / 1000u));
#endif
}

/* Reports STOPPING=1; returns nothing. */
void pd_notify_stopping(void)
{
#ifdef HAVE_SYSTEMD
    sd_notify(0, "STOPPING=1");
#endif
}
