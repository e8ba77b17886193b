/* devices-t.c: one pagedd serving two devices: clients and pools on each, refusals across them, a COPY between them. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "paged.h"
#include "tests/client/daemon_harness.h"
#include "tests/tap/basic.h"

/* Every pool: 2 layers, 2 KV heads, D 64, blocks of 16, f32. */
#define PL 2u
#define PH 2u
#define QH 4u
#define PD 64u
#define PB 16u
#define PN 24u
#define T 40u                 /* tokens: 2 full blocks and a partial one */
#define NB 3u
#define FULL 2u
#define ROUNDS 40u            /* decodes each client runs in the mixed rounds */

static int on_cuda;           /* the daemon runs cuda: tensors go through device memory */
static int32_t tokens[T];

/* Connects a client on device, or bails. Returns it. */
static paged_client *connect_on(const struct pagedd *h, uint32_t device)
{
    paged_connect_opts o = { .socket_path = h->socket, .device = device };
    paged_client *c = NULL;
    char why[256];
    if (paged_client_connect_err(&o, &c, why, sizeof why) != PAGED_OK)
        bail("connecting on device %u: %s", device, why);
    return c;
}

/* Makes c's device current for the test's own device memory (cuda; nothing on cpu). */
static void use(paged_client *c)
{
    if (on_cuda)
        harness_use_arena_device(c);
}

/* Creates pool name on c (device: 0 or PAGED_DEVICE(n)); returns the status, *out the pool. */
static int make_pool(paged_client *c, const char *name, uint32_t device, paged_pool **out)
{
    paged_pool_desc d = { .name = name, .num_layers = PL, .num_kv_heads = PH, .head_dim = PD, .block_size = PB,
                          .dtype = PAGED_DTYPE_F32, .num_blocks = PN, .device = device };
    *out = NULL;
    return paged_pool_create(c, &d, out);
}

/* Appends T tokens of k and v ([L][T][H][D]) into blocks ids of p. Returns the status. */
static int append_seq(paged_pool *p, const int32_t *ids, const float *k, const float *v)
{
    int32_t slots[T];
    for (uint32_t t = 0; t < T; t++)
        slots[t] = ids[t / PB] * (int32_t) PB + (int32_t) (t % PB);
    const size_t bytes = (size_t) PL * T * PH * PD * sizeof(float);
    void *dk = harness_arg_in(on_cuda, k, bytes), *dv = harness_arg_in(on_cuda, v, bytes);
    int rc = paged_append(p, PAGED_ALL_LAYERS, T, PAGED_DTYPE_F32, dk, dv, slots);
    harness_arg_out(on_cuda, NULL, dk, bytes, dk != k);
    harness_arg_out(on_cuda, NULL, dv, bytes, dv != v);
    return rc;
}

/* Decodes every layer of one sequence of len tokens over ids in p with q, into out
 * [L][QH][D]. Returns PAGED_OK or the first error. */
static int decode_all(paged_pool *p, const int32_t *ids, int32_t len, const float *q, float *out)
{
    const struct harness_decode d = { .layers = PL, .q_heads = QH, .head_dim = PD, .bt_stride = NB, .ids = ids,
                                      .len = len };
    return harness_decode_layers(p, on_cuda, &d, q, out);
}

/* Returns the largest absolute difference of n floats. */
static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = a[i] > b[i] ? (double) a[i] - b[i] : (double) b[i] - a[i];
        if (d > m)
            m = d;
    }
    return m;
}

/* The worker on device 1 (a child): its own pool and sequence, a reference decode, then on
 * the parent's go ROUNDS more that must equal it. Exits 0 when all do, else what failed. */
static void worker_main(const struct pagedd *h, int go, uint64_t seed)
{
    tap_rng rng;
    tap_rng_seed(&rng, seed);
    paged_connect_opts o = { .socket_path = h->socket, .device = 1 };
    paged_client *c = NULL;
    paged_pool *p = NULL;
    int32_t ids[NB];
    if (paged_client_connect(&o, &c) != PAGED_OK || make_pool(c, "w1", 0, &p) != PAGED_OK
        || paged_alloc(p, NB, ids) != PAGED_OK)
        _exit(2);
    use(c);
    const size_t kv = (size_t) PL * T * PH * PD, outn = (size_t) PL * QH * PD;
    float *k = bmalloc(kv * sizeof *k), *v = bmalloc(kv * sizeof *v), *q = bmalloc(outn * sizeof *q);
    float *first = bmalloc(outn * sizeof *first), *out = bmalloc(outn * sizeof *out);
    harness_fill(&rng, k, kv);
    harness_fill(&rng, v, kv);
    harness_fill(&rng, q, outn);
    if (append_seq(p, ids, k, v) != PAGED_OK || decode_all(p, ids, (int32_t) T, q, first) != PAGED_OK)
        _exit(3);
    char g;
    if (read(go, &g, 1) != 1)
        _exit(4);
    for (uint32_t r = 0; r < ROUNDS; r++)
        if (decode_all(p, ids, (int32_t) T, q, out) != PAGED_OK || memcmp(first, out, outn * sizeof *out) != 0)
            _exit(5);
    paged_client_close(c);
    _exit(0);
}

/* Runs the cases. */
int main(void)
{
    plan_lazy();
    const char *be = getenv("PAGED_TEST_BACKEND");
    if (be == NULL || strcmp(be, "cuda") != 0) {
        /* Two cpu devices, whose deferred batches report done late, as a GPU's do. */
        setenv("PAGEDD_CPU_DEVICES", "2", 1);
        setenv("PAGEDD_CPU_DONE_US", "300", 1);
    }
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    for (uint32_t t = 0; t < T; t++)
        tokens[t] = (int32_t) tap_rng_below(&rng, 50000);
    struct pagedd h;
    harness_start(&h);
    paged_client *c0 = connect_on(&h, 0);
    const uint32_t ndev = paged_client_devices(c0);
    if (ndev < 2) {
        harness_stop(&h);
        skip_all("the daemon serves %u device (two GPUs are needed on cuda)", ndev);
    }
    on_cuda = paged_client_backend(c0) == PAGED_BACKEND_CUDA;
    /* The worker on device 1, forked before this process moves any tensor: on the cuda
     * backend that sets CUDA up, which a child must not inherit. It waits for the go. */
    int go[2];
    if (pipe(go) != 0)
        sysbail("pipe");
    const pid_t worker = bfork();
    if (worker == 0) {
        close(go[1]);
        paged_client_close(c0);
        worker_main(&h, go[0], tap_seed() + 1);
    }
    close(go[0]);
    is_int(0, paged_client_device(c0), "a client connects on device 0 of %u by default", ndev);

    /* A device the daemon does not serve: refused, named. */
    paged_connect_opts bad = { .socket_path = h.socket, .device = ndev };
    paged_client *none = NULL;
    char why[256] = "";
    is_int(PAGED_E_INVAL, paged_client_connect_err(&bad, &none, why, sizeof why),
           "connecting on device %u: PAGED_E_INVAL (%s)", ndev, why);
    ok(strstr(why, "device") != NULL, "the reason names the device");
    paged_client *c1 = connect_on(&h, 1);
    is_int(1, paged_client_device(c1), "a client connects on device 1");

    /* Pools: on the creator's device by default, or on the one named. */
    paged_pool *p0 = NULL, *p1 = NULL, *x1 = NULL, *nowhere = NULL;
    is_int(PAGED_OK, make_pool(c0, "p0", 0, &p0), "device 0's client creates pool p0");
    is_int(PAGED_OK, make_pool(c1, "p1", 0, &p1), "device 1's client creates pool p1");
    is_int(PAGED_OK, make_pool(c0, "x1", PAGED_DEVICE(1), &x1), "device 0's client creates pool x1 on device 1");
    is_int(PAGED_E_INVAL, make_pool(c0, "nowhere", PAGED_DEVICE(ndev), &nowhere),
           "a pool on device %u: PAGED_E_INVAL (%s)", ndev, paged_client_error(c0));
    paged_pool_info i0, i1, ix;
    paged_pool_get_info(p0, &i0);
    paged_pool_get_info(p1, &i1);
    paged_pool_get_info(x1, &ix);
    ok(i0.device == 0 && i1.device == 1 && ix.device == 1, "their devices: p0 %u, p1 %u, x1 %u", i0.device,
       i1.device, ix.device);

    /* The same fresh keys and values on both devices decode alike. */
    const size_t kv = (size_t) PL * T * PH * PD;
    float *k = bmalloc(kv * sizeof *k), *v = bmalloc(kv * sizeof *v);
    float *q = bmalloc((size_t) PL * QH * PD * sizeof *q);
    harness_fill(&rng, k, kv);
    harness_fill(&rng, v, kv);
    harness_fill(&rng, q, (size_t) PL * QH * PD);
    const size_t outn = (size_t) PL * QH * PD;
    float *o0 = bmalloc(outn * sizeof *o0), *o1 = bmalloc(outn * sizeof *o1), *ot = bmalloc(outn * sizeof *ot);
    int32_t ids0[NB], ids1[NB], idsx[NB];
    use(c0);
    if (paged_alloc(p0, NB, ids0) != PAGED_OK || paged_alloc(x1, NB, idsx) != PAGED_OK)
        bail("alloc on device 0's client: %s", paged_client_error(c0));
    is_int(PAGED_OK, append_seq(p0, ids0, k, v), "device 0's client appends %u tokens into p0", T);
    is_int(PAGED_E_XDEV, append_seq(x1, idsx, k, v), "into x1, on device 1: PAGED_E_XDEV (%s)",
           paged_client_error(c0));
    is_int(PAGED_E_XDEV, decode_all(x1, idsx, (int32_t) T, q, ot), "a decode of x1 from device 0: PAGED_E_XDEV");
    is_int(PAGED_OK, decode_all(p0, ids0, (int32_t) T, q, o0), "device 0's client decodes p0");
    use(c1);
    if (paged_alloc(p1, NB, ids1) != PAGED_OK)
        bail("alloc on device 1's client: %s", paged_client_error(c1));
    is_int(PAGED_OK, append_seq(p1, ids1, k, v), "device 1's client appends the same tokens into p1");
    is_int(PAGED_OK, decode_all(p1, ids1, (int32_t) T, q, o1), "device 1's client decodes p1");
    ok(memcmp(o0, o1, outn * sizeof *o0) == 0, "the two devices' decodes agree bit for bit (largest difference %g)",
       max_diff(o0, o1, outn));

    /* A COPY from device 0's pool into device 1's: the copy decodes as the original. */
    paged_pool *p1_from0 = NULL;
    if (paged_pool_attach(c0, "p1", &p1_from0) != PAGED_OK)
        bail("attaching p1 from device 0: %s", paged_client_error(c0));
    int32_t dst[NB];
    use(c0);
    if (paged_alloc(p1_from0, NB, dst) != PAGED_OK)
        bail("alloc in p1 from device 0: %s", paged_client_error(c0));
    is_int(PAGED_OK, paged_copy_to(p0, p1_from0, NB, ids0, dst), "device 0's client copies %u blocks into p1, "
           "on device 1", NB);
    is_int(FULL, paged_publish(p1_from0, NULL, 0, FULL, tokens, dst), "and publishes the full ones there");
    int32_t found[NB] = { -1, -1, -1 };
    use(c1);
    is_int(FULL, paged_lookup(p1, NULL, 0, FULL, tokens, found), "device 1's client finds them in p1");
    found[2] = ids1[2];
    is_int(PAGED_OK, decode_all(p1, found, (int32_t) (FULL * PB), q, o1), "and decodes them");
    use(c0);
    is_int(PAGED_OK, decode_all(p0, ids0, (int32_t) (FULL * PB), q, o0), "as device 0's client decodes the originals");
    ok(memcmp(o0, o1, outn * sizeof *o0) == 0, "the copy across devices decodes as the original, bit for bit");

    /* Both devices' clients at once: the daemon's batches hold both devices' requests. */
    if (write(go[1], "g", 1) != 1)
        sysbail("starting the worker on device 1");
    int bad_rounds = 0;
    use(c0);
    if (decode_all(p0, ids0, (int32_t) T, q, o0) != PAGED_OK)
        bail("decoding p0: %s", paged_client_error(c0));
    for (uint32_t r = 0; r < ROUNDS && bad_rounds == 0; r++)
        bad_rounds += decode_all(p0, ids0, (int32_t) T, q, ot) != PAGED_OK || memcmp(o0, ot, outn * sizeof *ot) != 0;
    int status = 0;
    if (waitpid(worker, &status, 0) != worker)
        sysbail("waitpid");
    is_int(0, bad_rounds, "%u decodes on device 0, while a worker decodes on device 1, all alike", ROUNDS);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the worker's %u decodes on device 1 all alike (status %d)",
       ROUNDS, WIFEXITED(status) ? WEXITSTATUS(status) : -1);

    paged_pool_detach(p1_from0);
    paged_pool_detach(x1);
    paged_pool_detach(p1);
    paged_pool_detach(p0);
    paged_client_close(c1);
    paged_client_close(c0);
    free(k);
    free(v);
    free(q);
    free(o0);
    free(o1);
    free(ot);
    ok(harness_stop(&h) == 0, "pagedd exits 0");
    return 0;
}
