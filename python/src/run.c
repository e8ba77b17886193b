/* run.c: one request through the client's rings, waited for with the GIL released, and its error raised. */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

#include <string.h>

/* Prepares req, submits it and waits for its completion (the GIL released meanwhile), which
 * lands in *done; a daemon that goes away ends the wait. Returns the completion's status, or
 * the error of preparing, submitting or waiting (done->status is then 1). */
int pyp_run(pyp_client *c, paged_request *req, paged_completion *done)
{
    static uint64_t next_tag = 1;
    uint64_t tag = next_tag++;
    req->tag = tag;
    memset(done, 0, sizeof *done);
    done->status = 1;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_prep(c->pc, req);
    if (rc == PAGED_OK)
        rc = paged_submit(c->pc);
    /* Synchronous use keeps one request in flight, so the completion reaped is ours; any
     * other (none is expected) is skipped, the loop bounded by what can be in flight. */
    int found = 0;
    for (unsigned tries = 0; rc >= 0 && !found && tries < 1u << 20; tries++) {
        paged_completion e;
        rc = paged_wait(c->pc, &e, 1, -1);
        if (rc == 1 && e.tag == tag) {
            *done = e;
            rc = e.status;
            found = 1;
        }
    }
    if (rc >= 0 && !found)
        rc = PAGED_E_PROTO;
    Py_END_ALLOW_THREADS
    return rc;
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

/* Raises the error of a request that pyp_run ran: from its completion, "decode:
 * block_tables[3]: ..." with the field at fault, or else libpaged's message for the call.
 * Returns NULL. */
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
