/* reclaim-t.c: clients that exit or are killed mid-stream give every block back. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/proto.h"
#include "lib/core/shm.h"
#include "tests/service/rawclient.h"
#include "tests/service/proc.h"
#include "tests/tap/basic.h"

#define L 2
#define H 2
#define D 64
#define B 16
#define N 256
#define WORKERS 5
#define BLOCKS 8          /* each worker allocates this many */
#define PUBLISHED 4       /* and publishes its first this many */
#define SALT 7
#define VICTIM (WORKERS - 1)

static struct pagedd daemon_;
static uint64_t seed;

/* Returns worker w's token id at position t of its prompt. */
static int32_t token(int w, int t)
{
    return w * 100000 + t * 3 + 1;
}

/* Fills worker w's K and V ([L][BLOCKS * B][H][D] each, random, never zero). */
static void worker_kv(int w, float *k, float *v)
{
    tap_rng rng;
    tap_rng_seed(&rng, seed * 31 + (uint64_t) w);
    size_t n = (size_t) L * BLOCKS * B * H * D;
    for (size_t i = 0; i < n; i++)
        k[i] = (float) (tap_rng_below(&rng, 255) + 1) / 64.0f - 2.0f;
    for (size_t i = 0; i < n; i++)
        v[i] = (float) (tap_rng_below(&rng, 255) + 1) / 64.0f - 2.0f;
}

/* Runs one request in a worker and exits with code on failure; returns the CQE count. */
static uint32_t wcall(struct rc_client *c, const struct pcore_sqe *s, int code)
{
    struct pcore_cqe q;
    if (rc_call(c, s, &q) != 0)
        _exit(code);
    return q.count;
}

/*
 * A worker: allocates, appends K and V, forks and publishes blocks; then, by its index,
 * frees everything and exits, exits holding everything, or (the victim) streams requests
 * until it is killed. Tells the parent through tell_fd when its setup is done.
 */
static void worker(int w, int tell_fd)
{
    struct rc_client c;
    char name[32];
    snprintf(name, sizeof name, "worker-%d", w);
    struct pcore_msg_pool_reply r;
    if (rc_connect(daemon_.socket, name, 0, &c) != 0 || rc_pool_attach(&c, "shared", PCORE_ATTACH_WRITE, &r, NULL) != 0)
        _exit(10);
    struct pcore_sqe s;
    memset(&s, 0, sizeof s);
    s.pool = r.pool_id;
    s.opcode = PAGED_OP_ALLOC;
    s.u.alloc.count = BLOCKS;
    uint64_t ids_off = s.u.alloc.ids_off = rc_alloc(&c, BLOCKS * 4);
    wcall(&c, &s, 11);
    int32_t ids[BLOCKS];
    memcpy(ids, rc_ptr(&c, ids_off), sizeof ids);

    size_t n = (size_t) L * BLOCKS * B * H * D;
    uint64_t k_off = rc_alloc(&c, n * 4), v_off = rc_alloc(&c, n * 4), slots_off = rc_alloc(&c, BLOCKS * B * 4);
    worker_kv(w, rc_ptr(&c, k_off), rc_ptr(&c, v_off));
    int32_t *slots = rc_ptr(&c, slots_off);
    for (int t = 0; t < BLOCKS * B; t++)
        slots[t] = ids[t / B] * B + t % B;
    memset(&s, 0, sizeof s);
    s.pool = r.pool_id;
    s.opcode = PAGED_OP_APPEND;
    s.flags = PCORE_SQE_ALL_LAYERS;
    s.u.append = (struct pcore_req_append) { BLOCKS * B, PAGED_DTYPE_F32, k_off, v_off, slots_off };
    if (wcall(&c, &s, 12) != BLOCKS * B)
        _exit(13);

    /* Share the second half (FORK), publish the first half. */
    memset(&s, 0, sizeof s);
    s.pool = r.pool_id;
    s.opcode = PAGED_OP_FORK;
    s.u.blocks.count = BLOCKS - PUBLISHED;
    s.u.blocks.ids_off = ids_off + PUBLISHED * 4;
    wcall(&c, &s, 14);
    uint64_t tok_off = rc_alloc(&c, PUBLISHED * B * 4);
    for (int t = 0; t < PUBLISHED * B; t++)
        ((int32_t *) rc_ptr(&c, tok_off))[t] = token(w, t);
    memset(&s, 0, sizeof s);
    s.pool = r.pool_id;
    s.opcode = PAGED_OP_PUBLISH;
    s.u.prefix.num_blocks = PUBLISHED;
    s.u.prefix.tokens_off = tok_off;
    s.u.prefix.ids_off = ids_off;
    s.u.prefix.salt = SALT;
    if (wcall(&c, &s, 15) != PUBLISHED)
        _exit(16);

    if (w < 2) {
        /* A tidy worker: drops every reference it took, the forks too. */
        memset(&s, 0, sizeof s);
        s.pool = r.pool_id;
        s.opcode = PAGED_OP_FREE;
        s.u.blocks.count = BLOCKS;
        s.u.blocks.ids_off = ids_off;
        wcall(&c, &s, 17);
        s.u.blocks.count = BLOCKS - PUBLISHED;
        s.u.blocks.ids_off = ids_off + PUBLISHED * 4;
        wcall(&c, &s, 18);
    }
    if (w != VICTIM) {
        if (write(tell_fd, "d", 1) != 1)
            _exit(19);
        rc_close(&c);
        _exit(0);
    }

    /* The victim: pipelined requests without end; the parent kills it in the middle. */
    uint64_t more = rc_alloc(&c, 2 * 4), bt_off = rc_alloc(&c, 2 * 4), len_off = rc_alloc(&c, 4);
    uint64_t q_off = rc_alloc(&c, 2 * H * D * 4), out_off = rc_alloc(&c, 2 * H * D * 4);
    memcpy(rc_ptr(&c, bt_off), ids, 8);
    *(int32_t *) rc_ptr(&c, len_off) = 2 * B;
    for (int i = 0; i < 2 * H * D; i++)
        ((float *) rc_ptr(&c, q_off))[i] = 0.25f;
    struct pcore_sqe batch[6];
    memset(batch, 0, sizeof batch);
    for (int i = 0; i < 6; i++) {
        batch[i].pool = r.pool_id;
        batch[i].tag = (uint64_t) i;
    }
    batch[0].opcode = PAGED_OP_ALLOC;
    batch[0].u.alloc = (struct pcore_req_alloc) { 2, 0, more };
    batch[1].opcode = PAGED_OP_FORK;
    batch[1].u.blocks = (struct pcore_req_blocks) { 2, 0, more };
    batch[2].opcode = PAGED_OP_DECODE;
    batch[2].layer = 1;
    batch[2].u.attn = (struct pcore_req_attn) { .num_seqs = 1, .num_q_heads = 2 * H, .dtype = PAGED_DTYPE_F32,
                                                .bt_stride = 2, .q_off = q_off, .out_off = out_off,
                                                .bt_off = bt_off, .lens_off = len_off };
    batch[3].opcode = PAGED_OP_FREE;
    batch[3].u.blocks = (struct pcore_req_blocks) { 2, 0, more };
    batch[4].opcode = PAGED_OP_NOP;
    batch[5].opcode = PAGED_OP_FREE;
    batch[5].u.blocks = (struct pcore_req_blocks) { 2, 0, more };
    for (long iter = 0; iter < 10000000; iter++) {
        for (int i = 0; i < 6; i++)
            if (rc_submit(&c, &batch[i]) != 0)
                _exit(20);
        /* Requests are in flight most of the time: that is where the kill lands. */
        for (int i = 0; i < 6; i++) {
            struct pcore_cqe q;
            if (rc_reap(&c, &q, 10000) != 1 || q.status != 0)
                _exit(21);
        }
        if (iter == 50 && write(tell_fd, "s", 1) != 1)
            _exit(22);
    }
    _exit(23);
}

/* Polls LIST pools until the pool has no referenced block (bounded). Returns the item. */
static struct pcore_pool_item wait_reclaimed(struct rc_client *ctl, long *waited_ms)
{
    struct pcore_pool_item it;
    memset(&it, 0, sizeof it);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 10000; i++) {
        if (rc_pool_item(ctl, "shared", &it) != 0)
            bail("LIST pools failed");
        if (it.referenced == 0)
            break;
        td_pause_ms(1);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *waited_ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    return it;
}

/* Runs every case against a real daemon; returns 0 (TAP reports the results). */
int main(void)
{
    seed = tap_seed();
    plan_lazy();
    if (pagedd_start(&daemon_, NULL, NULL, NULL) != 0)
        bail("pagedd did not start");
    struct rc_client ctl;
    if (rc_connect(daemon_.socket, "reclaim-ctl", PCORE_HELLO_CONTROL, &ctl) != 0)
        bail("control connection failed: %s", ctl.errmsg);
    struct pcore_msg_pool_reply r;
    int fd = -1;
    if (rc_pool_create(&ctl, "shared", L, H, D, B, PAGED_DTYPE_F32, N, 0600, 0, &r, &fd) != 0)
        bail("cannot create the pool: %s", ctl.errmsg);
    if (fd >= 0)
        close(fd);
    struct pcore_pool_item start;
    is_int(0, rc_pool_item(&ctl, "shared", &start), "LIST pools finds the new pool");
    is_int(N, start.free + start.cached, "at the start free + cached = %d", N);

    int tell[2];
    if (pipe(tell) < 0)
        sysbail("pipe");
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = bfork();
        if (pids[w] == 0) {
            close(ctl.sock);
            close(tell[0]);
            worker(w, tell[1]);
        }
    }
    close(tell[1]);
    /* WORKERS - 1 "done" bytes and the victim's "streaming" byte. */
    int done = 0, streaming = 0;
    for (int i = 0; i < WORKERS && !streaming; i++) {
        char ch;
        struct pollfd p = { .fd = tell[0], .events = POLLIN };
        if (poll(&p, 1, 30000) <= 0 || read(tell[0], &ch, 1) != 1)
            break;
        if (ch == 'd')
            done++;
        else if (ch == 's') {
            streaming = 1;
            kill(pids[VICTIM], SIGKILL);
        }
    }
    ok(streaming, "the victim was killed with SIGKILL in the middle of its request stream");
    for (int i = done; i < WORKERS - 1; i++) {
        char ch;
        struct pollfd p = { .fd = tell[0], .events = POLLIN };
        if (poll(&p, 1, 30000) > 0 && read(tell[0], &ch, 1) == 1 && ch == 'd')
            done++;
    }
    is_int(WORKERS - 1, done, "the other %d workers finished their setup", WORKERS - 1);
    if (!streaming)
        kill(pids[VICTIM], SIGKILL);
    for (int w = 0; w < WORKERS; w++) {
        int st;
        waitpid(pids[w], &st, 0);
        if (w == VICTIM)
            ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "worker %d died of SIGKILL", w);
        else
            ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d exited normally (status %d)", w, st);
    }
    close(tell[0]);

    long waited;
    struct pcore_pool_item after = wait_reclaimed(&ctl, &waited);
    diag("every reference was back %ld ms after the last worker died", waited);
    is_int(0, after.referenced, "no block is referenced once every worker is gone");
    is_int(N, after.free + after.cached, "free + cached is back to %d", N);
    is_int(WORKERS * PUBLISHED, after.cached, "the %d published blocks stay cached", WORKERS * PUBLISHED);
    is_int(0, (int) after.attached - 1, "only the control connection is still attached");

    /* A new client finds every worker's published prefix, with the K and V it wrote. */
    struct rc_client nc;
    if (rc_connect(daemon_.socket, "newcomer", 0, &nc) != 0 || rc_pool_attach(&nc, "shared", 0, &r, &fd) != 0)
        bail("newcomer cannot attach: %s", nc.errmsg);
    void *base = NULL;
    is_int(0, pcore_shm_map(fd, r.bytes, 0, &base), "newcomer maps the pool read-only");
    close(fd);
    size_t n = (size_t) L * BLOCKS * B * H * D;
    float *k = bmalloc(n * 4), *v = bmalloc(n * 4);
    uint64_t tok_off = rc_alloc(&nc, PUBLISHED * B * 4), ids_off = rc_alloc(&nc, PUBLISHED * 4);
    for (int w = 0; w < WORKERS; w++) {
        for (int t = 0; t < PUBLISHED * B; t++)
            ((int32_t *) rc_ptr(&nc, tok_off))[t] = token(w, t);
        struct pcore_sqe s;
        struct pcore_cqe q;
        memset(&s, 0, sizeof s);
        s.pool = r.pool_id;
        s.opcode = PAGED_OP_LOOKUP;
        s.u.prefix.num_blocks = PUBLISHED;
        s.u.prefix.tokens_off = tok_off;
        s.u.prefix.ids_off = ids_off;
        s.u.prefix.salt = SALT;
        is_int(0, rc_call(&nc, &s, &q), "LOOKUP of worker %d's prompt succeeds", w);
        is_int(PUBLISHED, q.count, "LOOKUP finds all %d of worker %d's published blocks", PUBLISHED, w);
        worker_kv(w, k, v);
        int32_t *ids = rc_ptr(&nc, ids_off);
        long bad = 0;
        for (uint32_t j = 0; j < q.count && j < PUBLISHED; j++)
            for (int l = 0; l < L; l++)
                for (int t = 0; t < B; t++)
                    for (int h = 0; h < H; h++)
                        for (int d = 0; d < D; d++) {
                            size_t src = (((size_t) l * BLOCKS * B + j * B + (size_t) t) * H + (size_t) h) * D
                                         + (size_t) d;
                            size_t kk = ((((size_t) l * 2 + 0) * N + (size_t) ids[j]) * H + (size_t) h) * B * D
                                        + (size_t) t * D + (size_t) d;
                            size_t vv = kk + (size_t) N * H * B * D;
                            bad += ((float *) base)[kk] != k[src] || ((float *) base)[vv] != v[src];
                        }
        is_int(0, bad, "worker %d's cached blocks still hold the K and V it wrote", w);
        s.opcode = PAGED_OP_FREE;
        s.u.blocks = (struct pcore_req_blocks) { q.count, 0, ids_off };
        is_int(0, rc_call(&nc, &s, &q), "newcomer frees the blocks it found");
    }
    free(k);
    free(v);
    pcore_shm_unmap(base, r.bytes);
    rc_close(&nc);
    after = wait_reclaimed(&ctl, &waited);
    is_int(N, after.free + after.cached, "after the newcomer leaves, free + cached is %d", N);
    rc_close(&ctl);
    int st = pagedd_stop(&daemon_);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exited cleanly on SIGTERM (status %d)", st);
    pagedd_cleanup(&daemon_);
    return 0;
}
