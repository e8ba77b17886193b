/* validate.c: the request validator: a submission entry in, an error or a ready op out. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/engine/validate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/util/heap.h"
#include "paged.h"

/* Records an error and returns its status. */
static int fail(struct pv_error *e, int status, enum pcore_field field, uint32_t index)
{
    e->status = status;
    e->field = (uint16_t) field;
    e->index = index;
    return status;
}

/* Returns whether n elements of esize bytes from off lie inside an arena of size bytes,
 * computed without overflow. */
static int in_arena(uint64_t off, uint64_t n, uint64_t esize, uint64_t size)
{
    if (esize != 0 && n > size / esize)
        return 0;
    uint64_t bytes = n * esize;
    return off <= size && bytes <= size - off;
}

/* Returns whether two byte ranges, both non-empty, overlap. */
static int overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
    return alen != 0 && blen != 0 && a < b + blen && b < a + alen;
}

/* Returns whether dtype is one of the four paged knows. */
static int dtype_valid(uint32_t dtype)
{
    return dtype >= PAGED_DTYPE_F32 && dtype <= PAGED_DTYPE_FP8_E4M3;
}

/* Returns whether dtype may be used with a cache of cache_dtype: for queries and outputs
 * (queries set), the cache's dtype, or f32, f16 or bf16 with an fp8 cache; for APPEND's new
 * keys and values, those, or fp8 with an fp8 cache, whose bytes are stored as they are
 * (already value / scale). */
static int dtype_ok(uint32_t dtype, int32_t cache_dtype, int queries)
{
    if (!dtype_valid(dtype))
        return 0;
    if (dtype == PAGED_DTYPE_FP8_E4M3)
        return !queries && cache_dtype == PAGED_DTYPE_FP8_E4M3;
    return cache_dtype == PAGED_DTYPE_FP8_E4M3 || (int32_t) dtype == cache_dtype;
}

/* Returns whether opcode is run by the backend; see validate.h. */
int pv_backend_op(unsigned opcode)
{
    return opcode == PAGED_OP_APPEND || opcode == PAGED_OP_DECODE || opcode == PAGED_OP_PREFILL
           || opcode == PAGED_OP_COPY;
}

/* Returns whether opcode writes to its pool. FREE and FORK only change the client's own
 * references, and a reader needs them to let go of what LOOKUP gave it. */
int pv_op_writes(unsigned opcode)
{
    switch (opcode) {
    case PAGED_OP_ALLOC:
    case PAGED_OP_APPEND:
    case PAGED_OP_COPY:
    case PAGED_OP_PUBLISH:
        return 1;
    default:
        return 0;
    }
}

/* Frees the op's private memory; returns nothing. */
void pv_op_free(struct pv_op *op)
{
    free(op->mem);
    memset(op, 0, sizeof *op);
}

/* A bump allocator over the op's one allocation. */
struct carve {
    unsigned char *base;
    size_t used;
};

/* Returns n bytes (8-aligned) from c. */
static void *carve(struct carve *c, size_t n)
{
    void *p = c->base + c->used;
    c->used += (n + 7) & ~(size_t) 7;
    return p;
}

/* Rounds a byte count up as carve does. */
static size_t rnd(size_t n)
{
    return (n + 7) & ~(size_t) 7;
}

/* Allocates op->mem of bytes; returns PAGED_OK or PAGED_E_NOMEM (with err). */
static int op_alloc(struct pv_op *op, size_t bytes, struct carve *c, struct pv_error *err)
{
    op->mem = pd_malloc(bytes ? bytes : 1);
    if (op->mem == NULL)
        return fail(err, PAGED_E_NOMEM, PCORE_FIELD_NONE, 0);
    c->base = op->mem;
    c->used = 0;
    return PAGED_OK;
}

/* Copies n int32 from the host arena at off (already range checked) into dst. */
static void copy_in(const struct pv_env *env, void *dst, uint64_t off, size_t bytes)
{
    if (bytes != 0)
        memcpy(dst, env->host + off, bytes);
}

/* Checks that every id is a block of the pool that the client holds (reads). Returns
 * PAGED_OK or the error for the first bad one, with field. */
static int check_held(const struct pv_pool *p, const int32_t *ids,
                      uint32_t n, enum pcore_field field, struct pv_error *err)
{
    uint32_t i = pa_first_unheld(p->alloc, p->holder, ids, n);
    if (i == n)
        return PAGED_OK;
    if (ids[i] < 0 || (uint32_t) ids[i] >= p->num_blocks)
        return fail(err, PAGED_E_BLOCK, field, i);
    return fail(err, PAGED_E_NOTHELD, field, i);
}

/* Checks that block (from element i of field) may be written in place by the client.
 * Returns PAGED_OK or the error. */
static int check_writable(const struct pv_pool *p, int32_t block,
                          enum pcore_field field, uint32_t i, struct pv_error *err)
{
    if (block < 0 || (uint32_t) block >= p->num_blocks)
        return fail(err, PAGED_E_BLOCK, field, i);
    int w = pa_writable(p->alloc, p->holder, block);
    if (w == 1)
        return PAGED_OK;
    return fail(err, w == 0 ? PAGED_E_READONLY : w, field, i);
}

/* An element and where it came from, for finding duplicates by sorting. */
struct tagged {
    int32_t v;
    uint32_t i;
};

/* Orders tagged values by value, then by position. */
static int cmp_tagged(const void *a, const void *b)
{
    const struct tagged *x = a, *y = b;
    if (x->v != y->v)
        return x->v < y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Orders int32 values. */
static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *) a, y = *(const int32_t *) b;
    return (x > y) - (x < y);
}

/*
 * Finds a value (ignoring negatives) that appears twice in a[0..n). Returns 1 and the
 * position of its second occurrence in *where, 0 when all are distinct, or PAGED_E_NOMEM.
 */
static int find_duplicate(const int32_t *a, uint32_t n, uint32_t *where)
{
    if (n < 2)
        return 0;
    struct tagged *t = pd_malloc(sizeof *t * n);
    if (t == NULL)
        return PAGED_E_NOMEM;
    for (uint32_t i = 0; i < n; i++)
        t[i] = (struct tagged) { a[i], i };
    qsort(t, n, sizeof *t, cmp_tagged);
    int found = 0;
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 1; i < n; i++)
        if (t[i].v >= 0 && t[i].v == t[i - 1].v && t[i].i < best) {
            best = t[i].i;
            found = 1;
        }
    free(t);
    *where = best;
    return found;
}

/* ---- one function per opcode; each fills op or err and returns the status. */

/* ALLOC: count blocks for the client, written to ids_off afterwards. */
static int v_alloc(const struct pcore_sqe *s, const struct pv_env *env, struct pv_op *op,
                   struct pv_error *err)
{
    uint32_t n = s->u.alloc.count;
    if (n > PV_MAX_BLOCKS)
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_COUNT, 0);
    if (!in_arena(s->u.alloc.ids_off, n, sizeof(int32_t), env->host_size))
        return fail(err, PAGED_E_RANGE, PCORE_FIELD_IDS, 0);
    if (env->max_blocks != 0 && env->held_total + n > env->max_blocks)
        return fail(err, PAGED_E_LIMIT, PCORE_FIELD_COUNT, 0);
    op->count = n;
    op->out_ids_off = s->u.alloc.ids_off;
    return PAGED_OK;
}

/* FREE and FORK: blocks the client holds. */
static int v_blocks(const struct pcore_sqe *s, const struct pv_env *env, struct pv_op *op,
                    struct pv_error *err)
{
    uint32_t n = s->u.blocks.count;
    struct carve c;
    if (n > PV_MAX_BLOCKS)
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_COUNT, 0);
    if (!in_arena(s->u.blocks.ids_off, n, sizeof(int32_t), env->host_size))
        return fail(err, PAGED_E_RANGE, PCORE_FIELD_IDS, 0);
    if (s->opcode == PAGED_OP_FORK && env->max_blocks != 0 && env->held_total + n > env->max_blocks)
        return fail(err, PAGED_E_LIMIT, PCORE_FIELD_COUNT, 0);
    int rc = op_alloc(op, (size_t) n * 4, &c, err);
    if (rc < 0)
        return rc;
    op->ids = carve(&c, (size_t) n * 4);
    copy_in(env, op->ids, s->u.blocks.ids_off, (size_t) n * 4);
    op->count = n;
    return check_held(op->pool, op->ids, n, PCORE_FIELD_IDS, err);
}

/* Returns whether COPY entry s names another pool than its own as destination. */
static int copy_across(const struct pcore_sqe *s)
{
    return s->opcode == PAGED_OP_COPY && s->u.copy.dst_pool != 0 && s->u.copy.dst_pool != s->pool;
}

/* COPY into another pool: finds the destination into op->pool2 and checks it is attached,
 * writable and of the source's geometry (its number of blocks aside). Returns PAGED_OK or the
 * error. */
static int copy_dst_pool(const struct pcore_sqe *s, const struct pv_env *env, struct pv_op *op,
                         struct pv_error *err)
{
    const struct pv_pool *p = op->pool, *d = env->find_pool(env->ctx, s->u.copy.dst_pool);
    if (d == NULL)
        return fail(err, PAGED_E_NOENT, PCORE_FIELD_DST_POOL, 0);
    if (!d->writable)
        return fail(err, PAGED_E_READONLY, PCORE_FIELD_DST_POOL, 0);
    if (d->num_layers != p->num_layers || d->num_kv_heads != p->num_kv_heads || d->head_dim != p->head_dim
        || d->block_size != p->block_size)
        return fail(err, PAGED_E_GEOMETRY, PCORE_FIELD_DST_POOL, 0);
    if (d->dtype != p->dtype)
        return fail(err, PAGED_E_DTYPE, PCORE_FIELD_DST_POOL, 0);
    op->pool2 = d;
    return PAGED_OK;
}

/* COPY: sources held, destinations writable (in the destination pool), destinations distinct
 * and, within one pool, not sources. */
static int v_copy(const struct pcore_sqe *s, const struct pv_env *env, struct pv_op *op,
                  struct pv_error *err)
{
    const struct pv_pool *p = op->pool;
    uint32_t n = s->u.copy.count;
    struct carve c;
    if (copy_across(s)) {
        int rc = copy_dst_pool(s, env, op, err);
        if (rc < 0)
            return rc;
    }
    const struct pv_pool *dp = op->pool2 != NULL ? op->pool2 : p;
    if (n > PV_MAX_BLOCKS)
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_COUNT, 0);
    if (!in_arena(s->u.copy.src_off, n, 4, env->host_size))
        return fail(err, PAGED_E_RANGE, PCORE_FIELD_SRC, 0);
    if (!in_arena(s->u.copy.dst_off, n, 4, env->host_size))
        return fail(err, PAGED_E_RANGE, PCORE_FIELD_DST, 0);
    int rc = op_alloc(op, rnd((size_t) n * 4) * 3, &c, err);
    if (rc < 0)
        return rc;
    op->ids = carve(&c, (size_t) n * 4);
    op->ids2 = carve(&c, (size_t) n * 4);
    int32_t *sorted = carve(&c, (size_t) n * 4);
    copy_in(env, op->ids, s->u.copy.src_off, (size_t) n * 4);
    copy_in(env, op->ids2, s->u.copy.dst_off, (size_t) n * 4);
    op->count = n;
    rc = check_held(p, op->ids, n, PCORE_FIELD_SRC, err);
    if (rc < 0)
        return rc;
    for (uint32_t i = 0; i < n; i++)
        if ((rc = check_writable(dp, op->ids2[i], PCORE_FIELD_DST, i, err)) < 0)
            return rc;
    /* The pairs run in parallel: a block written twice, or read by one pair while another
     * writes it, would make the result depend on the order. */
    uint32_t where;
    rc = find_duplicate(op->ids2, n, &where);
    if (rc < 0)
        return fail(err, rc, PCORE_FIELD_NONE, 0);
    if (rc > 0)
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_DST, where);
    if (n != 0 && op->pool2 == NULL) {
        memcpy(sorted, op->ids, (size_t) n * 4);
        qsort(sorted, n, 4, cmp_i32);
        for (uint32_t i = 0; i < n; i++)
            if (bsearch(&op->ids2[i], sorted, n, 4, cmp_i32) != NULL)
                return fail(err, PAGED_E_INVAL, PCORE_FIELD_DST, i);
    }
    uint64_t block_bytes = (uint64_t) p->num_layers * 2 * p->num_kv_heads * p->block_size
                           * p->head_dim * paged_dtype_size((paged_dtype) p->dtype);
    op->kv_bytes = (uint64_t) n * block_bytes * 2;
    return PAGED_OK;
}

/* APPEND: new K and V of num_tokens tokens into slots the client may write. */
static int v_append(const struct pcore_sqe *s, const struct pv_env *env, struct pv_op *op,
                    struct pv_error *err)
{
    const struct pv_pool *p = op->pool;
    const struct pcore_req_append *a = &s->u.append;
    struct carve c;
    if (s->flags & PCORE_SQE_ALL_LAYERS) {
        op->layer_begin = 0;
        op->num_layers = (int32_t) p->num_layers;
    } else {
        if (s->layer < 0 || (uint32_t) s->layer >= p->num_layers)
            return fail(err, PAGED_E_LAYER, PCORE_FIELD_LAYER, 0);
        op->layer_begin = s->layer;
        op->num_layers = 1;
    }
    uint32_t n = a->num_tokens;
    if (n > PV_MAX_TOKENS)
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_COUNT, 0);
    if (!dtype_ok(a->dtype, p->dtype, 0))
        return fail(err, PAGED_E_DTYPE, PCORE_FIELD_DTYPE, 0);
    uint64_t es = paged_dtype_size((paged_dtype) a->dtype);
    /* At most 4096 layers * 2^20 tokens * 4096 heads * 256 dims: fits 64 bits. */
    uint64_t elems = (uint64_t) op->num_layers * n * p->num_kv_heads * p->head_dim;
    if (!in_arena(a->k_off, elems, es, env->data_size))
        return fail(err, PAGED_E_RANGE, PCORE_FIELD_K, 0);
    if (a->k_off % es != 0)
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_K, 0);
    if (!in_arena(a->v_off, elems, es, env->data_size))
        return fail(err, PAGED_E_RANGE, PCORE_FIELD_V, 0);
    if (a->v_off % es != 0)
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_V, 0);
    if (!in_arena(a->slots_off, n, 4, env->host_size))
        return fail(err, PAGED_E_RANGE, PCORE_FIELD_SLOTS, 0);
    int rc = op_alloc(op, (size_t) n * 4, &c, err);
    if (rc < 0)
        return rc;
    op->slots = carve(&c, (size_t) n * 4);
    copy_in(env, op->slots, a->slots_off, (size_t) n * 4);
    uint64_t limit = (uint64_t) p->num_blocks * p->block_size;
    uint32_t written = 0;
    for (uint32_t i = 0; i < n; i++) {
        int32_t slot = op->slots[i];
        if (slot == -1)
            continue;
        if (slot < 0 || (uint64_t) slot >= limit)
            return fail(err, PAGED_E_BLOCK, PCORE_FIELD_SLOTS, i);
        if ((rc = check_writable(p, slot / (int32_t) p->block_size, PCORE_FIELD_SLOTS, i, err)) < 0)
            return rc;
        written++;
    }
    uint32_t where;
    rc = find_duplicate(op->slots, n, &where);
    if (rc < 0)
        return fail(err, rc, PCORE_FIELD_NONE, 0);
    if (rc > 0)
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_SLOTS, where);
    op->count = written;
    op->num_tokens = n;
    op->dtype = (int32_t) a->dtype;
    op->k_off = a->k_off;
    op->v_off = a->v_off;
    op->tokens = written;
    op->kv_bytes = (uint64_t) written * (uint64_t) op->num_layers * 2 * p->num_kv_heads * p->head_dim
                   * paged_dtype_size((paged_dtype) p->dtype);
    return PAGED_OK;
}

/* DECODE and PREFILL: queries against paged contexts the client holds. */
static int v_attn(const struct pcore_sqe *s, const struct pv_env *env, struct pv_op *op,
                  struct pv_error *err)
{
    const struct pv_pool *p = op->pool;
    const struct pcore_req_attn *a = &s->u.attn;
    int prefill = s->opcode == PAGED_OP_PREFILL;
    struct carve c;
    if (s->layer < 0 || (uint32_t) s->layer >= p->num_layers)
        return fail(err, PAGED_E_LAYER, PCORE_FIELD_LAYER, 0);
    uint32_t ns = a->num_seqs;
    if (ns > PV_MAX_SEQS)
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_COUNT, 0);
    if (a->num_q_heads == 0 || a->num_q_heads > PV_MAX_Q_HEADS || a->num_q_heads % p->num_kv_heads != 0)
        return fail(err, PAGED_E_HEADS, PCORE_FIELD_HEADS, 0);
    if (!dtype_ok(a->dtype, p->dtype, 1))
        return fail(err, PAGED_E_DTYPE, PCORE_FIELD_DTYPE, 0);
    /* Bounded with no sequences too: the kernels take the stride as an int32. */
    if (a->bt_stride > PV_MAX_BT / (ns != 0 ? ns : 1) || (ns != 0 && a->bt_stride == 0))
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_BLOCK_TABLE, 0);
    uint64_t bt_n = (uint64_t) ns * a->bt_stride;
    if (!in_arena(a->bt_off, bt_n, 4, env->host_size))
        return fail(err, PAGED_E_RANGE, PCORE_FIELD_BLOCK_TABLE, 0);
    if (!in_arena(a->lens_off, ns, 4, env->host_size))
        return fail(err, PAGED_E_RANGE, PCORE_FIELD_SEQ_LENS, 0);
    if (prefill && !in_arena(a->qo_indptr_off, (uint64_t) ns + 1, 4, env->host_size))
        return fail(err, PAGED_E_RANGE, PCORE_FIELD_QO_INDPTR, 0);
    if (!isfinite(a->attn.sm_scale) || !isfinite(a->attn.soft_cap))
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_SCALE, 0);
    if (a->attn.window < 0)
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_WINDOW, 0);
    if (a->attn.has_alibi && !in_arena(a->attn.alibi_off, a->num_q_heads, 4, env->host_size))
        return fail(err, PAGED_E_RANGE, PCORE_FIELD_ALIBI, 0);

    size_t bytes = rnd(bt_n * 4) + rnd((size_t) ns * 4) + rnd(((size_t) ns + 1) * 4)
                   + rnd((size_t) a->num_q_heads * 4);
    int rc = op_alloc(op, bytes, &c, err);
    if (rc < 0)
        return rc;
    op->block_tables = carve(&c, bt_n * 4);
    op->seq_lens = carve(&c, (size_t) ns * 4);
    op->qo_indptr = carve(&c, ((size_t) ns + 1) * 4);
    copy_in(env, op->block_tables, a->bt_off, bt_n * 4);
    copy_in(env, op->seq_lens, a->lens_off, (size_t) ns * 4);
    if (a->attn.has_alibi) {
        op->alibi = carve(&c, (size_t) a->num_q_heads * 4);
        copy_in(env, op->alibi, a->attn.alibi_off, (size_t) a->num_q_heads * 4);
        for (uint32_t h = 0; h < a->num_q_heads; h++)
            if (!isfinite(op->alibi[h]))
                return fail(err, PAGED_E_INVAL, PCORE_FIELD_ALIBI, h);
    }
    if (prefill) {
        copy_in(env, op->qo_indptr, a->qo_indptr_off, ((size_t) ns + 1) * 4);
        if (op->qo_indptr[0] != 0)
            return fail(err, PAGED_E_INVAL, PCORE_FIELD_QO_INDPTR, 0);
    } else
        for (uint32_t i = 0; i <= ns; i++)
            op->qo_indptr[i] = (int32_t) i;

    uint64_t covered = (uint64_t) a->bt_stride * p->block_size;
    uint64_t ctx_tokens = 0;
    int32_t max_qo = 0;
    for (uint32_t i = 0; i < ns; i++) {
        int32_t len = op->seq_lens[i];
        if (len < 1)
            return fail(err, PAGED_E_INVAL, PCORE_FIELD_SEQ_LENS, i);
        if ((uint64_t) len > covered)
            return fail(err, PAGED_E_SEQLEN, PCORE_FIELD_SEQ_LENS, i);
        if (prefill) {
            int32_t lo = op->qo_indptr[i], hi = op->qo_indptr[i + 1];
            if (hi < lo || (uint64_t) hi > PV_MAX_TOKENS)
                return fail(err, PAGED_E_INVAL, PCORE_FIELD_QO_INDPTR, i + 1);
            if (hi - lo > len)
                return fail(err, PAGED_E_INVAL, PCORE_FIELD_QO_INDPTR, i + 1);
            if (hi - lo > max_qo)
                max_qo = hi - lo;
        }
        /* Only the blocks the length reaches are read; the rest of the row is zeroed so no
         * kernel could ever be handed an unchecked id. */
        uint32_t used = (uint32_t) (((uint64_t) len + p->block_size - 1) / p->block_size);
        int32_t *row = op->block_tables + (size_t) i * a->bt_stride;
        if ((rc = check_held(p, row, used, PCORE_FIELD_BLOCK_TABLE, err)) < 0) {
            err->index += i * a->bt_stride;
            return rc;
        }
        memset(row + used, 0, (size_t) (a->bt_stride - used) * sizeof *row);
        ctx_tokens += (uint64_t) len;
    }
    uint64_t rows = prefill ? (uint64_t) op->qo_indptr[ns] : ns;
    uint64_t es = paged_dtype_size((paged_dtype) a->dtype);
    uint64_t elems = rows * a->num_q_heads * p->head_dim;
    if (!in_arena(a->q_off, elems, es, env->data_size))
        return fail(err, PAGED_E_RANGE, PCORE_FIELD_Q, 0);
    if (a->q_off % es != 0)
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_Q, 0);
    if (!in_arena(a->out_off, elems, es, env->data_size))
        return fail(err, PAGED_E_RANGE, PCORE_FIELD_OUT, 0);
    if (a->out_off % es != 0)
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_OUT, 0);
    if (overlaps(a->q_off, elems * es, a->out_off, elems * es))
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_OUT, 0);

    op->layer_begin = s->layer;
    op->num_layers = 1;
    op->count = ns;
    op->dtype = (int32_t) a->dtype;
    op->num_q_heads = a->num_q_heads;
    op->bt_stride = a->bt_stride;
    op->q_off = a->q_off;
    op->out_off = a->out_off;
    op->total_q = (int32_t) rows;
    op->max_qo_len = prefill ? max_qo : (ns != 0);
    op->sm_scale = a->attn.sm_scale != 0 ? a->attn.sm_scale : 1.0f / sqrtf((float) p->head_dim);
    op->soft_cap = a->attn.soft_cap;
    op->window = a->attn.window;
    op->tokens = rows;
    op->kv_bytes = ctx_tokens * 2 * p->num_kv_heads * p->head_dim
                   * paged_dtype_size((paged_dtype) p->dtype);
    return PAGED_OK;
}

/* PUBLISH and LOOKUP: token ids hashed here, never a hash from the client. */
static int v_prefix(const struct pcore_sqe *s, const struct pv_env *env, struct pv_op *op,
                    struct pv_error *err)
{
    const struct pv_pool *p = op->pool;
    const struct pcore_req_prefix *a = &s->u.prefix;
    int publish = s->opcode == PAGED_OP_PUBLISH;
    struct carve c;
    uint32_t n = a->num_blocks;
    if (n > PV_MAX_BLOCKS || (uint64_t) n * p->block_size > PV_MAX_TOKENS * 16ull)
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_COUNT, 0);
    uint64_t ntok = (uint64_t) n * p->block_size;
    if (!in_arena(a->tokens_off, ntok, 4, env->host_size))
        return fail(err, PAGED_E_RANGE, PCORE_FIELD_TOKENS, 0);
    if (!in_arena(a->ids_off, n, 4, env->host_size))
        return fail(err, PAGED_E_RANGE, PCORE_FIELD_IDS, 0);
    uint32_t want = n;
    if (!publish && env->max_blocks != 0) {
        /* A lookup near the limit finds a shorter prefix rather than nothing. */
        uint64_t room = env->held_total < env->max_blocks ? env->max_blocks - env->held_total : 0;
        if (room == 0 && n != 0)
            return fail(err, PAGED_E_LIMIT, PCORE_FIELD_COUNT, 0);
        if (want > room)
            want = (uint32_t) room;
    }
    size_t bytes = rnd(ntok * 4) + rnd((size_t) n * 4) + rnd((size_t) n * sizeof(paged_hash));
    int rc = op_alloc(op, bytes, &c, err);
    if (rc < 0)
        return rc;
    int32_t *tokens = carve(&c, ntok * 4);
    op->hashes = carve(&c, (size_t) n * sizeof(paged_hash));
    if (publish) {
        op->ids = carve(&c, (size_t) n * 4);
        copy_in(env, op->ids, a->ids_off, (size_t) n * 4);
        if ((rc = check_held(p, op->ids, n, PCORE_FIELD_IDS, err)) < 0)
            return rc;
    }
    size_t hashed_tokens = (size_t) want * p->block_size;
    copy_in(env, tokens, a->tokens_off, hashed_tokens * 4);
    paged_hash parent = a->parent;
    long got = paged_hash_blocks(&parent, tokens, hashed_tokens, p->block_size, a->salt, op->hashes);
    if (got < 0 || (uint64_t) got != want)
        return fail(err, got < 0 ? (int) got : PAGED_E_INVAL, PCORE_FIELD_TOKENS, 0);
    op->count = want;
    op->out_ids_off = a->ids_off;
    return PAGED_OK;
}

/* The device-side dependency words (PCORE_SQE_WAIT, PCORE_SQE_SIGNAL): only on the ops the
 * backend runs, each a 4-byte-aligned word inside the data arena, or the host arena with
 * PCORE_SQE_HOST_WORDS (which needs one of the two). */
static int v_dep(const struct pcore_sqe *s, const struct pv_env *env, struct pv_op *op, struct pv_error *err)
{
    if ((s->flags & (PCORE_SQE_WAIT | PCORE_SQE_SIGNAL | PCORE_SQE_HOST_WORDS)) == 0)
        return PAGED_OK;
    if (!pv_backend_op(s->opcode) || (s->flags & (PCORE_SQE_WAIT | PCORE_SQE_SIGNAL)) == 0)
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_FLAGS, 0);
    if ((s->flags & PCORE_SQE_HOST_WORDS) && !env->host_words)
        return fail(err, PAGED_E_NOTSUP, PCORE_FIELD_FLAGS, 0);
    uint64_t size = (s->flags & PCORE_SQE_HOST_WORDS) ? env->host_size : env->data_size;
    if (s->flags & PCORE_SQE_WAIT) {
        if (!in_arena(s->dep.wait_off, 1, 4, size))
            return fail(err, PAGED_E_RANGE, PCORE_FIELD_WAIT, 0);
        if (s->dep.wait_off % 4 != 0)
            return fail(err, PAGED_E_INVAL, PCORE_FIELD_WAIT, 0);
        op->wait_off = s->dep.wait_off;
        op->wait_value = s->dep.wait_value;
    }
    if (s->flags & PCORE_SQE_SIGNAL) {
        if (!in_arena(s->dep.signal_off, 1, 4, size))
            return fail(err, PAGED_E_RANGE, PCORE_FIELD_SIGNAL, 0);
        if (s->dep.signal_off % 4 != 0)
            return fail(err, PAGED_E_INVAL, PCORE_FIELD_SIGNAL, 0);
        op->signal_off = s->dep.signal_off;
        op->signal_value = s->dep.signal_value;
    }
    return PAGED_OK;
}

/* Validates one request; see validate.h. */
int pv_validate(const struct pcore_sqe *s, const struct pv_env *env, struct pv_op *op,
                struct pv_error *err)
{
    memset(op, 0, sizeof *op);
    memset(err, 0, sizeof *err);
    op->opcode = s->opcode;
    op->flags = s->flags;
    op->tag = s->tag;
    if (s->opcode >= PCORE_OP_COUNT_)
        return fail(err, PAGED_E_OPCODE, PCORE_FIELD_OPCODE, 0);
    if ((s->flags & ~(PCORE_SQE_ALL_LAYERS | PCORE_SQE_WAIT | PCORE_SQE_SIGNAL | PCORE_SQE_HOST_WORDS)) != 0
        || ((s->flags & PCORE_SQE_ALL_LAYERS) && s->opcode != PAGED_OP_APPEND))
        return fail(err, PAGED_E_INVAL, PCORE_FIELD_FLAGS, 0);
    int rc = v_dep(s, env, op, err);
    if (rc < 0)
        return rc;
    if (s->opcode == PAGED_OP_NOP)
        return PAGED_OK;
    const struct pv_pool *p = env->find_pool(env->ctx, s->pool);
    if (p == NULL)
        return fail(err, PAGED_E_NOENT, PCORE_FIELD_POOL, 0);
    /* A COPY into another pool writes that one only (copy_dst_pool checks it). */
    if (pv_op_writes(s->opcode) && !p->writable && !copy_across(s))
        return fail(err, PAGED_E_READONLY, PCORE_FIELD_POOL, 0);
    /* Keys, values, queries and outputs live in the client's data arena, on its device. */
    if (p->device != env->device && s->opcode != PAGED_OP_COPY && pv_backend_op(s->opcode))
        return fail(err, PAGED_E_XDEV, PCORE_FIELD_POOL, 0);
    op->pool = p;
    switch (s->opcode) {
    case PAGED_OP_ALLOC: rc = v_alloc(s, env, op, err); break;
    case PAGED_OP_FREE:
    case PAGED_OP_FORK: rc = v_blocks(s, env, op, err); break;
    case PAGED_OP_APPEND: rc = v_append(s, env, op, err); break;
    case PAGED_OP_DECODE:
    case PAGED_OP_PREFILL: rc = v_attn(s, env, op, err); break;
    case PAGED_OP_COPY: rc = v_copy(s, env, op, err); break;
    case PAGED_OP_PUBLISH:
    case PAGED_OP_LOOKUP: rc = v_prefix(s, env, op, err); break;
    default: rc = fail(err, PAGED_E_OPCODE, PCORE_FIELD_OPCODE, 0); break;
    }
    if (rc < 0) {
        pv_op_free(op);
        op->opcode = s->opcode;
        op->tag = s->tag;
    }
    return rc;
}
