/* copyto-t.c: COPY from one pool into another through pagedd: the blocks' bytes and decodes, and every refusal. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "paged.h"
#include "tests/client/daemon_harness.h"
#include "tests/tap/basic.h"

/* Both pools: 2 layers, 2 KV heads, D 64, blocks of 16, f32; the source has 24 blocks, the
 * destination 40, so that one id means another place in each. */
#define PL 2u
#define PH 2u
#define QH 4u
#define PD 64u
#define PB 16u
#define FROM_N 24u
#define TO_N 40u
#define T 40u                 /* tokens: 2 full blocks and a partial one */
#define NB 3u

/* Creates pool name of n blocks (dtype, mode) on c; bails on failure. Returns it. */
static paged_pool *make_pool(paged_client *c, const char *name, uint32_t n, paged_dtype dtype, uint32_t mode,
                             uint32_t layers)
{
    paged_pool_desc d = { .name = name, .num_layers = layers, .num_kv_heads = PH, .head_dim = PD,
                          .block_size = PB, .dtype = dtype, .num_blocks = n, .mode = mode };
    paged_pool *p = NULL;
    if (paged_pool_create(c, &d, &p) != PAGED_OK)
        bail("creating pool %s: %s", name, paged_client_error(c));
    return p;
}

/* Returns a view of pool p's mapped memory as the kernels see it (n blocks). Bails when it
 * cannot be mapped. */
static pk_cache view(paged_pool *p, uint32_t n)
{
    void *base = NULL;
    if (paged_pool_map(p, &base) != PAGED_OK)
        bail("mapping a pool");
    return (pk_cache) { .base = base, .num_layers = PL, .num_blocks = (int32_t) n, .num_kv_heads = PH,
                        .head_dim = PD, .block_size = PB, .dtype = PAGED_DTYPE_F32, .k_scale = 1, .v_scale = 1 };
}

/* Returns whether blocks a[i] of pool x and b[i] of pool y hold the same bytes, every layer,
 * K and V, for i below n. */
static int same_blocks(const pk_cache *x, const int32_t *a, const pk_cache *y, const int32_t *b, uint32_t n)
{
    const size_t bytes = (size_t) PH * PB * PD * sizeof(float);
    for (uint32_t i = 0; i < n; i++)
        for (int32_t l = 0; l < (int32_t) PL; l++)
            for (int32_t kv = 0; kv < 2; kv++)
                if (memcmp((const float *) x->base + pk_cache_index(x, l, kv, a[i], 0, 0),
                           (const float *) y->base + pk_cache_index(y, l, kv, b[i], 0, 0), bytes) != 0)
                    return 0;
    return 1;
}

/* Decodes every layer of one sequence of T tokens over ids in p with q, into out [L][QH][D].
 * Returns PAGED_OK or the first error. */
static int decode_all(paged_pool *p, int cuda, const int32_t *ids, const float *q, float *out)
{
    const struct harness_decode d = { .layers = PL, .q_heads = QH, .head_dim = PD, .bt_stride = NB, .ids = ids,
                                      .len = (int32_t) T };
    return harness_decode_layers(p, cuda, &d, q, out);
}

/* What the client that may only read pool "ro" got. */
struct ro_result {
    int into_ro, from_ro;
    char why_into[160], why_from[160];
};

/* In a child (as uid 65534 when this test runs as root, whom every mode lets write), attaches
 * pool "ro" (mode 0444) and a pool of its own, and copies into and out of "ro". Returns what
 * it got; bails when the child cannot tell. */
static struct ro_result read_only_side(const struct pagedd *h)
{
    int fds[2];
    if (pipe(fds) != 0)
        sysbail("pipe");
    pid_t pid = bfork();
    if (pid == 0) {
        close(fds[0]);
        struct ro_result r = { -999, -999, "", "" };
        if (getuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(2);
        paged_connect_opts o = { .socket_path = h->socket };
        paged_client *c = NULL;
        paged_pool *ro = NULL, *mine = NULL;
        paged_pool_desc d = { .name = "mine", .num_layers = PL, .num_kv_heads = PH, .head_dim = PD,
                              .block_size = PB, .dtype = PAGED_DTYPE_F32, .num_blocks = 8, .mode = 0600 };
        int32_t ids[1] = { 0 };
        if (paged_client_connect(&o, &c) != PAGED_OK || paged_pool_attach(c, "ro", &ro) != PAGED_OK
            || paged_pool_create(c, &d, &mine) != PAGED_OK || paged_alloc(mine, 1, ids) != PAGED_OK)
            _exit(3);
        r.into_ro = paged_copy_to(mine, ro, 1, ids, ids);
        snprintf(r.why_into, sizeof r.why_into, "%s", paged_client_error(c));
        r.from_ro = paged_copy_to(ro, mine, 1, ids, ids);
        snprintf(r.why_from, sizeof r.why_from, "%s", paged_client_error(c));
        paged_client_close(c);
        _exit(write(fds[1], &r, sizeof r) == (ssize_t) sizeof r ? 0 : 4);
    }
    close(fds[1]);
    struct ro_result r;
    ssize_t got = read(fds[0], &r, sizeof r);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != (ssize_t) sizeof r)
        bail("the read-only client did not report (exit status %d)", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return r;
}

/* Runs the cases. */
int main(void)
{
    plan_lazy();
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    struct pagedd h;
    harness_start(&h);
    paged_client *c = harness_client(&h);
    paged_pool *from = make_pool(c, "from", FROM_N, PAGED_DTYPE_F32, 0600, PL);
    paged_pool *to = make_pool(c, "to", TO_N, PAGED_DTYPE_F32, 0600, PL);
    /* The client that may only read pool "ro" runs first, before this process moves any
     * tensor: on the cuda backend that sets CUDA up, which a child must not inherit. */
    make_pool(c, "ro", TO_N, PAGED_DTYPE_F32, 0444, PL);
    struct ro_result res = read_only_side(&h);

    /* A sequence of fresh random keys and values in the source pool. */
    int32_t src[NB], dst[NB], slots[T];
    if (paged_alloc(from, NB, src) != PAGED_OK || paged_alloc(to, NB, dst) != PAGED_OK)
        bail("alloc: %s", paged_client_error(c));
    for (uint32_t t = 0; t < T; t++)
        slots[t] = src[t / PB] * (int32_t) PB + (int32_t) (t % PB);
    const size_t kv = (size_t) PL * T * PH * PD;
    float *k = bmalloc(kv * sizeof *k), *v = bmalloc(kv * sizeof *v);
    harness_fill(&rng, k, kv);
    harness_fill(&rng, v, kv);
    /* Pools map as host memory on the cpu backend only: on cuda the decodes alone tell, and the
     * tensors go through device memory. */
    const int host = paged_client_backend(c) == PAGED_BACKEND_CPU;
    void *dk = harness_arg_in(!host, k, kv * sizeof *k), *dv = harness_arg_in(!host, v, kv * sizeof *v);
    is_int(PAGED_OK, paged_append(from, PAGED_ALL_LAYERS, T, PAGED_DTYPE_F32, dk, dv, slots),
           "the source pool gets a sequence of %u tokens", T);
    harness_arg_out(!host, NULL, dk, kv * sizeof *k, dk != k);
    harness_arg_out(!host, NULL, dv, kv * sizeof *v, dv != v);

    /* The copy: bit for bit, the same decode, the source untouched. */
    pk_cache vf = { 0 }, vt = { 0 };
    if (host) {
        vf = view(from, FROM_N);
        vt = view(to, TO_N);
    }
    const size_t fbytes = pk_cache_bytes(&vf);
    void *before = bmalloc(fbytes + 1);
    if (host)
        memcpy(before, vf.base, fbytes);
    is_int(PAGED_OK, paged_copy_to(from, to, NB, src, dst), "paged_copy_to copies %u blocks into the other pool "
           "(%d %d %d to %d %d %d)", NB, src[0], src[1], src[2], dst[0], dst[1], dst[2]);
    if (host) {
        ok(same_blocks(&vf, src, &vt, dst, NB), "the destination blocks hold the source's bytes, every layer, K and V");
        ok(memcmp(before, vf.base, fbytes) == 0, "the source pool is as it was");
    } else {
        skip(2, "the pools are device memory: the decodes below compare them");
    }
    float *q = bmalloc((size_t) PL * QH * PD * sizeof *q);
    float *o1 = bmalloc((size_t) PL * QH * PD * sizeof *o1), *o2 = bmalloc((size_t) PL * QH * PD * sizeof *o2);
    harness_fill(&rng, q, (size_t) PL * QH * PD);
    int r1 = decode_all(from, !host, src, q, o1), r2 = decode_all(to, !host, dst, q, o2);
    ok(r1 == PAGED_OK && r2 == PAGED_OK && memcmp(o1, o2, (size_t) PL * QH * PD * sizeof *o1) == 0,
       "decoding the copy equals decoding the original, bit for bit");

    /* Refusals, each naming what is wrong; nothing is written. */
    int32_t more[NB];
    if (paged_alloc(to, NB, more) != PAGED_OK)
        bail("alloc: %s", paged_client_error(c));
    void *tbefore = bmalloc(pk_cache_bytes(&vt) + 1);
    if (host)
        memcpy(tbefore, vt.base, pk_cache_bytes(&vt));
    paged_pool *deep = make_pool(c, "deep", TO_N, PAGED_DTYPE_F32, 0600, PL + 1);
    is_int(PAGED_E_GEOMETRY, paged_copy_to(from, deep, NB, src, dst), "into a pool of other layers: "
           "PAGED_E_GEOMETRY (%s)", paged_client_error(c));
    ok(strstr(paged_client_error(c), "dst_pool") != NULL, "the error names dst_pool");
    paged_pool *half = make_pool(c, "half", TO_N, PAGED_DTYPE_F16, 0600, PL);
    is_int(PAGED_E_DTYPE, paged_copy_to(from, half, NB, src, dst), "into a pool of another dtype: PAGED_E_DTYPE (%s)",
           paged_client_error(c));
    const int32_t unheld[1] = { (int32_t) TO_N - 1 };
    is_int(PAGED_E_NOTHELD, paged_copy_to(from, to, 1, src, unheld), "into a block not held: PAGED_E_NOTHELD (%s)",
           paged_client_error(c));
    const int32_t outside[1] = { (int32_t) TO_N };
    is_int(PAGED_E_BLOCK, paged_copy_to(from, to, 1, src, outside), "into a block past the destination pool's "
           "end: PAGED_E_BLOCK (%s)", paged_client_error(c));
    const int32_t twice[2] = { more[0], more[0] };
    is_int(PAGED_E_INVAL, paged_copy_to(from, to, 2, src, twice), "one destination twice: PAGED_E_INVAL (%s)",
           paged_client_error(c));
    if (host)
        ok(memcmp(tbefore, vt.base, pk_cache_bytes(&vt)) == 0, "none of them wrote the destination pool");
    else
        skip(1, "the pool is device memory");
    is_int(PAGED_OK, paged_copy_to(from, to, 1, &src[0], &more[0]), "a copy into block %d of the other pool", more[0]);

    /* A pool the client may only read: not a destination, but a source. */
    is_int(PAGED_E_READONLY, res.into_ro, "into a pool a client may only read: PAGED_E_READONLY (%s)", res.why_into);
    is_int(PAGED_E_NOTHELD, res.from_ro, "from a pool it may only read, only the blocks it holds count: "
           "PAGED_E_NOTHELD, not PAGED_E_READONLY (%s)", res.why_from);
    free(tbefore);

    paged_client_close(c);
    ok(harness_stop(&h) == 0, "pagedd exits 0");
    free(k);
    free(v);
    free(q);
    free(o1);
    free(o2);
    free(before);
    return 0;
}
