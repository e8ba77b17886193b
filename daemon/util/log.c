/* log.c: pagedd's log: stderr in the foreground, syslog once daemonized, or a file; with a level. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* The daemon logs from its engine thread only (workers never log), so plain statics do. */
static enum pd_log_level log_level = PD_LOG_INFO;
static int log_syslog;
static int log_fd = -1;              /* the log file, when there is one: it wins over syslog */
static char log_path[4096];

static const char *const level_names[] = { "error", "warning", "info", "debug" };

/* Opens the log: syslog with ident when use_syslog is set, else stderr; returns nothing. */
void pd_log_open(const char *ident, int use_syslog)
{
    if (use_syslog)
        openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
    log_syslog = use_syslog;
}

/* Opens path for appending; returns the descriptor or -1 with errno. */
static int open_log_file(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
}

/* Opens the log file; returns 0 or -1 with errno. */
int pd_log_open_file(const char *path)
{
    if (strlen(path) >= sizeof log_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open_log_file(path);
    if (fd < 0)
        return -1;
    if (log_fd >= 0)
        close(log_fd);
    log_fd = fd;
    memcpy(log_path, path, strlen(path) + 1);
    return 0;
}

/* Reopens the log file under its name; returns 0 or -1 with errno. */
int pd_log_reopen(void)
{
    if (log_fd < 0)
        return 0;
    int fd = open_log_file(log_path);
    if (fd < 0)
        return -1;
    close(log_fd);
    log_fd = fd;
    return 0;
}

/* Returns nonzero when syslog's socket is there (a symbolic link to one, as systemd makes, counts). */
int pd_log_syslog_reachable(void)
{
    struct stat st;
    return stat(_PATH_LOG, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* Closes syslog and the log file if open; returns nothing. */
void pd_log_close(void)
{
    if (log_syslog)
        closelog();
    log_syslog = 0;
    if (log_fd >= 0)
        close(log_fd);
    log_fd = -1;
}

/* Sets the level; returns nothing. */
void pd_log_set_level(enum pd_log_level level)
{
    log_level = level;
}

/* Returns the level. */
enum pd_log_level pd_log_get_level(void)
{
    return log_level;
}

/* Returns nonzero when lines of level are written. */
int pd_log_enabled(enum pd_log_level level)
{
    return level <= log_level;
}

/* Parses a level name; returns 0 or -1 for an unknown name. */
int pd_log_level_parse(const char *s, enum pd_log_level *out)
{
    for (size_t i = 0; i < sizeof level_names / sizeof level_names[0]; i++)
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum pd_log_level) i;
            return 0;
        }
    if (strcmp(s, "warn") == 0) {
        *out = PD_LOG_WARNING;
        return 0;
    }
    return -1;
}

/* Returns the name of a level, "?" for none. */
const char *pd_log_level_name(enum pd_log_level level)
{
    if ((unsigned) level < sizeof level_names / sizeof level_names[0])
        return level_names[level];
    return "?";
}

/* Writes one line from a va_list; returns nothing. */
void pd_vlog(enum pd_log_level level, const char *fmt, va_list ap)
{
    static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
    if (!pd_log_enabled(level))
        return;
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    if (log_syslog && log_fd < 0) {
        syslog(prio[level], "%s", line);
        return;
    }
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    if (log_fd >= 0) {
        /* A file outlives the day: the date and pid too, and one write per line, appended whole. */
        char out[1200];
        int n = snprintf(out, sizeof out, "%04d-%02d-%02d %02d:%02d:%02d.%03ld pagedd[%ld]: [%s] %s\n",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                         ts.tv_nsec / 1000000, (long) getpid(), level_names[level], line);
        if (n > 0 && write(log_fd, out, (size_t) n < sizeof out ? (size_t) n : sizeof out - 1) < 0) {
            /* Nowhere left to say it. */
        }
        return;
    }
    /* One fprintf per line keeps a line whole even if a test reads stderr concurrently. */
    fprintf(stderr, "%02d:%02d:%02d.%03ld pagedd[%s]: %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
            ts.tv_nsec / 1000000, level_names[level], line);
}

/* Writes one line at level; returns nothing. */
void pd_log(enum pd_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pd_vlog(level, fmt, ap);
    va_end(ap);
}
