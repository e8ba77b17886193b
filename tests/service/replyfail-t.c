/* replyfail-t.c: a reply pagedd cannot queue disconnects its client instead of leaving it waiting. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/core/sock.h"
#include "tests/service/rawclient.h"
#include "tests/service/proc.h"
#include "tests/tap/basic.h"

/*
 * A control client that sends STATS requests without reading the replies fills its socket
 * (each reply is larger than its request, so the replies to the requests its own socket holds
 * are more than pagedd's socket holds); pagedd then queues the next reply on its heap and
 * reads nothing more from that client until the queue drains. Here every heap allocation of such a run fails in turn
 * (PAGEDD_FAIL_ALLOC_AT, daemon/util/heap.h), the queued reply's among them: whatever failed, the
 * flooding client must get each of its replies in order or, once one is lost, the end of the
 * stream (never a silence it would wait out), another client must be answered meanwhile, and
 * pagedd must exit 0.
 */
#define MAX_SENT 4000          /* STATS requests at most: far more than the sockets hold */
#define FLOOD_WAIT_MS 10000    /* the daemon taking no more of the flood for this long: a hang */
#define READ_WAIT_MS 5000      /* a reply not here by then counts as lost in silence */
#define MAX_RUNS 500           /* a sweep longer than this many allocations is a bug */

static struct pagedd daemon_;

/* What one run found. */
struct outcome {
    int connected;             /* the flooding client got in (else it was refused, with a message) */
    long sent, got;            /* STATS requests sent, replies read in order */
    int closed;                /* the daemon ended the stream */
    int silent;                /* a reply neither came nor was the stream ended within READ_WAIT_MS */
    int disorder;              /* a reply out of order, or not a STATS_REPLY */
    int stalled;               /* the daemon never found the client's socket full */
    int other_ok;              /* the other client was answered (or refused with a message) */
    int status;                /* pagedd's exit status */
    struct td_allocfail log;
};

/* Returns how many messages of len bytes a socket pair like a client's takes unread. */
static long capacity(size_t len)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        sysbail("socketpair");
    static unsigned char msg[PCORE_MSG_MAX];
    long n = 0;
    while (n < 100000 && send(sv[0], msg, len, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t) len)
        n++;
    close(sv[0]);
    close(sv[1]);
    return n;
}

/* Sends STATS requests 1, 2, ... on c without reading, until its socket is full, the daemon
 * hangs up, or MAX_SENT; returns how many went. */
static long flood(struct rc_client *c)
{
    long sent = 0;
    while (sent < MAX_SENT) {
        struct pcore_msg_hdr h = { PCORE_MSG_STATS, (uint32_t) sent + 1, 0, sizeof h };
        if (send(c->sock, &h, sizeof h, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t) sizeof h)
            break;          /* EAGAIN: full; EPIPE or ECONNRESET: the daemon hung up */
        sent++;
    }
    return sent;
}

/* Reads c's replies to sent STATS requests in order into o, stopping at the end of the
 * stream or at a reply that does not come within READ_WAIT_MS. Returns nothing. */
static void drain(struct rc_client *c, struct outcome *o)
{
    unsigned char buf[PCORE_MSG_MAX];
    for (long tries = 0; o->got < o->sent && tries < 4 * MAX_SENT; tries++) {
        int nfds = 0;
        ssize_t n = pcore_sock_recv(c->sock, buf, sizeof buf, NULL, 0, &nfds);
        if (n == PAGED_E_AGAIN) {
            if (pcore_sock_wait_readable(c->sock, READ_WAIT_MS) != 1) {
                o->silent = 1;
                return;
            }
            continue;
        }
        if (n == PAGED_E_DISCONNECTED) {
            o->closed = 1;
            return;
        }
        const struct pcore_msg_hdr *h = (const void *) buf;
        if (n < (ssize_t) sizeof *h || h->type != PCORE_MSG_STATS_REPLY || h->seq != (uint32_t) o->got + 1) {
            o->disorder = 1;
            return;
        }
        o->got++;
    }
}

/* Starts pagedd with allocation n failing (0: none), floods a client and reads its replies
 * while another asks for STATS; fills *o. */
static void one_run(unsigned long long n, struct outcome *o)
{
    memset(o, 0, sizeof *o);
    char v[64];
    snprintf(v, sizeof v, "PAGEDD_FAIL_ALLOC_AT=%llu", n != 0 ? n : 1000000000ull);
    int st = 0;
    const char *extra[] = { "--log-level", "debug", NULL };
    const char *env[] = { v, NULL };
    if (pagedd_start(&daemon_, extra, env, &st) != 0)
        bail("pagedd did not start (status %d)", st);

    /* Both connected first, so that the daemon's allocations come in one order: the two
     * connections, then the queued replies. */
    struct rc_client lazy, other;
    int rc = rc_connect(daemon_.socket, "flood", PCORE_HELLO_CONTROL, &lazy);
    o->connected = rc == 0;
    int orc = rc_connect(daemon_.socket, "other", PCORE_HELLO_CONTROL, &other);
    if (o->connected)
        o->sent = flood(&lazy);
    struct pcore_msg_stats_reply stats;
    if (orc == 0) {
        o->other_ok = rc_stats(&other, &stats) == 0;
        rc_close(&other);
    } else {
        o->other_ok = orc == PAGED_E_NOMEM && other.errmsg[0] != '\0';
    }

    if (o->connected) {
        /* The flood's replies are more than the client's socket holds: pagedd must find it
         * full and keep a reply on its heap (or fail to) before the client reads any. */
        o->stalled = !pagedd_log_wait(&daemon_, "its socket is full", FLOOD_WAIT_MS);
        drain(&lazy, o);
        rc_close(&lazy);
    }
    o->status = pagedd_stop(&daemon_);
    td_read_allocfail(&daemon_, &o->log);
    pagedd_cleanup(&daemon_);
}

/* Returns whether run o went as it must: each reply in order, or the end of the stream once
 * a failure fired; the other client served; pagedd exited 0. Describes it in what. */
static int run_good(const struct outcome *o, char *what, size_t size)
{
    snprintf(what, size, "%s, %ld sent%s, %ld replies in order%s%s%s, other client %s, exit status %d",
             o->connected ? "connected" : "refused", o->sent, o->stalled ? " (then no room)" : "", o->got,
             o->closed ? ", then the end of the stream" : "", o->silent ? ", then silence" : "",
             o->disorder ? ", then a wrong reply" : "", o->other_ok ? "served" : "NOT served", o->status);
    if (o->stalled || o->silent || o->disorder || !o->other_ok || o->status != 0)
        return 0;
    if (!o->connected || o->closed)
        return o->log.fired;            /* only a planted failure may refuse or end it */
    return o->got == o->sent;
}

/* Runs the sweep; returns 0 (TAP reports the results). */
int main(void)
{
    plan(4);
    /* A full socket of requests must have more replies than the client's socket holds. */
    const long requests = capacity(sizeof(struct pcore_msg_hdr)),
               replies = capacity(sizeof(struct pcore_msg_stats_reply));
    if (requests <= replies || requests > MAX_SENT)
        bail("a socket here takes %ld requests and %ld replies unread: the flood would not fill it", requests,
             replies);
    struct outcome o;
    char what[300];
    one_run(0, &o);
    ok(run_good(&o, what, sizeof what) && !o.log.fired && !o.closed && o.sent >= requests,
       "with no failure planted every reply comes (%s; a socket takes %ld requests, %ld replies; %llu allocations)",
       what, requests, replies, o.log.counted);
    const unsigned long long counted = o.log.counted;

    unsigned long long n = 1, bad = 0, queued = 0, ended = 0;
    for (; n <= MAX_RUNS; n++) {
        one_run(n, &o);
        if (!o.log.fired && n > counted)
            break;
        if (!run_good(&o, what, sizeof what)) {
            bad++;
            diag("allocation %llu (%s) went wrong: %s [log: %s]", n, o.log.site, what, o.log.logged);
        }
        if (o.log.fired)
            diag("allocation %llu (%s): %s", n, o.log.site, what);
        if (o.log.fired && strstr(o.log.site, "conn.c") != NULL) {
            queued++;
            ended += o.closed && o.got < o.sent;
        }
    }
    ok(bad == 0, "each of allocations 1 to %llu failing in turn left no client waiting in silence, no reply out of "
       "order, the other client served and pagedd exiting 0 (%llu runs went wrong)", n - 1, bad);
    ok(queued > 0 && ended == queued, "a reply that could not be queued (%llu of the runs) ended its client's stream "
       "after the replies before it (%llu did)", queued, ended);
    ok(n <= MAX_RUNS, "the sweep ended: allocation %llu was never made", n);
    return 0;
}
