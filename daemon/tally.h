/* tally.h: connections counted per uid and kind, and the rule that admits one more. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_TALLY_H
#define PAGED_DAEMON_TALLY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Every connection counts as one of three kinds, against the uid its peer credentials name:
 * pending (it has not said HELLO yet), control (a control-only connection: pactl) and client
 * (a worker with a channel). A new one is admitted while its uid is below its share of that
 * kind and all uids together are below the kind's global bound, so one uid that fills its
 * share leaves the rest of the bound to the others. Root and the daemon's own uid are
 * trusted: no share applies to them, and their pending and control connections have a
 * reserve beyond the global bound, so an administrator's pactl gets in however many other
 * uids fill it. No I/O: the server keeps one tally, the tests drive one directly.
 */

enum pd_tally_kind { PD_TALLY_PENDING = 0, PD_TALLY_CONTROL, PD_TALLY_CLIENT, PD_TALLY_KINDS };

struct pd_tally_limits {
    uint32_t per_uid[PD_TALLY_KINDS];  /* one unprivileged uid's share */
    uint32_t global[PD_TALLY_KINDS];   /* every uid together */
    uint32_t reserve[PD_TALLY_KINDS];  /* beyond global, for root and the daemon's uid only */
    const char *per_uid_key[PD_TALLY_KINDS];  /* the settings that set the shares */
    const char *global_key[PD_TALLY_KINDS];   /* the setting of each global bound, or NULL */
    uid_t self;                        /* the daemon's own uid */
};

/* One uid's counts. */
struct pd_tally_uid {
    uid_t uid;
    uint32_t n[PD_TALLY_KINDS];
};

/* The counts: per uid (only uids with a connection have an entry) and in all. Zero it
 * before use. */
struct pd_tally {
    struct pd_tally_uid *v;
    uint32_t len, cap;
    uint32_t total[PD_TALLY_KINDS];
};

/* Returns whether uid is trusted beyond the shares: root or lim->self. */
int pd_tally_privileged(const struct pd_tally_limits *lim, uid_t uid);

/*
 * Says whether one more connection of kind from uid fits lim. Returns 0, or PAGED_E_LIMIT
 * with why (NUL-terminated, cut to size) naming the uid, the count, what it counts and the
 * setting that bounds it, e.g. "uid 65534 already has 16 connections that have not said
 * HELLO (max-pending-per-uid)".
 */
int pd_tally_admit(const struct pd_tally *t, const struct pd_tally_limits *lim, uid_t uid,
                   enum pd_tally_kind kind, char *why, size_t size);

/* Counts one more connection of kind for uid. Returns 0, or PAGED_E_NOMEM when uid had no
 * entry and there was no memory for one (nothing counted). */
int pd_tally_add(struct pd_tally *t, uid_t uid, enum pd_tally_kind kind);

/* Moves one of uid's connections from kind from to kind to (a HELLO taken); it allocates
 * nothing, so it cannot fail. Returns nothing. */
void pd_tally_move(struct pd_tally *t, uid_t uid, enum pd_tally_kind from, enum pd_tally_kind to);

/* Counts one connection of kind of uid less, dropping uid's entry once it counts nothing.
 * Returns nothing. */
void pd_tally_remove(struct pd_tally *t, uid_t uid, enum pd_tally_kind kind);

/* Returns how many connections of kind uid has. */
uint32_t pd_tally_count(const struct pd_tally *t, uid_t uid, enum pd_tally_kind kind);

/* Frees the entries; the tally is empty and zero again. Returns nothing. */
void pd_tally_free(struct pd_tally *t);

#endif
