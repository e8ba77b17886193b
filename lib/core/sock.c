/* sock.c: the control socket: connect, listen, and messages with descriptors attached. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "lib/core/sock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "paged.h"

/* Formats the default socket path into buf; returns 0 or PAGED_E_INVAL when too long. */
int pcore_sock_default_path(char *buf, size_t size)
{
    const char *env = getenv("PAGED_SOCKET");
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int n;
    if (env != NULL && *env != '\0')
        n = snprintf(buf, size, "%s", env);
    else if (xdg != NULL && *xdg == '/')
        n = snprintf(buf, size, "%s/paged/pagedd.sock", xdg);
    else
        n = snprintf(buf, size, "%s", PCORE_SOCK_SYSTEM_PATH);
    if (n < 0 || (size_t) n >= size || (size_t) n >= sizeof(((struct sockaddr_un *) 0)->sun_path))
        return PAGED_E_INVAL;
    return 0;
}

/* Formats the socket path a client tries by default into buf: pcore_sock_default_path's,
 * except that with no $PAGED_SOCKET a per-user socket that does not exist gives way to the
 * system daemon's, so that a member of its group finds it without setting anything. Returns 0
 * or PAGED_E_INVAL when too long. */
int pcore_sock_client_path(char *buf, size_t size)
{
    int rc = pcore_sock_default_path(buf, size);
    const char *env = getenv("PAGED_SOCKET");
    struct stat st;
    if (rc != 0 || (env != NULL && *env != '\0') || strcmp(buf, PCORE_SOCK_SYSTEM_PATH) == 0)
        return rc;
    if (lstat(buf, &st) < 0 && errno == ENOENT)
        snprintf(buf, size, "%s", PCORE_SOCK_SYSTEM_PATH);
    return 0;
}

/* Fills a Unix address for path; returns 0 or PAGED_E_INVAL when the path does not fit. */
static int pcore_sock_addr(const char *path, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    if (path == NULL || *path == '\0' || strlen(path) >= sizeof sa->sun_path)
        return PAGED_E_INVAL;
    memcpy(sa->sun_path, path, strlen(path) + 1);
    return 0;
}

/* Connects to path; returns a descriptor or a negative paged_error naming why not. */
int pcore_sock_connect(const char *path)
{
    struct sockaddr_un sa;
    int rc = pcore_sock_addr(path, &sa);
    if (rc < 0)
        return rc;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return PAGED_E_SYSTEM;
    if (connect(fd, (struct sockaddr *) &sa, sizeof sa) == 0)
        return fd;
    int err = errno;
    close(fd);
    errno = err;
    switch (err) {
    case ENOENT:
    case ECONNREFUSED:
    case ENOTDIR:
        return PAGED_E_NOTCONN;
    case EPROTOTYPE:
    case ENOTSOCK:
        return PAGED_E_PROTO;
    case EACCES:
    case EPERM:
        return PAGED_E_PERM;
    default:
        return PAGED_E_SYSTEM;
    }
}

/* Listens on path; returns a non-blocking descriptor or a negative paged_error. */
int pcore_sock_listen(const char *path, mode_t mode, gid_t gid)
{
    struct sockaddr_un sa;
    int rc = pcore_sock_addr(path, &sa);
    if (rc < 0)
        return rc;
    /* A socket file that accepts a connection belongs to a live daemon: leave it alone. A
     * socket of another type that answers is another program's, live too. */
    int probe = pcore_sock_connect(path);
    if (probe >= 0) {
        close(probe);
        return PAGED_E_EXIST;
    }
    if (probe == PAGED_E_PROTO)
        return PAGED_E_PROTO;
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return PAGED_E_PROTO;
        if (unlink(path) != 0)
            return PAGED_E_SYSTEM;
    }
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return PAGED_E_SYSTEM;
    /* Bind under a umask that already excludes what mode excludes, so there is no moment
     * when the socket is more open than asked. */
    mode_t old = umask((mode_t) (~mode & 0777));
    rc = bind(fd, (struct sockaddr *) &sa, sizeof sa);
    umask(old);
    if (rc != 0 || chmod(path, mode) != 0
        || (gid != (gid_t) -1 && chown(path, (uid_t) -1, gid) != 0)
        || listen(fd, 128) != 0) {
        int err = errno;
        if (rc == 0)
            unlink(path);
        close(fd);
        errno = err;
        return err == EACCES || err == EPERM ? PAGED_E_PERM : PAGED_E_SYSTEM;
    }
    return fd;
}

/* Sends one message with descriptors; returns 0 or a negative paged_error. */
int pcore_sock_send(int sock, const void *msg, size_t len, const int *fds, int nfds)
{
    struct iovec iov = { .iov_base = (void *) msg, .iov_len = len };
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * PSOCK_MAX_FDS)];
    } ctl;
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (nfds < 0 || nfds > PSOCK_MAX_FDS)
        return PAGED_E_INVAL;
    if (nfds > 0) {
        memset(&ctl, 0, sizeof ctl);
        mh.msg_control = ctl.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t) nfds);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t) nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t) nfds);
    }
    for (;;) {
        ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
        if (n >= 0)
            return (size_t) n == len ? 0 : PAGED_E_SYSTEM;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return PAGED_E_AGAIN;
        if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)
            return PAGED_E_DISCONNECTED;
        return PAGED_E_SYSTEM;
    }
}

/* Closes every descriptor carried by the control messages of mh. */
static void pcore_sock_close_all(struct msghdr *mh)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm != NULL; cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
            close(fd);
        }
    }
}

/* Receives one message and its descriptors; returns its length or a negative paged_error. */
ssize_t pcore_sock_recv(int sock, void *buf, size_t size, int *fds, int maxfds, int *nfds)
{
    struct iovec iov = { .iov_base = buf, .iov_len = size };
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * PSOCK_MAX_FDS)];
    } ctl;
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
                         .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf };
    ssize_t n;
    *nfds = 0;
    do
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    /* A peer that closed with our last message unread leaves ECONNRESET, which recvmsg
     * reports (and clears) before what the peer sent earlier, still queued: its last words,
     * such as the reason it refused us. */
    if (n < 0 && errno == ECONNRESET) {
        mh.msg_controllen = sizeof ctl.buf;
        do
            n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return PAGED_E_DISCONNECTED;
    }
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return PAGED_E_AGAIN;
        if (errno == ECONNRESET || errno == ENOTCONN)
            return PAGED_E_DISCONNECTED;
        return PAGED_E_SYSTEM;
    }
    if (n == 0 && mh.msg_controllen == 0)
        return PAGED_E_DISCONNECTED;
    if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        pcore_sock_close_all(&mh);
        return PAGED_E_PROTO;
    }
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
            if (*nfds < maxfds)
                fds[(*nfds)++] = fd;
            else
                close(fd);
        }
    }
    return n;
}

/* Waits for sock to become readable; returns 1, PAGED_E_TIMEOUT or PAGED_E_SYSTEM. */
int pcore_sock_wait_readable(int sock, int timeout_ms)
{
    struct pollfd p = { .fd = sock, .events = POLLIN };
    for (;;) {
        int rc = poll(&p, 1, timeout_ms);
        if (rc > 0)
            return 1;
        if (rc == 0)
            return PAGED_E_TIMEOUT;
        if (errno != EINTR)
            return PAGED_E_SYSTEM;
    }
}

/* Reads SO_PEERCRED of sock; returns 0 or PAGED_E_SYSTEM. */
int pcore_sock_peercred(int sock, pid_t *pid, uid_t *uid, gid_t *gid)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return PAGED_E_SYSTEM;
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}
