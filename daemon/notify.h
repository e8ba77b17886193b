/* notify.h: readiness reports to systemd (sd_notify) when pagedd is built with libsystemd. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_NOTIFY_H
#define PAGED_DAEMON_NOTIFY_H

/* Tells the service manager the daemon serves (READY=1) with its pid; nothing without
 * libsystemd or outside systemd. */
void pd_notify_ready(void);
/* Tells it a reload started (RELOADING=1). */
void pd_notify_reloading(void);
/* Tells it the daemon is stopping (STOPPING=1). */
void pd_notify_stopping(void);

#endif
