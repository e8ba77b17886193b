/* tierclient.c: the tiers benchmark's client: arenas, prompts published, requests over reloads, recomputes. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/tiers.h"
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>

#include "tools/bench/gpu.h"
#endif

/* How long one completion may take before the benchmark gives up on the daemon. */
#define TB_WAIT_MS 600000

/* Dies naming what failed with the client's connection. */
void tb_fail(const struct tb_client *cl, int rc, const char *what)
{
    const char *detail = cl->c != NULL ? paged_client_error(cl->c) : "";
    bench_die("tiers: %s: %s%s%s%s", what, paged_strerror(rc), *detail ? " (" : "", detail, *detail ? ")" : "");
}

/* Returns an arena offset of size bytes, or dies. */
static uint64_t carve(struct tb_client *cl, paged_arena_kind kind, size_t size)
{
    uint64_t off = 0;
    int rc = paged_arena_alloc(cl->c, kind, size, 256, &off);
    if (rc != PAGED_OK)
        tb_fail(cl, rc, kind == PAGED_ARENA_HOST ? "carving the host arena" : "carving the data arena");
    return off;
}

/* Fills elements [begin, end) of the bf16 array at data-arena offset off with random values
 * of stream seed. Returns nothing. */
static void fill(struct tb_client *cl, uint64_t off, size_t begin, size_t end, uint64_t seed)
{
#ifdef HAVE_CUDA
    if (cl->cuda) {
        bg_use_device(cl->device);
        bg_fill(cl->data + off + begin * TB_ELEM, end - begin, PAGED_DTYPE_BF16, 1.0f, 1.0f, seed);
        bg_sync("tiers: filling the device arena");
        return;
    }
#endif
    bench_fill_host(cl->data + off, begin, end, PAGED_DTYPE_BF16, 1.0f, 1.0f, seed);
}

/* Connects and prepares the arenas; see tiers.h. */
void tb_client_open(struct tb_client *cl, const char *socket, const struct tb_geom *g, uint64_t seed)
{
    memset(cl, 0, sizeof *cl);
    cl->g = g;
    cl->seed = seed;
    cl->rows = g->tokens + g->suffix;
    const size_t kv = (size_t) cl->rows * TB_HKV * TB_D * TB_ELEM, qo = (size_t) cl->rows * TB_HQ * TB_D * TB_ELEM;
    const size_t data_need = 2 * kv + 2 * qo + (1u << 20);
    const size_t blocks = (size_t) g->prompt_blocks + g->suffix_blocks;
    /* The sync calls stage a prompt's tokens and ids in the host arena too. */
    const size_t host_need = (size_t) cl->rows * 4 * 2 + blocks * 4 * 3 + (4u << 20);
    char err[256] = "";
    paged_connect_opts opts = {
        .socket_path = socket,
        .name = "paged-bench-tiers",
        .host_arena_size = host_need + data_need,   /* the data arena on the cpu backend */
        .data_arena_size = data_need,
        .timeout_ms = 60000,
    };
    int rc = paged_client_connect_err(&opts, &cl->c, err, sizeof err);
    if (rc != PAGED_OK)
        bench_die("tiers: connecting to %s: %s (%s)", socket, paged_strerror(rc), err);
    if (bench_client_arenas(cl->c, "tiers", &cl->cuda, &cl->host, &cl->data) != PAGED_OK)
        tb_fail(cl, PAGED_E_NOMEM, "mapping the arenas");
#ifdef HAVE_CUDA
    if (cl->cuda)
        bg_check((int) cudaGetDevice(&cl->device), "tiers: cudaGetDevice");
#endif
    cl->k_off = carve(cl, PAGED_ARENA_DATA, kv);
    cl->v_off = carve(cl, PAGED_ARENA_DATA, kv);
    cl->q_off = carve(cl, PAGED_ARENA_DATA, qo);
    cl->out_off = carve(cl, PAGED_ARENA_DATA, qo);
    cl->slots_off = carve(cl, PAGED_ARENA_HOST, (size_t) cl->rows * 4);
    cl->table_off = carve(cl, PAGED_ARENA_HOST, blocks * 4);
    cl->lens_off = carve(cl, PAGED_ARENA_HOST, 4);
    cl->indptr_off = carve(cl, PAGED_ARENA_HOST, 8);
    /* Queries and the suffix's keys and values once; a prompt's keys and values when it is
     * published. */
    const size_t kvrow = (size_t) TB_HKV * TB_D, qrow = (size_t) TB_HQ * TB_D;
    fill(cl, cl->q_off, 0, (size_t) cl->rows * qrow, seed ^ 0x71u);
    fill(cl, cl->k_off, (size_t) g->tokens * kvrow, (size_t) cl->rows * kvrow, seed ^ 0x6bu);
    fill(cl, cl->v_off, (size_t) g->tokens * kvrow, (size_t) cl->rows * kvrow, seed ^ 0x76u);
}

/* Closes the connection. */
void tb_client_close(struct tb_client *cl)
{
    paged_client_close(cl->c);
    cl->c = NULL;
}

/* Creates a pool; see tiers.h. */
void tb_pool_create(struct tb_client *cl, struct tb_pool *tp, const char *name, uint32_t num_blocks,
                    uint32_t host_units)
{
    memset(tp, 0, sizeof *tp);
    snprintf(tp->name, sizeof tp->name, "%s", name);
    tp->num_blocks = num_blocks;
    paged_pool_desc desc = {
        .name = tp->name, .num_layers = cl->g->layers, .num_kv_heads = TB_HKV, .head_dim = TB_D,
        .block_size = TB_B, .dtype = PAGED_DTYPE_BF16, .num_blocks = num_blocks, .mode = 0600,
        .host_tier_bytes = (uint64_t) host_units * cl->g->unit_bytes,
    };
    int rc = paged_pool_create(cl->c, &desc, &tp->p);
    if (rc != PAGED_OK) {
        char what[128];
        snprintf(what, sizeof what, "creating pool %s (%u blocks, host tier of %u units)", name, num_blocks,
                 host_units);
        tb_fail(cl, rc, what);
    }
    tp->ids = bench_alloc((size_t) num_blocks * sizeof *tp->ids, "block ids");
}

/* Destroys a pool; see tiers.h. */
void tb_pool_destroy(struct tb_client *cl, struct tb_pool *tp)
{
    int rc = paged_pool_destroy(cl->c, tp->name);
    int drc = paged_pool_detach(tp->p);
    if (rc == PAGED_OK)
        rc = drc;
    if (rc != PAGED_OK)
        tb_fail(cl, rc, "removing a pool");
    free(tp->ids);
    tp->ids = NULL;
    tp->p = NULL;
}

/* Writes the token ids of prompt k; see tiers.h. */
void tb_prompt_tokens(const struct tb_geom *g, uint64_t seed, unsigned k, int32_t *out)
{
    for (unsigned i = 0; i < g->tokens; i++)
        out[i] = (int32_t) (bench_mix64(seed ^ ((uint64_t) k << 32 | i)) & 0x3fffffff);
}

/* Waits for n completions, dying on a failed one. Returns nothing. */
static void await(struct tb_client *cl, unsigned n)
{
    paged_completion comp[4];
    unsigned got = 0;
    while (got < n) {
        int k = paged_wait(cl->c, comp, n - got < 4 ? n - got : 4, TB_WAIT_MS);
        if (k < 0)
            tb_fail(cl, k, "waiting for completions");
        for (int i = 0; i < k; i++)
            if (comp[i].status != PAGED_OK) {
                char what[160];
                snprintf(what, sizeof what, "%s (field %s, element %u)",
                         paged_op_name(comp[i].op) != NULL ? paged_op_name(comp[i].op) : "a request",
                         paged_field_name(comp[i].err_field), comp[i].err_index);
                tb_fail(cl, comp[i].status, what);
            }
        got += (unsigned) k;
    }
}

/* Prepares a request or dies. */
static void prep(struct tb_client *cl, const paged_request *req)
{
    int rc = paged_prep(cl->c, req);
    if (rc != PAGED_OK)
        tb_fail(cl, rc, "preparing a request");
}

/* Points the slots of rows [from, to) at their positions in the blocks of tp->ids (the
 * data arena's row i is position i). Returns nothing. */
static void set_slots(struct tb_client *cl, const struct tb_pool *tp, unsigned from, unsigned to)
{
    int32_t *slots = (int32_t *) (cl->host + cl->slots_off);
    for (unsigned pos = from; pos < to; pos++)
        slots[pos - from] = tp->ids[pos / TB_B] * TB_B + (int32_t) (pos % TB_B);
}

/* APPENDs rows [from, to) of keys and values at layer l into the slots set_slots set, and
 * when nq > 0 PREFILLs the last nq query rows before `to` over a context of `to` tokens in
 * blocks tp->ids; submits both and awaits them. Returns nothing. */
static void layer(struct tb_client *cl, const struct tb_pool *tp, int32_t l, unsigned from, unsigned to)
{
    const size_t kvrow = (size_t) TB_HKV * TB_D * TB_ELEM, qrow = (size_t) TB_HQ * TB_D * TB_ELEM;
    const unsigned nq = to - from;
    paged_request app = {
        .op = PAGED_OP_APPEND, .pool = tp->p, .layer = l, .tag = 1,
        .u.append = { .num_tokens = nq, .dtype = PAGED_DTYPE_BF16, .k_off = cl->k_off + from * kvrow,
                      .v_off = cl->v_off + from * kvrow, .slots_off = cl->slots_off },
    };
    paged_request pre = {
        .op = PAGED_OP_PREFILL, .pool = tp->p, .layer = l, .tag = 2,
        .u.attn = { .num_seqs = 1, .num_q_heads = TB_HQ, .dtype = PAGED_DTYPE_BF16,
                    .q_off = cl->q_off + from * qrow, .out_off = cl->out_off + from * qrow,
                    .block_tables_off = cl->table_off, .bt_stride = (to + TB_B - 1) / TB_B,
                    .seq_lens_off = cl->lens_off, .qo_indptr_off = cl->indptr_off },
    };
    int32_t *lens = (int32_t *) (cl->host + cl->lens_off), *indptr = (int32_t *) (cl->host + cl->indptr_off);
    lens[0] = (int32_t) to;
    indptr[0] = 0;
    indptr[1] = (int32_t) nq;
    memcpy(cl->host + cl->table_off, tp->ids, (size_t) pre.u.attn.bt_stride * sizeof *tp->ids);
    prep(cl, &app);
    prep(cl, &pre);
    int rc = paged_submit(cl->c);
    if (rc < 0)
        tb_fail(cl, rc, "submitting");
    await(cl, 2);
}

/* Takes n blocks into tp->ids + at, or dies. */
static void take(struct tb_client *cl, struct tb_pool *tp, uint32_t at, uint32_t n)
{
    int rc = paged_alloc(tp->p, n, tp->ids + at);
    if (rc != PAGED_OK)
        tb_fail(cl, rc, "allocating blocks");
}

/* Publishes prompt k; see tiers.h. */
void tb_publish_prompt(struct tb_client *cl, struct tb_pool *tp, unsigned k)
{
    const struct tb_geom *g = cl->g;
    const size_t kvrow = (size_t) TB_HKV * TB_D;
    fill(cl, cl->k_off, 0, (size_t) g->tokens * kvrow, cl->seed ^ bench_mix64(2 * (uint64_t) k + 1));
    fill(cl, cl->v_off, 0, (size_t) g->tokens * kvrow, cl->seed ^ bench_mix64(2 * (uint64_t) k + 2));
    take(cl, tp, 0, g->prompt_blocks);
    set_slots(cl, tp, 0, g->tokens);
    for (unsigned l = 0; l < g->layers; l++) {
        paged_request app = {
            .op = PAGED_OP_APPEND, .pool = tp->p, .layer = (int32_t) l, .tag = 1,
            .u.append = { .num_tokens = g->tokens, .dtype = PAGED_DTYPE_BF16, .k_off = cl->k_off,
                          .v_off = cl->v_off, .slots_off = cl->slots_off },
        };
        prep(cl, &app);
        int rc = paged_submit(cl->c);
        if (rc < 0)
            tb_fail(cl, rc, "submitting");
        await(cl, 1);
    }
    int32_t *tokens = bench_alloc((size_t) g->tokens * sizeof *tokens, "prompt tokens");
    tb_prompt_tokens(g, cl->seed, k, tokens);
    int n = paged_publish(tp->p, NULL, TB_SALT, g->prompt_blocks, tokens, tp->ids);
    free(tokens);
    if (n < 0)
        tb_fail(cl, n, "publishing a prompt");
    if ((unsigned) n != g->prompt_blocks)
        bench_die("tiers: publishing prompt %u of pool %s published %d of its %u blocks", k, tp->name, n,
                  g->prompt_blocks);
    tb_release(cl, tp, g->prompt_blocks);
}

/* Looks prompt k up; see tiers.h. */
unsigned tb_lookup_prompt(struct tb_client *cl, struct tb_pool *tp, unsigned k)
{
    const struct tb_geom *g = cl->g;
    int32_t *tokens = bench_alloc((size_t) g->tokens * sizeof *tokens, "prompt tokens");
    tb_prompt_tokens(g, cl->seed, k, tokens);
    int n = paged_lookup(tp->p, NULL, TB_SALT, g->prompt_blocks, tokens, tp->ids);
    free(tokens);
    if (n < 0)
        tb_fail(cl, n, "looking a prompt up");
    if ((unsigned) n != g->prompt_blocks && n > 0)
        tb_release(cl, tp, (uint32_t) n);
    return (unsigned) n;
}

/* Copies the suffix's output rows (one layer) from the data arena to out. Returns nothing. */
static void copy_out(struct tb_client *cl, uint16_t *out)
{
    const size_t qrow = (size_t) TB_HQ * TB_D * TB_ELEM, bytes = (size_t) cl->g->suffix * qrow;
    const unsigned char *src = cl->data + cl->out_off + (size_t) cl->g->tokens * qrow;
#ifdef HAVE_CUDA
    if (cl->cuda) {
        bg_check((int) cudaMemcpy(out, src, bytes, cudaMemcpyDeviceToHost), "tiers: reading the PREFILL output");
        return;
    }
#endif
    memcpy(out, src, bytes);
}

/* Runs a request's suffix; see tiers.h. */
void tb_suffix(struct tb_client *cl, struct tb_pool *tp, uint16_t *outs)
{
    const struct tb_geom *g = cl->g;
    take(cl, tp, g->prompt_blocks, g->suffix_blocks);
    set_slots(cl, tp, g->tokens, g->tokens + g->suffix);
    const size_t per_layer = (size_t) g->suffix * TB_HQ * TB_D;
    for (unsigned l = 0; l < g->layers; l++) {
        layer(cl, tp, (int32_t) l, g->tokens, g->tokens + g->suffix);
        if (outs != NULL)
            copy_out(cl, outs + l * per_layer);
    }
}

/* Runs a recompute request; see tiers.h. */
void tb_recompute(struct tb_client *cl, struct tb_pool *tp)
{
    const struct tb_geom *g = cl->g;
    take(cl, tp, 0, g->prompt_blocks + g->suffix_blocks);
    set_slots(cl, tp, 0, cl->rows);
    for (unsigned l = 0; l < g->layers; l++)
        layer(cl, tp, (int32_t) l, 0, cl->rows);
}

/* Drops references; see tiers.h. */
void tb_release(struct tb_client *cl, struct tb_pool *tp, uint32_t n)
{
    int rc = paged_free(tp->p, n, tp->ids);
    if (rc != PAGED_OK)
        tb_fail(cl, rc, "freeing blocks");
}
