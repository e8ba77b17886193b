/* wire.h: the peers' Active Messages: their ids and layouts, one struct each. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_PEER_WIRE_H
#define PAGED_DAEMON_PEER_WIRE_H

/*
 * Every message is one Active Message with no header and its struct as data, sent eager and
 * with a reply endpoint, in the byte order of both hosts (peers are hosts of one byte order;
 * the magic of CHALLENGE tells another apart). The order on a connection:
 *
 *   both sides  CHALLENGE {magic, version, nonce, id}       as soon as the endpoint exists
 *   both sides  RESPONSE  {magic, mac}                      mac = crypto_auth(their nonce || own id)
 *   asker       FETCH     {req, pool, tenant, geometry, n, flags, hashes[n]}
 *   server      REPLY     {req, status, count, unit_bytes, addr, rkey_len, device, rkey, sums[count]}
 *   asker       RELEASE   {req}                             after its get, or giving up
 *
 * A side is authenticated once the RESPONSE it got verifies against its own nonce and the id
 * the other sent; anything but CHALLENGE and RESPONSE from a side not yet authenticated, and
 * any message whose length or fields do not check, ends the connection.
 *
 * Where the asker can take units in device memory (PD_PEER_FETCH_DEVICE: a cuda backend, and
 * a UCX that moves GPU memory) and the server can stage them there, the server does, says so
 * in the REPLY's device, and sums each unit with pk_unit_sum (kernels.h) on its GPU; else the
 * units are host memory summed with XXH3-64. The asker checks with the same function.
 */

#include <stdint.h>

#include "lib/core/proto.h"

enum pd_peer_am {
    PD_PEER_AM_CHALLENGE = 1,
    PD_PEER_AM_RESPONSE = 2,
    PD_PEER_AM_FETCH = 3,
    PD_PEER_AM_REPLY = 4,
    PD_PEER_AM_RELEASE = 5,
    PD_PEER_AM_LAST_ = PD_PEER_AM_RELEASE,
};

#define PD_PEER_MAGIC 0x50656572u      /* "Peer" */
#define PD_PEER_VERSION 1u
#define PD_PEER_NONCE_BYTES 32u
#define PD_PEER_ID_BYTES 16u
#define PD_PEER_MAC_BYTES 32u          /* crypto_auth_BYTES */
#define PD_PEER_MAX_ASK 256u           /* most hashes one FETCH names */
#define PD_PEER_MAX_RKEY 4096u         /* largest packed remote key taken */
#define PD_PEER_FETCH_DEVICE 1u        /* FETCH flags: the asker takes units in device memory */

struct pd_peer_challenge {
    uint32_t magic, version;
    uint8_t nonce[PD_PEER_NONCE_BYTES];
    uint8_t id[PD_PEER_ID_BYTES];
};

struct pd_peer_response {
    uint32_t magic, reserved;
    uint8_t mac[PD_PEER_MAC_BYTES];
};

struct pd_peer_fetch {
    uint64_t req;
    char pool[PCORE_NAME_MAX];
    uint32_t tenant;
    uint32_t num_layers, num_kv_heads, head_dim, block_size;
    int32_t dtype;
    uint64_t unit_bytes;
    uint32_t n;
    uint32_t flags;                  /* PD_PEER_FETCH_* */
    paged_hash hashes[];             /* n of them */
};

struct pd_peer_reply {
    uint64_t req;
    int32_t status;                  /* PAGED_OK, or why none are sent */
    uint32_t count;                  /* units staged, at most the n asked */
    uint64_t unit_bytes;
    uint64_t addr;                   /* the staging buffer, count units in a row */
    uint32_t rkey_len;
    uint32_t device;                 /* 1: the units are device memory, summed with pk_unit_sum */
    /* then rkey_len bytes of packed remote key, then count uint64_t sums (XXH3-64, or
     * pk_unit_sum with device), unaligned */
};

struct pd_peer_release {
    uint64_t req;
};

#endif
