/* auth.c: the peers' challenge-response over the shared key, before any other message. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include <sodium.h>

#include "daemon/peer/internal.h"
#include "daemon/util/log.h"

/* Computes the answer to the challenge nonce from the side whose id is id: crypto_auth of
 * nonce || id under key, into mac. Returns nothing. */
static void answer(const uint8_t key[PD_PEER_KEY_BYTES], const uint8_t nonce[PD_PEER_NONCE_BYTES],
                   const uint8_t id[PD_PEER_ID_BYTES], uint8_t mac[PD_PEER_MAC_BYTES])
{
    uint8_t msg[PD_PEER_NONCE_BYTES + PD_PEER_ID_BYTES];
    memcpy(msg, nonce, PD_PEER_NONCE_BYTES);
    memcpy(msg + PD_PEER_NONCE_BYTES, id, PD_PEER_ID_BYTES);
    crypto_auth(mac, msg, sizeof msg, key);
}

/* Sends p a CHALLENGE with a fresh nonce; returns 0 or -1. */
int pd_peer_auth_start(struct pd_peers *ps, struct pd_peer *p)
{
    struct pd_peer_challenge c = { .magic = PD_PEER_MAGIC, .version = PD_PEER_VERSION };
    randombytes_buf(p->nonce, sizeof p->nonce);
    memcpy(c.nonce, p->nonce, sizeof c.nonce);
    memcpy(c.id, ps->id, sizeof c.id);
    p->challenged = p->verified = 0;
    if (p->state != PD_PEER_FAILED)
        p->state = PD_PEER_CONNECTING;      /* a failed peer says why until it authenticates */
    return pd_peer_send(ps, p, PD_PEER_AM_CHALLENGE, &c, sizeof c);
}

/* Answers p's CHALLENGE m (checked first). Returns nothing. */
static void on_challenge(struct pd_peers *ps, struct pd_peer *p, const struct pd_peer_msg *m)
{
    struct pd_peer_challenge c;
    if (m->len != sizeof c) {
        pd_peer_fail(ps, p, "a challenge of %zu bytes, not %zu", m->len, sizeof c);
        return;
    }
    memcpy(&c, m->data, sizeof c);
    if (c.magic != PD_PEER_MAGIC || c.version != PD_PEER_VERSION) {
        pd_peer_fail(ps, p, "not a paged peer of this version (magic %#x, version %u)", c.magic, c.version);
        return;
    }
    if (p->challenged) {
        pd_peer_fail(ps, p, "a second challenge");
        return;
    }
    if (sodium_memcmp(c.id, ps->id, sizeof c.id) == 0) {
        pd_peer_fail(ps, p, "it claims this daemon's own id");
        return;
    }
    memcpy(p->their_id, c.id, sizeof p->their_id);
    p->challenged = 1;
    struct pd_peer_response r = { .magic = PD_PEER_MAGIC };
    answer(ps->key, c.nonce, ps->id, r.mac);
    pd_peer_send(ps, p, PD_PEER_AM_RESPONSE, &r, sizeof r);
}

/* Verifies p's RESPONSE m against this side's nonce and p's id. Returns nothing. */
static void on_response(struct pd_peers *ps, struct pd_peer *p, const struct pd_peer_msg *m)
{
    struct pd_peer_response r;
    if (m->len != sizeof r || !p->challenged || p->verified) {
        pd_peer_fail(ps, p, "a response out of turn or of %zu bytes", m->len);
        return;
    }
    memcpy(&r, m->data, sizeof r);
    uint8_t want[PD_PEER_MAC_BYTES];
    answer(ps->key, p->nonce, p->their_id, want);
    if (r.magic != PD_PEER_MAGIC || sodium_memcmp(want, r.mac, sizeof want) != 0) {
        p->auth_failures++;
        pd_peer_fail(ps, p, "authentication failed: its answer to the challenge does not verify "
                     "(another peer-key?)");
        return;
    }
    p->verified = 1;
    p->state = PD_PEER_AUTHENTICATED;
    p->why[0] = '\0';
    pd_log(PD_LOG_INFO, "peer %s: authenticated", p->addr);
    pd_peer_note_transports(ps, p);
}

/* Handles a handshake message of p; returns nothing. */
void pd_peer_auth_msg(struct pd_peers *ps, struct pd_peer *p, const struct pd_peer_msg *m)
{
    if (m->id == PD_PEER_AM_CHALLENGE)
        on_challenge(ps, p, m);
    else
        on_response(ps, p, m);
}
