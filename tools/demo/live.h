/* live.h: paged-demo's live view: pactl's tables while the workers hold the pool, trimmed to the telling rows. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_DEMO_LIVE_H
#define PAGED_TOOLS_DEMO_LIVE_H

/* Where pactl is, the daemon it asks, and a file for its output. */
struct demo_live {
    const char *pactl;
    const char *socket;
    const char *out;            /* written, read and removed for each table */
};

/* The most rows of a table the view shows. */
#define DEMO_LIVE_ROWS 8

/*
 * Shows `pactl list pools`, `pactl list clients` and the shared blocks of `pactl list
 * blocks pool` (those with more than one reference: the adopted prefix), each table cut to
 * DEMO_LIVE_ROWS rows and a line saying what was left out. Rows are picked by the heading's
 * column names, never by pactl's messages. Returns 0, or -1 when a pactl failed (it said why
 * on stderr, and so does this).
 */
int demo_live_show(const struct demo_live *l, const char *pool);

#endif
