/* internal.h: what the engine's files share: the records of a pass and of withheld completions. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_ENGINE_INTERNAL_H
#define PAGED_DAEMON_ENGINE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/conn.h"
#include "daemon/engine/batch.h"
#include "daemon/engine/engine.h"
#include "daemon/engine/strikes.h"
#include "daemon/util/knobs.h"
#include "daemon/engine/validate.h"
#include "daemon/pool.h"
#include "daemon/stats.h"

/*
 * The engine is three files: engine.c takes requests into passes and runs them (see its top
 * comment), defer.c withholds and later posts the completions of deferred batches, and
 * report.c reports what the engine did. This header holds what they share.
 */

/* PD_GATHER_SHARE, PD_GATHER_MAX_NS, PD_SPLIT_CLIENTS and PD_SPLIT_AFTER are the defaults of
 * PAGEDD_GATHER and PAGEDD_SPLIT (daemon/util/knobs.h), read when the engine is created. */

/* Clients that one retirement of deferred batches wakes after the next launch; more are
 * woken at once. */
#define PD_ENG_WAKES 64u

/* An item's status while the backend has it. */
#define ITEM_WAITS 1
#define NONE UINT32_MAX

/* One request taken into the pass. */
struct eng_item {
    struct pcore_cqe cqe;         /* its completion, status and count filled at the end */
    struct pv_op op;              /* validated (empty when refused) */
    uint32_t client;              /* its record in clients */
    uint32_t next;                /* the same client's next item, or NONE */
    int status;                   /* PAGED_OK, a paged_error, or ITEM_WAITS */
};

/* A completion withheld until the device work of its batch is done (a deferred batch). */
struct eng_deferred {
    struct pcore_cqe cqe;         /* status filled; count and value at retirement */
    struct pd_conn *c;            /* used only while a live connection has this address and id */
    uint32_t conn_id;
    int backend_op;               /* its count is the op's (set when it succeeds) */
    uint32_t count;
    uint64_t ticket;              /* the backend's ticket of its batch */
    uint64_t t0;                  /* when the pass took its request */
    uint64_t tokens, kv_bytes;    /* for the statistics */
};

/* One client with requests (or a corrupt ring) in the pass. */
struct eng_client {
    struct pd_conn *c;
    struct pb_client rules;
    uint32_t first, last;         /* its items, or NONE */
    uint32_t taken;
    uint32_t posted;              /* completions posted at the end of the pass */
    uint64_t t0;                  /* when the pass took its requests */
    int corrupt;                  /* its rings are broken: disconnect it after the pass */
    int backend_ops;              /* it has a request for the backend in the pass */
};

struct pd_engine {
    struct eng_item *items;
    uint32_t nitems, citems;
    struct eng_client *clients;
    uint32_t nclients, cclients;
    /* The batch, sized with items: ops as taken, ops in launch order, launches, scratch. */
    struct pd_batch_op *in, *out;
    struct pd_launch *launches;
    struct pb_group *groups;
    uint32_t *next;
    uint64_t pass;                /* passes so far (this one included) */
    int decode_in_pass;           /* a DECODE waits for the backend in this pass */
    uint64_t last_decode_pass;    /* the last pass that had one */
    uint64_t last_batch_ns;       /* the backend's time for the last batch with a DECODE */
    uint32_t gather_share;        /* PD_GATHER_SHARE unless PAGEDD_GATHER says otherwise */
    uint64_t gather_max_ns;       /* PD_GATHER_MAX_NS likewise */
    int flush_evictions;          /* an ALLOC or LOOKUP ran: announce evictions afterwards */
    struct pcore_engine_stats total; /* since the engine was made (STATS, pactl stat) */
    struct pcore_engine_stats mark;  /* total when pd_engine_idle last reported */
    const struct pd_engine_env *env; /* what it works with (engine.h), its owner's */
    struct eng_deferred *def;     /* withheld completions, oldest first (ticket order) */
    uint32_t ndef, cdef;
    int defer_enabled;            /* PAGEDD_DEFER=0 (a benchmarking aid) turns deferral off */
    uint32_t split_clients;       /* PD_SPLIT_CLIENTS unless PAGEDD_SPLIT says otherwise */
    uint32_t split_after;         /* PD_SPLIT_AFTER likewise */
    uint32_t idle_big;            /* passes in a row that found the device idle with that many */
    int inflight;                 /* the backend had batches queued at the last pass */
    /* For the idle log line only, per pass that made a batch: completion wake-ups (system
     * calls) and the time they took, the time from the end of one pass's wake-ups to the next
     * pass's backend work, and where the host time of a pass went. */
    struct pass_stats {
        uint64_t wakes, wake_ns, between_ns, betweens;
        uint64_t collect_ns;      /* of between_ns, taking and validating requests (passes
                                   * that made a batch only, like the rest) */
        uint64_t stage_ns, upload_ns, queue_ns;   /* the backend's host work (struct pd_batch) */
        uint64_t uploads_skipped;
        uint64_t meta_inline;     /* batches whose launches carried their metadata */
        uint64_t fused_appends;   /* APPENDs that rode in their DECODEs' launch */
        uint64_t deferred;        /* batches whose completions waited for the device (def) */
        uint64_t retire_wakes, retire_wake_ns;   /* wake-ups when those were posted */
        uint64_t splits;          /* passes split into two batches */
    } host, host_mark;
    uint64_t woke_at;             /* when the last pass's wake-ups ended (0: none since idle) */
    uint64_t pass_collect_ns;     /* this pass's time in collect, counted if it makes a batch */
    uint64_t slow_logged;         /* when a slow batch was last logged */
    struct pd_strikes strikes;    /* timed-out waits per uid (strikes.h) */
    /* Clients whose withheld completions were posted and who are still to be woken. */
    struct pd_conn *wake[PD_ENG_WAKES];
    unsigned nwake;
};

/* Grows *p (an array of *cap elements of size bytes) to hold want; returns 0 or -1. */
int pd_eng_grow(void **p, uint32_t *cap, uint32_t want, size_t size);

/* Returns the first of the owner's connections (the list goes on through pd_conn.next). */
static inline struct pd_conn *eng_conns(const struct pd_engine *e)
{
    return *e->env->conns;
}

/* Disconnects c, whose completion ring's indices are corrupt; returns nothing. */
void pd_eng_kill_corrupt(const struct pd_engine *e, struct pd_conn *c);

/* Wakes c's completion waiter if it sleeps; returns 1 when that took a system call. */
int pd_eng_wake_client(const struct pd_engine *e, struct pd_conn *c);

/* Posts the withheld completions whose batches the backend has finished (or lost to a device
 * fault), oldest first, each client's in its ring order, then wakes each of those clients
 * once; with later set it leaves the wake-ups to pd_eng_wake_retired (or an overflow of
 * e->wake does them at once). Returns how many completions it posted. */
unsigned pd_eng_retire_deferred(struct pd_engine *e, int later);

/* Wakes the clients whose withheld completions were posted since the last call, once each;
 * returns nothing. */
void pd_eng_wake_retired(struct pd_engine *e);

/* Withholds the completions of client record r of a pass whose batch the backend deferred
 * with ticket, in its ring order, and marks the client as having work in flight. The caller
 * has made room in e->def. Returns nothing. */
void pd_eng_defer_client(struct pd_engine *e, struct eng_client *r, uint64_t ticket);

#endif
