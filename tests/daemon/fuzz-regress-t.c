/* fuzz-regress-t.c: what fuzzing the engine found, checked on the rule and replayed whole. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/engine/batch.h"
#include "daemon/engine/validate.h"
#include "fuzz/fuzz.h"
#include "fuzz/inputs.h"
#include "fuzz/validate-setup.h"
#include "tests/tap/basic.h"

/*
 * What fuzz-validate found:
 *   1. an engine pass let a FREE, FORK or PUBLISH join after an APPEND or COPY of the same
 *      client that waited for the backend: the allocator op ran at once and took away the
 *      hold on (or the right to write) a block the APPEND or COPY had been validated with,
 *      which the backend then wrote or read anyway (fixed in daemon/engine/batch.c);
 *   2. pv_validate accepted a DECODE or PREFILL of no sequences whatever its block-table
 *      stride, which the kernels take as an int32: a stride past INT32_MAX reached them
 *      negative and they refused the op, so an accepted request failed in the backend
 *      (fixed in daemon/engine/validate.c).
 * This test checks both rules directly, then replays the inputs that found them
 * (fuzz/corpus/validate/regress-*) through the harness, which runs them through
 * pd_engine_drain and checks its invariants.
 */

/* Returns whether opcode may join after an op of waiting_opcode waits, for a client whose
 * data arena is (host_is_data) or is not its host arena. */
static int joins_after(unsigned waiting_opcode, unsigned opcode, int host_is_data)
{
    struct pb_client cl = { .host_is_data = host_is_data };
    struct pv_op op;
    memset(&op, 0, sizeof op);
    op.opcode = (uint8_t) waiting_opcode;
    pb_taken(&cl, &op);
    return pb_may_join(&cl, opcode);
}

/* The one pool the validator checks below see: pool 1 of validate-setup.h. */
static struct pv_pool view;

/* Returns view for its id, else NULL: the validator's pool lookup. */
static const struct pv_pool *find_view(void *ctx, uint32_t id)
{
    (void) ctx;
    return id == view.id ? &view : NULL;
}

/* Validates an attention request of opcode with num_seqs sequences and block-table stride
 * on pool 1, its arrays at the start of a small arena; returns the status and sets *field. */
static int validate_attn(uint8_t opcode, uint32_t num_seqs, uint32_t stride, uint16_t *field)
{
    static unsigned char arena[4096];
    struct pcore_sqe sqe;
    memset(&sqe, 0, sizeof sqe);
    sqe.opcode = opcode;
    sqe.pool = view.id;
    sqe.u.attn.num_seqs = num_seqs;
    sqe.u.attn.num_q_heads = 2 * view.num_kv_heads;
    sqe.u.attn.dtype = (uint32_t) view.dtype;
    sqe.u.attn.bt_stride = stride;
    struct pv_env env = {
        .host = arena, .host_size = sizeof arena, .data_size = sizeof arena,
        .find_pool = find_view,
    };
    struct pv_op op;
    struct pv_error err;
    int rc = pv_validate(&sqe, &env, &op, &err);
    *field = err.field;
    pv_op_free(&op);
    return rc;
}

/* Names of the opcodes this test talks about. */
static const char *name(unsigned opcode)
{
    static const char *const names[] = { "NOP", "ALLOC", "FREE", "APPEND", "DECODE", "PREFILL",
                                         "FORK", "COPY", "PUBLISH", "LOOKUP" };
    return opcode < sizeof names / sizeof names[0] ? names[opcode] : "?";
}

/* Checks the rule, then replays the inputs; returns 0 (TAP says how it went). */
int main(int argc, char **argv)
{
    static const unsigned waiting[] = { PAGED_OP_APPEND, PAGED_OP_COPY };
    static const unsigned takers[] = { PAGED_OP_FREE, PAGED_OP_FORK, PAGED_OP_PUBLISH };
    const char *top = getenv("top_srcdir");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/fuzz/corpus/validate", top != NULL ? top : ".");
    struct fuzz_inputs in = { NULL, 0, 0 };
    fuzz_inputs_collect(&in, dir, "regress-");
    plan(2 * 2 * 3 + 2 + 2 * 3 + in.n);

    for (int host = 0; host < 2; host++)
        for (size_t w = 0; w < 2; w++)
            for (size_t t = 0; t < 3; t++)
                ok(!joins_after(waiting[w], takers[t], host),
                   "%s arena: a %s waits for the next pass after a waiting %s",
                   host ? "host" : "device", name(takers[t]), name(waiting[w]));
    struct pb_client fresh = { .host_is_data = 1 };
    ok(pb_may_join(&fresh, PAGED_OP_FREE) && pb_may_join(&fresh, PAGED_OP_PUBLISH),
       "FREE and PUBLISH join a pass with nothing waiting");
    ok(joins_after(PAGED_OP_APPEND, PAGED_OP_APPEND, 1) && joins_after(PAGED_OP_APPEND, PAGED_OP_NOP, 1),
       "an APPEND or a NOP still joins after an APPEND");

    const struct fv_pool *s = &fv_pools[0];
    view = (struct pv_pool) {
        .id = s->id, .num_layers = s->num_layers, .num_kv_heads = s->num_kv_heads,
        .head_dim = s->head_dim, .block_size = s->block_size, .num_blocks = s->num_blocks,
        .dtype = s->dtype, .alloc = fv_build_alloc(s), .writable = 1, .holder = FV_HOLDER,
    };
    if (view.alloc == NULL)
        bail("cannot build the allocator of pool %u", s->id);
    static const uint8_t attn_ops[] = { PAGED_OP_DECODE, PAGED_OP_PREFILL };
    for (size_t i = 0; i < 2; i++) {
        uint16_t field;
        int rc = validate_attn(attn_ops[i], 0, 0x80003282u, &field);
        ok(rc == PAGED_E_INVAL && field == PCORE_FIELD_BLOCK_TABLE,
           "%s of no sequences, stride 0x80003282: refused on block_tables (%d, field %u)",
           name(attn_ops[i]), rc, field);
        rc = validate_attn(attn_ops[i], 0, UINT32_MAX, &field);
        ok(rc == PAGED_E_INVAL && field == PCORE_FIELD_BLOCK_TABLE,
           "%s of no sequences, stride 0xffffffff: refused on block_tables (%d, field %u)",
           name(attn_ops[i]), rc, field);
        rc = validate_attn(attn_ops[i], 0, 0, &field);
        ok(rc == PAGED_OK, "%s of no sequences, stride 0: still accepted (%d)", name(attn_ops[i]), rc);
    }
    pa_destroy((pa_alloc *) view.alloc);

    LLVMFuzzerInitialize(&argc, &argv);
    for (size_t i = 0; i < in.n; i++) {
        size_t size;
        unsigned char *data = fuzz_slurp(in.paths[i], &size);
        /* The harness aborts, naming the broken invariant, if the engine lets it happen. */
        LLVMFuzzerTestOneInput(data, size);
        ok(1, "%s: replayed through the engine, invariants held", strrchr(in.paths[i], '/') + 1);
        free(data);
    }
    fuzz_inputs_free(&in);
    return 0;
}
