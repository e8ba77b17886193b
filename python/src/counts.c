/* counts.c: Pool.stats() and Client.prefix_stats(): the prefix cache's counters as dicts. */
/* SPDX-License-Identifier: MIT */
#include "pypaged.h"

/* Returns a dict of the counters in names and values (n of each), or NULL with an error set. */
static PyObject *counts_dict(const char *const *names, const unsigned long long *values, size_t n)
{
    PyObject *d = PyDict_New();
    for (size_t i = 0; d != NULL && i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(values[i]);
        if (v == NULL || PyDict_SetItemString(d, names[i], v) < 0)
            Py_CLEAR(d);
        Py_XDECREF(v);
    }
    return d;
}

/* Pool.stats(): the pool's counters (paged_pool_stats(3)) as a dict of ints. */
PyObject *pyp_pool_stats(pyp_pool *p)
{
    if (pyp_pool_enter(p) < 0)
        return NULL;
    paged_pool_counts pc;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_pool_stats(p->pp, &pc);
    Py_END_ALLOW_THREADS
    pyp_client_leave(p->client);
    if (rc < 0)
        return pyp_raise_client(p->client, rc);
    static const char *const names[] = {
        "free", "referenced", "cached", "pinned", "lookups", "lookup_tokens", "pool_hit_tokens",
        "host_hit_tokens", "file_hit_tokens", "evictions", "expired", "host_units", "host_stored",
        "file_units", "file_bytes", "offloaded_bytes", "offload_ns", "written_bytes", "reloaded_bytes",
        "reloads", "reload_ns", "tier_dropped", "tier_damaged", "tier_failures",
    };
    const unsigned long long values[] = {
        pc.free, pc.referenced, pc.cached, pc.pinned, pc.lookups, pc.lookup_tokens, pc.pool_hit_tokens,
        pc.host_hit_tokens, pc.file_hit_tokens, pc.evictions, pc.expired, pc.host_units, pc.host_stored,
        pc.file_units, pc.file_bytes, pc.offloaded_bytes, pc.offload_ns, pc.written_bytes, pc.reloaded_bytes,
        pc.reloads, pc.reload_ns, pc.tier_dropped, pc.tier_damaged, pc.tier_failures,
    };
    return counts_dict(names, values, sizeof values / sizeof values[0]);
}

/* Client.prefix_stats(): this client's prefix-cache figures (paged_prefix_stats(3)) as a dict. */
PyObject *pyp_client_prefix_stats(pyp_client *c)
{
    if (pyp_client_enter(c) < 0)
        return NULL;
    paged_prefix_counts pc;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = paged_prefix_stats(c->pc, &pc);
    Py_END_ALLOW_THREADS
    pyp_client_leave(c);
    if (rc < 0)
        return pyp_raise_client(c, rc);
    static const char *const names[] = {
        "lookups", "lookup_tokens", "pool_hit_tokens", "host_hit_tokens", "file_hit_tokens",
        "reloaded_bytes", "reload_ns", "offloaded_bytes",
    };
    const unsigned long long values[] = {
        pc.lookups, pc.lookup_tokens, pc.pool_hit_tokens, pc.host_hit_tokens, pc.file_hit_tokens,
        pc.reloaded_bytes, pc.reload_ns, pc.offloaded_bytes,
    };
    return counts_dict(names, values, sizeof values / sizeof values[0]);
}
