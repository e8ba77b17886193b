/* childrec.c: the record pipe between a service test's client processes and its parent (childrec.h). */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/service/childrec.h"

static int out_fd = -1;
static int child_who;

/* Sets where a child's records go; see childrec.h. */
void cr_child(int fd, int who)
{
    out_fd = fd;
    child_who = who;
}

/* Sends one record; see childrec.h. */
void cr_send(int kind, int ok, int phase, const char *msg)
{
    struct cr_rec r;
    memset(&r, 0, sizeof r);
    r.kind = kind;
    r.who = child_who;
    r.ok = ok;
    r.phase = phase;
    if (msg != NULL)
        snprintf(r.msg, sizeof r.msg, "%s", msg);
    if (write(out_fd, &r, sizeof r) != (ssize_t) sizeof r)
        _exit(90);
}

/* Formats a message and sends it as a check; returns nothing. */
static void send_check(int cond, const char *fmt, va_list ap)
{
    char msg[240];
    vsnprintf(msg, sizeof msg, fmt, ap);
    cr_send(CR_RESULT, cond != 0, 0, msg);
}

/* Reports one check; see childrec.h. */
int cr_check(int cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    send_check(cond, fmt, ap);
    va_end(ap);
    return cond;
}

/* Reports a failed check and exits; see childrec.h. */
void cr_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    send_check(0, fmt, ap);
    va_end(ap);
    _exit(1);
}

/* Waits for the parent's go; see childrec.h. */
void cr_await_go(int fd)
{
    char ch;
    ssize_t n;
    do
        n = read(fd, &ch, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1)
        _exit(2);
}

/* Reads records until count of kind and phase came; see childrec.h. */
int cr_await(int fd, int kind, int phase, int count, int wait_ms)
{
    int seen = 0;
    for (int waited = 0; seen < count && waited < wait_ms;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int rc = poll(&p, 1, 100);
        if (rc < 0 && errno != EINTR)
            sysbail("poll");
        if (rc <= 0) {
            waited += 100;
            continue;
        }
        struct cr_rec r;
        ssize_t n = read(fd, &r, sizeof r);
        if (n == 0)
            return 0;
        if (n != (ssize_t) sizeof r)
            bail("short record from a client (%zd bytes)", n);
        if (r.kind == CR_RESULT)
            ok(r.ok, "%s", r.msg);
        else if (r.kind == kind && (phase == 0 || r.phase == phase))
            seen++;
    }
    return seen == count;
}

/* Returns a file's size; see childrec.h. */
long cr_file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long) sb.st_size : 0;
}

/* Forks the clients; see childrec.h. */
void cr_spawn(struct cr_clients *c, int n, void (*run)(int who, int cmd_fd))
{
    if (n < 1 || n > 64)
        bail("cr_spawn: %d clients", n);
    int rec[2];
    if (pipe(rec) < 0)
        sysbail("pipe");
    c->n = n;
    for (int w = 0; w < n; w++) {
        int p[2];
        if (pipe(p) < 0)
            sysbail("pipe");
        c->pids[w] = bfork();
        if (c->pids[w] == 0) {
            close(rec[0]);
            close(p[1]);
            for (int j = 0; j < w; j++)
                close(c->cmd[j]);
            cr_child(rec[1], w);
            run(w, p[0]);
            _exit(3);
        }
        close(p[0]);
        c->cmd[w] = p[1];
    }
    close(rec[1]);
    c->rec_fd = rec[0];
}

/* Lets the clients go and checks their exits; see childrec.h. */
void cr_reap(struct cr_clients *c)
{
    for (int w = 0; w < c->n; w++) {
        close(c->cmd[w]);
        int st = 0;
        waitpid(c->pids[w], &st, 0);
        is_int(0, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), "client %d exits 0", w);
    }
    close(c->rec_fd);
}
