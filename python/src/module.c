/* module.c: the paged._paged extension module: its types, constants, errors and dtype names. */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

#include <string.h>

/* The pure-Python layer's function that makes an exception from (code, field, message);
 * code None makes its ClosedError. Set once by _set_error_factory. */
static PyObject *error_factory;

/* Raises the exception the factory makes for code (NULL field: none); returns NULL. */
static PyObject *raise_made(PyObject *code, const char *field, const char *message)
{
    if (error_factory == NULL) {
        PyErr_SetString(PyExc_RuntimeError, message);
        return NULL;
    }
    PyObject *exc = PyObject_CallFunction(error_factory, "Ozs", code, field, message);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *) Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* Raises paged.Error's subclass for a libpaged code, with the field at fault (or NULL) and
 * the message; returns NULL. */
PyObject *pyp_raise(int code, const char *field, const char *message)
{
    PyObject *num = PyLong_FromLong(code);
    if (num == NULL)
        return NULL;
    raise_made(num, field, message);
    Py_DECREF(num);
    return NULL;
}

/* Raises the error of a failed control call on c: its code and libpaged's message (or the
 * code's description when libpaged kept none); returns NULL. */
PyObject *pyp_raise_client(pyp_client *c, int code)
{
    const char *msg = c->pc != NULL ? paged_client_error(c->pc) : "";
    return pyp_raise(code, NULL, *msg != '\0' ? msg : paged_strerror(code));
}

/* Raises paged.ClosedError saying that what is closed; returns NULL. */
PyObject *pyp_raise_closed(const char *what)
{
    char msg[128];
    snprintf(msg, sizeof msg, "%s is closed", what);
    return raise_made(Py_None, NULL, msg);
}

/* Returns the name of an element type ("f32", "int32"), or "?" for none. */
const char *pyp_dtype_name(int dtype)
{
    if (dtype == PYP_I32)
        return "int32";
    const char *name = paged_dtype_name((paged_dtype) dtype);
    return name != NULL ? name : "?";
}

/* Returns the bytes of one element of dtype, or 0 for none. */
size_t pyp_dtype_size(int dtype)
{
    return dtype == PYP_I32 ? 4 : paged_dtype_size((paged_dtype) dtype);
}

/* Parses a dtype argument ("f32", "float32", "bf16", "int32", or a paged_dtype number) into
 * *dtype; returns 0, or -1 with a ValueError or TypeError naming arg. */
int pyp_parse_dtype(PyObject *obj, const char *arg, int *dtype)
{
    static const struct { const char *name; int dtype; } names[] = {
        { "f32", PAGED_DTYPE_F32 }, { "float32", PAGED_DTYPE_F32 }, { "f16", PAGED_DTYPE_F16 },
        { "float16", PAGED_DTYPE_F16 }, { "bf16", PAGED_DTYPE_BF16 }, { "bfloat16", PAGED_DTYPE_BF16 },
        { "fp8_e4m3", PAGED_DTYPE_FP8_E4M3 }, { "int32", PYP_I32 },
    };
    if (PyLong_Check(obj)) {
        long n = PyLong_AsLong(obj);
        if (n == -1 && PyErr_Occurred())
            return -1;
        if (n != PYP_I32 && paged_dtype_size((paged_dtype) n) == 0) {
            PyErr_Format(PyExc_ValueError, "%s: %ld is not a dtype", arg, n);
            return -1;
        }
        *dtype = (int) n;
        return 0;
    }
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: a dtype is a name such as 'f32', not %s", arg,
                     Py_TYPE(obj) == NULL ? "?" : "this type");
        return -1;
    }
    const char *s = PyUnicode_AsUTF8AndSize(obj, NULL);
    if (s == NULL)
        return -1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *dtype = names[i].dtype;
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "%s: '%s' is not a dtype (f32, f16, bf16, fp8_e4m3, int32)", arg, s);
    return -1;
}

/* _set_error_factory(fn): keeps fn, which makes the module's exceptions; returns None. */
static PyObject *set_error_factory(PyObject *self, PyObject *fn)
{
    (void) self;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "fn: not callable");
        return NULL;
    }
    PyObject *old = error_factory;
    Py_INCREF(fn);
    error_factory = fn;
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

/* strerror(code): returns libpaged's description of an error code. */
static PyObject *py_strerror(PyObject *self, PyObject *arg)
{
    (void) self;
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(paged_strerror((int) code));
}

/* version(): returns libpaged's version string. */
static PyObject *py_version(PyObject *self, PyObject *unused)
{
    (void) self;
    (void) unused;
    return PyUnicode_FromString(paged_version());
}

static PyMethodDef module_methods[] = {
    { "_set_error_factory", set_error_factory, METH_O,
      "_set_error_factory(fn)\n--\n\nSets the function (code, field, message) -> exception that "
      "makes the module's exceptions; code None makes ClosedError." },
    { "strerror", py_strerror, METH_O,
      "strerror(code)\n--\n\nReturns libpaged's description of a paged error code." },
    { "hash_blocks", (PyCFunction) (void (*)(void)) pyp_hash_blocks, METH_VARARGS | METH_KEYWORDS,
      "hash_blocks(tokens, block_size, *, salt=0, parent=None)\n--\n\nReturns the chained prefix hashes "
      "(128-bit ints) of the whole blocks of tokens, as the daemon computes them for publish and "
      "lookup (paged_hash_blocks(3))." },
    { "version", py_version, METH_NOARGS,
      "version()\n--\n\nReturns the version of the libpaged the module runs on." },
    { NULL, NULL, 0, NULL },
};

/* Adds the integer constants the Python layer re-exports; returns 0 or -1. */
static int add_constants(PyObject *m)
{
    static const struct { const char *name; long value; } k[] = {
        { "ALL_LAYERS", PAGED_ALL_LAYERS }, { "DTYPE_F32", PAGED_DTYPE_F32 },
        { "DTYPE_F16", PAGED_DTYPE_F16 }, { "DTYPE_BF16", PAGED_DTYPE_BF16 },
        { "DTYPE_FP8_E4M3", PAGED_DTYPE_FP8_E4M3 }, { "DTYPE_INT32", PYP_I32 },
        { "BACKEND_CPU", PAGED_BACKEND_CPU }, { "BACKEND_CUDA", PAGED_BACKEND_CUDA },
        { "POOL_SHARED_PREFIXES", PAGED_POOL_SHARED_PREFIXES }, { "POOL_SEALED", PAGED_POOL_SEALED },
        { "POOL_EXPORTED", PAGED_POOL_EXPORTED }, { "POOL_PEERS", PAGED_POOL_PEERS },
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (PyModule_AddIntConstant(m, k[i].name, k[i].value) < 0)
            return -1;
    return 0;
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "paged._paged",
    .m_doc = "The C core of the paged package: libpaged's client, pools, sequences and arena "
             "arrays. Use it through the paged package.",
    .m_size = -1,
    .m_methods = module_methods,
};

/* Creates the type of spec, stores it in *type and adds it to module as name; returns 0, or -1
 * with an exception. */
int pyp_add_type(PyObject *module, PyType_Spec *spec, const char *name, PyTypeObject **type)
{
    *type = (PyTypeObject *) PyType_FromSpec(spec);
    if (*type == NULL)
        return -1;
    Py_INCREF((PyObject *) *type);
    if (PyModule_AddObject(module, name, (PyObject *) *type) < 0) {
        Py_DECREF((PyObject *) *type);
        return -1;
    }
    return 0;
}

/* __enter__() of the module's context managers: returns the object itself. */
PyObject *pyp_ctx_enter(PyObject *self, PyObject *unused)
{
    (void) unused;
    Py_INCREF(self);
    return self;
}

/* The end of their __exit__: closed is what their close (or detach) returned. Returns False,
 * so that exceptions propagate, or NULL when closing raised. */
PyObject *pyp_ctx_exit(PyObject *closed)
{
    if (closed == NULL)
        return NULL;
    Py_DECREF(closed);
    Py_RETURN_FALSE;
}

PyMODINIT_FUNC PyInit__paged(void);

/* Creates the module; returns it, or NULL with an exception. */
PyMODINIT_FUNC PyInit__paged(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (add_constants(m) < 0 || pyp_client_init_type(m) < 0 || pyp_pool_init_type(m) < 0
        || pyp_seq_init_type(m) < 0 || pyp_array_init_type(m) < 0
        || pyp_request_init_type(m) < 0 || pyp_events_init_type(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
