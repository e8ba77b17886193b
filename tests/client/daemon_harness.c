/* daemon_harness.c: what the client tests share: their pagedd, clients of it, its pool counts, test data. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tests/client/daemon_harness.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "lib/core/proto.h"
#include "tests/tap/basic.h"

/* Polls of the pool counts while a departed client's blocks are reclaimed, and the pause
 * between them. */
#define RECLAIM_TRIES 250
#define RECLAIM_PAUSE_MS 20

/* Opens a SOCK_SEQPACKET connection to path; returns the descriptor, or -1 (a path longer
 * than a socket address holds included). */
static int raw_connect(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t len = strlen(path);
    if (len >= sizeof sa.sun_path)
        return -1;
    memcpy(sa.sun_path, path, len + 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *) &sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Starts the client tests' daemon; see daemon_harness.h. */
void harness_start(struct pagedd *d)
{
    if (access(pagedd_path(), X_OK) != 0)
        skip_all("pagedd not built (%s)", pagedd_path());
    pagedd_mkdir(d);
    if (chmod(d->dir, 0755) != 0)
        sysbail("chmod %s", d->dir);
    const char *const args[] = { "--socket-mode", "0666", "--log-level", "info", NULL };
    int status;
    if (pagedd_start(d, args, NULL, &status) != 0) {
        pagedd_log_diag(d, 20);
        bail("pagedd did not start on %s (wait status %d)", d->socket, status);
    }
}

/* Stops the daemon and removes its directory; see daemon_harness.h. */
int harness_stop(struct pagedd *d)
{
    int status = pagedd_stop(d);
    pagedd_cleanup(d);
    return status;
}

/* Connects a client with defaults; bails on failure. */
paged_client *harness_client(const struct pagedd *h)
{
    paged_connect_opts o = { .socket_path = h->socket };
    paged_client *c = NULL;
    char why[256];
    int rc = paged_client_connect_err(&o, &c, why, sizeof why);
    if (rc != PAGED_OK)
        bail("connecting to %s: %s (%s)", h->socket, paged_strerror(rc), why);
    return c;
}

/* Sends msg (len bytes) on fd; returns 0 or -1. */
static int raw_send(int fd, const void *msg, size_t len)
{
    return send(fd, msg, len, MSG_NOSIGNAL) == (ssize_t) len ? 0 : -1;
}

/* Receives one message into buf, closing any descriptors, waiting at most 5 s; returns
 * its length or -1. */
static ssize_t raw_recv(int fd, void *buf, size_t size)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    if (poll(&p, 1, 5000) <= 0)
        return -1;
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(sizeof(int) * 8)];
    } ctl;
    struct iovec iov = { .iov_base = buf, .iov_len = size };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                         .msg_controllen = sizeof ctl.b };
    ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); n >= 0 && cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
            int x;
            memcpy(&x, CMSG_DATA(cm) + i * sizeof(int), sizeof x);
            close(x);
        }
    }
    return n;
}

/* Asks for a pool's counts over a control-only connection; see daemon_harness.h. */
int harness_pool_counts(const struct pagedd *h, const char *name, struct harness_counts *out)
{
    int fd = raw_connect(h->socket);
    if (fd < 0)
        return -1;
    static unsigned char buf[PCORE_MSG_MAX];
    struct pcore_msg_hello hello;
    memset(&hello, 0, sizeof hello);
    hello.hdr = (struct pcore_msg_hdr) { PCORE_MSG_HELLO, 1, 0, sizeof hello };
    hello.magic = PCORE_HELLO_MAGIC;
    hello.version = PCORE_PROTO_VERSION;
    hello.flags = PCORE_HELLO_CONTROL;
    hello.pid = (uint32_t) getpid();
    snprintf(hello.name, sizeof hello.name, "test-harness");
    int rc = -1;
    ssize_t n;
    if (raw_send(fd, &hello, sizeof hello) < 0 || (n = raw_recv(fd, buf, sizeof buf)) < 0
        || ((struct pcore_msg_hdr *) buf)->type != PCORE_MSG_WELCOME)
        goto out;
    struct pcore_msg_list m;
    memset(&m, 0, sizeof m);
    m.hdr = (struct pcore_msg_hdr) { PCORE_MSG_LIST, 2, 0, sizeof m };
    m.what = PCORE_LIST_POOLS;
    snprintf(m.name, sizeof m.name, "%s", name);
    if (raw_send(fd, &m, sizeof m) < 0)
        goto out;
    /* Bounded: a daemon that never says LIST_END ends the loop by timing out in raw_recv. */
    for (int packets = 0; packets < 1000; packets++) {
        n = raw_recv(fd, buf, sizeof buf);
        if (n < (ssize_t) sizeof(struct pcore_msg_hdr))
            goto out;
        const struct pcore_msg_hdr *hdr = (const void *) buf;
        if (hdr->type == PCORE_MSG_LIST_END || hdr->type == PCORE_MSG_ERROR)
            goto out;
        if (hdr->type != PCORE_MSG_LIST_ITEMS || (size_t) n < sizeof(struct pcore_msg_list_items))
            continue;
        const struct pcore_msg_list_items *li = (const void *) buf;
        const struct pcore_pool_item *it = (const void *) (buf + sizeof *li);
        for (uint32_t i = 0; i < li->count; i++) {
            if ((size_t) n < sizeof *li + (i + 1) * sizeof *it)
                break;
            if (strncmp(it[i].name, name, sizeof it[i].name) == 0) {
                *out = (struct harness_counts) {
                    .num_blocks = it[i].num_blocks, .free = it[i].free,
                    .referenced = it[i].referenced, .cached = it[i].cached,
                    .attached = it[i].attached,
                };
                rc = 0;
            }
        }
    }
out:
    close(fd);
    return rc;
}

/* Waits until a pool has no referenced block; see daemon_harness.h. */
int harness_wait_unreferenced(const struct pagedd *h, const char *name, struct harness_counts *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < RECLAIM_TRIES; i++) {
        if (harness_pool_counts(h, name, out) == 0 && out->referenced == 0)
            return 0;
        poll(NULL, 0, RECLAIM_PAUSE_MS);
    }
    return -1;
}

/* Fills n floats with uniform random values in [-1, 1). */
void harness_fill(struct tap_rng *rng, float *x, size_t n)
{
    tap_rng_fill_uniform(rng, x, n, -1.0, 1.0);
}

/* Returns data, or a device copy of it on cuda; see daemon_harness.h. */
void *harness_arg_in(int cuda, const void *data, size_t bytes)
{
    if (!cuda)
        return (void *) data;
#ifdef HAVE_CUDA
    void *d = NULL;
    if (cudaMalloc(&d, bytes) != cudaSuccess
        || (data != NULL && cudaMemcpy(d, data, bytes, cudaMemcpyHostToDevice) != cudaSuccess))
        bail("cudaMalloc or cudaMemcpy of %zu bytes", bytes);
    return d;
#else
    (void) bytes;
    bail("a cuda daemon, and this test built without CUDA");
#endif
}

/* Copies arg back to dst and frees a device copy; see daemon_harness.h. */
void harness_arg_out(int cuda, void *dst, const void *arg, size_t bytes, int owned)
{
    if (!cuda) {
        if (dst != NULL && dst != arg)
            memcpy(dst, arg, bytes);
        return;
    }
#ifdef HAVE_CUDA
    if (dst != NULL && cudaMemcpy(dst, arg, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
        bail("cudaMemcpy of %zu bytes", bytes);
    if (owned && cudaFree((void *) arg) != cudaSuccess)
        bail("cudaFree");
#else
    (void) dst, (void) owned;
#endif
}

/* Makes the data arena's device current on cuda; see daemon_harness.h. */
void harness_use_arena_device(paged_client *c)
{
    if (paged_client_backend(c) != PAGED_BACKEND_CUDA)
        return;
#ifdef HAVE_CUDA
    size_t size = 0;
    void *data = paged_arena_base(c, PAGED_ARENA_DATA, &size);
    struct cudaPointerAttributes attr;
    if (data == NULL || cudaPointerGetAttributes(&attr, data) != cudaSuccess
        || cudaSetDevice(attr.device) != cudaSuccess)
        bail("cannot find or select the device of the data arena");
#else
    bail("a cuda daemon, and this test built without CUDA");
#endif
}

/* Decodes every layer of one sequence; see daemon_harness.h. */
int harness_decode_layers(paged_pool *p, int cuda, const struct harness_decode *d, const float *q, float *out)
{
    const size_t n = (size_t) d->q_heads * d->head_dim, bytes = n * sizeof *q;
    for (uint32_t l = 0; l < d->layers; l++) {
        const float *ql = q + (size_t) l * n;
        float *ol = out + (size_t) l * n;
        void *dq = harness_arg_in(cuda, ql, bytes), *dout = harness_arg_in(cuda, cuda ? NULL : ol, bytes);
        const paged_attn_args a = { .num_seqs = 1, .num_q_heads = d->q_heads, .dtype = PAGED_DTYPE_F32, .q = dq,
                                    .out = dout, .block_tables = d->ids, .bt_stride = d->bt_stride,
                                    .seq_lens = &d->len };
        int rc = paged_decode(p, (int32_t) l, &a);
        harness_arg_out(cuda, NULL, dq, bytes, dq != ql);
        harness_arg_out(cuda, ol, dout, bytes, dout != ol);
        if (rc != PAGED_OK)
            return rc;
    }
    return PAGED_OK;
}
