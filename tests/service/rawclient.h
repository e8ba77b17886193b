/* rawclient.h: a raw test client of pagedd: HELLO, the channel, raw SQEs and CQEs. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_SERVICE_RAWCLIENT_H
#define PAGED_TESTS_SERVICE_RAWCLIENT_H

/*
 * Speaks lib/core/proto.h directly with the core's sock, ring, wake and shm modules, without
 * libpaged, so the service tests can send exactly the bytes they mean to, bad ones included.
 * Functions return 0 / a count or a negative paged_error; the last ERROR message the daemon
 * sent is kept in errmsg.
 */

#include <stddef.h>
#include <stdint.h>

#include "lib/core/proto.h"
#include "lib/core/ring.h"

struct rc_client {
    int sock;
    uint32_t id;
    uint32_t seq;
    struct pcore_msg_welcome welcome;
    void *map;                       /* the channel */
    uint64_t map_size;
    struct pcore_channel_hdr hdr;
    struct pcore_ring_prod sq;
    struct pcore_ring_cons cq;
    int sq_notify, cq_wait;
    unsigned char *arena;
    uint64_t arena_size;
    uint64_t arena_used;             /* bump allocator */
    char errmsg[PCORE_ERRMSG_MAX];
    int got_shutdown;                /* a SHUTDOWN message was seen */
};

/* Connects and says HELLO (flags PCORE_HELLO_*), maps the channel. Returns 0 or the
 * status of the daemon's ERROR (errmsg has its text), or another paged_error. */
int rc_connect(const char *path, const char *name, uint32_t flags, struct rc_client *c);

/* Like rc_connect, with a HELLO the caller filled (any geometry it asks for). */
int rc_connect_hello(const char *path, const struct pcore_msg_hello *hello, struct rc_client *c);

/* Connects and sends msg as the first packet; waits for the reply. Returns the ERROR's
 * status (message in errmsg, of size PCORE_ERRMSG_MAX), 1 for a WELCOME, or a negative
 * paged_error of the transport. Whether the daemon then closed is stored in *closed. */
int rc_raw_hello(const char *path, const void *msg, size_t len, char *errmsg, int *closed);

/* Fills a valid HELLO. */
void rc_fill_hello(struct pcore_msg_hello *h, const char *name, uint32_t flags);

/* Closes everything. */
void rc_close(struct rc_client *c);

/* Sends a control message (its seq is set here) and waits for the reply with that seq,
 * skipping EVENTs; stores up to replymax bytes of it and one descriptor (or -1) in *fd.
 * Returns the reply's length, or a negative error (an ERROR reply returns its status). */
long rc_control(struct rc_client *c, void *msg, size_t len, void *reply, size_t replymax, int *fd);

/* POOL_CREATE with the common fields; returns 0 or the error; fills *r and *fd (may be NULL). */
int rc_pool_create(struct rc_client *c, const char *name, uint32_t layers, uint32_t heads,
                   uint32_t head_dim, uint32_t block_size, uint32_t dtype, uint32_t num_blocks,
                   uint32_t mode, uint32_t flags, struct pcore_msg_pool_reply *r, int *fd);

/* POOL_ATTACH; returns 0 or the error; fills *r and *fd (may be NULL). */
int rc_pool_attach(struct rc_client *c, const char *name, uint32_t flags,
                   struct pcore_msg_pool_reply *r, int *fd);

/* Sends STATS on control connection c and stores the whole reply in *out. Returns 0, or a
 * negative paged_error (PAGED_E_PROTO for a reply of the wrong size). */
int rc_stats(struct rc_client *c, struct pcore_msg_stats_reply *out);

/*
 * Runs LIST what (PAGED_LIST_*) with pool filter name ("" for all) on control connection c
 * and copies up to max items of size isize into items. Returns the number of items the
 * daemon listed (which may exceed max), or a negative paged_error.
 */
long rc_list(struct rc_client *c, uint32_t what, const char *name, void *items, size_t isize, long max);

/* Fills *out with the LIST item of the pool named name. Returns 0, PAGED_E_NOENT or an error. */
int rc_pool_item(struct rc_client *c, const char *name, struct pcore_pool_item *out);

/* A condition for rc_pool_item_until: the pool has want blocks free. */
int rc_pool_free_is(const struct pcore_pool_item *it, uint32_t want);

/* Reads the pool named name until met(item, want) holds or about timeout_ms have passed, a
 * millisecond apart; *out is the last item read. Returns 0 when it held, 1 when it did not
 * in time, or PAGED_E_NOENT or an error. */
int rc_pool_item_until(struct rc_client *c, const char *name, int (*met)(const struct pcore_pool_item *, uint32_t),
                       uint32_t want, int timeout_ms, struct pcore_pool_item *out);

/* Returns the offset of size fresh bytes (64-aligned) of the host arena, or bails. */
uint64_t rc_alloc(struct rc_client *c, uint64_t size);

/* Returns a pointer into the host arena. */
void *rc_ptr(struct rc_client *c, uint64_t off);

/* Pushes one SQE and wakes the daemon if it sleeps. Returns 0, PAGED_E_AGAIN or an error. */
int rc_submit(struct rc_client *c, const struct pcore_sqe *sqe);

/* Waits up to timeout_ms for one CQE. Returns 1, PAGED_E_TIMEOUT, or an error (the daemon
 * closed the channel: PAGED_E_DISCONNECTED). */
int rc_reap(struct rc_client *c, struct pcore_cqe *cqe, int timeout_ms);

/* Submits one SQE and waits for its CQE (10 s at most). Returns the CQE's status, or a
 * transport error (then cqe->status is left 1). */
int rc_call(struct rc_client *c, const struct pcore_sqe *sqe, struct pcore_cqe *cqe);

/* A NOP round trip; returns its status. */
int rc_nop(struct rc_client *c);

/* Waits up to timeout_ms for an unsolicited message of type on the socket (skipping
 * others). Returns 1 when it came, 0 on timeout, PAGED_E_DISCONNECTED at end of stream. */
int rc_wait_msg(struct rc_client *c, uint32_t type, int timeout_ms, void *out, size_t outmax);

#endif
