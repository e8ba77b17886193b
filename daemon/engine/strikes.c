/* strikes.c: timed-out dependency waits counted per uid. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/engine/strikes.h"
#include "daemon/util/heap.h"

/* Returns whether entry e still counts at now. */
static int live(const struct pd_strike *e, uint64_t now)
{
    return now - e->last_ns < PD_STRIKE_WINDOW_NS;
}

/* Returns uid's entry in s, or NULL. */
static struct pd_strike *find(const struct pd_strikes *s, uid_t uid)
{
    for (uint32_t i = 0; i < s->len; i++)
        if (s->v[i].uid == uid)
            return &s->v[i];
    return NULL;
}

/* Counts a strike against uid; see strikes.h. */
uint32_t pd_strikes_add(struct pd_strikes *s, uid_t uid, uint64_t now)
{
    /* Entries whose count ran out go first: the table holds only uids that struck lately. */
    uint32_t kept = 0;
    for (uint32_t i = 0; i < s->len; i++)
        if (live(&s->v[i], now))
            s->v[kept++] = s->v[i];
    s->len = kept;
    struct pd_strike *e = find(s, uid);
    if (e == NULL) {
        if (s->len == s->cap) {
            uint32_t cap = s->cap != 0 ? 2 * s->cap : 8;
            struct pd_strike *v = pd_realloc(s->v, (size_t) cap * sizeof *v);
            if (v == NULL)
                return 0;
            s->v = v;
            s->cap = cap;
        }
        e = &s->v[s->len++];
        *e = (struct pd_strike) { .uid = uid };
    }
    e->n++;
    e->last_ns = now;
    e->warned = 0;
    return e->n;
}

/* Returns uid's count; see strikes.h. */
uint32_t pd_strikes_count(const struct pd_strikes *s, uid_t uid, uint64_t now)
{
    const struct pd_strike *e = find(s, uid);
    return e != NULL && live(e, now) ? e->n : 0;
}

/* Says whether a refusal is still to be logged; see strikes.h. */
int pd_strikes_warn(struct pd_strikes *s, uid_t uid)
{
    struct pd_strike *e = find(s, uid);
    if (e == NULL || e->warned)
        return 0;
    e->warned = 1;
    return 1;
}

/* Frees the table; see strikes.h. */
void pd_strikes_free(struct pd_strikes *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}
