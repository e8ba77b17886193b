/* client.c: the Client type: a connection to pagedd, its pools by name, arena arrays, NOP. */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

#include <string.h>

PyTypeObject *pyp_client_type;

/* Marks c busy for one call; returns 0, or -1 with ClosedError (closed) or RuntimeError (a
 * call from another thread is running: a client belongs to one thread at a time). */
int pyp_client_enter(pyp_client *c)
{
    if (c->closed || c->pc == NULL) {
        pyp_raise_closed("the client");
        return -1;
    }
    if (c->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the client is running a call in another thread: use one client per thread");
        return -1;
    }
    c->busy = 1;
    return 0;
}

/* Ends a call begun by pyp_client_enter; returns nothing. */
void pyp_client_leave(pyp_client *c)
{
    c->busy = 0;
}

/* Returns the heap of c's arena kind: the data arena's own on the cuda backend, else the
 * host arena's (the same memory on the cpu backend). */
struct pyp_heap *pyp_client_heap(pyp_client *c, int kind)
{
    return kind == PAGED_ARENA_DATA && c->cuda ? &c->dheap : &c->heap;
}

/* Returns the CUDA device ordinal of c's data arena (mapping it on first use), or -1 with
 * the error raised. */
int pyp_client_device(pyp_client *c)
{
    if (c->device >= 0)
        return c->device;
    if (c->pc == NULL) {
        pyp_raise_closed("the client");
        return -1;
    }
    void *base = paged_arena_base(c->pc, PAGED_ARENA_DATA, NULL);
    if (base == NULL) {
        pyp_raise_client(c, PAGED_E_DEVICE);
        return -1;
    }
    int dev = -1;
    if (pyp_cuda_device_of(base, &dev) < 0)
        return -1;
    c->device = dev;
    return dev;
}

/* Returns the 32-bit word at offset off of c's host arena (a dependency word). */
uint32_t *pyp_client_word(pyp_client *c, uint64_t off)
{
    return (uint32_t *) ((char *) paged_arena_base(c->pc, PAGED_ARENA_HOST, NULL) + off);
}

/* Closes the connection itself: the daemon frees what the client held and the arenas are
 * unmapped (once no stream of the client's requests uses them); returns nothing. */
static void really_close(pyp_client *c)
{
    if (c->pc == NULL)
        return;
    pyp_client_abandon(c);
    if (c->pc == NULL)
        return; /* the requests' arrays were the last ones, and closed it */
    /* A stream that still uses the arenas would fault on unmapped memory, poisoning its
     * context: such a client stays connected, its memory mapped, for the process's life. */
    if (pyp_client_retire(c, 1) > 0 || c->pc == NULL)
        return;
    pyp_heap_fini(&c->heap);
    pyp_heap_fini(&c->dheap);
    paged_client *pc = c->pc;
    c->pc = NULL;
    paged_client_close(pc);
}

/* Notes that one arena array of c is gone; closes the connection when close() was called
 * and it was the last one. Returns nothing. */
void pyp_client_array_gone(pyp_client *c)
{
    c->live_arrays--;
    if (c->closed && c->live_arrays == 0)
        really_close(c);
}

/* Client(socket=None, name=None, *, host_arena_size=0, timeout_ms=0, spin_us=0,
 * sq_entries=0, data_arena_size=0, device=0): connects; returns 0, or -1 with paged.Error. */
static int client_init(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = { "socket", "name", "host_arena_size", "timeout_ms", "spin_us",
                              "sq_entries", "data_arena_size", "device", NULL };
    pyp_client *c = (pyp_client *) self;
    const char *socket = NULL, *name = NULL;
    unsigned long long arena = 0, data_arena = 0;
    int timeout_ms = 0, spin_us = 0;
    unsigned int sq = 0, device = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|zz$KiiIKI:Client", kwlist, &socket, &name, &arena,
                                     &timeout_ms, &spin_us, &sq, &data_arena, &device))
        return -1;
    if (c->pc != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Client: already connected");
        return -1;
    }
    paged_connect_opts o = { .socket_path = socket, .name = name, .host_arena_size = arena,
                             .data_arena_size = data_arena, .timeout_ms = timeout_ms,
                             .spin_us = spin_us, .sq_entries = sq, .device = device };
    char err[256] = "";
    paged_client *pc = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_client_connect_err(&o, &pc, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        pyp_raise(rc, NULL, err[0] != '\0' ? err : paged_strerror(rc));
        return -1;
    }
    c->pc = pc;
    c->closed = 0;
    c->cuda = paged_client_backend(pc) == PAGED_BACKEND_CUDA;
    c->device = -1;
    c->word_seq = 0;
    c->drain_expired = 0;
    pyp_heap_init(&c->heap, pc, PAGED_ARENA_HOST);
    pyp_heap_init(&c->dheap, pc, PAGED_ARENA_DATA);
    return 0;
}

/* Frees the client, closing its connection; returns nothing. */
static void client_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    really_close((pyp_client *) self);
    PyMem_Free(((pyp_client *) self)->inflight);
    PyMem_Free(((pyp_client *) self)->retiring);
    freefunc tp_free = (freefunc) PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

/* close(): closes the client; returns None. */
static PyObject *client_close(PyObject *self, PyObject *unused)
{
    (void) unused;
    pyp_client *c = (pyp_client *) self;
    if (c->busy) {
        PyErr_SetString(PyExc_RuntimeError, "close: a call is running in another thread");
        return NULL;
    }
    c->closed = 1;
    pyp_client_abandon(c);
    /* Requests kept for their streams hold arrays: release them now, the streams past them. */
    pyp_client_retire(c, 1);
    if (c->live_arrays == 0)
        really_close(c);
    Py_RETURN_NONE;
}

/* __exit__(*exc): closes the client; returns False (exceptions propagate). */
static PyObject *client_exit_ctx(PyObject *self, PyObject *args)
{
    (void) args;
    return pyp_ctx_exit(client_close(self, NULL));
}

/* nop(): one NOP round trip through the rings; returns None. */
static PyObject *client_nop(PyObject *self, PyObject *unused)
{
    (void) unused;
    pyp_client *c = (pyp_client *) self;
    if (pyp_client_enter(c) < 0)
        return NULL;
    paged_request q = { .op = PAGED_OP_NOP };
    pyp_request *r = pyp_request_new(c);
    PyObject *out = r != NULL ? pyp_request_run(r, &q, 1) : NULL;
    Py_XDECREF((PyObject *) r);
    pyp_client_leave(c);
    return out;
}

/* create_pool(name, *, num_layers, num_kv_heads, head_dim, block_size, dtype, num_blocks=0,
 * byte_budget=0, mode=0o600, k_scale=0.0, v_scale=0.0, host_tier_bytes=0, shards=0, shard=0,
 * group=None, device=None): creates a pool (a tensor-parallel one of shards shards, the
 * creator attached to shard shard in group) on device (None: the creator's) and attaches;
 * returns the Pool. */
static PyObject *client_create_pool(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = { "name", "num_layers", "num_kv_heads", "head_dim", "block_size",
                              "dtype", "num_blocks", "byte_budget", "mode", "k_scale", "v_scale",
                              "host_tier_bytes", "shards", "shard", "group", "device", NULL };
    pyp_client *c = (pyp_client *) self;
    const char *name, *group = NULL;
    unsigned int layers = 0, heads = 0, dim = 0, bsize = 0, nblocks = 0, mode = 0600, shards = 0, shard = 0;
    unsigned long long budget = 0, host_tier = 0;
    PyObject *dtype_obj = NULL, *device_obj = Py_None;
    float ks = 0.0f, vs = 0.0f;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$IIIIOIKIffKIIzO:create_pool", kwlist, &name, &layers,
                                     &heads, &dim, &bsize, &dtype_obj, &nblocks, &budget, &mode,
                                     &ks, &vs, &host_tier, &shards, &shard, &group, &device_obj))
        return NULL;
    uint32_t device = 0;     /* paged_pool_desc.device: 0 the creator's, else PAGED_DEVICE(n) */
    if (device_obj != Py_None) {
        long n = PyLong_Check(device_obj) ? PyLong_AsLong(device_obj) : -1;
        if (n < 0 || n >= 0x7fffffffL) {
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_OverflowError)) {
                PyErr_Clear();
                PyErr_SetString(PyExc_ValueError, "device: a device number of the daemon (0 up), or None");
            }
            return NULL;
        }
        device = PAGED_DEVICE(n);
    }
    int dtype;
    if (dtype_obj == NULL) {
        PyErr_SetString(PyExc_TypeError, "create_pool: dtype is required ('f32', 'f16', 'bf16', 'fp8_e4m3')");
        return NULL;
    }
    if (pyp_parse_dtype(dtype_obj, "dtype", &dtype) < 0)
        return NULL;
    if (dtype == PYP_I32) {
        PyErr_SetString(PyExc_ValueError, "dtype: int32 is no cache dtype (f32, f16, bf16, fp8_e4m3)");
        return NULL;
    }
    paged_pool_desc d = { .name = name, .num_layers = layers, .num_kv_heads = heads,
                          .head_dim = dim, .block_size = bsize, .dtype = (paged_dtype) dtype,
                          .num_blocks = nblocks, .byte_budget = budget, .mode = mode,
                          .k_scale = ks, .v_scale = vs, .host_tier_bytes = host_tier,
                          .shards = shards, .shard = shard, .group = group, .device = device };
    if (pyp_client_enter(c) < 0)
        return NULL;
    paged_pool *pp = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_pool_create(c->pc, &d, &pp);
    Py_END_ALLOW_THREADS
    pyp_client_leave(c);
    if (rc < 0)
        return pyp_raise_client(c, rc);
    return pyp_pool_new(c, pp);
}

/* attach_pool(name, *, shard=None, group=None): attaches to an existing pool, or with shard to
 * that shard of a tensor-parallel pool as a member of group (paged_pool_attach_shard); returns
 * the Pool. */
static PyObject *client_attach_pool(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = { "name", "shard", "group", NULL };
    pyp_client *c = (pyp_client *) self;
    const char *name, *group = NULL;
    PyObject *shard_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$Oz:attach_pool", kwlist, &name, &shard_obj, &group))
        return NULL;
    unsigned long shard = 0;
    if (shard_obj != Py_None) {
        if (!PyLong_Check(shard_obj)) {
            PyErr_SetString(PyExc_TypeError, "shard: an int or None");
            return NULL;
        }
        shard = PyLong_AsUnsignedLong(shard_obj);
        if (PyErr_Occurred() || shard > UINT32_MAX) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "shard: not a shard number (0 to 2^32 - 1)");
            return NULL;
        }
    } else if (group != NULL) {
        PyErr_SetString(PyExc_ValueError, "group: a group is joined with a shard (shard=None)");
        return NULL;
    }
    if (pyp_client_enter(c) < 0)
        return NULL;
    paged_pool *pp = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    if (shard_obj != Py_None)
        rc = paged_pool_attach_shard(c->pc, name, (uint32_t) shard, group, &pp);
    else
        rc = paged_pool_attach(c->pc, name, &pp);
    Py_END_ALLOW_THREADS
    pyp_client_leave(c);
    if (rc < 0)
        return pyp_raise_client(c, rc);
    return pyp_pool_new(c, pp);
}

/* destroy_pool(name): removes a pool's name; returns None. */
static PyObject *client_destroy_pool(PyObject *self, PyObject *args)
{
    pyp_client *c = (pyp_client *) self;
    const char *name;
    if (!PyArg_ParseTuple(args, "s:destroy_pool", &name))
        return NULL;
    if (pyp_client_enter(c) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_pool_destroy(c->pc, name);
    Py_END_ALLOW_THREADS
    pyp_client_leave(c);
    if (rc < 0)
        return pyp_raise_client(c, rc);
    Py_RETURN_NONE;
}

/* set_pool_ttl(name, ms): sets a pool's time to live (its owner or root); returns None. */
static PyObject *client_set_pool_ttl(PyObject *self, PyObject *args)
{
    pyp_client *c = (pyp_client *) self;
    const char *name;
    unsigned long long ms;
    if (!PyArg_ParseTuple(args, "sK:set_pool_ttl", &name, &ms))
        return NULL;
    if (pyp_client_enter(c) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_pool_set_ttl(c->pc, name, ms);
    Py_END_ALLOW_THREADS
    pyp_client_leave(c);
    if (rc < 0)
        return pyp_raise_client(c, rc);
    Py_RETURN_NONE;
}

/* Parses a shape (an int or a sequence of up to PYP_MAX_DIMS non-negative ints) into
 * shape and *ndim; returns 0, or -1 with an exception naming "shape". */
static int parse_shape(PyObject *obj, int64_t *shape, int *ndim)
{
    if (PyLong_Check(obj)) {
        shape[0] = PyLong_AsLongLong(obj);
        *ndim = 1;
    } else {
        PyObject *seq = PySequence_Tuple(obj);
        if (seq == NULL) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "shape: an int or a sequence of ints");
            return -1;
        }
        Py_ssize_t n = PyTuple_Size(seq);
        if (n < 1 || n > PYP_MAX_DIMS) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "shape: 1 to %d dimensions, not %zd", PYP_MAX_DIMS, n);
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            shape[i] = PyLong_AsLongLong(PyTuple_GetItem(seq, i));
        Py_DECREF(seq);
        *ndim = (int) n;
    }
    if (PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "shape: an int or a sequence of ints");
        return -1;
    }
    for (int i = 0; i < *ndim; i++)
        if (shape[i] < 0 || shape[i] > (int64_t) 1 << 40) {
            PyErr_Format(PyExc_ValueError, "shape: dimension %d is %lld", i, (long long) shape[i]);
            return -1;
        }
    return 0;
}

/* empty(shape, dtype='f32', *, host=False): a new array in the client's data arena (the
 * host arena with host), its contents undefined; returns the ArenaArray. */
static PyObject *client_empty(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = { "shape", "dtype", "host", NULL };
    pyp_client *c = (pyp_client *) self;
    PyObject *shape_obj, *dtype_obj = NULL;
    int host = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$p:empty", kwlist, &shape_obj, &dtype_obj, &host))
        return NULL;
    int64_t shape[PYP_MAX_DIMS];
    int ndim, dtype = PAGED_DTYPE_F32;
    if (parse_shape(shape_obj, shape, &ndim) < 0)
        return NULL;
    if (dtype_obj != NULL && pyp_parse_dtype(dtype_obj, "dtype", &dtype) < 0)
        return NULL;
    if (c->closed || c->pc == NULL)
        return pyp_raise_closed("the client");
    return pyp_array_new(c, host ? PAGED_ARENA_HOST : PAGED_ARENA_DATA, dtype, ndim, shape);
}

/* stats(): the daemon's request statistics (paged_stats); returns a dict of op name to a
 * dict of requests, errors, tokens, bytes, latency_p50_ns, latency_p99_ns. */
static PyObject *client_stats(PyObject *self, PyObject *unused)
{
    (void) unused;
    pyp_client *c = (pyp_client *) self;
    if (pyp_client_enter(c) < 0)
        return NULL;
    paged_op_stats st[PAGED_OP_LOOKUP + 1];
    int n;
    Py_BEGIN_ALLOW_THREADS
    n = paged_stats(c->pc, st, PAGED_OP_LOOKUP + 1);
    Py_END_ALLOW_THREADS
    pyp_client_leave(c);
    if (n < 0)
        return pyp_raise_client(c, n);
    PyObject *d = PyDict_New();
    for (int op = 0; d != NULL && op < n && op <= PAGED_OP_LOOKUP; op++) {
        const paged_op_stats *s = &st[op];
        PyObject *e = Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K}", "requests", (unsigned long long) s->requests,
                                    "errors", (unsigned long long) s->errors, "tokens",
                                    (unsigned long long) s->tokens, "bytes", (unsigned long long) s->bytes,
                                    "latency_p50_ns", (unsigned long long) s->latency_p50_ns,
                                    "latency_p99_ns", (unsigned long long) s->latency_p99_ns);
        const char *name = paged_op_name((paged_op) op);
        if (e == NULL || name == NULL || PyDict_SetItemString(d, name, e) < 0)
            Py_CLEAR(d);
        Py_XDECREF(e);
    }
    return d;
}

/* The id property: the daemon's id of this client. */
static PyObject *client_get_id(PyObject *self, void *closure)
{
    (void) closure;
    pyp_client *c = (pyp_client *) self;
    if (c->pc == NULL)
        return pyp_raise_closed("the client");
    return PyLong_FromUnsignedLong(paged_client_id(c->pc));
}

/* The backend property: "cpu" or "cuda". */
static PyObject *client_get_backend(PyObject *self, void *closure)
{
    (void) closure;
    pyp_client *c = (pyp_client *) self;
    if (c->pc == NULL)
        return pyp_raise_closed("the client");
    return PyUnicode_FromString(paged_client_backend(c->pc) == PAGED_BACKEND_CUDA ? "cuda" : "cpu");
}

/* The closed property: whether close() was called. */
static PyObject *client_get_closed(PyObject *self, void *closure)
{
    (void) closure;
    return PyBool_FromLong(((pyp_client *) self)->closed || ((pyp_client *) self)->pc == NULL);
}

/* The arena_size property: the bytes of the host arena. */
static PyObject *client_get_arena_size(PyObject *self, void *closure)
{
    (void) closure;
    pyp_client *c = (pyp_client *) self;
    if (c->pc == NULL)
        return pyp_raise_closed("the client");
    size_t size = 0;
    (void) paged_arena_base(c->pc, PAGED_ARENA_HOST, &size);
    return PyLong_FromSize_t(size);
}

static PyMethodDef client_methods[] = {
    { "close", client_close, METH_NOARGS,
      "close()\n--\n\nCloses the client: every later call raises ClosedError. The daemon frees the "
      "blocks the client held. Arena arrays still alive keep the memory mapped (and the "
      "connection open) until the last of them goes." },
    { "__enter__", pyp_ctx_enter, METH_NOARGS, "__enter__()\n--\n\nReturns the client." },
    { "__exit__", client_exit_ctx, METH_VARARGS, "__exit__(*exc)\n--\n\nCloses the client." },
    { "nop", client_nop, METH_NOARGS,
      "nop()\n--\n\nSends a NOP request through the rings and waits for its completion." },
    { "create_pool", (PyCFunction) (void (*)(void)) client_create_pool, METH_VARARGS | METH_KEYWORDS,
      "create_pool(name, *, num_layers, num_kv_heads, head_dim, block_size, dtype, num_blocks=0, "
      "byte_budget=0, mode=0o600, k_scale=0.0, v_scale=0.0, host_tier_bytes=0, shards=0, shard=0, "
      "group=None, device=None)\n--\n\n"
      "Creates a pool (paged_pool_create(3)'s parameters) and attaches to it; returns the Pool. "
      "device: the daemon's device of the pool's memory (None: the creator's; paged(7), SEVERAL GPUS). "
      "shards=N (2 to 16, dividing num_kv_heads) makes a tensor-parallel pool, its KV heads split "
      "over N shards (paged(7), TENSOR-PARALLEL POOLS); the creator is then shard shard of group "
      "(None: the uid's default group). Raises ExistsError when the name is taken, GeometryError "
      "or DtypeError naming the field, InvalidArgumentError for more than 16 shards or shards with "
      "a host tier or POOL_PEERS." },
    { "attach_pool", (PyCFunction) (void (*)(void)) client_attach_pool, METH_VARARGS | METH_KEYWORDS,
      "attach_pool(name, *, shard=None, group=None)\n--\n\nAttaches to an existing pool; returns the "
      "Pool. With shard, attaches that shard of a tensor-parallel pool as a member of group (None: "
      "the uid's default group), whose members hold their blocks together: what one rank allocates "
      "or looks up every rank holds, and a block is published once every shard's rank has published "
      "it (paged_pool_attach_shard(3)); without, a sharded pool is attached as shard 0 of the "
      "default group. Raises NotFoundError or PermissionDeniedError; InvalidArgumentError for a "
      "shard of an unsharded pool or past its shards, ExistsError when that shard of the group is "
      "attached." },
    { "destroy_pool", client_destroy_pool, METH_VARARGS,
      "destroy_pool(name)\n--\n\nRemoves a pool's name (owner or root); its memory goes when the last "
      "client detaches." },
    { "set_pool_ttl", client_set_pool_ttl, METH_VARARGS,
      "set_pool_ttl(name, ms)\n--\n\nSets a pool's time to live (its owner or root): a cached prefix "
      "block nobody references or pinned is dropped ms milliseconds after its last use; 0: never." },
    { "empty", (PyCFunction) (void (*)(void)) client_empty, METH_VARARGS | METH_KEYWORDS,
      "empty(shape, dtype='f32', *, host=False)\n--\n\nReturns a new ArenaArray in the client's "
      "data arena (contents undefined): device memory on the cuda backend, which "
      "torch.from_dlpack(a) views as a CUDA tensor; host memory on the cpu backend, which "
      "numpy.from_dlpack(a) views. host=True takes it from the host arena, where metadata "
      "(block tables, lengths, slots) goes without a copy on either backend. Requests take such "
      "arrays without a copy. Raises NoMemoryError when the arena is full." },
    { "prefix_stats", (PyCFunction) (void (*)(void)) pyp_client_prefix_stats, METH_NOARGS,
      "prefix_stats()\n--\n\nReturns this client's own prefix-cache figures since it connected "
      "(paged_prefix_stats(3)) as a dict of ints: lookups, lookup_tokens, pool_hit_tokens, "
      "host_hit_tokens, file_hit_tokens, reloaded_bytes, reload_ns, offloaded_bytes." },
    { "stats", client_stats, METH_NOARGS,
      "stats()\n--\n\nReturns the daemon's request statistics since it started, over all its "
      "clients (paged_stats(3)): a dict from op name ('nop', 'append', 'decode', ...) to a dict of "
      "requests, errors, tokens, bytes, latency_p50_ns and latency_p99_ns. The counts only grow: "
      "the difference of two calls is what the daemon did in between." },
    { NULL, NULL, 0, NULL },
};

/* Client.device: the client's device, as the daemon numbers it. */
static PyObject *client_get_device(PyObject *self, void *closure)
{
    (void) closure;
    pyp_client *c = (pyp_client *) self;
    return PyLong_FromUnsignedLong(c->pc != NULL ? paged_client_device(c->pc) : 0);
}

/* Client.devices: how many devices the daemon serves. */
static PyObject *client_get_devices(PyObject *self, void *closure)
{
    (void) closure;
    pyp_client *c = (pyp_client *) self;
    return PyLong_FromUnsignedLong(c->pc != NULL ? paged_client_devices(c->pc) : 0);
}

static PyGetSetDef client_getset[] = {
    { "id", client_get_id, NULL, "The id the daemon gave this client.", NULL },
    { "backend", client_get_backend, NULL, "The daemon's backend: 'cpu' or 'cuda'.", NULL },
    { "device", client_get_device, NULL, "The client's device, as the daemon numbers it (connect's device).",
      NULL },
    { "devices", client_get_devices, NULL, "How many devices the daemon serves.", NULL },
    { "closed", client_get_closed, NULL, "Whether the client is closed.", NULL },
    { "arena_size", client_get_arena_size, NULL, "The size of the host arena in bytes.", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyType_Slot client_slots[] = {
    { Py_tp_doc, "Client(socket=None, name=None, *, host_arena_size=0, timeout_ms=0, spin_us=0, "
                 "sq_entries=0, data_arena_size=0, device=0)\n--\n\nA connection to pagedd with its own rings and "
                 "arenas (paged_client_connect(3)), its data arena on the daemon's device device; paged.connect() "
                 "makes one. Not for several threads at once." },
    { Py_tp_new, PyType_GenericNew },
    { Py_tp_init, client_init },
    { Py_tp_dealloc, client_dealloc },
    { Py_tp_methods, client_methods },
    { Py_tp_getset, client_getset },
    { 0, NULL },
};

static PyType_Spec client_spec = {
    .name = "paged._paged.Client",
    .basicsize = sizeof(pyp_client),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = client_slots,
};

/* Creates the Client type and adds it to module; returns 0 or -1. */
int pyp_client_init_type(PyObject *module)
{
    return pyp_add_type(module, &client_spec, "Client", &pyp_client_type);
}
