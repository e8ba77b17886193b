/* batch-t.c: pb_plan's launches: which APPENDs and DECODEs share one; no APPEND overtakes an op of its own client. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "daemon/engine/batch.h"
#include "tests/tap/basic.h"

#define MAXOPS 16

/* Two pools: only their identity (user) and geometry matter to the planner. */
static int pool_tag[2];
static const struct pv_pool pools[2] = {
    { .id = 1, .num_layers = 4, .num_kv_heads = 2, .head_dim = 64, .block_size = 16,
      .num_blocks = 64, .dtype = PAGED_DTYPE_F16, .user = &pool_tag[0] },
    { .id = 2, .num_layers = 4, .num_kv_heads = 2, .head_dim = 64, .block_size = 16,
      .num_blocks = 64, .dtype = PAGED_DTYPE_F16, .user = &pool_tag[1] },
};

/* One planning case being built: its ops (as taken), their slots, and the batch ops. */
struct plan {
    struct pv_op ops[MAXOPS];
    int32_t slots[MAXOPS][4];
    struct pd_batch_op in[MAXOPS], out[MAXOPS];
    struct pd_launch launches[MAXOPS];
    struct pb_group groups[MAXOPS];
    uint32_t next[MAXOPS];
    uint32_t n;
};

/* Adds an APPEND of client to p: pool, first layer, layers, dtype and ntok slots from s0
 * (s0 < 0: every slot skipped). Returns its index. */
static uint32_t add_append(struct plan *p, uint32_t client, int pool, int32_t layer, int32_t nl,
                           int32_t dtype, uint32_t ntok, int32_t s0)
{
    uint32_t i = p->n++;
    struct pv_op *op = &p->ops[i];
    for (uint32_t t = 0; t < ntok && t < 4; t++)
        p->slots[i][t] = s0 < 0 ? -1 : s0 + (int32_t) t;
    *op = (struct pv_op) { .opcode = PAGED_OP_APPEND, .pool = &pools[pool], .layer_begin = layer,
                           .num_layers = nl, .count = ntok, .num_tokens = ntok, .dtype = dtype,
                           .slots = p->slots[i] };
    p->in[i] = (struct pd_batch_op) { .op = op, .user = i, .client = client };
    return i;
}

/* Adds an op of client to p that is neither APPEND nor DECODE (a COPY or PREFILL); returns
 * its index. */
static uint32_t add_other(struct plan *p, uint32_t client, unsigned opcode)
{
    uint32_t i = p->n++;
    p->ops[i] = (struct pv_op) { .opcode = (uint8_t) opcode, .pool = &pools[0], .count = 1 };
    p->in[i] = (struct pd_batch_op) { .op = &p->ops[i], .user = i, .client = client };
    return i;
}

/* Adds a DECODE of client on layer of pool with heads query heads (f16, scale 1/8, no
 * options); returns its index. */
static uint32_t add_decode_at(struct plan *p, uint32_t client, int pool, int32_t layer, uint32_t heads)
{
    uint32_t i = p->n++;
    p->ops[i] = (struct pv_op) { .opcode = PAGED_OP_DECODE, .pool = &pools[pool], .count = 1,
                                 .layer_begin = layer, .num_layers = 1, .dtype = PAGED_DTYPE_F16,
                                 .num_q_heads = heads, .bt_stride = 4, .sm_scale = 0.125f };
    p->in[i] = (struct pd_batch_op) { .op = &p->ops[i], .user = i, .client = client };
    return i;
}

/* Adds a DECODE of client on layer 0 of pool 0 with 8 query heads; returns its index. */
static uint32_t add_decode(struct plan *p, uint32_t client)
{
    return add_decode_at(p, client, 0, 0, 8);
}

/*
 * Plans p and compares the launches with want: launches separated by '|', each the input
 * indices of its members in order, e.g. "0,2|1|3". Reports one test named what, then empties p
 * for the next case; returns nothing.
 */
static void expect(struct plan *p, const char *want, const char *what)
{
    uint32_t nl = pb_plan(p->in, p->n, p->out, p->launches, p->groups, p->next);
    char got[256] = "";
    size_t len = 0;
    for (uint32_t l = 0; l < nl; l++) {
        const struct pd_launch *la = &p->launches[l];
        for (uint32_t k = 0; k < la->count; k++)
            len += (size_t) snprintf(got + len, sizeof got - len, "%s%u",
                                     k == 0 ? (l == 0 ? "" : "|") : ",", p->out[la->first + k].user);
    }
    if (!ok(strcmp(got, want) == 0, "%s: launches %s", what, want))
        diag("planned %s", got);
    memset(p, 0, sizeof *p);
}

/* Runs the planning cases; returns 0 (the TAP output tells the rest). */
int main(void)
{
    plan(17);
    struct plan p;
    memset(&p, 0, sizeof p);

    for (uint32_t c = 0; c < 3; c++) {
        add_append(&p, c, 0, 1, 1, PAGED_DTYPE_F16, 1, (int32_t) c * 16);
        add_decode(&p, c);
    }
    expect(&p, "0,2,4|1,3,5", "three clients' APPEND + DECODE: one APPEND launch, then one DECODE launch");

    for (uint32_t c = 0; c < 4; c++) {
        add_append(&p, c, 0, (int32_t) c, 1, PAGED_DTYPE_F16, 1, (int32_t) c * 16);
        add_decode_at(&p, c, 0, (int32_t) (3 - c), 8);
    }
    expect(&p, "0,2,4,6|1,3,5,7", "four clients at four different layers: still one APPEND launch "
           "and one DECODE launch");

    add_decode_at(&p, 0, 0, 0, 8);
    add_decode_at(&p, 1, 1, 0, 8);
    add_decode_at(&p, 2, 0, 2, 4);
    add_decode_at(&p, 3, 0, 3, 8);
    add_decode_at(&p, 4, 1, 1, 8);
    add_decode_at(&p, 5, 0, 1, 4);
    expect(&p, "0,3|1,4|2,5", "DECODEs of other layers merge; of other pools or query head "
           "counts they do not");

    add_decode_at(&p, 0, 0, 0, 8);
    add_decode_at(&p, 1, 0, 1, 8);
    p.ops[1].dtype = PAGED_DTYPE_BF16;
    add_decode_at(&p, 2, 0, 2, 8);
    p.ops[2].window = 64;
    add_decode_at(&p, 3, 0, 3, 8);
    p.ops[3].sm_scale = 0.25f;
    add_decode_at(&p, 4, 0, 1, 8);
    p.ops[4].soft_cap = 30.0f;
    add_decode_at(&p, 5, 0, 2, 8);
    expect(&p, "0,5|1|2|3|4", "DECODEs of other query dtypes, windows, scales or soft caps do "
           "not merge, whatever their layers");

    add_append(&p, 0, 0, 0, 4, PAGED_DTYPE_F16, 1, 0);
    add_append(&p, 1, 0, 2, 1, PAGED_DTYPE_F16, 1, 100);
    add_append(&p, 2, 0, 0, 4, PAGED_DTYPE_F16, 1, 200);
    add_append(&p, 3, 0, 3, 1, PAGED_DTYPE_F16, 1, 300);
    add_append(&p, 4, 1, 1, 1, PAGED_DTYPE_F16, 1, 400);
    expect(&p, "0,2|1,3|4", "APPENDs of other first layers merge when their numbers of layers "
           "and pools agree");

    add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 1, 0);
    add_append(&p, 0, 0, 1, 1, PAGED_DTYPE_F16, 1, 0);
    add_append(&p, 0, 0, 2, 1, PAGED_DTYPE_F16, 2, 1);
    expect(&p, "0|1,2", "a client's APPENDs of other layers still merge only where their slot "
           "ranges do not overlap");

    add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 1, 0);
    add_other(&p, 0, PAGED_OP_COPY);
    add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 1, 1);
    add_append(&p, 1, 0, 0, 1, PAGED_DTYPE_F16, 1, 100);
    expect(&p, "0|1|2,3", "an APPEND does not join a group that runs before its client's COPY; "
           "another client's joins its group");

    add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 1, 0);
    add_other(&p, 1, PAGED_OP_PREFILL);
    add_append(&p, 1, 0, 0, 1, PAGED_DTYPE_F16, 1, 100);
    add_append(&p, 2, 0, 0, 1, PAGED_DTYPE_F16, 1, 200);
    expect(&p, "0|1|2,3", "after its own PREFILL an APPEND opens a group (a third client joins the newest)");

    add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 1, 0);
    add_other(&p, 1, PAGED_OP_COPY);
    add_append(&p, 2, 0, 0, 1, PAGED_DTYPE_F16, 1, 200);
    expect(&p, "0,2|1", "another client's COPY between does not stop a merge");

    add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 1, 0);
    add_append(&p, 0, 0, 1, 1, PAGED_DTYPE_F16, 1, 0);
    add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 1, 1);
    add_append(&p, 1, 0, 0, 1, PAGED_DTYPE_F16, 1, 100);
    add_append(&p, 1, 0, 1, 1, PAGED_DTYPE_F16, 1, 100);
    expect(&p, "0|1,2,3|4", "an APPEND does not overtake its client's APPEND of the same slot "
           "(of another layer); it and another client's join the later group");

    add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 2, 4);
    add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 1, 7);
    add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 1, 5);
    expect(&p, "0,1|2", "a client's APPENDs merge only where their slot ranges do not overlap");

    add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 2, -1);
    add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 1, 5);
    add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 1, 5);
    expect(&p, "0,1|2", "skipped slots overlap nothing; the same slot twice does not merge");

    add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 1, 0);
    add_append(&p, 1, 1, 0, 1, PAGED_DTYPE_F16, 1, 100);
    add_append(&p, 2, 0, 1, 1, PAGED_DTYPE_F16, 1, 200);
    add_append(&p, 3, 0, 0, 4, PAGED_DTYPE_F16, 1, 300);
    add_append(&p, 4, 0, 0, 1, PAGED_DTYPE_F32, 1, 400);
    add_append(&p, 5, 0, 0, 1, PAGED_DTYPE_F16, 1, 500);
    expect(&p, "0,2,5|1|3|4", "other pools, layer counts and source dtypes do not merge; "
           "another first layer does");

    add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 1, 0);
    add_append(&p, 1, 0, 0, 1, PAGED_DTYPE_F16, 1, 100);
    {
        /* A group of PB_MAX_MERGED_TOKENS, and one past it, against a token on either side. */
        static int32_t many[PB_MAX_MERGED_TOKENS + 1];
        for (uint32_t t = 0; t <= PB_MAX_MERGED_TOKENS; t++)
            many[t] = 100 + (int32_t) t;
        p.ops[1].num_tokens = PB_MAX_MERGED_TOKENS;
        p.ops[1].slots = many;
        add_append(&p, 2, 0, 0, 1, PAGED_DTYPE_F16, 1, 100000);
        expect(&p, "0,2|1", "an APPEND that would take a group past PB_MAX_MERGED_TOKENS runs alone");
        add_append(&p, 0, 0, 0, 1, PAGED_DTYPE_F16, 1, 0);
        add_append(&p, 1, 0, 0, 1, PAGED_DTYPE_F16, 1, 100);
        p.ops[1].num_tokens = PB_MAX_MERGED_TOKENS + 1;
        p.ops[1].slots = many;
        add_append(&p, 2, 0, 0, 1, PAGED_DTYPE_F16, 1, 100000);
        expect(&p, "0,2|1", "an APPEND of more than PB_MAX_MERGED_TOKENS runs alone");
    }

    add_decode(&p, 0);
    add_append(&p, 1, 0, 0, 1, PAGED_DTYPE_F16, 1, 100);
    add_decode(&p, 1);
    add_append(&p, 2, 0, 0, 1, PAGED_DTYPE_F16, 1, 200);
    add_other(&p, 2, PAGED_OP_COPY);
    expect(&p, "1,3|4|0,2", "APPEND groups and single ops first, in order, then the DECODEs");

    expect(&p, "", "an empty batch has no launches");
    return 0;
}
