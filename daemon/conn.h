/* conn.h: one client connection: credentials, outgoing queue, channel, attachments. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_CONN_H
#define PAGED_DAEMON_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/util/log.h"
#include "daemon/pool.h"
#include "daemon/engine/validate.h"
#include "lib/core/proto.h"
#include "lib/core/ring.h"

struct pd_conn;

/* What an epoll registration points at. */
enum pd_watch_kind { PD_W_LISTEN = 1, PD_W_SIGNAL, PD_W_SOCK, PD_W_SQ, PD_W_PEERS };

struct pd_watch {
    enum pd_watch_kind kind;
    struct pd_conn *conn;     /* for PD_W_SOCK and PD_W_SQ */
};

/* One queued outgoing message, with descriptors to pass (closed once sent or dropped). */
struct pd_outmsg {
    struct pd_outmsg *next;
    size_t len;
    int nfds;
    int fds[4];
    unsigned char data[];
};

/* A client's channel: its shared memory and the daemon's private view of its rings. */
struct pd_channel {
    void *map;                         /* the whole memfd, read-write */
    uint64_t size;
    struct pcore_channel_hdr hdr;      /* the daemon's own copy: never read back */
    struct pcore_ring_cons sq;         /* the daemon consumes submissions */
    struct pcore_ring_prod cq;         /* and produces completions */
    int sq_wait;                       /* read end of the client's submission wake-up pipe */
    int cq_notify;                     /* write end of the completion wake-up pipe */
    unsigned char *arena;              /* host arena in map */
    uint64_t arena_size;
    pd_arena *data;                    /* the device data arena (cuda), or NULL */
    uint64_t data_size;                /* data arena bytes: the host arena's where data is NULL */
    pd_backend *backend;               /* the backend that made data, which frees it */
    uint32_t device;                   /* the client's device: of its data arena, and of the pools
                                        * its APPEND, DECODE and PREFILL may name */
    int host_words;                    /* dependency words may lie in the host arena */
};

/* A pool the client is attached to. */
struct pd_attach {
    struct pd_pool *pool;
    struct pv_pool view;               /* what the validator sees; view.user = pool */
};

/* Where a LIST in progress has got to, so its packets are made as the socket drains. */
struct pd_list_cursor {
    int active;
    uint32_t seq;
    uint32_t what;                     /* enum pcore_list_what */
    char name[PCORE_NAME_MAX];         /* pool filter */
    uint32_t next_id;                  /* next pool or client id to list */
    int32_t next_block;                /* LIST_BLOCKS: next block of pool next_id */
    uint32_t total;                    /* items sent so far */
};

enum pd_conn_state { PD_CONN_HELLO = 0, PD_CONN_READY, PD_CONN_DEAD };

struct pd_conn {
    uint32_t id;
    int fd;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    char name[PCORE_NAME_MAX];         /* the client's name as UTF-8 (pcore_utf8_clean of its HELLO's) */
    enum pd_conn_state state;
    int control_only;
    int inspect;                       /* an inspection connection (PCORE_HELLO_INSPECT): its
                                        * comings and goings are logged at debug and announced
                                        * only to subscribers that asked for them */
    int nospin;                        /* told not to spin in its waits (pd_server_spin_hint) */
    int subscribed;
    uint32_t subscribe_flags;          /* PCORE_SUBSCRIBE_* */
    int close_after_flush;             /* refused: close once the error is sent */
    int reply_lost;                    /* a reply could not be queued: the connection closes at
                                        * the end of the turn (pd_server_sweep) */
    uint64_t deadline_ns;              /* HELLO must come before this */
    uint64_t connected_ns;
    uint64_t active_ns;                /* its last message, or when it last took part of an
                                        * answer: control-idle-timeout counts from here */
    struct pd_watch sock_watch;
    struct pd_watch sq_watch;
    uint32_t sock_events;              /* epoll events registered for fd */
    struct pd_outmsg *out_head, *out_tail;
    size_t out_count, out_bytes;
    uint32_t events_unreported;        /* events dropped that no LOST event has counted yet */
    struct pd_list_cursor list;
    struct pd_channel *ch;
    struct pd_attach *att;
    uint32_t natt, catt;
    uint64_t requests, errors;
    struct pcore_prefix_stats prefix;  /* its LOOKUPs and what its ALLOCs pushed to host tiers */
    int cq_blocked;                    /* submissions wait for completion space */
    uint64_t engine_pass;              /* engine: the last pass that looked at its requests */
    uint64_t engine_decode_pass;       /* engine: the last pass that took a DECODE of it */
    uint64_t dep_since_ns;             /* engine: when its next request began waiting for its
                                        * dep word (0: it is not waiting) */
    uint64_t dep_looked_ns;            /* engine: when it last looked at that request's device word */
    int remote_wait;                   /* engine: its next request, a LOOKUP, waits for the peers */
    int remote_tried;                  /* engine: the peers were asked for its next request */
    int dep_late;                      /* a waited word timed out after its completion was
                                        * posted: disconnect it (dep_off, dep_value say which) */
    int early_inflight;                /* a batch completed early held its requests: settle
                                        * before its blocks are released (pd_engine_settle) */
    int deferred;                      /* engine: its completions wait for a deferred batch,
                                        * and it joins no pass until they are posted */
    int engine_awaited;                /* engine: a deferred DECODE's completion was posted to
                                        * it and it has not submitted since: gather waits */
    uint64_t dep_off;
    uint32_t dep_value;
    struct pd_conn *prev, *next;
};

/* Writes a log line about c, prefixed 'client ID (pid PID, "NAME"): ', NAME escaped as
 * pcore_utf8_escape does inside quotes (control characters as \xHH, \" and \\). */
void pd_clog(const struct pd_conn *c, enum pd_log_level level, const char *fmt, ...) PD_PRINTF(3, 4);

/*
 * Queues a message (copied) with descriptors (duplicated: the caller keeps its own) for c,
 * sending at once when nothing is queued before it. droppable messages (events) are dropped
 * instead when the queue already holds more than a bounded amount. Returns PAGED_OK,
 * PAGED_E_AGAIN for a dropped event, PAGED_E_DISCONNECTED when the peer is gone (the caller
 * kills the connection), or PAGED_E_NOMEM / PAGED_E_SYSTEM when the message could not be
 * queued: an event is then counted as dropped, and any other message marks the connection
 * reply_lost, so that its peer is disconnected instead of left waiting for a reply; from then on
 * nothing more is sent (PAGED_E_DISCONNECTED), so that no later reply takes the lost one's place.
 */
int pd_conn_send(struct pd_conn *c, const void *msg, size_t len, const int *fds, int nfds,
                 int droppable);

/* Sends queued messages until the socket is full. Returns PAGED_OK (the queue may still
 * hold messages) or PAGED_E_DISCONNECTED. */
int pd_conn_flush(struct pd_conn *c);

/* Frees every queued message and closes their descriptors. */
void pd_conn_drop_queue(struct pd_conn *c);

/* Returns whether c's queue has room for a droppable message (an event) now. */
int pd_conn_has_room(const struct pd_conn *c);

/* Sends PCORE_MSG_ERROR with status and a formatted message, echoing seq. Returns as
 * pd_conn_send. */
int pd_conn_error(struct pd_conn *c, uint32_t seq, int status, const char *fmt, ...) PD_PRINTF(4, 5);

/* Sends a bare reply header of type with status, echoing seq. Returns as pd_conn_send. */
int pd_conn_reply(struct pd_conn *c, uint32_t type, uint32_t seq, int32_t status);

/* Returns the attachment of c to pool id, or NULL. */
struct pd_attach *pd_conn_attach_find(struct pd_conn *c, uint32_t pool_id);

/* Makes room in c's attachments for one more. Returns 0, or -1 when out of memory. */
int pd_conn_attach_room(struct pd_conn *c);

/* Attaches c to pool p, read-write when writable (else read-only), in the room
 * pd_conn_attach_room made: adds the validator's view of p and counts c in p->attached.
 * Returns the attachment. */
struct pd_attach *pd_conn_attach_add(struct pd_conn *c, struct pd_pool *p, int writable);

/* Returns the number of block references c holds in all its pools. */
uint64_t pd_conn_held(const struct pd_conn *c);

/* Creates a channel for the clamped geometry; returns PAGED_OK and *out plus the fds to send
 * (memfd, submission notify end, completion wait end: the caller closes them after sending),
 * or an error with *cause. */
int pd_channel_create(uint32_t sq_entries, uint32_t cq_entries, uint64_t arena_size,
                      struct pd_channel **out, int fds[3], char **cause);

/* Gives ch a device data arena of b (a backend with arena_create) on ch->device of the
 * requested size, clamped: 0 means 256 MiB, at least 1 MiB and at most 4 GiB, in whole
 * 64 KiB. Returns PAGED_OK with *ex (a descriptor to send and close, or an IPC handle) and
 * ch->data_size set, or an error with *cause. */
int pd_channel_add_data_arena(struct pd_channel *ch, pd_backend *b, uint64_t size,
                              struct pd_export *ex, char **cause);

/* Unmaps a channel, frees its data arena and closes the daemon's descriptors. NULL is
 * ignored. */
void pd_channel_destroy(struct pd_channel *ch);

/* Clamps requested ring and arena sizes to what the daemon grants: powers of two from 8 to
 * 4096 entries (0: 256 submissions, twice as many completions), completions >= submissions,
 * arenas from 64 KiB to 1 GiB in whole pages (0: 64 MiB). */
void pd_channel_clamp(uint32_t *sq_entries, uint32_t *cq_entries, uint64_t *arena_size);

#endif
