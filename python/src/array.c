/* array.c: the ArenaArray type: a tensor in a client's arena, exported by DLPack with no copy. */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

#include <stdlib.h>
#include <string.h>

PyTypeObject *pyp_array_type;

/* A DLPack export: the managed tensor and the shape and strides it points to. */
struct export {
    pyp_dl_managed m;
    int64_t shape[PYP_MAX_DIMS];
    int64_t strides[PYP_MAX_DIMS];
};

/* Returns the bytes of an array of dtype and shape, or 0 with ValueError on overflow. */
static uint64_t array_bytes(int dtype, int ndim, const int64_t *shape)
{
    uint64_t n = pyp_dtype_size(dtype);
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(n, (uint64_t) shape[i], &n)) {
            PyErr_SetString(PyExc_ValueError, "shape: the array's size overflows");
            return 0;
        }
    return n;
}

/* Sets the fields of a new array that every kind shares; returns nothing. */
static void array_init(pyp_array *a, int dtype, int ndim, const int64_t *shape)
{
    a->dtype = dtype;
    a->ndim = ndim;
    memset(a->shape, 0, sizeof a->shape);
    memcpy(a->shape, shape, (size_t) ndim * sizeof shape[0]);
    a->has_ready = 0;
    a->ready_value = 0;
    a->ready_off = 0;
    a->ready_stream = NULL;
}

/* Makes a new array of dtype and shape in c's arena kind (device memory for the data arena
 * on the cuda backend); returns it, or NULL with NoMemoryError (the arena is full),
 * ValueError, or the error of mapping the data arena. */
PyObject *pyp_array_new(pyp_client *c, int kind, int dtype, int ndim, const int64_t *shape)
{
    uint64_t bytes = array_bytes(dtype, ndim, shape);
    if (bytes == 0 && PyErr_Occurred())
        return NULL;
    int device = -1;
    if (kind == PAGED_ARENA_DATA && c->cuda && (device = pyp_client_device(c)) < 0)
        return NULL;
    struct pyp_heap *h = pyp_client_heap(c, kind);
    uint64_t off;
    pyp_client_retire(c, 0);
    int rc = pyp_heap_alloc(h, bytes, 64, &off);
    if (rc < 0) {
        char msg[160];
        size_t size = 0;
        (void) paged_arena_base(c->pc, (paged_arena_kind) h->kind, &size);
        snprintf(msg, sizeof msg, "the %sarena (%zu bytes) has no room for %llu more bytes",
                 device >= 0 ? "data " : "", size, (unsigned long long) bytes);
        return pyp_raise(rc, NULL, msg);
    }
    pyp_array *a = PyObject_New(pyp_array, pyp_array_type);
    if (a == NULL) {
        pyp_heap_free(h, off, bytes == 0 ? 1 : bytes);
        return NULL;
    }
    Py_INCREF((PyObject *) c);
    a->client = c;
    a->pool = NULL;
    a->view_data = NULL;
    a->off = off;
    a->alloc_len = bytes == 0 ? 1 : bytes;
    a->kind = h->kind;
    a->device = device;
    array_init(a, dtype, ndim, shape);
    c->live_arrays++;
    return (PyObject *) a;
}

/* Makes a read-only view of pool p's memory at data (device memory of CUDA device device,
 * or host memory: -1), of dtype and shape; it keeps the pool attached and its client's
 * mapping while it lives. Returns it, or NULL. */
PyObject *pyp_array_view(pyp_pool *p, char *data, int device, int dtype, int ndim, const int64_t *shape)
{
    pyp_array *a = PyObject_New(pyp_array, pyp_array_type);
    if (a == NULL)
        return NULL;
    Py_INCREF((PyObject *) p);
    Py_INCREF((PyObject *) p->client);
    a->client = p->client;
    a->pool = p;
    a->view_data = data;
    a->off = 0;
    a->alloc_len = 0;
    a->kind = PAGED_ARENA_DATA;
    a->device = device;
    array_init(a, dtype, ndim, shape);
    p->live_views++;
    p->client->live_arrays++;
    return (PyObject *) a;
}

/* Returns the address of a's first element in this process. */
void *pyp_array_data(pyp_array *a)
{
    if (a->pool != NULL)
        return a->view_data;
    char *base = paged_arena_base(a->client->pc, (paged_arena_kind) a->kind, NULL);
    return base + a->off;
}

/* Frees the array's arena bytes and drops its client; returns nothing. */
static void array_dealloc(PyObject *self)
{
    pyp_array *a = (pyp_array *) self;
    PyTypeObject *tp = Py_TYPE(self);
    pyp_client *c = a->client;
    if (a->pool != NULL) {
        pyp_pool_view_gone(a->pool);
        Py_DECREF((PyObject *) a->pool);
    } else if (c->pc != NULL) {
        pyp_heap_free(pyp_client_heap(c, a->kind), a->off, a->alloc_len);
    }
    pyp_client_array_gone(c);
    Py_DECREF((PyObject *) c);
    PyObject_Free(self);
    Py_DECREF(tp);
}

/* The DLPack deleter: drops the export's reference to its array (taking the GIL, since a
 * consumer may call it from any thread) and frees the export; returns nothing. */
static void export_deleter(pyp_dl_managed *m)
{
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF((PyObject *) m->manager_ctx);
    PyGILState_Release(g);
    free(m);
}

/* The capsule's destructor: a capsule no consumer took still owns its tensor; returns
 * nothing. */
static void capsule_destructor(PyObject *capsule)
{
    if (!PyCapsule_IsValid(capsule, PYP_DL_NAME))
        return;
    pyp_dl_managed *m = PyCapsule_GetPointer(capsule, PYP_DL_NAME);
    if (m != NULL && m->deleter != NULL)
        m->deleter(m);
}

/* Fills a DLPack dtype for an element type; returns nothing. */
static void dl_dtype(int dtype, pyp_dl_dtype *out)
{
    *out = (pyp_dl_dtype) { .code = PYP_DL_FLOAT, .bits = 32, .lanes = 1 };
    if (dtype == PAGED_DTYPE_F16)
        out->bits = 16;
    else if (dtype == PAGED_DTYPE_BF16)
        *out = (pyp_dl_dtype) { .code = PYP_DL_BFLOAT, .bits = 16, .lanes = 1 };
    else if (dtype == PAGED_DTYPE_FP8_E4M3)
        *out = (pyp_dl_dtype) { .code = PYP_DL_UINT, .bits = 8, .lanes = 1 };
    else if (dtype == PYP_I32)
        out->code = PYP_DL_INT;
}

/* Orders the consumer's stream (DLPack's stream argument: None or 1 the legacy default
 * stream, 2 the per-thread one, -1 no ordering, else a cudaStream_t) after the request
 * that writes device array a, unless that request is known done or the stream already
 * waits for it; returns 0, or -1 with BufferError or the error of queueing the wait. */
static int order_on(pyp_array *a, PyObject *stream)
{
    void *s = NULL;
    if (stream != Py_None) {
        long long n = PyLong_AsLongLong(stream);
        if (n == -1 && PyErr_Occurred())
            return -1;
        if (n == 0 || n < -1) {
            PyErr_Format(PyExc_BufferError, "stream: %lld is no CUDA stream of DLPack (None, -1, 1, 2 or a "
                         "cudaStream_t)", n);
            return -1;
        }
        if (n == -1)
            return 0;
        s = n == 1 ? NULL : (void *) (uintptr_t) n;
    }
    if (!a->has_ready || a->client->pc == NULL)
        return 0;
    const uint32_t *w = pyp_client_word(a->client, a->ready_off);
    if ((int32_t) (__atomic_load_n(w, __ATOMIC_ACQUIRE) - a->ready_value) >= 0) {
        a->has_ready = 0;
        return 0;
    }
    if (s == a->ready_stream)
        return 0;
    int rc = paged_stream_wait(a->client->pc, s, a->ready_off, a->ready_value, PAGED_STREAM_HOST);
    if (rc < 0) {
        pyp_raise_client(a->client, rc);
        return -1;
    }
    return 0;
}

/* __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None): returns a
 * "dltensor" capsule viewing the array's memory (no copy); the array lives as long as the
 * consumer's tensor does. */
static PyObject *array_dlpack(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = { "stream", "max_version", "dl_device", "copy", NULL };
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__", kwlist, &stream, &max_version,
                                     &dl_device, &copy))
        return NULL;
    (void) max_version;
    pyp_array *a = (pyp_array *) self;
    if (a->device < 0 && stream != Py_None) {
        PyErr_SetString(PyExc_BufferError, "stream: host memory takes stream=None");
        return NULL;
    }
    if (copy == Py_True) {
        PyErr_SetString(PyExc_BufferError, "copy: an ArenaArray is exported without a copy only");
        return NULL;
    }
    if (dl_device != Py_None) {
        int type = -1, id = -1;
        if (!PyArg_ParseTuple(dl_device, "ii:dl_device", &type, &id))
            return NULL;
        if (a->device < 0 && type != PYP_DL_CPU) {
            PyErr_Format(PyExc_BufferError, "dl_device: the array is on the cpu, not device type %d", type);
            return NULL;
        }
        if (a->device >= 0 && (type != PYP_DL_CUDA || id != a->device)) {
            PyErr_Format(PyExc_BufferError, "dl_device: the array is memory of CUDA device %d, not (%d, %d); "
                         "copy it with torch", a->device, type, id);
            return NULL;
        }
    }
    if (a->device >= 0 && order_on(a, stream) < 0)
        return NULL;
    struct export *x = calloc(1, sizeof *x);
    if (x == NULL)
        return PyErr_NoMemory();
    int64_t stride = 1;
    for (int i = a->ndim - 1; i >= 0; i--) {
        x->shape[i] = a->shape[i];
        x->strides[i] = stride;
        stride *= a->shape[i];
    }
    x->m.dl_tensor = (pyp_dl_tensor) {
        .data = pyp_array_data(a), .ndim = a->ndim,
        .device = { a->device >= 0 ? PYP_DL_CUDA : PYP_DL_CPU, a->device >= 0 ? a->device : 0 },
        .shape = x->shape, .strides = x->strides, .byte_offset = 0,
    };
    dl_dtype(a->dtype, &x->m.dl_tensor.dtype);
    Py_INCREF(self);
    x->m.manager_ctx = self;
    x->m.deleter = export_deleter;
    PyObject *capsule = PyCapsule_New(&x->m, PYP_DL_NAME, capsule_destructor);
    if (capsule == NULL) {
        Py_DECREF(self);
        free(x);
    }
    return capsule;
}

/* __dlpack_device__(): returns (1, 0), the cpu, or (2, ordinal) for device memory. */
static PyObject *array_dlpack_device(PyObject *self, PyObject *unused)
{
    (void) unused;
    pyp_array *a = (pyp_array *) self;
    if (a->device >= 0)
        return Py_BuildValue("(ii)", PYP_DL_CUDA, a->device);
    return Py_BuildValue("(ii)", PYP_DL_CPU, 0);
}

/* The shape property: a tuple of ints. */
static PyObject *array_get_shape(PyObject *self, void *closure)
{
    (void) closure;
    pyp_array *a = (pyp_array *) self;
    PyObject *t = PyTuple_New(a->ndim);
    for (int i = 0; t != NULL && i < a->ndim; i++) {
        PyObject *n = PyLong_FromLongLong(a->shape[i]);
        if (n == NULL || PyTuple_SetItem(t, i, n) < 0) {
            Py_DECREF(t);
            return NULL;
        }
    }
    return t;
}

/* The dtype property: the element type's name. */
static PyObject *array_get_dtype(PyObject *self, void *closure)
{
    (void) closure;
    return PyUnicode_FromString(pyp_dtype_name(((pyp_array *) self)->dtype));
}

/* The nbytes property: the bytes the elements take. */
static PyObject *array_get_nbytes(PyObject *self, void *closure)
{
    (void) closure;
    pyp_array *a = (pyp_array *) self;
    return PyLong_FromUnsignedLongLong(array_bytes(a->dtype, a->ndim, a->shape));
}

/* The offset property: the array's byte offset in the arena. */
static PyObject *array_get_offset(PyObject *self, void *closure)
{
    (void) closure;
    return PyLong_FromUnsignedLongLong(((pyp_array *) self)->off);
}

/* The readonly property: whether the array is a pool layer's read-only view. */
static PyObject *array_get_readonly(PyObject *self, void *closure)
{
    (void) closure;
    return PyBool_FromLong(((pyp_array *) self)->pool != NULL);
}

/* The address property: the address of the first element in this process. */
static PyObject *array_get_address(PyObject *self, void *closure)
{
    (void) closure;
    return PyLong_FromVoidPtr(pyp_array_data((pyp_array *) self));
}

/* The buffer protocol: fills view with the array's memory, writable, C-contiguous, shape
 * and strides in an allocation of view->internal; returns 0, or -1 with an exception. */
static int array_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    pyp_array *a = (pyp_array *) self;
    if (a->device >= 0) {
        PyErr_Format(PyExc_BufferError, "the array is memory of CUDA device %d, which numpy and the buffer "
                     "protocol cannot read: view it with torch.from_dlpack", a->device);
        view->obj = NULL;
        return -1;
    }
    if (a->pool != NULL && (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE) {
        PyErr_SetString(PyExc_BufferError, "a pool layer's view is read-only");
        view->obj = NULL;
        return -1;
    }
    static char *const formats[] = { [PAGED_DTYPE_F32] = "f", [PAGED_DTYPE_F16] = "e",
                                     [PAGED_DTYPE_BF16] = "H", [PAGED_DTYPE_FP8_E4M3] = "B" };
    Py_ssize_t *dims = malloc(2 * PYP_MAX_DIMS * sizeof *dims);
    if (dims == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t item = (Py_ssize_t) pyp_dtype_size(a->dtype), stride = item;
    for (int i = a->ndim - 1; i >= 0; i--) {
        dims[i] = (Py_ssize_t) a->shape[i];
        dims[PYP_MAX_DIMS + i] = stride;
        stride *= dims[i];
    }
    view->buf = pyp_array_data(a);
    view->obj = self;
    Py_INCREF(self);
    view->len = stride;
    view->readonly = a->pool != NULL;
    view->itemsize = item;
    view->format = a->dtype == PYP_I32 ? "i" : formats[a->dtype];
    view->ndim = a->ndim;
    view->shape = dims;
    view->strides = dims + PYP_MAX_DIMS;
    view->suboffsets = NULL;
    view->internal = dims;
    return 0;
}

/* Frees what array_getbuffer allocated for view; returns nothing. */
static void array_releasebuffer(PyObject *self, Py_buffer *view)
{
    (void) self;
    free(view->internal);
    view->internal = NULL;
}

static PyMethodDef array_methods[] = {
    { "__dlpack__", (PyCFunction) (void (*)(void)) array_dlpack, METH_VARARGS | METH_KEYWORDS,
      "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
      "Returns a 'dltensor' capsule that views the array's arena memory, no copy; the array "
      "stays alive until the consumer's tensor is deleted. For device memory, stream is the "
      "consumer's CUDA stream (DLPack's convention: None or 1 the legacy default stream, 2 the "
      "per-thread one, -1 none, else a cudaStream_t): when a request still writes the array, "
      "the stream is made to wait for it." },
    { "__dlpack_device__", array_dlpack_device, METH_NOARGS,
      "__dlpack_device__()\n--\n\nReturns (1, 0) for host memory (the cpu), or (2, ordinal) for "
      "memory of the CUDA device of that ordinal (the data arena on the cuda backend)." },
    { NULL, NULL, 0, NULL },
};

static PyGetSetDef array_getset[] = {
    { "shape", array_get_shape, NULL, "The shape, a tuple of ints.", NULL },
    { "dtype", array_get_dtype, NULL, "The element type's name: 'f32', 'f16', 'bf16', 'fp8_e4m3' "
      "or 'int32'.", NULL },
    { "nbytes", array_get_nbytes, NULL, "The bytes the elements take.", NULL },
    { "offset", array_get_offset, NULL, "The byte offset of the array in the client's arena.", NULL },
    { "address", array_get_address, NULL, "The address of the first element in this process (a device "
      "address for device memory).", NULL },
    { "readonly", array_get_readonly, NULL, "Whether the array is a read-only view of a pool layer "
      "(Pool.layer); DLPack cannot say so, so its consumers must not write.", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyType_Slot array_slots[] = {
    { Py_tp_doc, "A C-contiguous tensor in a client's arena, made by Client.empty() or returned by "
                 "decode and prefill. Requests take it without a copy; numpy.from_dlpack() and "
                 "torch.from_dlpack() view its memory, and so do numpy.asarray() and memoryview() "
                 "(the buffer protocol, writable; bf16 shows as uint16, fp8 as uint8). On the cuda "
                 "backend a data-arena array is device memory: torch.from_dlpack() views it as a "
                 "CUDA tensor; the buffer protocol and numpy.from_dlpack refuse it." },
    { Py_tp_dealloc, array_dealloc },
    { Py_tp_methods, array_methods },
    { Py_tp_getset, array_getset },
    { Py_bf_getbuffer, array_getbuffer },
    { Py_bf_releasebuffer, array_releasebuffer },
    { 0, NULL },
};

static PyType_Spec array_spec = {
    .name = "paged._paged.ArenaArray",
    .basicsize = sizeof(pyp_array),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = array_slots,
};

/* Creates the ArenaArray type and adds it to module; returns 0 or -1. */
int pyp_array_init_type(PyObject *module)
{
    return pyp_add_type(module, &array_spec, "ArenaArray", &pyp_array_type);
}
