/* control-t.c: the control messages: STATUS, STATS, LIST, SUBSCRIBE, KILL_CLIENT, EVICT, DESTROY. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/proto.h"
#include "lib/core/sock.h"
#include "tests/service/rawclient.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"

#define B 16

static struct pagedd daemon_;

/* Runs one request; bails unless it succeeds. Returns the CQE count. */
static uint32_t must(struct rc_client *c, struct pcore_sqe s)
{
    struct pcore_cqe q;
    int rc = rc_call(c, &s, &q);
    if (rc != 0)
        bail("request %u failed: %s", s.opcode, paged_strerror(rc));
    return q.count;
}

/* Waits for the next EVENT on c; returns 1 with *e, or 0. */
static int next_event(struct rc_client *c, struct pcore_msg_event *e)
{
    return rc_wait_msg(c, PCORE_MSG_EVENT, 10000, e, sizeof *e) == 1;
}

/* Runs every case against a real daemon; returns 0 (TAP reports the results). */
int main(void)
{
    plan_lazy();
    if (pagedd_start(&daemon_, NULL, NULL, NULL) != 0)
        bail("pagedd did not start");
    struct rc_client ctl, sub, w;
    if (rc_connect(daemon_.socket, "ctl", PCORE_HELLO_CONTROL, &ctl) != 0
        || rc_connect(daemon_.socket, "sub", PCORE_HELLO_CONTROL, &sub) != 0)
        bail("control connections failed");
    struct pcore_msg_hdr h = { PCORE_MSG_SUBSCRIBE, 0, 0, sizeof h };
    struct pcore_msg_hdr ok_reply;
    struct pcore_msg_subscribe sf = { { PCORE_MSG_SUBSCRIBE, 0, 0, sizeof sf }, 0x80, 0 };
    is_int(PAGED_E_INVAL, rc_control(&sub, &sf, sizeof sf, &ok_reply, sizeof ok_reply, NULL),
           "SUBSCRIBE with an unknown flag: PAGED_E_INVAL (%s)", sub.errmsg);
    is_int(sizeof ok_reply, rc_control(&sub, &h, sizeof h, &ok_reply, sizeof ok_reply, NULL), "SUBSCRIBE answers OK");

    /* Events: connect, pool create, attach. */
    if (rc_connect(daemon_.socket, "worker", 0, &w) != 0)
        bail("worker cannot connect");
    struct pcore_msg_event e;
    ok(next_event(&sub, &e) && e.event == PCORE_EVENT_CONNECT && e.client_id == w.id
       && strcmp(e.client_name, "worker") == 0, "event: connect of 'worker'");
    struct pcore_msg_pool_reply r;
    is_int(0, rc_pool_create(&w, "ctlpool", 2, 2, 64, B, PAGED_DTYPE_F16, 32, 0600, PCORE_ATTACH_WRITE, &r, NULL),
           "worker creates 'ctlpool'");
    ok(next_event(&sub, &e) && e.event == PCORE_EVENT_POOL_CREATE && strcmp(e.pool, "ctlpool") == 0,
       "event: pool create of 'ctlpool'");
    ok(next_event(&sub, &e) && e.event == PCORE_EVENT_ATTACH && e.client_id == w.id, "event: attach");

    /* Requests for STATS and the listings: ALLOC 4, PUBLISH 2, FREE 4 (2 cached remain). */
    struct pcore_sqe s;
    memset(&s, 0, sizeof s);
    s.pool = r.pool_id;
    s.opcode = PAGED_OP_ALLOC;
    s.u.alloc.count = 4;
    uint64_t ids = s.u.alloc.ids_off = rc_alloc(&w, 16);
    must(&w, s);
    uint64_t tok = rc_alloc(&w, 2 * B * 4);
    for (int i = 0; i < 2 * B; i++)
        ((int32_t *) rc_ptr(&w, tok))[i] = 5 + i;
    memset(&s, 0, sizeof s);
    s.pool = r.pool_id;
    s.opcode = PAGED_OP_PUBLISH;
    s.u.prefix = (struct pcore_req_prefix) { .num_blocks = 2, .tokens_off = tok, .ids_off = ids };
    is_int(2, must(&w, s), "PUBLISH enters 2 blocks");
    for (int i = 0; i < 10; i++)
        is_int(0, rc_nop(&w), "NOP %d", i);

    struct pcore_block_item blocks[64];
    long nb = rc_list(&ctl, PCORE_LIST_BLOCKS, "ctlpool", blocks, sizeof blocks[0], 64);
    is_int(4, nb, "LIST blocks shows the 4 blocks in use");
    int published = 0, held_by_w = 0;
    for (long i = 0; i < nb && i < 64; i++) {
        published += blocks[i].published != 0;
        held_by_w += blocks[i].num_holders == 1 && blocks[i].holders[0] == w.id && blocks[i].refcount == 1;
    }
    is_int(2, published, "LIST blocks: 2 of them published");
    is_int(4, held_by_w, "LIST blocks: each held once, by the worker");

    struct pcore_client_item clients[16];
    long nc = rc_list(&ctl, PCORE_LIST_CLIENTS, "", clients, sizeof clients[0], 16);
    is_int(3, nc, "LIST clients shows the 3 connections");
    int seen = 0;
    for (long i = 0; i < nc && i < 16; i++)
        if (clients[i].id == w.id)
            seen = strcmp(clients[i].name, "worker") == 0 && clients[i].requests == 12 && clients[i].blocks == 4
                   && clients[i].pools == 1 && clients[i].pid == (uint32_t) getpid() && !clients[i].control_only;
    ok(seen, "LIST clients: the worker with its name, pid, 12 requests, 4 blocks, 1 pool");

    struct pcore_msg_stats_reply st;
    h = (struct pcore_msg_hdr) { PCORE_MSG_STATS, 0, 0, sizeof h };
    is_int(sizeof st, rc_control(&ctl, &h, sizeof h, &st, sizeof st, NULL), "STATS answers");
    is_int(PCORE_OP_COUNT_, st.num_ops, "STATS covers every opcode");
    ok(st.ops[PAGED_OP_NOP].requests == 10 && st.ops[PAGED_OP_ALLOC].requests == 1
       && st.ops[PAGED_OP_PUBLISH].requests == 1, "STATS counts 10 NOP, 1 ALLOC, 1 PUBLISH");
    ok(st.ops[PAGED_OP_NOP].latency_p50_ns > 0
       && st.ops[PAGED_OP_NOP].latency_p99_ns >= st.ops[PAGED_OP_NOP].latency_p50_ns,
       "STATS: NOP latency p50 %llu ns <= p99 %llu ns", (unsigned long long) st.ops[PAGED_OP_NOP].latency_p50_ns,
       (unsigned long long) st.ops[PAGED_OP_NOP].latency_p99_ns);

    struct pcore_msg_status_reply sr;
    h = (struct pcore_msg_hdr) { PCORE_MSG_STATUS, 0, 0, sizeof h };
    is_int(sizeof sr, rc_control(&ctl, &h, sizeof h, &sr, sizeof sr, NULL), "STATUS answers");
    ok(sr.backend == PAGED_BACKEND_CPU && sr.healthy == 1 && strcmp(sr.health, "ok") == 0
       && strcmp(sr.version, PACKAGE_VERSION) == 0 && sr.pools == 1 && sr.clients == 3,
       "STATUS: cpu backend, healthy, version, 1 pool, 3 clients");
    uint64_t block_bytes = 2ull * 2 * 2 * B * 64 * 2;
    is_int((long long) (32 * block_bytes), (long long) sr.mem_total, "STATUS: memory total is the pool's size");
    is_int((long long) (4 * block_bytes), (long long) sr.mem_used, "STATUS: memory used is 4 blocks");

    /* FREE: 2 blocks go free, the 2 published stay cached; EVICT drops them. */
    memset(&s, 0, sizeof s);
    s.pool = r.pool_id;
    s.opcode = PAGED_OP_FREE;
    s.u.blocks = (struct pcore_req_blocks) { 4, 0, ids };
    must(&w, s);
    struct pcore_pool_item it;
    is_int(0, rc_pool_item(&ctl, "ctlpool", &it), "LIST pools finds ctlpool");
    ok(it.free == 30 && it.cached == 2 && it.referenced == 0, "after FREE: 30 free, 2 cached");
    struct pcore_msg_pool_ref ref;
    memset(&ref, 0, sizeof ref);
    ref.hdr.type = PCORE_MSG_EVICT;
    ref.hdr.len = sizeof ref;
    snprintf(ref.name, sizeof ref.name, "ctlpool");
    is_int(sizeof ok_reply, rc_control(&ctl, &ref, sizeof ref, &ok_reply, sizeof ok_reply, NULL), "EVICT answers OK");
    is_int(2, ok_reply.status, "EVICT reports 2 blocks evicted");
    ok(next_event(&sub, &e) && e.event == PCORE_EVENT_EVICT && e.count == 2 && strcmp(e.pool, "ctlpool") == 0,
       "event: 2 blocks of ctlpool evicted");

    /* DESTROY: the name goes now, the memory when the worker detaches. */
    ref.hdr.type = PCORE_MSG_POOL_DESTROY;
    is_int(sizeof ok_reply, rc_control(&ctl, &ref, sizeof ref, &ok_reply, sizeof ok_reply, NULL),
           "POOL_DESTROY by the owner's uid answers OK");
    ok(next_event(&sub, &e) && e.event == PCORE_EVENT_POOL_DESTROY, "event: pool destroy");
    is_int(PAGED_E_NOENT, rc_pool_attach(&ctl, "ctlpool", 0, NULL, NULL), "the destroyed name is gone for attach");
    is_int(1, must(&w, (struct pcore_sqe) { .opcode = PAGED_OP_ALLOC, .pool = r.pool_id, .u.alloc = { 1, 0, ids } }),
           "the attached worker still allocates from the destroyed pool");
    struct pcore_pool_item pools[4];
    long np = rc_list(&ctl, PCORE_LIST_POOLS, "", pools, sizeof pools[0], 4);
    ok(np == 1 && pools[0].destroyed == 1 && pools[0].attached == 1, "LIST pools shows it destroyed, 1 attached");
    ref.hdr.type = PCORE_MSG_POOL_DETACH;
    ref.pool_id = r.pool_id;
    is_int(sizeof ok_reply, rc_control(&w, &ref, sizeof ref, &ok_reply, sizeof ok_reply, NULL), "the worker detaches");
    ok(next_event(&sub, &e) && e.event == PCORE_EVENT_DETACH && e.count == 1, "event: detach releasing 1 block");
    np = rc_list(&ctl, PCORE_LIST_POOLS, "", pools, sizeof pools[0], 4);
    is_int(0, np, "after the last detach the pool is gone");

    /* KILL_CLIENT. */
    struct pcore_msg_kill k;
    memset(&k, 0, sizeof k);
    k.hdr.type = PCORE_MSG_KILL_CLIENT;
    k.hdr.len = sizeof k;
    k.client_id = 4242;
    is_int(PAGED_E_NOENT, rc_control(&ctl, &k, sizeof k, &ok_reply, sizeof ok_reply, NULL),
           "KILL_CLIENT of no client: PAGED_E_NOENT");
    k.client_id = w.id;
    is_int(sizeof ok_reply, rc_control(&ctl, &k, sizeof k, &ok_reply, sizeof ok_reply, NULL),
           "KILL_CLIENT of the worker answers OK");
    struct pcore_cqe q;
    is_int(PAGED_E_DISCONNECTED, rc_reap(&w, &q, 10000), "the killed worker's channel reports it disconnected");
    ok(next_event(&sub, &e) && e.event == PCORE_EVENT_DISCONNECT && e.client_id == w.id,
       "event: disconnect of the worker");
    rc_close(&w);

    /* A subscriber that never reads does not slow anybody down. */
    struct rc_client lazy;
    if (rc_connect(daemon_.socket, "lazy", PCORE_HELLO_CONTROL, &lazy) != 0)
        bail("lazy subscriber cannot connect");
    h = (struct pcore_msg_hdr) { PCORE_MSG_SUBSCRIBE, 0, 0, sizeof h };
    rc_control(&lazy, &h, sizeof h, &ok_reply, sizeof ok_reply, NULL);
    int served = 0;
    for (int i = 0; i < 3000; i++) {
        struct rc_client x;
        served += rc_connect(daemon_.socket, "churn", PCORE_HELLO_CONTROL, &x) == 0;
        rc_close(&x);
    }
    is_int(3000, served, "3000 connections served while a subscriber reads nothing");
    is_int(0, rc_pool_item(&ctl, "nothing-here", &it) == PAGED_E_NOENT ? 0 : 1,
           "and the control connection is answered");
    /* Then it reads: each of the churn's 6000 events (a connect and a disconnect each) either
     * reaches it or is counted by a LOST event once its queue has drained. */
    long got = 0, lost = 0, lost_events = 0, others = 0;
    for (int i = 0; i < 20000 && got + lost < 6000; i++) {
        if (!next_event(&lazy, &e))
            break;
        if (e.event == PCORE_EVENT_LOST) {
            lost += e.count;
            lost_events++;
        } else if ((e.event == PCORE_EVENT_CONNECT || e.event == PCORE_EVENT_DISCONNECT)
                   && strcmp(e.client_name, "churn") == 0)
            got++;
        else
            others++;
    }
    ok(lost_events >= 1 && lost > 0, "the lazy subscriber is told it missed %ld events (in %ld LOST events)", lost,
       lost_events);
    is_int(6000, got + lost, "each of the 6000 events reached it (%ld) or was counted lost (%ld)", got, lost);
    is_int(0, others, "and nothing else came");
    rc_close(&lazy);
    rc_close(&ctl);
    /* 'sub' read none of the churn's events either: its queue is full when SIGTERM comes.
     * The daemon gives such a peer its bounded time to take SHUTDOWN and exits anyway. */
    int stt = pagedd_stop(&daemon_);
    ok(stt == 0, "pagedd exited cleanly with a subscriber's queue full (status %d)", stt);
    long left = 0;
    int ended = 0;
    unsigned char buf[PCORE_MSG_MAX];
    for (int i = 0; i < 100000 && !ended; i++) {
        int nfds = 0;
        long n = pcore_sock_recv(sub.sock, buf, sizeof buf, NULL, 0, &nfds);
        if (n == PAGED_E_AGAIN && pcore_sock_wait_readable(sub.sock, 5000) == 1)
            continue;
        ended = n == PAGED_E_DISCONNECTED;
        if (n <= 0)
            break;
        left++;
    }
    ok(ended, "and that subscriber reads what was sent (%ld messages), then the end of the stream", left);
    rc_close(&sub);
    pagedd_cleanup(&daemon_);
    return 0;
}
