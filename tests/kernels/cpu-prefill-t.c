/* cpu-prefill-t.c: pk_ref_prefill and the CPU backend's prefill against a naive attention in double. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "tests/kernels/naive.h"
#include "tests/tap/basic.h"

/*
 * Case c is case c of the covering set (nv_covering_case); one case in seven is not causal.
 * Work per case is capped so the program stays within seconds.
 */
#define NCASES 100
#define BUDGET 1500000          /* head_dim * query heads * query rows * context tokens */
#define MAXSEQS 3

/* Returns a number of query rows for a context of len: all of it, one, none, or some. */
static int32_t pick_rows(tap_rng *rng, int32_t len)
{
    switch (tap_rng_below(rng, 6)) {
    case 0:
        return len;
    case 1:
        return 1;
    case 2:
        return 0;
    default:
        return 1 + (int32_t) tap_rng_below(rng, (uint64_t) (len < 96 ? len : 96));
    }
}

/* Returns the work of a case in the units of BUDGET. */
static long case_work(int nseqs, const int32_t *lens, const int32_t *qo, int32_t heads, int32_t D)
{
    long total = 0;
    for (int s = 0; s < nseqs; s++)
        total += (long) lens[s] * qo[s];
    return total * heads * D;
}

/* Runs one case through the naive version, the reference and the CPU backend. */
static void run_case(uint64_t seed, int c)
{
    tap_rng rng;
    tap_rng_seed(&rng, seed + (uint64_t) c * 0x9e3779b97f4a7c15u);
    const nv_covering k = nv_covering_case(c);
    const int32_t D = k.D, B = k.B, G = k.G, dtype = k.dtype, q_dtype = k.q_dtype;
    int causal = c % 7 != 3;
    int32_t H = 1 + (int32_t) tap_rng_below(&rng, 3);
    int32_t L = 1 + (int32_t) tap_rng_below(&rng, 3);
    int nseqs = 1 + (int) tap_rng_below(&rng, MAXSEQS);
    int32_t lens[MAXSEQS], qo[MAXSEQS];
    for (int s = 0; s < nseqs; s++) {
        lens[s] = nv_pick_len(&rng, B);
        qo[s] = pick_rows(&rng, lens[s]);
    }

    /* Trim to the budget: fewer sequences, one KV head, then fewer rows or a shorter context. */
    while (case_work(nseqs, lens, qo, H * G, D) > BUDGET) {
        if (nseqs > 1) {
            nseqs--;
        } else if (H > 1) {
            H = 1;
        } else if (qo[0] == lens[0]) {
            lens[0] = qo[0] = (int32_t) sqrt((double) BUDGET / (G * D)) - (int32_t) tap_rng_below(&rng, 8);
        } else if (qo[0] > 1) {
            qo[0] = (int32_t) (BUDGET / ((long) lens[0] * G * D));
            qo[0] = qo[0] < 1 ? 1 : qo[0];
        } else {
            lens[0] = BUDGET / (G * D) - (int32_t) tap_rng_below(&rng, (uint64_t) B);
        }
    }
    int32_t Hq = H * G, bt_stride = 0, used = 0, max_len = 0, max_qo = 0, total_q = 0;
    for (int s = 0; s < nseqs; s++) {
        int32_t blocks = (lens[s] + B - 1) / B;
        used += blocks;
        bt_stride = blocks > bt_stride ? blocks : bt_stride;
        max_len = lens[s] > max_len ? lens[s] : max_len;
        max_qo = qo[s] > max_qo ? qo[s] : max_qo;
        total_q += qo[s];
    }
    bt_stride += (int32_t) tap_rng_below(&rng, 3);

    pk_cache cache = nv_random_pool(&rng, L, used, H, D, B, dtype);
    int32_t layer = (int32_t) tap_rng_below(&rng, (uint64_t) L);
    int32_t *tables = nv_block_tables(&rng, nseqs, lens, B, cache.num_blocks, bt_stride);
    for (int s = 0; s < nseqs; s++)
        nv_fill_seq(&rng, &cache, layer, tables + (size_t) s * (size_t) bt_stride, lens[s]);
    int32_t *seq_lens = bmalloc((size_t) nseqs * sizeof *seq_lens);
    int32_t *indptr = bmalloc((size_t) (nseqs + 1) * sizeof *indptr);
    indptr[0] = 0;
    for (int s = 0; s < nseqs; s++) {
        seq_lens[s] = lens[s];
        indptr[s + 1] = indptr[s] + qo[s];
    }

    size_t qsize = pk_dtype_size(q_dtype), rows = (size_t) total_q * (size_t) Hq;
    size_t bytes = rows * (size_t) D * qsize;
    void *q = bmalloc(bytes > 0 ? bytes : 1), *out = bmalloc(bytes > 0 ? bytes : 1);
    for (size_t i = 0; i < rows * (size_t) D; i++)
        nv_random(&rng, q, i, q_dtype, 1.0f);

    float *slopes;
    pk_attn_opts opts = nv_random_opts(&rng, k.options, D, Hq, max_len, &slopes);

    /* The naive answer: causal rows at the end of the context, else all at the last position. */
    double *want = bmalloc((rows > 0 ? rows : 1) * (size_t) D * sizeof *want);
    double *K = bmalloc((size_t) max_len * (size_t) D * sizeof *K);
    double *V = bmalloc((size_t) max_len * (size_t) D * sizeof *V);
    double *qd = bmalloc((size_t) D * sizeof *qd);
    for (int s = 0; s < nseqs; s++)
        for (int32_t h = 0; h < H; h++) {
            nv_gather(&cache, layer, tables + (size_t) s * (size_t) bt_stride, lens[s], h, K, V);
            for (int32_t r = 0; r < qo[s]; r++)
                for (int32_t g = 0; g < G; g++) {
                    size_t row = (size_t) (indptr[s] + r) * (size_t) Hq + (size_t) (h * G + g);
                    for (int32_t d = 0; d < D; d++)
                        qd[d] = nv_value(q, row * (size_t) D + (size_t) d, q_dtype);
                    int32_t pos = causal ? lens[s] - qo[s] + r : lens[s] - 1;
                    nv_attend(qd, h * G + g, pos, K, V, lens[s], D, &opts, want + row * (size_t) D);
                }
        }

    pk_prefill_args a = {
        .cache = cache,
        .layer = layer,
        .num_seqs = nseqs,
        .num_q_heads = Hq,
        .q_dtype = q_dtype,
        .causal = causal,
        .total_q = total_q,
        .max_qo_len = max_qo,
        .q = q,
        .out = out,
        .qo_indptr = indptr,
        .block_tables = tables,
        .bt_stride = bt_stride,
        .seq_lens = seq_lens,
        .opts = opts,
    };

    char label[256], olabel[64];
    nv_opts_label(olabel, sizeof olabel, &opts);
    nv_case_prefix(label, sizeof label, "prefill", dtype, q_dtype);
    snprintf(label + strlen(label), sizeof label - strlen(label),
             " D=%d B=%d GQA %d, %d KV heads, %d seqs, %d rows, up to %d tokens,%s%s", (int) D, (int) B,
             (int) G, (int) H, nseqs, (int) total_q, (int) max_len, olabel, causal ? "" : ", not causal");

    for (int which = 0; which < 2; which++) {
        memset(out, 0xff, bytes);
        int err;
        if (which == 0) {
            err = pk_ref_prefill(&a);
        } else {
            err = pk_cpu_prefill_check(&a);
            size_t items = pk_cpu_prefill_items(&a);
            size_t *begin = bmalloc((items + 1) * sizeof *begin), *end = bmalloc((items + 1) * sizeof *end);
            size_t chunks = nv_split(&rng, items, begin, end);
            for (size_t i = 0; i < chunks && err == 0; i++)
                pk_cpu_prefill_run(&a, begin[i], end[i]);
            free(begin);
            free(end);
        }
        char what[300];
        snprintf(what, sizeof what, "%s: %s", label, which == 0 ? "ref" : "cpu");
        if (err != 0)
            diag("%s: returned %d", what, err);
        ok(err == 0 && nv_close(out, q_dtype, want, rows, D, what), "%s matches naive", what);
    }

    free(want);
    free(K);
    free(V);
    free(qd);
    free(slopes);
    free(q);
    free(out);
    free(indptr);
    free(seq_lens);
    free(tables);
    free(cache.base);
}

/* Checks that each unsupported shape or inconsistent row layout is refused with its error. */
static void test_errors(void)
{
    uint16_t pool[2 * 2 * 1 * 8 * 64];
    uint16_t q[4 * 2 * 64], out[4 * 2 * 64];
    int32_t table[2] = { 0, 1 }, lens[2] = { 16, 2 }, indptr[3] = { 0, 2, 4 };
    pk_prefill_args good = {
        .cache = { .base = pool, .num_layers = 2, .num_blocks = 2, .num_kv_heads = 1, .head_dim = 64,
                   .block_size = 8, .dtype = PAGED_DTYPE_BF16, .k_scale = 1, .v_scale = 1 },
        .layer = 0, .num_seqs = 2, .num_q_heads = 2, .q_dtype = PAGED_DTYPE_BF16, .causal = 1,
        .total_q = 4, .max_qo_len = 2, .q = q, .out = out, .qo_indptr = indptr,
        .block_tables = table, .bt_stride = 1, .seq_lens = lens, .opts = { .sm_scale = 0.125f },
    };
    int32_t short_lens[2] = { 16, 1 }, long_lens[2] = { 17, 2 };
    int32_t bad_start[3] = { 1, 2, 4 }, falling[3] = { 0, 3, 2 };
    struct {
        const char *what;
        int want;
        pk_prefill_args a;
    } cases[8];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cases[i].a = good;
    cases[0].what = "query heads not a multiple of KV heads";
    cases[0].want = PAGED_E_HEADS;
    cases[0].a.num_q_heads = 3;
    cases[0].a.cache.num_kv_heads = 2;
    cases[1].what = "f16 queries on a bf16 cache";
    cases[1].want = PAGED_E_DTYPE;
    cases[1].a.q_dtype = PAGED_DTYPE_F16;
    cases[2].what = "more query rows than context";
    cases[2].want = PAGED_E_SEQLEN;
    cases[2].a.seq_lens = short_lens;
    cases[3].what = "a context longer than its block table";
    cases[3].want = PAGED_E_SEQLEN;
    cases[3].a.seq_lens = long_lens;
    cases[4].what = "qo_indptr not starting at 0";
    cases[4].want = PAGED_E_INVAL;
    cases[4].a.qo_indptr = bad_start;
    cases[5].what = "a decreasing qo_indptr";
    cases[5].want = PAGED_E_INVAL;
    cases[5].a.qo_indptr = falling;
    cases[6].what = "total_q not matching qo_indptr";
    cases[6].want = PAGED_E_INVAL;
    cases[6].a.total_q = 3;
    cases[7].what = "head_dim -64";
    cases[7].want = PAGED_E_GEOMETRY;
    cases[7].a.cache.head_dim = -64;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        is_int(cases[i].want, pk_ref_prefill(&cases[i].a), "prefill ref refuses %s", cases[i].what);
        is_int(cases[i].want, pk_cpu_prefill_check(&cases[i].a), "prefill cpu check refuses %s",
               cases[i].what);
        is_int(0, (long long) pk_cpu_prefill_items(&cases[i].a), "prefill cpu has no items for %s",
               cases[i].what);
    }
}

/* Runs every prefill case, then the refusals; returns 0 (the TAP output tells the rest). */
int main(void)
{
    uint64_t seed = tap_seed();
    plan(2 * NCASES + 3 * 8);
    for (int c = 0; c < NCASES; c++)
        run_case(seed, c);
    test_errors();
    return 0;
}
