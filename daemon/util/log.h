/* log.h: pagedd's log: stderr in the foreground, syslog once daemonized, or a file; with a level. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_UTIL_LOG_H
#define PAGED_DAEMON_UTIL_LOG_H

#include <stdarg.h>

/* Levels in syslog order; a message is written when its level is at most the current one. */
enum pd_log_level {
    PD_LOG_ERROR = 0,
    PD_LOG_WARNING = 1,
    PD_LOG_INFO = 2,
    PD_LOG_DEBUG = 3,
};

#if defined(__GNUC__)
#define PD_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PD_PRINTF(f, a)
#endif

/* Sets where lines go: 0 for stderr, nonzero for syslog (opened with ident). */
void pd_log_open(const char *ident, int use_syslog);
/* Sends every later line to the file at path, appended (created 0640), whatever pd_log_open
 * says. Returns 0, or -1 with errno when it cannot be opened. */
int pd_log_open_file(const char *path);
/* Reopens the log file, if there is one, so that a file rotated away is followed by a new one.
 * Returns 0, or -1 with errno (the old file stays in use). */
int pd_log_reopen(void);
/* Returns whether syslog's socket exists, so that lines sent to syslog reach somebody. */
int pd_log_syslog_reachable(void);
/* Closes syslog and the log file if open; later lines go to stderr. */
void pd_log_close(void);
/* Sets the level below which lines are dropped. */
void pd_log_set_level(enum pd_log_level level);
/* Returns the current level. */
enum pd_log_level pd_log_get_level(void);
/* Returns whether a line of level would be written, to skip building costly messages. */
int pd_log_enabled(enum pd_log_level level);

/* Parses "error", "warning", "info" or "debug"; returns 0 and sets *out, or -1. */
int pd_log_level_parse(const char *s, enum pd_log_level *out);
/* Returns the name of a level. */
const char *pd_log_level_name(enum pd_log_level level);

/* Writes one line at level. */
void pd_log(enum pd_log_level level, const char *fmt, ...) PD_PRINTF(2, 3);
/* Writes one line at level from a va_list. */
void pd_vlog(enum pd_log_level level, const char *fmt, va_list ap) PD_PRINTF(2, 0);

#endif
