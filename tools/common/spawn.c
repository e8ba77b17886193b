/* spawn.c: start a pagedd of one's own, wait until it serves, stop it and reap it: for the tools and the tests. */
/* SPDX-License-Identifier: MIT */
/*
 * The one spawner of pagedd, shared by paged-bench, paged-demo and (through
 * tests/tap/pagedd.c) every test that starts a daemon. It is built without the TAP library
 * and never exits or prints: installed tools link it, so it reports each failure as -1 and
 * a reason, and the tests' layer turns that into a bail. spawn.h says more.
 */
#include "config.h"

#include "tools/common/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "lib/core/clock.h"

extern char **environ;

/* The descriptor a child's kept descriptor (pagedd's --ready-fd) becomes. */
#define SPAWN_KEPT_FD 3

/* How long a daemon that did not say READY gets to exit before it is killed. */
#define SPAWN_EXIT_MS 5000

/* Children the exit hook kills, each with the process that tracked it and its directory. */
#define SPAWN_MAX_TRACKED 64
static struct spawn_tracked {
    pid_t pid;          /* the child, 0 for a free slot */
    pid_t owner;        /* the process that tracked it: only that one kills it at exit */
    char dir[512];      /* a directory to remove once it is dead, "" for none */
} tracked[SPAWN_MAX_TRACKED];
static int hook_set;

/* Returns the milliseconds from now to deadline (both pcore_now_ns values), rounded up and
 * at most INT_MAX; 0 when the deadline has passed. */
static int ms_left(uint64_t deadline, uint64_t now)
{
    if (now >= deadline)
        return 0;
    uint64_t ms = (deadline - now + 999999u) / 1000000u;
    return ms > INT_MAX ? INT_MAX : (int) ms;
}

/* Returns the pcore_now_ns deadline timeout_ms from now (a negative timeout is 0). */
static uint64_t deadline_in(int timeout_ms)
{
    return pcore_now_ns() + (uint64_t) (timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
}

/* Returns a pidfd for child pid (it polls readable once the child has ended), or -1 where
 * the kernel has none. */
static int open_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int) syscall(SYS_pidfd_open, pid, 0);
#else
    (void) pid;
    return -1;
#endif
}

/* Waits until deadline for child pid to end, reaping it into *status. Returns 1 when it was
 * reaped, 0 when it still runs at the deadline, -1 when it is no child of ours. */
static int wait_until(pid_t pid, uint64_t deadline, int *status)
{
    int pidfd = open_pidfd(pid), rc = 0;
    /* Bounded by the deadline: every pass sleeps until the child ends or the time is up. */
    for (;;) {
        pid_t got = waitpid(pid, status, WNOHANG);
        if (got == pid) {
            rc = 1;
            break;
        }
        if (got < 0 && errno != EINTR) {
            rc = -1;
            break;
        }
        int left = ms_left(deadline, pcore_now_ns());
        if (left == 0)
            break;
        if (pidfd >= 0) {
            struct pollfd p = { .fd = pidfd, .events = POLLIN };
            (void) poll(&p, 1, left);
        } else {
            /* No pidfd: look again in a millisecond. */
            (void) poll(NULL, 0, 1);
        }
    }
    if (pidfd >= 0)
        close(pidfd);
    return rc;
}

/* Waits for a child to end; see spawn.h. */
int spawn_wait(pid_t pid, int timeout_ms)
{
    int status = -1;
    return pid > 0 && wait_until(pid, deadline_in(timeout_ms), &status) == 1 ? status : -1;
}

/* Stops, reaps and forgets a child; see spawn.h. */
int spawn_stop(pid_t pid, int signo, int timeout_ms, int *killed)
{
    if (killed != NULL)
        *killed = 0;
    if (pid <= 0)
        return -1;
    /* SIGCONT first, so that a frozen child wakes to see signo. After signo a running child may
     * already be exiting, and a SIGCONT then can cancel the SIGSTOP of a ptrace attach (the
     * LeakSanitizer run at exit of a sanitized pagedd), which then never completes. */
    if (signo != SIGKILL)
        kill(pid, SIGCONT);
    kill(pid, signo);
    int status = -1;
    int rc = wait_until(pid, deadline_in(timeout_ms), &status);
    if (rc == 0) {
        if (killed != NULL)
            *killed = signo != SIGKILL;
        kill(pid, SIGKILL);
        /* SIGKILL cannot be caught: the wait ends. */
        while (waitpid(pid, &status, 0) < 0)
            if (errno != EINTR) {
                status = -1;
                break;
            }
    }
    spawn_untrack(pid);
    return rc < 0 ? -1 : status;
}

/* Describes a wait status; returns buf. */
char *spawn_describe(char *buf, size_t size, int status)
{
    if (status < 0)
        snprintf(buf, size, "not reaped");
    else if (WIFEXITED(status))
        snprintf(buf, size, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, size, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(buf, size, "wait status %#x", (unsigned) status);
    return buf;
}

/* Returns a new environment: ours with each NAME=VALUE of env replacing the setting of its
 * name or added to it (a malloc'd array of borrowed strings), or NULL when out of memory. */
static char **merged_env(const char *const *env)
{
    size_t ours = 0, extra = 0;
    while (environ[ours] != NULL)
        ours++;
    while (env[extra] != NULL)
        extra++;
    char **out = malloc((ours + extra + 1) * sizeof *out);
    if (out == NULL)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < ours; i++) {
        int replaced = 0;
        for (size_t j = 0; j < extra && !replaced; j++) {
            size_t name = strcspn(env[j], "=");
            replaced = strncmp(environ[i], env[j], name + 1) == 0;
        }
        if (!replaced)
            out[n++] = environ[i];
    }
    for (size_t j = 0; j < extra; j++)
        out[n++] = (char *) env[j];
    out[n] = NULL;
    return out;
}

/* In the child: opens path with flags and makes it descriptor fd. Returns 0 or -1. */
static int redirect(int fd, const char *path, int flags)
{
    int f = open(path, flags | O_CLOEXEC, 0600);
    if (f < 0)
        return -1;
    if (f == fd)   /* the descriptor was free: only close-on-exec is to go */
        return fcntl(fd, F_SETFD, 0);
    int rc = dup2(f, fd) == fd ? 0 : -1;
    close(f);
    return rc;
}

/* In the child: closes every descriptor from first up. Returns nothing. */
static void close_from(int first)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned) first, ~0U, 0) == 0)
        return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536)
        max = 65536;
    for (int fd = first; fd < max; fd++)
        (void) close(fd);
}

/* In the freshly forked child: sets it up as spawn_cmd says and runs argv with envp; never
 * returns. */
static void child_exec(const struct spawn_cmd *cmd, int keep_fd, const char *const *argv,
                       char **envp, pid_t parent)
{
#ifdef __linux__
    if (cmd->death_signal != 0
        && (prctl(PR_SET_PDEATHSIG, cmd->death_signal) != 0 || getppid() != parent))
        _exit(127);
#else
    (void) parent;
#endif
    /* Out of the way of the standard descriptors about to be replaced. */
    if (keep_fd >= 0 && keep_fd < SPAWN_KEPT_FD)
        keep_fd = fcntl(keep_fd, F_DUPFD_CLOEXEC, SPAWN_KEPT_FD);
    const char *failed = NULL;
    if (cmd->err != NULL && redirect(STDERR_FILENO, cmd->err, O_WRONLY | O_CREAT | O_APPEND) != 0)
        failed = cmd->err;
    else if (redirect(STDIN_FILENO, "/dev/null", O_RDONLY) != 0)
        failed = "/dev/null";
    else if (cmd->out != NULL && redirect(STDOUT_FILENO, cmd->out, O_WRONLY | O_CREAT | O_APPEND) != 0)
        failed = cmd->out;
    if (failed != NULL) {
        dprintf(STDERR_FILENO, "cannot open %s for %s: %s\n", failed, argv[0], strerror(errno));
        _exit(127);
    }
    if (keep_fd == SPAWN_KEPT_FD)
        (void) fcntl(keep_fd, F_SETFD, 0);
    else if (keep_fd >= 0 && dup2(keep_fd, SPAWN_KEPT_FD) != SPAWN_KEPT_FD)
        _exit(127);
    close_from(keep_fd >= 0 ? SPAWN_KEPT_FD + 1 : SPAWN_KEPT_FD);
    struct rlimit lim = { (rlim_t) cmd->nofile, (rlim_t) cmd->nofile };
    if (cmd->nofile != 0 && setrlimit(RLIMIT_NOFILE, &lim) != 0)
        _exit(126);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    environ = envp;
    execvp(argv[0], (char *const *) argv);
    dprintf(STDERR_FILENO, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* Appends the NULL-terminated words to argv at *n, at most SPAWN_MAX_ARGS in all. Returns 0,
 * or -1 when they do not fit. */
static int append_words(const char **argv, int *n, const char *const *words)
{
    for (int i = 0; words != NULL && words[i] != NULL; i++) {
        if (*n >= SPAWN_MAX_ARGS)
            return -1;
        argv[(*n)++] = words[i];
    }
    return 0;
}

/* Starts a child; see spawn.h. */
pid_t spawn_cmd(const struct spawn_cmd *cmd, int keep_fd, char *err, size_t errsize)
{
    const char *argv[SPAWN_MAX_ARGS + 1];
    int n = 0;
    if (append_words(argv, &n, cmd->wrapper) != 0 || append_words(argv, &n, cmd->argv) != 0) {
        snprintf(err, errsize, "more than %d words in the command", SPAWN_MAX_ARGS);
        return -1;
    }
    if (n == 0) {
        snprintf(err, errsize, "no program to run");
        return -1;
    }
    argv[n] = NULL;
    char **envp = cmd->env != NULL ? merged_env(cmd->env) : environ;
    if (envp == NULL) {
        snprintf(err, errsize, "no memory for the environment of %s", argv[0]);
        return -1;
    }
    /* What stdio holds must not be written twice, once by the child. */
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        child_exec(cmd, keep_fd, argv, envp, parent);
    int saved = errno;
    if (envp != environ)
        free(envp);
    if (pid < 0)
        snprintf(err, errsize, "fork for %s: %s", argv[0], strerror(saved));
    return pid;
}

/* Runs a child to its end; see spawn.h. */
int spawn_run(const struct spawn_cmd *cmd, int timeout_ms, char *err, size_t errsize)
{
    pid_t pid = spawn_cmd(cmd, -1, err, errsize);
    if (pid < 0)
        return -1;
    int status = spawn_wait(pid, timeout_ms);
    if (status != -1)
        return status;
    spawn_stop(pid, SIGKILL, SPAWN_EXIT_MS, NULL);
    snprintf(err, errsize, "%s did not end within %d ms: killed", cmd->argv[0], timeout_ms);
    return -1;
}

/* Returns whether the options name a configuration file (--config FILE or --config=FILE). */
static int names_config(const char *const *args)
{
    for (int i = 0; args != NULL && args[i] != NULL; i++)
        if (strcmp(args[i], "--config") == 0 || strncmp(args[i], "--config=", 9) == 0)
            return 1;
    return 0;
}

/* Reads the daemon's readiness line from fd until deadline. Returns 1 for READY, 0 when fd
 * ended (or said something else) first, -1 when the time ran out. */
static int read_ready(int fd, uint64_t deadline)
{
    char buf[16];
    size_t have = 0;
    /* Bounded by the deadline and by the buffer, which each read fills by a byte at least. */
    while (have < sizeof buf - 1 && memchr(buf, '\n', have) == NULL) {
        int left = ms_left(deadline, pcore_now_ns());
        if (left == 0)
            return -1;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int rc = poll(&p, 1, left);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc == 0)
            return -1;
        ssize_t got = rc > 0 ? read(fd, buf + have, sizeof buf - 1 - have) : -1;
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        have += (size_t) got;
    }
    return have >= 5 && strncmp(buf, "READY", 5) == 0;
}

/* Starts a pagedd and waits for its READY; see spawn.h. */
pid_t spawn_pagedd(const struct spawn_pagedd *o, int *status, char *err, size_t errsize)
{
    const char *argv[SPAWN_MAX_ARGS + 1];
    char backend[96];
    int n = 0;
    const char *const fixed[] = { o->path, "--foreground", "--ready-fd=3", "--socket", o->socket, NULL };
    const char *const no_config[] = { "--config", "/dev/null", NULL };
    append_words(argv, &n, fixed);
    if (o->backend != NULL) {
        snprintf(backend, sizeof backend, "--backend=%s", o->backend);
        argv[n++] = backend;
    }
    if (!names_config(o->args))
        append_words(argv, &n, no_config);
    if (append_words(argv, &n, o->args) != 0) {
        snprintf(err, errsize, "more than %d options for %s", SPAWN_MAX_ARGS, o->path);
        return -1;
    }
    argv[n] = NULL;
    if (status != NULL)
        *status = -1;

    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) {
        snprintf(err, errsize, "pipe: %s", strerror(errno));
        return -1;
    }
    const struct spawn_cmd cmd = {
        .argv = argv, .wrapper = o->wrapper, .env = o->env, .out = "/dev/null", .err = o->log,
        .death_signal = o->death_signal,
    };
    pid_t pid = spawn_cmd(&cmd, ready[1], err, errsize);
    close(ready[1]);
    int said = pid > 0 ? read_ready(ready[0], deadline_in(o->ready_ms)) : 0;
    close(ready[0]);
    if (pid < 0 || said == 1)
        return pid;

    /* Not ready: it exited, or is about to (its READY pipe ended), or it hangs. */
    int st = said == 0 ? spawn_wait(pid, SPAWN_EXIT_MS) : -1;
    if (st == -1)
        st = spawn_stop(pid, SIGKILL, SPAWN_EXIT_MS, NULL);
    char how[64];
    spawn_describe(how, sizeof how, st);
    if (said < 0)
        snprintf(err, errsize, "pagedd was not ready within %d ms (%s)", o->ready_ms, how);
    else
        snprintf(err, errsize, "pagedd stopped before it was ready (%s)", how);
    if (status != NULL)
        *status = st;
    return -1;
}

/* Kills, reaps and cleans up after every child this process tracked; the exit hook.
 * Returns nothing. */
static void kill_tracked(void)
{
    pid_t self = getpid();
    for (int i = 0; i < SPAWN_MAX_TRACKED; i++) {
        struct spawn_tracked *t = &tracked[i];
        if (t->pid <= 0 || t->owner != self)
            continue;
        kill(t->pid, SIGKILL);
        while (waitpid(t->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        if (t->dir[0] != '\0')
            spawn_rmdir(t->dir);
        t->pid = 0;
    }
}

/* Remembers a child for the exit hook; see spawn.h. */
int spawn_track(pid_t pid, const char *dir)
{
    if (!hook_set) {
        if (atexit(kill_tracked) != 0)
            return -1;
        hook_set = 1;
    }
    for (int i = 0; i < SPAWN_MAX_TRACKED; i++)
        if (tracked[i].pid <= 0) {
            tracked[i].pid = pid;
            tracked[i].owner = getpid();
            snprintf(tracked[i].dir, sizeof tracked[i].dir, "%s", dir != NULL ? dir : "");
            return 0;
        }
    return -1;
}

/* Forgets a child; returns nothing. */
void spawn_untrack(pid_t pid)
{
    for (int i = 0; i < SPAWN_MAX_TRACKED; i++)
        if (tracked[i].pid == pid && tracked[i].owner == getpid())
            tracked[i].pid = 0;
}

/* Makes a fresh temporary directory; see spawn.h. */
int spawn_mkdtemp(char *dir, size_t size, const char *parent, const char *prefix, char *err,
                  size_t errsize)
{
    if (parent == NULL || *parent == '\0')
        parent = getenv("TMPDIR");
    if (parent == NULL || *parent == '\0')
        parent = "/tmp";
    if ((size_t) snprintf(dir, size, "%s/%s-XXXXXX", parent, prefix) >= size) {
        snprintf(err, errsize, "the directory name in %s is too long", parent);
        return -1;
    }
    if (mkdtemp(dir) == NULL) {
        snprintf(err, errsize, "cannot create a directory in %s: %s", parent, strerror(errno));
        return -1;
    }
    return 0;
}

/* Removes one entry of the tree nftw walks, depth first; returns 0 so that the walk goes on. */
static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *at)
{
    (void) sb;
    (void) type;
    (void) at;
    (void) remove(path);
    return 0;
}

/* Removes a directory and what is in it; see spawn.h. */
int spawn_rmdir(const char *dir)
{
    if (dir == NULL || *dir == '\0')
        return 0;
    (void) nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    struct stat sb;
    return lstat(dir, &sb) == 0 ? -1 : 0;
}

/* Writes the last lines of a file; see spawn.h. */
int spawn_log_tail(const char *path, int lines, FILE *out, const char *prefix)
{
    enum { KEEP = 64, WIDTH = 512 };
    static char ring[KEEP][WIDTH];
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    if (lines > KEEP)
        lines = KEEP;
    long n = 0;
    while (fgets(ring[n % KEEP], WIDTH, f) != NULL)
        n++;
    fclose(f);
    int written = 0;
    for (long i = n > lines ? n - lines : 0; i < n; i++, written++) {
        const char *line = ring[i % KEEP];
        fprintf(out, "%s%s%s", prefix, line, strchr(line, '\n') != NULL ? "" : "\n");
    }
    fflush(out);
    return written;
}
