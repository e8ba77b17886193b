/* sock-t.c: the control socket's helpers: the default path, listening, and messages whose descriptors do not fit. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/core/sock.h"
#include "paged.h"
#include "tests/tap/basic.h"

/* Returns how many descriptors this process has open, or -1. */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int n = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1;   /* the directory's own descriptor */
}

/* Sets or (value NULL) unsets an environment variable, or bails; returns nothing. */
static void set_env(const char *name, const char *value)
{
    if ((value != NULL ? setenv(name, value, 1) : unsetenv(name)) != 0)
        sysbail("setting %s", name);
}

/* The default path: $PAGED_SOCKET, else $XDG_RUNTIME_DIR/paged/pagedd.sock (an absolute one),
 * else /run/paged/pagedd.sock; a path too long for a Unix socket is refused. */
static void test_default_path(void)
{
    char buf[256];
    set_env("PAGED_SOCKET", "/tmp/somewhere/else.sock");
    set_env("XDG_RUNTIME_DIR", "/run/user/1234");
    is_int(0, pcore_sock_default_path(buf, sizeof buf), "PAGED_SOCKET set: accepted");
    is_string("/tmp/somewhere/else.sock", buf, "PAGED_SOCKET wins over XDG_RUNTIME_DIR");
    set_env("PAGED_SOCKET", "");
    is_int(0, pcore_sock_default_path(buf, sizeof buf), "PAGED_SOCKET empty: accepted");
    is_string("/run/user/1234/paged/pagedd.sock", buf, "an empty PAGED_SOCKET is not set: XDG_RUNTIME_DIR's");
    set_env("PAGED_SOCKET", NULL);
    set_env("XDG_RUNTIME_DIR", "relative/dir");
    is_int(0, pcore_sock_default_path(buf, sizeof buf), "a relative XDG_RUNTIME_DIR: accepted");
    is_string("/run/paged/pagedd.sock", buf, "a relative XDG_RUNTIME_DIR is ignored");
    set_env("XDG_RUNTIME_DIR", NULL);
    is_int(0, pcore_sock_default_path(buf, sizeof buf), "neither set: accepted");
    is_string("/run/paged/pagedd.sock", buf, "neither set: /run/paged/pagedd.sock");

    char longpath[200];
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[0] = '/';
    longpath[sizeof longpath - 1] = '\0';
    set_env("PAGED_SOCKET", longpath);
    is_int(PAGED_E_INVAL, pcore_sock_default_path(buf, sizeof buf), "a %zu-byte PAGED_SOCKET is PAGED_E_INVAL",
           strlen(longpath));
    set_env("PAGED_SOCKET", "/tmp/x.sock");
    is_int(PAGED_E_INVAL, pcore_sock_default_path(buf, 8), "a buffer too small for the path is PAGED_E_INVAL");
    set_env("PAGED_SOCKET", NULL);
}

/* A client's default: the per-user socket when it exists, else the system daemon's; the
 * daemon itself keeps the per-user path (it is about to create it). */
static void test_client_path(void)
{
    char dir[] = "/tmp/sock-t-xdg-XXXXXX", sub[64], sockpath[96], buf[256];
    if (mkdtemp(dir) == NULL)
        sysbail("mkdtemp");
    snprintf(sub, sizeof sub, "%s/paged", dir);
    snprintf(sockpath, sizeof sockpath, "%s/pagedd.sock", sub);
    set_env("PAGED_SOCKET", NULL);
    set_env("XDG_RUNTIME_DIR", dir);
    is_int(0, pcore_sock_client_path(buf, sizeof buf), "client path, no per-user socket: accepted");
    is_string("/run/paged/pagedd.sock", buf, "no per-user socket: a client tries the system daemon's");
    is_int(0, pcore_sock_default_path(buf, sizeof buf), "daemon path, no per-user socket: accepted");
    is_string(sockpath, buf, "the daemon's default stays the per-user path");
    int fd = -1;
    if (mkdir(sub, 0700) == 0)
        fd = pcore_sock_listen(sockpath, 0600, (gid_t) -1);
    ok(fd >= 0, "a per-user daemon's socket is made");
    is_int(0, pcore_sock_client_path(buf, sizeof buf), "client path, per-user socket: accepted");
    is_string(sockpath, buf, "a per-user socket that exists wins");
    set_env("PAGED_SOCKET", "/tmp/elsewhere.sock");
    is_int(0, pcore_sock_client_path(buf, sizeof buf), "client path, PAGED_SOCKET set: accepted");
    is_string("/tmp/elsewhere.sock", buf, "PAGED_SOCKET is taken as given");
    set_env("PAGED_SOCKET", NULL);
    set_env("XDG_RUNTIME_DIR", NULL);
    if (fd >= 0)
        close(fd);
    unlink(sockpath);
    rmdir(sub);
    rmdir(dir);
}

/* Sends msg with nfds descriptors by hand (pcore_sock_send refuses more than PSOCK_MAX_FDS, as a
 * misbehaving peer need not); returns sendmsg's result. */
static ssize_t send_raw(int sock, const char *msg, const int *fds, int nfds)
{
    struct iovec iov = { .iov_base = (void *) msg, .iov_len = strlen(msg) };
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * 64)];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                         .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t) nfds) };
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t) nfds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t) nfds);
    return sendmsg(sock, &mh, MSG_NOSIGNAL);
}

/*
 * A message carrying more descriptors than the receiver takes (PSOCK_MAX_FDS) is refused
 * whole, and every descriptor that came with it is closed; one that fits arrives with its
 * descriptors, close-on-exec. The receiving end does not block: a message that was never
 * sent shows as PAGED_E_AGAIN, not as a hang.
 */
static void test_descriptors(void)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        sysbail("socketpair");
    if (fcntl(sv[1], F_SETFL, O_NONBLOCK) != 0)
        sysbail("fcntl");
    int fds[PSOCK_MAX_FDS + 4];
    for (int i = 0; i < PSOCK_MAX_FDS + 4; i++)
        if ((fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
            sysbail("open /dev/null");
    const int before = open_fds();

    is_int(PAGED_E_INVAL, pcore_sock_send(sv[0], "many", 4, fds, PSOCK_MAX_FDS + 1),
           "pcore_sock_send refuses more than %d descriptors", PSOCK_MAX_FDS);
    is_int(4, (int) send_raw(sv[0], "many", fds, PSOCK_MAX_FDS + 4), "a peer sends a message with %d descriptors",
           PSOCK_MAX_FDS + 4);
    char buf[16];
    int got[PSOCK_MAX_FDS], ngot = -1;
    is_int(PAGED_E_PROTO, (int) pcore_sock_recv(sv[1], buf, sizeof buf, got, PSOCK_MAX_FDS, &ngot),
           "receiving more than %d descriptors is PAGED_E_PROTO", PSOCK_MAX_FDS);
    is_int(0, ngot, "and hands none to the caller");
    is_int(before, open_fds(), "every descriptor that arrived with it was closed");

    is_int(0, pcore_sock_send(sv[0], "two", 3, fds, 2), "a message with 2 descriptors is sent");
    ssize_t n = pcore_sock_recv(sv[1], buf, sizeof buf, got, PSOCK_MAX_FDS, &ngot);
    ok(n == 3 && ngot == 2 && memcmp(buf, "two", 3) == 0, "it arrives whole with its 2 descriptors (%zd, %d)", n,
       ngot);
    ok(ngot == 2 && (fcntl(got[0], F_GETFD) & FD_CLOEXEC) && (fcntl(got[1], F_GETFD) & FD_CLOEXEC),
       "received close-on-exec");
    for (int i = 0; i < ngot; i++)
        close(got[i]);

    is_int(0, pcore_sock_send(sv[0], "too long a message", 18, NULL, 0), "an 18-byte message is sent");
    is_int(PAGED_E_PROTO, (int) pcore_sock_recv(sv[1], buf, 8, got, PSOCK_MAX_FDS, &ngot),
           "received into 8 bytes it is PAGED_E_PROTO, not cut short");
    close(sv[0]);
    is_int(PAGED_E_DISCONNECTED, (int) pcore_sock_recv(sv[1], buf, sizeof buf, got, PSOCK_MAX_FDS, &ngot),
           "the peer gone: PAGED_E_DISCONNECTED");
    close(sv[1]);
    for (int i = 0; i < PSOCK_MAX_FDS + 4; i++)
        close(fds[i]);
}

/* Listening: a stale socket file is replaced, a live one refused; connecting where nobody
 * listens, or to a file that is not a socket, says which. */
static void test_listen(void)
{
    char dir[] = "/tmp/paged-sock-t-XXXXXX";
    if (mkdtemp(dir) == NULL)
        sysbail("mkdtemp");
    char path[128], plain[128];
    snprintf(path, sizeof path, "%s/s.sock", dir);
    snprintf(plain, sizeof plain, "%s/plain", dir);

    is_int(PAGED_E_NOTCONN, pcore_sock_connect(path), "nobody listening (no file): PAGED_E_NOTCONN");
    int l = pcore_sock_listen(path, 0600, (gid_t) -1);
    ok(l >= 0, "listening at %s", path);
    struct stat sb;
    ok(stat(path, &sb) == 0 && S_ISSOCK(sb.st_mode) && (sb.st_mode & 0777) == 0600, "the socket has mode 0600");
    is_int(PAGED_E_EXIST, pcore_sock_listen(path, 0600, (gid_t) -1),
           "a second listener on a live socket: PAGED_E_EXIST");
    int c = pcore_sock_connect(path);
    ok(c >= 0, "a client connects");
    if (c >= 0)
        close(c);
    close(l);
    ok(stat(path, &sb) == 0, "closed, the listener leaves a stale socket file");
    is_int(PAGED_E_NOTCONN, pcore_sock_connect(path), "nobody listening (a stale file): PAGED_E_NOTCONN");
    l = pcore_sock_listen(path, 0600, (gid_t) -1);
    ok(l >= 0, "a new listener replaces the stale file");
    if (l >= 0)
        close(l);

    int f = open(plain, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (f < 0)
        sysbail("creating %s", plain);
    close(f);
    is_int(PAGED_E_NOTCONN, pcore_sock_connect(plain), "a plain file where the socket should be: PAGED_E_NOTCONN");
    is_int(PAGED_E_PROTO, pcore_sock_listen(plain, 0600, (gid_t) -1),
           "listening where a plain file is: PAGED_E_PROTO, not PAGED_E_EXIST");
    ok(lstat(plain, &sb) == 0 && S_ISREG(sb.st_mode), "and the plain file is left alone");
    /* A live socket of another type is another program's: refused, not replaced. */
    char other[128];
    snprintf(other, sizeof other, "%s/stream.sock", dir);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(other) >= sizeof sa.sun_path)
        bail("%s is too long for a Unix socket", other);
    memcpy(sa.sun_path, other, strlen(other) + 1);
    int st = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (st < 0 || bind(st, (struct sockaddr *) &sa, sizeof sa) != 0 || listen(st, 1) != 0)
        sysbail("listening on a stream socket at %s", other);
    is_int(PAGED_E_PROTO, pcore_sock_listen(other, 0600, (gid_t) -1),
           "listening where another program's stream socket listens: PAGED_E_PROTO");
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ok(probe >= 0 && connect(probe, (struct sockaddr *) &sa, sizeof sa) == 0,
       "and that program's socket still accepts");
    if (probe >= 0)
        close(probe);
    close(st);
    unlink(other);
    char longpath[200];
    memset(longpath, 'b', sizeof longpath - 1);
    longpath[0] = '/';
    longpath[sizeof longpath - 1] = '\0';
    is_int(PAGED_E_INVAL, pcore_sock_connect(longpath), "a path too long for a Unix socket: PAGED_E_INVAL");
    unlink(path);
    unlink(plain);
    rmdir(dir);
}

/* Runs the three groups; returns 0. */
int main(void)
{
    plan_lazy();
    test_default_path();
    test_client_path();
    test_descriptors();
    test_listen();
    return 0;
}
