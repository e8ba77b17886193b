/* sync.c: the synchronous API: stage arguments in the arenas, run one request, copy results back. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <string.h>

#include "lib/client.h"

/* Array fields, whose completions name an element; the others are scalars. */
static int field_has_index(unsigned field)
{
    switch (field) {
    case PCORE_FIELD_IDS: case PCORE_FIELD_K: case PCORE_FIELD_V: case PCORE_FIELD_SLOTS:
    case PCORE_FIELD_Q: case PCORE_FIELD_OUT: case PCORE_FIELD_BLOCK_TABLE:
    case PCORE_FIELD_SEQ_LENS: case PCORE_FIELD_QO_INDPTR: case PCORE_FIELD_ALIBI:
    case PCORE_FIELD_SRC: case PCORE_FIELD_DST: case PCORE_FIELD_TOKENS:
        return 1;
    default:
        return 0;
    }
}

/* Explains an error completion in c->err: "decode: block_tables[3]: block not held ...". */
static void explain(paged_client *c, const struct pcore_cqe *e)
{
    const char *op = pc_op_name(e->opcode);
    const char *why = paged_strerror(e->status);
    if (e->err_field == PCORE_FIELD_NONE || e->err_field >= PCORE_FIELD_COUNT_)
        pc_set_err(c, "%s: %s", op, why);
    else if (field_has_index(e->err_field))
        pc_set_err(c, "%s: %s[%u]: %s", op, paged_field_name(e->err_field), e->err_index, why);
    else
        pc_set_err(c, "%s: %s: %s", op, paged_field_name(e->err_field), why);
}

/* Returns whether the sync slot passed as arg has its completion: the wait condition. */
static int slot_done(paged_client *c, void *arg)
{
    return c->slots[*(uint32_t *) arg].done;
}

/* Returns whether the SQ has room for one more entry past those prepared. */
static int sq_room(paged_client *c, void *arg)
{
    (void) arg;
    int space = pcore_ring_prod_space(&c->sq, c->prepared + 1);
    return space < 0 ? PAGED_E_RING : (uint32_t) space > c->prepared;
}

/* Runs one request synchronously; see client.h. */
int pc_sync_run(paged_client *c, const paged_request *req, struct pcore_cqe *cqe)
{
    if (c->dead != 0)
        return c->dead;
    if (!pc_slot_room(c)) {
        pc_set_err(c, "%s: %u requests are in flight or unreaped: reap some first",
                   pc_op_name(req->op), c->cq_entries);
        return PAGED_E_AGAIN;
    }
    struct pcore_sqe e;
    int enc = pc_encode_sqe(c, req, &e);
    if (enc < 0)
        return enc;
    int idx = pc_prep_sqe(c, &e, PC_SLOT_SYNC, 0);
    /* The SQ itself is full: hand the daemon what is there and wait for room. The slot
     * check above stays true meanwhile, since nothing here takes slots. */
    for (int tries = 0; idx == PAGED_E_AGAIN && tries < 1000000; tries++) {
        int rc = pc_submit(c);
        if (rc < 0)
            return rc;
        rc = pc_wait_until(c, -1, sq_room, NULL);
        if (rc < 0)
            return rc;
        idx = pc_prep_sqe(c, &e, PC_SLOT_SYNC, 0);
    }
    if (idx < 0)
        return idx;
    uint32_t slot = (uint32_t) idx;
    int rc = pc_submit(c);
    if (rc < 0)
        return rc;
    /* No time limit: until the completion comes, the daemon may still write our staging
     * memory, so giving up would let the next call's data be overwritten. A daemon that
     * dies or shuts down still ends the wait. */
    rc = pc_wait_until(c, -1, slot_done, &slot);
    if (rc < 0)
        return rc;
    *cqe = c->slots[slot].cqe;
    pc_slot_put(c, slot);
    if (cqe->status > 0)
        cqe->status = PAGED_E_PROTO;
    if (cqe->status < 0)
        explain(c, cqe);
    return cqe->status;
}

/* A synchronous call: its request, and the arena marks to rewind to whatever happens. */
struct stage {
    paged_client *c;
    const char *op;               /* the op's name, for messages */
    paged_request q;
    uint64_t host_mark;
    uint64_t data_mark;
};

/* Starts a synchronous op on pool p (at layer, where the op has one): its request, filled in
 * as its arguments are staged, and the marks to rewind the arenas to. */
static void stage_begin(struct stage *st, paged_pool *p, paged_op op, int32_t layer)
{
    paged_client *c = p->c;
    st->c = c;
    st->op = pc_op_name(op);
    st->q = (paged_request) { .op = op, .pool = p, .layer = layer };
    st->host_mark = paged_arena_mark(c, PAGED_ARENA_HOST);
    st->data_mark = paged_arena_mark(c, PAGED_ARENA_DATA);
    c->err[0] = '\0';
}

/* Frees everything staged. */
static void stage_end(struct stage *st)
{
    paged_arena_release(st->c, PAGED_ARENA_HOST, st->host_mark);
    paged_arena_release(st->c, PAGED_ARENA_DATA, st->data_mark);
}

/* Carves bytes from an arena for the staged call; PAGED_OK or PAGED_E_NOMEM, explained. */
static int stage_carve(struct stage *st, paged_arena_kind kind, uint64_t bytes, uint64_t *off)
{
    int rc = pc_arena_carve(pc_arena_of(st->c, kind), bytes, 64, off);
    if (rc < 0)
        pc_set_err(st->c, "%s: the %s arena has no room for %llu more bytes", st->op,
                   kind == PAGED_ARENA_HOST ? "host" : "data", (unsigned long long) bytes);
    return rc;
}

/* Copies bytes of host memory src (NULL: nothing to copy) into the host arena. */
static int stage_host(struct stage *st, const void *src, uint64_t bytes, uint64_t *off)
{
    int rc = stage_carve(st, PAGED_ARENA_HOST, bytes, off);
    if (rc == PAGED_OK && src != NULL && bytes > 0)
        memcpy(st->c->host.base + *off, src, (size_t) bytes);
    return rc;
}

/* Copies between the data arena at off and the caller's tensor p (host memory on the cpu
 * backend, a device pointer on cuda); to_arena says the direction. */
static int data_copy(struct stage *st, uint64_t off, void *p, uint64_t bytes, int to_arena)
{
    paged_client *c = st->c;
    if (bytes == 0)
        return PAGED_OK;
    if (c->backend != PAGED_BACKEND_CUDA) {
        if (to_arena)
            memcpy(c->host.base + off, p, (size_t) bytes);
        else
            memcpy(p, c->host.base + off, (size_t) bytes);
        return PAGED_OK;
    }
    int rc = pc_data_arena_map(c);
    if (rc < 0)
        return rc;
    uint64_t arena = c->data_map.dptr + off;
    uint64_t user = (uint64_t) (uintptr_t) p;
    return pc_cuda_copy(c->cuda, c->data_map.device, to_arena ? arena : user,
                        to_arena ? user : arena, (size_t) bytes, c->err, sizeof c->err);
}

/* Carves bytes in the data arena and copies the caller's tensor src (may be NULL) in. */
static int stage_data(struct stage *st, const void *src, uint64_t bytes, uint64_t *off)
{
    int rc = stage_carve(st, PAGED_ARENA_DATA, bytes, off);
    if (rc == PAGED_OK && src != NULL)
        rc = data_copy(st, *off, (void *) src, bytes, 1);
    return rc;
}

/* Multiplies a * b into *out; returns 0 on overflow. */
static int mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

/* Returns after a NOP round trip. */
int paged_nop(paged_client *c)
{
    if (c == NULL)
        return PAGED_E_INVAL;
    c->err[0] = '\0';
    paged_request q = { .op = PAGED_OP_NOP };
    struct pcore_cqe r;
    return pc_sync_run(c, &q, &r);
}

/* Runs ALLOC, FREE or FORK over count block ids (ids_out receives ALLOC's). */
static int blocks_call(paged_pool *p, paged_op op, uint32_t count, const int32_t *ids_in,
                       int32_t *ids_out)
{
    if (p == NULL || (count > 0 && ids_in == NULL && ids_out == NULL))
        return PAGED_E_INVAL;
    paged_client *c = p->c;
    struct stage st;
    stage_begin(&st, p, op, 0);
    struct pcore_cqe r;
    uint64_t off;
    int rc = stage_host(&st, ids_in, (uint64_t) count * sizeof(int32_t), &off);
    if (rc == PAGED_OK) {
        st.q.u.blocks.count = count;
        st.q.u.blocks.ids_off = off;
        rc = pc_sync_run(c, &st.q, &r);
    }
    if (rc == PAGED_OK && ids_out != NULL) {
        if (r.count != count) {
            pc_set_err(c, "alloc: the daemon granted %u of %u blocks", r.count, count);
            rc = PAGED_E_PROTO;
        } else {
            memcpy(ids_out, c->host.base + off, (size_t) count * sizeof(int32_t));
        }
    }
    stage_end(&st);
    return rc;
}

/* Takes count blocks, all or nothing. */
int paged_alloc(paged_pool *p, uint32_t count, int32_t *ids)
{
    return blocks_call(p, PAGED_OP_ALLOC, count, NULL, ids);
}

/* Drops one reference to each block. */
int paged_free(paged_pool *p, uint32_t count, const int32_t *ids)
{
    return blocks_call(p, PAGED_OP_FREE, count, ids, NULL);
}

/* Takes one more reference to each block. */
int paged_fork(paged_pool *p, uint32_t count, const int32_t *ids)
{
    return blocks_call(p, PAGED_OP_FORK, count, ids, NULL);
}

/* Copies whole blocks src[i] -> dst[i]. */
int paged_copy(paged_pool *p, uint32_t count, const int32_t *src, const int32_t *dst)
{
    return paged_copy_to(p, p, count, src, dst);
}

/* Copies whole blocks src[i] of from -> dst[i] of to. */
int paged_copy_to(paged_pool *from, paged_pool *to, uint32_t count, const int32_t *src, const int32_t *dst)
{
    paged_pool *p = from;
    if (p == NULL || to == NULL || to->c != p->c || (count > 0 && (src == NULL || dst == NULL)))
        return PAGED_E_INVAL;
    struct stage st;
    stage_begin(&st, p, PAGED_OP_COPY, 0);
    st.q.u.copy.dst_pool = to != from ? to : NULL;
    struct pcore_cqe r;
    uint64_t bytes = (uint64_t) count * sizeof(int32_t);
    int rc = stage_host(&st, src, bytes, &st.q.u.copy.src_off);
    if (rc == PAGED_OK)
        rc = stage_host(&st, dst, bytes, &st.q.u.copy.dst_off);
    if (rc == PAGED_OK) {
        st.q.u.copy.count = count;
        rc = pc_sync_run(p->c, &st.q, &r);
    }
    stage_end(&st);
    return rc;
}

/* Returns the bytes of rows x num_heads x head_dim elements of dtype, or 0 with *ok cleared
 * on overflow or an invalid dtype (explained). */
static uint64_t tensor_bytes(paged_client *c, const char *op, uint64_t rows, uint32_t heads,
                             uint32_t head_dim, paged_dtype dtype, int *ok)
{
    size_t es = paged_dtype_size(dtype);
    uint64_t n;
    if (es == 0) {
        pc_set_err(c, "%s: dtype: %d is not a dtype", op, (int) dtype);
        *ok = PAGED_E_DTYPE;
        return 0;
    }
    if (!mul_ok(rows, heads, &n) || !mul_ok(n, head_dim, &n) || !mul_ok(n, es, &n)) {
        pc_set_err(c, "%s: tensor size overflows", op);
        *ok = PAGED_E_INVAL;
        return 0;
    }
    return n;
}

/* Writes new keys and values into slots. */
int paged_append(paged_pool *p, int32_t layer, uint32_t num_tokens, paged_dtype dtype,
                 const void *k, const void *v, const int32_t *slots)
{
    if (p == NULL || (num_tokens > 0 && (k == NULL || v == NULL || slots == NULL)))
        return PAGED_E_INVAL;
    paged_client *c = p->c;
    struct stage st;
    stage_begin(&st, p, PAGED_OP_APPEND, layer);
    int rc = PAGED_OK;
    uint64_t layers = layer == PAGED_ALL_LAYERS ? p->info.num_layers : 1;
    uint64_t bytes = tensor_bytes(c, st.op, layers * num_tokens, p->info.num_kv_heads,
                                  p->info.head_dim, dtype, &rc);
    struct pcore_cqe r;
    if (rc == PAGED_OK)
        rc = stage_data(&st, k, bytes, &st.q.u.append.k_off);
    if (rc == PAGED_OK)
        rc = stage_data(&st, v, bytes, &st.q.u.append.v_off);
    if (rc == PAGED_OK)
        rc = stage_host(&st, slots, (uint64_t) num_tokens * sizeof(int32_t), &st.q.u.append.slots_off);
    if (rc == PAGED_OK) {
        st.q.u.append.num_tokens = num_tokens;
        st.q.u.append.dtype = dtype;
        rc = pc_sync_run(c, &st.q, &r);
    }
    stage_end(&st);
    return rc;
}

/* Runs DECODE or PREFILL synchronously. */
static int attn_call(paged_pool *p, paged_op op, int32_t layer, const paged_attn_args *a)
{
    if (p == NULL || a == NULL)
        return PAGED_E_INVAL;
    paged_client *c = p->c;
    struct stage st;
    stage_begin(&st, p, op, layer);
    const char *name = st.op;
    uint32_t ns = a->num_seqs;
    if (ns > 0 && (a->q == NULL || a->out == NULL || a->block_tables == NULL || a->seq_lens == NULL
                   || (op == PAGED_OP_PREFILL && a->qo_indptr == NULL))) {
        pc_set_err(c, "%s: a needed array is NULL", name);
        return PAGED_E_INVAL;
    }
    uint64_t rows = ns;
    if (op == PAGED_OP_PREFILL) {
        int32_t total = ns > 0 ? a->qo_indptr[ns] : 0;
        if (total < 0) {
            pc_set_err(c, "prefill: qo_indptr[%u]: %d is negative", ns, total);
            return PAGED_E_INVAL;
        }
        rows = (uint64_t) total;
    }
    int rc = PAGED_OK;
    uint64_t qbytes = tensor_bytes(c, name, rows, a->num_q_heads, p->info.head_dim, a->dtype, &rc);
    uint64_t btbytes = 0;
    if (rc == PAGED_OK && !mul_ok((uint64_t) ns * a->bt_stride, sizeof(int32_t), &btbytes)) {
        pc_set_err(c, "%s: block table size overflows", name);
        rc = PAGED_E_INVAL;
    }
    struct pcore_cqe r;
    if (rc == PAGED_OK)
        rc = stage_data(&st, a->q, qbytes, &st.q.u.attn.q_off);
    if (rc == PAGED_OK)
        rc = stage_data(&st, NULL, qbytes, &st.q.u.attn.out_off);
    if (rc == PAGED_OK)
        rc = stage_host(&st, a->block_tables, btbytes, &st.q.u.attn.block_tables_off);
    if (rc == PAGED_OK)
        rc = stage_host(&st, a->seq_lens, (uint64_t) ns * sizeof(int32_t), &st.q.u.attn.seq_lens_off);
    if (rc == PAGED_OK && op == PAGED_OP_PREFILL)
        rc = stage_host(&st, a->qo_indptr, ((uint64_t) ns + 1) * sizeof(int32_t),
                        &st.q.u.attn.qo_indptr_off);
    if (rc == PAGED_OK && a->alibi_slopes != NULL) {
        rc = stage_host(&st, a->alibi_slopes, (uint64_t) a->num_q_heads * sizeof(float),
                        &st.q.u.attn.opts.alibi_off);
        st.q.u.attn.opts.has_alibi = 1;
    }
    if (rc == PAGED_OK) {
        st.q.u.attn.num_seqs = ns;
        st.q.u.attn.num_q_heads = a->num_q_heads;
        st.q.u.attn.dtype = a->dtype;
        st.q.u.attn.bt_stride = a->bt_stride;
        st.q.u.attn.opts.sm_scale = a->sm_scale;
        st.q.u.attn.opts.soft_cap = a->soft_cap;
        st.q.u.attn.opts.window = a->window;
        rc = pc_sync_run(c, &st.q, &r);
    }
    if (rc == PAGED_OK)
        rc = data_copy(&st, st.q.u.attn.out_off, a->out, qbytes, 0);
    stage_end(&st);
    return rc;
}

/* One query token per sequence against its context. */
int paged_decode(paged_pool *p, int32_t layer, const paged_attn_args *args)
{
    return attn_call(p, PAGED_OP_DECODE, layer, args);
}

/* Ragged query tokens per sequence, causally masked at the end of each context. */
int paged_prefill(paged_pool *p, int32_t layer, const paged_attn_args *args)
{
    return attn_call(p, PAGED_OP_PREFILL, layer, args);
}

/* Runs PUBLISH or LOOKUP synchronously; returns the completion's count or an error. */
static int prefix_call(paged_pool *p, paged_op op, const paged_hash *parent, uint64_t salt,
                       uint32_t num_blocks, const int32_t *tokens, const int32_t *ids_in,
                       int32_t *ids_out)
{
    if (p == NULL || (num_blocks > 0 && (tokens == NULL || (ids_in == NULL && ids_out == NULL))))
        return PAGED_E_INVAL;
    paged_client *c = p->c;
    struct stage st;
    stage_begin(&st, p, op, 0);
    struct pcore_cqe r;
    uint64_t ntok;
    int rc = PAGED_OK;
    if (!mul_ok(num_blocks, p->info.block_size, &ntok) || ntok > INT32_MAX) {
        pc_set_err(c, "%s: %u blocks of tokens is too many", pc_op_name(op), num_blocks);
        rc = PAGED_E_INVAL;
    }
    if (rc == PAGED_OK)
        rc = stage_host(&st, tokens, ntok * sizeof(int32_t), &st.q.u.prefix.tokens_off);
    if (rc == PAGED_OK)
        rc = stage_host(&st, ids_in, (uint64_t) num_blocks * sizeof(int32_t), &st.q.u.prefix.ids_off);
    if (rc == PAGED_OK) {
        st.q.u.prefix.num_blocks = num_blocks;
        st.q.u.prefix.salt = salt;
        if (parent != NULL)
            st.q.u.prefix.parent = *parent;
        rc = pc_sync_run(c, &st.q, &r);
    }
    if (rc == PAGED_OK) {
        if (r.count > num_blocks || r.count > INT32_MAX) {
            pc_set_err(c, "%s: the daemon reported %u of %u blocks", pc_op_name(op), r.count,
                       num_blocks);
            rc = PAGED_E_PROTO;
        } else {
            if (ids_out != NULL)
                memcpy(ids_out, c->host.base + st.q.u.prefix.ids_off, (size_t) r.count * sizeof(int32_t));
            rc = (int) r.count;
        }
    }
    stage_end(&st);
    return rc;
}

/* Publishes full blocks under their chained hashes; returns the number newly published. */
int paged_publish(paged_pool *p, const paged_hash *parent, uint64_t salt, uint32_t num_blocks,
                  const int32_t *tokens, const int32_t *ids)
{
    return prefix_call(p, PAGED_OP_PUBLISH, parent, salt, num_blocks, tokens, ids, NULL);
}

/* Looks a prefix up, taking a reference to each block found; returns the number found. */
int paged_lookup(paged_pool *p, const paged_hash *parent, uint64_t salt, uint32_t num_blocks,
                 const int32_t *tokens, int32_t *ids)
{
    return prefix_call(p, PAGED_OP_LOOKUP, parent, salt, num_blocks, tokens, NULL, ids);
}
