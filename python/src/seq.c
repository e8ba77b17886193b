/* seq.c: the Sequence type: a sequence's blocks and slots as tokens are added, prefixes shared. */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

#include <stdlib.h>

PyTypeObject *pyp_seq_type;

/* Wraps a sequence of pool p; returns the Sequence, or NULL (the sequence is destroyed then). */
PyObject *pyp_seq_new(pyp_pool *p, paged_seq *ps)
{
    pyp_seq *s = PyObject_New(pyp_seq, pyp_seq_type);
    if (s == NULL) {
        paged_seq_destroy(ps);
        return NULL;
    }
    Py_INCREF((PyObject *) p);
    s->pool = p;
    s->ps = ps;
    return (PyObject *) s;
}

/* Returns whether s's handle is still valid: not closed, its pool attached, its client open. */
static int seq_alive(const pyp_seq *s)
{
    return s->ps != NULL && s->pool->pp != NULL && s->pool->client->pc != NULL;
}

/* Begins a call on s; returns 0, or -1 with ClosedError or RuntimeError. */
static int seq_enter(pyp_seq *s)
{
    if (!seq_alive(s)) {
        pyp_raise_closed(s->ps == NULL ? "the sequence" : "the sequence's pool");
        return -1;
    }
    return pyp_client_enter(s->pool->client);
}

/* Destroys the handle if it is still valid (the library frees a detached pool's sequences
 * itself); returns nothing. */
static void seq_destroy_now(pyp_seq *s)
{
    if (seq_alive(s) && !s->pool->client->busy) {
        paged_seq *ps = s->ps;
        s->ps = NULL;
        Py_BEGIN_ALLOW_THREADS
        paged_seq_destroy(ps);
        Py_END_ALLOW_THREADS
    }
    s->ps = NULL;
}

/* Frees the sequence's blocks and drops its pool; returns nothing. */
static void seq_dealloc(PyObject *self)
{
    pyp_seq *s = (pyp_seq *) self;
    PyTypeObject *tp = Py_TYPE(self);
    seq_destroy_now(s);
    Py_DECREF((PyObject *) s->pool);
    PyObject_Free(self);
    Py_DECREF(tp);
}

/* close(): frees the sequence's block references; returns None. */
static PyObject *seq_close(PyObject *self, PyObject *unused)
{
    (void) unused;
    pyp_seq *s = (pyp_seq *) self;
    if (s->pool->client->busy) {
        PyErr_SetString(PyExc_RuntimeError, "close: a call is running in another thread");
        return NULL;
    }
    seq_destroy_now(s);
    Py_RETURN_NONE;
}

/* __exit__(*exc): closes the sequence; returns False. */
static PyObject *seq_exit_ctx(PyObject *self, PyObject *args)
{
    (void) args;
    return pyp_ctx_exit(seq_close(self, NULL));
}

/* extend(n=None, tokens=None): adds n tokens (or len(tokens), whose ids allow prefix
 * caching); returns their slots, a list of n ints to append their keys and values to. */
static PyObject *seq_extend(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = { "n", "tokens", NULL };
    pyp_seq *s = (pyp_seq *) self;
    PyObject *n_obj = Py_None, *tok_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:extend", kwlist, &n_obj, &tok_obj))
        return NULL;
    struct pyp_view v = { 0 };
    long n = -1;
    if (tok_obj != Py_None) {
        if (pyp_view_ints(&v, tok_obj, "tokens") < 0) {
            pyp_view_release(&v);
            return NULL;
        }
        n = (long) v.shape[0];
    }
    if (n_obj != Py_None) {
        long given = PyLong_AsLong(n_obj);
        if (given == -1 && PyErr_Occurred()) {
            pyp_view_release(&v);
            return NULL;
        }
        if (n >= 0 && given != n) {
            pyp_view_release(&v);
            PyErr_Format(PyExc_ValueError, "n: %ld, but tokens holds %ld", given, n);
            return NULL;
        }
        n = given;
    }
    if (n < 0 || n > (long) 1 << 20) {
        pyp_view_release(&v);
        PyErr_Format(PyExc_ValueError, "n: %ld is not between 0 and 2^20 (give n or tokens)", n);
        return NULL;
    }
    int32_t *slots = calloc(n > 0 ? (size_t) n : 1, sizeof *slots);
    if (slots == NULL || seq_enter(s) < 0) {
        free(slots);
        pyp_view_release(&v);
        return slots == NULL ? PyErr_NoMemory() : NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_seq_extend(s->ps, (uint32_t) n, v.data, slots);
    Py_END_ALLOW_THREADS
    pyp_client_leave(s->pool->client);
    pyp_view_release(&v);
    PyObject *r = rc < 0 ? pyp_raise_client(s->pool->client, rc) : pyp_int_list(slots, (uint32_t) n);
    free(slots);
    return r;
}

/* adopt_prefix(tokens): starts the empty sequence with the longest cached prefix of tokens;
 * returns the number of tokens adopted (a multiple of the block size). */
static PyObject *seq_adopt_prefix(PyObject *self, PyObject *args)
{
    pyp_seq *s = (pyp_seq *) self;
    PyObject *tok_obj;
    if (!PyArg_ParseTuple(args, "O:adopt_prefix", &tok_obj))
        return NULL;
    struct pyp_view v;
    if (pyp_view_ints(&v, tok_obj, "tokens") < 0 || seq_enter(s) < 0) {
        pyp_view_release(&v);
        return NULL;
    }
    long rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_seq_adopt_prefix(s->ps, v.data, (uint32_t) v.shape[0]);
    Py_END_ALLOW_THREADS
    pyp_client_leave(s->pool->client);
    pyp_view_release(&v);
    if (rc < 0)
        return pyp_raise_client(s->pool->client, (int) rc);
    return PyLong_FromLong(rc);
}

/* publish(): publishes the sequence's full blocks not yet published; returns None. */
static PyObject *seq_publish(PyObject *self, PyObject *unused)
{
    (void) unused;
    pyp_seq *s = (pyp_seq *) self;
    if (seq_enter(s) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_seq_publish(s->ps);
    Py_END_ALLOW_THREADS
    pyp_client_leave(s->pool->client);
    if (rc < 0)
        return pyp_raise_client(s->pool->client, rc);
    Py_RETURN_NONE;
}

/* fork(): a new sequence sharing every block of this one; returns the Sequence. */
static PyObject *seq_fork(PyObject *self, PyObject *unused)
{
    (void) unused;
    pyp_seq *s = (pyp_seq *) self;
    if (seq_enter(s) < 0)
        return NULL;
    paged_seq *out = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_seq_fork(s->ps, &out);
    Py_END_ALLOW_THREADS
    pyp_client_leave(s->pool->client);
    if (rc < 0)
        return pyp_raise_client(s->pool->client, rc);
    return pyp_seq_new(s->pool, out);
}

/* len(sequence): the number of tokens; -1 with ClosedError once closed. */
static Py_ssize_t seq_length(PyObject *self)
{
    pyp_seq *s = (pyp_seq *) self;
    if (!seq_alive(s)) {
        pyp_raise_closed("the sequence");
        return -1;
    }
    return (Py_ssize_t) paged_seq_len(s->ps);
}

/* The blocks property: the block table, a list of ids. */
static PyObject *seq_get_blocks(PyObject *self, void *closure)
{
    (void) closure;
    pyp_seq *s = (pyp_seq *) self;
    if (!seq_alive(s))
        return pyp_raise_closed("the sequence");
    uint32_t n = 0;
    const int32_t *ids = paged_seq_blocks(s->ps, &n);
    return pyp_int_list(ids, n);
}

static PyMethodDef seq_methods[] = {
    { "close", seq_close, METH_NOARGS, "close()\n--\n\nFrees the sequence's block references." },
    { "__enter__", pyp_ctx_enter, METH_NOARGS, "__enter__()\n--\n\nReturns the sequence." },
    { "__exit__", seq_exit_ctx, METH_VARARGS, "__exit__(*exc)\n--\n\nCloses the sequence." },
    { "extend", (PyCFunction) (void (*)(void)) seq_extend, METH_VARARGS | METH_KEYWORDS,
      "extend(n=None, tokens=None)\n--\n\nAdds n tokens (or the token ids in tokens, which prefix "
      "caching needs) to the end, taking blocks as needed; returns their slots (a list) for "
      "Pool.append." },
    { "adopt_prefix", seq_adopt_prefix, METH_VARARGS,
      "adopt_prefix(tokens)\n--\n\nStarts the empty sequence with the longest published prefix of "
      "tokens; returns how many tokens it adopted, whose keys and values need no computing." },
    { "publish", seq_publish, METH_NOARGS,
      "publish()\n--\n\nPublishes the sequence's full blocks that are not yet published." },
    { "fork", seq_fork, METH_NOARGS,
      "fork()\n--\n\nReturns a new Sequence sharing every block of this one (copy on write)." },
    { NULL, NULL, 0, NULL },
};

static PyGetSetDef seq_getset[] = {
    { "blocks", seq_get_blocks, NULL, "The block table: a list of block ids.", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyType_Slot seq_slots[] = {
    { Py_tp_doc, "A sequence of a pool (Pool.sequence): its block table and slots as tokens are "
                 "added; len() is its number of tokens." },
    { Py_tp_dealloc, seq_dealloc },
    { Py_tp_methods, seq_methods },
    { Py_tp_getset, seq_getset },
    { Py_sq_length, seq_length },
    { 0, NULL },
};

static PyType_Spec seq_spec = {
    .name = "paged._paged.Sequence",
    .basicsize = sizeof(pyp_seq),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = seq_slots,
};

/* Creates the Sequence type and adds it to module; returns 0 or -1. */
int pyp_seq_init_type(PyObject *module)
{
    return pyp_add_type(module, &seq_spec, "Sequence", &pyp_seq_type);
}
