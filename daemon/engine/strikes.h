/* strikes.h: timed-out dependency waits counted per uid, and when a uid's waits are refused. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_ENGINE_STRIKES_H
#define PAGED_DAEMON_ENGINE_STRIKES_H

#include <stdint.h>
#include <sys/types.h>

/*
 * A wait whose word is not reached within dependency-timeout is a strike against its
 * client's uid. Strikes that follow one another by less than PD_STRIKE_WINDOW_NS add up; a
 * uid's count is forgotten once that long has passed since its last strike. While a uid
 * has dependency-strikes of them, the engine refuses its waits whose words it finds short
 * (PAGED_E_LIMIT) instead of holding them: reconnecting does not reset the count, so a
 * worker that never writes its words cannot keep the daemon watching them. No I/O: the
 * engine keeps one table, the tests drive one directly.
 */

#define PD_STRIKE_WINDOW_NS 60000000000ull

/* One uid's strikes. */
struct pd_strike {
    uid_t uid;
    uint32_t n;
    uint64_t last_ns;             /* when the last one came */
    int warned;                   /* a refusal was logged since the count last grew */
};

/* Every uid with strikes not yet forgotten. Zero it before use. */
struct pd_strikes {
    struct pd_strike *v;
    uint32_t len, cap;
};

/* Counts a strike against uid at now (forgetting counts that ran out). Returns uid's count,
 * or 0 when there was no memory for a new entry (nothing counted). */
uint32_t pd_strikes_add(struct pd_strikes *s, uid_t uid, uint64_t now);

/* Returns uid's strikes still counted at now. */
uint32_t pd_strikes_count(const struct pd_strikes *s, uid_t uid, uint64_t now);

/* Returns whether a refusal of uid's waits is still to be logged since its count last grew,
 * and marks it logged. */
int pd_strikes_warn(struct pd_strikes *s, uid_t uid);

/* Frees the table; it is empty and zero again. Returns nothing. */
void pd_strikes_free(struct pd_strikes *s);

#endif
