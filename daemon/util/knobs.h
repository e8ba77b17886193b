/* knobs.h: pagedd's environment knobs: one table of names, kinds, defaults, ranges and docs, read once. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_UTIL_KNOBS_H
#define PAGED_DAEMON_UTIL_KNOBS_H

#include <stdint.h>

/*
 * Every PAGEDD_* variable the daemon reads is a row of the table in daemon/util/knobs.c, in this
 * order, which is also pagedd(8)'s ENVIRONMENT order (tests/daemon/knobs-t.c checks that
 * the page mirrors the table). pd_knobs_load parses them all at start; the code reads the
 * parsed values through pd_knob, never getenv.
 */
enum pd_knob {
    /* Tuning: how the daemon batches, waits and launches. */
    PD_KNOB_GATHER,            /* SHARE,MAX_US: parts 0 and 1 */
    PD_KNOB_SPLIT,             /* CLIENTS[,AFTER]: parts 0 and 1 */
    PD_KNOB_DEFER,             /* 0 or 1 */
    PD_KNOB_SPINNERS,          /* a number; unset: computed from the CPUs */
    PD_KNOB_INFLIGHT,          /* 1 to PD_CU_SLOTS */
    PD_KNOB_POLL_GAP_US,       /* 0 to 1000 */
    PD_KNOB_DEP_KERNELS,       /* 0, 1 or 2; unset: by MPS */
    PD_KNOB_FUSE,              /* 0 or 1 */
    PD_KNOB_META_INLINE,       /* 0 or 1 */
    PD_KNOB_DEVICE_TIMING,     /* 0 or 1 */
    PD_KNOB_ACTIVITY_LOG,      /* 0 or 1 */
    PD_KNOB_PEER_STAGING,      /* PD_KNOB_STAGING_AUTO or PD_KNOB_STAGING_HOST */
    PD_KNOB_PEER_PARTS,        /* 1 to 8 */
    /* Test aids: something slower or wrong on purpose. */
    PD_KNOB_CPU_DONE_US,
    PD_KNOB_CPU_DEVICES,       /* 1 to PD_MAX_DEVICES */
    PD_KNOB_REFUSE_MERGED,
    PD_KNOB_FAULT_AFTER,
    PD_KNOB_FAIL_UPLOAD_AT,
    PD_KNOB_FAIL_EVENT_AT,
    PD_KNOB_FAIL_ALLOC_AT,
    PD_KNOB_REAP_DELAY_MS,
    PD_KNOB_CUDA_EXPORT,       /* PD_KNOB_EXPORT_AUTO or PD_KNOB_EXPORT_IPC */
    PD_KNOB_PEER_CORRUPT,      /* 0 or 1 */
    PD_KNOB_PEER_STALL,        /* 0 or 1 */
    PD_KNOB_COUNT_
};

/* What a knob is for. */
enum pd_knob_kind {
    PD_KNOB_TUNING,            /* changes how fast, never what the answers are */
    PD_KNOB_TEST_AID,          /* makes something late or fail on purpose, for the tests */
};

/* PAGEDD_CUDA_EXPORT's values: the way the device supports best, or the legacy IPC handles. */
enum { PD_KNOB_EXPORT_AUTO = 0, PD_KNOB_EXPORT_IPC = 1 };
/* PD_KNOB_PEER_STAGING's values. */
enum { PD_KNOB_STAGING_AUTO = 0, PD_KNOB_STAGING_HOST = 1 };

/* The defaults the table holds that the code's comments name. */
#define PD_GATHER_SHARE 8u     /* PAGEDD_GATHER's SHARE */
#define PD_GATHER_MAX_NS 20000u   /* PAGEDD_GATHER's MAX_US, in nanoseconds */
/* The PD_SPLIT_AFTERth pass in a row that finds the device idle with PD_SPLIT_CLIENTS
 * decoding clients or more splits into two batches (engine.c, split_point). */
#define PD_SPLIT_CLIENTS 8u
#define PD_SPLIT_AFTER 2u
/* The cuda backend's staging slots: the most batches PAGEDD_INFLIGHT may keep queued. */
#define PD_CU_SLOTS 8u
/* Batches the cuda backend queues at once by default (PAGEDD_INFLIGHT): two keep the GPU fed
 * while the engine prepares the next, and no more keeps each pass waiting long enough for
 * the clients that come meanwhile to join it, as merging needs. */
#define PD_CU_DEPTH 2u
/* The least time between two event queries of the same unfinished batch by
 * pd_cu_flight_poll (PAGEDD_POLL_GAP_US, in microseconds). A query costs the engine's thread
 * 1.3-1.6 us on an H100 host, and a pass asks in a row (retiring deferred batches, then
 * queuing its own); an answer this fresh is taken as still true. */
#define PD_CU_POLL_GAP_NS 2000u

/*
 * Parses every knob from the environment: unset or empty leaves a knob at its default; a
 * value that is malformed or out of range is refused, and that knob keeps its default.
 * Callable again (the tests change the environment between calls). Not thread-safe: run it
 * before the threads that read knobs start. Returns 0, or -1 with *cause (to free) naming
 * each refused knob, its value and what it takes.
 */
int pd_knobs_load(char **cause);

/* Logs each knob the environment set, at INFO: its name, value and kind. Returns nothing. */
void pd_knobs_log(void);

/* Returns knob id's value: what the environment set, else the default; for a compound knob,
 * its first part. A knob whose default is worked out at run time (PAGEDD_SPINNERS,
 * PAGEDD_DEP_KERNELS) returns 0 when unset: ask pd_knob_is_set first. When pd_knobs_load has
 * not run yet (a test or harness that makes an engine or backend without pagedd's main), the
 * first call runs it, logging what it refuses as an error. */
uint64_t pd_knob(enum pd_knob id);

/* Returns part (0 or 1) of compound knob id (PAGEDD_GATHER, PAGEDD_SPLIT), as pd_knob does. */
uint64_t pd_knob_part(enum pd_knob id, unsigned part);

/* Returns whether the environment set knob id (to a value that was not refused). */
int pd_knob_is_set(enum pd_knob id);

/* Returns knob id's name, "PAGEDD_...". */
const char *pd_knob_name(enum pd_knob id);

/* A table row as pagedd(8) shows it. */
struct pd_knob_text {
    const char *name;          /* PAGEDD_... */
    const char *kind;          /* "tuning" or "test aid" */
    char takes[128];           /* "N from 1 to 8", "0 or 1", "SHARE,MAX_US with ..." */
    char def[64];              /* the default: "2", "8,20", "1 under MPS, else 0" */
    const char *doc;           /* one sentence */
};

/* Fills *out with knob id's row as text (id must be a knob). Returns nothing. */
void pd_knob_describe(enum pd_knob id, struct pd_knob_text *out);

#endif
