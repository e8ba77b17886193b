/* badinput-t.c: every kind of bad request gets its own error, and nobody else is disturbed. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "lib/core/proto.h"
#include "lib/core/ring.h"
#include "lib/core/sock.h"
#include "lib/core/wake.h"
#include "daemon/engine/validate.h"
#include "tests/service/rawclient.h"
#include "tests/service/proc.h"
#include "tests/tap/basic.h"

/* The pool every case uses: 2 layers, 2 KV heads, head_dim 64, blocks of 16, f32. */
#define L 2
#define H 2
#define D 64
#define B 16
#define N 64
#define QH 4

static struct pagedd daemon_;

/* Correct DECODE outputs the good worker has seen so far, in memory shared with it. */
static _Atomic long *good_checks;

/* What the well-behaved worker reports when it stops. */
struct good_report {
    long checks;
    long mismatches;
    long errors;
    int32_t blocks[5];
};

/* Fills n floats with random values in [-1, 1). */
static void fill_random(tap_rng *rng, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float) tap_rng_uniform(rng, -1.0, 1.0);
}

/*
 * The well-behaved client: owns 5 blocks holding two sequences, then runs DECODE on both
 * layers over and over, comparing each output with pk_ref_decode over a private copy of what
 * it appended, until stop_fd becomes readable. Reports through report_fd and exits.
 */
static void good_worker(int ready_fd, int stop_fd, int report_fd, uint64_t seed)
{
    struct rc_client c;
    struct good_report rep = { 0, 0, 0, { 0 } };
    tap_rng rng;
    tap_rng_seed(&rng, seed ^ 0x600d);
    if (rc_connect(daemon_.socket, "good-worker", 0, &c) != 0
        || rc_pool_attach(&c, "bad", PCORE_ATTACH_WRITE, NULL, NULL) != 0)
        _exit(2);
    uint32_t pool = 0;
    struct pcore_pool_item item;
    if (rc_pool_item(&c, "bad", &item) != 0)
        _exit(3);
    pool = item.id;
    struct pcore_sqe s;
    struct pcore_cqe q;
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_ALLOC;
    s.pool = pool;
    s.tag = 1;
    s.u.alloc.count = 5;
    s.u.alloc.ids_off = rc_alloc(&c, 5 * 4);
    if (rc_call(&c, &s, &q) != 0)
        _exit(4);
    memcpy(rep.blocks, rc_ptr(&c, s.u.alloc.ids_off), sizeof rep.blocks);

    /* Sequence 0: 37 tokens in blocks 0-2; sequence 1: 20 tokens in blocks 3-4. */
    const int lens[2] = { 37, 20 };
    const int ntok = lens[0] + lens[1];
    int32_t bt[2][3] = { { rep.blocks[0], rep.blocks[1], rep.blocks[2] }, { rep.blocks[3], rep.blocks[4], 0 } };
    uint64_t k_off = rc_alloc(&c, (uint64_t) L * ntok * H * D * 4);
    uint64_t v_off = rc_alloc(&c, (uint64_t) L * ntok * H * D * 4);
    uint64_t slots_off = rc_alloc(&c, (uint64_t) ntok * 4);
    int32_t *slots = rc_ptr(&c, slots_off);
    for (int t = 0, i = 0; i < 2; i++)
        for (int p = 0; p < lens[i]; p++, t++)
            slots[t] = bt[i][p / B] * B + p % B;
    fill_random(&rng, rc_ptr(&c, k_off), (size_t) L * ntok * H * D);
    fill_random(&rng, rc_ptr(&c, v_off), (size_t) L * ntok * H * D);
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_APPEND;
    s.flags = PCORE_SQE_ALL_LAYERS;
    s.pool = pool;
    s.tag = 2;
    s.u.append = (struct pcore_req_append) { ntok, PAGED_DTYPE_F32, k_off, v_off, slots_off };
    if (rc_call(&c, &s, &q) != 0)
        _exit(5);

    /* The same writes into a private cache: the oracle. */
    pk_cache ref = { calloc((size_t) L * 2 * N * H * B * D, 4), L, N, H, D, B, PAGED_DTYPE_F32, 1, 1 };
    pk_append_args ap = { .cache = ref, .layer_begin = 0, .num_layers = L, .num_tokens = ntok,
                          .src_dtype = PAGED_DTYPE_F32, .k = rc_ptr(&c, k_off), .v = rc_ptr(&c, v_off),
                          .slot_mapping = slots };
    if (ref.base == NULL || pk_ref_append(&ap) != 0)
        _exit(6);

    uint64_t q_off = rc_alloc(&c, 2 * QH * D * 4), out_off = rc_alloc(&c, 2 * QH * D * 4);
    uint64_t bt_off = rc_alloc(&c, sizeof bt), lens_off = rc_alloc(&c, sizeof lens);
    memcpy(rc_ptr(&c, bt_off), bt, sizeof bt);
    memcpy(rc_ptr(&c, lens_off), lens, sizeof lens);
    float *qv = rc_ptr(&c, q_off), *out = rc_ptr(&c, out_off);
    float expect[2 * QH * D];
    if (write(ready_fd, &rep, sizeof rep) != (ssize_t) sizeof rep)
        _exit(7);
    for (long iter = 0; iter < 1000000; iter++) {
        struct pollfd p = { .fd = stop_fd, .events = POLLIN };
        if (poll(&p, 1, 0) != 0)
            break;
        int layer = (int) (iter & 1);
        fill_random(&rng, qv, 2 * QH * D);
        memset(&s, 0, sizeof s);
        s.opcode = PAGED_OP_DECODE;
        s.pool = pool;
        s.layer = layer;
        s.tag = 1000 + (uint64_t) iter;
        s.u.attn = (struct pcore_req_attn) { .num_seqs = 2, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32,
                                             .bt_stride = 3, .q_off = q_off, .out_off = out_off,
                                             .bt_off = bt_off, .lens_off = lens_off };
        if (rc_call(&c, &s, &q) != 0) {
            rep.errors++;
            continue;
        }
        pk_decode_args da = { .cache = ref, .layer = layer, .num_seqs = 2, .num_q_heads = QH,
                              .q_dtype = PAGED_DTYPE_F32, .q = qv, .out = expect,
                              .block_tables = &bt[0][0], .bt_stride = 3, .seq_lens = lens,
                              .opts = { 1.0f / sqrtf((float) D), 0, 0, NULL } };
        pk_ref_decode(&da);
        rep.checks++;
        int wrong = 0;
        for (int i = 0; i < 2 * QH * D && !wrong; i++)
            wrong = !(fabsf(out[i] - expect[i]) <= 1e-4f + 1e-4f * fabsf(expect[i]));
        if (wrong)
            rep.mismatches++;
        else
            atomic_fetch_add(good_checks, 1);
    }
    if (write(report_fd, &rep, sizeof rep) != (ssize_t) sizeof rep)
        _exit(8);
    rc_close(&c);
    free(ref.base);
    _exit(0);
}

static struct rc_client cb;   /* the misbehaving client */
static uint32_t pool_id;
static int32_t held[4];       /* blocks cb holds */
static struct good_report good;

/* Returns a DECODE of one sequence over held[0..1], 20 tokens, that is valid. */
static struct pcore_sqe valid_decode(void)
{
    static uint64_t q_off, out_off, bt_off, lens_off;
    if (q_off == 0) {
        q_off = rc_alloc(&cb, QH * D * 4);
        out_off = rc_alloc(&cb, QH * D * 4);
        bt_off = rc_alloc(&cb, 2 * 4);
        lens_off = rc_alloc(&cb, 4);
    }
    int32_t bt[2] = { held[0], held[1] }, len = 20;
    memcpy(rc_ptr(&cb, bt_off), bt, sizeof bt);
    memcpy(rc_ptr(&cb, lens_off), &len, 4);
    float *qv = rc_ptr(&cb, q_off);
    for (int i = 0; i < QH * D; i++)
        qv[i] = (float) ((i % 7) - 3) * 0.25f;
    struct pcore_sqe s;
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_DECODE;
    s.pool = pool_id;
    s.layer = 1;
    s.tag = 77;
    s.u.attn = (struct pcore_req_attn) { .num_seqs = 1, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32,
                                         .bt_stride = 2, .q_off = q_off, .out_off = out_off,
                                         .bt_off = bt_off, .lens_off = lens_off };
    return s;
}

/* Returns an APPEND of n tokens into slots (written to the arena), layer 0, valid shape. */
static struct pcore_sqe append_to(const int32_t *slots, uint32_t n)
{
    uint64_t k = rc_alloc(&cb, (uint64_t) n * H * D * 4), v = rc_alloc(&cb, (uint64_t) n * H * D * 4);
    uint64_t so = rc_alloc(&cb, (uint64_t) n * 4);
    memcpy(rc_ptr(&cb, so), slots, (size_t) n * 4);
    for (uint32_t i = 0; i < n * H * D; i++) {
        ((float *) rc_ptr(&cb, k))[i] = 0.5f;
        ((float *) rc_ptr(&cb, v))[i] = -0.5f;
    }
    struct pcore_sqe s;
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_APPEND;
    s.pool = pool_id;
    s.layer = 0;
    s.tag = 88;
    s.u.append = (struct pcore_req_append) { n, PAGED_DTYPE_F32, k, v, so };
    return s;
}

/* Runs one bad request on client c and checks its status and field (and index unless
 * index < 0), then that the daemon still answers a NOP. Returns nothing. */
static void expect_on(struct rc_client *c, const char *what, struct pcore_sqe s, int status,
                      enum pcore_field field, long index)
{
    struct pcore_cqe q;
    int rc = rc_call(c, &s, &q);
    is_int(status, rc, "%s: %s", what, paged_strerror(status));
    is_int(field, q.err_field, "%s: err_field names the field (%d)", what, (int) field);
    if (index >= 0)
        is_int(index, q.err_index, "%s: err_index %ld", what, index);
    is_int(0, rc_nop(c), "%s: daemon still serves (NOP round trip)", what);
}

/* expect_on for the misbehaving client. */
static void expect(const char *what, struct pcore_sqe s, int status, enum pcore_field field, long index)
{
    expect_on(&cb, what, s, status, field, index);
}

/* Runs a simple op that must succeed; returns its CQE count. */
static uint32_t must(const char *what, struct pcore_sqe s)
{
    struct pcore_cqe q;
    int rc = rc_call(&cb, &s, &q);
    if (rc != 0)
        bail("%s failed: %s (field %u index %u)", what, paged_strerror(rc), q.err_field, q.err_index);
    return q.count;
}

/* Checks that the good worker got more correct outputs since the last call, waiting for
 * them (bounded): the other client is served while this one misbehaves. */
static void good_progress(const char *after)
{
    static long last;
    long now = atomic_load(good_checks);
    for (int i = 0; i < 10000 && now <= last + 20; i++) {
        td_pause_ms(1);
        now = atomic_load(good_checks);
    }
    ok(now > last + 20, "after %s the good worker still gets correct DECODE outputs (%ld so far)", after, now);
    last = now;
}

/* The request cases. */
static void request_cases(void)
{
    struct pcore_sqe s;
    expect("valid decode (baseline)", valid_decode(), 0, PCORE_FIELD_NONE, -1);

    s = valid_decode();
    s.opcode = 200;
    expect("unknown opcode 200", s, PAGED_E_OPCODE, PCORE_FIELD_OPCODE, -1);
    s = valid_decode();
    s.opcode = PCORE_OP_COUNT_;
    expect("opcode one past the last", s, PAGED_E_OPCODE, PCORE_FIELD_OPCODE, -1);
    s = valid_decode();
    s.pool = 9999;
    expect("pool 9999 does not exist", s, PAGED_E_NOENT, PCORE_FIELD_POOL, -1);
    s = valid_decode();
    s.layer = L;
    expect("layer 2 of a 2-layer pool", s, PAGED_E_LAYER, PCORE_FIELD_LAYER, -1);
    s = valid_decode();
    s.layer = -1;
    expect("layer -1", s, PAGED_E_LAYER, PCORE_FIELD_LAYER, -1);
    s = valid_decode();
    s.u.attn.q_off = cb.arena_size - 64;
    expect("q runs past the arena end", s, PAGED_E_RANGE, PCORE_FIELD_Q, -1);
    s = valid_decode();
    s.u.attn.q_off = UINT64_MAX - 7;
    expect("q_off = UINT64_MAX - 7 (sum overflows)", s, PAGED_E_RANGE, PCORE_FIELD_Q, -1);
    s = valid_decode();
    s.u.attn.out_off = UINT64_MAX - 8;
    expect("out_off = UINT64_MAX - 8", s, PAGED_E_RANGE, PCORE_FIELD_OUT, -1);
    s = valid_decode();
    s.u.attn.bt_off = UINT64_MAX - 8;
    expect("block table offset UINT64_MAX - 8", s, PAGED_E_RANGE, PCORE_FIELD_BLOCK_TABLE, -1);
    s = valid_decode();
    s.u.attn.lens_off = cb.arena_size - 2;
    expect("seq_lens straddle the arena end", s, PAGED_E_RANGE, PCORE_FIELD_SEQ_LENS, -1);
    s = valid_decode();
    s.u.attn.num_seqs = 0x10000;
    s.u.attn.bt_stride = 0x10000;
    expect("num_seqs * bt_stride beyond every bound", s, PAGED_E_INVAL, PCORE_FIELD_BLOCK_TABLE, -1);
    s = valid_decode();
    s.u.attn.q_off += 2;
    expect("q misaligned for f32", s, PAGED_E_INVAL, PCORE_FIELD_Q, -1);
    s = valid_decode();
    s.u.attn.out_off = s.u.attn.q_off + 64;
    expect("out overlaps q", s, PAGED_E_INVAL, PCORE_FIELD_OUT, -1);

    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_ALLOC;
    s.pool = pool_id;
    s.u.alloc.count = 2;
    s.u.alloc.ids_off = cb.arena_size - 6;
    expect("ALLOC ids past the arena end", s, PAGED_E_RANGE, PCORE_FIELD_IDS, -1);
    s.u.alloc.ids_off = rc_alloc(&cb, 64 * 4);
    s.u.alloc.count = 40;
    expect("ALLOC past --max-blocks-per-client 32", s, PAGED_E_LIMIT, PCORE_FIELD_COUNT, -1);

    /* Block ids in block tables. */
    int32_t bad_bt[2];
    s = valid_decode();
    bad_bt[0] = held[0];
    bad_bt[1] = N;
    memcpy(rc_ptr(&cb, s.u.attn.bt_off), bad_bt, 8);
    expect("block id 64 in a 64-block pool", s, PAGED_E_BLOCK, PCORE_FIELD_BLOCK_TABLE, 1);
    s = valid_decode();
    bad_bt[0] = -3;
    bad_bt[1] = held[1];
    memcpy(rc_ptr(&cb, s.u.attn.bt_off), bad_bt, 8);
    expect("block id -3", s, PAGED_E_BLOCK, PCORE_FIELD_BLOCK_TABLE, 0);
    s = valid_decode();
    bad_bt[0] = held[0];
    bad_bt[1] = good.blocks[2];
    memcpy(rc_ptr(&cb, s.u.attn.bt_off), bad_bt, 8);
    expect("block held by another client", s, PAGED_E_NOTHELD, PCORE_FIELD_BLOCK_TABLE, 1);
    s = valid_decode();
    int32_t len = 2 * B + 1;
    memcpy(rc_ptr(&cb, s.u.attn.lens_off), &len, 4);
    expect("seq_len 33 beyond a 2-block table row", s, PAGED_E_SEQLEN, PCORE_FIELD_SEQ_LENS, 0);
    s = valid_decode();
    len = 0;
    memcpy(rc_ptr(&cb, s.u.attn.lens_off), &len, 4);
    expect("seq_len 0", s, PAGED_E_INVAL, PCORE_FIELD_SEQ_LENS, 0);
    s = valid_decode();
    s.u.attn.num_q_heads = 3;
    expect("3 query heads over 2 KV heads", s, PAGED_E_HEADS, PCORE_FIELD_HEADS, -1);
    s = valid_decode();
    s.u.attn.dtype = PAGED_DTYPE_F16;
    expect("f16 queries on an f32 pool", s, PAGED_E_DTYPE, PCORE_FIELD_DTYPE, -1);
    s = valid_decode();
    s.u.attn.dtype = 9;
    expect("dtype 9", s, PAGED_E_DTYPE, PCORE_FIELD_DTYPE, -1);
    s = valid_decode();
    s.u.attn.attn.window = -1;
    expect("window -1", s, PAGED_E_INVAL, PCORE_FIELD_WINDOW, -1);
    s = valid_decode();
    s.u.attn.attn.sm_scale = NAN;
    expect("NaN softmax scale", s, PAGED_E_INVAL, PCORE_FIELD_SCALE, -1);
    s = valid_decode();
    s.flags = PCORE_SQE_ALL_LAYERS;
    expect("ALL_LAYERS flag on a DECODE", s, PAGED_E_INVAL, PCORE_FIELD_FLAGS, -1);

    /* PREFILL's qo_indptr. */
    s = valid_decode();
    s.opcode = PAGED_OP_PREFILL;
    uint64_t lens2 = rc_alloc(&cb, 8), bt2 = rc_alloc(&cb, 16), qo = rc_alloc(&cb, 12);
    int32_t l2[2] = { 20, 20 }, b2[4] = { held[0], held[1], held[0], held[1] }, qi[3] = { 0, 3, 2 };
    memcpy(rc_ptr(&cb, lens2), l2, 8);
    memcpy(rc_ptr(&cb, bt2), b2, 16);
    memcpy(rc_ptr(&cb, qo), qi, 12);
    s.u.attn.num_seqs = 2;
    s.u.attn.lens_off = lens2;
    s.u.attn.bt_off = bt2;
    s.u.attn.qo_indptr_off = qo;
    expect("PREFILL qo_indptr {0, 3, 2} not monotone", s, PAGED_E_INVAL, PCORE_FIELD_QO_INDPTR, 2);
    qi[0] = 1;
    qi[2] = 4;
    memcpy(rc_ptr(&cb, qo), qi, 12);
    expect("PREFILL qo_indptr starting at 1", s, PAGED_E_INVAL, PCORE_FIELD_QO_INDPTR, 0);
    qi[0] = 0;
    qi[1] = 25;
    qi[2] = 26;
    memcpy(rc_ptr(&cb, qo), qi, 12);
    expect("PREFILL 25 queries in a 20-token sequence", s, PAGED_E_INVAL, PCORE_FIELD_QO_INDPTR, 1);
    qi[1] = 3;
    qi[2] = 5;
    memcpy(rc_ptr(&cb, qo), qi, 12);
    s.u.attn.q_off = s.u.attn.out_off = rc_alloc(&cb, 5 * QH * D * 4);
    s.u.attn.out_off = rc_alloc(&cb, 5 * QH * D * 4);
    expect("PREFILL valid (baseline)", s, 0, PCORE_FIELD_NONE, -1);

    /* FREE and slots. */
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_FREE;
    s.pool = pool_id;
    s.u.blocks.count = 1;
    s.u.blocks.ids_off = rc_alloc(&cb, 4);
    memcpy(rc_ptr(&cb, s.u.blocks.ids_off), &good.blocks[0], 4);
    expect("FREE a block another client holds", s, PAGED_E_NOTHELD, PCORE_FIELD_IDS, 0);

    int32_t slots[3] = { held[0] * B, held[0] * B + 1, good.blocks[1] * B + 3 };
    expect("APPEND into a block another client holds", append_to(slots, 3), PAGED_E_NOTHELD,
           PCORE_FIELD_SLOTS, 2);
    slots[2] = N * B;
    expect("APPEND slot beyond the pool", append_to(slots, 3), PAGED_E_BLOCK, PCORE_FIELD_SLOTS, 2);
    slots[2] = held[0] * B + 1;
    expect("APPEND the same slot twice", append_to(slots, 3), PAGED_E_INVAL, PCORE_FIELD_SLOTS, 2);
    slots[2] = -1;
    expect("APPEND with a skipped slot (baseline)", append_to(slots, 3), 0, PCORE_FIELD_NONE, -1);
    s = append_to(slots, 3);
    s.u.append.dtype = PAGED_DTYPE_BF16;
    expect("APPEND bf16 into an f32 pool", s, PAGED_E_DTYPE, PCORE_FIELD_DTYPE, -1);
    s = append_to(slots, 3);
    s.u.append.k_off = UINT64_MAX - 8;
    expect("APPEND k_off = UINT64_MAX - 8", s, PAGED_E_RANGE, PCORE_FIELD_K, -1);

    /* A forked block is shared: no writes in place. */
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_FORK;
    s.pool = pool_id;
    s.u.blocks.count = 1;
    s.u.blocks.ids_off = rc_alloc(&cb, 4);
    memcpy(rc_ptr(&cb, s.u.blocks.ids_off), &held[2], 4);
    must("FORK", s);
    int32_t fslot[1] = { held[2] * B + 5 };
    expect("APPEND into a forked (shared) block", append_to(fslot, 1), PAGED_E_READONLY,
           PCORE_FIELD_SLOTS, 0);
    s.opcode = PAGED_OP_FREE;
    must("FREE one reference", s);

    /* A published block is immutable. */
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_PUBLISH;
    s.pool = pool_id;
    s.u.prefix.num_blocks = 1;
    s.u.prefix.tokens_off = rc_alloc(&cb, B * 4);
    s.u.prefix.ids_off = rc_alloc(&cb, 4);
    for (int i = 0; i < B; i++)
        ((int32_t *) rc_ptr(&cb, s.u.prefix.tokens_off))[i] = 1000 + i;
    memcpy(rc_ptr(&cb, s.u.prefix.ids_off), &held[3], 4);
    must("PUBLISH", s);
    int32_t pslot[1] = { held[3] * B + 2 };
    expect("APPEND into a published block", append_to(pslot, 1), PAGED_E_READONLY, PCORE_FIELD_SLOTS, 0);

    /* COPY onto itself. */
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_COPY;
    s.pool = pool_id;
    s.u.copy.count = 1;
    s.u.copy.src_off = rc_alloc(&cb, 4);
    s.u.copy.dst_off = rc_alloc(&cb, 4);
    memcpy(rc_ptr(&cb, s.u.copy.src_off), &held[0], 4);
    memcpy(rc_ptr(&cb, s.u.copy.dst_off), &held[0], 4);
    expect("COPY a block onto itself", s, PAGED_E_INVAL, PCORE_FIELD_DST, 0);
    memcpy(rc_ptr(&cb, s.u.copy.dst_off), &held[3], 4);
    expect("COPY onto a published block", s, PAGED_E_READONLY, PCORE_FIELD_DST, 0);
    s.u.copy.count = 2;
    s.u.copy.src_off = rc_alloc(&cb, 8);
    s.u.copy.dst_off = rc_alloc(&cb, 8);
    int32_t csrc[2] = { held[0], held[2] }, cdst[2] = { held[1], held[1] };
    memcpy(rc_ptr(&cb, s.u.copy.src_off), csrc, 8);
    memcpy(rc_ptr(&cb, s.u.copy.dst_off), cdst, 8);
    expect("COPY two sources onto one destination", s, PAGED_E_INVAL, PCORE_FIELD_DST, 1);
    s.u.copy.count = PV_MAX_BLOCKS + 1;
    expect("COPY of 2^20 + 1 blocks", s, PAGED_E_INVAL, PCORE_FIELD_COUNT, -1);

    /* Counts past the daemon's bounds, before any array is read. */
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_ALLOC;
    s.pool = pool_id;
    s.u.alloc.count = PV_MAX_BLOCKS + 1;
    expect("ALLOC of 2^20 + 1 blocks", s, PAGED_E_INVAL, PCORE_FIELD_COUNT, -1);
    s.opcode = PAGED_OP_FREE;
    s.u.blocks.count = PV_MAX_BLOCKS + 1;
    expect("FREE of 2^20 + 1 blocks", s, PAGED_E_INVAL, PCORE_FIELD_COUNT, -1);
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_PUBLISH;
    s.pool = pool_id;
    s.u.prefix.num_blocks = PV_MAX_BLOCKS + 1;
    expect("PUBLISH of 2^20 + 1 blocks", s, PAGED_E_INVAL, PCORE_FIELD_COUNT, -1);
    s = valid_decode();
    s.u.attn.num_seqs = PV_MAX_SEQS + 1;
    s.u.attn.bt_stride = 1;
    expect("DECODE of 2^16 + 1 sequences", s, PAGED_E_INVAL, PCORE_FIELD_COUNT, -1);

    /* The rest of a DECODE's and an APPEND's fields. */
    s = valid_decode();
    s.u.attn.out_off += 2;
    expect("out misaligned for f32", s, PAGED_E_INVAL, PCORE_FIELD_OUT, -1);
    s = valid_decode();
    s.u.attn.attn.has_alibi = 1;
    s.u.attn.attn.alibi_off = rc_alloc(&cb, QH * 4);
    float slopes[QH] = { 0.5f, 0.25f, INFINITY, 0.125f };
    memcpy(rc_ptr(&cb, s.u.attn.attn.alibi_off), slopes, sizeof slopes);
    expect("an infinite ALiBi slope for head 2", s, PAGED_E_INVAL, PCORE_FIELD_ALIBI, 2);
    slopes[2] = 0.0625f;
    memcpy(rc_ptr(&cb, s.u.attn.attn.alibi_off), slopes, sizeof slopes);
    expect("finite ALiBi slopes (baseline)", s, 0, PCORE_FIELD_NONE, -1);
    int32_t aslot[1] = { held[0] * B + 4 };
    s = append_to(aslot, 1);
    s.layer = L;
    expect("APPEND into layer 2 of a 2-layer pool", s, PAGED_E_LAYER, PCORE_FIELD_LAYER, -1);
    s = append_to(aslot, 1);
    s.u.append.k_off += 2;
    expect("APPEND k misaligned for f32", s, PAGED_E_INVAL, PCORE_FIELD_K, -1);
    s = append_to(aslot, 1);
    s.u.append.v_off += 2;
    expect("APPEND v misaligned for f32", s, PAGED_E_INVAL, PCORE_FIELD_V, -1);
    s = append_to(aslot, 1);
    s.u.append.num_tokens = PV_MAX_TOKENS + 1;
    expect("APPEND of 2^20 + 1 tokens", s, PAGED_E_INVAL, PCORE_FIELD_COUNT, -1);

    /* Dependency words: only on the backend's ops, aligned, inside the arena. */
    uint64_t word = rc_alloc(&cb, 8);
    s = valid_decode();
    s.flags = PCORE_SQE_WAIT;
    s.dep.wait_off = word + 2;
    expect("DECODE waiting on a misaligned word", s, PAGED_E_INVAL, PCORE_FIELD_WAIT, -1);
    s.dep.wait_off = cb.arena_size;
    expect("DECODE waiting on a word past the arena", s, PAGED_E_RANGE, PCORE_FIELD_WAIT, -1);
    s = valid_decode();
    s.flags = PCORE_SQE_SIGNAL;
    s.dep.signal_off = word + 1;
    expect("DECODE signalling a misaligned word", s, PAGED_E_INVAL, PCORE_FIELD_SIGNAL, -1);
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_NOP;
    s.flags = PCORE_SQE_SIGNAL;
    s.dep.signal_off = word;
    expect("a NOP with a signal word", s, PAGED_E_INVAL, PCORE_FIELD_FLAGS, -1);
    s = valid_decode();
    s.flags = PCORE_SQE_HOST_WORDS;
    expect("HOST_WORDS without WAIT or SIGNAL", s, PAGED_E_INVAL, PCORE_FIELD_FLAGS, -1);
}

/* Write ops through a read-only attachment. */
static void readonly_cases(void)
{
    struct rc_client c;
    struct pcore_msg_pool_reply r;
    int fd = -1;
    if (rc_connect(daemon_.socket, "reader", 0, &c) != 0)
        bail("reader cannot connect: %s", c.errmsg);
    is_int(0, rc_pool_attach(&c, "bad", 0, &r, &fd), "read-only attach succeeds");
    is_int(0, (int) r.writable, "read-only attach: reply says not writable");
    ok(fd < 0 && r.mem_kind == PCORE_MEM_NONE, "read-only attach: no descriptor of the pool came (0666: sealed)");
    if (fd >= 0)
        close(fd);
    struct pcore_sqe s;
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_ALLOC;
    s.pool = r.pool_id;
    s.u.alloc.count = 1;
    s.u.alloc.ids_off = rc_alloc(&c, 4);
    expect_on(&c, "ALLOC on a read-only attachment", s, PAGED_E_READONLY, PCORE_FIELD_POOL, -1);
    s.opcode = PAGED_OP_APPEND;
    expect_on(&c, "APPEND on a read-only attachment", s, PAGED_E_READONLY, PCORE_FIELD_POOL, -1);
    s.opcode = PAGED_OP_COPY;
    expect_on(&c, "COPY on a read-only attachment", s, PAGED_E_READONLY, PCORE_FIELD_POOL, -1);
    rc_close(&c);
}

/* Refused HELLOs. */
static void hello_cases(void)
{
    char msg[PCORE_ERRMSG_MAX];
    int closed;
    unsigned char garbage[96];
    tap_rng rng;
    tap_rng_seed(&rng, 42);
    for (size_t i = 0; i < sizeof garbage; i++)
        garbage[i] = (unsigned char) tap_rng_below(&rng, 256);
    struct pcore_msg_hdr gh = { PCORE_MSG_HELLO, 1, 0, sizeof garbage };
    memcpy(garbage, &gh, sizeof gh);
    is_int(PAGED_E_PROTO, rc_raw_hello(daemon_.socket, garbage, sizeof garbage, msg, &closed),
           "garbage HELLO: PAGED_E_PROTO");
    ok(closed, "garbage HELLO: connection closed (%s)", msg);
    struct pcore_msg_hello h;
    rc_fill_hello(&h, "truncated", 0);
    is_int(PAGED_E_PROTO, rc_raw_hello(daemon_.socket, &h, 20, msg, &closed), "truncated HELLO: PAGED_E_PROTO");
    ok(closed, "truncated HELLO: connection closed (%s)", msg);
    is_int(PAGED_E_PROTO, rc_raw_hello(daemon_.socket, &h, sizeof h - 4, msg, &closed),
           "HELLO 4 bytes short: PAGED_E_PROTO");
    rc_fill_hello(&h, "old", 0);
    h.version = 99;
    is_int(PAGED_E_VERSION, rc_raw_hello(daemon_.socket, &h, sizeof h, msg, &closed),
           "protocol version 99: PAGED_E_VERSION");
    char mine[32];
    snprintf(mine, sizeof mine, "version %u", PCORE_PROTO_VERSION);
    ok(closed && strstr(msg, "99") != NULL && strstr(msg, mine) != NULL,
       "version error names both versions and closes: %s", msg);
    rc_fill_hello(&h, "device", 0);
    h.device = 7;
    is_int(PAGED_E_INVAL, rc_raw_hello(daemon_.socket, &h, sizeof h, msg, &closed),
           "HELLO asking for device 7 of one: PAGED_E_INVAL");
    ok(closed && strstr(msg, "device 7") != NULL, "and the refusal names the device: %s", msg);
    rc_fill_hello(&h, "type", 0);
    h.hdr.type = PCORE_MSG_STATUS;
    is_int(PAGED_E_PROTO, rc_raw_hello(daemon_.socket, &h, sizeof h, msg, &closed),
           "STATUS before HELLO: PAGED_E_PROTO");
    rc_fill_hello(&h, "name", 0);
    memset(h.name, 'x', sizeof h.name);
    is_int(PAGED_E_PROTO, rc_raw_hello(daemon_.socket, &h, sizeof h, msg, &closed),
           "HELLO name without NUL: PAGED_E_PROTO");
    rc_fill_hello(&h, "inspect", PCORE_HELLO_INSPECT);
    is_int(PAGED_E_PROTO, rc_raw_hello(daemon_.socket, &h, sizeof h, msg, &closed),
           "HELLO flag INSPECT without CONTROL: PAGED_E_PROTO");
    ok(closed && strstr(msg, "INSPECT without CONTROL") != NULL, "and the refusal says so: %s", msg);
    rc_fill_hello(&h, "inspect", PCORE_HELLO_CONTROL | PCORE_HELLO_INSPECT);
    is_int(1, rc_raw_hello(daemon_.socket, &h, sizeof h, msg, &closed), "HELLO CONTROL | INSPECT gets WELCOME");
    rc_fill_hello(&h, "ok", 0);
    is_int(1, rc_raw_hello(daemon_.socket, &h, sizeof h, msg, &closed), "a valid HELLO still gets WELCOME");
    is_int(0, rc_nop(&cb), "after refused HELLOs the daemon still serves");
}

/* Returns whether x is a power of two. */
static int pow2(uint32_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

/*
 * HELLOs asking for any channel geometry (zero, not a power of two, too small, too large,
 * fewer completions than submissions): each gets a WELCOME with the geometry clamped as
 * paged(7) says (8 to 4096 entries, powers of two, at least as many completions as
 * submissions; a host arena of 64 KiB to 1 GiB, whole pages; 0 asks for the defaults), and a
 * channel that works. Returns nothing.
 */
static void hello_geometry_cases(void)
{
    static const struct { uint32_t sq, cq; uint64_t arena; uint32_t want_sq, want_cq; uint64_t want_arena; } g[] = {
        { 0, 0, 0, 256, 512, 64u << 20 },
        { 3, 1, 1, 8, 8, 64u << 10 },
        { 100, 50, 100000, 128, 128, 100000 + 4096 - 100000 % 4096 },
        { 1u << 20, 0xffffffffu, 1ull << 40, 4096, 4096, 1u << 30 },
        { 4096, 8, 64u << 10, 4096, 4096, 64u << 10 },
        { 9, 17, (64u << 10) - 1, 16, 32, 64u << 10 },
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        struct pcore_msg_hello h;
        rc_fill_hello(&h, "geometry", 0);
        h.sq_entries = g[i].sq;
        h.cq_entries = g[i].cq;
        h.host_arena_size = g[i].arena;
        struct rc_client c;
        int rc = rc_connect_hello(daemon_.socket, &h, &c);
        is_int(0, rc, "HELLO sq %u cq %u arena %llu: WELCOME (%s)", g[i].sq, g[i].cq,
               (unsigned long long) g[i].arena, c.errmsg);
        if (rc != 0) {
            rc_close(&c);
            continue;
        }
        ok(c.hdr.sq_entries == g[i].want_sq && c.hdr.cq_entries == g[i].want_cq && c.hdr.arena_size == g[i].want_arena,
           "HELLO sq %u cq %u arena %llu: clamped to sq %u cq %u arena %llu (want %u, %u, %llu)", g[i].sq, g[i].cq,
           (unsigned long long) g[i].arena, c.hdr.sq_entries, c.hdr.cq_entries, (unsigned long long) c.hdr.arena_size,
           g[i].want_sq, g[i].want_cq, (unsigned long long) g[i].want_arena);
        ok(pow2(c.hdr.sq_entries) && pow2(c.hdr.cq_entries) && c.hdr.cq_entries >= c.hdr.sq_entries
               && c.hdr.sq_entries >= 8 && c.hdr.cq_entries <= 4096 && c.hdr.arena_size % 4096 == 0,
           "HELLO sq %u cq %u arena %llu: a geometry paged(7) allows", g[i].sq, g[i].cq,
           (unsigned long long) g[i].arena);
        is_int(0, rc_nop(&c), "HELLO sq %u cq %u arena %llu: the channel serves a NOP", g[i].sq, g[i].cq,
               (unsigned long long) g[i].arena);
        rc_close(&c);
    }
}

/* Malformed control messages on a live connection: an error each, and it goes on. */
static void control_cases(void)
{
    unsigned char buf[512];
    struct pcore_msg_pool_attach a;
    memset(&a, 0, sizeof a);
    a.hdr.type = PCORE_MSG_POOL_ATTACH;
    a.hdr.len = sizeof a - 8;
    snprintf(a.name, sizeof a.name, "bad");
    is_int(PAGED_E_PROTO, (int) rc_control(&cb, &a, sizeof a - 8, buf, sizeof buf, NULL),
           "POOL_ATTACH 8 bytes short: PAGED_E_PROTO");
    ok(strstr(cb.errmsg, "POOL_ATTACH") != NULL, "error names the message: %s", cb.errmsg);
    a.hdr.len = sizeof a + 4;
    is_int(PAGED_E_PROTO, (int) rc_control(&cb, &a, sizeof a, buf, sizeof buf, NULL),
           "header length disagrees with the packet: PAGED_E_PROTO");
    struct pcore_msg_hdr h = { 77, 0, 0, sizeof h };
    is_int(PAGED_E_PROTO, (int) rc_control(&cb, &h, sizeof h, buf, sizeof buf, NULL),
           "unknown message type 77: PAGED_E_PROTO");
    a.hdr.len = sizeof a;
    memset(a.name, 'a', sizeof a.name);
    is_int(PAGED_E_INVAL, (int) rc_control(&cb, &a, sizeof a, buf, sizeof buf, NULL),
           "pool name without NUL: PAGED_E_INVAL");
    snprintf(a.name, sizeof a.name, "no/such");
    is_int(PAGED_E_INVAL, (int) rc_control(&cb, &a, sizeof a, buf, sizeof buf, NULL),
           "pool name with '/': PAGED_E_INVAL");
    snprintf(a.name, sizeof a.name, "nosuch");
    is_int(PAGED_E_NOENT, (int) rc_control(&cb, &a, sizeof a, buf, sizeof buf, NULL),
           "attach to a pool that does not exist: PAGED_E_NOENT");
    struct pcore_msg_pool_reply r;
    is_int(PAGED_E_GEOMETRY, rc_pool_create(&cb, "odd", 1, 1, 100, 16, PAGED_DTYPE_F16, 8, 0600, 0, &r, NULL),
           "pool with head_dim 100: PAGED_E_GEOMETRY");
    ok(strstr(cb.errmsg, "head_dim 100") != NULL, "error names head_dim and its value: %s", cb.errmsg);
    is_int(PAGED_E_DTYPE, rc_pool_create(&cb, "odd", 1, 1, 64, 16, 11, 8, 0600, 0, &r, NULL),
           "pool with dtype 11: PAGED_E_DTYPE");
    is_int(PAGED_E_GEOMETRY, rc_pool_create(&cb, "odd", 1, 1, 64, 16, PAGED_DTYPE_F16, 0x7fffffffu, 0600, 0, &r, NULL),
           "pool whose slots overflow int32: PAGED_E_GEOMETRY");
    is_int(PAGED_E_EXIST, rc_pool_create(&cb, "bad", 1, 1, 64, 16, PAGED_DTYPE_F16, 8, 0600, 0, &r, NULL),
           "second pool named 'bad': PAGED_E_EXIST");
    is_int(0, rc_nop(&cb), "after malformed control messages the daemon still serves");
}

/* Sends len bytes of msg with n descriptors (as many as the caller likes: pcore_sock_send would
 * refuse more than PSOCK_MAX_FDS). Returns 0 or -1. */
static int send_fds(int sock, const void *msg, size_t len, const int *fds, int n)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * 16)];
    } ctl;
    if (n > 16)
        return -1;
    struct iovec iov = { .iov_base = (void *) msg, .iov_len = len };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                         .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t) n) };
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t) n);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t) n);
    return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t) len ? 0 : -1;
}

/* Waits up to 10 s for one packet on sock; stores an ERROR's status and text in *e (status 1
 * for anything else). Returns the packet's length or a negative paged_error
 * (PAGED_E_DISCONNECTED at end of stream). */
static long read_packet(int sock, struct pcore_msg_error *e)
{
    static unsigned char buf[PCORE_MSG_MAX];
    memset(e, 0, sizeof *e);
    e->hdr.status = 1;
    int rc = pcore_sock_wait_readable(sock, 10000);
    if (rc < 0)
        return rc;
    int nfds = 0;
    long n = pcore_sock_recv(sock, buf, sizeof buf, NULL, 0, &nfds);
    if (n >= (long) sizeof *e && ((struct pcore_msg_hdr *) buf)->type == PCORE_MSG_ERROR) {
        memcpy(e, buf, sizeof *e);
        e->message[sizeof e->message - 1] = '\0';
    }
    return n;
}

/*
 * What the socket itself can carry that no message should: descriptors with a HELLO (refused,
 * closed) or with a control message (an error, dropped, the connection goes on, the daemon
 * keeps none of them), a packet longer than any message (an error, the connection goes on),
 * and more connections that never say HELLO than the daemon waits for (the extra ones are
 * closed; once they go, a real client is served). Returns nothing.
 */
static void transport_cases(void)
{
    int p[2];
    if (pipe(p) != 0)
        sysbail("pipe");
    struct pcore_msg_error e;
    struct pcore_msg_hello h;
    rc_fill_hello(&h, "with-fd", 0);
    int sock = pcore_sock_connect(daemon_.socket);
    if (sock < 0)
        bail("connect: %s", paged_strerror(sock));
    is_int(0, send_fds(sock, &h, sizeof h, &p[0], 1), "a HELLO carrying a descriptor is sent");
    read_packet(sock, &e);
    ok(e.hdr.status == PAGED_E_PROTO && strstr(e.message, "descriptors") != NULL,
       "HELLO with a descriptor: PAGED_E_PROTO naming descriptors (%s)", e.message);
    is_int(PAGED_E_DISCONNECTED, read_packet(sock, &e), "and the connection is closed");
    close(sock);

    struct rc_client c;
    if (rc_connect(daemon_.socket, "fd-sender", PCORE_HELLO_CONTROL, &c) != 0)
        bail("control connection failed: %s", c.errmsg);
    int before = td_fd_count(daemon_.pid);
    struct pcore_msg_hdr st = { PCORE_MSG_STATUS, 7, 0, sizeof st };
    /* One descriptor, or more than any message could carry (PSOCK_MAX_FDS): ten each. */
    int many[PSOCK_MAX_FDS + 1];
    for (int i = 0; i < PSOCK_MAX_FDS + 1; i++)
        many[i] = p[i % 2];
    int errors = 0, named = 0;
    for (int i = 0; i < 20; i++) {
        if (send_fds(c.sock, &st, sizeof st, many, i < 10 ? 1 : PSOCK_MAX_FDS + 1) != 0)
            break;
        read_packet(c.sock, &e);
        errors += e.hdr.status == PAGED_E_PROTO;
        named += strstr(e.message, "descriptors") != NULL;
    }
    is_int(20, errors, "20 control messages carrying 1 or %d descriptors: PAGED_E_PROTO each", PSOCK_MAX_FDS + 1);
    is_int(20, named, "each error names the descriptors");
    struct pcore_msg_status_reply sr;
    ok(rc_control(&c, &st, sizeof st, &sr, sizeof sr, NULL) > 0, "the connection then answers STATUS");
    int after = td_fd_count(daemon_.pid);
    ok(before > 0 && after == before, "the daemon kept none of the 100 descriptors (%d open before, %d after)", before,
       after);
    size_t big_len = PCORE_MSG_MAX + 4096;
    unsigned char *big = bcalloc(1, big_len);
    struct pcore_msg_hdr bh = { PCORE_MSG_STATUS, 8, 0, (uint32_t) big_len };
    memcpy(big, &bh, sizeof bh);
    is_int(0, pcore_sock_send(c.sock, big, big_len, NULL, 0), "a packet of %zu bytes is sent", big_len);
    free(big);
    read_packet(c.sock, &e);
    ok(e.hdr.status == PAGED_E_PROTO && strstr(e.message, "longer than") != NULL,
       "a packet longer than any message: PAGED_E_PROTO (%s)", e.message);
    ok(rc_control(&c, &st, sizeof st, &sr, sizeof sr, NULL) > 0, "and the connection answers STATUS after it");
    rc_close(&c);
    close(p[0]);
    close(p[1]);

    /* More silent connections than the daemon waits for: 256 of all uids (server.c) and the
     * 8 more kept for root and the daemon's uid, which this test's is, stay until the hello
     * timeout; each one past them is refused at once: PAGED_E_LIMIT naming the bound, then
     * the close. */
    enum { SILENT = 300, KEPT = 256 + 8 };
    int socks[SILENT], opened = 0;
    for (int i = 0; i < SILENT; i++) {
        socks[i] = pcore_sock_connect(daemon_.socket);
        opened += socks[i] >= 0;
    }
    is_int(SILENT, opened, "%d connections that say nothing are opened", SILENT);
    int refused = 0, bound_named = 0, waiting = 0;
    for (int i = 0; i < SILENT; i++) {
        if (socks[i] < 0)
            continue;
        if (i < KEPT) {
            struct pollfd pf = { .fd = socks[i], .events = POLLIN };
            waiting += poll(&pf, 1, 0) == 0;
            continue;
        }
        read_packet(socks[i], &e);
        bound_named += strstr(e.message, "the bound of 256 and the 8 kept for root") != NULL;
        refused += e.hdr.status == PAGED_E_LIMIT && read_packet(socks[i], &e) == PAGED_E_DISCONNECTED;
    }
    is_int(SILENT - KEPT, refused, "the %d past the %d kept get PAGED_E_LIMIT, then the close", SILENT - KEPT, KEPT);
    is_int(SILENT - KEPT, bound_named, "each refusal names the bound");
    is_int(KEPT, waiting, "the %d kept wait for their HELLO", KEPT);
    for (int i = 0; i < SILENT; i++)
        if (socks[i] >= 0)
            close(socks[i]);
    /* The daemon learns of the closes in its own time: a connection it drops meanwhile ends at
     * once (a refused HELLO), so trying again is bounded by the tries, not by a sleep. */
    struct rc_client late;
    int rc = PAGED_E_DISCONNECTED, tries = 0;
    for (; tries < 10000 && rc != 0; tries++) {
        rc = rc_connect(daemon_.socket, "after-the-flood", 0, &late);
        if (rc != 0)
            rc_close(&late);
    }
    is_int(0, rc, "once they are gone a client connects (try %d; %s)", tries, late.errmsg);
    if (rc == 0)
        is_int(0, rc_nop(&late), "and is served");
    rc_close(&late);
}

/* The condition for pcore_wake_wait: ring arg holds 8 entries. Returns 1, 0, or PAGED_E_RING. */
static int eight_ready(void *arg)
{
    int n = pcore_ring_cons_available(arg, 8);
    return n < 0 ? n : n >= 8;
}

/*
 * A client that stops reaping: once its completion ring is full the daemon takes no more of
 * its requests (they wait in its submission ring) and serves everyone else; as soon as the
 * client reaps, it goes on, and every request completes once, in order. Returns nothing.
 */
static void backpressure_case(void)
{
    struct pcore_msg_hello h;
    rc_fill_hello(&h, "no-reaper", 0);
    h.sq_entries = 8;
    h.cq_entries = 8;
    struct rc_client c;
    if (rc_connect_hello(daemon_.socket, &h, &c) != 0)
        bail("no-reaper cannot connect: %s", c.errmsg);
    struct pcore_sqe s;
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_NOP;
    int sent = 0;
    for (uint64_t t = 1; t <= 8; t++) {
        s.tag = t;
        sent += rc_submit(&c, &s) == 0;
    }
    /* All eight completions in its ring, none reaped (the daemon wakes us as it posts). */
    int ready = pcore_wake_wait(&c.cq, c.cq_wait, NULL, 10000, eight_ready, &c.cq);
    if (ready > 0)
        ready = pcore_ring_cons_available(&c.cq, 8);
    is_int(8, ready, "8 NOPs fill the 8-entry completion ring of a client that does not reap");
    for (uint64_t t = 9; t <= 16; t++) {
        s.tag = t;
        sent += rc_submit(&c, &s) == 0;
    }
    is_int(16, sent, "8 more NOPs go into its submission ring");
    is_int(0, rc_nop(&cb), "meanwhile another client is served");
    is_int(0, rc_nop(&cb), "and again");
    struct pcore_ring_ctl *sq_ctl = (struct pcore_ring_ctl *) ((unsigned char *) c.map + c.hdr.sq_ctl_off);
    uint32_t head = atomic_load_explicit(pcore_ring_word(&sq_ctl->head), memory_order_acquire);
    is_int(8, head, "the daemon took none of the 8 waiting requests (its submission head is at %u)", head);
    int in_order = 0, fine = 0;
    for (uint64_t t = 1; t <= 16; t++) {
        struct pcore_cqe q;
        if (rc_reap(&c, &q, 10000) != 1)
            break;
        in_order += q.tag == t;
        fine += q.status == PAGED_OK;
    }
    is_int(16, in_order, "once it reaps, all 16 complete, in order");
    is_int(16, fine, "each of them OK");
    struct pcore_cqe extra;
    is_int(PAGED_E_TIMEOUT, rc_reap(&c, &extra, 50), "and nothing more comes");
    rc_close(&c);
}

/* A ring tail that jumps past capacity: that client goes, nobody else notices. */
static void ring_case(void)
{
    struct rc_client d;
    if (rc_connect(daemon_.socket, "ring-breaker", 0, &d) != 0)
        bail("ring-breaker cannot connect");
    struct pcore_ring_ctl *ctl = (struct pcore_ring_ctl *) ((unsigned char *) d.map + d.hdr.sq_ctl_off);
    uint32_t head = atomic_load_explicit(pcore_ring_word(&ctl->head), memory_order_acquire);
    atomic_store_explicit(pcore_ring_word(&ctl->tail), head + d.hdr.sq_entries + 5, memory_order_release);
    uint64_t one = 1;
    if (write(d.sq_notify, &one, sizeof one) < 0)
        diag("wake-up write failed");
    struct pcore_msg_error e;
    memset(&e, 0, sizeof e);
    is_int(1, rc_wait_msg(&d, PCORE_MSG_ERROR, 10000, &e, sizeof e), "corrupt ring: the client gets an ERROR");
    is_int(PAGED_E_RING, e.hdr.status, "corrupt ring: its status is PAGED_E_RING");
    is_int(PAGED_E_DISCONNECTED, rc_wait_msg(&d, PCORE_MSG_ERROR, 10000, NULL, 0),
           "corrupt ring: then the daemon closes the connection");
    ok(pagedd_log_wait(&daemon_, "PAGED_E_RING", 5000), "corrupt ring: the daemon logs PAGED_E_RING");
    rc_close(&d);
    is_int(0, rc_nop(&cb), "after a corrupt ring other clients are served");
}

/* Runs every case against a real daemon; returns 0 (TAP reports the results). */
int main(void)
{
    uint64_t seed = tap_seed();
    plan_lazy();
    good_checks = mmap(NULL, sizeof *good_checks, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (good_checks == MAP_FAILED)
        sysbail("mmap");
    const char *args[] = { "--max-blocks-per-client=32", "--log-level=debug", NULL };
    int st;
    if (pagedd_start(&daemon_, args, NULL, &st) != 0)
        bail("pagedd did not start (status %d): see its log", st);

    if (rc_connect(daemon_.socket, "bad-client", 0, &cb) != 0)
        bail("cannot connect: %s", cb.errmsg);
    struct pcore_msg_pool_reply r;
    int fd = -1;
    if (rc_pool_create(&cb, "bad", L, H, D, B, PAGED_DTYPE_F32, N, 0666, PCORE_ATTACH_WRITE, &r, &fd) != 0)
        bail("cannot create the pool: %s", cb.errmsg);
    if (fd >= 0)
        close(fd);
    pool_id = r.pool_id;

    int ready[2], stop[2], report[2];
    if (pipe(ready) < 0 || pipe(stop) < 0 || pipe(report) < 0)
        sysbail("pipe");
    pid_t pid = bfork();
    if (pid == 0) {
        close(cb.sock);
        good_worker(ready[1], stop[0], report[1], seed);
    }
    close(ready[1]);
    close(stop[0]);
    close(report[1]);
    struct pollfd p = { .fd = ready[0], .events = POLLIN };
    if (poll(&p, 1, 30000) <= 0 || read(ready[0], &good, sizeof good) != (ssize_t) sizeof good)
        bail("the good worker did not get ready");

    struct pcore_sqe s;
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_ALLOC;
    s.pool = pool_id;
    s.u.alloc.count = 4;
    s.u.alloc.ids_off = rc_alloc(&cb, 16);
    must("ALLOC", s);
    memcpy(held, rc_ptr(&cb, s.u.alloc.ids_off), sizeof held);

    good_progress("its setup");
    request_cases();
    good_progress("the bad requests");
    readonly_cases();
    good_progress("the read-only cases");
    control_cases();
    good_progress("the malformed control messages");
    hello_cases();
    hello_geometry_cases();
    good_progress("the refused HELLOs");
    transport_cases();
    good_progress("the descriptors, the long packet and the silent connections");
    backpressure_case();
    good_progress("the client that stopped reaping");
    ring_case();
    good_progress("the corrupt ring");

    if (write(stop[1], "x", 1) != 1)
        sysbail("stop");
    struct good_report rep;
    memset(&rep, 0, sizeof rep);
    p.fd = report[0];
    int got = poll(&p, 1, 30000) > 0 && read(report[0], &rep, sizeof rep) == (ssize_t) sizeof rep;
    ok(got, "the good worker reported");
    ok(rep.checks > 0, "the good worker checked %ld DECODE outputs meanwhile", rep.checks);
    is_int(0, rep.mismatches, "the good worker saw no wrong DECODE output");
    is_int(0, rep.errors, "the good worker saw no failed request");
    int wst;
    waitpid(pid, &wst, 0);
    ok(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "the good worker exited cleanly");

    rc_close(&cb);
    st = pagedd_stop(&daemon_);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exited cleanly on SIGTERM (status %d)", st);
    pagedd_cleanup(&daemon_);
    return 0;
}
