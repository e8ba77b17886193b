/* fuse-t.c: pf_plan: when a batch's APPEND launch may ride in its DECODE launch's kernel, and when not. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/engine/fuse.h"
#include "daemon/engine/validate.h"
#include "tests/tap/basic.h"

#define MAXC 4                     /* clients (one APPEND and one DECODE each) */
#define NSEQ 3                     /* sequences per DECODE */
#define STRIDE 4                   /* block-table entries per row */
#define BLOCK 16
#define NBLOCKS 200

/*
 * A batch as the engine plans a pass of clients decoding layer by layer: launch 0 the
 * APPENDs (client by client), launch 1 the DECODEs. Client c's sequence j has blocks
 * 10 * (c * NSEQ + j) + e, its length lens[c][j], and its newest token goes to the last
 * position; each case then breaks one thing.
 */
struct fx {
    pk_cache cache;
    struct pv_op ops[2 * MAXC];
    int32_t slots[MAXC][NSEQ];
    int32_t tables[MAXC][NSEQ * STRIDE];
    int32_t lens[MAXC][NSEQ];
    struct pd_batch_op bops[2 * MAXC];
    struct pd_launch launches[3];
    struct pd_batch batch;
    uint32_t partner[2 * MAXC];
    int arena_tag[MAXC];
    unsigned nclients;
};

/* Builds the batch of n clients; returns nothing. */
static void build(struct fx *f, unsigned n)
{
    memset(f, 0, sizeof *f);
    f->nclients = n;
    f->cache = (pk_cache) { .num_layers = 4, .num_blocks = NBLOCKS, .num_kv_heads = 2, .head_dim = 64,
                            .block_size = BLOCK, .dtype = PAGED_DTYPE_BF16, .k_scale = 1, .v_scale = 1 };
    for (unsigned c = 0; c < n; c++) {
        for (int j = 0; j < NSEQ; j++) {
            f->lens[c][j] = 17 + 9 * j + (int32_t) c;        /* 17..39: two or three blocks */
            for (int e = 0; e < STRIDE; e++)
                f->tables[c][j * STRIDE + e] = 10 * (int32_t) (c * NSEQ + (unsigned) j) + e;
            int32_t pos = f->lens[c][j] - 1;
            f->slots[c][j] = f->tables[c][j * STRIDE + pos / BLOCK] * BLOCK + pos % BLOCK;
        }
        f->ops[c] = (struct pv_op) { .opcode = PAGED_OP_APPEND, .layer_begin = 2, .num_layers = 1,
                                     .num_tokens = NSEQ, .count = NSEQ, .dtype = PAGED_DTYPE_BF16,
                                     .slots = f->slots[c], .k_off = 4096u * c, .v_off = 4096u * c + 2048 };
        f->ops[n + c] = (struct pv_op) { .opcode = PAGED_OP_DECODE, .layer_begin = 2, .num_layers = 1,
                                         .count = NSEQ, .dtype = PAGED_DTYPE_BF16, .num_q_heads = 4,
                                         .block_tables = f->tables[c], .bt_stride = STRIDE,
                                         .seq_lens = f->lens[c] };
    }
    for (unsigned i = 0; i < 2 * n; i++) {
        unsigned c = i % n;
        f->bops[i] = (struct pd_batch_op) {
            .cache = &f->cache, .op = &f->ops[i], .client = c, .user = 2 * c + (i >= n),
            .arenas = { .data = (pd_arena *) &f->arena_tag[c] },
        };
    }
    f->launches[0] = (struct pd_launch) { .first = 0, .count = n };
    f->launches[1] = (struct pd_launch) { .first = n, .count = n };
    f->batch = (struct pd_batch) { .ops = f->bops, .nops = 2 * n, .launches = f->launches, .nlaunches = 2 };
}

/* Scratch shared by the cases, as the backend keeps it: each case also meets what the one
 * before left remembered. */
static struct pf_scratch scratch;

/* Returns whether every byte of the scratch's block marks is zero again. */
static int marks_clear(void)
{
    for (size_t i = 0; i < scratch.marks_cap; i++)
        if (scratch.marks[i] != 0)
            return 0;
    return 1;
}

/* Runs pf_plan on f; returns its answer. */
static int plan_of(struct fx *f, struct pf_fusion *out)
{
    memset(out, 0, sizeof *out);
    return pf_plan(&f->batch, f->partner, &scratch, out);
}

/* Checks one case that must not fuse. */
static void refused(struct fx *f, const char *what)
{
    struct pf_fusion fu;
    ok(plan_of(f, &fu) == 0 && marks_clear(), "not fused: %s (scratch left zero)", what);
}

/* Checks pf_plan on batches that fuse and on each reason not to; returns 0 (TAP reports the result). */
int main(void)
{
    plan_lazy();
    struct fx f;
    struct pf_fusion fu;

    build(&f, 1);
    is_int(1, plan_of(&f, &fu), "one client's APPEND of its newest tokens and its DECODE: fused");
    ok(fu.append == 0 && fu.decode == 1 && fu.partner[1] == 0, "... the APPEND launch rides in the DECODE launch");
    ok(scratch.marks_cap >= NBLOCKS && marks_clear(), "... the scratch covers the pool and is left zero");

    build(&f, MAXC);
    int all = plan_of(&f, &fu) == 1;
    for (unsigned c = 0; c < MAXC; c++)
        all = all && fu.partner[MAXC + c] == c;
    ok(all, "%d clients merged: fused, each DECODE with its own client's APPEND", MAXC);

    build(&f, 2);
    f.slots[1][2] -= 1;
    refused(&f, "one token goes to the position before the newest");
    build(&f, 2);
    f.slots[0][0] = -1;
    f.ops[0].count = NSEQ - 1;
    refused(&f, "the APPEND skips a token");
    build(&f, 2);
    f.ops[1].layer_begin = 1;
    refused(&f, "an APPEND writes another layer than its DECODE reads");
    build(&f, 2);
    f.ops[0].num_layers = 4;
    f.ops[0].layer_begin = 0;
    refused(&f, "an APPEND writes every layer");
    build(&f, 1);
    f.ops[0].dtype = PAGED_DTYPE_F16;
    refused(&f, "the APPEND's dtype differs from the queries'");
    build(&f, 1);
    f.cache.dtype = PAGED_DTYPE_F32;
    f.ops[0].dtype = f.ops[1].dtype = PAGED_DTYPE_F32;
    refused(&f, "an f32 cache (the kernel without the fused append)");
    build(&f, 1);
    f.cache.dtype = PAGED_DTYPE_FP8_E4M3;
    f.ops[0].dtype = f.ops[1].dtype = PAGED_DTYPE_F32;
    refused(&f, "f32 queries on an fp8 cache");
    build(&f, 2);
    f.bops[0].user = 9;             /* client 0's APPEND after its DECODE in its ring */
    refused(&f, "the APPEND comes after its DECODE");
    build(&f, 2);
    f.bops[2].client = 1;           /* client 1's DECODE first: it meets client 0's APPEND */
    f.bops[3].client = 0;
    refused(&f, "the DECODEs are not in the APPENDs' client order");
    build(&f, 2);
    f.bops[1].arenas.data = NULL;
    refused(&f, "a client without a device arena");
    build(&f, 2);
    f.ops[3].count = NSEQ - 1;      /* client 1 decodes fewer sequences than it appended */
    refused(&f, "an APPEND has more tokens than its DECODE has sequences");
    build(&f, 2);
    f.batch.nlaunches = 3;
    f.launches[2] = f.launches[1];
    refused(&f, "a batch of three launches");
    build(&f, 2);
    f.launches[0].count = 1;
    f.launches[1].first = 1;
    f.launches[1].count = 3;
    refused(&f, "launches of different sizes");

    /* Blocks named twice: the newest token's block in another row, or twice in its own. */
    build(&f, 2);
    f.tables[1][1 * STRIDE + 0] = f.tables[1][0 * STRIDE + (f.lens[1][0] - 1) / BLOCK];
    refused(&f, "another sequence's row reads the block a token goes to");
    build(&f, 2);
    int32_t last = (f.lens[0][2] - 1) / BLOCK;
    f.tables[0][2 * STRIDE + 0] = f.tables[0][2 * STRIDE + last];
    refused(&f, "the block a token goes to appears twice in its own row");
    build(&f, 2);
    f.tables[1][0 * STRIDE + STRIDE - 1] = f.tables[0][0 * STRIDE + (f.lens[0][0] - 1) / BLOCK];
    is_int(1, plan_of(&f, &fu), "a token's block past another row's length (never read there): fused");
    ok(marks_clear(), "... and the scratch is left zero");

    /* One client's DECODE asked about again, as every layer of a step asks: the answer it
     * remembers, for the same tables only. */
    build(&f, 1);
    f.tables[0][1 * STRIDE + 0] = f.tables[0][0 * STRIDE + (f.lens[0][0] - 1) / BLOCK];
    refused(&f, "a row names another row's token block (scanned)");
    refused(&f, "... the same tables again (remembered)");
    build(&f, 1);
    is_int(1, plan_of(&f, &fu), "the same shape without the alias: fused (tables differ: scanned again)");
    is_int(1, plan_of(&f, &fu), "... again (remembered)");
    f.lens[0][2] += 1;
    f.slots[0][2] = f.tables[0][2 * STRIDE + (f.lens[0][2] - 1) / BLOCK] * BLOCK + (f.lens[0][2] - 1) % BLOCK;
    f.tables[0][2 * STRIDE + (f.lens[0][2] - 1) / BLOCK] = f.tables[0][0 * STRIDE + 0];
    f.slots[0][2] = f.tables[0][2 * STRIDE + (f.lens[0][2] - 1) / BLOCK] * BLOCK + (f.lens[0][2] - 1) % BLOCK;
    refused(&f, "... one length longer, its newest token now in a block another row reads");
    build(&f, 1);
    f.cache.num_blocks = NBLOCKS + 50;
    is_int(1, plan_of(&f, &fu), "... a pool of another size: fused, the scratch grown");
    ok(scratch.marks_cap >= NBLOCKS + 50 && marks_clear(), "... and left zero");

    pf_scratch_free(&scratch);
    ok(scratch.marks == NULL && scratch.seen == NULL && scratch.seen_len == 0, "pf_scratch_free empties the scratch");
    return 0;
}
