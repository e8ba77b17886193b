/* blocks.c: a pool's block calls beyond alloc (FREE, FORK, COPY, PUBLISH, LOOKUP) and prefix hashes. */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

#include <stdlib.h>
#include <string.h>

/* Parses a 128-bit prefix hash given as a non-negative int (None: the zero hash) into *h;
 * returns 0, or -1 with an exception naming "parent". */
static int parse_hash(PyObject *obj, paged_hash *h)
{
    *h = (paged_hash) { 0, 0 };
    if (obj == NULL || obj == Py_None)
        return 0;
    if (!PyLong_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "parent: a hash is an int (hi << 64 | lo) or None");
        return -1;
    }
    PyObject *shift = PyLong_FromLong(64), *mask = PyLong_FromUnsignedLongLong(UINT64_MAX);
    PyObject *hi = shift != NULL ? PyNumber_Rshift(obj, shift) : NULL;
    PyObject *lo = mask != NULL ? PyNumber_And(obj, mask) : NULL;
    int rc = -1;
    if (hi != NULL && lo != NULL) {
        h->hi = PyLong_AsUnsignedLongLong(hi);
        h->lo = PyLong_AsUnsignedLongLong(lo);
        rc = PyErr_Occurred() ? -1 : 0;
        if (rc < 0) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "parent: not a 128-bit unsigned hash");
        }
    }
    Py_XDECREF(shift);
    Py_XDECREF(mask);
    Py_XDECREF(hi);
    Py_XDECREF(lo);
    return rc;
}

/* Returns a hash as a Python int, hi << 64 | lo, or NULL. */
PyObject *pyp_hash_int(paged_hash h)
{
    PyObject *hi = PyLong_FromUnsignedLongLong(h.hi), *lo = PyLong_FromUnsignedLongLong(h.lo);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *up = hi != NULL && shift != NULL ? PyNumber_Lshift(hi, shift) : NULL;
    PyObject *r = up != NULL && lo != NULL ? PyNumber_Or(up, lo) : NULL;
    Py_XDECREF(hi);
    Py_XDECREF(lo);
    Py_XDECREF(shift);
    Py_XDECREF(up);
    return r;
}

/* Runs fn (paged_free or paged_fork) over the block ids of args (parsed with fmt) with the GIL
 * released; returns None, or NULL with the exception. */
static PyObject *ids_call(pyp_pool *p, PyObject *args, const char *fmt,
                          int (*fn)(paged_pool *, uint32_t, const int32_t *))
{
    PyObject *obj;
    if (!PyArg_ParseTuple(args, fmt, &obj))
        return NULL;
    struct pyp_view v;
    if (pyp_view_ints(&v, obj, "ids") < 0 || pyp_pool_enter(p) < 0) {
        pyp_view_release(&v);
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fn(p->pp, (uint32_t) v.shape[0], v.data);
    Py_END_ALLOW_THREADS
    pyp_client_leave(p->client);
    pyp_view_release(&v);
    if (rc < 0)
        return pyp_raise_client(p->client, rc);
    Py_RETURN_NONE;
}

/* free(ids): drops one reference to each block in ids (ints); returns None. */
PyObject *pyp_pool_free(pyp_pool *p, PyObject *args)
{
    return ids_call(p, args, "O:free", paged_free);
}

/* fork(ids): takes one more reference to each block in ids, already held; returns None. */
PyObject *pyp_pool_fork(pyp_pool *p, PyObject *args)
{
    return ids_call(p, args, "O:fork", paged_fork);
}

/* copy(src, dst, *, to=None): copies whole blocks src[i] to dst[i] (all layers, K and V), the
 * dst blocks being to's (another Pool of the same client) when given; returns None. */
PyObject *pyp_pool_copy(pyp_pool *p, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = { "src", "dst", "to", NULL };
    PyObject *so, *dobj, *too = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$O:copy", kwlist, &so, &dobj, &too))
        return NULL;
    pyp_pool *to = p;
    if (too != Py_None) {
        if (!PyObject_TypeCheck(too, pyp_pool_type)) {
            PyErr_SetString(PyExc_TypeError, "to: a Pool");
            return NULL;
        }
        to = (pyp_pool *) too;
        if (to->client != p->client) {
            PyErr_SetString(PyExc_ValueError, "to: a pool of another client");
            return NULL;
        }
        if (to->pp == NULL || to->detach_pending)
            return pyp_raise_closed("the pool to");
    }
    struct pyp_view s, d;
    memset(&d, 0, sizeof d);
    int ok = pyp_view_ints(&s, so, "src") == 0 && pyp_view_ints(&d, dobj, "dst") == 0;
    if (ok && d.shape[0] != s.shape[0]) {
        PyErr_Format(PyExc_ValueError, "dst: %lld blocks for %lld in src", (long long) d.shape[0],
                     (long long) s.shape[0]);
        ok = 0;
    }
    if (!ok || pyp_pool_enter(p) < 0) {
        pyp_view_release(&s);
        pyp_view_release(&d);
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_copy_to(p->pp, to->pp, (uint32_t) s.shape[0], s.data, d.data);
    Py_END_ALLOW_THREADS
    pyp_client_leave(p->client);
    pyp_view_release(&s);
    pyp_view_release(&d);
    if (rc < 0)
        return pyp_raise_client(p->client, rc);
    Py_RETURN_NONE;
}

/* Checks that tokens fill num_blocks whole blocks of p; returns the block count, or -1 with
 * a ValueError naming tokens. */
static long whole_blocks(pyp_pool *p, const struct pyp_view *tokens)
{
    uint32_t b = p->info.block_size;
    if (b == 0 || tokens->shape[0] % b != 0) {
        PyErr_Format(PyExc_ValueError, "tokens: %lld tokens are not whole blocks of %u",
                     (long long) tokens->shape[0], b);
        return -1;
    }
    return (long) (tokens->shape[0] / b);
}

/* publish(tokens, ids, *, salt=0, parent=None): enters the full blocks ids, holding tokens,
 * in the prefix cache; returns how many were newly published. */
PyObject *pyp_pool_publish(pyp_pool *p, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = { "tokens", "ids", "salt", "parent", NULL };
    PyObject *to, *io, *parent_obj = NULL;
    unsigned long long salt = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$KO:publish", kwlist, &to, &io, &salt, &parent_obj))
        return NULL;
    paged_hash parent;
    if (parse_hash(parent_obj, &parent) < 0)
        return NULL;
    struct pyp_view t, i;
    memset(&i, 0, sizeof i);
    int ok = pyp_view_ints(&t, to, "tokens") == 0 && pyp_view_ints(&i, io, "ids") == 0;
    long n = ok ? whole_blocks(p, &t) : -1;
    if (n >= 0 && i.shape[0] != n) {
        PyErr_Format(PyExc_ValueError, "ids: %lld blocks for %ld blocks of tokens", (long long) i.shape[0], n);
        n = -1;
    }
    if (n < 0 || pyp_pool_enter(p) < 0) {
        pyp_view_release(&t);
        pyp_view_release(&i);
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_publish(p->pp, &parent, salt, (uint32_t) n, t.data, i.data);
    Py_END_ALLOW_THREADS
    pyp_client_leave(p->client);
    pyp_view_release(&t);
    pyp_view_release(&i);
    if (rc < 0)
        return pyp_raise_client(p->client, rc);
    return PyLong_FromLong(rc);
}

/* lookup(tokens, *, salt=0, parent=None): finds the longest published prefix of tokens'
 * whole blocks, taking a reference to each block found; returns their ids (a list). */
PyObject *pyp_pool_lookup(pyp_pool *p, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = { "tokens", "salt", "parent", NULL };
    PyObject *to, *parent_obj = NULL;
    unsigned long long salt = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$KO:lookup", kwlist, &to, &salt, &parent_obj))
        return NULL;
    paged_hash parent;
    if (parse_hash(parent_obj, &parent) < 0)
        return NULL;
    struct pyp_view t;
    long n = pyp_view_ints(&t, to, "tokens") == 0 ? whole_blocks(p, &t) : -1;
    int32_t *ids = n >= 0 ? calloc(n > 0 ? (size_t) n : 1, sizeof *ids) : NULL;
    if (n >= 0 && ids == NULL)
        PyErr_NoMemory();
    if (ids == NULL || pyp_pool_enter(p) < 0) {
        free(ids);
        pyp_view_release(&t);
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_lookup(p->pp, &parent, salt, (uint32_t) n, t.data, ids);
    Py_END_ALLOW_THREADS
    pyp_client_leave(p->client);
    pyp_view_release(&t);
    PyObject *r = rc < 0 ? pyp_raise_client(p->client, rc) : pyp_int_list(ids, (uint32_t) rc);
    free(ids);
    return r;
}

/* The calls of the prefix cache's controls that take a prefix. */
typedef int prefix_fn(paged_pool *p, const paged_hash *parent, uint64_t salt, uint32_t num_blocks,
                      const int32_t *tokens);

/* Runs fn (paged_prefix_pin, _unpin or _evict) on tokens' whole blocks, named as for lookup;
 * tokens None (unpin only, allow_none) drops every pin the caller may drop. Returns the
 * count as an int, or NULL with the error raised. */
static PyObject *prefix_call(pyp_pool *p, PyObject *args, PyObject *kw, prefix_fn *fn, const char *format,
                             int allow_none)
{
    static char *kwlist[] = { "tokens", "salt", "parent", NULL };
    PyObject *to = Py_None, *parent_obj = NULL;
    unsigned long long salt = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, format, kwlist, &to, &salt, &parent_obj))
        return NULL;
    paged_hash parent;
    if (parse_hash(parent_obj, &parent) < 0)
        return NULL;
    struct pyp_view t;
    memset(&t, 0, sizeof t);
    long n = 0;
    if (to != Py_None || !allow_none)
        n = pyp_view_ints(&t, to, "tokens") == 0 ? whole_blocks(p, &t) : -1;
    if (n < 0 || pyp_pool_enter(p) < 0) {
        pyp_view_release(&t);
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fn(p->pp, &parent, salt, (uint32_t) n, n > 0 ? t.data : NULL);
    Py_END_ALLOW_THREADS
    pyp_client_leave(p->client);
    pyp_view_release(&t);
    if (rc < 0)
        return pyp_raise_client(p->client, rc);
    return PyLong_FromLong(rc);
}

/* pin(tokens, *, salt=0, parent=None): pins the longest cached prefix; returns its length. */
PyObject *pyp_pool_pin(pyp_pool *p, PyObject *args, PyObject *kw)
{
    return prefix_call(p, args, kw, paged_prefix_pin, "O|$KO:pin", 0);
}

/* unpin(tokens=None, *, salt=0, parent=None): drops a prefix's pins, or every pin the caller
 * may drop; returns the prefix's length or the pins dropped. */
PyObject *pyp_pool_unpin(pyp_pool *p, PyObject *args, PyObject *kw)
{
    return prefix_call(p, args, kw, paged_prefix_unpin, "|O$KO:unpin", 1);
}

/* evict_prefix(tokens, *, salt=0, parent=None): takes the longest cached prefix out of the
 * cache; returns its length. */
PyObject *pyp_pool_evict_prefix(pyp_pool *p, PyObject *args, PyObject *kw)
{
    return prefix_call(p, args, kw, paged_prefix_evict, "O|$KO:evict_prefix", 0);
}

/* hash_blocks(tokens, block_size, *, salt=0, parent=None): the chained prefix hashes of the
 * whole blocks of tokens, as the daemon computes them; returns a list of ints. */
PyObject *pyp_hash_blocks(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = { "tokens", "block_size", "salt", "parent", NULL };
    (void) self;
    PyObject *to, *parent_obj = NULL;
    unsigned int bsize;
    unsigned long long salt = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OI|$KO:hash_blocks", kwlist, &to, &bsize, &salt, &parent_obj))
        return NULL;
    if (bsize == 0) {
        PyErr_SetString(PyExc_ValueError, "block_size: 0");
        return NULL;
    }
    paged_hash parent;
    struct pyp_view t;
    if (parse_hash(parent_obj, &parent) < 0)
        return NULL;
    if (pyp_view_ints(&t, to, "tokens") < 0) {
        pyp_view_release(&t);
        return NULL;
    }
    size_t n = (size_t) t.shape[0] / bsize;
    paged_hash *out = calloc(n > 0 ? n : 1, sizeof *out);
    if (out == NULL) {
        pyp_view_release(&t);
        return PyErr_NoMemory();
    }
    long got = paged_hash_blocks(parent_obj == NULL || parent_obj == Py_None ? NULL : &parent, t.data,
                                 (size_t) t.shape[0], bsize, salt, out);
    pyp_view_release(&t);
    PyObject *l = got < 0 ? pyp_raise((int) got, NULL, paged_strerror((int) got)) : PyList_New(got);
    for (long i = 0; l != NULL && got >= 0 && i < got; i++) {
        PyObject *x = pyp_hash_int(out[i]);
        if (x == NULL || PyList_SetItem(l, i, x) < 0) {
            Py_DECREF(l);
            l = NULL;
        }
    }
    free(out);
    return l;
}
