/* run.c: completions reaped from a client's ring and routed by tag to their requests, and a request's error raised. */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

#include <string.h>
#include <time.h>

/* The most completions one reap takes. */
#define REAP_MAX 32

/* Adds r to c's in-flight requests, which keep a reference to it until its completion is
 * reaped or the client is closed; returns 0, or -1 with MemoryError. */
int pyp_client_track(pyp_client *c, pyp_request *r)
{
    if (c->ninflight == c->inflight_cap) {
        size_t cap = c->inflight_cap != 0 ? 2 * c->inflight_cap : 16;
        pyp_request **grown = PyMem_Realloc(c->inflight, cap * sizeof *grown);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->inflight = grown;
        c->inflight_cap = cap;
    }
    Py_INCREF((PyObject *) r);
    c->inflight[c->ninflight++] = r;
    return 0;
}

/* Removes r from c's in-flight requests, dropping their reference; returns nothing. */
void pyp_client_untrack(pyp_client *c, pyp_request *r)
{
    for (size_t j = 0; j < c->ninflight; j++)
        if (c->inflight[j] == r) {
            c->inflight[j] = c->inflight[--c->ninflight];
            Py_DECREF((PyObject *) r);
            return;
        }
}

/* Hands each of the n completions in e to the in-flight request of c whose tag it carries
 * (one with no such request is dropped); returns nothing. */
static void route(pyp_client *c, const paged_completion *e, int n)
{
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < c->ninflight; j++) {
            pyp_request *r = c->inflight[j];
            if (r->tag != e[i].tag)
                continue;
            c->inflight[j] = c->inflight[--c->ninflight];
            pyp_request_complete(r, &e[i]);
            Py_DECREF((PyObject *) r);
            break;
        }
}

/* Reaps c's ready completions (timeout_ms 0: without blocking; else waiting up to
 * timeout_ms, < 0 forever, with the GIL released) and routes them to their requests.
 * Returns how many were reaped, or libpaged's error (PAGED_E_TIMEOUT, a connection error). */
int pyp_client_pump(pyp_client *c, int timeout_ms)
{
    paged_completion e[REAP_MAX];
    int rc;
    if (c->pc == NULL)
        return PAGED_E_DISCONNECTED;
    if (timeout_ms == 0) {
        rc = paged_reap(c->pc, e, REAP_MAX);
    } else {
        paged_client *pc = c->pc;
        Py_BEGIN_ALLOW_THREADS
        rc = paged_wait(pc, e, REAP_MAX, timeout_ms);
        Py_END_ALLOW_THREADS
    }
    if (rc > 0)
        route(c, e, rc);
    pyp_client_retire(c, 0);
    return rc;
}

/* How long closing a client waits in all for its streams to pass its requests' words. */
#define DRAIN_S 60

/* Returns a monotonic clock's seconds. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* Waits, the GIL released, until r's memory may be released or the monotonic clock passes
 * deadline (seconds); returns nothing. */
static void await_released(pyp_request *r, double deadline)
{
    struct timespec pause = { 0, 20000 };
    /* Bounded by the clock, and by a count of 20-microsecond pauses should it stand still. */
    for (unsigned n = 0; !pyp_request_released(r) && n < DRAIN_S * 50000u && now_s() < deadline; n++) {
        Py_BEGIN_ALLOW_THREADS
        nanosleep(&pause, NULL);
        Py_END_ALLOW_THREADS
    }
}

/* Keeps complete request r, referenced, until its caller's stream is done with its memory
 * (pyp_client_retire); returns 0, or -1 after waiting for the stream here when the list
 * cannot grow (the caller then releases r itself). */
int pyp_client_retire_later(pyp_client *c, pyp_request *r)
{
    if (c->nretiring == c->retiring_cap) {
        size_t cap = c->retiring_cap != 0 ? 2 * c->retiring_cap : 16;
        pyp_request **grown = PyMem_Realloc(c->retiring, cap * sizeof *grown);
        if (grown == NULL) {
            await_released(r, now_s() + DRAIN_S);
            return -1;
        }
        c->retiring = grown;
        c->retiring_cap = cap;
    }
    Py_INCREF((PyObject *) r);
    c->retiring[c->nretiring++] = r;
    return 0;
}

/* Releases the memory of c's retiring requests whose streams are done with it; with
 * drain (the client is closing), waits up to DRAIN_S seconds in all for the streams of the
 * others first, once: a stream still short of a word then keeps its request, and its
 * memory mapped. Returns how many requests are left retiring. */
size_t pyp_client_retire(pyp_client *c, int drain)
{
    double deadline = drain && !c->drain_expired ? now_s() + DRAIN_S : 0;
    for (size_t j = 0; j < c->nretiring;) {
        pyp_request *r = c->retiring[j];
        if (drain)
            await_released(r, deadline);
        if (!pyp_request_released(r)) {
            c->drain_expired |= drain;
            j++;
            continue;
        }
        /* Out of the list first: the release may run a tensor's deleter, which may call back. */
        c->retiring[j] = c->retiring[--c->nretiring];
        pyp_request_release(r);
        Py_DECREF((PyObject *) r);
    }
    return c->nretiring;
}

/* Ends every in-flight request of c as closed (their handles' waits raise ClosedError),
 * releasing what they kept; returns nothing. */
void pyp_client_abandon(pyp_client *c)
{
    pyp_request **list = c->inflight;
    size_t n = c->ninflight;
    c->inflight = NULL;
    c->ninflight = c->inflight_cap = 0;
    for (size_t i = 0; i < n; i++) {
        pyp_request_abandon(list[i]);
        Py_DECREF((PyObject *) list[i]);
    }
    PyMem_Free(list);
}

/* Returns whether a request field is a scalar, whose messages name no element. */
static int scalar_field(const char *field)
{
    static const char *const scalars[] = { "opcode", "pool", "layer", "count", "dtype", "num_q_heads",
                                           "window", "sm_scale", "flags" };
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++)
        if (strcmp(field, scalars[i]) == 0)
            return 1;
    return 0;
}

/* Raises the error of a request: from its completion, "decode: block_tables[3]: ..." with
 * the field at fault, or else (done->status differs from rc: preparing or submitting failed)
 * libpaged's message for the call. Returns NULL. */
PyObject *pyp_raise_completion(pyp_client *c, const paged_completion *done, int rc)
{
    if (done->status != rc || done->err_field == 0 || paged_field_name(done->err_field) == NULL) {
        const char *msg = c->pc != NULL ? paged_client_error(c->pc) : "";
        const char *op = paged_op_name(done->op);
        char buf[300];
        if (*msg == '\0') {
            snprintf(buf, sizeof buf, "%s%s%s", done->status == rc && op != NULL ? op : "",
                     done->status == rc && op != NULL ? ": " : "", paged_strerror(rc));
            msg = buf;
        }
        return pyp_raise(rc, NULL, msg);
    }
    const char *field = paged_field_name(done->err_field);
    const char *op = paged_op_name(done->op);
    char msg[300];
    if (scalar_field(field))
        snprintf(msg, sizeof msg, "%s: %s: %s", op != NULL ? op : "request", field, paged_strerror(rc));
    else
        snprintf(msg, sizeof msg, "%s: %s[%u]: %s", op != NULL ? op : "request", field, done->err_index,
                 paged_strerror(rc));
    return pyp_raise(rc, field, msg);
}
