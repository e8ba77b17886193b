/* arena-io.h: the libpaged service tests' access to a client's data arena (host or device) and their output check. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_SERVICE_ARENA_IO_H
#define PAGED_TESTS_SERVICE_ARENA_IO_H

#include <stddef.h>
#include <stdint.h>

#include "paged.h"
#include "kernels/kernels.h"
#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"

/* Reads PAGED_TEST_BACKEND (the cpu backend unless it says cuda) and starts d with the extra
 * arguments; skips the whole test where the cuda backend cannot run (a build without CUDA,
 * no device) and bails when the daemon does not start. Returns whether it runs cuda. */
int aio_start(struct pagedd *d, const char *const *extra);

/* Returns how many CUDA devices this machine has (0 in a build without CUDA), asking in a
 * child so that this process never initializes CUDA (its children could not use it after a
 * fork); where free_bytes is not NULL, stores the device memory that child found free on
 * device 0 (its own context's taken). */
int aio_devices(uint64_t *free_bytes);

/* Begins a test that needs a CUDA device: skips it whole where there is none (aio_devices),
 * else plans lazily. Returns the test's seed (tap_seed). */
uint64_t aio_device_test_begin(void);

struct rc_client;

/*
 * Connects *ctl to daemon d as a control client named who and creates on it the pool name
 * (layers, KV heads, head dim, block size, dtype, blocks; mode 0600, attachable for writing),
 * reporting that as a test; bails when either fails, since nothing can go on without the pool.
 * The parent of a client-process test does this over the raw protocol: it never touches CUDA.
 * Returns nothing; *ctl stays connected for the caller to use and close.
 */
void aio_pool_create(struct rc_client *ctl, const struct pagedd *d, const char *who, const char *name,
                     uint32_t layers, uint32_t heads, uint32_t dim, uint32_t block, int32_t dtype, uint32_t blocks);

/* Copy n bytes into or out of the data arena based at data, at offset off: device memory
 * through the CUDA runtime when cuda (only in a build with CUDA), else host memory. Each
 * returns 0, or -1 when the copy failed. */
int aio_put(int cuda, unsigned char *data, uint64_t off, const void *src, size_t n);
int aio_get(int cuda, const unsigned char *data, uint64_t off, void *dst, size_t n);

/* Fills n bytes of the data arena at off with 0xff (NaN as f32), so that an output the daemon
 * never wrote shows; returns 0 or -1. */
int aio_poison(int cuda, unsigned char *data, uint64_t off, size_t n);

/* Returns the worst relative L2 error over rows of dim floats of got against want, infinity
 * for a non-finite value in got. */
double aio_row_error(const float *got, const float *want, size_t rows, size_t dim);

/* A libpaged client of a service test. */
struct aio_client {
    paged_client *c;
    paged_pool *pool;
    int cuda;                     /* the data arena is device memory */
    unsigned char *host, *data;   /* arena bases */
    int32_t *ids;                 /* nseq rows of maxblk blocks, the sequences' blocks */
    int nseq, maxblk;
};

/*
 * Connects a->c as name to the daemon at socket with arenas of the sizes given, checks that
 * its backend is cuda exactly when a->cuda says so, attaches pool, finds the arena bases
 * (making the data arena's device current on cuda) and allocates a->nseq * a->maxblk blocks
 * into a->ids. Returns 0, or -1 with what failed in why.
 */
int aio_open(struct aio_client *a, const char *socket, const char *name, const char *pool,
             uint64_t host_size, uint64_t data_size, char *why, size_t whylen);

/* Stores the arena bases of the connected client a->c in a->host and a->data (making the data
 * arena's device current on cuda), as aio_open does. Returns 0, or -1 with what failed in why. */
int aio_bases(struct aio_client *a, char *why, size_t whylen);

/*
 * Fills the first ctx tokens of every sequence of a (f32 pool of ref's geometry) with random
 * keys and values from rng: one APPEND of every layer (tag), awaited, then the same on the
 * host copy ref, whose memory it allocates zeroed (ref->base NULL: the caller sets only the
 * geometry). Returns 0, or -1 with what failed in why.
 */
int aio_fill_contexts(const struct aio_client *a, pk_cache *ref, int ctx, tap_rng *rng, uint64_t tag, char *why,
                      size_t whylen);

/* A client of one f32 pool that decodes over the sequences it filled (the cuda tests of
 * planted faults and refusals). */
struct aio_decoder {
    struct aio_client a;          /* the caller sets cuda, ids, nseq and maxblk */
    pk_cache ref;                 /* the caller sets the pool's geometry; then the fill's host copy */
    uint64_t bt_off, lens_off;    /* a.ids as the block table and the lengths, in the host arena */
    uint64_t q_off, out_off;      /* the queries and the outputs, in the data arena */
    paged_request req;            /* a DECODE of every sequence over all of it */
};

/*
 * Opens d->a as name (1 MiB host arena, 4 MiB data arena) on pool, fills ctx tokens of every
 * sequence, sets every length to ctx, puts qh heads of random f32 queries per sequence from
 * rng into the data arena (and into q, which holds a.nseq * qh * ref.head_dim floats) and
 * carves as many output bytes; d->req is a DECODE over them with tag 0. Returns 0, or -1
 * with what failed in why.
 */
int aio_decoder_open(struct aio_decoder *d, const char *socket, const char *name, const char *pool, int ctx, int qh,
                     tap_rng *rng, float *q, char *why, size_t whylen);

/* Runs d->req with tag and waits (up to 60 s) for its completion into *c; returns 0, or -1
 * when it could not be submitted or was not answered (paged_client_error says why). */
int aio_decoder_call(struct aio_decoder *d, uint64_t tag, paged_completion *c);

/* Says whether out, the output of a DECODE of queries q (qh heads per sequence) over the
 * decoder's sequences with lengths lens, matches pk_ref_decode over d->ref within tol (relative
 * and absolute, per element). Returns 1 or 0 (also when out of memory). */
int aio_decoder_matches(const struct aio_decoder *d, int qh, const float *q, const float *out, const int32_t *lens,
                        float tol);

#endif
