/* client.c: connecting to pagedd (HELLO, WELCOME, the channel), closing, and the client's accessors. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/client.h"
#include "lib/core/shm.h"
#include "lib/core/sock.h"
#include "lib/core/utf8.h"

/* Defaults of paged_connect_opts. */
#define PC_DEFAULT_SQ 256u
#define PC_DEFAULT_HOST_ARENA (64ull << 20)
#define PC_DEFAULT_DATA_ARENA (256ull << 20)
#define PC_DEFAULT_TIMEOUT_MS 10000

/* Returns whether n is a power of two. */
static int is_pow2(uint32_t n)
{
    return n != 0 && (n & (n - 1)) == 0;
}

/* Sets O_NONBLOCK on fd; returns PAGED_OK or PAGED_E_SYSTEM. */
static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return PAGED_E_SYSTEM;
    return PAGED_OK;
}

/* Returns a fresh client with every descriptor marked absent, or NULL. */
static paged_client *client_new(void)
{
    paged_client *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->sock = c->sq_notify_fd = c->cq_wait_fd = c->epoll_fd = c->data_fd = -1;
    c->msgbuf = malloc(PCORE_MSG_MAX);
    if (c->msgbuf == NULL) {
        free(c);
        return NULL;
    }
    pcore_waiter_init(&c->waiter, PCORE_WAKE_SPIN_NS);
    return c;
}

/* Frees everything a client holds, in any state of construction. */
static void client_free(paged_client *c)
{
    while (c->pools != NULL)
        pc_pool_free(c->pools);
    if (c->host_dptr != 0)
        pc_cuda_host_unmap(c->cuda, c->data_map.device, c->host.base);
    pc_cuda_unmap(c->cuda, &c->data_map);
    pc_cuda_unload(c->cuda);
    if (c->chan != NULL)
        pcore_shm_unmap(c->chan, c->chan_size);
    int fds[] = { c->sock, c->sq_notify_fd, c->cq_wait_fd, c->epoll_fd, c->data_fd };
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(c->slots);
    free(c->free_slots);
    free(c->queue);
    free(c->prep_slots);
    free(c->msgbuf);
    free(c);
}

/* Fills the parts of a HELLO every connection has: header, magic, version, flags, pid and name
 * (at most 63 bytes, cut at a character boundary; bytes that are no UTF-8 become U+FFFD).
 * Returns nothing. */
static void hello_base(struct pcore_msg_hello *m, uint32_t flags, const char *name)
{
    memset(m, 0, sizeof *m);
    m->hdr.type = PCORE_MSG_HELLO;
    m->magic = PCORE_HELLO_MAGIC;
    m->version = PCORE_PROTO_VERSION;
    m->flags = flags;
    m->pid = (uint32_t) getpid();
    pcore_utf8_clean(m->name, sizeof m->name, name != NULL ? name : "", SIZE_MAX);
}

/* Fills a HELLO from the options. Returns PAGED_OK or PAGED_E_INVAL naming the bad option. */
static int fill_hello(paged_client *c, const paged_connect_opts *o, struct pcore_msg_hello *m)
{
    hello_base(m, 0, o->name != NULL ? o->name : program_invocation_short_name);
    m->sq_entries = o->sq_entries != 0 ? o->sq_entries : PC_DEFAULT_SQ;
    m->cq_entries = o->cq_entries != 0 ? o->cq_entries : 2 * m->sq_entries;
    if (!is_pow2(m->sq_entries) || m->sq_entries > PCORE_RING_MAX_ENTRIES) {
        pc_set_err(c, "sq_entries %u is not a power of two up to 2^30", m->sq_entries);
        return PAGED_E_INVAL;
    }
    if (!is_pow2(m->cq_entries) || m->cq_entries < m->sq_entries
        || m->cq_entries > PCORE_RING_MAX_ENTRIES) {
        pc_set_err(c, "cq_entries %u is not a power of two >= sq_entries", m->cq_entries);
        return PAGED_E_INVAL;
    }
    m->host_arena_size = o->host_arena_size != 0 ? o->host_arena_size : PC_DEFAULT_HOST_ARENA;
    m->data_arena_size = o->data_arena_size != 0 ? o->data_arena_size : PC_DEFAULT_DATA_ARENA;
    m->device = o->device;
    return PAGED_OK;
}

/* Checks that a WELCOME speaks this library's protocol. Returns PAGED_OK or PAGED_E_VERSION. */
static int check_version(paged_client *c, const struct pcore_msg_welcome *w)
{
    if (w->version == PCORE_PROTO_VERSION)
        return PAGED_OK;
    pc_set_err(c, "the daemon speaks protocol version %u, this library %u", w->version, PCORE_PROTO_VERSION);
    return PAGED_E_VERSION;
}

/* Checks a WELCOME against the descriptors that came with it. Returns PAGED_OK or an error. */
static int check_welcome(paged_client *c, const struct pcore_msg_welcome *w, int nfds)
{
    if (check_version(c, w) < 0)
        return PAGED_E_VERSION;
    if (w->num_fds != (uint32_t) nfds || nfds < 3) {
        pc_set_err(c, "WELCOME announced %u descriptors and carried %d", w->num_fds, nfds);
        return PAGED_E_PROTO;
    }
    if (w->backend == PAGED_BACKEND_CPU) {
        if (nfds != 3) {
            pc_set_err(c, "WELCOME from a cpu daemon carried %d descriptors", nfds);
            return PAGED_E_PROTO;
        }
        return PAGED_OK;
    }
    if (w->backend != PAGED_BACKEND_CUDA) {
        pc_set_err(c, "WELCOME names an unknown backend %u", w->backend);
        return PAGED_E_PROTO;
    }
    int want = w->data_arena_kind == PCORE_MEM_CUDA_VMM ? 4
               : w->data_arena_kind == PCORE_MEM_CUDA_IPC ? 3 : -1;
    if (want < 0 || nfds != want || w->data_arena_size == 0
        || w->data_arena_alloc < w->data_arena_size) {
        pc_set_err(c, "WELCOME describes a device arena libpaged cannot use (kind %u, %d fds)",
                   w->data_arena_kind, nfds);
        return PAGED_E_PROTO;
    }
    return PAGED_OK;
}

/* Maps the channel memfd and attaches to its rings. Returns PAGED_OK or an error. */
static int map_channel(paged_client *c, int fd, uint64_t size)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return PAGED_E_SYSTEM;
    if (size < sizeof(struct pcore_channel_hdr) || (uint64_t) st.st_size != size) {
        pc_set_err(c, "channel is %lld bytes, WELCOME said %llu", (long long) st.st_size,
                   (unsigned long long) size);
        return PAGED_E_PROTO;
    }
    int rc = pcore_shm_map(fd, size, 1, &c->chan);
    if (rc < 0) {
        c->chan = NULL;
        pc_set_err(c, "cannot map the channel: %s", paged_strerror(rc));
        return rc;
    }
    c->chan_size = size;
    /* Our own copy: everything after this reads the geometry from it, never from the map. */
    memcpy(&c->hdr, c->chan, sizeof c->hdr);
    rc = pcore_channel_check(&c->hdr, size);
    if (rc < 0) {
        pc_set_err(c, "the channel header does not add up (%s)", paged_strerror(rc));
        return rc;
    }
    unsigned char *b = c->chan;
    rc = pcore_ring_prod_init(&c->sq, (void *) (b + c->hdr.sq_ctl_off), b + c->hdr.sq_off,
                              c->hdr.sq_entries, sizeof(struct pcore_sqe));
    if (rc == PAGED_OK)
        rc = pcore_ring_cons_init(&c->cq, (void *) (b + c->hdr.cq_ctl_off), b + c->hdr.cq_off,
                                  c->hdr.cq_entries, sizeof(struct pcore_cqe));
    if (rc < 0) {
        pc_set_err(c, "the channel's rings are not empty or not sane");
        return rc == PAGED_E_INVAL ? PAGED_E_PROTO : rc;
    }
    c->host.base = b + c->hdr.arena_off;
    c->host.size = c->hdr.arena_size;
    return PAGED_OK;
}

/* Allocates the slot table and the completion queue for cq_entries. */
static int alloc_tables(paged_client *c)
{
    uint32_t n = c->hdr.cq_entries;
    c->cq_entries = n;
    c->slots = calloc(n, sizeof *c->slots);
    c->free_slots = malloc(sizeof *c->free_slots * (size_t) n);
    c->queue = malloc(sizeof *c->queue * (size_t) n);
    c->prep_slots = malloc(sizeof *c->prep_slots * (size_t) c->hdr.sq_entries);
    if (c->slots == NULL || c->free_slots == NULL || c->queue == NULL || c->prep_slots == NULL)
        return PAGED_E_NOMEM;
    /* Hand out low indices first: a stack popped from the end. */
    for (uint32_t i = 0; i < n; i++)
        c->free_slots[i] = n - 1 - i;
    c->nfree = n;
    return PAGED_OK;
}

/* Creates the epoll instance paged_client_fd returns. */
static int make_epoll(paged_client *c)
{
    c->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (c->epoll_fd < 0)
        return PAGED_E_SYSTEM;
    struct epoll_event ev = { .events = EPOLLIN };
    ev.data.fd = c->cq_wait_fd;
    if (epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, c->cq_wait_fd, &ev) != 0)
        return PAGED_E_SYSTEM;
    ev.data.fd = c->sock;
    if (epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, c->sock, &ev) != 0)
        return PAGED_E_SYSTEM;
    return PAGED_OK;
}

/* Keeps in c the reason pcore_sock_connect refused path with rc (errno err), naming the path:
 * nobody listening, a file that is not a socket, no permission, or the system's reason.
 * PAGED_E_PERM's own text is about pools, so the socket's case says it in full. Returns nothing. */
static void connect_cause(paged_client *c, const char *path, int rc, int err)
{
    struct stat st;
    switch (rc) {
    case PAGED_E_NOTCONN:
        /* connect() to a regular file is refused as to a dead socket: look at the file. */
        if (stat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
            pc_set_err(c, "%s is not a socket, so not a pagedd socket", path);
        else
            pc_set_err(c, "no daemon listening on %s", path);
        break;
    case PAGED_E_PROTO:
        pc_set_err(c, "%s is not a pagedd socket (a socket of another type)", path);
        break;
    case PAGED_E_PERM:
        pc_set_err(c, "permission denied opening socket %s (its owner, group and mode, or its directory's, "
                   "keep this user out)", path);
        break;
    default:
        pc_set_err(c, "cannot connect to %s: %s", path, strerror(err));
        break;
    }
}

/* Connects c's socket, non-blocking, to socket_path (NULL: the default path). Returns PAGED_OK
 * or an error (c->err says). */
static int open_socket(paged_client *c, const char *socket_path)
{
    char path[128];
    if (socket_path != NULL) {
        if (strlen(socket_path) >= sizeof path) {
            pc_set_err(c, "socket path is too long");
            return PAGED_E_INVAL;
        }
        snprintf(path, sizeof path, "%s", socket_path);
    } else if (pcore_sock_client_path(path, sizeof path) < 0) {
        pc_set_err(c, "the default socket path is too long");
        return PAGED_E_INVAL;
    }
    c->sock = pcore_sock_connect(path);
    if (c->sock < 0) {
        int rc = c->sock;
        c->sock = -1;
        connect_cause(c, path, rc, errno);
        return rc;
    }
    return set_nonblock(c->sock);
}

/* Does the whole connection on a fresh client; returns PAGED_OK or an error (c->err says). */
static int do_connect(paged_client *c, const paged_connect_opts *o)
{
    c->timeout_ms = o->timeout_ms == 0 ? PC_DEFAULT_TIMEOUT_MS : o->timeout_ms < 0 ? -1 : o->timeout_ms;

    struct pcore_msg_hello hello;
    int rc = fill_hello(c, o, &hello);
    if (rc < 0)
        return rc;
    rc = open_socket(c, o->socket_path);
    if (rc < 0)
        return rc;


    struct pcore_msg_welcome w;
    int fds[PSOCK_MAX_FDS], nfds = 0;
    rc = pc_ctl_call(c, &hello, sizeof hello, PCORE_MSG_WELCOME, &w, sizeof w, fds,
                     PSOCK_MAX_FDS, &nfds);
    if (rc < 0)
        return rc;
    /* Adopt the descriptors first, so every later failure closes them with the client. */
    int chan_fd = nfds > 0 ? fds[0] : -1;
    c->sq_notify_fd = nfds > 1 ? fds[1] : -1;
    c->cq_wait_fd = nfds > 2 ? fds[2] : -1;
    c->data_fd = nfds > 3 ? fds[3] : -1;
    for (int i = 4; i < nfds; i++)
        close(fds[i]);
    rc = check_welcome(c, &w, nfds);
    if (rc == PAGED_OK)
        rc = map_channel(c, chan_fd, w.channel_size);
    if (chan_fd >= 0)
        close(chan_fd);
    if (rc < 0)
        return rc;
    if (set_nonblock(c->cq_wait_fd) < 0 || set_nonblock(c->sq_notify_fd) < 0)
        return PAGED_E_SYSTEM;

    c->id = w.client_id;
    c->backend = (paged_backend) w.backend;
    c->device_ordinal = w.device_ordinal;
    c->device = w.device;
    c->devices = w.devices;
    memcpy(c->device_uuid, w.device_uuid, sizeof c->device_uuid);
    if (c->backend == PAGED_BACKEND_CUDA) {
        c->data_kind = w.data_arena_kind;
        c->data.size = w.data_arena_size;
        c->data_alloc = w.data_arena_alloc;
        memcpy(c->data_ipc, w.ipc_handle, sizeof c->data_ipc);
    }
    rc = alloc_tables(c);
    if (rc == PAGED_OK)
        rc = make_epoll(c);
    return rc;
}

/* Connects, keeping the reason of a failure in errbuf; see paged.h. */
int paged_client_connect_err(const paged_connect_opts *opts, paged_client **out, char *errbuf,
                             size_t errbuf_size)
{
    if (errbuf != NULL && errbuf_size > 0)
        errbuf[0] = '\0';
    if (out == NULL)
        return PAGED_E_INVAL;
    *out = NULL;
    paged_connect_opts defaults = { 0 };
    paged_client *c = client_new();
    if (c == NULL)
        return PAGED_E_NOMEM;
    if (opts != NULL && opts->spin_us != 0) {
        if (opts->spin_us < -1 || opts->spin_us > PCORE_SPIN_US_MAX) {
            if (errbuf != NULL && errbuf_size > 0)
                snprintf(errbuf, errbuf_size, "spin_us %d is out of range (-1 to %d)", opts->spin_us,
                         PCORE_SPIN_US_MAX);
            client_free(c);
            return PAGED_E_INVAL;
        }
        pcore_waiter_init(&c->waiter, opts->spin_us < 0 ? 0 : (uint32_t) opts->spin_us * 1000u);
    }
    int rc = do_connect(c, opts != NULL ? opts : &defaults);
    if (rc < 0) {
        if (errbuf != NULL && errbuf_size > 0)
            snprintf(errbuf, errbuf_size, "%s", c->err[0] != '\0' ? c->err : paged_strerror(rc));
        client_free(c);
        return rc;
    }
    c->err[0] = '\0';
    *out = c;
    return PAGED_OK;
}

/* Says HELLO as a control-only client on a fresh client; returns PAGED_OK or an error (c->err
 * says). */
static int do_connect_control(paged_client *c, const char *socket_path, const char *name)
{
    c->timeout_ms = PC_DEFAULT_TIMEOUT_MS;
    struct pcore_msg_hello hello;
    hello_base(&hello, PCORE_HELLO_CONTROL, name);
    int rc = open_socket(c, socket_path);
    if (rc < 0)
        return rc;
    struct pcore_msg_welcome w;
    int fds[PSOCK_MAX_FDS], nfds = 0;
    rc = pc_ctl_call(c, &hello, sizeof hello, PCORE_MSG_WELCOME, &w, sizeof w, fds, PSOCK_MAX_FDS, &nfds);
    if (rc < 0)
        return rc;
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    if (check_version(c, &w) < 0)
        return PAGED_E_VERSION;
    if (nfds != 0 || w.num_fds != 0) {
        pc_set_err(c, "WELCOME to a control connection carried %d descriptors", nfds);
        return PAGED_E_PROTO;
    }
    c->id = w.client_id;
    c->backend = (paged_backend) w.backend;
    return PAGED_OK;
}

/* Connects a control-only client; see client.h. */
int pc_connect_control(const char *socket_path, const char *name, paged_client **out, char *errbuf,
                       size_t errbuf_size)
{
    *out = NULL;
    paged_client *c = client_new();
    if (c == NULL)
        return PAGED_E_NOMEM;
    int rc = do_connect_control(c, socket_path, name);
    if (rc < 0) {
        if (errbuf != NULL && errbuf_size > 0)
            snprintf(errbuf, errbuf_size, "%s", c->err[0] != '\0' ? c->err : paged_strerror(rc));
        client_free(c);
        return rc;
    }
    c->err[0] = '\0';
    *out = c;
    return PAGED_OK;
}

/* Connects to pagedd; see paged.h. */
int paged_client_connect(const paged_connect_opts *opts, paged_client **out)
{
    return paged_client_connect_err(opts, out, NULL, 0);
}

/* Closes the connection and frees everything reached through the client. */
void paged_client_close(paged_client *c)
{
    if (c == NULL)
        return;
    client_free(c);
}

/* Returns the daemon's id for this client. */
uint32_t paged_client_id(const paged_client *c)
{
    return c != NULL ? c->id : 0;
}

/* Returns the daemon's backend. */
paged_backend paged_client_backend(const paged_client *c)
{
    return c != NULL ? c->backend : (paged_backend) 0;
}

/* Returns the client's device index. */
uint32_t paged_client_device(const paged_client *c)
{
    return c != NULL ? c->device : 0;
}

/* Returns how many devices the daemon serves. */
uint32_t paged_client_devices(const paged_client *c)
{
    return c != NULL ? c->devices : 0;
}

/* Returns the last explained error, or "". */
const char *paged_client_error(const paged_client *c)
{
    return c != NULL ? c->err : "";
}

/* Returns the epoll descriptor over the completion wake-up and the socket. */
int paged_client_fd(const paged_client *c)
{
    return c != NULL ? c->epoll_fd : -1;
}
