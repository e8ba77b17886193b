/* pool.c: the Pool type: an attached pool's info, blocks, detach; its requests are in attn.c. */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

#include <stdlib.h>
#include <string.h>

PyTypeObject *pyp_pool_type;

/* Wraps an attached pool of c; returns the Pool, or NULL (the pool is detached then). */
PyObject *pyp_pool_new(pyp_client *c, paged_pool *pp)
{
    pyp_pool *p = PyObject_New(pyp_pool, pyp_pool_type);
    if (p == NULL) {
        paged_pool_detach(pp);
        return NULL;
    }
    Py_INCREF((PyObject *) c);
    p->client = c;
    p->pp = pp;
    p->live_views = 0;
    p->detach_pending = 0;
    paged_pool_get_info(pp, &p->info);
    return (PyObject *) p;
}

/* Begins a call on p's client; returns 0, or -1 with ClosedError (pool detached or client
 * closed) or RuntimeError. */
int pyp_pool_enter(pyp_pool *p)
{
    if (p->pp == NULL || p->detach_pending) {
        pyp_raise_closed("the pool");
        return -1;
    }
    return pyp_client_enter(p->client);
}

/* Detaches p if its client is still connected; returns libpaged's status. */
static int pool_detach_now(pyp_pool *p)
{
    int rc = PAGED_OK;
    if (p->pp != NULL && p->client->pc != NULL) {
        paged_pool *pp = p->pp;
        p->pp = NULL;
        Py_BEGIN_ALLOW_THREADS
        rc = paged_pool_detach(pp);
        Py_END_ALLOW_THREADS
    }
    p->pp = NULL;
    return rc;
}

/* Detaches the pool and drops its client; returns nothing. */
static void pool_dealloc(PyObject *self)
{
    pyp_pool *p = (pyp_pool *) self;
    PyTypeObject *tp = Py_TYPE(self);
    if (!p->client->busy)
        (void) pool_detach_now(p);
    Py_DECREF((PyObject *) p->client);
    PyObject_Free(self);
    Py_DECREF(tp);
}

/* Notes that one layer view of p is gone; detaches when detach() was called and it was the
 * last one. Returns nothing. */
void pyp_pool_view_gone(pyp_pool *p)
{
    p->live_views--;
    if (p->detach_pending && p->live_views == 0 && !p->client->busy)
        (void) pool_detach_now(p);
}

/* detach(): drops every block reference the client holds in the pool and frees its
 * sequences (once no layer view is alive: until then only calls are refused); returns None. */
static PyObject *pool_detach(PyObject *self, PyObject *unused)
{
    (void) unused;
    pyp_pool *p = (pyp_pool *) self;
    if (p->pp == NULL || p->detach_pending)
        Py_RETURN_NONE;
    if (p->live_views > 0) {
        p->detach_pending = 1;
        Py_RETURN_NONE;
    }
    if (pyp_client_enter(p->client) < 0)
        return NULL;
    int rc = pool_detach_now(p);
    pyp_client_leave(p->client);
    if (rc < 0)
        return pyp_raise_client(p->client, rc);
    Py_RETURN_NONE;
}

/* __exit__(*exc): detaches the pool; returns False. */
static PyObject *pool_exit_ctx(PyObject *self, PyObject *args)
{
    (void) args;
    return pyp_ctx_exit(pool_detach(self, NULL));
}

/* layer(layer): maps the pool on first use and returns read-only views (k, v) of the layer's
 * keys and values, each [num_blocks, num_kv_heads, block_size, head_dim] (paged(7)'s layout):
 * host memory on the cpu backend, memory of the data arena's CUDA device on the cuda one. */
static PyObject *pool_layer(PyObject *self, PyObject *args)
{
    pyp_pool *p = (pyp_pool *) self;
    int layer;
    if (!PyArg_ParseTuple(args, "i:layer", &layer))
        return NULL;
    const paged_pool_info *i = &p->info;
    if (layer < 0 || (uint32_t) layer >= i->num_layers) {
        PyErr_Format(PyExc_ValueError, "layer: %d is not a layer of the pool (0 to %u)", layer, i->num_layers - 1);
        return NULL;
    }
    if (pyp_pool_enter(p) < 0)
        return NULL;
    void *base = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_pool_map(p->pp, &base);
    Py_END_ALLOW_THREADS
    pyp_client_leave(p->client);
    if (rc < 0)
        return pyp_raise_client(p->client, rc);
    int device = -1;
    if (p->client->cuda && (device = pyp_client_device(p->client)) < 0)
        return NULL; /* the pool lives on the daemon's device, the data arena's */
    int64_t shape[4] = { i->num_blocks, i->num_kv_heads, i->block_size, i->head_dim };
    uint64_t half = (uint64_t) i->num_blocks * i->num_kv_heads * i->block_size * i->head_dim
                    * paged_dtype_size(i->dtype);
    char *k = (char *) base + (uint64_t) layer * 2 * half;
    PyObject *kv = pyp_array_view(p, k, device, i->dtype, 4, shape);
    PyObject *vv = kv != NULL ? pyp_array_view(p, k + half, device, i->dtype, 4, shape) : NULL;
    PyObject *r = vv != NULL ? PyTuple_Pack(2, kv, vv) : NULL;
    Py_XDECREF(kv);
    Py_XDECREF(vv);
    return r;
}

/* info(): returns a dict of the pool's geometry and memory (paged_pool_info): of the shard
 * attached for a tensor-parallel pool (num_kv_heads, bytes), with shards, shard,
 * kv_head_offset and the device of the attached memory. */
static PyObject *pool_info(PyObject *self, PyObject *unused)
{
    (void) unused;
    pyp_pool *p = (pyp_pool *) self;
    if (p->pp == NULL)
        return pyp_raise_closed("the pool");
    const paged_pool_info *i = &p->info;
    return Py_BuildValue("{s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:d,s:d,s:O,s:I,s:I,s:K,s:I,s:I,s:I,s:I}", "id", i->id,
                         "num_layers", i->num_layers, "num_kv_heads", i->num_kv_heads, "head_dim",
                         i->head_dim, "block_size", i->block_size, "num_blocks", i->num_blocks,
                         "dtype", pyp_dtype_name(i->dtype), "k_scale", (double) i->k_scale,
                         "v_scale", (double) i->v_scale, "writable", i->writable ? Py_True : Py_False,
                         "owner_uid", i->owner_uid, "mode", i->mode, "bytes",
                         (unsigned long long) i->bytes, "shards", i->shards, "shard", i->shard,
                         "kv_head_offset", i->kv_head_offset, "device", i->device);
}

/* alloc(count): takes count blocks, all or nothing; returns their ids as a list. */
static PyObject *pool_alloc(PyObject *self, PyObject *args)
{
    pyp_pool *p = (pyp_pool *) self;
    long count;
    if (!PyArg_ParseTuple(args, "l:alloc", &count))
        return NULL;
    if (count < 0 || count > (long) 1 << 20) {
        PyErr_Format(PyExc_ValueError, "count: %ld is not between 0 and 2^20", count);
        return NULL;
    }
    int32_t *ids = calloc(count > 0 ? (size_t) count : 1, sizeof *ids);
    if (ids == NULL)
        return PyErr_NoMemory();
    if (pyp_pool_enter(p) < 0) {
        free(ids);
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_alloc(p->pp, (uint32_t) count, ids);
    Py_END_ALLOW_THREADS
    pyp_client_leave(p->client);
    PyObject *r = rc < 0 ? pyp_raise_client(p->client, rc) : pyp_int_list(ids, (uint32_t) count);
    free(ids);
    return r;
}

/* sequence(salt=0): a new empty sequence in the pool; returns the Sequence. */
static PyObject *pool_sequence(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = { "salt", NULL };
    pyp_pool *p = (pyp_pool *) self;
    unsigned long long salt = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|K:sequence", kwlist, &salt))
        return NULL;
    if (pyp_pool_enter(p) < 0)
        return NULL;
    paged_seq *ps = NULL;
    int rc = paged_seq_create(p->pp, salt, &ps);
    pyp_client_leave(p->client);
    if (rc < 0)
        return pyp_raise_client(p->client, rc);
    return pyp_seq_new(p, ps);
}

/* The detached property: whether the pool is detached. */
static PyObject *pool_get_detached(PyObject *self, void *closure)
{
    (void) closure;
    pyp_pool *p = (pyp_pool *) self;
    return PyBool_FromLong(p->pp == NULL || p->detach_pending || p->client->pc == NULL);
}

static PyMethodDef pool_methods[] = {
    { "detach", pool_detach, METH_NOARGS,
      "detach()\n--\n\nDetaches: the daemon drops every block reference this client holds in the "
      "pool, and the pool's sequences end. Later calls raise ClosedError." },
    { "__enter__", pyp_ctx_enter, METH_NOARGS, "__enter__()\n--\n\nReturns the pool." },
    { "__exit__", pool_exit_ctx, METH_VARARGS, "__exit__(*exc)\n--\n\nDetaches the pool." },
    { "info", pool_info, METH_NOARGS,
      "info()\n--\n\nReturns a dict of the pool's geometry: id, num_layers, num_kv_heads, head_dim, "
      "block_size, num_blocks, dtype, k_scale, v_scale, writable, owner_uid, mode, bytes, shards, "
      "shard, kv_head_offset, device (the daemon's device of the attached memory). Of a "
      "tensor-parallel pool (shards > 1) num_kv_heads and bytes are the "
      "attached shard's, which holds the pool's KV heads kv_head_offset to kv_head_offset + "
      "num_kv_heads - 1; an unsharded pool has shards 1, shard 0, kv_head_offset 0." },
    { "stats", (PyCFunction) (void (*)(void)) pyp_pool_stats, METH_NOARGS,
      "stats()\n--\n\nReturns the pool's counters (paged_pool_stats(3)) as a dict of ints: the blocks "
      "free, referenced, cached and pinned; lookups, lookup_tokens and the tokens found in the pool, the "
      "host tier and the file tier (pool_hit_tokens, host_hit_tokens, file_hit_tokens); evictions, "
      "expired; and the tiers' host_units, host_stored, file_units, file_bytes, offloaded_bytes, "
      "offload_ns, written_bytes, reloaded_bytes, reloads, reload_ns, tier_dropped, tier_damaged, "
      "tier_failures." },
    { "layer", pool_layer, METH_VARARGS,
      "layer(layer)\n--\n\nReturns read-only views (k, v) of a layer's keys and values in the pool's "
      "memory (a tensor-parallel pool's: the attached shard's, its own num_kv_heads), each "
      "[num_blocks, num_kv_heads, block_size, head_dim] of the pool's dtype, for other "
      "libraries' kernels: by DLPack (numpy.from_dlpack) or the buffer protocol (numpy.asarray); on "
      "the cuda backend device memory, viewed by torch.from_dlpack as CUDA tensors (kernels such as "
      "FlashInfer's read them in place; order them after the appends with the stream argument). "
      "The pool must be exported (a sealed pool raises PermissionDeniedError); while a view lives the "
      "pool stays attached." },
    { "alloc", pool_alloc, METH_VARARGS,
      "alloc(count)\n--\n\nTakes count blocks, all or nothing; returns their ids (a list). Raises "
      "NoSpaceError when the pool cannot supply them." },
    { "free", (PyCFunction) (void (*)(void)) pyp_pool_free, METH_VARARGS,
      "free(ids)\n--\n\nDrops one reference to each block in ids (ints: a list or an int32 array)." },
    { "fork", (PyCFunction) (void (*)(void)) pyp_pool_fork, METH_VARARGS,
      "fork(ids)\n--\n\nTakes one more reference to each block in ids, which this client holds." },
    { "copy", (PyCFunction) (void (*)(void)) pyp_pool_copy, METH_VARARGS | METH_KEYWORDS,
      "copy(src, dst, *, to=None)\n--\n\nCopies whole blocks (every layer, K and V) src[i] to dst[i]; dst "
      "blocks must be writable by this client. With to, another Pool of this client of the same geometry "
      "(its number of blocks aside), the dst blocks are to's, and this pool need only be readable." },
    { "publish", (PyCFunction) (void (*)(void)) pyp_pool_publish, METH_VARARGS | METH_KEYWORDS,
      "publish(tokens, ids, *, salt=0, parent=None)\n--\n\nPublishes the full blocks ids, which hold "
      "tokens (whole blocks of token ids), in the prefix cache, the hash chain continuing from parent "
      "(None: a prompt's start); returns how many were newly published." },
    { "lookup", (PyCFunction) (void (*)(void)) pyp_pool_lookup, METH_VARARGS | METH_KEYWORDS,
      "lookup(tokens, *, salt=0, parent=None)\n--\n\nFinds the longest published prefix of tokens (whole "
      "blocks) and takes a reference to each block found; returns their ids (a list, maybe empty)." },
    { "pin", (PyCFunction) (void (*)(void)) pyp_pool_pin, METH_VARARGS | METH_KEYWORDS,
      "pin(tokens, *, salt=0, parent=None)\n--\n\nPins the longest cached prefix of tokens (whole blocks, "
      "named as for lookup) so that it is never evicted until unpinned; returns its length in blocks. "
      "Raises LimitError past the pin limits." },
    { "unpin", (PyCFunction) (void (*)(void)) pyp_pool_unpin, METH_VARARGS | METH_KEYWORDS,
      "unpin(tokens=None, *, salt=0, parent=None)\n--\n\nDrops the pins of the longest cached prefix of "
      "tokens and returns its length; with tokens None drops every pin this uid may drop and returns "
      "how many." },
    { "evict_prefix", (PyCFunction) (void (*)(void)) pyp_pool_evict_prefix, METH_VARARGS | METH_KEYWORDS,
      "evict_prefix(tokens, *, salt=0, parent=None)\n--\n\nTakes the longest cached prefix of tokens out "
      "of the cache, pins too; returns its length in blocks." },
    { "sequence", (PyCFunction) (void (*)(void)) pool_sequence, METH_VARARGS | METH_KEYWORDS,
      "sequence(salt=0)\n--\n\nReturns a new empty Sequence; salt is mixed into its prefix hashes." },
    { "append", (PyCFunction) (void (*)(void)) pyp_pool_append, METH_VARARGS | METH_KEYWORDS,
      "append(layer, k, v, slots, *, wait=True, stream=None)\n--\n\nWrites new keys and values into "
      "slots. k and v are [n, num_kv_heads, head_dim] for one layer, or [num_layers, n, num_kv_heads, "
      "head_dim] with layer=paged.ALL_LAYERS, of the pool's dtype; slots holds n ints (-1 skips a "
      "token). Arrays already in the client's arena go without a copy. Returns None, or with "
      "wait=False a Request at once. On the cuda backend k and v are CUDA tensors of the daemon's "
      "device (others are copied into the arena on the stream), and the append runs after the work "
      "queued on stream before the call, and before the work queued on it after (None: torch's "
      "current stream when torch is imported, else the legacy default stream; an int cudaStream_t; "
      "an object with __cuda_stream__ or .cuda_stream). On the cpu backend stream must be None." },
    { "decode", (PyCFunction) (void (*)(void)) pyp_pool_decode, METH_VARARGS | METH_KEYWORDS,
      "decode(layer, q, block_tables, seq_lens, *, scale=0.0, soft_cap=0.0, window=0, "
      "alibi_slopes=None, out=None, wait=True, stream=None)\n--\n\nOne query token per sequence: q "
      "is [num_seqs, num_q_heads, head_dim]; block_tables [num_seqs, *] ints (lists of rows are "
      "padded); seq_lens the context lengths, new token included. Returns out, or a new ArenaArray "
      "shaped as q; with wait=False a Request at once, whose result() returns it. scale 0 means "
      "1/sqrt(head_dim). On the cuda backend q and out are CUDA tensors and stream orders the "
      "request as for append; the metadata stays host memory." },
    { "prefill", (PyCFunction) (void (*)(void)) pyp_pool_prefill, METH_VARARGS | METH_KEYWORDS,
      "prefill(layer, q, qo_indptr, block_tables, seq_lens, *, scale=0.0, soft_cap=0.0, window=0, "
      "alibi_slopes=None, out=None, wait=True, stream=None)\n--\n\nSeveral query tokens per "
      "sequence, causal at the end of each context: q is [total, num_q_heads, head_dim], sequence i's "
      "rows qo_indptr[i] to qo_indptr[i + 1]. Returns out, or a new ArenaArray shaped as q; with "
      "wait=False a Request at once, whose result() returns it. stream as for decode." },
    { NULL, NULL, 0, NULL },
};

static PyGetSetDef pool_getset[] = {
    { "detached", pool_get_detached, NULL, "Whether the pool is detached.", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyType_Slot pool_slots[] = {
    { Py_tp_doc, "A pool this client is attached to (Client.create_pool, Client.attach_pool): "
                 "blocks, sequences, APPEND, DECODE and PREFILL. Detached when closed, deleted or "
                 "left as a context manager. Of a tensor-parallel pool it is one shard: APPEND, "
                 "DECODE, PREFILL and layer() see that shard's KV heads (info()'s num_kv_heads "
                 "from kv_head_offset on)." },
    { Py_tp_dealloc, pool_dealloc },
    { Py_tp_methods, pool_methods },
    { Py_tp_getset, pool_getset },
    { 0, NULL },
};

static PyType_Spec pool_spec = {
    .name = "paged._paged.Pool",
    .basicsize = sizeof(pyp_pool),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = pool_slots,
};

/* Creates the Pool type and adds it to module; returns 0 or -1. */
int pyp_pool_init_type(PyObject *module)
{
    return pyp_add_type(module, &pool_spec, "Pool", &pyp_pool_type);
}
