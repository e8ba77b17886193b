/* view.c: request inputs: any buffer-protocol or DLPack object (or a list), staged into the arena. */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

#include <stdlib.h>
#include <string.h>

/* Sets the view's element type from a buffer format and item size; an unknown one keeps
 * the format as its name. Returns nothing. */
static void dtype_from_format(struct pyp_view *v, const char *format, Py_ssize_t itemsize)
{
    const char *f = format != NULL ? format : "B";
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    v->dtype = -1;
    if (f[0] != '\0' && f[1] == '\0') {
        if (f[0] == 'f' && itemsize == 4)
            v->dtype = PAGED_DTYPE_F32;
        else if (f[0] == 'e' && itemsize == 2)
            v->dtype = PAGED_DTYPE_F16;
        else if ((f[0] == 'i' || f[0] == 'l') && itemsize == 4)
            v->dtype = PYP_I32;
    }
    static const struct { char kind; const char *name; } kinds[] = {
        { 'f', "float" }, { 'd', "float" }, { 'e', "float" }, { 'b', "int" }, { 'h', "int" },
        { 'i', "int" }, { 'l', "int" }, { 'q', "int" }, { 'n', "int" }, { 'B', "uint" },
        { 'H', "uint" }, { 'I', "uint" }, { 'L', "uint" }, { 'Q', "uint" }, { 'N', "uint" },
        { '?', "bool" },
    };
    const char *kind = NULL;
    for (size_t i = 0; f[0] != '\0' && f[1] == '\0' && i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].kind == f[0])
            kind = kinds[i].name;
    if (v->dtype >= 0)
        snprintf(v->dtype_name, sizeof v->dtype_name, "%s", pyp_dtype_name(v->dtype));
    else if (kind != NULL)
        snprintf(v->dtype_name, sizeof v->dtype_name, "%s%zd", kind, itemsize * 8);
    else
        snprintf(v->dtype_name, sizeof v->dtype_name, "format '%.8s'", format != NULL ? format : "B");
}

/* Sets the view's element type from a DLPack dtype; returns nothing. */
static void dtype_from_dl(struct pyp_view *v, pyp_dl_dtype t)
{
    static const char *const codes[] = { "int", "uint", "float", "opaque", "bfloat", "complex", "bool" };
    v->dtype = -1;
    if (t.lanes == 1) {
        if (t.code == PYP_DL_FLOAT && t.bits == 32)
            v->dtype = PAGED_DTYPE_F32;
        else if (t.code == PYP_DL_FLOAT && t.bits == 16)
            v->dtype = PAGED_DTYPE_F16;
        else if (t.code == PYP_DL_BFLOAT && t.bits == 16)
            v->dtype = PAGED_DTYPE_BF16;
        else if (t.code == PYP_DL_INT && t.bits == 32)
            v->dtype = PYP_I32;
    }
    if (v->dtype >= 0)
        snprintf(v->dtype_name, sizeof v->dtype_name, "%s", pyp_dtype_name(v->dtype));
    else
        snprintf(v->dtype_name, sizeof v->dtype_name, "%s%u%s", t.code < 7 ? codes[t.code] : "code?",
                 t.bits, t.lanes != 1 ? "x lanes" : "");
}

/* Reads obj through the buffer protocol; returns 0, or -1 with an exception naming the
 * argument (a strided or read-only output array). */
static int view_buffer(struct pyp_view *v, PyObject *obj, int writable)
{
    int flags = PyBUF_RECORDS_RO | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &v->buf, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: %s", v->arg,
                     writable ? "not a writable array" : "its buffer cannot be read");
        return -1;
    }
    v->has_buf = 1;
    if (v->buf.ndim > PYP_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s: %d dimensions, at most %d", v->arg, v->buf.ndim, PYP_MAX_DIMS);
        return -1;
    }
    if (!PyBuffer_IsContiguous(&v->buf, 'C')) {
        PyErr_Format(PyExc_ValueError, "%s: not C-contiguous (copy it, e.g. numpy.ascontiguousarray)",
                     v->arg);
        return -1;
    }
    v->data = v->buf.buf;
    v->nbytes = (uint64_t) v->buf.len;
    v->ndim = v->buf.ndim;
    for (int i = 0; i < v->ndim; i++)
        v->shape[i] = v->buf.shape != NULL ? v->buf.shape[i] : v->buf.len / v->buf.itemsize;
    dtype_from_format(v, v->buf.format, v->buf.itemsize);
    return 0;
}

/* Checks that obj's __dlpack_device__ is the host; returns 0, or -1 with a TypeError
 * naming the argument and the device. */
static int dlpack_on_host(struct pyp_view *v, PyObject *obj)
{
    PyObject *dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    if (dev == NULL) {
        PyErr_Clear();
        return 0;
    }
    int type = -1, id = -1;
    int ok = PyArg_ParseTuple(dev, "ii", &type, &id);
    Py_DECREF(dev);
    if (!ok) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: __dlpack_device__ did not return (type, id)", v->arg);
        return -1;
    }
    if (type != PYP_DL_CPU && type != PYP_DL_CUDA_HOST) {
        PyErr_Format(PyExc_TypeError, "%s: a tensor on device type %d (id %d); this client takes "
                     "host memory (the cpu backend)", v->arg, type, id);
        return -1;
    }
    return 0;
}

/* Says that argument v is not memory of dev's CUDA device (what: where it is); returns -1
 * with a TypeError. */
static int not_on_device(const struct pyp_view *v, const struct pyp_devctx *dev, const char *what)
{
    PyErr_Format(PyExc_TypeError, "%s: %s; on the cuda backend tensors are CUDA memory of device %d "
                 "(torch: .to('cuda:%d'), or an array of Client.empty)", v->arg, what, dev->device, dev->device);
    return -1;
}

/* Checks that obj's __dlpack_device__ is CUDA device dev->device; returns 0, or -1 with a
 * TypeError naming the argument and the device. */
static int dlpack_on_device(struct pyp_view *v, PyObject *obj, const struct pyp_devctx *dev)
{
    PyObject *d = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    int type = -1, id = -1;
    int ok = d != NULL && PyArg_ParseTuple(d, "ii", &type, &id);
    Py_XDECREF(d);
    if (!ok) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: __dlpack_device__ did not return (type, id)", v->arg);
        return -1;
    }
    char what[80];
    if (type == PYP_DL_CPU || type == PYP_DL_CUDA_HOST)
        return not_on_device(v, dev, "a tensor in host memory (the cpu)");
    if (type != PYP_DL_CUDA) {
        snprintf(what, sizeof what, "a tensor on DLPack device type %d", type);
        return not_on_device(v, dev, what);
    }
    if (id != dev->device) {
        snprintf(what, sizeof what, "a tensor on CUDA device %d", id);
        return not_on_device(v, dev, what);
    }
    v->device = id;
    return 0;
}

/* Reads obj through DLPack, taking its capsule (the deleter runs at release); dev (NULL: a
 * host argument) says which CUDA device it must be on and the stream its producer orders it
 * on. Returns 0, or -1 with an exception naming the argument. */
static int view_dlpack(struct pyp_view *v, PyObject *obj, const struct pyp_devctx *dev)
{
    PyObject *capsule;
    if (dev == NULL) {
        if (dlpack_on_host(v, obj) < 0)
            return -1;
        capsule = PyObject_CallMethod(obj, "__dlpack__", NULL);
    } else {
        if (dlpack_on_device(v, obj, dev) < 0)
            return -1;
        /* DLPack names the legacy default stream 1, where a cudaStream_t of it is 0. */
        PyObject *args = PyTuple_New(0), *kw = Py_BuildValue("{s:K}", "stream", dev->stream == NULL
                                                             ? 1ull : (unsigned long long) (uintptr_t) dev->stream);
        PyObject *fn = PyObject_GetAttrString(obj, "__dlpack__");
        capsule = args != NULL && kw != NULL && fn != NULL ? PyObject_Call(fn, args, kw) : NULL;
        Py_XDECREF(args);
        Py_XDECREF(kw);
        Py_XDECREF(fn);
    }
    if (capsule == NULL)
        return -1;
    pyp_dl_managed *m = PyCapsule_GetPointer(capsule, PYP_DL_NAME);
    if (m == NULL) {
        Py_DECREF(capsule);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: __dlpack__ did not return a 'dltensor' capsule", v->arg);
        return -1;
    }
    /* Taken: from now on the deleter is ours to call, not the capsule's. */
    PyCapsule_SetName(capsule, PYP_DL_USED_NAME);
    Py_DECREF(capsule);
    v->dl = m;
    const pyp_dl_tensor *t = &m->dl_tensor;
    if (t->ndim < 0 || t->ndim > PYP_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s: %d dimensions, at most %d", v->arg, (int) t->ndim, PYP_MAX_DIMS);
        return -1;
    }
    dtype_from_dl(v, t->dtype);
    uint64_t elem = ((uint64_t) t->dtype.bits * t->dtype.lanes + 7) / 8, n = 1;
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->strides != NULL && t->shape[i] > 1 && t->strides[i] != expect) {
            PyErr_Format(PyExc_ValueError, "%s: not C-contiguous (stride %lld in dimension %d)", v->arg,
                         (long long) t->strides[i], i);
            return -1;
        }
        expect *= t->shape[i];
        n *= (uint64_t) t->shape[i];
        v->shape[i] = t->shape[i];
    }
    v->ndim = t->ndim;
    v->data = (char *) t->data + t->byte_offset;
    v->nbytes = n * elem;
    return 0;
}

/* Copies a list or tuple of numbers (one or two levels; short rows padded with 0) into
 * owned memory of dtype (PYP_I32 or PAGED_DTYPE_F32); returns 0, or -1 with an exception
 * naming the argument. */
static int view_list(struct pyp_view *v, PyObject *obj, int dtype)
{
    Py_ssize_t rows = PySequence_Size(obj), cols = 0;
    if (rows < 0)
        return -1;
    PyObject *first = rows > 0 ? PySequence_GetItem(obj, 0) : NULL;
    if (rows > 0 && first == NULL)
        return -1;
    int two = first != NULL && (PyList_Check(first) || PyTuple_Check(first));
    Py_XDECREF(first);
    for (Py_ssize_t i = 0; two && i < rows; i++) {
        PyObject *row = PySequence_GetItem(obj, i);
        Py_ssize_t n = row != NULL && (PyList_Check(row) || PyTuple_Check(row)) ? PySequence_Size(row) : -1;
        Py_XDECREF(row);
        if (n < 0) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s: row %zd is not a list", v->arg, i);
            return -1;
        }
        cols = n > cols ? n : cols;
    }
    Py_ssize_t count = two ? rows * cols : rows;
    v->owned = calloc(count > 0 ? (size_t) count : 1, 4);
    if (v->owned == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < rows; i++) {
        PyObject *row = two ? PySequence_GetItem(obj, i) : NULL;
        Py_ssize_t n = two ? PySequence_Size(row) : 1;
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *item = two ? PySequence_GetItem(row, j) : PySequence_GetItem(obj, i);
            Py_ssize_t at = two ? i * cols + j : i;
            if (item == NULL) {
                Py_XDECREF(row);
                return -1;
            }
            if (dtype == PYP_I32) {
                long long x = PyLong_Check(item) ? PyLong_AsLongLong(item) : (long long) INT64_MIN;
                if (PyErr_Occurred() || x < INT32_MIN || x > INT32_MAX) {
                    Py_DECREF(item);
                    Py_XDECREF(row);
                    PyErr_Clear();
                    PyErr_Format(PyExc_ValueError, "%s[%zd]: not an int32", v->arg, at);
                    return -1;
                }
                ((int32_t *) v->owned)[at] = (int32_t) x;
            } else {
                double x = PyFloat_AsDouble(item);
                if (x == -1.0 && PyErr_Occurred()) {
                    Py_DECREF(item);
                    Py_XDECREF(row);
                    PyErr_Clear();
                    PyErr_Format(PyExc_TypeError, "%s[%zd]: not a number", v->arg, at);
                    return -1;
                }
                ((float *) v->owned)[at] = (float) x;
            }
            Py_DECREF(item);
        }
        Py_XDECREF(row);
    }
    v->data = v->owned;
    v->nbytes = (uint64_t) count * 4;
    v->dtype = dtype;
    snprintf(v->dtype_name, sizeof v->dtype_name, "%s", pyp_dtype_name(dtype));
    v->ndim = two ? 2 : 1;
    v->shape[0] = rows;
    v->shape[1] = cols;
    return 0;
}

/* Sees obj as an array for argument arg: an ArenaArray, a buffer-protocol object, a DLPack
 * object, or (list_dtype PYP_I32 or PAGED_DTYPE_F32; 0: not taken) a list or tuple of
 * numbers. writable asks for memory the call may write. dev NULL asks for host memory, else
 * for memory of dev's CUDA device. Returns 0, or -1 with a TypeError or ValueError naming
 * arg; release the view either way. */
static int view_any(struct pyp_view *v, PyObject *obj, const char *arg, int list_dtype, int writable,
                    const struct pyp_devctx *dev)
{
    memset(v, 0, sizeof *v);
    v->arg = arg;
    v->dtype = -1;
    v->device = -1;
    if (PyObject_TypeCheck(obj, pyp_array_type)) {
        pyp_array *a = (pyp_array *) obj;
        if (a->client->pc == NULL)
            return pyp_raise_closed("the array's client"), -1;
        if (writable && a->pool != NULL) {
            PyErr_Format(PyExc_ValueError, "%s: a pool layer's view is read-only", arg);
            return -1;
        }
        if (dev == NULL && a->device >= 0) {
            PyErr_Format(PyExc_TypeError, "%s: an array in device memory; this argument is host memory (a "
                         "list, or an int32 array of Client.empty(..., host=True))", arg);
            return -1;
        }
        if (dev != NULL && a->device != dev->device) {
            char what[64];
            snprintf(what, sizeof what, a->device < 0 ? "an array in host memory" : "an array on CUDA device %d",
                     a->device);
            return not_on_device(v, dev, what);
        }
        Py_INCREF(obj);
        v->owner = obj;
        v->device = a->device;
        v->data = pyp_array_data(a);
        v->dtype = a->dtype;
        snprintf(v->dtype_name, sizeof v->dtype_name, "%s", pyp_dtype_name(a->dtype));
        v->ndim = a->ndim;
        v->nbytes = pyp_dtype_size(a->dtype);
        for (int i = 0; i < a->ndim; i++) {
            v->shape[i] = a->shape[i];
            v->nbytes *= (uint64_t) a->shape[i];
        }
        return 0;
    }
    if (dev != NULL && PyObject_CheckBuffer(obj))
        return not_on_device(v, dev, "host memory (the buffer protocol: numpy, bytes)");
    if (PyObject_CheckBuffer(obj))
        return view_buffer(v, obj, writable);
    if (PyObject_HasAttrString(obj, "__dlpack__"))
        return view_dlpack(v, obj, dev);
    if (dev != NULL && (PyList_Check(obj) || PyTuple_Check(obj)))
        return not_on_device(v, dev, "a list");
    if (list_dtype != 0 && (PyList_Check(obj) || PyTuple_Check(obj)))
        return view_list(v, obj, list_dtype);
    PyErr_Format(PyExc_TypeError, "%s: expected an array (DLPack or buffer protocol)%s", arg,
                 list_dtype != 0 ? " or a list" : "");
    return -1;
}

/* Sees obj as a host-memory argument arg (view_any); returns 0 or -1. */
int pyp_view_get(struct pyp_view *v, PyObject *obj, const char *arg, int list_dtype, int writable)
{
    return view_any(v, obj, arg, list_dtype, writable, NULL);
}

/* Sees obj as a data argument arg: host memory when dev is NULL (the cpu backend), else
 * memory of dev's CUDA device, its producer asked to order it on dev's stream; returns 0 or
 * -1 (view_any). */
int pyp_view_get_data(struct pyp_view *v, PyObject *obj, const char *arg, int list_dtype, int writable,
                      const struct pyp_devctx *dev)
{
    return view_any(v, obj, arg, list_dtype, writable, dev);
}

/* Releases what a view holds: the buffer, the DLPack tensor, the list's copy; returns
 * nothing. */
void pyp_view_release(struct pyp_view *v)
{
    if (v->has_buf)
        PyBuffer_Release(&v->buf);
    v->has_buf = 0;
    if (v->dl != NULL && v->dl->deleter != NULL)
        v->dl->deleter(v->dl);
    v->dl = NULL;
    free(v->owned);
    v->owned = NULL;
    Py_CLEAR(v->owner);
}

/* Checks the view's dimensions against ndim and shape (-1: any); returns 0, or -1 with a
 * ValueError naming the argument and both shapes. */
int pyp_view_expect(const struct pyp_view *v, int ndim, const int64_t *shape)
{
    int ok = v->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = shape[i] < 0 || shape[i] == v->shape[i];
    if (ok)
        return 0;
    char want[96] = "(", got[96] = "(";
    for (int i = 0; i < ndim; i++) {
        size_t n = strlen(want);
        if (shape[i] < 0)
            snprintf(want + n, sizeof want - n, "%s*", i ? ", " : "");
        else
            snprintf(want + n, sizeof want - n, "%s%lld", i ? ", " : "", (long long) shape[i]);
    }
    for (int i = 0; i < v->ndim; i++) {
        size_t n = strlen(got);
        snprintf(got + n, sizeof got - n, "%s%lld", i ? ", " : "", (long long) v->shape[i]);
    }
    PyErr_Format(PyExc_ValueError, "%s: expected shape %s), got %s)", v->arg, want, got);
    return -1;
}

/* Finds the view's memory in c's arena of kind (no copy) or copies it into a scratch
 * allocation of s: with memcpy, or for device memory (dev not NULL) by a copy queued on
 * dev's stream. Stores the arena offset. Returns 0, or -1 with NoMemoryError or the error of
 * queueing the copy. */
int pyp_view_stage(pyp_client *c, struct pyp_scratch *s, const struct pyp_view *v,
                   paged_arena_kind kind, const struct pyp_devctx *dev, uint64_t *off)
{
    size_t size = 0;
    char *base = paged_arena_base(c->pc, kind, &size);
    uintptr_t b = (uintptr_t) base, p = (uintptr_t) v->data;
    size_t elem = v->dtype >= 0 ? pyp_dtype_size(v->dtype) : 1;
    if (base != NULL && p >= b && v->nbytes <= size && p - b <= size - v->nbytes
        && (p - b) % (elem ? elem : 1) == 0) {
        *off = (uint64_t) (p - b);
        return 0;
    }
    uint64_t len = v->nbytes ? v->nbytes : 1;
    if (pyp_scratch_alloc(s, kind, len, v->arg, off) < 0)
        return -1;
    if (dev != NULL)
        return pyp_cuda_copy(dev->device, base + *off, v->data, v->nbytes, dev->stream, v->arg);
    if (v->nbytes > 0)
        memcpy(base + *off, v->data, (size_t) v->nbytes);
    return 0;
}

/* Takes len bytes of c's arena kind for the call, freed with the scratch; stores the offset.
 * Returns 0, or -1 with NoMemoryError naming arg. */
int pyp_scratch_alloc(struct pyp_scratch *s, paged_arena_kind kind, uint64_t len, const char *arg, uint64_t *off)
{
    pyp_client *c = s->client;
    if (s->n == PYP_MAX_SCRATCH) {
        PyErr_SetString(PyExc_RuntimeError, "too many arguments to stage");
        return -1;
    }
    struct pyp_heap *h = pyp_client_heap(c, kind);
    int rc = pyp_heap_alloc(h, len, 64, off);
    if (rc < 0) {
        size_t size = 0;
        (void) paged_arena_base(c->pc, (paged_arena_kind) h->kind, &size);
        char msg[160];
        snprintf(msg, sizeof msg, "%s: the %sarena (%zu bytes) has no room for %llu more bytes", arg,
                 h->kind == PAGED_ARENA_DATA ? "data " : "", size, (unsigned long long) len);
        pyp_raise(rc, arg, msg);
        return -1;
    }
    s->off[s->n] = *off;
    s->len[s->n] = len;
    s->kind[s->n] = h->kind;
    s->n++;
    return 0;
}

/* Frees a call's scratch allocations; returns nothing. */
void pyp_scratch_free(struct pyp_scratch *s)
{
    for (int i = s->n - 1; i >= 0; i--)
        if (s->client->pc != NULL)
            pyp_heap_free(pyp_client_heap(s->client, s->kind[i]), s->off[i], s->len[i]);
    s->n = 0;
}

/* Sees obj as a one-dimensional int32 argument arg (an array or a list of ints); returns 0,
 * or -1 with an exception naming arg (release the view either way). */
int pyp_view_ints(struct pyp_view *v, PyObject *obj, const char *arg)
{
    int64_t any = -1;
    if (pyp_view_get(v, obj, arg, PYP_I32, 0) < 0 || pyp_view_expect(v, 1, &any) < 0)
        return -1;
    if (v->dtype != PYP_I32) {
        PyErr_Format(PyExc_TypeError, "%s: expected int32, got %s", arg, v->dtype_name);
        return -1;
    }
    return 0;
}

/* Makes a list of n ints from v; returns it or NULL. */
PyObject *pyp_int_list(const int32_t *v, uint32_t n)
{
    PyObject *l = PyList_New(n);
    for (uint32_t i = 0; l != NULL && i < n; i++) {
        PyObject *x = PyLong_FromLong(v[i]);
        if (x == NULL || PyList_SetItem(l, i, x) < 0) {
            Py_DECREF(l);
            return NULL;
        }
    }
    return l;
}
