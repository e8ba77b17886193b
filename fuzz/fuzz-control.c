/* fuzz-control.c: libFuzzer harness over HELLO and the control messages of a connection. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/control.h"
#include "daemon/list.h"
#include "daemon/util/knobs.h"
#include "daemon/server.h"
#include "fuzz/fuzz.h"
#include "lib/core/clock.h"
#include "lib/core/sock.h"

/*
 * The input: one setup byte, then records, each a 16-bit little-endian length and that
 * many bytes (the last one cut short by the end of the input). The first record is the
 * connection's first message, handed to pd_control_hello; the others follow as its control
 * messages, handed to pd_control_hello or pd_control_handle by the connection's state as
 * server.c's on_readable does. Between messages the harness plays the client and the event
 * loop: it reads everything the daemon sent (closing the descriptors that came with it),
 * flushes the outgoing queue and continues a LIST, as on_sock would; a refused connection
 * is closed once its error is out. A record of length 0 stands for the client hanging up.
 *
 * Setup bits:
 *   0-1  the client's credentials: root, the base pool's owner, a member of the owner's
 *        group, a stranger;
 *   2    a bystander: another client, connected with a channel, subscribed to events,
 *        attached read-write to the base pool and holding, publishing and caching blocks;
 *   3    tight limits: one client with a channel and two pools (else four and eight).
 *
 * Every input starts from the same state: a server made once by pd_server_create (cpu
 * backend, one worker, a socket in a temporary directory), holding one pool "base" (owner
 * uid 1000, gid 1000, mode 0640; 2 layers, 2 KV heads, head_dim 64, block_size 8, f16, 64
 * blocks), and ends with every connection killed, every pool freed and the counters reset.
 * Pools are limited to 16 MiB each (mem_limit), so one input cannot create large ones.
 *
 * Checked beyond the sanitizers, after every message: the server's connection counters
 * match the connections' states, each pool's attachment count matches the connections'
 * attachments, no destroyed pool without attachments is still listed, every message the
 * daemon sent has a header whose length is the packet's, and WELCOME and POOL_REPLY carry as
 * many descriptors as they say. After every input: every allocator passes pa_check, and once
 * everything is torn down no connection or pool is left and no descriptor is left open.
 */

#define OWNER_UID 1000u
#define OWNER_GID 1000u
#define MAX_RECORDS 64         /* messages per input */
#define PUMP_ROUNDS 4096       /* flush and LIST rounds between two messages */
#define POOL_MEM_LIMIT (16u << 20)

/* One client: the daemon's connection and the client's end of the socket pair. */
struct peer {
    struct pd_conn *c;
    int fd;
};

static struct pd_server *srv;
static char tmpdir[64];

/* The credentials setup bits 0-1 give the fuzzed client. */
static const struct {
    uid_t uid;
    gid_t gid;
} creds[4] = {
    { 0, 0 },
    { OWNER_UID, OWNER_GID },
    { OWNER_UID + 1, OWNER_GID },
    { OWNER_UID + 2, OWNER_GID + 2 },
};

/* Frees the server and its directory at exit; returns nothing. */
static void teardown(void)
{
    pd_server_destroy(srv);
    srv = NULL;
    rmdir(tmpdir);
}

/* Makes the server once; returns 0. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void) argc;
    (void) argv;
    fuzz_log_init();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/paged-fuzz-XXXXXX");
    if (mkdtemp(tmpdir) == NULL)
        fuzz_fail(__FILE__, __LINE__, "mkdtemp", "cannot make a temporary directory");
    struct pd_config cfg;
    pd_config_defaults(&cfg, "/nonexistent/paged.conf");
    cfg.backend = PD_BACKEND_CPU;
    cfg.threads = 1;
    snprintf(cfg.socket, sizeof cfg.socket, "%s/pagedd.sock", tmpdir);
    /* pd_server_create blocks SIGTERM, SIGINT and SIGHUP for its signalfd; libFuzzer wants
     * them (a stop on SIGINT, its timeouts), and no loop here reads that descriptor. */
    sigset_t old;
    sigprocmask(SIG_BLOCK, NULL, &old);
    char *cause = NULL;
    if (pd_knobs_load(&cause) < 0)   /* the environment's knobs, as pagedd's main reads them */
        fuzz_fail(__FILE__, __LINE__, "pd_knobs_load", "%s", cause != NULL ? cause : "?");
    srv = pd_server_create(&cfg, NULL, NULL, &cause);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (srv == NULL)
        fuzz_fail(__FILE__, __LINE__, "pd_server_create", "%s", cause != NULL ? cause : "?");
    srv->mem_limit = POOL_MEM_LIMIT;
    atexit(teardown);
    return 0;
}

/* Opens a connection as on_accept would, with the given credentials; returns the peer. */
static struct peer connect_client(uid_t uid, gid_t gid)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        fuzz_fail(__FILE__, __LINE__, "socketpair", "cannot make a socket pair");
    struct pd_conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        fuzz_fail(__FILE__, __LINE__, "calloc", "out of memory");
    c->fd = sv[0];
    c->id = srv->next_client_id++;
    c->pid = getpid();
    c->uid = uid;
    c->gid = gid;
    c->connected_ns = pcore_now_ns();
    c->deadline_ns = c->connected_ns + (uint64_t) srv->cfg.hello_timeout_ms * 1000000u;
    c->sock_watch = (struct pd_watch) { PD_W_SOCK, c };
    c->sock_events = EPOLLIN | EPOLLRDHUP;
    struct epoll_event ev = { .events = c->sock_events, .data.ptr = &c->sock_watch };
    if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
        fuzz_fail(__FILE__, __LINE__, "epoll_ctl", "cannot watch the connection");
    c->next = srv->conns;
    if (srv->conns != NULL)
        srv->conns->prev = c;
    srv->conns = c;
    if (pd_tally_add(&srv->tally, uid, PD_TALLY_PENDING) < 0)
        fuzz_fail(__FILE__, __LINE__, "pd_tally_add", "out of memory");
    return (struct peer) { c, sv[1] };
}

/* Checks one message the daemon sent (n bytes with nfds descriptors); returns nothing. */
static void check_reply(const unsigned char *buf, ssize_t n, int nfds)
{
    struct pcore_msg_hdr h;
    FUZZ_CHECK(n >= (ssize_t) sizeof h, "the daemon sent a packet of %zd bytes", n);
    memcpy(&h, buf, sizeof h);
    FUZZ_CHECK(h.len == (uint32_t) n, "message type %u says %u bytes, packet has %zd", h.type,
               h.len, n);
    if (h.type == PCORE_MSG_ERROR) {
        FUZZ_CHECK(n == (ssize_t) sizeof(struct pcore_msg_error), "ERROR of %zd bytes", n);
        const struct pcore_msg_error *e = (const void *) buf;
        FUZZ_CHECK(memchr(e->message, '\0', sizeof e->message) != NULL && h.status < 0,
                   "ERROR without a terminated message or a negative status (%d)", h.status);
    } else if (h.type == PCORE_MSG_WELCOME) {
        struct pcore_msg_welcome w;
        FUZZ_CHECK(n == (ssize_t) sizeof w, "WELCOME of %zd bytes", n);
        memcpy(&w, buf, sizeof w);
        FUZZ_CHECK(w.num_fds == (uint32_t) nfds, "WELCOME says %u descriptors, carries %d",
                   w.num_fds, nfds);
    } else if (h.type == PCORE_MSG_POOL_REPLY) {
        struct pcore_msg_pool_reply r;
        FUZZ_CHECK(n == (ssize_t) sizeof r, "POOL_REPLY of %zd bytes", n);
        memcpy(&r, buf, sizeof r);
        FUZZ_CHECK(r.num_fds == (uint32_t) nfds, "POOL_REPLY says %u descriptors, carries %d",
                   r.num_fds, nfds);
    } else {
        FUZZ_CHECK(nfds == 0, "message type %u carries %d descriptors", h.type, nfds);
    }
}

/* Reads everything the daemon sent to a client, checking it and closing its descriptors;
 * returns nothing. */
static void drain(int fd)
{
    static unsigned char buf[PCORE_MSG_MAX];
    for (;;) {
        int fds[PSOCK_MAX_FDS], nfds = 0;
        ssize_t n = pcore_sock_recv(fd, buf, sizeof buf, fds, PSOCK_MAX_FDS, &nfds);
        if (n < 0) {
            FUZZ_CHECK(n == PAGED_E_AGAIN || n == PAGED_E_DISCONNECTED,
                       "reading the daemon's messages: %s", paged_strerror((int) n));
            return;
        }
        check_reply(buf, n, nfds);
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
    }
}

/* Plays the event loop for one client until nothing waits to go out: what on_sock does on
 * EPOLLOUT, with the client reading everything. Returns nothing. */
static void pump(struct peer *p)
{
    struct pd_conn *c = p->c;
    for (int i = 0; i < PUMP_ROUNDS && c->state != PD_CONN_DEAD; i++) {
        drain(p->fd);
        if (c->out_head != NULL && pd_conn_flush(c) < 0) {
            pd_server_kill(srv, c, PD_LOG_INFO, "hung up");
            break;
        }
        if (c->out_head == NULL && c->list.active)
            pd_list_continue(srv, c);
        if (c->out_head == NULL && !c->list.active)
            break;
    }
    if (c->state != PD_CONN_DEAD && c->out_head == NULL && c->close_after_flush)
        pd_server_kill(srv, c, PD_LOG_DEBUG, "refused");
    drain(p->fd);
    FUZZ_CHECK(c->state == PD_CONN_DEAD || (c->out_head == NULL && !c->list.active),
               "client %u still has output after %d rounds", c->id, PUMP_ROUNDS);
}

/* Returns how many attachments live connections have to p. */
static uint32_t attachments_to(const struct pd_pool *p)
{
    uint32_t n = 0;
    for (struct pd_conn *c = srv->conns; c != NULL; c = c->next)
        for (uint32_t i = 0; i < c->natt; i++)
            n += c->att[i].pool == p;
    return n;
}

/* Checks the server's bookkeeping against its connections and pools, and with full every
 * pool's allocator too; returns nothing. */
static void check_server(int full)
{
    uint32_t pending = 0, channel = 0, control = 0;
    for (struct pd_conn *c = srv->conns; c != NULL; c = c->next) {
        FUZZ_CHECK(c->natt <= c->catt, "client %u: %u attachments in room for %u", c->id,
                   c->natt, c->catt);
        if (c->state == PD_CONN_DEAD) {
            FUZZ_CHECK(c->natt == 0 && c->ch == NULL && c->fd < 0 && c->out_head == NULL,
                       "dead client %u still holds something", c->id);
            continue;
        }
        if (c->state == PD_CONN_HELLO) {
            pending++;
            FUZZ_CHECK(c->ch == NULL && c->natt == 0, "client %u before HELLO has a channel "
                       "or pools", c->id);
        } else if (c->control_only) {
            control++;
            FUZZ_CHECK(c->ch == NULL, "control client %u has a channel", c->id);
        } else {
            channel++;
            FUZZ_CHECK(c->ch != NULL, "client %u has no channel", c->id);
        }
        for (uint32_t i = 0; i < c->natt; i++) {
            const struct pd_attach *a = &c->att[i];
            FUZZ_CHECK(a->view.user == a->pool && a->view.id == a->pool->id
                       && a->view.alloc == a->pool->alloc, "client %u: stale pool view", c->id);
            /* A sharded pool's attachment is a rank of a group that counts it; any other's
             * holder is the client itself, on shard 0. */
            const struct pd_group *g = a->pool->tp != NULL ? pd_shards_group(a->pool->tp, a->view.holder) : NULL;
            FUZZ_CHECK(a->pool->tp != NULL ? g != NULL && g->uid == c->uid && (g->ranks >> a->view.shard & 1)
                                           : a->view.holder == c->id && a->view.shard == 0,
                       "client %u: attachment to pool %u holder %#x shard %u is in no group of its uid", c->id,
                       a->pool->id, a->view.holder, a->view.shard);
            for (uint32_t j = 0; j < i; j++)
                FUZZ_CHECK(c->att[j].pool != a->pool, "client %u attached twice to pool %u",
                           c->id, a->pool->id);
        }
    }
    const uint32_t *total = srv->tally.total;
    FUZZ_CHECK(pending == total[PD_TALLY_PENDING] && channel == total[PD_TALLY_CLIENT]
               && control == total[PD_TALLY_CONTROL],
               "counters pending %u channel %u control %u, connections say %u %u %u",
               total[PD_TALLY_PENDING], total[PD_TALLY_CLIENT], total[PD_TALLY_CONTROL], pending, channel, control);
    uint32_t pools = 0;
    for (struct pd_pool *p = srv->pools; p != NULL; p = p->next) {
        pools++;
        uint32_t n = attachments_to(p);
        FUZZ_CHECK(p->attached == n, "pool %u counts %u attachments, connections have %u", p->id,
                   p->attached, n);
        /* Every rank a sharded pool's groups count is an attachment, and no group is empty. */
        uint32_t ranks = 0;
        for (const struct pd_group *g = p->tp != NULL ? p->tp->groups : NULL; g != NULL; g = g->next) {
            FUZZ_CHECK(g->ranks != 0, "pool %u keeps an empty group", p->id);
            ranks += (uint32_t) __builtin_popcount(g->ranks);
        }
        FUZZ_CHECK(p->tp == NULL || ranks == n, "pool %u: its groups count %u ranks, %u attachments", p->id, ranks,
                   n);
        FUZZ_CHECK(!p->destroyed || p->attached != 0, "destroyed pool %u kept with no one "
                   "attached", p->id);
        /* pa_check is linear in the pool: once per input, not per message, keeps the
         * executions per second up. */
        if (full) {
            const char *bad = pa_check(p->alloc);
            FUZZ_CHECK(bad == NULL, "pool %u allocator: %s", p->id, bad);
        }
    }
    FUZZ_CHECK(pools == srv->n_pools, "n_pools %u, list holds %u", srv->n_pools, pools);
}

/* Creates the base pool every input starts with; returns it. */
static struct pd_pool *make_base_pool(void)
{
    struct pcore_msg_pool_create m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "base");
    m.num_layers = 2;
    m.num_kv_heads = 2;
    m.head_dim = 64;
    m.block_size = 8;
    m.dtype = PAGED_DTYPE_F16;
    m.num_blocks = 64;
    m.mode = 0640;
    struct pd_pool_geom g;
    char why[PCORE_ERRMSG_MAX];
    char *cause = NULL;
    struct pd_pool *p;
    if (pd_pool_check_create(&m, 0, PD_POOL_MEMORY_AUTO, &g, why, sizeof why) < 0)
        fuzz_fail(__FILE__, __LINE__, "base pool geometry", "%s", why);
    if (pd_pool_create(srv->backend, srv->next_pool_id, "base", &g, OWNER_UID, OWNER_GID, &p,
                       &cause) < 0)
        fuzz_fail(__FILE__, __LINE__, "pd_pool_create", "%s", cause != NULL ? cause : "?");
    srv->next_pool_id++;
    p->next = srv->pools;
    srv->pools = p;
    srv->n_pools++;
    return p;
}

/* Hands one message to the connection as on_readable would, then pumps; returns nothing. */
static void deliver(struct peer *p, const void *msg, size_t len)
{
    if (p->c->state == PD_CONN_HELLO)
        pd_control_hello(srv, p->c, msg, len);
    else
        pd_control_handle(srv, p->c, msg, len);
    pump(p);
}

/* Connects the bystander: a channel client that subscribes, attaches to base read-write
 * and holds blocks 0-5 of it, 0 and 1 published, while 2 and 3 were published and let go
 * (cached). Returns the peer. */
static struct peer add_bystander(struct pd_pool *base)
{
    struct peer by = connect_client(OWNER_UID, OWNER_GID);
    struct pcore_msg_hello h;
    memset(&h, 0, sizeof h);
    h.hdr = (struct pcore_msg_hdr) { PCORE_MSG_HELLO, 1, 0, sizeof h };
    h.magic = PCORE_HELLO_MAGIC;
    h.version = PCORE_PROTO_VERSION;
    h.sq_entries = 8;
    h.cq_entries = 8;
    h.host_arena_size = 64u << 10;
    snprintf(h.name, sizeof h.name, "bystander");
    deliver(&by, &h, sizeof h);
    struct pcore_msg_hdr sub = { PCORE_MSG_SUBSCRIBE, 2, 0, sizeof sub };
    deliver(&by, &sub, sizeof sub);
    struct pcore_msg_pool_attach at;
    memset(&at, 0, sizeof at);
    at.hdr = (struct pcore_msg_hdr) { PCORE_MSG_POOL_ATTACH, 3, 0, sizeof at };
    snprintf(at.name, sizeof at.name, "base");
    at.flags = PCORE_ATTACH_WRITE;
    deliver(&by, &at, sizeof at);
    FUZZ_CHECK(by.c->state == PD_CONN_READY && by.c->subscribed && by.c->natt == 1
               && by.c->att[0].view.writable, "the bystander did not get set up");

    int32_t ids[8], tokens[4 * 8];
    paged_hash hashes[4], parent = { 0 };
    for (int i = 0; i < 4 * 8; i++)
        tokens[i] = 1000 + i;
    FUZZ_CHECK(pa_alloc_blocks(base->alloc, by.c->id, 6, ids) == 0, "bystander's blocks");
    FUZZ_CHECK(paged_hash_blocks(&parent, tokens, 4 * 8, 8, 7, hashes) == 4, "hashes");
    FUZZ_CHECK(pa_publish(base->alloc, by.c->id, by.c->att[0].view.tenant, 4, ids, hashes, NULL) == 4, "publish");
    FUZZ_CHECK(pa_free_blocks(base->alloc, by.c->id, 2, ids + 2, NULL) == 0, "cache");
    return by;
}

/* Kills every connection, frees every pool and resets the counters; returns nothing. */
static void reset_server(void)
{
    for (struct pd_conn *c = srv->conns; c != NULL; c = c->next)
        pd_server_kill(srv, c, PD_LOG_DEBUG, "end of input");
    pd_server_sweep(srv);
    FUZZ_CHECK(srv->conns == NULL && srv->tally.len == 0, "connections left: pending %u channel %u control %u",
               srv->tally.total[PD_TALLY_PENDING], srv->tally.total[PD_TALLY_CLIENT],
               srv->tally.total[PD_TALLY_CONTROL]);
    uint32_t pools = 0;
    while (srv->pools != NULL) {
        struct pd_pool *p = srv->pools;
        FUZZ_CHECK(p->attached == 0, "pool %u still counts %u attachments", p->id, p->attached);
        srv->pools = p->next;
        pd_pool_free(srv->backend, p);
        pools++;
    }
    FUZZ_CHECK(pools == srv->n_pools, "n_pools %u, list held %u", srv->n_pools, pools);
    srv->n_pools = 0;
    srv->next_pool_id = 1;
    srv->next_client_id = 1;
    memset(&srv->stats, 0, sizeof srv->stats);
}

/* Runs one input; returns 0. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct fuzz_fds fds;
    fuzz_fds_snapshot(&fds);
    uint8_t setup = data[0];
    srv->cfg.max_clients = (setup & 8) ? 1 : 4;
    srv->cfg.max_pools = (setup & 8) ? 2 : 8;
    struct pd_pool *base = make_base_pool();
    struct peer by = { NULL, -1 };
    if (setup & 4)
        by = add_bystander(base);
    struct peer me = connect_client(creds[setup & 3].uid, creds[setup & 3].gid);
    check_server(0);

    size_t off = 1;
    for (int n = 0; n < MAX_RECORDS && off < size; n++) {
        if (me.c->state == PD_CONN_DEAD || me.c->close_after_flush)
            break;
        size_t len = data[off++];
        if (off < size)
            len |= (size_t) data[off++] << 8;
        if (len > size - off)
            len = size - off;
        if (len == 0) {
            /* A zero-length packet is how recv reports the end of the stream. */
            pd_server_kill(srv, me.c, PD_LOG_INFO, "hung up");
            break;
        }
        /* A packet of its own, so that ASan sees a read past its end (the daemon reads into
         * a 64 KiB buffer, where such a read would go unnoticed). */
        unsigned char *msg = malloc(len);
        if (msg == NULL)
            fuzz_fail(__FILE__, __LINE__, "malloc", "out of memory");
        memcpy(msg, data + off, len);
        off += len;
        deliver(&me, msg, len);
        free(msg);
        if (by.c != NULL)
            pump(&by);
        check_server(0);
    }
    check_server(1);

    reset_server();
    close(me.fd);
    if (by.fd >= 0)
        close(by.fd);
    fuzz_fds_check(&fds, "after an input");
    return 0;
}
