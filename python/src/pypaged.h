/* pypaged.h: the interface between the files of the paged extension module (prefix pyp_). */
/* SPDX-License-Identifier: MIT */
#ifndef PYP_PYPAGED_H
#define PYP_PYPAGED_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdio.h>

#include "paged.h"

#include "dlpack.h"

/* The most dimensions an array of the module has. */
#define PYP_MAX_DIMS 4

/* Element types of arrays: paged_dtype's values, and int32 for metadata. */
#define PYP_I32 100

/* One free extent of an arena heap: [off, off + len). */
struct pyp_extent {
    uint64_t off, len;
};

/* An allocator over one arena of a client: first fit in its free extents, else more of the
 * arena taken from libpaged's bump pointer, and the extent at the top given back to it. */
struct pyp_heap {
    paged_client *pc;
    paged_arena_kind kind;
    struct pyp_extent *free;  /* sorted by offset, never adjacent */
    size_t nfree, cap;
};

/* The Client type's object: one paged_client and the heaps of its arenas. */
typedef struct pyp_client {
    PyObject_HEAD
    paged_client *pc;         /* NULL once really closed */
    int closed;               /* close() was called: every call refuses */
    int busy;                 /* a call is running (with the GIL released) */
    Py_ssize_t live_arrays;   /* arena arrays alive: the mapping stays until they go */
    struct pyp_heap heap;     /* the host arena (also the data arena on the cpu backend) */
    struct pyp_heap dheap;    /* the data arena on the cuda backend (device memory) */
    int cuda;                 /* the daemon runs the cuda backend */
    int device;               /* cuda: the data arena's CUDA device ordinal, -1 until known */
    uint32_t word_seq;        /* cuda: the last dependency word value handed out */
    struct pyp_request **inflight; /* submitted requests not yet complete, each referenced */
    size_t ninflight, inflight_cap;
    struct pyp_request **retiring; /* cuda: complete requests whose streams may still use
                                      their memory, each referenced (run.c) */
    size_t nretiring, retiring_cap;
    int drain_expired;        /* closing waited for those streams in vain once */
} pyp_client;

/* The Pool type's object. */
typedef struct pyp_pool {
    PyObject_HEAD
    pyp_client *client;
    paged_pool *pp;           /* NULL once detached */
    paged_pool_info info;
    Py_ssize_t live_views;    /* layer views alive: the mapping stays until they go */
    int detach_pending;       /* detach() was called while views were alive */
} pyp_pool;

/* The Sequence type's object. */
typedef struct pyp_seq {
    PyObject_HEAD
    pyp_pool *pool;
    paged_seq *ps;            /* NULL once closed */
} pyp_seq;

/* The ArenaArray type's object: a tensor in a client's arena, or a read-only view of a
 * pool layer's keys or values (pool set). */
typedef struct pyp_array {
    PyObject_HEAD
    pyp_client *client;
    struct pyp_pool *pool;    /* a layer view's pool, else NULL */
    char *view_data;          /* a layer view's first element */
    uint64_t off;             /* arena offset */
    uint64_t alloc_len;       /* bytes taken from the heap */
    int kind;                 /* the arena: PAGED_ARENA_HOST or PAGED_ARENA_DATA */
    int device;               /* CUDA device ordinal of device memory, or -1: host memory */
    int dtype;                /* a paged_dtype or PYP_I32 */
    int ndim;
    int64_t shape[PYP_MAX_DIMS];
    int has_ready;            /* a request writes it: ready when its host word is reached */
    uint32_t ready_value;
    uint64_t ready_off;       /* the word's host-arena offset */
    void *ready_stream;       /* the stream already ordered after the word */
} pyp_array;

/* An input array seen through the buffer protocol, DLPack or a list: its memory, element
 * type and shape, and what to release afterwards. */
struct pyp_view {
    const char *arg;          /* the argument's name, for messages */
    void *data;
    uint64_t nbytes;
    int dtype;                /* a paged_dtype, PYP_I32, or -1 for any other */
    char dtype_name[32];
    int ndim;
    int64_t shape[PYP_MAX_DIMS];
    Py_buffer buf;            /* held when has_buf */
    int has_buf;
    pyp_dl_managed *dl;       /* a taken DLPack tensor, its deleter called at release */
    void *owned;              /* malloc'd copy of a list's elements */
    PyObject *owner;          /* an ArenaArray seen, referenced until release */
    int device;               /* CUDA device ordinal of device memory, or -1: host memory */
};

/* How a request's data arguments are seen on the cuda backend: on which device, and the
 * stream their producers are asked to order them on (DLPack's stream argument). */
struct pyp_devctx {
    int device;
    void *stream;
};

/* Scratch allocations of one call, freed when it ends. */
#define PYP_MAX_SCRATCH 8
struct pyp_scratch {
    pyp_client *client;
    uint64_t off[PYP_MAX_SCRATCH], len[PYP_MAX_SCRATCH];
    int kind[PYP_MAX_SCRATCH];
    int n;
};

/* A cuda request's dependency words, three 32-bit words of one host-arena allocation at off
 * (in the request's scratch): the caller's stream writes the first once the inputs are
 * there, the daemon the second once the outputs are, the caller's stream the third after a
 * staged output's copy. value is what each is written; the request's memory may be reused
 * once the word at release_off reaches it (HACKING.md, Python, "Stream ordering through
 * host-arena words" and the paragraphs after it). */
struct pyp_sync {
    int on;
    int signalled;            /* the input word's write is queued on the stream */
    uint32_t value;
    uint64_t off;
    uint64_t release_off;
    void *stream;
};
#define PYP_WORD_IN(s) ((s)->off)
#define PYP_WORD_OUT(s) ((s)->off + 4)
#define PYP_WORD_COPIED(s) ((s)->off + 8)

/* The most array arguments one request holds. */
#define PYP_MAX_VIEWS 8

/* States of a Request. */
enum { PYP_REQ_NEW, PYP_REQ_INFLIGHT, PYP_REQ_DONE, PYP_REQ_FAILED, PYP_REQ_CLOSED };

/* The Request type's object: one request submitted through a client's rings and what it
 * keeps alive until its completion is reaped (its input views, scratch arena memory, the
 * output array and where a staged output is copied back). */
typedef struct pyp_request {
    PyObject_HEAD
    pyp_client *client;
    uint64_t tag;             /* matches the completion to this handle */
    int state;                /* PYP_REQ_* */
    int submit_rc;            /* PYP_REQ_FAILED: the error of preparing or submitting */
    paged_completion done;    /* PYP_REQ_DONE: the completion */
    PyObject *result;         /* what result() returns once done (None for append) */
    struct pyp_view views[PYP_MAX_VIEWS];
    int nviews;
    struct pyp_scratch scratch;
    void *copy_to;            /* a staged output's caller memory, or NULL */
    uint64_t copy_off, copy_len;
    struct pyp_sync sync;     /* cuda: the dependency words */
} pyp_request;

extern PyTypeObject *pyp_client_type;
extern PyTypeObject *pyp_pool_type;
extern PyTypeObject *pyp_seq_type;
extern PyTypeObject *pyp_array_type;
extern PyTypeObject *pyp_request_type;
extern PyTypeObject *pyp_events_type;

/* module.c */
PyObject *pyp_raise(int code, const char *field, const char *message);
PyObject *pyp_raise_client(pyp_client *c, int code);
PyObject *pyp_raise_closed(const char *what);
const char *pyp_dtype_name(int dtype);
size_t pyp_dtype_size(int dtype);
int pyp_parse_dtype(PyObject *obj, const char *arg, int *dtype);
int pyp_add_type(PyObject *module, PyType_Spec *spec, const char *name, PyTypeObject **type);
PyObject *pyp_ctx_enter(PyObject *self, PyObject *unused);
PyObject *pyp_ctx_exit(PyObject *closed);

/* cuda.c */
int pyp_cuda_device_of(const void *p, int *ordinal);
int pyp_cuda_copy(int device, void *dst, const void *src, uint64_t n, void *stream, const char *arg);
int pyp_cuda_stream(PyObject *obj, int device, void **stream, const char *arg);

/* heap.c */
void pyp_heap_init(struct pyp_heap *h, paged_client *pc, paged_arena_kind kind);
int pyp_heap_alloc(struct pyp_heap *h, uint64_t len, uint64_t align, uint64_t *off);
void pyp_heap_free(struct pyp_heap *h, uint64_t off, uint64_t len);
void pyp_heap_fini(struct pyp_heap *h);

/* client.c */
int pyp_client_enter(pyp_client *c);
void pyp_client_leave(pyp_client *c);
void pyp_client_array_gone(pyp_client *c);
int pyp_client_init_type(PyObject *module);
struct pyp_heap *pyp_client_heap(pyp_client *c, int kind);
int pyp_client_device(pyp_client *c);
uint32_t *pyp_client_word(pyp_client *c, uint64_t off);

/* array.c */
PyObject *pyp_array_new(pyp_client *c, int kind, int dtype, int ndim, const int64_t *shape);
PyObject *pyp_array_view(struct pyp_pool *p, char *data, int device, int dtype, int ndim, const int64_t *shape);
void *pyp_array_data(pyp_array *a);
int pyp_array_init_type(PyObject *module);

/* view.c */
int pyp_view_get(struct pyp_view *v, PyObject *obj, const char *arg, int list_dtype, int writable);
int pyp_view_get_data(struct pyp_view *v, PyObject *obj, const char *arg, int list_dtype, int writable,
                      const struct pyp_devctx *dev);
void pyp_view_release(struct pyp_view *v);
int pyp_view_expect(const struct pyp_view *v, int ndim, const int64_t *shape);
int pyp_view_ints(struct pyp_view *v, PyObject *obj, const char *arg);
PyObject *pyp_int_list(const int32_t *v, uint32_t n);
int pyp_view_stage(pyp_client *c, struct pyp_scratch *s, const struct pyp_view *v,
                   paged_arena_kind kind, const struct pyp_devctx *dev, uint64_t *off);
int pyp_scratch_alloc(struct pyp_scratch *s, paged_arena_kind kind, uint64_t len, const char *arg, uint64_t *off);
void pyp_scratch_free(struct pyp_scratch *s);

/* run.c */
PyObject *pyp_raise_completion(pyp_client *c, const paged_completion *done, int rc);
int pyp_client_track(pyp_client *c, pyp_request *r);
void pyp_client_untrack(pyp_client *c, pyp_request *r);
int pyp_client_pump(pyp_client *c, int timeout_ms);
void pyp_client_abandon(pyp_client *c);
int pyp_client_retire_later(pyp_client *c, pyp_request *r);
size_t pyp_client_retire(pyp_client *c, int drain);

/* request.c */
pyp_request *pyp_request_new(pyp_client *c);
PyObject *pyp_request_run(pyp_request *r, paged_request *req, int wait);
int pyp_request_wait(pyp_request *r, double timeout_s);
PyObject *pyp_request_outcome(pyp_request *r);
void pyp_request_complete(pyp_request *r, const paged_completion *done);
void pyp_request_abandon(pyp_request *r);
int pyp_request_released(pyp_request *r);
void pyp_request_release(pyp_request *r);
int pyp_request_init_type(PyObject *module);

/* pool.c, attn.c, blocks.c, seq.c */
PyObject *pyp_pool_new(pyp_client *c, paged_pool *pp);
int pyp_pool_enter(pyp_pool *p);
void pyp_pool_view_gone(pyp_pool *p);
int pyp_pool_init_type(PyObject *module);
PyObject *pyp_pool_append(pyp_pool *p, PyObject *args, PyObject *kw);
PyObject *pyp_pool_decode(pyp_pool *p, PyObject *args, PyObject *kw);
PyObject *pyp_pool_prefill(pyp_pool *p, PyObject *args, PyObject *kw);
PyObject *pyp_pool_free(pyp_pool *p, PyObject *args);
PyObject *pyp_pool_fork(pyp_pool *p, PyObject *args);
PyObject *pyp_pool_copy(pyp_pool *p, PyObject *args, PyObject *kwargs);
PyObject *pyp_pool_publish(pyp_pool *p, PyObject *args, PyObject *kw);
PyObject *pyp_pool_lookup(pyp_pool *p, PyObject *args, PyObject *kw);
/* Pool.pin, Pool.unpin and Pool.evict_prefix: the prefix cache's controls (blocks.c). */
PyObject *pyp_pool_pin(pyp_pool *p, PyObject *args, PyObject *kw);
PyObject *pyp_pool_unpin(pyp_pool *p, PyObject *args, PyObject *kw);
PyObject *pyp_pool_evict_prefix(pyp_pool *p, PyObject *args, PyObject *kw);
PyObject *pyp_hash_blocks(PyObject *self, PyObject *args, PyObject *kw);
/* Returns a prefix hash as a Python int, hi << 64 | lo, or NULL with an exception. */
PyObject *pyp_hash_int(paged_hash h);
/* paged.Events: a subscription to the daemon's events (events.c). */
int pyp_events_init_type(PyObject *module);
/* Pool.stats and Client.prefix_stats: the prefix cache's counters (counts.c). */
PyObject *pyp_pool_stats(pyp_pool *p);
PyObject *pyp_client_prefix_stats(pyp_client *c);
PyObject *pyp_seq_new(pyp_pool *p, paged_seq *ps);
int pyp_seq_init_type(PyObject *module);

#endif
