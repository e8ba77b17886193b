/* request.c: the Request type: a request submitted through a client's rings, the handle to wait on. */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

#include <limits.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

PyTypeObject *pyp_request_type;

/* Returns a new Request of client c, not yet submitted, or NULL with MemoryError. */
pyp_request *pyp_request_new(pyp_client *c)
{
    pyp_request *r = PyObject_New(pyp_request, pyp_request_type);
    if (r == NULL)
        return NULL;
    memset((char *) r + offsetof(pyp_request, client), 0, sizeof *r - offsetof(pyp_request, client));
    Py_INCREF((PyObject *) c);
    r->client = c;
    r->scratch.client = c;
    r->state = PYP_REQ_NEW;
    return r;
}

/* Unmarks r's output array as written by r: the output word goes with r's scratch, and the
 * array must not wait for whatever takes that memory next. Returns nothing. */
static void forget_ready(pyp_request *r)
{
    if (r->sync.on && r->result != NULL && PyObject_TypeCheck(r->result, pyp_array_type)) {
        pyp_array *a = (pyp_array *) r->result;
        if (a->has_ready && a->ready_off == PYP_WORD_OUT(&r->sync) && a->ready_value == r->sync.value)
            a->has_ready = 0;
    }
}

/* Releases what r kept for its request: scratch arena memory (its dependency words with
 * it) and input views; returns nothing. */
static void release(pyp_request *r)
{
    forget_ready(r);
    r->sync.on = 0;
    pyp_scratch_free(&r->scratch);
    r->scratch.n = 0;
    for (int i = 0; i < r->nviews; i++)
        pyp_view_release(&r->views[i]);
    r->nviews = 0;
    r->copy_to = NULL;
}

/* Returns whether what r kept may be released: it has no dependency words, or the one its
 * caller's stream writes last has been written (the stream is done with the request's
 * memory, and so is the daemon, whose word the stream waited for before). */
int pyp_request_released(pyp_request *r)
{
    if (!r->sync.on || r->client->pc == NULL)
        return 1;
    uint32_t w = __atomic_load_n(pyp_client_word(r->client, r->sync.release_off), __ATOMIC_ACQUIRE);
    return (int32_t) (w - r->sync.value) >= 0;
}

/* Releases what r kept (the caller made sure its streams are done with it); returns nothing. */
void pyp_request_release(pyp_request *r)
{
    release(r);
}

/* Releases what r kept now, or once its stream is done with it (the client's retiring
 * list); returns nothing. */
static void release_when_done(pyp_request *r)
{
    if (pyp_request_released(r) || pyp_client_retire_later(r->client, r) < 0)
        release(r);
}

/* Writes r's output word from the host, as the daemon does when the request succeeds, so
 * that the caller's stream that waits for it goes on; returns nothing. */
static void release_stream(pyp_request *r)
{
    if (r->sync.on && r->client->pc != NULL)
        __atomic_store_n(pyp_client_word(r->client, PYP_WORD_OUT(&r->sync)), r->sync.value, __ATOMIC_RELEASE);
}

/* Records r's completion: copies a staged output back to the caller's memory when it
 * succeeded (the cpu backend: on cuda the caller's stream copies it), releases the stream
 * of a failed cuda request, then releases what the request kept; returns nothing. */
void pyp_request_complete(pyp_request *r, const paged_completion *done)
{
    r->done = *done;
    r->state = PYP_REQ_DONE;
    if (done->status >= 0 && r->copy_to != NULL && !r->sync.on && r->client->pc != NULL) {
        char *base = paged_arena_base(r->client->pc, PAGED_ARENA_DATA, NULL);
        memcpy(r->copy_to, base + r->copy_off, (size_t) r->copy_len);
    }
    if (done->status < 0) {
        release_stream(r);
        forget_ready(r);
    }
    release_when_done(r);
    if (done->status < 0)
        Py_CLEAR(r->result);
}

/* Ends r as closed with its client (its wait raises ClosedError); returns nothing. */
void pyp_request_abandon(pyp_request *r)
{
    r->state = PYP_REQ_CLOSED;
    release_stream(r);
    forget_ready(r);
    release_when_done(r);
    Py_CLEAR(r->result);
}

/* Prepares and submits req as r's request (a full ring is drained of completions first),
 * tracking it in its client. Returns 0, or -1 with the error raised. */
static int submit(pyp_request *r, paged_request *req)
{
    static uint64_t next_tag = 1;
    pyp_client *c = r->client;
    r->tag = next_tag++;
    req->tag = r->tag;
    memset(&r->done, 0, sizeof r->done);
    r->done.status = 1;
    /* Tracked first, so that a request in the ring always has a handle for its completion. */
    if (pyp_client_track(c, r) < 0)
        return -1;
    r->state = PYP_REQ_INFLIGHT;
    int rc = PAGED_E_AGAIN;
    for (unsigned tries = 0; rc == PAGED_E_AGAIN && tries < 1u << 16; tries++) {
        rc = paged_prep(c->pc, req);
        if (rc == PAGED_E_AGAIN && paged_inflight(c->pc) > 0) {
            int w = pyp_client_pump(c, -1);
            rc = w < 0 ? w : PAGED_E_AGAIN;
        } else if (rc == PAGED_E_AGAIN) {
            break;
        }
    }
    if (rc == PAGED_OK)
        rc = paged_submit(c->pc);
    if (rc < 0) {
        pyp_client_untrack(c, r);
        r->state = PYP_REQ_FAILED;
        r->submit_rc = rc;
        /* The stream's last word is the input one: nothing waits for the output word. */
        r->sync.release_off = PYP_WORD_IN(&r->sync);
        release_when_done(r);
        pyp_raise_completion(c, &r->done, rc);
        return -1;
    }
    return 0;
}

/* Returns a monotonic clock's seconds. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* Waits until r is no longer in flight, up to timeout_s seconds (< 0: forever), routing the
 * completions of other requests reaped meanwhile to them; the client must be entered.
 * Returns 0, or -1 with TimedOutError or the connection's error raised. */
int pyp_request_wait(pyp_request *r, double timeout_s)
{
    pyp_client *c = r->client;
    double deadline = timeout_s >= 0 ? now_s() + timeout_s : 0;
    /* Each pass reaps at least one completion or ends, so in-flight requests bound it. */
    for (unsigned tries = 0; r->state == PYP_REQ_INFLIGHT; tries++) {
        if (tries >= 1u << 24) {
            pyp_raise(PAGED_E_PROTO, NULL, "wait: the request's completion never came");
            return -1;
        }
        int ms = -1;
        if (timeout_s >= 0) {
            double left = (deadline - now_s()) * 1000.0;
            ms = left <= 0 ? 0 : left >= INT_MAX ? INT_MAX : (int) left + 1;
        }
        int rc = pyp_client_pump(c, ms);
        if (rc == 0 && ms == 0)
            rc = PAGED_E_TIMEOUT;
        if (rc < 0 && r->state == PYP_REQ_INFLIGHT) {
            if (rc == PAGED_E_TIMEOUT) {
                char msg[128];
                snprintf(msg, sizeof msg, "wait: the request is not complete after %g s", timeout_s);
                pyp_raise(rc, NULL, msg);
            } else {
                pyp_raise_client(c, rc);
            }
            return -1;
        }
    }
    return 0;
}

/* Returns what r's request returns once it is no longer in flight (a new reference), or
 * NULL with its error raised: the completion's, ClosedError, or the submission's. */
PyObject *pyp_request_outcome(pyp_request *r)
{
    switch (r->state) {
    case PYP_REQ_DONE:
        if (r->done.status < 0)
            return pyp_raise_completion(r->client, &r->done, r->done.status);
        if (r->result == NULL)
            Py_RETURN_NONE;
        Py_INCREF(r->result);
        return r->result;
    case PYP_REQ_CLOSED:
        return pyp_raise_closed("the client");
    case PYP_REQ_FAILED:
        return pyp_raise_completion(r->client, &r->done, r->submit_rc);
    default:
        PyErr_SetString(PyExc_RuntimeError, "the request is not complete");
        return NULL;
    }
}

/* Orders the caller's stream of a submitted cuda request r after it: the stream waits for
 * the output word, copies a staged output to the caller's tensor, and writes the word that
 * releases the request's memory. Returns 0, or -1 with the error raised (the request stays
 * in flight). */
static int order_after(pyp_request *r)
{
    pyp_client *c = r->client;
    struct pyp_sync *s = &r->sync;
    int rc = paged_stream_wait(c->pc, s->stream, PYP_WORD_OUT(s), s->value, PAGED_STREAM_HOST);
    if (rc < 0) {
        s->release_off = PYP_WORD_OUT(s);
        pyp_raise_client(c, rc);
        return -1;
    }
    if (r->copy_to != NULL) {
        char *base = paged_arena_base(c->pc, PAGED_ARENA_DATA, NULL);
        if (pyp_cuda_copy(c->device, r->copy_to, base + r->copy_off, r->copy_len, s->stream, "out") < 0) {
            s->release_off = PYP_WORD_OUT(s);
            return -1;
        }
    }
    rc = paged_stream_signal(c->pc, s->stream, PYP_WORD_COPIED(s), s->value, PAGED_STREAM_HOST);
    if (rc < 0) {
        s->release_off = PYP_WORD_OUT(s);
        pyp_raise_client(c, rc);
        return -1;
    }
    return 0;
}

/* Submits req as r's request; with wait, waits for it (the client already entered) and
 * returns its outcome, else returns r itself (a new reference). NULL with the error raised. */
PyObject *pyp_request_run(pyp_request *r, paged_request *req, int wait)
{
    if (submit(r, req) < 0)
        return NULL;
    if (r->sync.on && order_after(r) < 0)
        return NULL;
    if (!wait) {
        Py_INCREF((PyObject *) r);
        return (PyObject *) r;
    }
    if (pyp_request_wait(r, -1) < 0)
        return NULL;
    return pyp_request_outcome(r);
}

/* Waits for r from Python: enters its client unless r is already complete; returns 0 or -1. */
static int wait_entered(pyp_request *r, double timeout_s)
{
    if (r->state != PYP_REQ_INFLIGHT)
        return 0;
    if (pyp_client_enter(r->client) < 0)
        return -1;
    int rc = pyp_request_wait(r, timeout_s);
    pyp_client_leave(r->client);
    return rc;
}

/* Parses an optional timeout argument (None: forever) into seconds (-1: forever); returns 0 or -1. */
static int parse_timeout(PyObject *args, PyObject *kw, const char *fmt, double *timeout_s)
{
    static char *kwlist[] = { "timeout", NULL };
    PyObject *t = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &t))
        return -1;
    *timeout_s = -1;
    if (t == Py_None)
        return 0;
    *timeout_s = PyFloat_AsDouble(t);
    if (*timeout_s == -1 && PyErr_Occurred())
        return -1;
    if (*timeout_s < 0) {
        PyErr_SetString(PyExc_ValueError, "timeout: must be None or at least 0");
        return -1;
    }
    return 0;
}

/* done(): reaps ready completions without blocking; returns whether the request is complete. */
static PyObject *request_done(PyObject *self, PyObject *unused)
{
    (void) unused;
    pyp_request *r = (pyp_request *) self;
    pyp_client *c = r->client;
    if (r->state == PYP_REQ_INFLIGHT && !c->busy && !c->closed && c->pc != NULL) {
        int rc = pyp_client_pump(c, 0);
        if (rc < 0 && r->state == PYP_REQ_INFLIGHT)
            return pyp_raise_client(c, rc);
    }
    return PyBool_FromLong(r->state != PYP_REQ_INFLIGHT);
}

/* wait(timeout=None): waits for the request, the GIL released; returns None, or raises its error. */
static PyObject *request_wait_m(PyObject *self, PyObject *args, PyObject *kw)
{
    pyp_request *r = (pyp_request *) self;
    double t;
    if (parse_timeout(args, kw, "|O:wait", &t) < 0 || wait_entered(r, t) < 0)
        return NULL;
    PyObject *out = pyp_request_outcome(r);
    if (out == NULL)
        return NULL;
    Py_DECREF(out);
    Py_RETURN_NONE;
}

/* result(timeout=None): waits for the request; returns what the synchronous call returns. */
static PyObject *request_result(PyObject *self, PyObject *args, PyObject *kw)
{
    pyp_request *r = (pyp_request *) self;
    double t;
    if (parse_timeout(args, kw, "|O:result", &t) < 0 || wait_entered(r, t) < 0)
        return NULL;
    return pyp_request_outcome(r);
}

/* The tag attribute: the number that matches the request's completion to it. */
static PyObject *request_get_tag(PyObject *self, void *closure)
{
    (void) closure;
    return PyLong_FromUnsignedLongLong(((pyp_request *) self)->tag);
}

/* Frees a request (never one in flight: its client holds it until it completes); returns nothing. */
static void request_dealloc(PyObject *self)
{
    pyp_request *r = (pyp_request *) self;
    PyTypeObject *tp = Py_TYPE(self);
    release(r);
    Py_XDECREF(r->result);
    Py_DECREF((PyObject *) r->client);
    PyObject_Free(self);
    Py_DECREF(tp);
}

static PyMethodDef request_methods[] = {
    { "done", request_done, METH_NOARGS,
      "done()\n--\n\nReaps the client's ready completions without blocking; returns whether this "
      "request is complete (successfully or not)." },
    { "wait", (PyCFunction) (void (*)(void)) request_wait_m, METH_VARARGS | METH_KEYWORDS,
      "wait(timeout=None)\n--\n\nWaits for the request with the GIL released, up to timeout seconds "
      "(None: forever). Returns None; raises the request's paged.Error when it failed, "
      "TimedOutError when the time ran out (the request stays in flight), ClosedError when its "
      "client was closed first." },
    { "result", (PyCFunction) (void (*)(void)) request_result, METH_VARARGS | METH_KEYWORDS,
      "result(timeout=None)\n--\n\nWaits as wait() does; returns what the synchronous call returns "
      "(the output for decode and prefill, None for append)." },
    { NULL, NULL, 0, NULL },
};

static PyGetSetDef request_getset[] = {
    { "tag", request_get_tag, NULL, "The tag that matches the request's completion to this handle.", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyType_Slot request_slots[] = {
    { Py_tp_doc, "A request submitted with wait=False (Pool.append, decode, prefill): wait on it "
                 "with wait() or result(), poll it with done(). It keeps its inputs and output "
                 "alive until it completes." },
    { Py_tp_dealloc, request_dealloc },
    { Py_tp_methods, request_methods },
    { Py_tp_getset, request_getset },
    { 0, NULL },
};

static PyType_Spec request_spec = {
    .name = "paged._paged.Request",
    .basicsize = sizeof(pyp_request),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = request_slots,
};

/* Creates the Request type and adds it to module; returns 0 or -1. */
int pyp_request_init_type(PyObject *module)
{
    return pyp_add_type(module, &request_spec, "Request", &pyp_request_type);
}
