/* run.c: completions reaped from a client's ring and routed by tag to their requests, and a request's error raised. */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

#include <string.h>

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
    return rc;
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
