/* tpactl.c: what the pactl tests share: pactl and holder runs, their output, subscriber lines. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tests/tools/tpactl.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"

char tp_pactl[PATH_MAX], tp_holder[PATH_MAX];

/* The signal mask from before tp_init blocked SIGCHLD; children get it back. */
static sigset_t saved_mask;

/* Finds a program under the build tree; returns 0 if it is there. */
static int find_program(char *out, const char *top, const char *rel)
{
    snprintf(out, PATH_MAX, "%s/%s", top, rel);
    return access(out, X_OK);
}

/* Finds the programs, sets the signals up and makes d's directory; see tpactl.h. */
void tp_init(struct pagedd *d)
{
    const char *top = getenv("top_builddir");
    if (top == NULL)
        top = ".";
    if (access(pagedd_path(), X_OK) != 0)
        skip_all("daemon/pagedd is not built");
    if (find_program(tp_pactl, top, "tools/pactl") != 0
        || find_program(tp_holder, top, "tests/tools/pactl-holder") != 0)
        skip_all("tools/pactl or tests/tools/pactl-holder is not built");
    signal(SIGPIPE, SIG_IGN);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &saved_mask);
    pagedd_mkdir(d);
    plan_lazy();
}

/* Starts d and waits for its READY, or bails; returns nothing. */
void tp_start_daemon(struct pagedd *d, const char *const *args)
{
    int st;
    if (pagedd_start(d, args, NULL, &st) != 0)
        bail("pagedd did not become ready (wait status %d)", st);
}

/* Stops d, checks its exit and cleans up; returns nothing. */
void tp_stop_daemon(struct pagedd *d)
{
    int st = pagedd_stop(d);
    is_int(0, st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, "pagedd exits 0 on SIGTERM");
    pagedd_cleanup(d);
}

/* Returns CLOCK_MONOTONIC in milliseconds. */
long long tp_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* In a new child: switches to uid (its only group the one of the same number) unless uid is
 * (uid_t) -1; exits 77 when it cannot. Returns nothing. */
static void child_become(uid_t uid)
{
    if (uid == (uid_t) -1)
        return;
    if (setgroups(0, NULL) != 0 || setgid((gid_t) uid) != 0 || setuid(uid) != 0 || getuid() != uid)
        _exit(77);
}

/* Starts argv as uid with piped stdin and stdout; returns the child. */
struct tp_child tp_spawn_as(uid_t uid, char *const argv[])
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
        sysbail("pipe");
    pid_t pid = bfork();
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &saved_mask, NULL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        child_become(uid);
        execv(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    return (struct tp_child) { pid, in[1], out[0] };
}

/* Starts argv with piped stdin and stdout; returns the child. */
struct tp_child tp_spawn(char *const argv[])
{
    return tp_spawn_as((uid_t) -1, argv);
}

/* Waits for pid in sigtimedwait until a child exits, up to ms; returns how it ended. */
int tp_reap(pid_t pid, int ms)
{
    long long deadline = tp_now_ms() + ms;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int status;
    for (;;) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            break;
        long long left = deadline - tp_now_ms();
        if (got < 0 || left <= 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        struct timespec ts = { .tv_sec = left / 1000, .tv_nsec = left % 1000 * 1000000 };
        sigtimedwait(&chld, NULL, &ts);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Reads one line from fd within ms; returns its length or -1. */
long tp_read_line(int fd, char *buf, size_t size, int ms)
{
    long long deadline = tp_now_ms() + ms;
    size_t n = 0;
    while (n + 1 < size) {
        long long left = deadline - tp_now_ms();
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (left <= 0 || poll(&p, 1, (int) left) <= 0)
            return -1;
        char c;
        if (read(fd, &c, 1) != 1)
            return -1;
        if (c == '\n')
            break;
        buf[n++] = c;
    }
    buf[n] = '\0';
    return (long) n;
}

/* Appends what fd has to *buf; returns 0 at end of file, 1 if more may come. */
static int drain(int fd, char **buf, size_t *len)
{
    char tmp[4096];
    ssize_t n = read(fd, tmp, sizeof tmp);
    if (n <= 0)
        return 0;
    *buf = brealloc(*buf, *len + (size_t) n + 1);
    memcpy(*buf + *len, tmp, (size_t) n);
    *len += (size_t) n;
    (*buf)[*len] = '\0';
    return 1;
}

/* Runs argv as uid and collects its output; see tpactl.h. */
void tp_run_as(struct tp_run *r, uid_t uid, char *const argv[])
{
    int out[2], err[2];
    memset(r, 0, sizeof *r);
    r->out = bstrdup("");
    r->err = bstrdup("");
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
        sysbail("pipe");
    pid_t pid = bfork();
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &saved_mask, NULL);
        dup2(out[1], 1);
        dup2(err[1], 2);
        child_become(uid);
        execv(argv[0], argv);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    long long deadline = tp_now_ms() + TP_RUN_MS;
    int open_out = 1, open_err = 1;
    while ((open_out || open_err) && tp_now_ms() < deadline) {
        struct pollfd p[2] = { { .fd = open_out ? out[0] : -1, .events = POLLIN },
                               { .fd = open_err ? err[0] : -1, .events = POLLIN } };
        if (poll(p, 2, (int) (deadline - tp_now_ms())) <= 0)
            continue;
        if (p[0].revents && !drain(out[0], &r->out, &r->out_len))
            open_out = 0;
        if (p[1].revents && !drain(err[0], &r->err, &r->err_len))
            open_err = 0;
    }
    close(out[0]);
    close(err[0]);
    r->status = tp_reap(pid, 1000);
}

/* Runs pactl with the given arguments and collects its output; see tpactl.h. */
void tp_run_pactl(struct tp_run *r, ...)
{
    char *argv[16];
    int argc = 0;
    va_list ap;
    argv[argc++] = tp_pactl;
    va_start(ap, r);
    for (char *a; argc < 15 && (a = va_arg(ap, char *)) != NULL;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    tp_run_as(r, (uid_t) -1, argv);
}

/* Frees a run's output. */
void tp_run_free(struct tp_run *r)
{
    free(r->out);
    free(r->err);
}

/* Returns whether uid can run pactl here; see tpactl.h. */
int tp_pactl_runs_as(uid_t uid)
{
    struct tp_run r;
    char *argv[] = { tp_pactl, "-V", NULL };
    tp_run_as(&r, uid, argv);
    int runs = r.status == 0;
    tp_run_free(&r);
    return runs;
}

/* Parses a run's standard output as one JSON document; returns it or NULL. */
struct tj *tp_run_json(const struct tp_run *r)
{
    char err[200];
    struct tj *v = tj_parse(r->out, r->out_len, err, sizeof err);
    if (v == NULL)
        diag("invalid JSON (%s): %s", err, r->out);
    return v;
}

/* Returns whether text is exactly one line, ending with a newline. */
int tp_one_line(const char *text)
{
    const char *nl = strchr(text, '\n');
    return nl != NULL && nl[1] == '\0';
}

/* Starts a holder as uid and waits for its "ready ID"; returns it. */
struct tp_child tp_start_holder_as(uid_t uid, const char *socket, const char *name, const char *pool,
                                   const char *hold, const char *cache, uint32_t *id)
{
    char *const argv[] = { tp_holder, (char *) socket, (char *) name, (char *) pool, (char *) hold,
                           (char *) cache, NULL };
    struct tp_child h = tp_spawn_as(uid, argv);
    char line[256] = "";
    unsigned got;
    if (tp_read_line(h.out, line, sizeof line, TP_READY_MS) < 0 || sscanf(line, "ready %u", &got) != 1)
        bail("holder %s did not start: %s", name, line);
    *id = got;
    return h;
}

/* Starts a holder as the test's user; returns it. */
struct tp_child tp_start_holder(const char *socket, const char *name, const char *pool,
                                const char *hold, const char *cache, uint32_t *id)
{
    return tp_start_holder_as((uid_t) -1, socket, name, pool, hold, cache, id);
}

/* Tells a holder to finish and waits for it; returns its exit status. */
int tp_stop_holder(struct tp_child *h)
{
    close(h->in);
    close(h->out);
    return tp_reap(h->pid, TP_RUN_MS);
}

/* Reads JSON subscriber lines until the event comes; returns 1 if it did. */
int tp_await_event(int fd, const char *type, uint32_t id, int *bad)
{
    long long deadline = tp_now_ms() + TP_EVENT_MS;
    char line[1024], err[200];
    while (tp_now_ms() < deadline) {
        long n = tp_read_line(fd, line, sizeof line, (int) (deadline - tp_now_ms()));
        if (n < 0)
            return 0;
        struct tj *v = tj_parse(line, (size_t) n, err, sizeof err);
        if (v == NULL) {
            diag("subscriber line is not JSON (%s): %s", err, line);
            (*bad)++;
            continue;
        }
        int hit = tj_str(v, "event") != NULL && strcmp(tj_str(v, "event"), type) == 0
                  && tj_num(v, "client_id") == id;
        tj_free(v);
        if (hit)
            return 1;
    }
    return 0;
}

/* Starts probe holders until the subscriber shows one's connect; returns whether it did. */
int tp_probe_subscription(const char *socket, int fd, const char *prefix, int *bad, int *disconnected)
{
    int connected = 0;
    for (int attempt = 0; attempt < 5 && !connected; attempt++) {
        uint32_t id;
        char name[32];
        snprintf(name, sizeof name, "%s-%d", prefix, attempt);
        struct tp_child h = tp_start_holder(socket, name, "t1", "0", "0", &id);
        connected = tp_await_event(fd, "connect", id, bad);
        tp_stop_holder(&h);
        if (connected && disconnected != NULL)
            *disconnected = tp_await_event(fd, "disconnect", id, bad);
    }
    return connected;
}
