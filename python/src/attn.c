/* attn.c: a pool's APPEND, DECODE and PREFILL: arguments checked, found in or staged into the arena, run. */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

#include <string.h>

/* One call's state: its request, which holds the call's arrays and scratch (until the call
 * fails, or the request completes once submitted), whether the client is marked busy, and on
 * the cuda backend the device and stream of its tensors (dev NULL on the cpu backend). */
struct call {
    pyp_pool *pool;
    pyp_request *req;
    int entered;
    struct pyp_devctx devctx;
    const struct pyp_devctx *dev;
};

/* Starts a call on pool p; returns 0, or -1 with MemoryError. */
static int call_begin(struct call *k, pyp_pool *p)
{
    memset(k, 0, sizeof *k);
    k->pool = p;
    k->req = pyp_request_new(p->client);
    return k->req != NULL ? 0 : -1;
}

/* Keeps the memory of a cuda call that failed before its submission until the staging
 * copies it queued on the stream are done: the stream writes the input word after them (if
 * it did not already), and the request retires when it is written. Returns nothing. */
static void call_fail_on_stream(struct call *k)
{
    pyp_request *r = k->req;
    if (r == NULL || !r->sync.on || r->state != PYP_REQ_NEW || k->pool->client->pc == NULL)
        return;
    struct pyp_sync *s = &r->sync;
    s->release_off = PYP_WORD_IN(s);
    if (!s->signalled
        && paged_stream_signal(k->pool->client->pc, s->stream, PYP_WORD_IN(s), s->value, PAGED_STREAM_HOST) < 0)
        return; /* the device refuses work: nothing more will run on the stream */
    (void) pyp_client_retire_later(k->pool->client, r);
}

/* Ends a call: drops its reference to the request (which frees the scratch and releases the
 * views unless the request is in flight or its stream may still use them), unmarks the
 * client; returns r. */
static PyObject *call_end(struct call *k, PyObject *r)
{
    if (r == NULL)
        call_fail_on_stream(k);
    Py_XDECREF((PyObject *) k->req);
    if (k->entered)
        pyp_client_leave(k->pool->client);
    return r;
}

/* Takes the call's stream argument: on the cuda backend the device of the data arena and
 * the stream (pyp_cuda_stream); on the cpu backend only None. Returns 0, or -1 with an
 * exception naming "stream". */
static int call_stream(struct call *k, PyObject *stream)
{
    pyp_client *c = k->pool->client;
    if (c->pc == NULL || c->closed) {
        pyp_raise_closed("the client");
        return -1;
    }
    if (!c->cuda) {
        if (stream != NULL && stream != Py_None) {
            PyErr_SetString(PyExc_TypeError, "stream: the cpu backend takes stream=None (its requests are "
                            "ordered by the host)");
            return -1;
        }
        return 0;
    }
    k->devctx.device = pyp_client_device(c);
    if (k->devctx.device < 0
        || pyp_cuda_stream(stream != NULL ? stream : Py_None, k->devctx.device, &k->devctx.stream, "stream") < 0)
        return -1;
    k->dev = &k->devctx;
    return 0;
}

/* Sees obj as argument arg of element type dtype and ndim dimensions of shape (-1: any):
 * a data argument (a tensor: device memory on the cuda backend) when data is set, else host
 * memory. A data argument's dtype -2 takes any of the pool's tensor dtypes, which *dtype then
 * receives. Returns the view, or NULL with an exception naming arg. */
static struct pyp_view *call_view_of(struct call *k, PyObject *obj, const char *arg, int *dtype, int ndim,
                                     const int64_t *shape, int writable, int data)
{
    struct pyp_view *v = &k->req->views[k->req->nviews++];
    int list = *dtype == PYP_I32 || *dtype == PAGED_DTYPE_F32 ? *dtype : 0;
    int got = data ? pyp_view_get_data(v, obj, arg, list, writable, k->dev)
                   : pyp_view_get(v, obj, arg, list, writable);
    if (got < 0 || pyp_view_expect(v, ndim, shape) < 0)
        return NULL;
    if (*dtype == -2) {
        paged_dtype pool = k->pool->info.dtype;
        int ok = v->dtype == (int) pool
                 || (pool == PAGED_DTYPE_FP8_E4M3
                     && (v->dtype == PAGED_DTYPE_F32 || v->dtype == PAGED_DTYPE_F16 || v->dtype == PAGED_DTYPE_BF16));
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "%s: expected %s (the pool's dtype%s), got %s", arg,
                         pyp_dtype_name(pool), pool == PAGED_DTYPE_FP8_E4M3 ? ", or f32, f16, bf16" : "",
                         v->dtype_name);
            return NULL;
        }
        *dtype = v->dtype;
    } else if (v->dtype != *dtype) {
        PyErr_Format(PyExc_TypeError, "%s: expected %s, got %s", arg, pyp_dtype_name(*dtype), v->dtype_name);
        return NULL;
    }
    return v;
}

/* Sees obj as host-memory argument arg (call_view_of); returns the view or NULL. */
static struct pyp_view *call_view(struct call *k, PyObject *obj, const char *arg, int *dtype, int ndim,
                                  const int64_t *shape, int writable)
{
    return call_view_of(k, obj, arg, dtype, ndim, shape, writable, 0);
}

/* Sees obj as tensor argument arg (call_view_of): q, k, v, out; returns the view or NULL. */
static struct pyp_view *call_tensor(struct call *k, PyObject *obj, const char *arg, int *dtype, int ndim,
                                    const int64_t *shape, int writable)
{
    return call_view_of(k, obj, arg, dtype, ndim, shape, writable, 1);
}

/* Marks the client busy for the call and, on the cuda backend, releases the memory of
 * earlier requests that their streams are done with and takes the call's dependency words
 * (struct pyp_sync), each set one below the value they will be written; returns 0 or -1
 * with an exception. */
static int call_enter(struct call *k)
{
    if (pyp_pool_enter(k->pool) < 0)
        return -1;
    k->entered = 1;
    if (k->dev == NULL)
        return 0;
    pyp_client *c = k->pool->client;
    pyp_client_retire(c, 0);
    struct pyp_sync *s = &k->req->sync;
    if (pyp_scratch_alloc(&k->req->scratch, PAGED_ARENA_HOST, 12, "stream", &s->off) < 0)
        return -1;
    /* One counter per client: a word's values only grow, also across the requests that
     * reuse its memory, and two requests in flight never share one. */
    s->value = ++c->word_seq;
    for (int i = 0; i < 3; i++)
        __atomic_store_n(pyp_client_word(c, s->off + 4 * (uint64_t) i), s->value - 1, __ATOMIC_RELEASE);
    s->on = 1;
    s->release_off = PYP_WORD_COPIED(s);
    s->stream = k->dev->stream;
    return 0;
}

/* Stages view v into arena kind: a data argument of the cuda backend by a copy on the
 * call's stream; returns 0 or -1. */
static int call_stage(struct call *k, const struct pyp_view *v, paged_arena_kind kind, uint64_t *off)
{
    const struct pyp_devctx *dev = kind == PAGED_ARENA_DATA ? k->dev : NULL;
    return pyp_view_stage(k->pool->client, &k->req->scratch, v, kind, dev, off);
}

/* Submits the call's request q, its result (None for append) kept by the request; on the
 * cuda backend first queues on the call's stream the write of the input word the request
 * waits for (after the caller's earlier work and the staging copies) and marks an output
 * array as written by the request. Returns the result once complete (wait) or the Request
 * (not wait), or NULL with the error raised. */
static PyObject *call_submit(struct call *k, paged_request *q, PyObject *result, int wait)
{
    pyp_request *r = k->req;
    r->result = result;
    if (r->sync.on) {
        pyp_client *c = k->pool->client;
        struct pyp_sync *s = &r->sync;
        int rc = paged_stream_signal(c->pc, s->stream, PYP_WORD_IN(s), s->value, PAGED_STREAM_HOST);
        if (rc < 0) {
            pyp_raise_client(c, rc);
            return NULL;
        }
        s->signalled = 1;
        q->dep = (paged_dep) { .flags = PAGED_DEP_WAIT | PAGED_DEP_SIGNAL | PAGED_DEP_HOST,
                               .wait_value = s->value, .signal_value = s->value,
                               .wait_off = PYP_WORD_IN(s), .signal_off = PYP_WORD_OUT(s) };
        if (result != NULL && PyObject_TypeCheck(result, pyp_array_type)) {
            pyp_array *a = (pyp_array *) result;
            a->has_ready = 1;
            a->ready_off = PYP_WORD_OUT(s);
            a->ready_value = s->value;
            a->ready_stream = s->stream;
        }
    }
    return pyp_request_run(r, q, wait);
}

/* append(layer, k, v, slots, *, wait=True, stream=None): writes new keys and values into
 * slots; returns None, or with wait=False the Request at once. */
PyObject *pyp_pool_append(pyp_pool *p, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = { "layer", "k", "v", "slots", "wait", "stream", NULL };
    int layer, wait = 1;
    PyObject *ko, *vo, *so, *stream = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iOOO|$pO:append", kwlist, &layer, &ko, &vo, &so, &wait,
                                     &stream))
        return NULL;
    if (p->pp == NULL)
        return pyp_raise_closed("the pool");
    struct call k;
    if (call_begin(&k, p) < 0 || call_stream(&k, stream) < 0)
        return call_end(&k, NULL);
    const paged_pool_info *i = &p->info;
    int all = layer == PAGED_ALL_LAYERS, nd = all ? 4 : 3;
    int64_t shape[4] = { i->num_layers, -1, i->num_kv_heads, i->head_dim };
    const int64_t *kshape = all ? shape : shape + 1;
    int dtype = -2, vdtype, i32 = PYP_I32;
    struct pyp_view *kv = call_tensor(&k, ko, "k", &dtype, nd, kshape, 0);
    if (kv == NULL)
        return call_end(&k, NULL);
    int64_t n = kv->shape[all ? 1 : 0];
    shape[1] = n;
    vdtype = dtype;
    struct pyp_view *vv = call_tensor(&k, vo, "v", &vdtype, nd, kshape, 0);
    struct pyp_view *sv = vv != NULL ? call_view(&k, so, "slots", &i32, 1, &n, 0) : NULL;
    if (sv == NULL || call_enter(&k) < 0)
        return call_end(&k, NULL);
    paged_request q = { .op = PAGED_OP_APPEND, .pool = p->pp, .layer = layer };
    q.u.append.num_tokens = (uint32_t) n;
    q.u.append.dtype = (paged_dtype) dtype;
    if (call_stage(&k, kv, PAGED_ARENA_DATA, &q.u.append.k_off) < 0
        || call_stage(&k, vv, PAGED_ARENA_DATA, &q.u.append.v_off) < 0
        || call_stage(&k, sv, PAGED_ARENA_HOST, &q.u.append.slots_off) < 0)
        return call_end(&k, NULL);
    Py_INCREF(Py_None);
    return call_end(&k, call_submit(&k, &q, Py_None, wait));
}

/* The arguments of DECODE and PREFILL. */
struct attn_args {
    int layer;
    PyObject *q, *qo_indptr, *block_tables, *seq_lens, *alibi, *out, *stream;
    float scale, soft_cap;
    int window;
    int wait;
};

/* Runs DECODE or PREFILL with a; returns out (or a new ArenaArray), with a->wait false the
 * Request at once, or NULL with an exception naming the argument at fault. */
static PyObject *attn_call(pyp_pool *p, paged_op op, const struct attn_args *a)
{
    if (p->pp == NULL)
        return pyp_raise_closed("the pool");
    struct call k;
    if (call_begin(&k, p) < 0 || call_stream(&k, a->stream) < 0)
        return call_end(&k, NULL);
    int dtype = -2, i32 = PYP_I32, f32 = PAGED_DTYPE_F32;
    int64_t qshape[3] = { -1, -1, p->info.head_dim };
    struct pyp_view *qv = call_tensor(&k, a->q, "q", &dtype, 3, qshape, 0);
    if (qv == NULL)
        return call_end(&k, NULL);
    int64_t any = -1;
    struct pyp_view *lv = call_view(&k, a->seq_lens, "seq_lens", &i32, 1, &any, 0);
    if (lv == NULL)
        return call_end(&k, NULL);
    int64_t ns = lv->shape[0], nind = ns + 1, hq = qv->shape[1];
    int64_t btshape[2] = { ns, -1 };
    struct pyp_view *bv = call_view(&k, a->block_tables, "block_tables", &i32, 2, btshape, 0);
    struct pyp_view *iv = NULL, *av = NULL, *ov = NULL;
    if (bv == NULL)
        return call_end(&k, NULL);
    if (op == PAGED_OP_PREFILL) {
        iv = call_view(&k, a->qo_indptr, "qo_indptr", &i32, 1, &nind, 0);
        if (iv == NULL)
            return call_end(&k, NULL);
        int32_t total = ((const int32_t *) iv->data)[ns];
        if (total != qv->shape[0]) {
            PyErr_Format(PyExc_ValueError, "qo_indptr: its last entry (%d) is not q's rows (%lld)", (int) total,
                         (long long) qv->shape[0]);
            return call_end(&k, NULL);
        }
    } else if (qv->shape[0] != ns) {
        PyErr_Format(PyExc_ValueError, "q: %lld rows for %lld sequences (seq_lens); decode takes one each",
                     (long long) qv->shape[0], (long long) ns);
        return call_end(&k, NULL);
    }
    if (a->alibi != NULL && a->alibi != Py_None
        && (av = call_view(&k, a->alibi, "alibi_slopes", &f32, 1, &hq, 0)) == NULL)
        return call_end(&k, NULL);
    PyObject *result = NULL;
    if (a->out != NULL && a->out != Py_None) {
        int odtype = dtype;
        if ((ov = call_tensor(&k, a->out, "out", &odtype, 3, qv->shape, 1)) == NULL)
            return call_end(&k, NULL);
        Py_INCREF(a->out);
        result = a->out;
    } else {
        if (p->client->pc == NULL || p->client->closed)
            return call_end(&k, pyp_raise_closed("the client"));
        if ((result = pyp_array_new(p->client, PAGED_ARENA_DATA, dtype, 3, qv->shape)) == NULL)
            return call_end(&k, NULL);
        ov = &k.req->views[k.req->nviews++];
        if (pyp_view_get_data(ov, result, "out", 0, 1, k.dev) < 0) {
            Py_DECREF(result);
            return call_end(&k, NULL);
        }
    }
    paged_request q = { .op = op, .pool = p->pp, .layer = a->layer };
    q.u.attn.num_seqs = (uint32_t) ns;
    q.u.attn.num_q_heads = (uint32_t) hq;
    q.u.attn.dtype = (paged_dtype) dtype;
    q.u.attn.bt_stride = (uint32_t) bv->shape[1];
    q.u.attn.opts = (paged_attn_opts) { .sm_scale = a->scale, .soft_cap = a->soft_cap, .window = a->window };
    int ok = call_enter(&k) == 0 && call_stage(&k, qv, PAGED_ARENA_DATA, &q.u.attn.q_off) == 0
             && call_stage(&k, bv, PAGED_ARENA_HOST, &q.u.attn.block_tables_off) == 0
             && call_stage(&k, lv, PAGED_ARENA_HOST, &q.u.attn.seq_lens_off) == 0
             && (iv == NULL || call_stage(&k, iv, PAGED_ARENA_HOST, &q.u.attn.qo_indptr_off) == 0)
             && (av == NULL || call_stage(&k, av, PAGED_ARENA_HOST, &q.u.attn.opts.alibi_off) == 0);
    q.u.attn.opts.has_alibi = av != NULL;
    /* The output is written in place when it is arena memory, else staged and copied back. */
    int staged_out = ok ? k.req->scratch.n : 0;
    ok = ok && call_stage(&k, ov, PAGED_ARENA_DATA, &q.u.attn.out_off) == 0;
    if (!ok) {
        Py_DECREF(result);
        return call_end(&k, NULL);
    }
    if (k.req->scratch.n > staged_out) {
        k.req->copy_to = ov->data;
        k.req->copy_off = q.u.attn.out_off;
        k.req->copy_len = ov->nbytes;
    }
    return call_end(&k, call_submit(&k, &q, result, a->wait));
}

/* Parses DECODE's or PREFILL's arguments into a; returns 0 or -1. */
static int parse_attn(PyObject *args, PyObject *kw, paged_op op, struct attn_args *a)
{
    static char *decode_kw[] = { "layer", "q", "block_tables", "seq_lens", "scale", "soft_cap", "window",
                                 "alibi_slopes", "out", "wait", "stream", NULL };
    static char *prefill_kw[] = { "layer", "q", "qo_indptr", "block_tables", "seq_lens", "scale",
                                  "soft_cap", "window", "alibi_slopes", "out", "wait", "stream", NULL };
    memset(a, 0, sizeof *a);
    a->wait = 1;
    a->stream = Py_None;
    if (op == PAGED_OP_DECODE)
        return PyArg_ParseTupleAndKeywords(args, kw, "iOOO|$ffiOOpO:decode", decode_kw, &a->layer, &a->q,
                                           &a->block_tables, &a->seq_lens, &a->scale, &a->soft_cap,
                                           &a->window, &a->alibi, &a->out, &a->wait, &a->stream) ? 0 : -1;
    return PyArg_ParseTupleAndKeywords(args, kw, "iOOOO|$ffiOOpO:prefill", prefill_kw, &a->layer, &a->q,
                                       &a->qo_indptr, &a->block_tables, &a->seq_lens, &a->scale,
                                       &a->soft_cap, &a->window, &a->alibi, &a->out, &a->wait,
                                       &a->stream) ? 0 : -1;
}

/* decode(layer, q, block_tables, seq_lens, ..., wait=True, stream=None): one query token per sequence;
 * returns the output, or with wait=False the Request at once. */
PyObject *pyp_pool_decode(pyp_pool *p, PyObject *args, PyObject *kw)
{
    struct attn_args a;
    if (parse_attn(args, kw, PAGED_OP_DECODE, &a) < 0)
        return NULL;
    return attn_call(p, PAGED_OP_DECODE, &a);
}

/* prefill(layer, q, qo_indptr, block_tables, seq_lens, ..., wait=True, stream=None): ragged query tokens
 * per sequence; returns the output, or with wait=False the Request at once. */
PyObject *pyp_pool_prefill(pyp_pool *p, PyObject *args, PyObject *kw)
{
    struct attn_args a;
    if (parse_attn(args, kw, PAGED_OP_PREFILL, &a) < 0)
        return NULL;
    return attn_call(p, PAGED_OP_PREFILL, &a);
}
