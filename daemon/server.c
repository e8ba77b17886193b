/* server.c: the daemon's one event loop: socket, clients, rings, signals, shutdown. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/server.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/control.h"
#include "daemon/events.h"
#include "daemon/list.h"
#include "daemon/util/knobs.h"
#include "daemon/util/heap.h"
#include "daemon/notify.h"
#ifdef HAVE_UCX
#include "daemon/peer/peer.h"
#endif
#include "lib/core/clock.h"
#include "lib/core/sock.h"
#include "lib/core/wake.h"

#define MAX_PENDING 256u        /* connections that have not said HELLO yet, of all uids */
#define MAX_CONTROL 64u         /* control connections (pactl), of all uids, apart from max-clients */
#define PRIVILEGED_RESERVE 8u   /* more of both for root and the daemon's uid (daemon/tally.h) */
#define DRAIN_BUDGET 32u        /* submissions per client per pass, for fairness */
#define MSGS_PER_TURN 16        /* control messages read per connection per turn */
#define ACCEPTS_PER_TURN 64     /* connections accepted per turn: a flood of refused ones waits */
#define SHUTDOWN_FLUSH_MS 1000  /* how long shutdown waits for slow sockets */

/* Creates the directories above path (mode 0755) as needed; returns 0 or -1 with errno. */
static int make_parent_dirs(const char *path)
{
    char dir[PD_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* Resolves a group name or number; returns 0 with *gid or -1. */
static int resolve_group(const char *name, gid_t *gid)
{
    char *end;
    unsigned long v = strtoul(name, &end, 10);
    if (*name != '\0' && *end == '\0') {
        *gid = (gid_t) v;
        return 0;
    }
    struct group *g = getgrnam(name);
    if (g == NULL)
        return -1;
    *gid = g->gr_gid;
    return 0;
}

/* Sets c's epoll interest from its state; see server.h. */
void pd_server_watch(struct pd_server *srv, struct pd_conn *c)
{
    if (c->state == PD_CONN_DEAD)
        return;
    uint32_t want = EPOLLRDHUP;
    if (c->out_head == NULL && !c->list.active && !c->close_after_flush)
        want |= EPOLLIN;
    if (c->out_head != NULL)
        want |= EPOLLOUT;
    if (want == c->sock_events)
        return;
    struct epoll_event ev = { .events = want, .data.ptr = &c->sock_watch };
    if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
        c->sock_events = want;
}

/* Kills c: see server.h. */
void pd_server_kill(struct pd_server *srv, struct pd_conn *c, enum pd_log_level level,
                    const char *reason)
{
    if (c->state == PD_CONN_DEAD)
        return;
    uint64_t t0 = pcore_now_ns();
    enum pd_conn_state was = c->state;
    c->state = PD_CONN_DEAD;
    if (c->subscribed && (c->subscribe_flags & PCORE_SUBSCRIBE_BLOCKS) != 0)
        pd_events_blocks_update(srv);
    pd_tally_remove(&srv->tally, c->uid, was == PD_CONN_HELLO ? PD_TALLY_PENDING
                    : c->control_only ? PD_TALLY_CONTROL : PD_TALLY_CLIENT);
    if (was == PD_CONN_READY && !c->control_only)
        pd_server_spin_hint(srv);
    uint64_t released = 0;
    uint32_t pools = c->natt;
    /* Work of its that the engine completed early may still use its blocks. */
    if (c->natt > 0)
        pd_engine_settle(srv->engine, c);
    while (c->natt > 0) {
        const struct pd_attach *a = &c->att[c->natt - 1];
        struct pd_pool *p = a->pool;
        released += pd_pool_detach_holder(p, a->view.holder, a->view.shard);
        c->natt--;
        p->attached--;
        pd_events_flush_blocks(srv, p);
        if (p->destroyed && p->attached == 0)
            pd_pool_release(&srv->pools, &srv->n_pools, srv->backend, p);
    }
    /* An inspection connection's end is routine: a warning stays one, the rest is debug. */
    if (c->inspect && level == PD_LOG_INFO)
        level = PD_LOG_DEBUG;
    if (was == PD_CONN_READY) {
        pd_clog(c, level, "disconnected: %s (%llu block references in %u pools released, "
                "%llu requests, %llu errors)", reason, (unsigned long long) released, pools,
                (unsigned long long) c->requests, (unsigned long long) c->errors);
        pd_events_announce(srv, PCORE_EVENT_DISCONNECT, c, "", (uint32_t) released);
    } else
        pd_clog(c, level, "connection closed: %s", reason);
    /* A last error message (a refusal, a corrupt ring) is worth one try. */
    pd_conn_flush(c);
    pd_conn_drop_queue(c);
    epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    if (c->ch != NULL) {
        epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, c->ch->sq_wait, NULL);
        pd_channel_destroy(c->ch);
        c->ch = NULL;
    }
    c->list.active = 0;
    uint64_t spent = pcore_now_ns() - t0;
    if (spent >= 5000000u)      /* every other client waited meanwhile */
        pd_clog(c, PD_LOG_DEBUG, "letting it go took %.1f ms", (double) spent / 1e6);
}

/* Sets every client's spin hint: the oldest srv->spinners clients may spin; see server.h. */
void pd_server_spin_hint(struct pd_server *srv)
{
    uint32_t n = srv->tally.total[PD_TALLY_CLIENT], seen = 0;    /* the list is newest first */
    for (struct pd_conn *c = srv->conns; c != NULL; c = c->next)
        if (c->state == PD_CONN_READY && c->ch != NULL) {
            uint32_t nospin = n - seen > srv->spinners;
            seen++;
            c->nospin = (int) nospin;
            atomic_store_explicit(pcore_ring_word(&c->ch->cq.ctl->consumer_nospin), nospin,
                                  memory_order_relaxed);
        }
}

/* Frees connections killed during this turn; see server.h. */
void pd_server_sweep(struct pd_server *srv)
{
    struct pd_conn *c = srv->conns;
    int swept = 0;
    while (c != NULL) {
        struct pd_conn *next = c->next;
        if (c->reply_lost && c->state != PD_CONN_DEAD)
            pd_server_kill(srv, c, PD_LOG_INFO, "a reply was lost");   /* marks it, never unlinks */
        if (c->state == PD_CONN_DEAD) {
            if (c->prev != NULL)
                c->prev->next = c->next;
            else
                srv->conns = c->next;
            if (c->next != NULL)
                c->next->prev = c->prev;
            swept |= c->engine_decode_pass != 0;
            free(c->att);
            free(c);
        }
        c = next;
    }
    /* The last client that ran a DECODE has left: the engine reports what it did. */
    for (c = srv->conns; swept && c != NULL; c = c->next)
        if (c->engine_decode_pass != 0)
            swept = 0;
    if (swept)
        pd_engine_idle(srv->engine);
}

/* Tells a connection the daemon could not take on why (an ERROR answering its HELLO, which
 * it reads once it has sent it) and closes it; returns nothing. */
static void refuse_unaccepted(int fd, int status, const char *why)
{
    struct pcore_msg_error e;
    memset(&e, 0, sizeof e);
    e.hdr = (struct pcore_msg_hdr) { .type = PCORE_MSG_ERROR, .seq = 0, .status = status, .len = sizeof e };
    snprintf(e.message, sizeof e.message, "%s", why);
    if (send(fd, &e, sizeof e, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t) sizeof e)
        pd_log(PD_LOG_DEBUG, "a refused connection was not told why: %s", strerror(errno));
    close(fd);
}

/* Says whether one more connection of kind from uid fits the settings; see server.h. */
int pd_server_admit(const struct pd_server *srv, uid_t uid, enum pd_tally_kind kind, char *why, size_t size)
{
    const struct pd_tally_limits lim = {
        .per_uid = { srv->cfg.max_pending_per_uid, srv->cfg.max_control_per_uid, srv->cfg.max_clients_per_uid },
        .global = { MAX_PENDING, MAX_CONTROL, srv->cfg.max_clients },
        .reserve = { PRIVILEGED_RESERVE, PRIVILEGED_RESERVE, 0 },
        .per_uid_key = { "max-pending-per-uid", "max-control-per-uid", "max-clients-per-uid" },
        .global_key = { NULL, NULL, "max-clients" },
        .self = srv->self_uid,
    };
    return pd_tally_admit(&srv->tally, &lim, uid, kind, why, size);
}

/* Logs a limit refusal, at most one a second; see server.h. */
void pd_server_log_refusal(struct pd_server *srv, const struct pd_conn *c, const char *why)
{
    uint64_t now = pcore_now_ns();
    if (srv->refusal_logged_ns != 0 && now - srv->refusal_logged_ns < 1000000000u) {
        if (srv->refusals_unlogged < UINT32_MAX)
            srv->refusals_unlogged++;
        return;
    }
    char more[64] = "";
    if (srv->refusals_unlogged != 0)
        snprintf(more, sizeof more, " (and %u refusals not logged in the second before)", srv->refusals_unlogged);
    if (c != NULL)
        pd_clog(c, PD_LOG_WARNING, "refused: %s%s", why, more);
    else
        pd_log(PD_LOG_WARNING, "refused a new connection: %s%s", why, more);
    srv->refusal_logged_ns = now;
    srv->refusals_unlogged = 0;
}

/* Accepts pending connections, up to ACCEPTS_PER_TURN (the listening socket is level-
 * triggered: the rest come next turn, after the others' events); returns nothing. */
static void on_accept(struct pd_server *srv)
{
    for (unsigned turn = 0; turn < ACCEPTS_PER_TURN; turn++) {
        int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            /* Out of descriptors or memory: stop accepting for a moment, or the level-
             * triggered listening socket would spin the loop. */
            pd_log(PD_LOG_WARNING, "accept: %s; pausing new connections for 100 ms", strerror(errno));
            struct epoll_event ev = { .events = 0, .data.ptr = &srv->listen_watch };
            epoll_ctl(srv->epoll_fd, EPOLL_CTL_MOD, srv->listen_fd, &ev);
            srv->accept_paused_until = pcore_now_ns() + 100000000u;
            return;
        }
        pid_t pid = 0;
        uid_t uid = (uid_t) -1;
        gid_t gid = (gid_t) -1;
        if (pcore_sock_peercred(fd, &pid, &uid, &gid) < 0) {
            pid = 0;
            uid = (uid_t) -1;
            gid = (gid_t) -1;
        }
        /* Refused here, with the reason, not dropped: the client reports the limit. */
        char why[PCORE_ERRMSG_MAX];
        if (pd_server_admit(srv, uid, PD_TALLY_PENDING, why, sizeof why) < 0) {
            pd_server_log_refusal(srv, NULL, why);
            refuse_unaccepted(fd, PAGED_E_LIMIT, why);
            continue;
        }
        struct pd_conn *c = pd_calloc(1, sizeof *c);
        if (c == NULL || pd_tally_add(&srv->tally, uid, PD_TALLY_PENDING) < 0) {
            pd_log(PD_LOG_WARNING, "out of memory for a new connection: refusing it");
            refuse_unaccepted(fd, PAGED_E_NOMEM, "pagedd is out of memory for a new connection");
            free(c);
            continue;
        }
        c->fd = fd;
        c->id = srv->next_client_id++;
        if (srv->next_client_id == 0)
            srv->next_client_id = 1;
        c->pid = pid;
        c->uid = uid;
        c->gid = gid;
        c->connected_ns = pcore_now_ns();
        c->active_ns = c->connected_ns;
        c->deadline_ns = c->connected_ns + (uint64_t) srv->cfg.hello_timeout_ms * 1000000u;
        c->sock_watch = (struct pd_watch) { PD_W_SOCK, c };
        c->sock_events = EPOLLIN | EPOLLRDHUP;
        struct epoll_event ev = { .events = c->sock_events, .data.ptr = &c->sock_watch };
        if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            pd_tally_remove(&srv->tally, uid, PD_TALLY_PENDING);
            close(fd);
            free(c);
            continue;
        }
        c->next = srv->conns;
        if (srv->conns != NULL)
            srv->conns->prev = c;
        srv->conns = c;
    }
}

/* Reads and handles c's messages; returns nothing. */
static void on_readable(struct pd_server *srv, struct pd_conn *c)
{
    static unsigned char buf[PCORE_MSG_MAX];
    for (int i = 0; i < MSGS_PER_TURN; i++) {
        if (c->state == PD_CONN_DEAD || c->out_head != NULL || c->list.active || c->close_after_flush)
            return;
        /* No message to the daemon carries descriptors: any that come are closed, and the
         * message is refused as one that does not fit. */
        int fds[PSOCK_MAX_FDS], nfds = 0;
        ssize_t n = pcore_sock_recv(c->fd, buf, sizeof buf, fds, PSOCK_MAX_FDS, &nfds);
        for (int k = 0; k < nfds; k++)
            close(fds[k]);
        if (n == PAGED_E_AGAIN)
            return;
        if (n == PAGED_E_DISCONNECTED) {
            pd_server_kill(srv, c, PD_LOG_INFO, "hung up");
            return;
        }
        if (n == PAGED_E_PROTO || (n >= 0 && nfds > 0)) {
            if (c->state == PD_CONN_HELLO)
                pd_control_refuse(srv, c, PAGED_E_PROTO, "HELLO longer than a HELLO or carrying descriptors");
            else
                pd_conn_error(c, 0, PAGED_E_PROTO, "message longer than %u bytes or carrying "
                              "descriptors: dropped", PCORE_MSG_MAX);
            continue;
        }
        if (n < 0) {
            pd_server_kill(srv, c, PD_LOG_WARNING, "socket error");
            return;
        }
        c->active_ns = pcore_now_ns();
        if (c->state == PD_CONN_HELLO)
            pd_control_hello(srv, c, buf, (size_t) n);
        else
            pd_control_handle(srv, c, buf, (size_t) n);
    }
}

/* Handles socket events of c; returns nothing. */
static void on_sock(struct pd_server *srv, struct pd_conn *c, uint32_t events)
{
    if (c->state == PD_CONN_DEAD)
        return;
    if (events & EPOLLOUT) {
        const size_t queued = c->out_count;
        if (pd_conn_flush(c) < 0) {
            pd_server_kill(srv, c, PD_LOG_INFO, "hung up");
            return;
        }
        if (c->out_count < queued)      /* a peer reading a long answer is not idle */
            c->active_ns = pcore_now_ns();
        pd_events_report_lost(srv, c);
        if (c->state == PD_CONN_DEAD)
            return;
    }
    if (c->out_head == NULL && c->list.active)
        pd_list_continue(srv, c);
    if (c->state != PD_CONN_DEAD && c->out_head == NULL && c->close_after_flush) {
        pd_server_kill(srv, c, PD_LOG_DEBUG, "refused");
        return;
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP | EPOLLERR))
        on_readable(srv, c);
    if (c->state != PD_CONN_DEAD && (events & (EPOLLHUP | EPOLLERR)) && c->out_head != NULL)
        pd_server_kill(srv, c, PD_LOG_INFO, "hung up");
    if (c->state != PD_CONN_DEAD)
        pd_server_watch(srv, c);
}

/* Applies one changed setting on reload, or says it needs a restart; returns nothing. */
static void reload_key(void *ctx, const char *key, const char *oldv, const char *newv, int live)
{
    (void) ctx;
    if (live)
        pd_log(PD_LOG_INFO, "reload: %s changed from '%s' to '%s'", key, oldv, newv);
    else
        pd_log(PD_LOG_WARNING, "reload: %s changed from '%s' to '%s': needs a restart, not applied",
               key, oldv, newv);
}

/* Re-reads the configuration and applies what can change live; returns nothing. */
static void reload(struct pd_server *srv)
{
    pd_notify_reloading();
    /* A log file rotated away (logrotate's create) is followed by the one now under its name. */
    if (pd_log_reopen() < 0)
        pd_log(PD_LOG_ERROR, "reload: cannot reopen the log file %s: %s; writing on to the old one",
               srv->cfg.log_file, strerror(errno));
    struct pd_config n;
    char *cause = NULL;
    if (srv->reload == NULL || srv->reload(srv->reload_ctx, &n, &cause) < 0) {
        pd_log(PD_LOG_ERROR, "reload failed: %s; keeping the current settings",
               cause != NULL ? cause : "no configuration source");
        free(cause);
        pd_notify_ready();
        return;
    }
    /* Report under the more verbose of the two levels, so that both a switch to debug
     * and one to error leave a trace of what changed. */
    pd_log_set_level(n.log_level > srv->cfg.log_level ? n.log_level : srv->cfg.log_level);
    int changed = pd_config_diff(&srv->cfg, &n, reload_key, NULL);
    pd_log(PD_LOG_INFO, "reloaded %s: %d settings changed", n.config, changed);
    pd_log_set_level(n.log_level);
    srv->cfg.log_level = n.log_level;
    srv->cfg.max_clients = n.max_clients;
    srv->cfg.max_clients_per_uid = n.max_clients_per_uid;
    srv->cfg.max_control_per_uid = n.max_control_per_uid;
    srv->cfg.max_pending_per_uid = n.max_pending_per_uid;
    srv->cfg.control_idle_timeout_ms = n.control_idle_timeout_ms;
    srv->cfg.max_pools = n.max_pools;
    srv->cfg.max_blocks_per_client = n.max_blocks_per_client;
    srv->cfg.pool_memory = n.pool_memory;
    srv->cfg.hello_timeout_ms = n.hello_timeout_ms;
    srv->cfg.spin_us = n.spin_us;
    srv->cfg.dependency_timeout_ms = n.dependency_timeout_ms;
    srv->cfg.dependency_waits = n.dependency_waits;
    srv->cfg.dependency_strikes = n.dependency_strikes;
    srv->cfg.prefix_ttl_ms = n.prefix_ttl_ms;
    srv->cfg.pin_limit_uid = n.pin_limit_uid;
    srv->cfg.pin_limit_pool = n.pin_limit_pool;
    srv->cfg.host_tier_mb = n.host_tier_mb;
    srv->cfg.host_tier_max_mb = n.host_tier_max_mb;
    memcpy(srv->cfg.file_tier, n.file_tier, sizeof srv->cfg.file_tier);
    srv->cfg.file_tier_mb = n.file_tier_mb;
    srv->cfg.shutdown_write_timeout_ms = n.shutdown_write_timeout_ms;
    srv->engine_env.max_blocks_per_client = n.max_blocks_per_client;
    srv->engine_env.dependency_timeout_ms = n.dependency_timeout_ms;
    srv->engine_env.dependency_inline = n.dependency_waits == 1;
    srv->engine_env.dependency_strikes = n.dependency_strikes;
    pd_notify_ready();
}

/* Reads the signalfd; returns nothing. */
static void on_signal(struct pd_server *srv)
{
    struct signalfd_siginfo si;
    while (read(srv->signal_fd, &si, sizeof si) == (ssize_t) sizeof si) {
        if (si.ssi_signo == SIGHUP)
            reload(srv);
        else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
            srv->stop = 1;
            srv->stop_signal = (int) si.ssi_signo;
        }
    }
}

/* Handles a readable or hung-up submission wake-up of c; returns nothing. */
static void on_sq(struct pd_server *srv, struct pd_conn *c, uint32_t events)
{
    if (c->state == PD_CONN_DEAD || c->ch == NULL)
        return;
    pcore_wake_drain(c->ch->sq_wait);
    if (events & (EPOLLHUP | EPOLLERR)) {
        /* The client closed its end: it will get no more wake-ups from us to sleep on, but
         * the spin still sees its ring; its socket tells us when it is really gone. */
        epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, c->ch->sq_wait, NULL);
    }
}

/* Runs every client's ready submissions once around, as one batch; returns how many ran. */
static unsigned engine_pass(struct pd_server *srv)
{
    return pd_engine_pass(srv->engine, DRAIN_BUDGET);
}

/* Returns when control connection c is closed for idleness (control-idle-timeout after it
 * last sent a message or took part of an answer), or UINT64_MAX where it is not: a worker, a
 * subscriber (waiting for events is its job; it counts against its uid's control share, so
 * it keeps nobody else out), a connection being refused, or no timeout set. */
static uint64_t idle_deadline(const struct pd_server *srv, const struct pd_conn *c)
{
    if (c->state != PD_CONN_READY || !c->control_only || c->subscribed || c->close_after_flush
        || srv->cfg.control_idle_timeout_ms == 0)
        return UINT64_MAX;
    return c->active_ns + (uint64_t) srv->cfg.control_idle_timeout_ms * 1000000u;
}

/* Drops every pool's cached blocks whose time to live passed, announcing each pool's count
 * as an EXPIRE event; returns nothing. */
static void expire_pools(struct pd_server *srv)
{
    for (struct pd_pool *p = srv->pools; p != NULL; p = p->next) {
        uint32_t n = pd_pool_expire(p);
        if (n != 0) {
            pd_log(PD_LOG_DEBUG, "pool '%s': %u cached blocks expired", p->name, n);
            pd_events_announce(srv, PCORE_EVENT_EXPIRE, NULL, p->name, n);
        }
        pd_events_flush_blocks(srv, p);
    }
}

/* Drops connections past their HELLO deadline, closes idle control connections (telling
 * them why), resumes accepting and expires cached blocks; returns nothing. */
static void check_timers(struct pd_server *srv, uint64_t now)
{
    expire_pools(srv);
    if (srv->accept_paused_until != 0 && now >= srv->accept_paused_until) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &srv->listen_watch };
        epoll_ctl(srv->epoll_fd, EPOLL_CTL_MOD, srv->listen_fd, &ev);
        srv->accept_paused_until = 0;
    }
    if (srv->tally.total[PD_TALLY_PENDING] == 0 && srv->tally.total[PD_TALLY_CONTROL] == 0)
        return;
    for (struct pd_conn *c = srv->conns; c != NULL; c = c->next) {
        if (c->state == PD_CONN_HELLO && now >= c->deadline_ns && !c->close_after_flush)
            pd_server_kill(srv, c, PD_LOG_WARNING, "no HELLO in time");
        else if (now >= idle_deadline(srv, c)) {
            pd_conn_error(c, 0, PAGED_E_TIMEOUT, "closed: no request for %u ms (control-idle-timeout)",
                          srv->cfg.control_idle_timeout_ms);
            pd_server_kill(srv, c, PD_LOG_INFO, "idle for control-idle-timeout");
        }
    }
}

/* Returns the epoll timeout in ms until the next timer, -1 for none. */
static int next_timeout(struct pd_server *srv, uint64_t now)
{
    uint64_t next = UINT64_MAX;
    if (srv->accept_paused_until != 0)
        next = srv->accept_paused_until;
    for (struct pd_pool *p = srv->pools; p != NULL; p = p->next) {
        const uint64_t at = pd_pool_next_expiry(p);
        if (at < next)
            next = at;
    }
    for (struct pd_conn *c = srv->conns; c != NULL; c = c->next) {
        if (c->state == PD_CONN_HELLO && c->deadline_ns < next)
            next = c->deadline_ns;
        const uint64_t idle = idle_deadline(srv, c);
        if (idle < next)
            next = idle;
        /* Nothing wakes us when a client reaps a full completion ring: look again soon. */
        if (c->state == PD_CONN_READY && c->cq_blocked && now + 1000000u < next)
            next = now + 1000000u;
    }
    /* Batches completed early are still queued: their watchdog must look now and then. */
    if (pd_engine_inflight(srv->engine) && now + 10000000u < next)
        next = now + 10000000u;
    /* A request waits for a host word, which wakes nobody when written: look every ms. */
    for (struct pd_conn *c = srv->conns; c != NULL; c = c->next)
        if (c->state == PD_CONN_READY && c->dep_since_ns != 0 && now + 1000000u < next)
            next = now + 1000000u;
    if (next == UINT64_MAX)
        return -1;
    if (next <= now)
        return 0;
    uint64_t ms = (next - now + 999999u) / 1000000u;
    return ms > 60000 ? 60000 : (int) ms;
}

/* Announces the shutdown to every client and gives their sockets a bounded time to take
 * it; returns nothing. */
static void shutdown_clients(struct pd_server *srv)
{
    pd_notify_stopping();
    pd_log(PD_LOG_INFO, "shutting down on %s: %u clients, %u pools", strsignal(srv->stop_signal),
           srv->tally.total[PD_TALLY_CLIENT] + srv->tally.total[PD_TALLY_CONTROL], srv->n_pools);
    for (struct pd_conn *c = srv->conns; c != NULL; c = c->next) {
        if (c->state != PD_CONN_READY)
            continue;
        pd_engine_cancel(srv->engine, c);
        struct pcore_msg_hdr h = { PCORE_MSG_SHUTDOWN, 0, PAGED_E_SHUTDOWN, sizeof h };
        c->list.active = 0;
        pd_conn_send(c, &h, sizeof h, NULL, 0, 0);
    }
    uint64_t deadline = pcore_now_ns() + (uint64_t) SHUTDOWN_FLUSH_MS * 1000000u;
    for (struct pd_conn *c = srv->conns; c != NULL; c = c->next) {
        while (c->state == PD_CONN_READY && c->out_head != NULL) {
            uint64_t now = pcore_now_ns();
            if (now >= deadline)
                break;
            struct pollfd pfd = { .fd = c->fd, .events = POLLOUT };
            if (poll(&pfd, 1, (int) ((deadline - now) / 1000000u) + 1) <= 0 || pd_conn_flush(c) < 0)
                break;
        }
        pd_server_kill(srv, c, PD_LOG_INFO, "daemon shutting down");
    }
    pd_server_sweep(srv);
}

/* Writes what each live pool's file tier lacks of its blocks and host tier, all pools within
 * shutdown-write-timeout together; returns nothing. */
static void persist_pools(struct pd_server *srv)
{
    const uint64_t bound_ns = (uint64_t) srv->cfg.shutdown_write_timeout_ms * 1000000u;
    const uint64_t deadline = bound_ns != 0 ? pcore_now_ns() + bound_ns : 0;
    for (struct pd_pool *p = srv->pools; p != NULL; p = p->next)
        pd_pool_persist(p, deadline);
}

/* Serves until stopped; returns 0. */
int pd_server_run(struct pd_server *srv)
{
    struct epoll_event evs[64];
    uint64_t last_work = pcore_now_ns(), last_poll = 0;
    while (!srv->stop) {
        unsigned work = engine_pass(srv);
        uint64_t now = pcore_now_ns();
        if (work != 0)
            last_work = now;
        int timeout;
        int prepared = 0;
        if (now - last_work < (uint64_t) srv->cfg.spin_us * 1000u) {
            /* Spinning: look at the sockets now and then, not on every pass. */
            if (now - last_poll < 20000u) {
                pcore_cpu_relax();
                continue;
            }
            timeout = 0;
        } else {
            /* About to sleep: tell every client to wake us, then look once more. Withheld
             * completions keep us passing: nothing else would post them. */
            int pending = pd_engine_withheld(srv->engine);
            for (struct pd_conn *c = srv->conns; c != NULL; c = c->next)
                if (c->state == PD_CONN_READY && c->ch != NULL)
                    pcore_wake_prepare(&c->ch->sq);
            prepared = 1;
            for (struct pd_conn *c = srv->conns; c != NULL && !pending; c = c->next)
                pending = pd_engine_pending(c);
            timeout = pending ? 0 : next_timeout(srv, now);
        }
#ifdef HAVE_UCX
        if (srv->peers != NULL) {
            if (!pd_peers_poll(srv->peers) || srv->remote_done)
                timeout = 0;
            srv->remote_done = 0;
            const int peer_ms = pd_peers_timeout_ms(srv->peers);
            if (peer_ms >= 0 && (timeout < 0 || timeout > peer_ms))
                timeout = peer_ms;
        }
#endif
        int n = epoll_wait(srv->epoll_fd, evs, 64, timeout);
        /* A stop and continue (SIGSTOP, a debugger) interrupts the wait; collect what became
         * ready meanwhile, a SIGTERM included, before the rings are served again. */
        while (n < 0 && errno == EINTR)
            n = epoll_wait(srv->epoll_fd, evs, 64, 0);
        last_poll = pcore_now_ns();
        if (prepared)
            for (struct pd_conn *c = srv->conns; c != NULL; c = c->next)
                if (c->state == PD_CONN_READY && c->ch != NULL)
                    pcore_wake_cancel(&c->ch->sq);
        if (n < 0) {
            pd_log(PD_LOG_ERROR, "epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            struct pd_watch *w = evs[i].data.ptr;
            switch (w->kind) {
            case PD_W_LISTEN: on_accept(srv); break;
            case PD_W_SIGNAL: on_signal(srv); break;
            case PD_W_SOCK: on_sock(srv, w->conn, evs[i].events); break;
            case PD_W_SQ:
                on_sq(srv, w->conn, evs[i].events);
                last_work = last_poll;
                break;
            case PD_W_PEERS:
                break;          /* pd_peers_poll runs at the top of the next turn */
            }
        }
        check_timers(srv, last_poll);
        pd_server_sweep(srv);
    }
    shutdown_clients(srv);
    persist_pools(srv);
    return 0;
}

/* The engine's kill (ctx: the server): pd_server_kill. Returns nothing. */
static void engine_kill(void *ctx, struct pd_conn *c, enum pd_log_level level, const char *reason)
{
    pd_server_kill(ctx, c, level, reason);
}

/* The engine's flush_evictions (ctx: the server): announces every pool's evictions since the
 * last call and sends its block events. Returns nothing. */
static void engine_flush_evictions(void *ctx)
{
    struct pd_server *srv = ctx;
    for (struct pd_pool *p = srv->pools; p != NULL; p = p->next) {
        pd_events_flush_evictions(srv, p);
        pd_events_flush_blocks(srv, p);
    }
}

/* Returns how many CPUs this process may run on (its affinity mask: a cpuset, taskset or
 * systemd's CPUAffinity= leave fewer than are online), or the online CPUs where the mask
 * cannot be read. */
static long usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    return sysconf(_SC_NPROCESSORS_ONLN);
}

/* Fills *cause with why pcore_sock_listen refused path with rc: a live pagedd there, a file
 * that is not a socket, another program's socket, or the system's reason. Returns nothing. */
static void listen_cause(const char *path, int rc, char **cause)
{
    const int err = errno;
    struct stat st;
    int r;
    if (rc == PAGED_E_EXIST)
        r = asprintf(cause, "another daemon is listening on %s", path);
    else if (rc == PAGED_E_PROTO && lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
        r = asprintf(cause, "%s is not a socket: remove it or choose another --socket", path);
    else if (rc == PAGED_E_PROTO)
        r = asprintf(cause, "%s is not a pagedd socket (another program listens there): choose another --socket",
                     path);
    else
        r = asprintf(cause, "cannot listen on %s: %s (%s)", path, paged_strerror(rc), strerror(err));
    if (r < 0)
        *cause = NULL;
}

#ifdef HAVE_UCX
/* The peers' done function (ctx: the server): the LOOKUP of client conn_id may run now, so
 * the loop passes before it sleeps. Returns nothing. */
static void on_remote_done(void *ctx, uint32_t conn_id)
{
    struct pd_server *srv = ctx;
    pd_engine_remote_done(srv->engine, conn_id);
    srv->remote_done = 1;
}
#endif

/* Opens the peer module where the configuration names peers, watching its descriptor and
 * making it the engine's remote lookup; refuses peers in a daemon built without UCX. Returns 0,
 * or -1 with *cause. */
static int open_peers(struct pd_server *srv, char **cause)
{
    const struct pd_config *cfg = &srv->cfg;
    if (cfg->peers[0] == '\0' && cfg->peer_listen[0] == '\0')
        return 0;
#ifdef HAVE_UCX
    if (pd_peers_open(cfg, srv->backend, &srv->pools, &srv->peers, cause) != PAGED_OK)
        return -1;
    srv->peers_watch.kind = PD_W_PEERS;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &srv->peers_watch };
    if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, pd_peers_fd(srv->peers), &ev) < 0) {
        if (asprintf(cause, "cannot watch the peers' descriptor: %s", strerror(errno)) < 0)
            *cause = NULL;
        return -1;
    }
    srv->engine_env.remote_start = pd_peers_prefetch;
    srv->engine_env.remote_ctx = srv->peers;
    pd_peers_set_done(srv->peers, on_remote_done, srv);
    return 0;
#else
    *cause = strdup("peers and peer-listen need a pagedd built with UCX (./configure --with-ucx)");
    return -1;
#endif
}

/* Creates the server; returns it or NULL with *cause. */
struct pd_server *pd_server_create(const struct pd_config *cfg, pd_reload_fn *reload_fn,
                                   void *reload_ctx, char **cause)
{
    struct pd_server *srv = pd_calloc(1, sizeof *srv);
    if (srv == NULL) {
        *cause = strdup("out of memory");
        return NULL;
    }
    srv->cfg = *cfg;
    srv->listen_fd = srv->epoll_fd = srv->signal_fd = -1;
    srv->next_client_id = 1;
    srv->next_pool_id = 1;
    srv->reload = reload_fn;
    srv->reload_ctx = reload_ctx;
    srv->start_ns = pcore_now_ns();
    srv->self_uid = geteuid();
    long cpus = usable_cpus();
    srv->spinners = cpus > 2 && cpus < (long) UINT32_MAX ? (uint32_t) cpus - 2 : 0;
    if (pd_knob_is_set(PD_KNOB_SPINNERS)) {
        srv->spinners = (uint32_t) pd_knob(PD_KNOB_SPINNERS);
        pd_log(PD_LOG_INFO, "up to %u clients spin in their waits (PAGEDD_SPINNERS)", srv->spinners);
    }
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    srv->mem_limit = pages > 0 && psize > 0 ? (uint64_t) pages * (uint64_t) psize : 0;

    /* Signals first, so that worker threads started by the backend inherit the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    /* Ignored, so that the engine wakes clients with one system call (engine.h). */
    const int sigpipe_ignored = signal(SIGPIPE, SIG_IGN) != SIG_ERR;
    srv->signal_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    srv->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (srv->signal_fd < 0 || srv->epoll_fd < 0) {
        if (asprintf(cause, "cannot create the event loop: %s", strerror(errno)) < 0)
            *cause = NULL;
        goto fail;
    }
    srv->backend = pd_backend_open(cfg, cause);
    if (srv->backend == NULL)
        goto fail;
    srv->backend->ops->info(srv->backend, 0, &srv->binfo);
    srv->engine_env = (struct pd_engine_env) {
        .backend = srv->backend, .conns = &srv->conns,
        .max_blocks_per_client = cfg->max_blocks_per_client,
        .dependency_timeout_ms = cfg->dependency_timeout_ms, .dependency_inline = cfg->dependency_waits == 1,
        .dependency_strikes = cfg->dependency_strikes, .stats = &srv->stats,
        .sigpipe_ignored = sigpipe_ignored, .ctx = srv, .kill = engine_kill,
        .flush_evictions = engine_flush_evictions,
    };
    srv->engine = pd_engine_create(&srv->engine_env);
    if (srv->engine == NULL) {
        *cause = strdup("out of memory");
        goto fail;
    }
    /* Host memory does not bound a GPU pool: the cuda backend checks free device memory. */
    if (srv->binfo.kind == PAGED_BACKEND_CUDA)
        srv->mem_limit = 0;

    gid_t gid = (gid_t) -1;
    if (cfg->socket_group[0] != '\0' && resolve_group(cfg->socket_group, &gid) < 0) {
        if (asprintf(cause, "socket-group: no group '%s'", cfg->socket_group) < 0)
            *cause = NULL;
        goto fail;
    }
    if (make_parent_dirs(cfg->socket) < 0) {
        if (asprintf(cause, "cannot create the directory of %s: %s", cfg->socket, strerror(errno)) < 0)
            *cause = NULL;
        goto fail;
    }
    srv->listen_fd = pcore_sock_listen(cfg->socket, (mode_t) cfg->socket_mode, gid);
    if (srv->listen_fd < 0) {
        listen_cause(cfg->socket, srv->listen_fd, cause);
        srv->listen_fd = -1;
        goto fail;
    }
    srv->listen_watch.kind = PD_W_LISTEN;
    srv->signal_watch.kind = PD_W_SIGNAL;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &srv->listen_watch };
    struct epoll_event sev = { .events = EPOLLIN, .data.ptr = &srv->signal_watch };
    if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, srv->listen_fd, &ev) < 0
        || epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, srv->signal_fd, &sev) < 0) {
        if (asprintf(cause, "cannot watch the socket: %s", strerror(errno)) < 0)
            *cause = NULL;
        goto fail;
    }
    if (open_peers(srv, cause) < 0)
        goto fail;
    pd_log(PD_LOG_INFO, "listening on %s (backend %s: %s)", cfg->socket, srv->backend->ops->name,
           srv->binfo.device_name);
    return srv;
fail:
    pd_server_destroy(srv);
    return NULL;
}

/* Frees the server and removes its socket; returns nothing. */
void pd_server_destroy(struct pd_server *srv)
{
    if (srv == NULL)
        return;
    for (struct pd_conn *c = srv->conns; c != NULL; c = c->next)
        pd_server_kill(srv, c, PD_LOG_DEBUG, "daemon exiting");
    pd_server_sweep(srv);
    pd_tally_free(&srv->tally);
#ifdef HAVE_UCX
    pd_peers_close(srv->peers);
#endif
    while (srv->pools != NULL) {
        struct pd_pool *p = srv->pools;
        srv->pools = p->next;
        pd_pool_free(srv->backend, p);
    }
    if (srv->listen_fd >= 0) {
        close(srv->listen_fd);
        unlink(srv->cfg.socket);
    }
    pd_backend_close(srv->backend);
    pd_engine_destroy(srv->engine);
    if (srv->epoll_fd >= 0)
        close(srv->epoll_fd);
    if (srv->signal_fd >= 0)
        close(srv->signal_fd);
    free(srv);
}
