/* launchlog.h: what a debug-level daemon log says of merged, refused and fused launches, for the service tests. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_SERVICE_LAUNCHLOG_H
#define PAGED_TESTS_SERVICE_LAUNCHLOG_H

/* The merged launches of one op that ran merged ("engine: merged decode launch N: R requests
 * of C clients, ... layers lo..hi"). */
struct ll_merged {
    unsigned long launches;       /* how many */
    unsigned long requests;       /* the requests they served */
    unsigned most_clients;        /* the most clients one served */
    int lo, hi;                   /* the layers of the first launch that served most_clients */
};

/* The merged launches of one op that the backend refused and ran one request at a time
 * ("<backend>: merged decode launch of R requests refused (...): each runs alone"). */
struct ll_unmerged {
    unsigned long launches;       /* how many */
    unsigned long requests;       /* the requests they held */
};

/* Scans log from byte from up to byte to (-1: its end) for the merged launches of op
 * ("decode" or "append") into *m. Returns nothing (all zero when the log cannot be read). */
void ll_merged_in(const char *log, const char *op, long from, long to, struct ll_merged *m);

/* The same for the refused merged launches of op, into *u. Returns nothing. */
void ll_unmerged_in(const char *log, const char *op, long from, long to, struct ll_unmerged *u);

/* Returns how many APPENDs the batches logged from byte from to byte to ran fused into their
 * DECODEs' launch ("engine: N APPENDs fused into their DECODEs' launch"). */
unsigned long ll_fused_in(const char *log, long from, long to);

/* Returns how many lines from byte from to byte to contain text. */
unsigned long ll_count_in(const char *log, const char *text, long from, long to);

#endif
