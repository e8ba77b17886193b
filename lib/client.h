/* client.h: libpaged's internal state: the client, pool and sequence handles and their helpers. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_LIB_CLIENT_H
#define PAGED_LIB_CLIENT_H

/*
 * Internal to libpaged: nothing here is exported (lib/libpaged.map pins the public
 * symbols). The helpers are prefixed pc_ ("paged client").
 *
 * Request accounting. Every request, the user's and the library's own synchronous ones,
 * takes a slot of c->slots from paged_prep until its completion is popped from the
 * completion ring. The wire tag names the slot (index in the low 32 bits, a generation
 * in the high 32), so the daemon's tags are checked against what we actually submitted
 * and a user's tag can be any value at all. A popped completion of a user request goes
 * to c->queue, where paged_reap and paged_wait find it; a synchronous call's completion
 * stays in its slot. prep keeps slots in use plus queued completions below cq_entries, so
 * the daemon can always post every completion and the queue never overflows.
 */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "paged.h"
#include "lib/core/proto.h"
#include "lib/core/ring.h"
#include "lib/core/wake.h"
#include "lib/cuda_driver.h"

/* The size of paged_client_error's buffer. */
#define PC_ERR_MAX 256

/* Slot states. */
enum pc_slot_state {
    PC_SLOT_FREE = 0,
    PC_SLOT_USER,       /* a paged_prep request */
    PC_SLOT_SYNC,       /* a synchronous call's request; cqe filled once done */
};

/* One request between paged_prep and the popping of its completion. */
struct pc_slot {
    uint64_t user_tag;      /* the caller's tag (user slots) */
    uint32_t gen;           /* bumped whenever the slot is taken; the wire tag's high half */
    uint8_t state;          /* enum pc_slot_state */
    uint8_t op;             /* the request's opcode, checked against the completion's */
    uint8_t published;      /* visible to the daemon (a completion before that is bogus) */
    uint8_t done;           /* sync slots: cqe holds the completion */
    struct pcore_cqe cqe;
};

/* A bump-allocated arena: host memory, or device memory seen at dptr. */
struct pc_arena {
    unsigned char *base;    /* host address (host arena; data arena on the cpu backend) */
    uint64_t size;
    uint64_t top;           /* bytes handed out */
};

struct paged_client {
    int sock;               /* control socket, non-blocking */
    int sq_notify_fd;       /* the daemon's submission wake-up: we write it */
    int cq_wait_fd;         /* our completion wake-up: we poll and drain it */
    int epoll_fd;           /* paged_client_fd: cq_wait_fd and sock */
    int dead;               /* 0, or the sticky connection error (DISCONNECTED, SHUTDOWN, RING) */
    int refused;            /* the status of an ERROR answering no request (a refusal), or 0 */
    int timeout_ms;         /* control calls; -1 forever */
    uint32_t id;
    paged_backend backend;
    uint32_t ctl_seq;       /* last control request number */

    void *chan;             /* the channel mapping */
    uint64_t chan_size;
    struct pcore_channel_hdr hdr; /* our copy, checked */
    struct pcore_ring_prod sq;
    struct pcore_ring_cons cq;
    struct pcore_waiter waiter;

    uint32_t cq_entries;
    struct pc_slot *slots;  /* cq_entries */
    uint32_t *free_slots;   /* a stack of free slot indices */
    uint32_t nfree;
    uint32_t prepared;      /* slots written to the SQ but not yet published */
    uint32_t *prep_slots;   /* their slot indices, in SQ order (sq_entries) */
    uint32_t user_published;/* user slots published whose completion is not yet popped */
    paged_completion *queue;/* popped user completions, a ring of cq_entries */
    uint32_t q_head, q_len;

    struct pc_arena host;
    struct pc_arena data;   /* unused on the cpu backend: the host arena serves */

    /* The device data arena (cuda backend). */
    int32_t device_ordinal;
    uint32_t device;                   /* the daemon's index of the client's device */
    uint32_t devices;                  /* the devices the daemon serves */
    uint8_t device_uuid[16];
    uint32_t data_kind;     /* enum pcore_mem_kind */
    uint64_t data_alloc;    /* bytes of the exported allocation */
    int data_fd;            /* VMM descriptor until mapped, else -1 */
    uint8_t data_ipc[64];
    struct pc_devmap data_map;
    uint64_t host_dptr;     /* the host arena's device address once registered (PAGED_STREAM_HOST) */

    struct pc_cuda *cuda;   /* the CUDA driver, loaded on first need */
    struct paged_pool *pools;
    unsigned char *msgbuf;  /* PCORE_MSG_MAX bytes for received control messages */
    char err[PC_ERR_MAX];
};

struct paged_pool {
    paged_client *c;
    struct paged_pool *next;
    char name[PCORE_NAME_MAX];
    paged_pool_info info;
    uint32_t mem_kind;      /* enum pcore_mem_kind */
    uint64_t alloc_bytes;
    int fd;                 /* the pool memory's descriptor until mapped, else -1 */
    uint8_t ipc[64];
    uint8_t uuid[16];
    void *host_map;         /* cpu backend mapping */
    struct pc_devmap dev_map; /* cuda backend mapping */
    struct paged_seq *seqs; /* the pool's sequences, freed with it */
};

struct paged_seq {
    paged_pool *pool;
    struct paged_seq *next, *prev;
    uint64_t salt;
    uint32_t len;           /* tokens */
    uint32_t nblocks;       /* entries of blocks in use */
    uint32_t cap;           /* entries of blocks allocated; tokens holds cap * block_size */
    int32_t *blocks;
    int32_t *tokens;        /* token ids, while tokens_ok */
    int tokens_ok;          /* every token's id is known (needed to publish) */
    uint32_t published;     /* leading blocks known published: immutable */
    paged_hash chain;       /* hash of block published - 1 (zero when none) */
    int last_shared;        /* the partial last block may be referenced elsewhere (fork) */
};

/* ---- client.c: connecting. */

/* Connects to pagedd at socket_path (NULL: the default path) as a control-only client (no
 * channel, no arenas) named name, for control calls only. Returns PAGED_OK with *out, or an
 * error with its reason in errbuf (where not NULL) and *out NULL. */
int pc_connect_control(const char *socket_path, const char *name, paged_client **out, char *errbuf,
                       size_t errbuf_size);

/* ---- control.c: the socket. */

/* Sets c->err from a format. */
void pc_set_err(paged_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Returns milliseconds left until deadline_ns (CLOCK_MONOTONIC), or -1 for no deadline. */
int pc_ms_left(uint64_t deadline_ns);
/* Returns the deadline timeout_ms from now, UINT64_MAX for a negative timeout. */
uint64_t pc_deadline(int timeout_ms);

/*
 * Sends the control request msg (len bytes, type already set; the sequence number and
 * length are filled in) and waits, until c->timeout_ms, for the reply of type want,
 * copying its first reply_size bytes to reply (a longer reply is fine) and up to maxfds
 * descriptors to fds (*nfds of them; the caller owns them). Returns PAGED_OK, the
 * daemon's error (its message in c->err), PAGED_E_TIMEOUT, PAGED_E_PROTO, or a
 * connection error.
 */
int pc_ctl_call(paged_client *c, void *msg, size_t len, uint32_t want, void *reply,
                size_t reply_size, int *fds, int maxfds, int *nfds);

/*
 * Reads every message waiting on the socket without blocking, handling what the daemon
 * says unasked (SHUTDOWN) and dropping the rest (events, late replies). Returns c->dead
 * (0 when the connection is fine).
 */
int pc_conn_check(paged_client *c);

/*
 * Waits up to timeout_ms (-1: forever) for the next EVENT and leaves it in c->msgbuf,
 * handling anything else the daemon sends as pc_conn_check does. Returns its length (at
 * least a header whose len matches), PAGED_E_TIMEOUT, or the connection's error.
 */
ssize_t pc_ctl_next_event(paged_client *c, int timeout_ms);

/* ---- submit.c: slots and rings. */

/*
 * Takes a slot and writes sqe (its tag replaced by the slot's wire tag) into the next
 * free SQ entry without publishing it. state is PC_SLOT_USER or PC_SLOT_SYNC. Returns
 * the slot index, PAGED_E_AGAIN, or the sticky connection error.
 */
int pc_prep_sqe(paged_client *c, struct pcore_sqe *sqe, int state, uint64_t user_tag);

/* Publishes the prepared entries and wakes the daemon if it sleeps; returns their number. */
int pc_submit(paged_client *c);

/*
 * Moves every completion ready in the CQ to its slot or the user queue (no system call).
 * Returns the number popped or PAGED_E_RING (sticky) when the daemon's indices or tags
 * are wrong.
 */
int pc_pump(paged_client *c);

/*
 * Waits until done(c, arg) says the wait is over, pumping the CQ: spins first up to the
 * adaptive budget, then sleeps in poll() on the completion wake-up and the socket (so a
 * daemon that dies or shuts down ends it), until timeout_ms passes (negative: no limit).
 * Returns 1 when done, PAGED_E_TIMEOUT, or an error (connection, ring).
 */
int pc_wait_until(paged_client *c, int timeout_ms, int (*done)(paged_client *, void *), void *arg);

/* Frees a slot. */
void pc_slot_put(paged_client *c, uint32_t idx);

/* Returns whether one more request may take a slot (slots in use plus queued completions
 * stay below cq_entries). */
int pc_slot_room(const paged_client *c);

/* Returns the lower-case name of an opcode ("decode"), or "op?" for an unknown one. */
const char *pc_op_name(unsigned op);

/* ---- encode.c. */

/*
 * Encodes request r of client c as the submission entry *e (its tag left zero), the one
 * encoder of the asynchronous and the synchronous API. Returns PAGED_OK, or PAGED_E_INVAL
 * with c->err naming what is wrong (an unknown op, a pool of another client, unknown
 * dep.flags).
 */
int pc_encode_sqe(paged_client *c, const paged_request *r, struct pcore_sqe *e);

/* ---- sync.c. */

/*
 * Runs request req synchronously: publishes what is prepared, encodes and submits req under
 * a sync slot (its tag unused), waits (with no limit but the connection's life) for its
 * completion and copies it to *cqe. Returns the completion's status; on an error completion
 * c->err names the op, field and element. A slot of c's own is needed: PAGED_E_AGAIN when
 * the caller has cq_entries requests unreaped.
 */
int pc_sync_run(paged_client *c, const paged_request *req, struct pcore_cqe *cqe);

/* ---- arena.c. */

/* Carves size bytes aligned to align from arena a; returns PAGED_OK or PAGED_E_NOMEM. */
int pc_arena_carve(struct pc_arena *a, uint64_t size, uint64_t align, uint64_t *off);

/* Returns the arena of kind (the host arena for data on the cpu backend), or NULL. */
struct pc_arena *pc_arena_of(paged_client *c, paged_arena_kind kind);

/*
 * Makes sure the device data arena is mapped in this process (cuda backend), loading
 * the driver if needed. Returns PAGED_OK, PAGED_E_NOTSUP or PAGED_E_DEVICE.
 */
int pc_data_arena_map(paged_client *c);

/* Loads the CUDA driver for c if it is not loaded yet; PAGED_OK or PAGED_E_NOTSUP. */
int pc_cuda_need(paged_client *c);

/* ---- pool.c / seq.c. */

/* Frees a pool handle and its sequences and mappings, without telling the daemon. */
void pc_pool_free(paged_pool *p);

/* Frees a sequence handle without telling the daemon. */
void pc_seq_free(paged_seq *s);

#endif
