/* daemon.c: paged-bench's own pagedd: started on a temporary socket, stopped for sure, children reaped. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/bench/daemon.h"

#include <dirent.h>
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

#include "tools/bench/bench.h"

/* Children to kill if paged-bench dies (bench_die exits through atexit), and the
 * temporary directory to remove. */
#define MAX_CHILDREN 64
static pid_t children[MAX_CHILDREN];
static char cleanup_dir[256];
static int hooked;

/* Removes every file in dir, then dir; returns nothing. */
static void remove_dir(const char *dir)
{
    if (dir[0] == '\0')
        return;
    DIR *dp = opendir(dir);
    if (dp != NULL) {
        struct dirent *e;
        char path[600];
        while ((e = readdir(dp)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(dp);
    }
    rmdir(dir);
}

/* Kills and reaps every tracked child and removes the directory; the atexit hook. */
static void kill_children(void)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] > 0) {
            kill(children[i], SIGKILL);
            waitpid(children[i], NULL, 0);
            children[i] = 0;
        }
    remove_dir(cleanup_dir);
    cleanup_dir[0] = '\0';
}

/* Remembers a child. */
void bd_track(pid_t pid)
{
    if (!hooked) {
        atexit(kill_children);
        hooked = 1;
    }
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] == 0) {
            children[i] = pid;
            return;
        }
    bench_die("too many child processes");
}

/* Forgets a child. */
void bd_untrack(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] == pid)
            children[i] = 0;
}

/* Sleeps ms milliseconds; returns nothing. */
static void pause_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long) (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Prints the last lines of the daemon's log to stderr; returns nothing. */
static void show_log(const struct bd_daemon *d)
{
    FILE *f = fopen(d->log, "r");
    if (f == NULL)
        return;
    char lines[8][512];
    int n = 0;
    while (fgets(lines[n % 8], sizeof lines[0], f) != NULL)
        n++;
    fclose(f);
    for (int i = n > 8 ? n - 8 : 0; i < n; i++)
        fprintf(stderr, "  pagedd: %s", lines[i % 8]);
}

/* Starts the daemon or dies. */
void bd_start(struct bd_daemon *d, const char *path, const char *backend, unsigned threads)
{
    memset(d, 0, sizeof *d);
    const char *tmp = getenv("TMPDIR");
    snprintf(d->dir, sizeof d->dir, "%s/paged-bench-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(d->dir) == NULL)
        bench_die("mkdtemp %s: %s", d->dir, strerror(errno));
    snprintf(cleanup_dir, sizeof cleanup_dir, "%s", d->dir);
    snprintf(d->socket, sizeof d->socket, "%s/pagedd.sock", d->dir);
    snprintf(d->log, sizeof d->log, "%s/pagedd.log", d->dir);
    if (access(path, X_OK) != 0)
        bench_die("cannot run the daemon %s: %s (set --pagedd)", path, strerror(errno));

    int pfd[2];
    if (pipe(pfd) < 0)
        bench_die("pipe: %s", strerror(errno));
    char fdarg[32], backarg[32], threadarg[32];
    snprintf(fdarg, sizeof fdarg, "--ready-fd=%d", pfd[1]);
    snprintf(backarg, sizeof backarg, "--backend=%s", backend);
    snprintf(threadarg, sizeof threadarg, "--threads=%u", threads);
    const char *argv[] = { path, "--foreground", fdarg, "--socket", d->socket, "--config", "/dev/null",
                           backarg, threads ? threadarg : NULL, NULL };
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        bench_die("fork: %s", strerror(errno));
    if (pid == 0) {
        close(pfd[0]);
        int log = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        int null = open("/dev/null", O_RDWR);
        if (log >= 0)
            dup2(log, STDERR_FILENO);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO);
        }
        execv(path, (char *const *) argv);
        _exit(127);
    }
    bd_track(pid);
    d->pid = pid;
    close(pfd[1]);
    char buf[16] = { 0 };
    ssize_t got = 0;
    struct pollfd p = { .fd = pfd[0], .events = POLLIN };
    int rc;
    do
        rc = poll(&p, 1, 60000);
    while (rc < 0 && errno == EINTR);
    if (rc > 0)
        got = read(pfd[0], buf, sizeof buf - 1);
    close(pfd[0]);
    if (got >= 5 && strncmp(buf, "READY", 5) == 0)
        return;
    int st = 0;
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    bd_untrack(pid);
    d->pid = 0;
    fprintf(stderr, "paged-bench: %s --backend=%s did not get ready (%s %d); its log:\n", path, backend,
            WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    show_log(d);
    bench_die("no daemon to benchmark");
}

/* Appends the daemon's log to the file $PAGED_BENCH_DAEMON_LOG names, when it names one, so
 * that the engine's activity lines (batches, merges) survive the run; returns nothing. */
static void keep_log(const struct bd_daemon *d)
{
    const char *dest = getenv("PAGED_BENCH_DAEMON_LOG");
    if (dest == NULL || *dest == '\0')
        return;
    FILE *in = fopen(d->log, "r");
    FILE *out = fopen(dest, "a");
    char buf[4096];
    size_t n;
    while (in != NULL && out != NULL && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            break;
    if (in != NULL)
        fclose(in);
    if (out != NULL)
        fclose(out);
}

/* Stops the daemon and removes its directory. */
void bd_stop(struct bd_daemon *d)
{
    if (d->pid > 0) {
        int st = 0;
        kill(d->pid, SIGTERM);
        int i = 0;
        for (; i < 20000; i++) {
            if (waitpid(d->pid, &st, WNOHANG) == d->pid)
                break;
            pause_ms(1);
        }
        if (i == 20000) {
            fprintf(stderr, "paged-bench: pagedd ignored SIGTERM for 20 s: killing it\n");
            kill(d->pid, SIGKILL);
            waitpid(d->pid, &st, 0);
        }
        bd_untrack(d->pid);
        d->pid = 0;
    }
    keep_log(d);
    remove_dir(d->dir);
    cleanup_dir[0] = '\0';
}
