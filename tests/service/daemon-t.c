/* daemon-t.c: pagedd as a program: options, config file, readiness, pid file, signals. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include "lib/core/proto.h"
#include "lib/core/ring.h"
#include "lib/core/sock.h"
#include "tests/service/rawclient.h"
#include "tests/service/proc.h"
#include "tests/tap/basic.h"

static struct pagedd dir_;   /* a directory for files of the cases that start no daemon */

/* Runs pagedd with args as pagedd_run does, with the descriptor limit left alone; returns its
 * wait status, or -1 if it had to be killed. */
static int run_pagedd(const char *const *args, const char *out, const char *err)
{
    return pagedd_run(args, out, err, 0);
}

/* Returns whether file contains needle. */
static int file_contains(const char *file, const char *needle)
{
    FILE *f = fopen(file, "r");
    if (f == NULL)
        return 0;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

/* Writes text to path; bails on failure. */
static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
        sysbail("write %s", path);
}

/* Returns the number a pid file holds, or 0. */
static long read_pid(const char *path)
{
    long pid = 0;
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return pid;
}

/* Waits, up to 10 s, until process pid is gone with its socket and pid file, killing it if
 * it is not; returns whether it went by itself. */
static int wait_gone(long pid, const char *sock, const char *pidf)
{
    struct stat sb;
    int gone = 0;
    for (int i = 0; i < 10000 && !gone; i++) {
        gone = pid > 1 && kill((pid_t) pid, 0) < 0 && lstat(sock, &sb) < 0 && lstat(pidf, &sb) < 0;
        if (!gone)
            td_pause_ms(1);
    }
    if (!gone && pid > 1)
        kill((pid_t) pid, SIGKILL);
    return gone;
}

/* Returns whether syslog's socket is there, as pagedd looks for it. */
static int syslog_listens(void)
{
    struct stat sb;
    return stat(_PATH_LOG, &sb) == 0 && S_ISSOCK(sb.st_mode);
}

/* Returns the exit code of a wait status, or -1 when it did not exit. */
static int exit_code(int st)
{
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* --help, --version, bad options and bad configuration files. */
static void program_cases(void)
{
    char out[400], err[400], conf[400];
    snprintf(out, sizeof out, "%s/out", dir_.dir);
    snprintf(err, sizeof err, "%s/err", dir_.dir);
    snprintf(conf, sizeof conf, "%s/bad.conf", dir_.dir);

    const char *help[] = { "--help", NULL };
    is_int(0, exit_code(run_pagedd(help, out, err)), "--help exits 0");
    ok(file_contains(out, "Usage: pagedd") && file_contains(out, "--socket") && file_contains(out, "--max-clients"),
       "--help prints the usage with every option");
    const char *version[] = { "--version", NULL };
    is_int(0, exit_code(run_pagedd(version, out, err)), "--version exits 0");
    ok(file_contains(out, PACKAGE_VERSION), "--version prints %s", PACKAGE_VERSION);
    const char *bogus[] = { "--no-such-option", NULL };
    is_int(2, exit_code(run_pagedd(bogus, out, err)), "an unknown option exits 2");

    write_file(conf, "# a comment\n\nlog-level = debug\nmax-clients = lots\n");
    const char *bad[] = { "--foreground", "--config", conf, NULL };
    is_int(1, exit_code(run_pagedd(bad, out, err)), "a bad config line: exit 1");
    char where[450];
    snprintf(where, sizeof where, "%s:4:", conf);
    ok(file_contains(err, where) && file_contains(err, "max-clients"),
       "the error names file:line and the key (%s)", where);
    write_file(conf, "socket = /tmp/x\nbogus-key = 1\n");
    is_int(1, exit_code(run_pagedd(bad, out, err)), "an unknown key: exit 1");
    snprintf(where, sizeof where, "%s:2: unknown key 'bogus-key'", conf);
    ok(file_contains(err, where), "the error says %s", where);
    write_file(conf, "log-level debug\n");
    is_int(1, exit_code(run_pagedd(bad, out, err)), "a line without '=': exit 1");
    snprintf(where, sizeof where, "%s:1:", conf);
    ok(file_contains(err, where), "the error names %s", where);
    /* Each kind of bad value: refused before anything starts, naming the line, the key, the
     * value and what would do. */
    char longsock[300];
    memset(longsock, 'x', sizeof longsock - 1);
    longsock[sizeof longsock - 1] = '\0';
    char longline[400];
    snprintf(longline, sizeof longline, "socket = /tmp/%s\n", longsock);
    const struct { const char *line, *want; } values[] = {
        { "foreground = maybe\n", "foreground: 'maybe' is not yes or no" },
        { "backend = tpu\n", "backend: 'tpu' is not cpu, cuda or auto" },
        { "log-level = loud\n", "log-level: 'loud' is not error, warning, info or debug" },
        { "socket-mode = 0999\n", "socket-mode: '0999' is not an octal mode" },
        { "socket-mode = 01777\n", "socket-mode: '01777' is not an octal mode" },
        { "max-clients = 0\n", "max-clients: '0' is not a number from 1 to 65536" },
        { "threads = -1\n", "threads: '-1' is not a number from 0 to 1024" },
        { "max-blocks-per-client = 5000000000\n",
          "max-blocks-per-client: '5000000000' is not a number from 0 to 4294967295" },
        { "shutdown-write-timeout = 86400001\n",
          "shutdown-write-timeout: '86400001' is not a number from 0 to 86400000" },
        { "shutdown-write-timeout = soon\n", "shutdown-write-timeout: 'soon' is not a number from 0 to 86400000" },
        { "config = /etc/other.conf\n", "config: only allowed on the command line" },
        { "ready-fd = 3\n", "ready-fd: only allowed on the command line" },
        { "= 5\n", "missing key before '='" },
        { longline, "socket: value too long" },
    };
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        write_file(conf, values[i].line);
        int code = exit_code(run_pagedd(bad, out, err));
        snprintf(where, sizeof where, "%s:1: %s", conf, values[i].want);
        int shown = (int) strcspn(values[i].line, "\n");
        ok(code == 1 && file_contains(err, where), "config '%.*s': exit 1 (%d), '%s'", shown < 40 ? shown : 40,
           values[i].line, code, values[i].want);
    }

    char missing[450];
    snprintf(missing, sizeof missing, "%s/missing.conf", dir_.dir);
    const char *miss[] = { "--foreground", "--config", missing, NULL };
    is_int(1, exit_code(run_pagedd(miss, out, err)), "a missing --config file: exit 1");
    ok(file_contains(err, "missing.conf"), "the error names the missing file");
    char sock[450];
    snprintf(sock, sizeof sock, "--socket=%s/cuda.sock", dir_.dir);
    /* A UUID no GPU has: refused everywhere, built with CUDA or not, GPU or not. */
    const char *cuda[] = { "--foreground", "--config", "/dev/null", "--backend", "cuda", "--device",
                           "GPU-00000000-0000-0000-0000-000000000000", sock, NULL };
    is_int(1, exit_code(run_pagedd(cuda, out, err)), "--backend cuda on a device that is not there: exit 1");
    ok(file_contains(err, "cuda"), "the error says why the cuda backend is not there");
    char gsock[450];
    snprintf(gsock, sizeof gsock, "--socket=%s/group.sock", dir_.dir);
    const char *nogroup[] = { "--foreground", "--config", "/dev/null", gsock, "--socket-group", "no-such-group-paged",
                              NULL };
    is_int(1, exit_code(run_pagedd(nogroup, out, err)), "--socket-group naming no group: exit 1");
    ok(file_contains(err, "socket-group: no group 'no-such-group-paged'"), "the error names the option and the group");

    /* Where the socket or the pid file cannot be made: exit 1, naming the path and why. */
    char file[420], fsock[460], msg[600];
    snprintf(file, sizeof file, "%s/a-file", dir_.dir);
    write_file(file, "not a directory\n");
    snprintf(fsock, sizeof fsock, "--socket=%s/sub/pagedd.sock", file);
    const char *under_file[] = { "--foreground", "--config", "/dev/null", fsock, NULL };
    is_int(1, exit_code(run_pagedd(under_file, out, err)), "a socket under a regular file: exit 1");
    snprintf(msg, sizeof msg, "cannot create the directory of %s/sub/pagedd.sock: Not a directory", file);
    ok(file_contains(err, msg), "the error names the socket and why its directory cannot be made");
    char lsock[300];
    int at = snprintf(lsock, sizeof lsock, "--socket=%s/", dir_.dir);
    memset(lsock + at, 'x', 150);
    lsock[at + 150] = '\0';
    const char *too_long[] = { "--foreground", "--config", "/dev/null", lsock, NULL };
    is_int(1, exit_code(run_pagedd(too_long, out, err)), "a socket path longer than a sockaddr_un holds: exit 1");
    ok(file_contains(err, "socket: value too long (at most 107 bytes)"),
       "the error names the option and the longest path it takes");
    char psock[450], pidopt[460];
    snprintf(psock, sizeof psock, "--socket=%s/pid.sock", dir_.dir);
    snprintf(pidopt, sizeof pidopt, "--pid-file=%s/no-such-dir/pagedd.pid", dir_.dir);
    const char *bad_pid[] = { "--foreground", "--config", "/dev/null", psock, pidopt, NULL };
    is_int(1, exit_code(run_pagedd(bad_pid, out, err)), "a pid file in a missing directory: exit 1");
    snprintf(msg, sizeof msg, "cannot write pid file %s/no-such-dir/pagedd.pid: No such file or directory", dir_.dir);
    ok(file_contains(err, msg), "the error names the pid file and why");
    struct stat sb;
    snprintf(msg, sizeof msg, "%s/pid.sock", dir_.dir);
    ok(lstat(msg, &sb) < 0 && errno == ENOENT, "and leaves no socket behind");

    /* A regular file where the socket should be: refused as not a socket, and kept. */
    snprintf(fsock, sizeof fsock, "--socket=%s", file);
    const char *on_file[] = { "--foreground", "--config", "/dev/null", fsock, NULL };
    is_int(1, exit_code(run_pagedd(on_file, out, err)), "a regular file at the socket path: exit 1");
    snprintf(msg, sizeof msg, "%s is not a socket: remove it", file);
    ok(file_contains(err, msg) && !file_contains(err, "another daemon"),
       "the error names the path and says it is not a socket (not another daemon)");
    ok(lstat(file, &sb) == 0 && S_ISREG(sb.st_mode), "and the file is left as it was");
}

/* Returns a group other than our effective one that the socket may be given (any, as root;
 * else a supplementary group of ours), or (gid_t) -1 when there is none. */
static gid_t other_group(void)
{
    gid_t mine = getegid();
    if (geteuid() == 0)
        return mine == 1 ? 2 : 1;
    gid_t list[256];
    int n = getgroups(256, list);
    for (int i = 0; i < n; i++)
        if (list[i] != mine)
            return list[i];
    return (gid_t) -1;
}

/* Settings from a config file take effect; SIGHUP reloads the live ones. */
static void config_and_reload_cases(void)
{
    struct pagedd d;
    pagedd_mkdir(&d);
    char conf[400], opt[420];
    snprintf(conf, sizeof conf, "%s/paged.conf", d.dir);
    write_file(conf, "# test configuration\nlog-level = debug   # chatty\nmax-clients = 1\nthreads = 2\n");
    snprintf(opt, sizeof opt, "%s", conf);
    const char *args[] = { "--config", opt, NULL };
    int st;
    if (pagedd_start(&d, args, NULL, &st) != 0)
        bail("pagedd with a config file did not start (status %d)", st);
    struct rc_client a, b;
    is_int(0, rc_connect(d.socket, "first", 0, &a), "config max-clients = 1: the first client connects");
    is_int(PAGED_E_LIMIT, rc_connect(d.socket, "second", 0, &b), "config max-clients = 1: a second gets PAGED_E_LIMIT");
    ok(strstr(b.errmsg, "already has 1 clients of all uids (max-clients)") != NULL, "the refusal says why: %s",
       b.errmsg);
    rc_close(&b);
    ok(pagedd_log_wait(&d, "[debug]", 5000), "config log-level = debug: debug lines are logged");

    write_file(conf, "log-level = warning\nmax-clients = 2\nthreads = 1\nshutdown-write-timeout = 0\n");
    kill(d.pid, SIGHUP);
    ok(pagedd_log_wait(&d, "reload: log-level changed from 'debug' to 'warning'", 5000),
       "SIGHUP: the new log level is applied and logged");
    ok(pagedd_log_wait(&d, "reload: shutdown-write-timeout changed from '30000' to '0'", 5000)
           && !pagedd_log_contains(&d, "shutdown-write-timeout changed from '30000' to '0': needs a restart"),
       "SIGHUP: shutdown-write-timeout = 0 parsed from the file and applied live");
    ok(pagedd_log_wait(&d, "reload: threads changed from '2' to '1': needs a restart", 5000),
       "SIGHUP: a setting that needs a restart is logged as such");
    is_int(0, rc_connect(d.socket, "second", 0, &b), "SIGHUP: max-clients = 2 lets a second client in");
    rc_close(&b);
    write_file(conf, "max-clients = many\n");
    kill(d.pid, SIGHUP);
    ok(pagedd_log_wait(&d, "reload failed", 5000),
       "SIGHUP with a bad file: the error is logged, old settings kept");
    is_int(0, rc_nop(&a), "after the reloads the daemon serves");

    /* Shutdown: a connected client hears about it, the socket goes. */
    struct rc_client ctl;
    is_int(0, rc_connect(d.socket, "watcher", PCORE_HELLO_CONTROL, &ctl), "a control client connects");
    /* Requests still queued when SIGTERM comes: once the daemon says it sleeps, stop it,
     * queue them, and let it see the signal and the requests in one wake-up. */
    struct pcore_ring_ctl *sqc = (struct pcore_ring_ctl *) ((unsigned char *) a.map + a.hdr.sq_ctl_off);
    int asleep = 0;
    for (int i = 0; i < 10000 && !asleep; i++) {
        /* The flag is up a little before epoll_wait and a little after it returns; only a
         * daemon blocked inside it is sure to see the signal and the requests together. */
        asleep = atomic_load_explicit(pcore_ring_word(&sqc->consumer_waiting), memory_order_acquire) != 0
                 && td_in_epoll_wait(d.pid);
        if (!asleep)
            td_pause_ms(1);
    }
    ok(asleep, "the idle daemon sleeps on its rings");
    if (td_freeze(&d) != 0)
        bail("pagedd did not stop on SIGSTOP");
    for (int i = 0; i < 4; i++) {
        struct pcore_sqe s;
        memset(&s, 0, sizeof s);
        s.opcode = PAGED_OP_NOP;
        s.tag = 500 + (uint64_t) i;
        if (rc_submit(&a, &s) != 0)
            diag("submit %d failed", i);
    }
    kill(d.pid, SIGTERM);
    kill(d.pid, SIGCONT);
    is_int(1, rc_wait_msg(&a, PCORE_MSG_SHUTDOWN, 10000, NULL, 0), "SIGTERM: a client gets PCORE_MSG_SHUTDOWN");
    is_int(1, rc_wait_msg(&ctl, PCORE_MSG_SHUTDOWN, 10000, NULL, 0), "SIGTERM: a control client too");
    struct pcore_cqe q;
    int shut = 0;
    uint64_t tags = 0;
    for (int i = 0; i < 4; i++)
        if (rc_reap(&a, &q, 10000) == 1) {
            shut += q.status == PAGED_E_SHUTDOWN;
            tags |= UINT64_C(1) << (q.tag - 500) % 64;
        }
    is_int(4, shut, "SIGTERM: each of the 4 queued requests completes with PAGED_E_SHUTDOWN");
    is_int(0xf, (long long) tags, "SIGTERM: every queued tag is answered once");
    is_int(PAGED_E_DISCONNECTED, rc_reap(&a, &q, 10000), "SIGTERM: the completion wake-up reports the daemon gone");
    rc_close(&a);
    rc_close(&ctl);
    st = pagedd_stop(&d);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "SIGTERM: pagedd exits 0");
    struct stat sb;
    ok(lstat(d.socket, &sb) < 0 && errno == ENOENT, "SIGTERM: the socket file is removed");
    pagedd_cleanup(&d);
}

/* Daemonizing: the parent returns only once the socket serves; pid file; second daemon. */
static void daemonize_cases(void)
{
    char sock[400], pidf[400], sockopt[420], pidopt[420], out[400], err[400];
    snprintf(sock, sizeof sock, "%s/sub/dir/pagedd.sock", dir_.dir);
    snprintf(pidf, sizeof pidf, "%s/pagedd.pid", dir_.dir);
    snprintf(sockopt, sizeof sockopt, "--socket=%s", sock);
    snprintf(pidopt, sizeof pidopt, "--pid-file=%s", pidf);
    snprintf(out, sizeof out, "%s/out", dir_.dir);
    snprintf(err, sizeof err, "%s/err", dir_.dir);
    /* The socket's group, by number, where there is a group to give it. */
    const gid_t group = other_group();
    char groupopt[64];
    snprintf(groupopt, sizeof groupopt, "--socket-group=%lu", (unsigned long) group);
    /* The cpu backend, as pagedd_start chooses: the raw client speaks to the host arena. */
    const char *args[] = { sockopt, pidopt, "--config", "/dev/null", "--backend=cpu",
                           group != (gid_t) -1 ? groupopt : NULL, NULL };
    is_int(0, exit_code(run_pagedd(args, out, err)), "daemonizing: the parent exits 0");
    /* No waiting here: the parent returned, so the socket must accept now. */
    struct rc_client c;
    if (!is_int(0, rc_connect(sock, "right-away", 0, &c),
                "daemonizing: the socket accepts as soon as the parent returned"))
        bail("cannot go on without a connection to the daemonized pagedd");
    is_int(0, rc_nop(&c), "daemonizing: and serves requests");
    struct stat sb;
    ok(stat(sock, &sb) == 0 && (sb.st_mode & 0777) == 0660, "the socket has mode 0660");
    if (group != (gid_t) -1)
        ok(sb.st_gid == group, "the socket belongs to group %lu, as --socket-group said (%lu)",
           (unsigned long) group, (unsigned long) sb.st_gid);
    else
        diag("no group but our own to give the socket: --socket-group is not tried");
    char dirpath[420];
    snprintf(dirpath, sizeof dirpath, "%s/sub/dir", dir_.dir);
    ok(stat(dirpath, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 0777) == 0755,
       "the missing socket directory was created with mode 0755");
    const long pid = read_pid(pidf);
    ok(pid > 1 && kill((pid_t) pid, 0) == 0, "the pid file names the running daemon (%ld)", pid);
    /* Detached, a daemon that would log to syslog with nobody listening says so first. */
    if (syslog_listens())
        ok(!file_contains(err, "no syslog socket"), "syslog listens: no warning that the log is lost");
    else
        ok(file_contains(err, "pagedd: warning: no syslog socket") && file_contains(err, "--log-file"),
           "no syslog socket: a warning on stderr that the log is lost, naming --log-file");

    const char *again[] = { "--foreground", sockopt, "--config", "/dev/null", NULL };
    char listening[450];
    snprintf(listening, sizeof listening, "another daemon is listening on %s", sock);
    is_int(1, exit_code(run_pagedd(again, out, err)), "a second daemon on the live socket exits 1");
    ok(file_contains(err, listening) && !file_contains(err, "not a socket"),
       "and says another daemon is listening there, naming the path");
    is_int(0, rc_nop(&c), "the first daemon still serves");
    const char *again_bg[] = { sockopt, "--config", "/dev/null", NULL };
    is_int(1, exit_code(run_pagedd(again_bg, out, err)), "a second daemonizing daemon: the parent exits 1");
    ok(file_contains(err, listening), "with the daemon's reason");

    if (pid > 1)
        kill((pid_t) pid, SIGTERM);
    is_int(1, rc_wait_msg(&c, PCORE_MSG_SHUTDOWN, 10000, NULL, 0), "SIGTERM to the daemon: the client gets SHUTDOWN");
    rc_close(&c);
    ok(wait_gone(pid, sock, pidf), "the daemon exits and removes its socket and pid file");
}

/* A detached daemon with --log-file writes its log there, from its start line to its last,
 * and no warning about syslog; a file it cannot open stops it. */
static void log_file_case(void)
{
    char sock[400], pidf[400], log[400], sockopt[420], pidopt[420], logopt[420], out[400], err[400];
    snprintf(sock, sizeof sock, "%s/log.sock", dir_.dir);
    snprintf(pidf, sizeof pidf, "%s/log.pid", dir_.dir);
    snprintf(log, sizeof log, "%s/pagedd.log", dir_.dir);
    snprintf(sockopt, sizeof sockopt, "--socket=%s", sock);
    snprintf(pidopt, sizeof pidopt, "--pid-file=%s", pidf);
    snprintf(logopt, sizeof logopt, "--log-file=%s", log);
    snprintf(out, sizeof out, "%s/out", dir_.dir);
    snprintf(err, sizeof err, "%s/err", dir_.dir);
    const char *args[] = { sockopt, pidopt, logopt, "--config", "/dev/null", "--backend=cpu", NULL };
    is_int(0, exit_code(run_pagedd(args, out, err)), "--log-file: the detached daemon starts");
    const long pid = read_pid(pidf);
    char ready[64];
    snprintf(ready, sizeof ready, "ready (pid %ld)", pid);
    /* The parent returned once the daemon was ready, after its start line was written. */
    ok(pid > 1 && file_contains(log, ready) && file_contains(log, "[info] listening on"),
       "--log-file: the start lines are in the file (\"%s\")", ready);
    ok(!file_contains(err, "syslog"), "--log-file: no warning about syslog on stderr");
    if (pid > 1)
        kill((pid_t) pid, SIGTERM);
    ok(wait_gone(pid, sock, pidf) && file_contains(log, "[info] stopped"), "--log-file: the stop line is there too");
    const char *bad[] = { "--foreground", sockopt, "--config", "/dev/null", "--log-file=/nonexistent-dir/pagedd.log",
                          NULL };
    is_int(1, exit_code(run_pagedd(bad, out, err)), "--log-file in a missing directory: exit 1");
    ok(file_contains(err, "cannot open the log file /nonexistent-dir/pagedd.log: No such file or directory"),
       "the error names the file and why");
}

/* A connection that never says HELLO is dropped. */
static void silent_case(void)
{
    struct pagedd d = { 0 };
    const char *args[] = { "--hello-timeout=200", NULL };
    if (pagedd_start(&d, args, NULL, NULL) != 0)
        bail("pagedd did not start");
    int s = pcore_sock_connect(d.socket);
    ok(s >= 0, "a silent client connects");
    int rc = pcore_sock_wait_readable(s, 10000);
    char buf[512];
    int nfds = 0;
    long n = rc == 1 ? pcore_sock_recv(s, buf, sizeof buf, NULL, 0, &nfds) : rc;
    is_int(PAGED_E_DISCONNECTED, n, "without HELLO it is dropped after --hello-timeout");
    close(s);
    ok(pagedd_log_wait(&d, "no HELLO in time", 5000), "the drop is logged");
    int st = pagedd_stop(&d);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exits 0");
    pagedd_cleanup(&d);
}

/* Runs every case against a real daemon; returns 0 (TAP reports the results). */
/*
 * pagedd started with too few descriptors. With a limit of 3 (and up, one at a time) either
 * the loader cannot open pagedd's libraries (it exits 127) or pagedd exits 1 naming what it
 * could not make and "Too many open files" (the event loop, the socket, ...), until at a
 * limit it gets past every descriptor it makes at startup and fails at the pid file, whose
 * directory is missing: then it says "No such file or directory". Among the limits one must
 * stop it at the event loop, none may kill it, and no socket may be left behind.
 */
static void descriptor_cases(void)
{
    char out[400], err[400], sock[450], pidopt[460], msg[600];
    snprintf(out, sizeof out, "%s/out", dir_.dir);
    snprintf(err, sizeof err, "%s/err", dir_.dir);
    snprintf(sock, sizeof sock, "--socket=%s/fd.sock", dir_.dir);
    snprintf(pidopt, sizeof pidopt, "--pid-file=%s/no-such-dir/pagedd.pid", dir_.dir);
    const char *args[] = { "--foreground", "--config", "/dev/null", sock, pidopt, NULL };
    snprintf(msg, sizeof msg, "cannot write pid file %s/no-such-dir/pagedd.pid: No such file or directory", dir_.dir);
    int clean = 1, named = 1, loop = 0, through = 0;
    rlim_t n;
    for (n = 3; n <= 64 && !through; n++) {
        int st = pagedd_run(args, out, err, n);
        int code = exit_code(st);
        if (code == 127 && file_contains(err, "error while loading shared libraries"))
            continue;
        if (code != 1) {
            diag("with %u descriptors pagedd ended with wait status %d", (unsigned) n, st);
            clean = 0;
            break;
        }
        if (file_contains(err, msg)) {
            through = 1;
        } else if (!file_contains(err, "Too many open files")) {
            diag("with %u descriptors pagedd exited 1 without naming the limit", (unsigned) n);
            named = 0;
        }
        loop |= file_contains(err, "cannot create the event loop: Too many open files");
    }
    ok(clean, "with 3 descriptors and up, one at a time, pagedd always exits 1 (or is not loaded)");
    ok(named, "each time short of descriptors it says what it could not make: Too many open files");
    ok(loop, "one limit stops it at the event loop, named so");
    ok(through, "and from %u descriptors on it gets through to the pid file", (unsigned) n - 1);
    struct stat sb;
    snprintf(msg, sizeof msg, "%s/fd.sock", dir_.dir);
    ok(lstat(msg, &sb) < 0 && errno == ENOENT, "no socket is left behind");
}

/* Runs the program, descriptor, configuration and reload, daemonizing and silent cases;
 * returns 0 (the TAP output tells the rest). */
int main(void)
{
    plan_lazy();
    pagedd_mkdir(&dir_);
    program_cases();
    descriptor_cases();
    config_and_reload_cases();
    daemonize_cases();
    log_file_case();
    silent_case();
    pagedd_cleanup(&dir_);
    return 0;
}
