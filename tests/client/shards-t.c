/* shards-t.c: a tensor-parallel pool of two shards served to two worker processes, against an unsharded pool. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "paged.h"
#include "tests/client/daemon_harness.h"
#include "tests/tap/basic.h"

/* The model: 4 KV heads, 8 query heads, split over 2 shards (2 and 4 per rank). */
#define PL 2u
#define PH 4u
#define QH 8u
#define PD 64u
#define PB 16u
#define PN 32u
#define SHARDS 2u
#define SH (PH / SHARDS)        /* KV heads per shard */
#define SQ (QH / SHARDS)        /* query heads per rank */
#define T 40u                   /* tokens of the sequence: 2 full blocks and a partial one */
#define NB 3u
#define FULL 2u
#define TOL 1e-5
#define WAIT_MS 30000

/* What the parent made before forking: the ranks see it as it was. */
static int32_t tokens[T], other_tokens[T];
static float *k_all, *v_all;    /* [L][T][H][D] */
static int on_cuda;             /* the daemon runs cuda: tensors go through device memory */
static uint32_t ndev = 1;       /* the daemon's devices: rank r works on device r modulo them */
static float *q_all;            /* [L][QH][D] */

/* A rank's answer to one command. */
struct reply {
    int rc;
    int mem_ok;                 /* its shard's memory holds exactly its heads' keys and values */
    paged_pool_info info;
    int32_t ids[NB];
    float out[PL][SQ][PD];
};

/* A command to a rank: what to do, on which blocks, with which context length or tokens. */
struct command {
    char what;                  /* 'A'ttach, a'L'loc, 'W'rite, 'D'ecode, 'P'ublish, 'Q'uit */
    int variant;                /* 'P': 0 the sequence's tokens, 1 other tokens */
    int32_t ids[NB];
};

/* Writes or reads exactly len bytes on fd within WAIT_MS; returns 0 or -1. */
static int xfer(int fd, void *buf, size_t len, int out)
{
    unsigned char *b = buf;
    for (size_t done = 0, tries = 0; done < len && tries < 1000; tries++) {
        struct pollfd p = { .fd = fd, .events = out ? POLLOUT : POLLIN };
        if (poll(&p, 1, WAIT_MS) != 1)
            return -1;
        ssize_t n = out ? write(fd, b + done, len - done) : read(fd, b + done, len - done);
        if (n <= 0)
            return -1;
        done += (size_t) n;
    }
    return 0;
}

/* Copies rank r's slice of a [L][tokens][H][D] array's layer l into dst [tokens][SH][D]. */
static void slice_kv(const float *all, uint32_t l, uint32_t r, float *dst)
{
    for (uint32_t t = 0; t < T; t++)
        memcpy(dst + (size_t) t * SH * PD, all + (((size_t) l * T + t) * PH + r * SH) * PD, SH * PD * sizeof *dst);
}

/* Returns the slots of the sequence's tokens in blocks ids, into slots. */
static void fill_slots(const int32_t *ids, int32_t *slots)
{
    for (uint32_t t = 0; t < T; t++)
        slots[t] = ids[t / PB] * (int32_t) PB + (int32_t) (t % PB);
}

/* Decodes every layer for one sequence of len tokens over ids with the query heads from
 * qh0 on (nq of them), into out [L][nq][D]. Returns PAGED_OK or the first error. */
static int decode_layers(paged_pool *p, const int32_t *ids, int32_t len, uint32_t qh0, uint32_t nq, float *out)
{
    const size_t bytes = (size_t) nq * PD * sizeof *out;
    for (uint32_t l = 0; l < PL; l++) {
        const float *ql = q_all + ((size_t) l * QH + qh0) * PD;
        float *ol = out + (size_t) l * nq * PD;
        void *dq = harness_arg_in(on_cuda, ql, bytes), *dout = harness_arg_in(on_cuda, on_cuda ? NULL : ol, bytes);
        const paged_attn_args a = { .num_seqs = 1, .num_q_heads = nq, .dtype = PAGED_DTYPE_F32, .q = dq,
                                    .out = dout, .block_tables = ids, .bt_stride = NB, .seq_lens = &len };
        int rc = paged_decode(p, (int32_t) l, &a);
        harness_arg_out(on_cuda, NULL, dq, bytes, dq != ql);
        harness_arg_out(on_cuda, ol, dout, bytes, dout != ol);
        if (rc != PAGED_OK)
            return rc;
    }
    return PAGED_OK;
}

/* Appends n tokens of layer l (heads KV heads each) into slots, the keys and values through
 * device memory on cuda. Returns paged_append's result. */
static int append_layer(paged_pool *p, uint32_t l, uint32_t n, uint32_t heads, const float *k, const float *v,
                        const int32_t *slots)
{
    const size_t bytes = (size_t) n * heads * PD * sizeof *k;
    void *dk = harness_arg_in(on_cuda, k, bytes), *dv = harness_arg_in(on_cuda, v, bytes);
    int rc = paged_append(p, (int32_t) l, n, PAGED_DTYPE_F32, dk, dv, slots);
    harness_arg_out(on_cuda, NULL, dk, bytes, dk != k);
    harness_arg_out(on_cuda, NULL, dv, bytes, dv != v);
    return rc;
}

/* Appends rank r's heads of every layer into ids and, where the pool is host memory (host),
 * checks its mapped shard holds them. Returns PAGED_OK or the error; sets *mem_ok. */
static int write_shard(paged_pool *p, uint32_t r, const int32_t *ids, int host, int *mem_ok)
{
    float *k = bmalloc((size_t) T * SH * PD * sizeof *k), *v = bmalloc((size_t) T * SH * PD * sizeof *v);
    int32_t slots[T];
    fill_slots(ids, slots);
    int rc = PAGED_OK;
    void *base = NULL;
    *mem_ok = !host || paged_pool_map(p, &base) == PAGED_OK;
    const pk_cache cache = { .base = base, .num_layers = PL, .num_blocks = PN, .num_kv_heads = SH,
                             .head_dim = PD, .block_size = PB, .dtype = PAGED_DTYPE_F32 };
    for (uint32_t l = 0; l < PL && rc == PAGED_OK; l++) {
        slice_kv(k_all, l, r, k);
        slice_kv(v_all, l, r, v);
        rc = append_layer(p, l, T, SH, k, v, slots);
        for (uint32_t t = 0; host && *mem_ok && rc == PAGED_OK && t < T; t++)
            for (uint32_t h = 0; h < SH; h++) {
                const int32_t b = ids[t / PB], at = (int32_t) (t % PB);
                const float *ck = (const float *) base + pk_cache_index(&cache, (int32_t) l, 0, b, (int32_t) h, at);
                const float *cv = (const float *) base + pk_cache_index(&cache, (int32_t) l, 1, b, (int32_t) h, at);
                *mem_ok &= memcmp(ck, k + ((size_t) t * SH + h) * PD, PD * sizeof *ck) == 0
                           && memcmp(cv, v + ((size_t) t * SH + h) * PD, PD * sizeof *cv) == 0;
            }
    }
    free(k);
    free(v);
    return rc;
}

/* Rank r's life in a child: connects, attaches shard r of group "model", and does what the
 * parent says on fd until 'Q'. Returns nothing (exits). */
static void rank_main(const struct pagedd *h, uint32_t r, int fd)
{
    paged_client *c = NULL;
    paged_pool *p = NULL;
    for (int steps = 0; steps < 64; steps++) {
        struct command cmd;
        struct reply rep;
        memset(&rep, 0, sizeof rep);
        if (xfer(fd, &cmd, sizeof cmd, 0) < 0)
            _exit(2);
        switch (cmd.what) {
        case 'A': {
            paged_connect_opts o = { .socket_path = h->socket, .device = r % ndev };
            rep.rc = paged_client_connect(&o, &c);
            if (rep.rc == PAGED_OK && on_cuda)
                harness_use_arena_device(c);
            if (rep.rc == PAGED_OK)
                rep.rc = paged_pool_attach_shard(c, "tp", r, "model", &p);
            if (rep.rc == PAGED_OK)
                paged_pool_get_info(p, &rep.info);
            break;
        }
        case 'L':
            rep.rc = paged_alloc(p, NB, rep.ids);
            break;
        case 'W':
            rep.rc = write_shard(p, r, cmd.ids, paged_client_backend(c) == PAGED_BACKEND_CPU, &rep.mem_ok);
            break;
        case 'D':
            rep.rc = decode_layers(p, cmd.ids, (int32_t) T, r * SQ, SQ, &rep.out[0][0][0]);
            break;
        case 'P':
            rep.rc = paged_publish(p, NULL, 0, FULL, cmd.variant ? other_tokens : tokens, cmd.ids);
            break;
        case 'Q':
            paged_pool_detach(p);
            paged_client_close(c);
            _exit(0);
        default:
            _exit(3);
        }
        if (xfer(fd, &rep, sizeof rep, 1) < 0)
            _exit(4);
    }
    _exit(5);
}

/* Sends cmd to the rank on fd and reads its reply into *rep; bails when it does not answer. */
static void ask(int fd, const struct command *cmd, struct reply *rep)
{
    if (xfer(fd, (void *) cmd, sizeof *cmd, 1) < 0 || xfer(fd, rep, sizeof *rep, 0) < 0)
        bail("a rank did not answer '%c'", cmd->what);
}

/* Returns the largest difference between a rank's output [L][SQ][D] and the reference's
 * query heads r*SQ on ([L][QH][D]). */
static double rank_diff(const float *got, const float *ref, uint32_t r)
{
    double worst = 0;
    for (uint32_t l = 0; l < PL; l++)
        for (size_t i = 0; i < (size_t) SQ * PD; i++) {
            double e = fabs((double) got[(size_t) l * SQ * PD + i] - (double) ref[((size_t) l * QH + r * SQ) * PD + i]);
            worst = isnan(e) || e > worst ? (isnan(e) ? INFINITY : e) : worst;
        }
    return worst;
}

/* Returns the PAGED_OK or error of creating pool name with shards and host tier bytes tier
 * (and mode bits mode) on c; detaches what it made. */
static int try_create(paged_client *c, const char *name, uint32_t heads, uint32_t shards, uint64_t tier,
                      uint32_t mode)
{
    paged_pool_desc d = { .name = name, .num_layers = PL, .num_kv_heads = heads, .head_dim = PD,
                          .block_size = PB, .dtype = PAGED_DTYPE_F32, .num_blocks = PN, .shards = shards,
                          .host_tier_bytes = tier, .mode = mode };
    paged_pool *p = NULL;
    int rc = paged_pool_create(c, &d, &p);
    if (rc == PAGED_OK)
        paged_pool_destroy(c, name), paged_pool_detach(p);
    return rc;
}

/* Runs the two ranks against an unsharded pool of the same heads. */
int main(void)
{
    plan_lazy();
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    for (uint32_t t = 0; t < T; t++) {
        tokens[t] = (int32_t) tap_rng_below(&rng, 50000);
        other_tokens[t] = tokens[t] + 1;
    }
    const size_t kv = (size_t) PL * T * PH * PD;
    k_all = bmalloc(kv * sizeof *k_all);
    v_all = bmalloc(kv * sizeof *v_all);
    q_all = bmalloc((size_t) PL * QH * PD * sizeof *q_all);
    harness_fill(&rng, k_all, kv);
    harness_fill(&rng, v_all, kv);
    harness_fill(&rng, q_all, (size_t) PL * QH * PD);

    struct pagedd h;
    harness_start(&h);
    paged_client *c = harness_client(&h), *c2 = harness_client(&h);
    const int host = paged_client_backend(c) == PAGED_BACKEND_CPU;   /* a pool maps as host memory */
    on_cuda = !host;
    ndev = paged_client_devices(c);
    diag("the daemon serves %u device%s: rank r works on device r modulo them", ndev, ndev == 1 ? "" : "s");

    /* The two ranks of group "model", forked before this process moves any tensor: on the
     * cuda backend that sets CUDA up, which a child must not inherit. They wait for commands. */
    int fds[SHARDS];
    pid_t pids[SHARDS];
    for (uint32_t r = 0; r < SHARDS; r++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
            sysbail("socketpair");
        pids[r] = bfork();
        if (pids[r] == 0) {
            close(sv[0]);
            paged_client_close(c);
            paged_client_close(c2);
            rank_main(&h, r, sv[1]);
        }
        close(sv[1]);
        fds[r] = sv[0];
    }

    /* The reference: the same keys and values in an unsharded pool, every head decoded. */
    paged_pool_desc rd = { .name = "ref", .num_layers = PL, .num_kv_heads = PH, .head_dim = PD,
                           .block_size = PB, .dtype = PAGED_DTYPE_F32, .num_blocks = PN };
    paged_pool *ref = NULL;
    if (paged_pool_create(c, &rd, &ref) != PAGED_OK)
        bail("creating the reference pool: %s", paged_client_error(c));
    int32_t rids[NB], slots[T];
    static float ref_out[PL][QH][PD], ref_out32[PL][QH][PD];
    if (paged_alloc(ref, NB, rids) != PAGED_OK)
        bail("reference alloc: %s", paged_client_error(c));
    fill_slots(rids, slots);
    int rc = PAGED_OK;
    for (uint32_t l = 0; l < PL; l++) {
        float *k = bmalloc((size_t) T * PH * PD * sizeof *k);
        float *v = bmalloc((size_t) T * PH * PD * sizeof *v);
        memcpy(k, k_all + (size_t) l * T * PH * PD, (size_t) T * PH * PD * sizeof *k);
        memcpy(v, v_all + (size_t) l * T * PH * PD, (size_t) T * PH * PD * sizeof *v);
        rc = append_layer(ref, l, T, PH, k, v, slots);
        free(k);
        free(v);
        if (rc != PAGED_OK)
            bail("reference append: %s", paged_client_error(c));
    }
    if (decode_layers(ref, rids, (int32_t) T, 0, QH, &ref_out[0][0][0]) != PAGED_OK
        || decode_layers(ref, rids, (int32_t) (FULL * PB), 0, QH, &ref_out32[0][0][0]) != PAGED_OK)
        bail("reference decode: %s", paged_client_error(c));

    /* Creation is checked. */
    is_int(PAGED_E_GEOMETRY, try_create(c, "bad", PH, 3, 0, 0), "shards 3 of 4 KV heads: PAGED_E_GEOMETRY (%s)",
           paged_client_error(c));
    is_int(PAGED_E_INVAL, try_create(c, "bad", 32, 17, 0, 0), "shards 17: PAGED_E_INVAL (%s)", paged_client_error(c));
    is_int(PAGED_E_INVAL, try_create(c, "bad", PH, SHARDS, 1u << 20, 0), "a host tier behind a sharded pool: "
           "PAGED_E_INVAL (%s)", paged_client_error(c));
    is_int(PAGED_E_INVAL, try_create(c, "bad", PH, SHARDS, 0, 0600 | PAGED_POOL_PEERS),
           "PAGED_POOL_PEERS on a sharded pool: PAGED_E_INVAL (%s)", paged_client_error(c));

    /* The parent is shard 0 of group "probe": another model instance of the same uid. */
    paged_pool_desc td = rd;
    td.name = "tp";
    td.shards = SHARDS;
    td.group = "probe";
    paged_pool *probe = NULL;
    if (paged_pool_create(c, &td, &probe) != PAGED_OK)
        bail("creating the sharded pool: %s", paged_client_error(c));
    paged_pool_info pi, ri;
    paged_pool_get_info(probe, &pi);
    paged_pool_get_info(ref, &ri);
    ok(pi.shards == SHARDS && pi.shard == 0 && pi.num_kv_heads == SH && pi.kv_head_offset == 0
       && pi.bytes == ri.bytes / SHARDS, "the creator's attachment is shard 0 of 2: %u KV heads from 0, %llu bytes",
       pi.num_kv_heads, (unsigned long long) pi.bytes);
    paged_pool *bad = NULL;
    is_int(PAGED_E_INVAL, paged_pool_attach_shard(c2, "tp", SHARDS, "x", &bad), "shard 2 of 2: PAGED_E_INVAL (%s)",
           paged_client_error(c2));
    is_int(PAGED_E_INVAL, paged_pool_attach_shard(c2, "ref", 1, NULL, &bad),
           "a shard of an unsharded pool: PAGED_E_INVAL (%s)", paged_client_error(c2));
    is_int(PAGED_E_EXIST, paged_pool_attach_shard(c2, "tp", 0, "probe", &bad),
           "shard 0 of group 'probe' a second time: PAGED_E_EXIST (%s)", paged_client_error(c2));

    struct reply rep[SHARDS];
    struct command cmd = { .what = 'A' };
    for (uint32_t r = 0; r < SHARDS; r++) {
        ask(fds[r], &cmd, &rep[r]);
        ok(rep[r].rc == PAGED_OK && rep[r].info.shard == r && rep[r].info.kv_head_offset == r * SH
           && rep[r].info.num_kv_heads == SH && rep[r].info.device == r % ndev,
           "rank %u attached shard %u (KV heads %u to %u) on device %u: %s", r, rep[r].info.shard,
           rep[r].info.kv_head_offset, rep[r].info.kv_head_offset + rep[r].info.num_kv_heads - 1, rep[r].info.device,
           paged_strerror(rep[r].rc));
    }
    cmd.what = 'L';
    ask(fds[0], &cmd, &rep[0]);
    is_int(PAGED_OK, rep[0].rc, "rank 0 allocated %u blocks for the group", NB);
    memcpy(cmd.ids, rep[0].ids, sizeof cmd.ids);
    cmd.what = 'W';
    for (uint32_t r = 0; r < SHARDS; r++) {
        ask(fds[r], &cmd, &rep[r]);
        ok(rep[r].rc == PAGED_OK && rep[r].mem_ok, "rank %u appended its heads into the group's blocks%s (%s)", r,
           host ? ", and its mapped shard holds them at the shard's layout" : "", paged_strerror(rep[r].rc));
    }
    cmd.what = 'D';
    for (uint32_t r = 0; r < SHARDS; r++) {
        ask(fds[r], &cmd, &rep[r]);
        double e = rank_diff(&rep[r].out[0][0][0], &ref_out[0][0][0], r);
        ok(rep[r].rc == PAGED_OK && e <= TOL, "rank %u's decode of query heads %u to %u equals the unsharded "
           "pool's (largest difference %g)", r, r * SQ, r * SQ + SQ - 1, e);
    }

    /* Publishing takes every shard. */
    int32_t found[FULL];
    cmd.what = 'P';
    ask(fds[0], &cmd, &rep[0]);
    is_int(0, rep[0].rc, "rank 0's PUBLISH alone publishes nothing yet");
    is_int(0, paged_lookup(probe, NULL, 0, FULL, tokens, found), "another group finds none of it yet");
    cmd.variant = 1;
    ask(fds[1], &cmd, &rep[1]);
    is_int(PAGED_E_INVAL, rep[1].rc, "rank 1 publishing the blocks under other tokens: PAGED_E_INVAL");
    cmd.variant = 0;
    ask(fds[1], &cmd, &rep[1]);
    is_int((int) FULL, rep[1].rc, "rank 1's PUBLISH completes the prefix: %u blocks published", FULL);
    is_int((int) FULL, paged_lookup(probe, NULL, 0, FULL, tokens, found), "another group's LOOKUP finds them");
    ok(found[0] == cmd.ids[0] && found[1] == cmd.ids[1], "under the same block ids (%d %d)", found[0], found[1]);
    static float probe_out[PL][SQ][PD];
    const int32_t ctx[NB] = { found[0], found[1], 0 };
    rc = decode_layers(probe, ctx, (int32_t) (FULL * PB), 0, SQ, &probe_out[0][0][0]);
    double e = rank_diff(&probe_out[0][0][0], &ref_out32[0][0][0], 0);
    ok(rc == PAGED_OK && e <= TOL, "its shard-0 decode of the published prefix equals the unsharded pool's "
       "(largest difference %g)", e);
    float zeros[SH * PD] = { 0 };
    int32_t slot = cmd.ids[2] * (int32_t) PB + (int32_t) (T % PB);
    is_int(PAGED_E_NOTHELD, append_layer(probe, 0, 1, SH, zeros, zeros, &slot),
           "another group cannot write the group's unpublished block: PAGED_E_NOTHELD");

    /* The group holds its blocks until its last rank goes. */
    cmd.what = 'Q';
    if (xfer(fds[0], &cmd, sizeof cmd, 1) < 0)
        bail("rank 0 did not take 'Q'");
    int st = 0;
    ok(waitpid(pids[0], &st, 0) == pids[0] && WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 0 detached and exited");
    cmd.what = 'D';
    ask(fds[1], &cmd, &rep[1]);
    e = rank_diff(&rep[1].out[0][0][0], &ref_out[0][0][0], 1);
    ok(rep[1].rc == PAGED_OK && e <= TOL, "rank 1 still decodes the group's blocks after rank 0 left (%g)", e);
    cmd.what = 'Q';
    if (xfer(fds[1], &cmd, sizeof cmd, 1) < 0)
        bail("rank 1 did not take 'Q'");
    ok(waitpid(pids[1], &st, 0) == pids[1] && WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 1 detached and exited");
    struct harness_counts n;
    is_int(0, harness_pool_counts(&h, "tp", &n), "the pool's counts after the group left");
    ok(n.referenced == FULL && n.cached == 0 && n.free == PN - FULL, "only the probe's %u looked-up blocks are "
       "referenced, the group's partial block is free (referenced %u, cached %u, free %u)", FULL, n.referenced,
       n.cached, n.free);
    is_int(PAGED_OK, paged_free(probe, FULL, found), "the probe frees its references");
    is_int(0, harness_wait_unreferenced(&h, "tp", &n), "nothing is referenced then");
    ok(n.cached == FULL && n.free == PN - FULL, "the published prefix stays cached (cached %u, free %u)", n.cached,
       n.free);

    for (uint32_t r = 0; r < SHARDS; r++)
        close(fds[r]);
    paged_client_close(c2);
    paged_client_close(c);
    ok(harness_stop(&h) == 0, "pagedd exits 0");
    free(k_all);
    free(v_all);
    free(q_all);
    return 0;
}
