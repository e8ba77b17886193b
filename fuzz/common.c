/* common.c: what the harnesses share: invariant failures, log level, descriptor leaks. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "fuzz/fuzz.h"

#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/util/log.h"

/* A copy of the standard error taken at setup: libFuzzer's -close_fd_mask=2 later points
 * descriptor 2 at /dev/null, and a broken invariant must still be heard. */
static int report_fd = -1;

/* Writes the failure and aborts; see fuzz.h. */
void fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dprintf(report_fd >= 0 ? report_fd : 2, "\n%s:%d: fuzz invariant broken: %s\n  %s\n", file,
            line, cond, msg);
    abort();
}

/* Sets the log level from the environment and saves the report descriptor; returns nothing. */
void fuzz_log_init(void)
{
    if (report_fd < 0)
        report_fd = dup(2);
    enum pd_log_level level = PD_LOG_ERROR;
    const char *s = getenv("PAGED_FUZZ_LOG");
    if (s != NULL && pd_log_level_parse(s, &level) < 0)
        level = PD_LOG_ERROR;
    pd_log_set_level(level);
}

/* Records the open descriptors of the window; returns nothing. */
void fuzz_fds_snapshot(struct fuzz_fds *s)
{
    static struct pollfd p[FUZZ_FD_WINDOW];
    for (int i = 0; i < FUZZ_FD_WINDOW; i++)
        p[i] = (struct pollfd) { .fd = i, .events = 0 };
    memset(s, 0, sizeof *s);
    if (poll(p, FUZZ_FD_WINDOW, 0) < 0)
        fuzz_fail(__FILE__, __LINE__, "poll", "cannot poll the descriptor window");
    for (int i = 0; i < FUZZ_FD_WINDOW; i++)
        if (!(p[i].revents & POLLNVAL))
            s->open[i / 64] |= UINT64_C(1) << (i % 64);
}

/* Fails on a descriptor opened since before; returns nothing when there is none. */
void fuzz_fds_check(const struct fuzz_fds *before, const char *when)
{
    struct fuzz_fds now;
    fuzz_fds_snapshot(&now);
    for (int i = 0; i < FUZZ_FD_WINDOW; i++) {
        uint64_t bit = UINT64_C(1) << (i % 64);
        if ((now.open[i / 64] & bit) && !(before->open[i / 64] & bit)) {
            char link[64], target[PATH_MAX];
            snprintf(link, sizeof link, "/proc/self/fd/%d", i);
            ssize_t n = readlink(link, target, sizeof target - 1);
            target[n > 0 ? n : 0] = '\0';
            fuzz_fail(__FILE__, __LINE__, "no descriptor leaked",
                      "%s: descriptor %d (%s) is still open", when, i, target);
        }
    }
}
