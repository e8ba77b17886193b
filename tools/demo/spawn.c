/* spawn.c: paged-demo's child processes: the daemon it starts and stops, and pactl. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/demo/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <time.h>
#include <unistd.h>

/* The descriptor number the daemon is told to write READY to. */
#define DEMO_READY_FD 3

/* The signal mask from before demo_block_sigchld, restored in every child. */
static sigset_t demo_saved_mask;

/* Blocks SIGCHLD, remembering the previous mask for the children. */
void demo_block_sigchld(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, &demo_saved_mask);
}

/* Returns CLOCK_MONOTONIC in milliseconds. */
static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Describes a wait status; returns buf. */
char *demo_describe_status(char *buf, size_t size, int status)
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

/* Waits for pid with a deadline, sleeping in sigtimedwait between SIGCHLDs; returns its
 * status or -1 on timeout. */
int demo_wait_child(pid_t pid, int timeout_ms)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        int status;
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            return status;
        if (got < 0 && errno != EINTR)
            return -1;
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return -1;
        /* Any child's exit wakes us; the loop then asks about this one again. */
        struct timespec ts = { .tv_sec = left / 1000, .tv_nsec = (left % 1000) * 1000000 };
        sigtimedwait(&set, NULL, &ts);
    }
}

/* Sends SIGTERM, waits, then SIGKILL; returns the wait status. */
int demo_daemon_stop(pid_t pid, int timeout_ms)
{
    kill(pid, SIGTERM);
    int status = demo_wait_child(pid, timeout_ms);
    if (status >= 0)
        return status;
    fprintf(stderr, "paged-demo: pagedd did not stop within %d s; killing it\n",
            timeout_ms / 1000);
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}

/* In a freshly forked child: restores the signal mask and SIGPIPE's default, and runs argv;
 * never returns. */
static void demo_exec(char *const argv[])
{
    sigprocmask(SIG_SETMASK, &demo_saved_mask, NULL);
    signal(SIGPIPE, SIG_DFL);
    execv(argv[0], argv);
    fprintf(stderr, "paged-demo: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* Starts the daemon and waits for its READY line; returns its pid or -1 with err. */
pid_t demo_daemon_start(const char *pagedd, const char *socket, const char *backend,
                        int verbose, int timeout_ms, char *err, size_t errsize)
{
    int ready[2];
    char fdarg[16], why[64];
    if (pipe2(ready, O_CLOEXEC) != 0) {
        snprintf(err, errsize, "pipe: %s", strerror(errno));
        return -1;
    }
    snprintf(fdarg, sizeof fdarg, "%d", DEMO_READY_FD);
    char *const argv[] = {
        (char *) pagedd, "--foreground", "--config", "/dev/null", "--socket", (char *) socket,
        "--backend", (char *) backend, "--log-level", verbose ? "info" : "warning",
        "--ready-fd", fdarg, NULL,
    };
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errsize, "fork: %s", strerror(errno));
        close(ready[0]);
        close(ready[1]);
        return -1;
    }
    if (pid == 0) {
#ifdef __linux__
        /* However the demo ends, even killed, its private daemon must not outlive it. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
            _exit(127);
#endif
        /* dup2 clears close-on-exec, so exactly the ready pipe survives into pagedd. */
        if (dup2(ready[1], DEMO_READY_FD) < 0)
            _exit(127);
        demo_exec(argv);
    }
    close(ready[1]);

    /* READY, or end of file when the daemon exits first; the deadline bounds the wait. */
    char buf[16];
    size_t have = 0;
    int64_t deadline = now_ms() + timeout_ms;
    while (have < 6) {
        struct pollfd p = { .fd = ready[0], .events = POLLIN };
        int64_t left = deadline - now_ms();
        int rc = left > 0 ? poll(&p, 1, (int) left) : 0;
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0) {
            snprintf(err, errsize, "pagedd was not ready within %d s", timeout_ms / 1000);
            close(ready[0]);
            demo_daemon_stop(pid, 5000);
            return -1;
        }
        ssize_t n = read(ready[0], buf + have, sizeof buf - 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t) n;
    }
    close(ready[0]);
    buf[have] = '\0';
    if (strncmp(buf, "READY", 5) != 0) {
        int status = demo_wait_child(pid, 5000);
        if (status < 0)
            status = demo_daemon_stop(pid, 5000);
        snprintf(err, errsize, "pagedd stopped before it was ready (%s)",
                 demo_describe_status(why, sizeof why, status));
        return -1;
    }
    return pid;
}

/* Runs a program and waits for it; returns its wait status or -1. */
int demo_run(char *const argv[])
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0)
        demo_exec(argv);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}
