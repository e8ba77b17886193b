/* arena-io.c: the libpaged service tests' access to a client's data arena (host or device) and their output check. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "tests/service/arena-io.h"

#include "lib/core/proto.h"
#include "tests/service/rawclient.h"

/* Starts the daemon of the backend the environment asks for; see arena-io.h. */
int aio_start(struct pagedd *d, const char *const *extra)
{
    const char *be = getenv("PAGED_TEST_BACKEND");
    int cuda = be != NULL && strcmp(be, "cuda") == 0;
#ifndef HAVE_CUDA
    if (cuda)
        skip_all("PAGED_TEST_BACKEND=cuda, but this build has no CUDA to fill device arenas");
#endif
    int st = 0;
    if (pagedd_start(d, extra, NULL, &st) < 0) {
        if (cuda)
            skip_all("pagedd --backend cuda does not start here (no CUDA device?)");
        bail("pagedd did not start (status %d)", st);
    }
    return cuda;
}

/* Skips without a device, else plans; see arena-io.h. */
uint64_t aio_device_test_begin(void)
{
    if (!aio_devices(NULL))
        skip_all("no CUDA device");
    uint64_t seed = tap_seed();
    plan_lazy();
    return seed;
}

/* Counts the devices in a child; see arena-io.h. */
int aio_devices(uint64_t *free_bytes)
{
#ifdef HAVE_CUDA
    int fds[2];
    if (pipe(fds) != 0)
        sysbail("pipe");
    pid_t pid = bfork();
    if (pid == 0) {
        close(fds[0]);
        int n = 0;
        size_t f = 0, t = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0 || cudaMemGetInfo(&f, &t) != cudaSuccess)
            _exit(1);
        const uint64_t v[2] = { f, (uint64_t) n };
        _exit(write(fds[1], v, sizeof v) == (ssize_t) sizeof v ? 0 : 1);
    }
    close(fds[1]);
    uint64_t v[2] = { 0, 0 };
    int got = read(fds[0], v, sizeof v) == (ssize_t) sizeof v;
    close(fds[0]);
    int st;
    if (waitpid(pid, &st, 0) != pid)
        sysbail("waitpid");
    got = got && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (free_bytes != NULL)
        *free_bytes = got ? v[0] : 0;
    return got ? (int) v[1] : 0;
#else
    if (free_bytes != NULL)
        *free_bytes = 0;
    return 0;
#endif
}

/* Makes a test's pool over a control connection; see arena-io.h. */
void aio_pool_create(struct rc_client *ctl, const struct pagedd *d, const char *who, const char *name,
                     uint32_t layers, uint32_t heads, uint32_t dim, uint32_t block, int32_t dtype, uint32_t blocks)
{
    int rc = rc_connect(d->socket, who, PCORE_HELLO_CONTROL, ctl);
    if (rc == 0)
        rc = rc_pool_create(ctl, name, layers, heads, dim, block, (uint32_t) dtype, blocks, 0600, PCORE_ATTACH_WRITE,
                            NULL, NULL);
    if (!ok(rc == 0, "pool '%s' created (%u layers, %u KV heads, D %u, blocks of %u, %s)", name, layers, heads, dim,
            block, paged_dtype_name((paged_dtype) dtype)))
        bail("cannot go on without the pool: %s", ctl->errmsg);
}

/* Copies into the arena; see arena-io.h. */
int aio_put(int cuda, unsigned char *data, uint64_t off, const void *src, size_t n)
{
#ifdef HAVE_CUDA
    /* cudaMemcpy from pageable memory may return before its DMA has reached the device: the
     * daemon must not be told of the data before it is there. */
    if (cuda)
        return cudaMemcpy(data + off, src, n, cudaMemcpyHostToDevice) == cudaSuccess
                       && cudaDeviceSynchronize() == cudaSuccess
                   ? 0
                   : -1;
#endif
    if (cuda)
        return -1;
    memcpy(data + off, src, n);
    return 0;
}

/* Copies out of the arena; see arena-io.h. */
int aio_get(int cuda, const unsigned char *data, uint64_t off, void *dst, size_t n)
{
#ifdef HAVE_CUDA
    if (cuda)
        return cudaMemcpy(dst, data + off, n, cudaMemcpyDeviceToHost) == cudaSuccess ? 0 : -1;
#endif
    if (cuda)
        return -1;
    memcpy(dst, data + off, n);
    return 0;
}

/* Poisons a piece of the arena; see arena-io.h. */
int aio_poison(int cuda, unsigned char *data, uint64_t off, size_t n)
{
    unsigned char *p = malloc(n > 0 ? n : 1);
    if (p == NULL)
        return -1;
    memset(p, 0xff, n);
    int rc = aio_put(cuda, data, off, p, n);
    free(p);
    return rc;
}

/* Returns the worst row error; see arena-io.h. */
double aio_row_error(const float *got, const float *want, size_t rows, size_t dim)
{
    double worst = 0;
    for (size_t r = 0; r < rows; r++) {
        double num = 0, den = 0;
        for (size_t d = 0; d < dim; d++) {
            double g = got[r * dim + d], w = want[r * dim + d];
            if (!isfinite(g))
                return INFINITY;
            num += (g - w) * (g - w);
            den += w * w;
        }
        double e = sqrt(num) / (den > 1e-12 ? sqrt(den) : 1e-6);
        if (e > worst)
            worst = e;
    }
    return worst;
}

/* Opens a service test's client; see arena-io.h. */
int aio_open(struct aio_client *a, const char *socket, const char *name, const char *pool,
             uint64_t host_size, uint64_t data_size, char *why, size_t whylen)
{
    char err[256] = "";
    paged_connect_opts o = {
        .socket_path = socket, .name = name, .host_arena_size = host_size, .data_arena_size = data_size,
    };
    int rc = paged_client_connect_err(&o, &a->c, err, sizeof err);
    if (rc != PAGED_OK) {
        snprintf(why, whylen, "connecting: %s (%s)", paged_strerror(rc), err);
        return -1;
    }
    if ((paged_client_backend(a->c) == PAGED_BACKEND_CUDA) != a->cuda) {
        snprintf(why, whylen, "the daemon's backend is not the one asked for");
        return -1;
    }
    if (paged_pool_attach(a->c, pool, &a->pool) != PAGED_OK) {
        snprintf(why, whylen, "attaching the pool: %s", paged_client_error(a->c));
        return -1;
    }
    if (aio_bases(a, why, whylen) < 0)
        return -1;
    if (paged_alloc(a->pool, (uint32_t) (a->nseq * a->maxblk), a->ids) != PAGED_OK) {
        snprintf(why, whylen, "ALLOC: %s", paged_client_error(a->c));
        return -1;
    }
    return 0;
}

/* Finds a connected client's arena bases; see arena-io.h. */
int aio_bases(struct aio_client *a, char *why, size_t whylen)
{
    size_t size;
    a->host = paged_arena_base(a->c, PAGED_ARENA_HOST, &size);
    a->data = paged_arena_base(a->c, PAGED_ARENA_DATA, &size);
    if (a->host == NULL || a->data == NULL) {
        snprintf(why, whylen, "no arenas");
        return -1;
    }
#ifdef HAVE_CUDA
    if (a->cuda) {
        struct cudaPointerAttributes attr;
        if (cudaPointerGetAttributes(&attr, a->data) != cudaSuccess || cudaSetDevice(attr.device) != cudaSuccess) {
            snprintf(why, whylen, "the data arena is not device memory this process can use");
            return -1;
        }
    }
#endif
    return 0;
}

/* Carves, uploads and APPENDs the contexts, and mirrors them on ref; returns 0 or -1 with
 * why. (The body of aio_fill_contexts, which frees what this allocates.) */
static int fill(const struct aio_client *a, pk_cache *ref, int ctx, tap_rng *rng, uint64_t tag, float *k, float *v,
                char *why, size_t whylen)
{
    int ntok = a->nseq * ctx;
    size_t n = (size_t) ref->num_layers * ntok * ref->num_kv_heads * ref->head_dim;
    tap_rng_fill_uniform(rng, k, n, -1.0, 1.0);
    tap_rng_fill_uniform(rng, v, n, -1.0, 1.0);
    uint64_t koff = 0, voff = 0, soff = 0;
    if (paged_arena_alloc(a->c, PAGED_ARENA_DATA, n * 4, 256, &koff) != PAGED_OK
        || paged_arena_alloc(a->c, PAGED_ARENA_DATA, n * 4, 256, &voff) != PAGED_OK
        || paged_arena_alloc(a->c, PAGED_ARENA_HOST, (size_t) ntok * 4, 256, &soff) != PAGED_OK) {
        snprintf(why, whylen, "carving the context: %s", paged_client_error(a->c));
        return -1;
    }
    int32_t *slots = (int32_t *) (a->host + soff);
    const int bs = ref->block_size;
    for (int s = 0; s < a->nseq; s++)
        for (int p = 0; p < ctx; p++)
            slots[s * ctx + p] = a->ids[s * a->maxblk + p / bs] * bs + p % bs;
    if (aio_put(a->cuda, a->data, koff, k, n * 4) < 0 || aio_put(a->cuda, a->data, voff, v, n * 4) < 0) {
        snprintf(why, whylen, "copying the context into the data arena");
        return -1;
    }
    paged_request app = {
        .op = PAGED_OP_APPEND, .pool = a->pool, .layer = PAGED_ALL_LAYERS, .tag = tag,
        .u.append = { .num_tokens = (uint32_t) ntok, .dtype = PAGED_DTYPE_F32, .k_off = koff, .v_off = voff,
                      .slots_off = soff },
    };
    paged_completion comp;
    int rc = paged_prep(a->c, &app);
    if (rc == PAGED_OK)
        rc = paged_submit(a->c) < 0 ? PAGED_E_DISCONNECTED : PAGED_OK;
    if (rc == PAGED_OK)
        rc = paged_wait(a->c, &comp, 1, 120000) == 1 ? comp.status : PAGED_E_TIMEOUT;
    if (rc != PAGED_OK) {
        snprintf(why, whylen, "APPEND of the context: %s (%s)", paged_strerror(rc), paged_client_error(a->c));
        return -1;
    }
    pk_append_args ra = {
        .cache = *ref, .layer_begin = 0, .num_layers = ref->num_layers, .num_tokens = ntok,
        .src_dtype = PAGED_DTYPE_F32, .k = k, .v = v, .slot_mapping = slots,
    };
    if (pk_ref_append(&ra) != 0) {
        snprintf(why, whylen, "pk_ref_append refused the context");
        return -1;
    }
    return 0;
}

/* Opens a decoding client over filled sequences; see arena-io.h. */
int aio_decoder_open(struct aio_decoder *d, const char *socket, const char *name, const char *pool, int ctx, int qh,
                     tap_rng *rng, float *q, char *why, size_t whylen)
{
    struct aio_client *a = &d->a;
    if (aio_open(a, socket, name, pool, 1u << 20, 4u << 20, why, whylen) < 0
        || aio_fill_contexts(a, &d->ref, ctx, rng, 1, why, whylen) < 0)
        return -1;
    const size_t nq = (size_t) a->nseq * (size_t) qh * (size_t) d->ref.head_dim;
    const size_t ids = (size_t) a->nseq * (size_t) a->maxblk * sizeof(int32_t);
    tap_rng_fill_uniform(rng, q, nq, -1.0, 1.0);
    if (paged_arena_alloc(a->c, PAGED_ARENA_HOST, ids, 64, &d->bt_off) != PAGED_OK
        || paged_arena_alloc(a->c, PAGED_ARENA_HOST, (size_t) a->nseq * sizeof(int32_t), 64, &d->lens_off) != PAGED_OK
        || paged_arena_alloc(a->c, PAGED_ARENA_DATA, nq * sizeof *q, 256, &d->q_off) != PAGED_OK
        || paged_arena_alloc(a->c, PAGED_ARENA_DATA, nq * sizeof *q, 256, &d->out_off) != PAGED_OK) {
        snprintf(why, whylen, "carving a DECODE's arguments: %s", paged_client_error(a->c));
        return -1;
    }
    if (aio_put(a->cuda, a->data, d->q_off, q, nq * sizeof *q) < 0) {
        snprintf(why, whylen, "copying the queries into the data arena");
        return -1;
    }
    memcpy(a->host + d->bt_off, a->ids, ids);
    int32_t *lens = (int32_t *) (a->host + d->lens_off);
    for (int s = 0; s < a->nseq; s++)
        lens[s] = ctx;
    d->req = (paged_request) {
        .op = PAGED_OP_DECODE, .pool = a->pool, .layer = 0,
        .u.attn = { .num_seqs = (uint32_t) a->nseq, .num_q_heads = (uint32_t) qh, .dtype = PAGED_DTYPE_F32,
                    .q_off = d->q_off, .out_off = d->out_off, .block_tables_off = d->bt_off,
                    .bt_stride = (uint32_t) a->maxblk, .seq_lens_off = d->lens_off },
    };
    return 0;
}

/* Runs the decoder's DECODE once; see arena-io.h. */
int aio_decoder_call(struct aio_decoder *d, uint64_t tag, paged_completion *c)
{
    paged_request r = d->req;
    r.tag = tag;
    return paged_prep(d->a.c, &r) == PAGED_OK && paged_submit(d->a.c) == 1 && paged_wait(d->a.c, c, 1, 60000) == 1
               ? 0 : -1;
}

/* Compares a DECODE's output with the reference; see arena-io.h. */
int aio_decoder_matches(const struct aio_decoder *d, int qh, const float *q, const float *out, const int32_t *lens,
                        float tol)
{
    const size_t n = (size_t) d->a.nseq * (size_t) qh * (size_t) d->ref.head_dim;
    float *expect = malloc(n * sizeof *expect);
    if (expect == NULL)
        return 0;
    pk_decode_args r = { .cache = d->ref, .layer = 0, .num_seqs = (uint32_t) d->a.nseq, .num_q_heads = (uint32_t) qh,
                         .q_dtype = PAGED_DTYPE_F32, .q = q, .out = expect, .block_tables = d->a.ids,
                         .bt_stride = (uint32_t) d->a.maxblk, .seq_lens = lens,
                         .opts = { 1.0f / sqrtf((float) d->ref.head_dim), 0, 0, NULL } };
    int same = pk_ref_decode(&r) == 0;
    for (size_t k = 0; same && k < n; k++)
        same = fabsf(out[k] - expect[k]) <= tol + tol * fabsf(expect[k]);
    free(expect);
    return same;
}

/* Fills the contexts; see arena-io.h. */
int aio_fill_contexts(const struct aio_client *a, pk_cache *ref, int ctx, tap_rng *rng, uint64_t tag, char *why,
                      size_t whylen)
{
    size_t n = (size_t) ref->num_layers * a->nseq * ctx * ref->num_kv_heads * ref->head_dim;
    if (ref->base == NULL && (ref->base = calloc(1, pk_cache_bytes(ref))) == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    float *k = malloc(n * 4 + 4), *v = malloc(n * 4 + 4);
    int rc = -1;
    if (k == NULL || v == NULL)
        snprintf(why, whylen, "out of memory");
    else
        rc = fill(a, ref, ctx, rng, tag, k, v, why, whylen);
    free(k);
    free(v);
    return rc;
}
