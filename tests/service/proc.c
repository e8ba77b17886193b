/* proc.c: what the service tests do to a running pagedd besides starting and stopping it. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tests/service/proc.h"

#include <dirent.h>
#include <sys/resource.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/tap/basic.h"

/* Stops daemon d with SIGSTOP and waits until it has stopped (kill only asks); returns 0, or
 * -1 when it could not be stopped or seen stopped. */
int td_freeze(struct pagedd *d)
{
    if (d->pid <= 0 || kill(d->pid, SIGSTOP) != 0)
        return -1;
    int st;
    pid_t got;
    while ((got = waitpid(d->pid, &st, WUNTRACED)) < 0 && errno == EINTR)
        ;
    return got == d->pid && WIFSTOPPED(st) ? 0 : -1;
}

/* Reads up to n - 1 bytes of file path into buf (NUL-terminated); returns the count, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t got = read(fd, buf, n - 1);
    close(fd);
    buf[got > 0 ? got : 0] = '\0';
    return got;
}

/* Says whether process pid's main thread sleeps in epoll_wait; see proc.h. */
int td_in_epoll_wait(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/wchan", (long) pid);
    if (read_small(path, buf, sizeof buf) > 0 && strcmp(buf, "0") != 0)
        return strstr(buf, "epoll") != NULL || strstr(buf, "ep_poll") != NULL;
    /* The kernel hides wchan: a task asleep at all (state S, after the command's parentheses)
     * is the best sign left; a daemon still polling its rings is running (R). */
    snprintf(path, sizeof path, "/proc/%ld/stat", (long) pid);
    if (read_small(path, buf, sizeof buf) <= 0)
        return 0;
    const char *end = strrchr(buf, ')');
    return end != NULL && end[1] == ' ' && end[2] == 'S';
}

/* Waits (bounded) until daemon d sleeps in epoll_wait, then freezes it; see proc.h. */
int td_freeze_idle(struct pagedd *d)
{
    for (int i = 0; i < 10000 && !td_in_epoll_wait(d->pid); i++)
        td_pause_ms(1);
    return td_freeze(d);
}

/* Sleeps about us microseconds (a poll's interval, never a synchronization); returns nothing. */
void td_pause_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Sleeps about ms milliseconds; returns nothing. */
void td_pause_ms(int ms)
{
    td_pause_us((long) ms * 1000);
}

/* Reports whether the late completions were engaged; see proc.h. */
void td_check_late_done(const struct pagedd *d, int cpu)
{
    if (cpu && getenv("PAGEDD_CPU_DONE_US") != NULL)
        ok(pagedd_log_contains(d, "(PAGEDD_CPU_DONE_US)"),
           "the cpu backend reported its batches done late, as asked (PAGEDD_CPU_DONE_US)");
}

/* Counts process pid's descriptors; see proc.h. */
int td_fd_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/fd", (long) pid);
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Counts pid's descriptors once the count holds still; see proc.h. */
int td_fd_count_stable(pid_t pid)
{
    int n = td_fd_count(pid), same = 0;
    for (int i = 0; i < 5000 && same < 20; i++) {
        td_pause_ms(1);
        int m = td_fd_count(pid);
        same = m == n ? same + 1 : 0;
        n = m;
    }
    return n;
}

/* Lowers or raises one of pid's soft limits; see proc.h. */
int td_limit(pid_t pid, int resource, unsigned long long n)
{
    struct rlimit lim;
    if (prlimit(pid, resource, NULL, &lim) != 0)
        return -1;
    lim.rlim_cur = (rlim_t) n;
    return prlimit(pid, resource, &lim, NULL);
}

/* Reads what the log says of a planted allocation failure; see proc.h. */
void td_read_allocfail(const struct pagedd *d, struct td_allocfail *o)
{
    memset(o, 0, sizeof *o);
    FILE *f = fopen(d->log, "r");
    char line[512];
    int after = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        const char *c = strstr(line, " allocations counted");
        if (c != NULL)
            for (const char *s = c; s > line && s[-1] >= '0' && s[-1] <= '9'; s--)
                o->counted = strtoull(s - 1, NULL, 10);
        if (strstr(line, "fails on purpose (PAGEDD_FAIL_ALLOC_AT)") != NULL) {
            o->fired = 1;
            after = 0;
            const char *open = strchr(line, '('), *close = open != NULL ? strchr(open, ')') : NULL;
            if (close != NULL)
                snprintf(o->site, sizeof o->site, "%.*s", (int) (close - open - 1), open + 1);
        }
        if (after >= 0 && after < 3) {
            size_t at = strlen(o->logged);
            snprintf(o->logged + at, sizeof o->logged - at, "%s%s", after != 0 ? " | " : "", line);
            after++;
        }
    }
    if (f != NULL)
        fclose(f);
}
