/* events.c: paged.Events, a subscription to the daemon's events (paged_events_open(3)). */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

PyTypeObject *pyp_events_type;

/* One subscription: the library's handle, NULL once closed. */
typedef struct pyp_events {
    PyObject_HEAD
    paged_events *ev;
} pyp_events;

/* Returns the name of an event type ("blocks", "evict", ...), or "unknown". */
static const char *event_name(uint32_t type)
{
    static const char *const names[] = {
        [PAGED_EVENT_CONNECT] = "connect", [PAGED_EVENT_DISCONNECT] = "disconnect",
        [PAGED_EVENT_POOL_CREATE] = "pool_create", [PAGED_EVENT_POOL_DESTROY] = "pool_destroy",
        [PAGED_EVENT_EVICT] = "evict", [PAGED_EVENT_ATTACH] = "attach", [PAGED_EVENT_DETACH] = "detach",
        [PAGED_EVENT_LOST] = "lost", [PAGED_EVENT_EXPIRE] = "expire", [PAGED_EVENT_BLOCKS] = "blocks",
    };
    return type < sizeof names / sizeof names[0] && names[type] != NULL ? names[type] : "unknown";
}

/* Returns the name of a block event's action or tier. */
static const char *block_word(uint32_t value, int tier)
{
    static const char *const actions[] = { "?", "stored", "offloaded", "reloaded", "removed" };
    static const char *const tiers[] = { "pool", "host", "file" };
    if (tier)
        return value < 3 ? tiers[value] : "?";
    return value < 5 ? actions[value] : "?";
}

/* Returns the list of e's block entries as dicts, or NULL with an exception. */
static PyObject *block_list(const paged_event *e)
{
    PyObject *list = PyList_New(e->num_blocks);
    for (uint32_t i = 0; list != NULL && i < e->num_blocks; i++) {
        const paged_block_event *b = &e->blocks[i];
        PyObject *hash = pyp_hash_int(b->hash);
        PyObject *tenant = b->tenant == UINT32_MAX ? Py_NewRef(Py_None) : PyLong_FromUnsignedLong(b->tenant);
        PyObject *d = hash != NULL && tenant != NULL
                          ? Py_BuildValue("{s:s,s:s,s:O,s:O}", "action", block_word(b->action, 0), "tier",
                                          block_word(b->tier, 1), "tenant", tenant, "hash", hash)
                          : NULL;
        Py_XDECREF(hash);
        Py_XDECREF(tenant);
        if (d == NULL || PyList_SetItem(list, i, d) < 0)
            Py_CLEAR(list);
    }
    return list;
}

/* Events(socket=None, *, blocks=False, inspect=False): subscribes; raises paged.Error. */
static PyObject *events_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = { "socket", "blocks", "inspect", NULL };
    const char *socket = NULL;
    int blocks = 0, inspect = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|z$pp:Events", kwlist, &socket, &blocks, &inspect))
        return NULL;
    unsigned flags = (blocks ? PAGED_EVENTS_BLOCKS : 0) | (inspect ? PAGED_EVENTS_INSPECT : 0);
    paged_events *ev = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_events_open(socket, flags, &ev);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return pyp_raise(rc, NULL, "paged_events_open");
    allocfunc alloc = (allocfunc) PyType_GetSlot(type, Py_tp_alloc);
    pyp_events *self = (pyp_events *) alloc(type, 0);
    if (self == NULL) {
        paged_events_close(ev);
        return NULL;
    }
    self->ev = ev;
    return (PyObject *) self;
}

/* next(timeout=None): the next event as a dict, or None when timeout seconds pass first. */
static PyObject *events_next(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = { "timeout", NULL };
    pyp_events *self = (pyp_events *) obj;
    PyObject *timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:next", kwlist, &timeout))
        return NULL;
    if (self->ev == NULL)
        return pyp_raise_closed("the subscription");
    int ms = -1;
    if (timeout != Py_None) {
        double s = PyFloat_AsDouble(timeout);
        if (s == -1.0 && PyErr_Occurred())
            return NULL;
        ms = s <= 0 ? 0 : s >= 2147483.0 ? INT32_MAX : (int) (s * 1000.0);
    }
    paged_event e;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_events_next(self->ev, &e, ms);
    Py_END_ALLOW_THREADS
    if (rc == PAGED_E_TIMEOUT)
        Py_RETURN_NONE;
    if (rc < 0)
        return pyp_raise(rc, NULL, paged_events_error(self->ev));
    PyObject *blocks = e.type == PAGED_EVENT_BLOCKS ? block_list(&e) : PyList_New(0);
    if (blocks == NULL)
        return NULL;
    PyObject *d = Py_BuildValue("{s:s,s:K,s:s,s:I,s:I,s:s,s:I,s:N}", "type", event_name(e.type), "time_ns",
                                (unsigned long long) e.time_ns, "pool", e.pool, "client_id", e.client_id, "pid",
                                e.pid, "client_name", e.client_name, "count", e.count, "blocks", blocks);
    return d;
}

/* fileno(): a descriptor that becomes readable when an event may be waiting. */
static PyObject *events_fileno(PyObject *obj, PyObject *unused)
{
    (void) unused;
    pyp_events *self = (pyp_events *) obj;
    if (self->ev == NULL)
        return pyp_raise_closed("the subscription");
    return PyLong_FromLong(paged_events_fd(self->ev));
}

/* close(): ends the subscription; later calls raise ClosedError. Returns None. */
static PyObject *events_close(PyObject *obj, PyObject *unused)
{
    (void) unused;
    pyp_events *self = (pyp_events *) obj;
    paged_events_close(self->ev);
    self->ev = NULL;
    Py_RETURN_NONE;
}

/* __exit__(*exc): closes; returns False. */
static PyObject *events_exit(PyObject *obj, PyObject *args)
{
    (void) args;
    return pyp_ctx_exit(events_close(obj, NULL));
}

/* Frees a subscription, closing it. */
static void events_dealloc(PyObject *obj)
{
    pyp_events *self = (pyp_events *) obj;
    paged_events_close(self->ev);
    PyTypeObject *type = Py_TYPE(obj);
    freefunc tp_free = (freefunc) PyType_GetSlot(type, Py_tp_free);
    tp_free(obj);
    Py_DECREF(type);
}

static PyMethodDef events_methods[] = {
    { "next", (PyCFunction) (void (*)(void)) events_next, METH_VARARGS | METH_KEYWORDS,
      "next(timeout=None)\n--\n\nWaits for the next event (timeout seconds at most; None: forever) and "
      "returns it as a dict: type ('connect', 'disconnect', 'pool_create', 'pool_destroy', 'evict', "
      "'attach', 'detach', 'lost', 'expire', 'blocks'), time_ns, pool, client_id, pid, client_name, "
      "count and blocks, the block entries of a 'blocks' event (action 'stored', 'offloaded', "
      "'reloaded' or 'removed'; tier 'pool', 'host' or 'file'; tenant, a uid or None for a shared "
      "scope; hash, the 128-bit int paged.hash_blocks gives); None when the time passes first." },
    { "fileno", events_fileno, METH_NOARGS,
      "fileno()\n--\n\nA descriptor that becomes readable when an event may be waiting (for select)." },
    { "close", events_close, METH_NOARGS, "close()\n--\n\nEnds the subscription." },
    { "__enter__", pyp_ctx_enter, METH_NOARGS, "__enter__()\n--\n\nReturns the subscription." },
    { "__exit__", events_exit, METH_VARARGS, "__exit__(*exc)\n--\n\nCloses the subscription." },
    { NULL, NULL, 0, NULL },
};

static PyType_Slot events_slots[] = {
    { Py_tp_doc, "Events(socket=None, *, blocks=False, inspect=False)\n--\n\nA subscription to the "
                 "daemon's events (paged_events_open(3)): with blocks=True also each prefix block stored, "
                 "offloaded, reloaded or removed, for a cache-aware router; a subscriber that is not root "
                 "sees only its own prefix scope's blocks. A context manager." },
    { Py_tp_new, events_new },
    { Py_tp_dealloc, events_dealloc },
    { Py_tp_methods, events_methods },
    { 0, NULL },
};

static PyType_Spec events_spec = {
    .name = "paged._paged.Events",
    .basicsize = sizeof(pyp_events),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = events_slots,
};

/* Adds the Events type to module; returns 0 or -1 with an exception. */
int pyp_events_init_type(PyObject *module)
{
    return pyp_add_type(module, &events_spec, "Events", &pyp_events_type);
}
