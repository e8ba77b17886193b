/* hard.c: what the hardening tests share: long mode, clocks, /proc figures, daemon listings. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tests/hard/hard.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/sock.h"

/* Returns whether the long run was asked for. */
int hard_long(void)
{
    const char *v = getenv("PAGED_TEST_LONG");
    return v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}

/* Returns the monotonic clock in nanoseconds. */
uint64_t hard_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Returns a KiB field of /proc/PID/status, or -1. */
long hard_status_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    size_t n = strlen(field);
    snprintf(path, sizeof path, "/proc/%ld/status", (long) pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            kb = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return kb;
}

/* Finds a client by pid in LIST clients; see hard.h. */
int hard_client_by_pid(struct rc_client *c, pid_t pid, struct pcore_client_item *out)
{
    enum { MAXC = 512 };
    static struct pcore_client_item items[MAXC];
    long n = rc_list(c, PCORE_LIST_CLIENTS, "", items, sizeof items[0], MAXC);
    if (n < 0)
        return (int) n;
    for (long i = 0; i < n && i < MAXC; i++)
        if (items[i].pid == (uint32_t) pid && !items[i].control_only) {
            if (out != NULL)
                *out = items[i];
            return 1;
        }
    return 0;
}

/* Reads exactly n bytes within timeout_ms; returns 1 or 0. */
int hard_read_full(int fd, void *buf, size_t n, int timeout_ms)
{
    uint64_t deadline = hard_now_ns() + (uint64_t) timeout_ms * 1000000u;
    size_t have = 0;
    /* Bounded by the deadline and by one byte, at least, per successful read. */
    for (int i = 0; i < 1000000 && have < n; i++) {
        uint64_t now = hard_now_ns();
        if (now >= deadline)
            return 0;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int left = (int) ((deadline - now) / 1000000u) + 1;
        int r = poll(&p, 1, left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        ssize_t got = read(fd, (char *) buf + have, n - have);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return 0;
        have += (size_t) got;
    }
    return have == n;
}

/* Reads a child's report, closes its pipe and reaps it. */
int hard_child_report(int fd, pid_t pid, void *report, size_t n, int timeout_ms, int *status)
{
    int got = hard_read_full(fd, report, n, timeout_ms);
    close(fd);
    *status = -1;
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
    return got;
}

/* Fills n floats with random values in [-1, 1); returns nothing. */
void hard_fill(tap_rng *rng, float *x, size_t n)
{
    tap_rng_fill_uniform(rng, x, n, -1.0, 1.0);
    if (n > 0 && x[0] == 0.0f)
        x[0] = 0.5f;
}

/* Forks a tenant that may drop to another uid; see hard.h. */
pid_t hard_fork_tenant(int drop_to, void (*steps)(int go, int *res, void *ctx), void *ctx, int nres, int *go,
                       int *report)
{
    int g[2], r[2];
    if (pipe(g) < 0 || pipe(r) < 0)
        sysbail("pipe");
    pid_t pid = bfork();
    if (pid == 0) {
        close(g[1]);
        close(r[0]);
        int *res = malloc((size_t) nres * sizeof *res);
        if (res == NULL)
            _exit(1);
        for (int i = 0; i < nres; i++)
            res[i] = -999;
        if (drop_to != -1 && (setgroups(0, NULL) != 0 || setgid((gid_t) drop_to) != 0 || setuid((uid_t) drop_to) != 0))
            _exit(77);
        steps(g[0], res, ctx);
        ssize_t want = (ssize_t) ((size_t) nres * sizeof *res);
        _exit(write(r[1], res, (size_t) want) == want ? 0 : 1);
    }
    close(g[0]);
    close(r[1]);
    *go = g[1];
    *report = r[0];
    return pid;
}
