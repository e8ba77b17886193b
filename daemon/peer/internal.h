/* internal.h: the peer module's shared state: the UCX objects, each peer's record, staging buffers. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_PEER_INTERNAL_H
#define PAGED_DAEMON_PEER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ucp/api/ucp.h>

#include "daemon/peer/peer.h"
#include "daemon/peer/wire.h"

#define PD_PEER_KEY_BYTES 32u
#define PD_PEER_MAX 64u                /* peers known at once, incoming and outgoing */
#define PD_PEER_MAX_STAGES 64u         /* staging buffers served and not yet released */
#define PD_PEER_RETRY_NS 1000000000ull /* a failed outgoing peer is tried again after this */
#define PD_PEER_MAX_FETCHES 16u       /* LOOKUPs asking the peers at once */
#define PD_PEER_SPARES 8u              /* mapped buffers kept for the next transfer (buffers.c) */
#define PD_PEER_SPARE_BYTES (2ull << 30)          /* ... holding this much at most */
#define PD_PEER_SPARE_IDLE_NS 30000000000ull      /* ... each freed after this long unused */
#define PD_PEER_BUF_ROUND (2u << 20)   /* buffers are made in multiples of this */
#define PD_PEER_MAX_CHAIN 65536u       /* blocks one LOOKUP asks the peers for at most */
#define PD_PEER_FETCH_HOLDER 0x7fffffffu /* the holder of fetched blocks until they are published */
#define PD_PEER_MSG_MAX (sizeof(struct pd_peer_fetch) + PD_PEER_MAX_ASK * sizeof(paged_hash))

enum pd_peer_state { PD_PEER_CONNECTING = 0, PD_PEER_AUTHENTICATED = 1, PD_PEER_FAILED = 2 };

/* One peer: an outgoing one of peers, or one that connected to peer-listen. */
struct pd_peer {
    char addr[80];                     /* ADDR:PORT as configured, or as the connection came from */
    struct sockaddr_storage sa;        /* outgoing: where to connect */
    socklen_t salen;
    int outgoing;
    ucp_ep_h ep;                       /* NULL while not connected */
    int ep_failed;                     /* the endpoint reported an error: close it at the next poll */
    enum pd_peer_state state;
    char why[128];                     /* PD_PEER_FAILED: why */
    uint8_t nonce[PD_PEER_NONCE_BYTES];/* the challenge this side sent */
    uint8_t their_id[PD_PEER_ID_BYTES];
    int challenged;                    /* their CHALLENGE came (their_id is set) */
    int verified;                      /* their RESPONSE verified */
    uint64_t retry_ns;                 /* outgoing and failed: when to connect again */
    /* What fetching from it did. */
    uint64_t blocks, bytes, fetch_ns, fetches, failures;
    uint64_t auth_failures;            /* handshakes that failed */
    uint64_t served_blocks;            /* blocks this daemon served it */
    char transports[96];               /* the transports of its endpoint's data lanes, from UCX */
    int tcp_only;                      /* every one is TCP */
};

/* A message taken from the worker, to run at the next poll (AM callbacks only copy). */
struct pd_peer_msg {
    struct pd_peer_msg *next;
    ucp_ep_h ep;
    unsigned id;
    size_t len;
    unsigned char data[];
};

/* A buffer mapped with UCX (buffers.c): host memory, or device memory of the backend's. */
struct pd_peer_buf {
    unsigned char *buf;
    size_t cap;
    int device;                        /* buf is device memory (dev_alloc) */
    ucp_mem_h memh;
    uint64_t idle_since;               /* a spare: when it was given back */
};

/* A staging buffer served to a peer and not yet released. */
struct pd_peer_stage {
    uint64_t req;
    ucp_ep_h ep;                       /* the asker's endpoint */
    struct pd_peer_buf b;              /* b.buf NULL: the slot is free */
    size_t len;                        /* of it, the bytes staged */
    uint64_t expires_ns;
};

/* Where a fetch has got to. */
enum pd_fetch_state {
    PD_FETCH_FREE = 0,                 /* the slot is unused */
    PD_FETCH_ASK,                      /* to ask the next peer */
    PD_FETCH_RUNNING,                  /* its parts are asked of a peer, pulled, published in turn */
    PD_FETCH_CANCELLING,               /* its gets were cancelled: waiting for their callbacks */
};

/* Where one part of a fetch has got to. */
enum pd_part_state {
    PD_PART_FREE = 0,                  /* not in use */
    PD_PART_ASKED,                     /* its FETCH is out: waiting for the REPLY */
    PD_PART_PULLING,                   /* the get of what the peer staged runs (or has run) */
};

/* One part of a fetch's chain: a FETCH of at most PD_PEER_MAX_ASK hashes to the fetch's peer,
 * its REPLY, and the get of the units the peer staged for it into a local buffer. */
struct pd_peer_part {
    enum pd_part_state state;
    uint64_t req;                      /* its FETCH's request number */
    uint32_t off, n;                   /* the chain's hashes [off, off + n) */
    uint64_t asked_ns, replied_ns, posted_ns, got_ns, filled_ns;   /* posted: ucp_get_nbx returned */
    uint64_t deadline_ns;              /* its answer, then its get, each within peer-timeout */
    struct pd_peer_msg *reply;         /* its REPLY, once here */
    uint32_t count;                    /* units the REPLY staged */
    unsigned char *sums;               /* their sums each, copied from the REPLY */
    int device;                        /* the REPLY staged device memory */
    ucs_status_t get_status;           /* the get's, UCS_INPROGRESS while it runs */
    void *get_req;
    ucp_rkey_h rkey;
    struct pd_peer_buf local;          /* the units pulled, mapped for the get (kept for the next part) */
    int32_t *ids;                      /* once pulled: its new blocks, held by PD_PEER_FETCH_HOLDER until published */
};

/* Parts of one fetch in flight at once (PAGEDD_PEER_PARTS, default 4, at most PD_PEER_PIPE): while the
 * oldest is checked and published, the next ones are pulled and staged, so that the link is
 * never idle for want of a staged part. */
#define PD_PEER_PIPE 8u

/* One LOOKUP's remote part in progress (fetch.c): asks the peers in order for the chain's
 * missing hashes, pulls what the first one stages, checks and publishes it in the pool. */
struct pd_peer_fetchop {
    enum pd_fetch_state state;
    int started;                       /* pd_peers_prefetch returned 1: tell the done function */
    const char *cancel_why;            /* CANCELLING: why the gets were cancelled */
    uint32_t conn_id;                  /* the client whose LOOKUP waits for it */
    uint32_t pool_id;
    char pool[PCORE_NAME_MAX];
    uint32_t tenant;
    paged_hash *hashes;                /* the chain's missing hashes, total of them */
    uint32_t total;
    uint32_t off;                      /* those fetched and published so far */
    uint32_t next_off;                 /* the first not asked of the peer yet */
    uint32_t next_peer;                /* index in peers of the next one to ask */
    struct pd_peer *peer;              /* the one asked now */
    int peer_failed;                   /* its connection failed meanwhile */
    int ends;                          /* a part came short: no part after it is asked */
    int may_ask;                       /* the last part asked was staged whole: ask the next */
    struct pd_peer_part part[PD_PEER_PIPE];  /* a ring: head the oldest, nparts in use */
    uint32_t head, nparts;
    int abandon;                       /* CANCELLING: end the fetch then, not ask the next peer */
    uint64_t began_ns;                 /* when the fetch asked its first peer */
    uint64_t counted_ns;               /* the peer's fetch_ns counted up to here */
    uint64_t check_ns, publish_ns;     /* its time checking and publishing, for the log */
    uint64_t fetched_bytes;
    uint32_t parts_done;
};

/* What an Active Message handler is registered with. */
struct pd_peer_am_arg {
    struct pd_peers *ps;
    unsigned id;
};

struct pd_peers {
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_listener_h listener;
    int efd;
    uint8_t key[PD_PEER_KEY_BYTES];
    uint8_t id[PD_PEER_ID_BYTES];      /* this daemon's, random */
    uint32_t timeout_ms;
    pd_backend *backend;
    struct pd_pool *const *pools;
    struct pd_peer *peers[PD_PEER_MAX];
    uint32_t npeers;
    struct pd_peer_msg *head, *tail;   /* queued messages */
    uint32_t queued;
    struct pd_peer_am_arg am_args[PD_PEER_AM_LAST_ + 1];
    struct pd_peer_stage stages[PD_PEER_MAX_STAGES];
    struct pd_peer_fetchop fetches[PD_PEER_MAX_FETCHES];
    struct pd_peer_buf spares[PD_PEER_SPARES];
    uint64_t next_req;
    pd_peers_done_fn done_fn;          /* told when a fetch is over */
    void *done_ctx;
    int corrupt, stall;                /* PAGEDD_PEER_CORRUPT, PAGEDD_PEER_STALL */
    int device_staging;                /* transfers may stage in device memory (link.c) */
    uint32_t parts;                    /* a fetch's parts in flight at most (PAGEDD_PEER_PARTS) */
};

/* link.c */
/* Returns the peer whose endpoint is ep, or NULL. */
struct pd_peer *pd_peer_by_ep(struct pd_peers *ps, ucp_ep_h ep);
/* Sends message id (len bytes of data, copied) to p. Returns 0 or -1 (p is then marked failed). */
int pd_peer_send(struct pd_peers *ps, struct pd_peer *p, unsigned id, const void *data, size_t len);
/* Marks p failed for why (formatted), logs it at WARNING, and closes its endpoint at the next
 * poll. Returns nothing. */
void pd_peer_fail(struct pd_peers *ps, struct pd_peer *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Progresses the worker once; returns what ucp_worker_progress returned. */
unsigned pd_peer_progress(struct pd_peers *ps);
/* Returns the time now in nanoseconds (the monotonic clock). */
uint64_t pd_peer_now_ns(void);
/* Reads which transports p's endpoint moves its gets over into p->transports and p->tcp_only,
 * and logs them, with a warning when only TCP is left. Returns nothing. */
void pd_peer_note_transports(struct pd_peers *ps, struct pd_peer *p);
/* Parses the text ucp_ep_print_info wrote (info) into out (size bytes): the transport of each
 * lane that carries RMA (else AM), once each, separated by spaces. Returns 1 when there is
 * one and every one is TCP, else 0. */
int pd_peer_parse_lanes(const char *info, char *out, size_t size);

/* auth.c */
/* Starts p's handshake: sends its CHALLENGE with a fresh nonce. Returns 0 or -1. */
int pd_peer_auth_start(struct pd_peers *ps, struct pd_peer *p);
/* Handles a CHALLENGE or RESPONSE from p. Returns nothing (a failure fails p). */
void pd_peer_auth_msg(struct pd_peers *ps, struct pd_peer *p, const struct pd_peer_msg *m);

/* buffers.c */
/* Takes a buffer of at least len bytes, mapped: the smallest spare of the kind (device: device
 * memory, else host memory) that fits, or a new one. Returns 0 with *out, or -1 (logged). */
int pd_peer_buf_get(struct pd_peers *ps, size_t len, int device, struct pd_peer_buf *out);
/* Gives b back: kept as a spare while the spares hold little enough, else unmapped and freed;
 * *b is cleared. now: the time. Returns nothing. */
void pd_peer_buf_put(struct pd_peers *ps, struct pd_peer_buf *b, uint64_t now);
/* Frees the spares idle for PD_PEER_SPARE_IDLE_NS at now (all: every one). Returns nothing. */
void pd_peer_buf_trim(struct pd_peers *ps, uint64_t now, int all);
/* Returns whether any spare is kept. */
int pd_peer_buf_spares(const struct pd_peers *ps);
/* Copies n blocks ids of pool q into the units lying one after another from units (to_units),
 * or those units into the blocks (pd_units_copy). Returns PAGED_OK or an error with *cause
 * (malloc'd, or left NULL). */
int pd_peer_units_copy(struct pd_peers *ps, struct pd_pool *q, int to_units, uint32_t n, const int32_t *ids,
                       unsigned char *units, char **cause);
/* Copies n blocks ids of pool q into the units lying one after another from units, device
 * memory (to_units), or those units into the blocks, and stores each unit's pk_unit_sum in
 * sums (host memory): in one pass over the bytes where the backend can (units_move), else a
 * copy and a sum. Returns PAGED_OK or an error with *cause (malloc'd, or left NULL). */
int pd_peer_units_move(struct pd_peers *ps, struct pd_pool *q, int to_units, uint32_t n, const int32_t *ids,
                       unsigned char *units, uint64_t *sums, char **cause);

/* fetch.c */
/* Hands REPLY m (taken from the worker) to the fetch waiting for it. Returns 1 when one took
 * it (it keeps m), 0 when none waits for it. */
int pd_peer_fetch_reply(struct pd_peers *ps, struct pd_peer_msg *m);
/* Notes that p's connection failed, for the fetch asking it. Returns nothing. */
void pd_peer_fetch_peer_failed(struct pd_peers *ps, const struct pd_peer *p);
/* Moves every fetch on as far as it can go now. Returns nothing. */
void pd_peer_fetch_step(struct pd_peers *ps);
/* Returns the ms until the earliest fetch deadline, or -1 when none runs. */
int pd_peer_fetch_timeout_ms(const struct pd_peers *ps);
/* Ends every fetch (closing). Returns nothing. */
void pd_peer_fetch_drop_all(struct pd_peers *ps);

/* serve.c */
/* Handles a FETCH of authenticated p: stages the blocks and replies. Returns nothing. */
void pd_peer_serve_fetch(struct pd_peers *ps, struct pd_peer *p, const struct pd_peer_msg *m);
/* Handles a RELEASE of p: frees its staging buffer. Returns nothing. */
void pd_peer_serve_release(struct pd_peers *ps, struct pd_peer *p, const struct pd_peer_msg *m);
/* Frees the staging buffers of ep (every one with ep NULL), and those expired before now
 * (now 0: none for age). Returns nothing. */
void pd_peer_stages_drop(struct pd_peers *ps, ucp_ep_h ep, int all, uint64_t now);

/* key.c */
/* Reads the key file path into key (its contents hashed to 32 bytes), refusing a file that is
 * not a regular file owned by the daemon's uid, that group or others may read or write, or
 * that holds fewer than 16 bytes. Returns 0, or -1 with *cause naming the file and why. */
int pd_peer_key_load(const char *path, uint8_t key[PD_PEER_KEY_BYTES], char **cause);

#endif
