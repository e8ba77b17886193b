/* spawn.c: start a real pagedd for a test on a temporary socket, and stop it for sure. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tests/service/spawn.h"

#include <dirent.h>
#include <sys/resource.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/tap/basic.h"

/* Daemons to kill at exit, whatever happens to the test. */
#define MAX_DAEMONS 16
static pid_t live[MAX_DAEMONS];
static int atexit_done;

/* Kills every daemon still running; the atexit hook. Returns nothing. */
static void kill_all(void)
{
    for (int i = 0; i < MAX_DAEMONS; i++)
        if (live[i] > 0) {
            kill(live[i], SIGKILL);
            waitpid(live[i], NULL, 0);
            live[i] = 0;
        }
}

/* Remembers pid for kill_all; returns nothing. */
static void track(pid_t pid)
{
    if (!atexit_done) {
        atexit(kill_all);
        atexit_done = 1;
    }
    for (int i = 0; i < MAX_DAEMONS; i++)
        if (live[i] == 0) {
            live[i] = pid;
            return;
        }
}

/* Forgets pid; returns nothing. */
static void untrack(pid_t pid)
{
    for (int i = 0; i < MAX_DAEMONS; i++)
        if (live[i] == pid)
            live[i] = 0;
}

/* Forgets every daemon (in a forked child); returns nothing. */
void td_forget_all(void)
{
    for (int i = 0; i < MAX_DAEMONS; i++)
        live[i] = 0;
}

/* Returns the pagedd path. */
const char *td_pagedd_path(void)
{
    static char path[1024];
    const char *top = getenv("top_builddir");
    snprintf(path, sizeof path, "%s/daemon/pagedd", top != NULL ? top : "..");
    return path;
}

/* Stops daemon d with SIGSTOP and waits until it has stopped (kill only asks); returns 0, or
 * -1 when it could not be stopped or seen stopped. */
int td_freeze(struct td_daemon *d)
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

/* Says whether process pid's main thread sleeps in epoll_wait; see spawn.h. */
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

/* Waits (bounded) until daemon d sleeps in epoll_wait, then freezes it; see spawn.h. */
int td_freeze_idle(struct td_daemon *d)
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

/* Makes the temporary directory; returns nothing. */
void td_mkdir(struct td_daemon *d)
{
    memset(d, 0, sizeof *d);
    const char *tmp = getenv("TMPDIR");
    snprintf(d->dir, sizeof d->dir, "%s/paged-svc-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(d->dir) == NULL)
        sysbail("mkdtemp %s", d->dir);
    snprintf(d->socket, sizeof d->socket, "%s/pagedd.sock", d->dir);
    snprintf(d->log, sizeof d->log, "%s/pagedd.log", d->dir);
}

/* Starts the daemon; returns 0 or -1. */
int td_start(struct td_daemon *d, const char *const *extra, int *status)
{
    int pfd[2];
    if (d->dir[0] == '\0')
        td_mkdir(d);
    if (pipe(pfd) < 0)
        sysbail("pipe");
    const char *argv[96];
    char fdarg[32];
    int n = 0;
    /* $PAGED_DAEMON_WRAPPER runs the daemon under another program (valgrind), its words
     * split at blanks, no quoting; the wrapper is found on PATH. */
    char wrap[1024] = "";
    const char *w = getenv("PAGED_DAEMON_WRAPPER");
    if (w != NULL)
        snprintf(wrap, sizeof wrap, "%s", w);
    char *save = NULL;
    for (char *word = strtok_r(wrap, " \t", &save); word != NULL && n < 24;
         word = strtok_r(NULL, " \t", &save))
        argv[n++] = word;
    snprintf(fdarg, sizeof fdarg, "--ready-fd=%d", pfd[1]);
    argv[n++] = td_pagedd_path();
    argv[n++] = "--foreground";
    argv[n++] = fdarg;
    argv[n++] = "--socket";
    argv[n++] = d->socket;
    /* The cpu backend unless the test says otherwise (a later --backend wins): "auto" would
     * pick cuda on a GPU machine, and these tests speak to the host arena. */
    char backend[64];
    const char *be = getenv("PAGED_TEST_BACKEND");
    snprintf(backend, sizeof backend, "--backend=%s", be != NULL && *be != '\0' ? be : "cpu");
    argv[n++] = backend;
    argv[n++] = "--config";
    argv[n++] = "/dev/null";
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 94; i++) {
        /* A test that names its own config file replaces /dev/null. */
        if (strcmp(extra[i], "--config") == 0 && extra[i + 1] != NULL) {
            argv[n - 1] = extra[++i];
            continue;
        }
        argv[n++] = extra[i];
    }
    argv[n] = NULL;
    pid_t pid = bfork();
    if (pid == 0) {
        close(pfd[0]);
        int log = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (log >= 0) {
            dup2(log, STDERR_FILENO);
            close(log);
        }
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO);
            close(null);
        }
        /* The daemon inherits nothing of the test's but the readiness pipe: a stray copy of
         * a test pipe or socket would keep its other end from ever seeing end of file. */
        for (int fd = 3; fd < 1024; fd++)
            if (fd != pfd[1])
                close(fd);
        execvp(argv[0], (char *const *) argv);
        _exit(127);
    }
    track(pid);
    close(pfd[1]);
    d->pid = pid;
    char buf[16] = { 0 };
    struct pollfd p = { .fd = pfd[0], .events = POLLIN };
    ssize_t got = 0;
    if (poll(&p, 1, 30000) > 0)
        got = read(pfd[0], buf, sizeof buf - 1);
    close(pfd[0]);
    if (got > 0 && strncmp(buf, "READY", 5) == 0)
        return 0;
    /* Not ready: it exited (its status) or hangs (kill it). */
    int st = 0;
    for (int i = 0; i < 5000; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            untrack(pid);
            d->pid = 0;
            if (status != NULL)
                *status = st;
            return -1;
        }
        td_pause_ms(1);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    untrack(pid);
    d->pid = 0;
    if (status != NULL)
        *status = st;
    return -1;
}

/* Stops the daemon; returns its wait status or -1. */
int td_stop(struct td_daemon *d)
{
    if (d->pid <= 0)
        return -1;
    int st = -1;
    kill(d->pid, SIGTERM);
    for (int i = 0; i < 20000; i++) {
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            untrack(d->pid);
            d->pid = 0;
            return st;
        }
        td_pause_ms(1);
    }
    diag("pagedd %ld ignored SIGTERM for 20 s: killing it", (long) d->pid);
    kill(d->pid, SIGKILL);
    waitpid(d->pid, &st, 0);
    untrack(d->pid);
    d->pid = 0;
    return -1;
}

/* Removes the directory; returns nothing. */
void td_cleanup(struct td_daemon *d)
{
    if (d->dir[0] == '\0')
        return;
    if (getenv("PAGED_TEST_KEEP") != NULL) {
        diag("kept %s", d->dir);
        return;
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->dir);
    if (system(cmd) != 0)
        diag("could not remove %s", d->dir);
    d->dir[0] = '\0';
}

/* Reports whether the late completions were engaged; see spawn.h. */
void td_check_late_done(const struct td_daemon *d, int cpu)
{
    if (cpu && getenv("PAGEDD_CPU_DONE_US") != NULL)
        ok(td_log_contains(d, "(PAGEDD_CPU_DONE_US)"),
           "the cpu backend reported its batches done late, as asked (PAGEDD_CPU_DONE_US)");
}

/* Returns whether the log contains needle. */
int td_log_contains(const struct td_daemon *d, const char *needle)
{
    FILE *f = fopen(d->log, "r");
    if (f == NULL)
        return 0;
    char line[2048];
    int found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/* Waits for the log to contain needle; returns 1 or 0. */
int td_log_wait(const struct td_daemon *d, const char *needle, int timeout_ms)
{
    for (int i = 0; i < timeout_ms; i++) {
        if (td_log_contains(d, needle))
            return 1;
        td_pause_ms(1);
    }
    return td_log_contains(d, needle);
}

/* Counts process pid's descriptors; see spawn.h. */
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

/* Counts pid's descriptors once the count holds still; see spawn.h. */
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

/* Lowers or raises one of pid's soft limits; see spawn.h. */
int td_limit(pid_t pid, int resource, unsigned long long n)
{
    struct rlimit lim;
    if (prlimit(pid, resource, NULL, &lim) != 0)
        return -1;
    lim.rlim_cur = (rlim_t) n;
    return prlimit(pid, resource, &lim, NULL);
}

/* Reads what the log says of a planted allocation failure; see spawn.h. */
void td_read_allocfail(const struct td_daemon *d, struct td_allocfail *o)
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
