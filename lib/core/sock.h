/* sock.h: the control socket: connect, listen, and messages with descriptors attached. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_CORE_SOCK_H
#define PAGED_CORE_SOCK_H

#include <stddef.h>
#include <sys/types.h>

#define PSOCK_MAX_FDS 8

/* Writes the socket path clients and the daemon use by default into buf: $PAGED_SOCKET, else
 * $XDG_RUNTIME_DIR/paged/pagedd.sock, else /run/paged/pagedd.sock. Returns 0, or
 * PAGED_E_INVAL if it does not fit (a Unix socket path holds at most 107 bytes). */
int pcore_sock_default_path(char *buf, size_t size);

/* The system daemon's socket, the last default. */
#define PCORE_SOCK_SYSTEM_PATH "/run/paged/pagedd.sock"

/* Writes the socket path a client connects to by default into buf: as
 * pcore_sock_default_path, but when $PAGED_SOCKET is not set and the per-user
 * $XDG_RUNTIME_DIR/paged/pagedd.sock does not exist, the system daemon's. Returns 0 or
 * PAGED_E_INVAL. */
int pcore_sock_client_path(char *buf, size_t size);

/* Connects a SOCK_SEQPACKET socket to path. Returns the descriptor (close-on-exec), or
 * PAGED_E_NOTCONN when nobody listens there (no such file, refused), PAGED_E_PROTO when
 * the file is not a socket of ours (wrong type), PAGED_E_PERM, PAGED_E_INVAL for a path too
 * long, PAGED_E_SYSTEM otherwise. */
int pcore_sock_connect(const char *path);

/* Creates, binds and listens on a SOCK_SEQPACKET socket at path with permission bits mode
 * and, if gid is not (gid_t) -1, that group. A stale socket file nobody listens on is
 * replaced; a live one is refused with PAGED_E_EXIST, a file that is not a socket, or another
 * program's socket of another type, with PAGED_E_PROTO. Returns the descriptor (non-blocking,
 * close-on-exec) or a negative paged_error. */
int pcore_sock_listen(const char *path, mode_t mode, gid_t gid);

/* Sends one message with nfds descriptors attached, never raising SIGPIPE. Returns 0,
 * PAGED_E_DISCONNECTED if the peer is gone, PAGED_E_AGAIN if a non-blocking socket is full,
 * or PAGED_E_SYSTEM. */
int pcore_sock_send(int sock, const void *msg, size_t len, const int *fds, int nfds);

/* Receives one message into buf (at most size bytes) and up to maxfds descriptors (received
 * close-on-exec; any beyond maxfds are closed). Returns the message length and sets *nfds;
 * returns PAGED_E_DISCONNECTED on end of stream, PAGED_E_PROTO if the message or its
 * descriptors did not fit (everything received is closed), PAGED_E_AGAIN when a
 * non-blocking socket has nothing, or PAGED_E_SYSTEM. */
ssize_t pcore_sock_recv(int sock, void *buf, size_t size, int *fds, int maxfds, int *nfds);

/* Waits up to timeout_ms (negative: forever) for sock to become readable. Returns 1 when
 * readable (or hung up), PAGED_E_TIMEOUT, or PAGED_E_SYSTEM. */
int pcore_sock_wait_readable(int sock, int timeout_ms);

/* Reads the peer's credentials (SO_PEERCRED). Returns 0 or PAGED_E_SYSTEM. */
int pcore_sock_peercred(int sock, pid_t *pid, uid_t *uid, gid_t *gid);

#endif
