/* fp8-t.c: an fp8 pool through a real pagedd: fp8 APPENDs stored as given, f32 ones quantized, fp8 queries refused. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/dtype.h"
#include "paged.h"
#include "tests/client/daemon_harness.h"
#include "tests/tap/basic.h"

/*
 * An fp8 pool stores round(value / scale). APPEND in fp8 hands the daemon bytes that are
 * already that, so they must land as they are; the same values appended in f32 (each byte's
 * value times the scale, exact with power-of-two scales) must land as the same bytes, which
 * is what makes the two forms agree on what a byte means. Queries have no fp8 form.
 */

#define L 2u
#define H 2u
#define D 64u
#define B 16u
#define N 8u
#define NT 5u
#define K_SCALE 0.5f
#define V_SCALE 4.0f

/* Returns a pool description of the test's geometry named name, of dtype. */
static paged_pool_desc desc_of(const char *name, paged_dtype dtype)
{
    return (paged_pool_desc) {
        .name = name, .num_layers = L, .num_kv_heads = H, .head_dim = D, .block_size = B,
        .dtype = dtype, .num_blocks = N, .k_scale = K_SCALE, .v_scale = V_SCALE,
    };
}

/* Fills n bytes with random fp8 e4m3 numbers, every finite one possible (not the NaNs). */
static void random_fp8(tap_rng *rng, uint8_t *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t) tap_rng_below(rng, 256);
        x[i] = (b & 0x7f) == 0x7f ? (uint8_t) (b ^ 0x01) : b;
    }
}

/* Returns whether the pool at base holds, at layer l's K and V of the tokens at slots, the
 * bytes k and v ([NT][H][D] each). */
static int holds(const uint8_t *base, uint32_t l, const int32_t *slots, const uint8_t *k, const uint8_t *v)
{
    for (uint32_t t = 0; t < NT; t++)
        for (uint32_t h = 0; h < H; h++) {
            size_t b = (size_t) slots[t] / B, off = (size_t) slots[t] % B;
            size_t ki = ((((l * 2 + 0) * (size_t) N + b) * H + h) * B + off) * D;
            size_t vi = ((((l * 2 + 1) * (size_t) N + b) * H + h) * B + off) * D;
            size_t src = ((size_t) t * H + h) * D;
            if (memcmp(base + ki, k + src, D) != 0 || memcmp(base + vi, v + src, D) != 0)
                return 0;
        }
    return 1;
}

/* APPEND into an fp8 pool in fp8 and in f32, and DECODE over both, with fp8 queries refused. */
static void test_fp8_pool(paged_client *c, tap_rng *rng)
{
    paged_pool_desc d = desc_of("fp8", PAGED_DTYPE_FP8_E4M3);
    paged_pool *p = NULL;
    if (paged_pool_create(c, &d, &p) != PAGED_OK)
        bail("creating the fp8 pool: %s", paged_client_error(c));
    int32_t id;
    if (paged_alloc(p, 1, &id) != PAGED_OK)
        bail("allocating a block of the fp8 pool: %s", paged_client_error(c));
    int32_t slots[NT];
    for (uint32_t t = 0; t < NT; t++)
        slots[t] = id * (int32_t) B + (int32_t) t;

    enum { ROW = NT * H * D };
    static uint8_t k8[ROW], v8[ROW];
    static float k32[ROW], v32[ROW];
    random_fp8(rng, k8, ROW);
    random_fp8(rng, v8, ROW);
    for (size_t i = 0; i < ROW; i++) {
        k32[i] = pk_e4m3_to_f32(k8[i]) * K_SCALE;
        v32[i] = pk_e4m3_to_f32(v8[i]) * V_SCALE;
    }
    is_int(PAGED_OK, paged_append(p, 0, NT, PAGED_DTYPE_FP8_E4M3, k8, v8, slots),
           "fp8 pool: APPEND of fp8 keys and values is accepted");
    is_int(PAGED_OK, paged_append(p, 1, NT, PAGED_DTYPE_F32, k32, v32, slots),
           "fp8 pool: APPEND of the same values in f32 is accepted");
    void *base = NULL;
    if (paged_pool_map(p, &base) != PAGED_OK)
        bail("mapping the fp8 pool: %s", paged_client_error(c));
    ok(holds(base, 0, slots, k8, v8), "fp8 pool: the fp8 bytes are stored as they were given");
    ok(holds(base, 1, slots, k8, v8), "fp8 pool: the f32 values, divided by the scales, are the same bytes");

    /* Both layers hold the same bytes: a DECODE over each gives the same output. */
    static float q[H * D], out0[H * D], out1[H * D];
    for (size_t i = 0; i < H * D; i++)
        q[i] = (float) tap_rng_uniform(rng, -1.0, 1.0);
    int32_t len = (int32_t) NT;
    paged_attn_args a = { .num_seqs = 1, .num_q_heads = H, .dtype = PAGED_DTYPE_F32, .q = q, .out = out0,
                          .block_tables = &id, .bt_stride = 1, .seq_lens = &len };
    int rc0 = paged_decode(p, 0, &a);
    a.out = out1;
    int rc1 = paged_decode(p, 1, &a);
    ok(rc0 == PAGED_OK && rc1 == PAGED_OK && memcmp(out0, out1, sizeof out0) == 0,
       "fp8 pool: f32 DECODEs over the layers appended in fp8 and in f32 agree");

    static uint8_t q8[H * D], out8[H * D];
    a.dtype = PAGED_DTYPE_FP8_E4M3;
    a.q = q8;
    a.out = out8;
    is_int(PAGED_E_DTYPE, paged_decode(p, 0, &a), "fp8 pool: a DECODE with fp8 queries is PAGED_E_DTYPE");
    ok(strstr(paged_client_error(c), "dtype") != NULL, "fp8 pool: the error names the dtype (%s)",
       paged_client_error(c));
    int32_t qo[2] = { 0, 1 };
    a.qo_indptr = qo;
    is_int(PAGED_E_DTYPE, paged_prefill(p, 0, &a), "fp8 pool: a PREFILL with fp8 queries is PAGED_E_DTYPE");
    is_int(PAGED_OK, paged_pool_detach(p), "fp8 pool: detached");
    paged_pool_destroy(c, "fp8");
}

/* APPEND of fp8 into an f32 pool is refused: only an fp8 pool knows what its bytes mean. */
static void test_f32_pool(paged_client *c)
{
    paged_pool_desc d = desc_of("f32", PAGED_DTYPE_F32);
    d.k_scale = d.v_scale = 0.0f;
    paged_pool *p = NULL;
    int32_t id;
    if (paged_pool_create(c, &d, &p) != PAGED_OK || paged_alloc(p, 1, &id) != PAGED_OK)
        bail("creating the f32 pool: %s", paged_client_error(c));
    static uint8_t k8[H * D], v8[H * D];
    int32_t slot = id * (int32_t) B;
    is_int(PAGED_E_DTYPE, paged_append(p, 0, 1, PAGED_DTYPE_FP8_E4M3, k8, v8, &slot),
           "f32 pool: APPEND of fp8 keys and values is PAGED_E_DTYPE");
    is_int(PAGED_OK, paged_pool_detach(p), "f32 pool: detached");
    paged_pool_destroy(c, "f32");
}

/* Runs the fp8 and f32 pool tests against one daemon. */
int main(void)
{
    plan_lazy();
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    struct pagedd h;
    harness_start(&h);
    paged_client *c = harness_client(&h);
    test_fp8_pool(c, &rng);
    test_f32_pool(c);
    paged_client_close(c);
    harness_stop(&h);
    return 0;
}
