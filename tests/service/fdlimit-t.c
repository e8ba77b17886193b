/* fdlimit-t.c: pagedd out of file descriptors: a client it cannot take waits or is refused by name, nothing leaks. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paged.h"
#include "lib/core/proto.h"
#include "tests/service/rawclient.h"
#include "tests/service/proc.h"
#include "tests/tap/basic.h"

/*
 * A running pagedd (cpu backend) holds B descriptors with no client and P more for each
 * client, and a few more for a moment while it makes a client's channel. With one client
 * connected its descriptor limit is lowered (prlimit) to one more than it holds, then raised
 * a descriptor at a time until a second client can connect:
 *
 *   - each client that comes too early is accepted but refused, with PAGED_E_SYSTEM and a
 *     message naming what failed and why, and leaves no descriptor behind;
 *   - with the limit then lowered to the B + 2P descriptors the daemon holds, a third client,
 *     connecting from a process of its own, cannot even be accepted: the daemon says it
 *     pauses new connections (it must not spin on the listening socket), and once the two
 *     others leave it accepts the third and serves it (the third tries again when it is
 *     refused for want of descriptors, which it is while only the first has left);
 *   - meanwhile the second client is served (a NOP), and when every client has gone the
 *     daemon holds B descriptors again. pagedd exits 0 on SIGTERM.
 */

#define WAIT_MS 10000

static struct pagedd daemon_;

/* Returns the daemon's descriptor count once it is want or WAIT_MS have passed (a departed
 * client's are closed on the daemon's next turn). */
static int fds_settled(int want)
{
    int n = td_fd_count(daemon_.pid);
    for (int i = 0; i < WAIT_MS && n != want; i++) {
        td_pause_ms(1);
        n = td_fd_count(daemon_.pid);
    }
    return n;
}

/* Forks a child that, once go_fd reads a byte, connects (each try waiting as long as
 * rc_connect does for the daemon's answer; a refusal for want of descriptors is tried again,
 * up to 500 times 20 ms apart), runs a NOP and exits 0, or 1 when that fails. Forked before
 * the parent's clients connect, so that it holds none of their descriptors (which would keep
 * their connections open after the parent closes them). Returns the child's pid and sets
 * *go_fd to the end the parent writes. */
static pid_t connect_in_child(int *go_fd)
{
    int fds[2];
    if (pipe(fds) != 0)
        sysbail("pipe");
    pid_t pid = bfork();
    if (pid == 0) {
        close(fds[1]);
        char go;
        if (read(fds[0], &go, 1) != 1)
            _exit(2);
        struct rc_client c;
        int rc = PAGED_E_SYSTEM;
        for (int i = 0; i < 500 && rc == PAGED_E_SYSTEM; i++)
            if ((rc = rc_connect(daemon_.socket, "fdlimit-late", 0, &c)) == PAGED_E_SYSTEM)
                td_pause_ms(20);
        if (rc != 0)
            fprintf(stderr, "fdlimit-t: the third client gave up: %s (%s)\n", paged_strerror(rc), c.errmsg);
        _exit(rc == 0 && rc_nop(&c) == 0 ? 0 : 1);
    }
    close(fds[0]);
    *go_fd = fds[1];
    return pid;
}

/* Starts the daemon, lowers its limit and drives the clients; returns 0. */
int main(void)
{
    plan_lazy();
    const char *extra[] = { "--backend=cpu", NULL };
    int st = 0;
    if (pagedd_start(&daemon_, extra, NULL, &st) != 0)
        bail("pagedd did not start (status %d)", st);
    int go_fd = -1;
    pid_t late = connect_in_child(&go_fd);
    const int base = td_fd_count_stable(daemon_.pid);
    struct rc_client c1, c2;
    int rc = rc_connect(daemon_.socket, "fdlimit-1", 0, &c1);
    if (rc != 0)
        bail("the first client could not connect: %s (%s)", paged_strerror(rc), c1.errmsg);
    const int per = td_fd_count_stable(daemon_.pid) - base;
    ok(base > 0 && per > 0, "the daemon holds %d descriptors, and %d more for a client", base, per);

    /* Raised a descriptor at a time from one more than the daemon holds, until a second
     * client fits; every refusal on the way must name its cause and leak nothing. */
    int refusals = 0, clean = 1, limit = base + per + 1;
    for (; limit <= base + 3 * per + 8; limit++) {
        if (td_limit(daemon_.pid, RLIMIT_NOFILE, (unsigned long long) limit) != 0)
            bail("prlimit on the daemon: %s", strerror(errno));
        rc = rc_connect(daemon_.socket, "fdlimit-2", 0, &c2);
        if (rc == 0)
            break;
        refusals++;
        if (rc != PAGED_E_SYSTEM || strstr(c2.errmsg, "cannot create the channel") == NULL
            || strstr(c2.errmsg, strerror(EMFILE)) == NULL || fds_settled(base + per) != base + per) {
            clean = 0;
            diag("limit %d: %s (%s)", limit, paged_strerror(rc), c2.errmsg);
        }
    }
    if (!ok(rc == 0, "a second client connects once the daemon may hold %d descriptors", limit))
        bail("the second client never connected: %s", c2.errmsg);
    ok(refusals > 0 && clean, "the %d clients that came before were refused with PAGED_E_SYSTEM naming what failed "
       "and why, and left no descriptor behind", refusals);
    const int full = fds_settled(base + 2 * per);
    ok(full == base + 2 * per && td_limit(daemon_.pid, RLIMIT_NOFILE, (unsigned long long) full) == 0,
       "the limit lowered to the %d descriptors the daemon then holds", full);

    if (write(go_fd, "g", 1) != 1)
        sysbail("write");
    close(go_fd);
    ok(pagedd_log_wait(&daemon_, "pausing new connections", WAIT_MS),
       "a third client cannot be accepted: the daemon pauses new connections");
    ok(rc_nop(&c2) == 0, "the second client is served meanwhile");
    rc_close(&c1);
    rc_close(&c2);
    int late_st = -1;
    ok(waitpid(late, &late_st, 0) == late && WIFEXITED(late_st) && WEXITSTATUS(late_st) == 0,
       "once the two others leave, the third is accepted and served");

    int left = fds_settled(base);
    ok(left == base, "with every client gone the daemon holds %d descriptors again (%d)", base, left);
    st = pagedd_stop(&daemon_);
    ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exits 0 on SIGTERM");
    pagedd_cleanup(&daemon_);
    return 0;
}
