/* daemon_harness.c: start a real pagedd on a temporary socket for a test, and stop it whatever happens. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tests/client/daemon_harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/core/proto.h"
#include "tests/tap/basic.h"

/* Connect attempts while the daemon starts, and the pause between them. */
#define START_TRIES 1000
#define START_PAUSE_MS 10
/* Waits for the daemon to exit after SIGTERM. */
#define STOP_TRIES 300
#define STOP_PAUSE_MS 10

/* The harness the exit hook stops: tests run one daemon each. */
static struct harness *harness_live;

/* Waits ms milliseconds on nothing: the pause of a bounded retry loop. */
static void pause_ms(int ms)
{
    poll(NULL, 0, ms);
}

/* Opens a SOCK_SEQPACKET connection to path; returns the descriptor or -1. */
static int raw_connect(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    if (connect(fd, (struct sockaddr *) &sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Removes the harness directory and what the daemon or we left in it. */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        char path[512];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* The exit hook: stops the daemon if this is the process that started it. */
static void harness_atexit(void)
{
    if (harness_live != NULL && harness_live->owner == getpid())
        harness_stop(harness_live);
}

/* Starts pagedd; see daemon_harness.h. */
void harness_start(struct harness *h)
{
    const char *top = getenv("top_builddir");
    char daemon[512];
    snprintf(daemon, sizeof daemon, "%s/daemon/pagedd", top != NULL ? top : ".");
    if (access(daemon, X_OK) != 0)
        skip_all("pagedd not built (%s)", daemon);
    const char *backend = getenv("PAGED_TEST_BACKEND");
    if (backend == NULL || *backend == '\0')
        backend = "cpu";

    memset(h, 0, sizeof *h);
    snprintf(h->dir, sizeof h->dir, "/tmp/paged-client-XXXXXX");
    if (mkdtemp(h->dir) == NULL)
        sysbail("mkdtemp");
    /* Others may need to reach the socket (a test that drops privileges). */
    chmod(h->dir, 0755);
    snprintf(h->socket, sizeof h->socket, "%s/pagedd.sock", h->dir);
    snprintf(h->config, sizeof h->config, "%s/paged.conf", h->dir);
    FILE *f = fopen(h->config, "w");
    if (f == NULL)
        sysbail("creating %s", h->config);
    fputs("# empty: the test's daemon runs on defaults and its command line\n", f);
    fclose(f);

    pid_t parent = getpid();
    pid_t pid = bfork();
    if (pid == 0) {
        /* Die with the test, even if it crashes before its exit hook runs. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        /* Keep stdout for TAP: the daemon's output goes to the log through stderr. */
        dup2(STDERR_FILENO, STDOUT_FILENO);
        char backend_opt[64];
        snprintf(backend_opt, sizeof backend_opt, "--backend=%s", backend);
        execl(daemon, "pagedd", "--foreground", "--socket", h->socket, "--config", h->config,
              backend_opt, "--socket-mode", "0666", "--log-level", "info", (char *) NULL);
        fprintf(stderr, "exec %s: %s\n", daemon, strerror(errno));
        _exit(127);
    }
    h->pid = pid;
    h->owner = getpid();
    harness_live = h;
    static int hooked;
    if (!hooked) {
        atexit(harness_atexit);
        hooked = 1;
    }
    for (int i = 0; i < START_TRIES; i++) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            h->pid = 0;
            bail("pagedd exited during startup (status %d)", status);
        }
        int fd = raw_connect(h->socket);
        if (fd >= 0) {
            close(fd);
            return;
        }
        pause_ms(START_PAUSE_MS);
    }
    bail("pagedd did not listen on %s within %d ms", h->socket, START_TRIES * START_PAUSE_MS);
}

/* Stops the daemon; see daemon_harness.h. */
int harness_stop(struct harness *h)
{
    int status = -1;
    if (h->pid > 0) {
        kill(h->pid, SIGTERM);
        int done = 0;
        for (int i = 0; i < STOP_TRIES && !done; i++) {
            if (waitpid(h->pid, &status, WNOHANG) == h->pid)
                done = 1;
            else
                pause_ms(STOP_PAUSE_MS);
        }
        if (!done) {
            diag("pagedd ignored SIGTERM for %d ms: killing it", STOP_TRIES * STOP_PAUSE_MS);
            kill(h->pid, SIGKILL);
            waitpid(h->pid, &status, 0);
        }
        h->pid = 0;
    }
    if (h->dir[0] != '\0') {
        remove_dir(h->dir);
        h->dir[0] = '\0';
    }
    if (harness_live == h)
        harness_live = NULL;
    return status;
}

/* Connects a client with defaults; bails on failure. */
paged_client *harness_client(const struct harness *h)
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
int harness_pool_counts(const struct harness *h, const char *name, struct harness_counts *out)
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
int harness_wait_unreferenced(const struct harness *h, const char *name, struct harness_counts *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < 250; i++) {
        if (harness_pool_counts(h, name, out) == 0 && out->referenced == 0)
            return 0;
        pause_ms(20);
    }
    return -1;
}

/* Fills n floats with uniform random values in [-1, 1). */
void harness_fill(struct tap_rng *rng, float *x, size_t n)
{
    tap_rng_fill_uniform(rng, x, n, -1.0, 1.0);
}
