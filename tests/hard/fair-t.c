/* fair-t.c: one uid filling its share of connections locks no other uid out; idle control connections close. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/core/sock.h"
#include "paged.h"
#include "tests/hard/hard.h"
#include "tests/tap/pagedd.h"
#include "tests/tools/tpactl.h"

/* uid A, the one that fills its shares: nobody (its group of the same number). */
#define A_UID 65534

/* A's shares in this test (the settings below), and the clients of all uids: A's share
 * leaves room for root's, even with root's client of an earlier case not yet seen gone. */
#define PENDING_SHARE 3
#define CONTROL_SHARE 2
#define CLIENT_SHARE 2
#define MAX_CLIENTS 4
#define GLOBAL_CONTROL 64 /* control connections of all uids (server.c) */
#define WIDE_CONTROL 65   /* the last stage's control share: wider than that bound */

/* What A's process reports after each stage. */
struct report {
    int held;                        /* connections it opened and holds */
    int extra_rc;                    /* its extra connection of the stage's kind */
    char extra_msg[PCORE_ERRMSG_MAX];
};

static struct pagedd daemon_;
static char conf_[400];

/* Writes the daemon's configuration with the given control share and idle timeout; returns
 * nothing. */
static void write_conf(unsigned control_share, unsigned idle_ms)
{
    FILE *f = fopen(conf_, "w");
    if (f == NULL)
        sysbail("cannot write %s", conf_);
    fprintf(f, "socket-mode = 0666\nhello-timeout = 60000\nmax-clients = %d\nmax-clients-per-uid = %d\n"
            "max-pending-per-uid = %d\nmax-control-per-uid = %u\ncontrol-idle-timeout = %u\n", MAX_CLIENTS,
            CLIENT_SHARE, PENDING_SHARE, control_share, idle_ms);
    if (fclose(f) != 0)
        sysbail("cannot write %s", conf_);
}

/* Rewrites the configuration and sends SIGHUP; returns whether the log shows what changed. */
static int reload(unsigned control_share, unsigned idle_ms, const char *changed)
{
    write_conf(control_share, idle_ms);
    kill(daemon_.pid, SIGHUP);
    return pagedd_log_wait(&daemon_, changed, 10000);
}

/* In A's process: waits up to 60 s for the test's go-ahead on fd; exits when it does not
 * come. Returns nothing. */
static void await_go(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    char b;
    if (poll(&p, 1, 60000) != 1 || read(fd, &b, 1) != 1)
        _exit(4);
}

/* In A's process: sends one stage's report; exits when it cannot. Returns nothing. */
static void send_report(int fd, const struct report *r)
{
    if (write(fd, r, sizeof *r) != (ssize_t) sizeof *r)
        _exit(5);
}

/* In A's process: connects through libpaged, keeping the reason of a refusal in r. Returns
 * nothing. */
static void extra_client(struct report *r)
{
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = "fair-a-extra", .timeout_ms = 10000 };
    paged_client *c = NULL;
    r->extra_rc = paged_client_connect_err(&o, &c, r->extra_msg, sizeof r->extra_msg);
    paged_client_close(c);
}

/*
 * A's process, as nobody. Stage 1: its share of clients and control connections, then one
 * more client (libpaged). Stage 2: one more control connection (raw). Stage 3: its share of
 * connections that say nothing, then one more client (libpaged). Stage 4: a control share wider
 * than the global bound: the bound filled, then one more. After each stage it reports and waits.
 */
static void run_a(int report_fd, int go_fd)
{
    struct rc_client cl[CLIENT_SHARE], ctl[GLOBAL_CONTROL + 1];
    struct report r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < CLIENT_SHARE; i++)
        r.held += rc_connect(daemon_.socket, "fair-a", 0, &cl[i]) == 0;
    for (int i = 0; i < CONTROL_SHARE; i++)
        r.held += rc_connect(daemon_.socket, "fair-a-ctl", PCORE_HELLO_CONTROL, &ctl[i]) == 0;
    extra_client(&r);
    send_report(report_fd, &r);
    await_go(go_fd);

    memset(&r, 0, sizeof r);
    struct rc_client extra;
    r.extra_rc = rc_connect(daemon_.socket, "fair-a-ctl-extra", PCORE_HELLO_CONTROL, &extra);
    memcpy(r.extra_msg, extra.errmsg, sizeof r.extra_msg);
    rc_close(&extra);
    send_report(report_fd, &r);
    await_go(go_fd);

    memset(&r, 0, sizeof r);
    int silent[PENDING_SHARE];
    for (int i = 0; i < PENDING_SHARE; i++) {
        silent[i] = pcore_sock_connect(daemon_.socket);
        r.held += silent[i] >= 0;
    }
    extra_client(&r);
    send_report(report_fd, &r);
    await_go(go_fd);
    for (int i = 0; i < PENDING_SHARE; i++)
        close(silent[i]);
    for (int i = 0; i < CONTROL_SHARE; i++)
        rc_close(&ctl[i]);

    memset(&r, 0, sizeof r);
    for (int i = 0; i < GLOBAL_CONTROL; i++) {
        /* The daemon learns of the closes above in its own time: a refusal is tried again. */
        int rc = PAGED_E_LIMIT;
        for (int tries = 0; tries < 10000 && rc == PAGED_E_LIMIT; tries++)
            rc = rc_connect(daemon_.socket, "fair-a-wide", PCORE_HELLO_CONTROL, &ctl[i]);
        r.held += rc == 0;
    }
    r.extra_rc = rc_connect(daemon_.socket, "fair-a-wide-extra", PCORE_HELLO_CONTROL, &ctl[GLOBAL_CONTROL]);
    memcpy(r.extra_msg, ctl[GLOBAL_CONTROL].errmsg, sizeof r.extra_msg);
    send_report(report_fd, &r);
    await_go(go_fd);
    _exit(0);
}

/* Starts A's process as nobody; returns its pid, with the ends of its report and go pipes. */
static pid_t start_a(int *report_fd, int *go_fd)
{
    int rp[2], gp[2];
    if (pipe(rp) < 0 || pipe(gp) < 0)
        sysbail("pipe");
    pid_t pid = bfork();
    if (pid == 0) {
        close(rp[0]);
        close(gp[1]);
        if (setgroups(0, NULL) != 0 || setgid(A_UID) != 0 || setuid(A_UID) != 0)
            _exit(77);
        run_a(rp[1], gp[0]);
    }
    close(rp[1]);
    close(gp[0]);
    *report_fd = rp[0];
    *go_fd = gp[1];
    return pid;
}

/* Reads A's next report; bails when it does not come. Returns nothing. */
static void next_report(int fd, struct report *r)
{
    if (!hard_read_full(fd, r, sizeof *r, 60000))
        bail("uid %d's process sent no report", A_UID);
    r->extra_msg[sizeof r->extra_msg - 1] = '\0';
}

/* Runs pactl status as uid ((uid_t) -1: the test's, root); returns its run (to free). */
static struct tp_run pactl_status(uid_t uid)
{
    struct tp_run r;
    char *argv[] = { tp_pactl, "-s", daemon_.socket, "status", NULL };
    tp_run_as(&r, uid, argv);
    return r;
}

/* Checks that pactl as A is refused naming want (skipped where A cannot run pactl at all), and
 * that pactl as root runs. Returns nothing. */
static void pactl_cases(const char *stage, const char *want)
{
    static int a_runs = -1;
    if (a_runs < 0)
        a_runs = tp_pactl_runs_as(A_UID);
    if (a_runs) {
        struct tp_run a = pactl_status(A_UID);
        a.err[strcspn(a.err, "\n")] = '\0';    /* its one line, for the test's message */
        ok(a.status == 1 && strstr(a.err, "daemon limit reached") != NULL && strstr(a.err, want) != NULL,
           "%s: uid %d's pactl is refused, naming %s (exit %d: %s)", stage, A_UID, want, a.status, a.err);
        tp_run_free(&a);
    } else {
        skip(1, "uid %d cannot run %s here (a directory above it is closed to that uid)", A_UID, tp_pactl);
    }
    struct tp_run b = pactl_status((uid_t) -1);
    ok(b.status == 0 && strstr(b.out, "clients") != NULL, "%s: root's pactl status runs (exit %d: %s)", stage,
       b.status, b.err);
    tp_run_free(&b);
}

/* As root: connects, creates a pool, writes one token and decodes against it; returns
 * whether every step worked and the output is the token's value (one token: softmax 1). */
static int root_decodes(const char *stage)
{
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = "fair-b", .timeout_ms = 10000 };
    paged_client *c = NULL;
    char why[256];
    int rc = paged_client_connect_err(&o, &c, why, sizeof why);
    if (rc != PAGED_OK) {
        diag("%s: root's connect: %s (%s)", stage, paged_strerror(rc), why);
        return 0;
    }
    char name[32];
    snprintf(name, sizeof name, "fair-%s", stage);
    paged_pool_desc pd = { .name = name, .num_layers = 1, .num_kv_heads = 1, .head_dim = 64, .block_size = 16,
                           .dtype = PAGED_DTYPE_F32, .num_blocks = 8, .mode = 0600 };
    paged_pool *p = NULL;
    int32_t id = -1, len = 1;
    float k[64], v[64], q[64], out[64];
    for (int i = 0; i < 64; i++) {
        k[i] = 0.01f * (float) i;
        v[i] = (float) i - 20.0f;
        q[i] = 1.0f;
        out[i] = 0.0f;
    }
    paged_attn_args a = { .num_seqs = 1, .num_q_heads = 1, .dtype = PAGED_DTYPE_F32, .q = q, .out = out,
                          .block_tables = &id, .bt_stride = 1, .seq_lens = &len };
    int32_t slot = 0;
    const char *step = "create";
    if ((rc = paged_pool_create(c, &pd, &p)) == PAGED_OK && (step = "alloc", rc = paged_alloc(p, 1, &id)) == PAGED_OK
        && (step = "append", slot = id * 16, rc = paged_append(p, 0, 1, PAGED_DTYPE_F32, k, v, &slot)) == PAGED_OK)
        step = "decode", rc = paged_decode(p, 0, &a);
    int right = rc == PAGED_OK;
    for (int i = 0; i < 64 && right; i++)
        right = fabsf(out[i] - v[i]) < 1e-4f;
    if (rc != PAGED_OK)
        diag("%s: root's %s: %s (%s)", stage, step, paged_strerror(rc), paged_client_error(c));
    if (p != NULL)
        paged_pool_destroy(c, name);    /* it goes with the client, as an unlinked file */
    paged_client_close(c);
    return right;
}

/* Uid A holds each share in turn while root connects, decodes and runs pactl; A's extra
 * connections are refused, naming the limit. Returns nothing. */
static void share_cases(void)
{
    int report_fd, go_fd;
    pid_t a = start_a(&report_fd, &go_fd);
    struct report r;
    if (!hard_read_full(report_fd, &r, sizeof r, 60000)) {
        int st;
        hard_child_report(report_fd, a, NULL, 0, 1000, &st);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
            skip_all("cannot switch to uid %d here", A_UID);
        bail("uid %d's process sent no report (wait status %d)", A_UID, st);
    }
    r.extra_msg[sizeof r.extra_msg - 1] = '\0';
    is_int(CLIENT_SHARE + CONTROL_SHARE, r.held, "uid %d holds %d clients and %d control connections", A_UID,
           CLIENT_SHARE, CONTROL_SHARE);
    is_int(PAGED_E_LIMIT, r.extra_rc, "its extra client gets PAGED_E_LIMIT from paged_client_connect_err");
    ok(strstr(r.extra_msg, "uid 65534 already has 2 clients (max-clients-per-uid)") != NULL,
       "the message names the limit: %s", r.extra_msg);
    ok(root_decodes("clients"), "root connects, creates a pool and decodes");
    pactl_cases("clients and control held", "uid 65534 already has 2 control connections (max-control-per-uid)");

    if (write(go_fd, "g", 1) != 1)
        sysbail("write");
    next_report(report_fd, &r);
    is_int(PAGED_E_LIMIT, r.extra_rc, "its extra control connection gets PAGED_E_LIMIT");
    ok(strstr(r.extra_msg, "uid 65534 already has 2 control connections (max-control-per-uid)") != NULL,
       "the refusal names the limit: %s", r.extra_msg);

    if (write(go_fd, "g", 1) != 1)
        sysbail("write");
    next_report(report_fd, &r);
    is_int(PENDING_SHARE, r.held, "uid %d holds %d connections that say nothing", A_UID, PENDING_SHARE);
    is_int(PAGED_E_LIMIT, r.extra_rc, "its next connection gets PAGED_E_LIMIT from paged_client_connect_err, "
           "not PAGED_E_DISCONNECTED");
    ok(strstr(r.extra_msg, "uid 65534 already has 3 connections that have not said HELLO (max-pending-per-uid)")
       != NULL, "the message names the limit: %s", r.extra_msg);
    ok(root_decodes("pending"), "root still connects, creates a pool and decodes");
    pactl_cases("pending held", "(max-pending-per-uid)");

    ok(reload(WIDE_CONTROL, 0, "max-control-per-uid changed from '2' to '65'"),
       "SIGHUP: max-control-per-uid 65 is applied");
    if (write(go_fd, "g", 1) != 1)
        sysbail("write");
    next_report(report_fd, &r);
    is_int(GLOBAL_CONTROL, r.held, "uid %d holds %d control connections, every one the daemon takes from all uids",
           A_UID, GLOBAL_CONTROL);
    is_int(PAGED_E_LIMIT, r.extra_rc, "its next one gets PAGED_E_LIMIT");
    ok(strstr(r.extra_msg, "pagedd already has 64 control connections of all uids") != NULL,
       "the refusal names the global bound: %s", r.extra_msg);
    struct tp_run b = pactl_status((uid_t) -1);
    ok(b.status == 0, "root's pactl runs in the slots kept for root (exit %d: %s)", b.status, b.err);
    tp_run_free(&b);

    if (write(go_fd, "g", 1) != 1)
        sysbail("write");
    close(go_fd);
    int st;
    hard_child_report(report_fd, a, NULL, 0, 1000, &st);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "uid %d's process ends well (wait status %d)", A_UID, st);
}

/* Waits up to 10 s for c's socket to bring the daemon's idle refusal, then its close.
 * Returns whether both came. */
static int closed_idle(struct rc_client *c, const char *who)
{
    unsigned char buf[PCORE_MSG_MAX];
    struct pcore_msg_error e;
    memset(&e, 0, sizeof e);
    int nfds = 0;
    long n = pcore_sock_wait_readable(c->sock, 10000) == 1 ? pcore_sock_recv(c->sock, buf, sizeof buf, NULL, 0, &nfds)
                                                             : -1;
    if (n >= (long) sizeof e)
        memcpy(&e, buf, sizeof e);
    e.message[sizeof e.message - 1] = '\0';
    long end = pcore_sock_wait_readable(c->sock, 10000) == 1 ? pcore_sock_recv(c->sock, buf, sizeof buf, NULL, 0, &nfds)
                                                               : -1;
    return ok(e.hdr.type == PCORE_MSG_ERROR && e.hdr.status == PAGED_E_TIMEOUT
              && strstr(e.message, "no request for 300 ms (control-idle-timeout)") != NULL
              && end == PAGED_E_DISCONNECTED, "%s: closed with PAGED_E_TIMEOUT (%s), then the end", who, e.message);
}

/* A control connection silent for control-idle-timeout is closed, a subscriber is not.
 * Returns nothing. */
static void idle_cases(void)
{
    ok(reload(CONTROL_SHARE, 300, "control-idle-timeout changed from '0' to '300'"),
       "SIGHUP: control-idle-timeout 300 ms is applied");
    struct rc_client sub, idle;
    struct pcore_msg_hdr h = { PCORE_MSG_SUBSCRIBE, 0, 0, sizeof h };
    struct pcore_msg_hdr okr;
    if (rc_connect(daemon_.socket, "fair-sub", PCORE_HELLO_CONTROL, &sub) != 0
        || rc_control(&sub, &h, sizeof h, &okr, sizeof okr, NULL) != (long) sizeof okr)
        bail("the subscriber could not subscribe: %s", sub.errmsg);
    for (int round = 0; round < 2; round++) {
        const int64_t t0 = tap_now_ns();
        if (rc_connect(daemon_.socket, "fair-idle", PCORE_HELLO_CONTROL, &idle) != 0)
            bail("an idle control connection could not connect: %s", idle.errmsg);
        closed_idle(&idle, round == 0 ? "an idle control connection" : "a second one");
        const int64_t ms = (tap_now_ns() - t0) / 1000000;
        ok(ms >= 250, "not before the timeout (after %lld ms)", (long long) ms);
        rc_close(&idle);
    }
    /* The subscriber said nothing for both timeouts: it was left open and got the events. */
    struct pcore_msg_status_reply sr;
    struct pcore_msg_hdr st = { PCORE_MSG_STATUS, 0, 0, sizeof st };
    ok(rc_control(&sub, &st, sizeof st, &sr, sizeof sr, NULL) > 0,
       "the subscriber, silent longer than the timeout, is still served");
    rc_close(&sub);
    ok(pagedd_log_contains(&daemon_, "idle for control-idle-timeout"), "the closes are logged");
}

/* Runs the cases as root against one daemon; returns 0 (TAP reports the results). */
int main(void)
{
    if (geteuid() != 0)
        skip_all("needs root to run a second uid");
    tp_init(&daemon_);
    if (chmod(daemon_.dir, 0755) != 0)
        sysbail("chmod %s", daemon_.dir);
    snprintf(conf_, sizeof conf_, "%s/paged.conf", daemon_.dir);
    write_conf(CONTROL_SHARE, 0);
    const char *args[] = { "--config", conf_, NULL };
    tp_start_daemon(&daemon_, args);
    share_cases();
    idle_cases();
    tp_stop_daemon(&daemon_);
    return 0;
}
