/* tally.c: connections counted per uid and kind, and the rule that admits one more. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/tally.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/util/heap.h"
#include "paged.h"

/* What each kind counts, as the refusals name it. */
static const char *const kind_noun[PD_TALLY_KINDS] = {
    "connections that have not said HELLO", "control connections", "clients",
};

/* Returns uid's entry in t, or NULL. */
static struct pd_tally_uid *find(const struct pd_tally *t, uid_t uid)
{
    for (uint32_t i = 0; i < t->len; i++)
        if (t->v[i].uid == uid)
            return &t->v[i];
    return NULL;
}

/* Returns whether uid is root or the daemon's; see tally.h. */
int pd_tally_privileged(const struct pd_tally_limits *lim, uid_t uid)
{
    return uid == 0 || uid == lim->self;
}

/* Says whether one more connection fits; see tally.h. */
int pd_tally_admit(const struct pd_tally *t, const struct pd_tally_limits *lim, uid_t uid,
                   enum pd_tally_kind kind, char *why, size_t size)
{
    const int privileged = pd_tally_privileged(lim, uid);
    const uint32_t mine = pd_tally_count(t, uid, kind);
    if (!privileged && mine >= lim->per_uid[kind]) {
        snprintf(why, size, "uid %u already has %u %s (%s)", (unsigned) uid, mine, kind_noun[kind],
                 lim->per_uid_key[kind]);
        return PAGED_E_LIMIT;
    }
    /* Compared as 64-bit numbers: a bound and its reserve may add up past 32 bits. */
    uint64_t bound = lim->global[kind];
    if (privileged)
        bound += lim->reserve[kind];
    if (t->total[kind] < bound)
        return 0;
    if (lim->global_key[kind] != NULL)
        snprintf(why, size, "pagedd already has %u %s of all uids (%s)", t->total[kind], kind_noun[kind],
                 lim->global_key[kind]);
    else if (privileged)
        snprintf(why, size, "pagedd already has %u %s of all uids (the bound of %u and the %u kept for root "
                 "and the daemon's uid)", t->total[kind], kind_noun[kind], lim->global[kind], lim->reserve[kind]);
    else
        snprintf(why, size, "pagedd already has %u %s of all uids (the bound for all uids)", t->total[kind],
                 kind_noun[kind]);
    return PAGED_E_LIMIT;
}

/* Counts one more; see tally.h. */
int pd_tally_add(struct pd_tally *t, uid_t uid, enum pd_tally_kind kind)
{
    struct pd_tally_uid *e = find(t, uid);
    if (e == NULL) {
        if (t->len == t->cap) {
            uint32_t cap = t->cap != 0 ? t->cap * 2 : 8;
            struct pd_tally_uid *v = pd_realloc(t->v, sizeof *v * cap);
            if (v == NULL)
                return PAGED_E_NOMEM;
            t->v = v;
            t->cap = cap;
        }
        e = &t->v[t->len++];
        memset(e, 0, sizeof *e);
        e->uid = uid;
    }
    e->n[kind]++;
    t->total[kind]++;
    return 0;
}

/* Moves one connection between kinds; see tally.h. */
void pd_tally_move(struct pd_tally *t, uid_t uid, enum pd_tally_kind from, enum pd_tally_kind to)
{
    struct pd_tally_uid *e = find(t, uid);
    if (e == NULL || e->n[from] == 0)
        return;
    e->n[from]--;
    e->n[to]++;
    t->total[from]--;
    t->total[to]++;
}

/* Counts one less; see tally.h. */
void pd_tally_remove(struct pd_tally *t, uid_t uid, enum pd_tally_kind kind)
{
    struct pd_tally_uid *e = find(t, uid);
    if (e == NULL || e->n[kind] == 0)
        return;
    e->n[kind]--;
    t->total[kind]--;
    for (int k = 0; k < PD_TALLY_KINDS; k++)
        if (e->n[k] != 0)
            return;
    *e = t->v[--t->len];    /* order does not matter: the last entry takes its place */
}

/* Returns uid's count of kind; see tally.h. */
uint32_t pd_tally_count(const struct pd_tally *t, uid_t uid, enum pd_tally_kind kind)
{
    const struct pd_tally_uid *e = find(t, uid);
    return e != NULL ? e->n[kind] : 0;
}

/* Frees the entries; see tally.h. */
void pd_tally_free(struct pd_tally *t)
{
    free(t->v);
    memset(t, 0, sizeof *t);
}
