/* cuda.c: the few CUDA driver calls the extension makes itself (stream copies, a pointer's device), by dlopen. */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

#include <dlfcn.h>
#include <string.h>

/*
 * The module links neither the CUDA driver nor the runtime: a client of a cpu daemon must
 * import without CUDA. On the cuda backend it needs a stream-ordered device copy (staging a
 * tensor into the data arena, copying a staged output back) and the ordinal of the arena's
 * device, so it opens libcuda.so.1 the first time a cuda client asks, resolves the entry
 * points below (declared by hand: no CUDA headers at build time) and keeps them for the
 * life of the process. Copies run in the primary context of the device, the CUDA runtime's
 * (PyTorch's), pushed around each call so that the caller's current context is left as it
 * was.
 */

typedef int cu_result;
typedef int cu_device;
typedef struct cu_ctx_st *cu_context;
typedef unsigned long long cu_deviceptr;

/* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL of the driver API. */
#define CU_POINTER_DEVICE_ORDINAL 9

/* The driver's entry points the module uses. */
static struct {
    int loaded;               /* 1: resolved; -1: tried and failed (reason in why) */
    char why[200];
    cu_result (*init)(unsigned);
    cu_result (*device_get)(cu_device *, int);
    cu_result (*device_get_count)(int *);
    cu_result (*primary_retain)(cu_context *, cu_device);
    cu_result (*ctx_push)(cu_context);
    cu_result (*ctx_pop)(cu_context *);
    cu_result (*memcpy_dtod_async)(cu_deviceptr, cu_deviceptr, size_t, void *);
    cu_result (*pointer_get_attribute)(void *, int, cu_deviceptr);
    cu_result (*get_error_string)(cu_result, const char **);
} drv;

/* The primary contexts retained, by device ordinal (a process sees few devices). */
#define MAX_DEVICES 64
static cu_context primary[MAX_DEVICES];

/* Resolves name (or, when it is missing, alt) in lib into *slot; returns 1 or 0. */
static int sym(void *lib, const char *name, const char *alt, void *slot)
{
    void *f = dlsym(lib, name);
    if (f == NULL && alt != NULL)
        f = dlsym(lib, alt);
    memcpy(slot, &f, sizeof f);
    return f != NULL;
}

/* Loads the driver once; returns 0, or -1 with paged.NotSupportedError saying why. */
static int load(void)
{
    if (drv.loaded == 0) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        drv.loaded = -1;
        if (lib == NULL) {
            snprintf(drv.why, sizeof drv.why, "the CUDA driver cannot be loaded: %s", dlerror());
        } else if (!(sym(lib, "cuInit", NULL, &drv.init) && sym(lib, "cuDeviceGet", NULL, &drv.device_get)
                     && sym(lib, "cuDeviceGetCount", NULL, &drv.device_get_count)
                     && sym(lib, "cuDevicePrimaryCtxRetain", NULL, &drv.primary_retain)
                     && sym(lib, "cuCtxPushCurrent_v2", "cuCtxPushCurrent", &drv.ctx_push)
                     && sym(lib, "cuCtxPopCurrent_v2", "cuCtxPopCurrent", &drv.ctx_pop)
                     && sym(lib, "cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync", &drv.memcpy_dtod_async)
                     && sym(lib, "cuPointerGetAttribute", NULL, &drv.pointer_get_attribute))) {
            snprintf(drv.why, sizeof drv.why, "the CUDA driver lacks an entry point the paged module needs");
        } else if (drv.init(0) != 0) {
            snprintf(drv.why, sizeof drv.why, "the CUDA driver did not initialize (cuInit)");
        } else {
            (void) sym(lib, "cuGetErrorString", NULL, &drv.get_error_string);
            drv.loaded = 1;
        }
    }
    if (drv.loaded < 0) {
        pyp_raise(PAGED_E_NOTSUP, NULL, drv.why);
        return -1;
    }
    return 0;
}

/* Raises paged.DeviceError for a failed driver call what; returns -1. */
static int fail(const char *what, cu_result r)
{
    const char *s = NULL;
    if (drv.get_error_string != NULL)
        (void) drv.get_error_string(r, &s);
    char msg[256];
    snprintf(msg, sizeof msg, "%s: CUDA error %d (%s)", what, r, s != NULL ? s : "unknown");
    pyp_raise(PAGED_E_DEVICE, NULL, msg);
    return -1;
}

/* Stores the ordinal of the device that device address p is memory of (the only device,
 * when the driver cannot say and the process sees one); returns 0, or -1 with an exception. */
int pyp_cuda_device_of(const void *p, int *ordinal)
{
    if (load() < 0)
        return -1;
    int dev = -1, count = 0;
    cu_result r = drv.pointer_get_attribute(&dev, CU_POINTER_DEVICE_ORDINAL, (cu_deviceptr) (uintptr_t) p);
    if (r != 0 && drv.device_get_count(&count) == 0 && count == 1) {
        dev = 0;
        r = 0;
    }
    if (r != 0)
        return fail("finding the device of the data arena", r);
    *ordinal = dev;
    return 0;
}

/* Makes device's primary context current (retaining it on first use); returns 0 or -1. */
static int enter(int device)
{
    if (device < 0 || device >= MAX_DEVICES) {
        pyp_raise(PAGED_E_DEVICE, NULL, "the data arena's CUDA device is out of the module's range");
        return -1;
    }
    cu_result r = 0;
    if (primary[device] == NULL) {
        cu_device d;
        r = drv.device_get(&d, device);
        if (r == 0)
            r = drv.primary_retain(&primary[device], d);
        if (r != 0)
            return fail("retaining the device's primary context", r);
    }
    r = drv.ctx_push(primary[device]);
    return r != 0 ? fail("making the device's primary context current", r) : 0;
}

/* Queues on stream (a CUstream of device's primary context; NULL: its legacy default
 * stream) a copy of n bytes from device address src to dst; returns 0, or -1 with
 * paged.DeviceError naming arg. */
int pyp_cuda_copy(int device, void *dst, const void *src, uint64_t n, void *stream, const char *arg)
{
    if (n == 0)
        return 0;
    if (load() < 0 || enter(device) < 0)
        return -1;
    cu_result r = drv.memcpy_dtod_async((cu_deviceptr) (uintptr_t) dst, (cu_deviceptr) (uintptr_t) src,
                                        (size_t) n, stream);
    cu_context ignored;
    (void) drv.ctx_pop(&ignored);
    if (r != 0) {
        char what[96];
        snprintf(what, sizeof what, "%s: queueing its copy on the stream", arg);
        return fail(what, r);
    }
    return 0;
}

/* Returns the torch module when the program imported it (borrowed), else NULL. */
static PyObject *imported_torch(void)
{
    PyObject *modules = PyImport_GetModuleDict();
    PyObject *torch = modules != NULL ? PyDict_GetItemString(modules, "torch") : NULL;
    return torch != NULL && torch != Py_None ? torch : NULL;
}

/* Reads a stream handle from an int; returns 0, or -1 with TypeError naming arg. */
static int handle_of(PyObject *n, void **stream, const char *arg)
{
    unsigned long long h = PyLong_AsUnsignedLongLong(n);
    if (h == (unsigned long long) -1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: a stream handle is a non-negative int", arg);
        return -1;
    }
    *stream = (void *) (uintptr_t) h;
    return 0;
}

/* Sees obj as a CUDA stream of device for argument arg: None (torch's current stream of the
 * device when torch is imported, else the legacy default stream), an int (a cudaStream_t's
 * value, 0 the legacy default), an object with __cuda_stream__() (the CUDA stream protocol)
 * or a cuda_stream attribute (torch.cuda.Stream). Returns 0, or -1 with TypeError. */
int pyp_cuda_stream(PyObject *obj, int device, void **stream, const char *arg)
{
    *stream = NULL;
    PyObject *h = NULL;
    if (obj == Py_None) {
        PyObject *torch = imported_torch();
        if (torch == NULL)
            return 0;
        PyObject *cuda = PyObject_GetAttrString(torch, "cuda");
        PyObject *s = cuda != NULL ? PyObject_CallMethod(cuda, "current_stream", "i", device) : NULL;
        Py_XDECREF(cuda);
        h = s != NULL ? PyObject_GetAttrString(s, "cuda_stream") : NULL;
        Py_XDECREF(s);
        if (h == NULL) {
            /* A torch without CUDA: its streams are none of ours, the legacy default stream is. */
            PyErr_Clear();
            return 0;
        }
    } else if (PyLong_Check(obj)) {
        Py_INCREF(obj);
        h = obj;
    } else if (PyObject_HasAttrString(obj, "__cuda_stream__")) {
        PyObject *t = PyObject_CallMethod(obj, "__cuda_stream__", NULL);
        if (t == NULL)
            return -1;
        if (!PyTuple_Check(t) || PyTuple_Size(t) != 2) {
            Py_DECREF(t);
            PyErr_Format(PyExc_TypeError, "%s: __cuda_stream__() did not return (version, handle)", arg);
            return -1;
        }
        h = PyTuple_GetItem(t, 1);
        Py_XINCREF(h);
        Py_DECREF(t);
    } else if (PyObject_HasAttrString(obj, "cuda_stream")) {
        h = PyObject_GetAttrString(obj, "cuda_stream");
    } else {
        PyErr_Format(PyExc_TypeError, "%s: expected None, an int (a cudaStream_t), or a stream object "
                     "(with __cuda_stream__ or .cuda_stream, as torch.cuda.Stream)", arg);
        return -1;
    }
    if (h == NULL)
        return -1;
    int rc = handle_of(h, stream, arg);
    Py_DECREF(h);
    return rc;
}
