/* cpu-decode-t.c: pk_ref_decode and the CPU backend's decode against a naive attention in double. */
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
 * Case c is case c of the covering set (nv_covering_case). Work per case is capped so the
 * program stays within seconds under ASan. Every other run of 7 cases (mixed_layers)
 * gives each sequence its own random layer (pk_decode_args.seq_layer, what a merged launch
 * of clients at different layers uses) over a pool whose every layer holds different data,
 * and also checks that the result is bit for bit what each sequence gives run alone on its
 * layer.
 */
#define NCASES 100
#define BUDGET 1000000          /* head_dim * query heads * context tokens, summed over sequences */
#define MAXSEQS 4

/* Returns whether case c gives its sequences layers of their own. */
static int mixed_layers(int c)
{
    return (c / 7) % 2 == 1;
}

/* Runs a checked DECODE through the reference (which 0) or the CPU backend's work items in
 * random chunks (which 1); returns the check's result. */
static int run_one(tap_rng *rng, const pk_decode_args *a, int which)
{
    if (which == 0)
        return pk_ref_decode(a);
    int err = pk_cpu_decode_check(a);
    size_t items = pk_cpu_decode_items(a);
    size_t *begin = bmalloc((items + 1) * sizeof *begin), *end = bmalloc((items + 1) * sizeof *end);
    size_t chunks = nv_split(rng, items, begin, end);
    for (size_t i = 0; i < chunks && err == 0; i++)
        pk_cpu_decode_run(a, begin[i], end[i]);
    free(begin);
    free(end);
    return err;
}

/* Runs one case through the naive version, the reference and the CPU backend. */
static void run_case(uint64_t seed, int c)
{
    tap_rng rng;
    tap_rng_seed(&rng, seed + (uint64_t) c * 0x9e3779b97f4a7c15u);
    const nv_covering k = nv_covering_case(c);
    const int32_t D = k.D, B = k.B, G = k.G, dtype = k.dtype, q_dtype = k.q_dtype;
    int per_seq = (c / 5) % 3 == 0;
    int mixed = mixed_layers(c);
    int32_t H = 1 + (int32_t) tap_rng_below(&rng, 3);
    int32_t L = mixed ? 2 + (int32_t) tap_rng_below(&rng, 2) : 1 + (int32_t) tap_rng_below(&rng, 3);
    int nseqs = 1 + (int) tap_rng_below(&rng, MAXSEQS);
    int32_t lens[MAXSEQS];
    for (int s = 0; s < nseqs; s++)
        lens[s] = nv_pick_len(&rng, B);

    /* Trim to the budget: fewer sequences, then one KV head, then a shorter context. */
    for (;;) {
        long total = 0;
        for (int s = 0; s < nseqs; s++)
            total += lens[s];
        if (total * H * G * D <= BUDGET)
            break;
        if (nseqs > 1)
            nseqs--;
        else if (H > 1)
            H = 1;
        else
            lens[0] = BUDGET / (G * D) - (int32_t) tap_rng_below(&rng, (uint64_t) B);
    }
    int32_t Hq = H * G, bt_stride = 0, used = 0, max_len = 0;
    for (int s = 0; s < nseqs; s++) {
        int32_t blocks = (lens[s] + B - 1) / B;
        used += blocks;
        bt_stride = blocks > bt_stride ? blocks : bt_stride;
        max_len = lens[s] > max_len ? lens[s] : max_len;
    }
    bt_stride += (int32_t) tap_rng_below(&rng, 3);

    pk_cache cache = nv_random_pool(&rng, L, used, H, D, B, dtype);
    int32_t layer = (int32_t) tap_rng_below(&rng, (uint64_t) L);
    /* Per-sequence layers: random, the first two different. */
    int32_t *seq_layer = mixed ? nv_random_layers(&rng, nseqs, L) : NULL;
    int32_t *tables = nv_block_tables(&rng, nseqs, lens, B, cache.num_blocks, bt_stride);
    /* With per-sequence layers every layer of a sequence holds its own data, so reading
     * another layer than the sequence's gives another answer. */
    for (int s = 0; s < nseqs; s++)
        for (int32_t l = mixed ? 0 : layer; l < (mixed ? L : layer + 1); l++)
            nv_fill_seq(&rng, &cache, l, tables + (size_t) s * (size_t) bt_stride, lens[s]);
    int32_t *seq_lens = bmalloc((size_t) nseqs * sizeof *seq_lens);
    memcpy(seq_lens, lens, (size_t) nseqs * sizeof *seq_lens);

    size_t qsize = pk_dtype_size(q_dtype), rows = (size_t) nseqs * (size_t) Hq;
    size_t seq_bytes = (size_t) Hq * (size_t) D * qsize;
    void *q = bmalloc(rows * (size_t) D * qsize), *out = bmalloc(rows * (size_t) D * qsize);
    for (size_t i = 0; i < rows * (size_t) D; i++)
        nv_random(&rng, q, i, q_dtype, 1.0f);

    float *slopes;
    pk_attn_opts opts = nv_random_opts(&rng, k.options, D, Hq, max_len, &slopes);

    /* The naive answer, one KV head of one sequence at a time. */
    double *want = bmalloc(rows * (size_t) D * sizeof *want);
    double *K = bmalloc((size_t) max_len * (size_t) D * sizeof *K);
    double *V = bmalloc((size_t) max_len * (size_t) D * sizeof *V);
    double *qd = bmalloc((size_t) D * sizeof *qd);
    for (int s = 0; s < nseqs; s++)
        for (int32_t h = 0; h < H; h++) {
            nv_gather(&cache, mixed ? seq_layer[s] : layer, tables + (size_t) s * (size_t) bt_stride, lens[s],
                      h, K, V);
            for (int32_t g = 0; g < G; g++) {
                size_t row = (size_t) s * (size_t) Hq + (size_t) (h * G + g);
                for (int32_t d = 0; d < D; d++)
                    qd[d] = nv_value(q, row * (size_t) D + (size_t) d, q_dtype);
                nv_attend(qd, h * G + g, lens[s] - 1, K, V, lens[s], D, &opts, want + row * (size_t) D);
            }
        }

    /* The per-sequence form gets separate buffers so ASan sees each one's bounds. */
    const void **q_seq = NULL;
    void **out_seq = NULL;
    if (per_seq) {
        q_seq = bmalloc((size_t) nseqs * sizeof *q_seq);
        out_seq = bmalloc((size_t) nseqs * sizeof *out_seq);
        for (int s = 0; s < nseqs; s++) {
            void *qs = bmalloc(seq_bytes);
            memcpy(qs, (char *) q + (size_t) s * seq_bytes, seq_bytes);
            q_seq[s] = qs;
            out_seq[s] = bmalloc(seq_bytes);
        }
    }
    pk_decode_args a = {
        .cache = cache,
        .layer = layer,
        .num_seqs = nseqs,
        .num_q_heads = Hq,
        .q_dtype = q_dtype,
        .q = per_seq ? NULL : q,
        .out = per_seq ? NULL : out,
        .q_seq = (const void *const *) q_seq,
        .out_seq = (void *const *) out_seq,
        .block_tables = tables,
        .bt_stride = bt_stride,
        .seq_lens = seq_lens,
        .opts = opts,
        .seq_layer = seq_layer,
    };

    char label[256], olabel[64];
    nv_opts_label(olabel, sizeof olabel, &opts);
    nv_case_prefix(label, sizeof label, "decode", dtype, q_dtype);
    snprintf(label + strlen(label), sizeof label - strlen(label),
             " D=%d B=%d GQA %d, %d KV heads, %d seqs up to %d tokens,%s%s", (int) D, (int) B, (int) G,
             (int) H, nseqs, (int) max_len, olabel, per_seq ? ", per-seq pointers" : "");
    if (mixed) {
        size_t n = strlen(label);
        n += (size_t) snprintf(label + n, sizeof label - n, ", per-seq layers of %d:", (int) L);
        for (int s = 0; s < nseqs && n < sizeof label; s++)
            n += (size_t) snprintf(label + n, sizeof label - n, " %d", (int) seq_layer[s]);
    }

    size_t out_bytes = rows * (size_t) D * qsize;
    void *got[2] = { bmalloc(out_bytes), bmalloc(out_bytes) };
    int errs[2];
    for (int which = 0; which < 2; which++) {
        if (per_seq)
            for (int s = 0; s < nseqs; s++)
                memset(out_seq[s], 0xff, seq_bytes);
        else
            memset(out, 0xff, out_bytes);
        int err = errs[which] = run_one(&rng, &a, which);
        if (per_seq)
            for (int s = 0; s < nseqs; s++)
                memcpy((char *) out + (size_t) s * seq_bytes, out_seq[s], seq_bytes);
        memcpy(got[which], out, out_bytes);
        char what[300];
        snprintf(what, sizeof what, "%s: %s", label, which == 0 ? "ref" : "cpu");
        if (err != 0)
            diag("%s: returned %d", what, err);
        ok(err == 0 && nv_close(out, q_dtype, want, rows, D, what), "%s matches naive", what);
    }

    /* Each sequence alone on its layer, in the contiguous form: both versions must give
     * exactly what they gave with the sequences merged. */
    if (mixed) {
        int same = errs[0] == 0 && errs[1] == 0;
        for (int which = 0; which < 2 && same; which++)
            for (int s = 0; s < nseqs && same; s++) {
                pk_decode_args one = {
                    .cache = cache, .layer = seq_layer[s], .num_seqs = 1, .num_q_heads = Hq,
                    .q_dtype = q_dtype, .q = (const char *) q + (size_t) s * seq_bytes, .out = out,
                    .block_tables = tables + (size_t) s * (size_t) bt_stride, .bt_stride = bt_stride,
                    .seq_lens = seq_lens + s, .opts = opts,
                };
                memset(out, 0xff, seq_bytes);
                same = run_one(&rng, &one, which) == 0
                       && memcmp(out, (const char *) got[which] + (size_t) s * seq_bytes, seq_bytes) == 0;
                if (!same)
                    diag("sequence %d (layer %d) alone differs in the %s", s, (int) seq_layer[s],
                         which == 0 ? "reference" : "cpu backend");
            }
        ok(same, "%s: ref and cpu give bit for bit what each sequence gives alone on its layer", label);
    }
    free(got[0]);
    free(got[1]);

    if (per_seq) {
        for (int s = 0; s < nseqs; s++) {
            free((void *) q_seq[s]);
            free(out_seq[s]);
        }
        free(q_seq);
        free(out_seq);
    }
    free(want);
    free(K);
    free(V);
    free(qd);
    free(slopes);
    free(q);
    free(out);
    free(seq_lens);
    free(seq_layer);
    free(tables);
    free(cache.base);
}

/* Checks that each unsupported shape is refused with its error, by both versions. */
static void test_errors(void)
{
    float pool[2 * 2 * 1 * 8 * 64];
    float q[2 * 64], out[2 * 64];
    int32_t table[2] = { 0, 1 }, len = 16;
    pk_decode_args good = {
        .cache = { .base = pool, .num_layers = 2, .num_blocks = 2, .num_kv_heads = 1, .head_dim = 64,
                   .block_size = 8, .dtype = PAGED_DTYPE_F32, .k_scale = 1, .v_scale = 1 },
        .layer = 1, .num_seqs = 1, .num_q_heads = 2, .q_dtype = PAGED_DTYPE_F32, .q = q, .out = out,
        .block_tables = table, .bt_stride = 2, .seq_lens = &len, .opts = { .sm_scale = 0.125f },
    };
    struct {
        const char *what;
        int want;
        pk_decode_args a;
    } cases[11];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cases[i].a = good;
    cases[0].what = "query heads not a multiple of KV heads";
    cases[0].want = PAGED_E_HEADS;
    cases[0].a.cache.num_kv_heads = 2;
    cases[0].a.num_q_heads = 3;
    cases[1].what = "head_dim 0";
    cases[1].want = PAGED_E_GEOMETRY;
    cases[1].a.cache.head_dim = 0;
    cases[2].what = "head_dim 513";
    cases[2].want = PAGED_E_GEOMETRY;
    cases[2].a.cache.head_dim = 513;
    cases[3].what = "block size 0";
    cases[3].want = PAGED_E_GEOMETRY;
    cases[3].a.cache.block_size = 0;
    cases[4].what = "unknown cache dtype";
    cases[4].want = PAGED_E_DTYPE;
    cases[4].a.cache.dtype = 9;
    cases[5].what = "f16 queries on an f32 cache";
    cases[5].want = PAGED_E_DTYPE;
    cases[5].a.q_dtype = PAGED_DTYPE_F16;
    cases[6].what = "fp8 queries";
    cases[6].want = PAGED_E_DTYPE;
    cases[6].a.cache.dtype = PAGED_DTYPE_FP8_E4M3;
    cases[6].a.q_dtype = PAGED_DTYPE_FP8_E4M3;
    cases[7].what = "layer past the pool";
    cases[7].want = PAGED_E_LAYER;
    cases[7].a.layer = 2;
    cases[8].what = "zero query heads";
    cases[8].want = PAGED_E_HEADS;
    cases[8].a.num_q_heads = 0;
    cases[9].what = "fp8 cache with a zero scale";
    cases[9].want = PAGED_E_INVAL;
    cases[9].a.cache.dtype = PAGED_DTYPE_FP8_E4M3;
    cases[9].a.cache.k_scale = 0;
    cases[10].what = "a fused append (a CUDA launch form)";
    cases[10].want = PAGED_E_NOTSUP;
    cases[10].a.new_k = cases[10].a.new_v = q;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        is_int(cases[i].want, pk_ref_decode(&cases[i].a), "decode ref refuses %s", cases[i].what);
        is_int(cases[i].want, pk_cpu_decode_check(&cases[i].a), "decode cpu check refuses %s",
               cases[i].what);
        is_int(0, (long long) pk_cpu_decode_items(&cases[i].a), "decode cpu has no items for %s",
               cases[i].what);
    }
    int32_t long_len = 17;
    pk_decode_args a = good;
    a.seq_lens = &long_len;
    is_int(PAGED_E_SEQLEN, pk_ref_decode(&a), "decode ref refuses a sequence longer than its table");
    is_int(PAGED_E_SEQLEN, pk_cpu_decode_check(&a), "decode cpu refuses a sequence longer than its table");
    int32_t zero_len = 0;
    a.seq_lens = &zero_len;
    is_int(PAGED_E_SEQLEN, pk_ref_decode(&a), "decode ref refuses an empty sequence");
    is_int(PAGED_E_SEQLEN, pk_cpu_decode_check(&a), "decode cpu refuses an empty sequence");
    int32_t seq_layer = 2;
    a = good;
    a.seq_layer = &seq_layer;
    is_int(PAGED_E_LAYER, pk_ref_decode(&a), "decode ref refuses a sequence's layer past the pool");
    is_int(PAGED_E_LAYER, pk_cpu_decode_check(&a), "decode cpu refuses a sequence's layer past the pool");
    seq_layer = -1;
    is_int(PAGED_E_LAYER, pk_ref_decode(&a), "decode ref refuses a negative layer of a sequence");
    is_int(PAGED_E_LAYER, pk_cpu_decode_check(&a), "decode cpu refuses a negative layer of a sequence");
    seq_layer = 0;
    is_int(0, pk_cpu_decode_check(&a), "decode cpu accepts a sequence's own layer 0 beside layer 1");
    a.layer = 2;
    is_int(PAGED_E_LAYER, pk_cpu_decode_check(&a), "decode cpu still checks the layer with per-sequence layers");
    a = good;
    a.num_seqs = 0;
    is_int(0, pk_ref_decode(&a), "decode ref accepts zero sequences");
    is_int(0, (long long) pk_cpu_decode_items(&a), "decode cpu has no items for zero sequences");
}

/* Runs every decode case, then the refusals; returns 0 (the TAP output tells the rest). */
int main(void)
{
    uint64_t seed = tap_seed();
    int mixed = 0;
    for (int c = 0; c < NCASES; c++)
        mixed += mixed_layers(c);
    plan(2 * NCASES + mixed + 3 * 11 + 6 + 6);
    for (int c = 0; c < NCASES; c++)
        run_case(seed, c);
    test_errors();
    return 0;
}
