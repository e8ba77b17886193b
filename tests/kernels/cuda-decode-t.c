/* cuda-decode-t.c: pk_cuda_decode against pk_ref_decode over head dims, block sizes, groups, dtypes and lengths. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/dtype.h"
#include "kernels/kernels.h"
#include "tests/kernels/gpu_util.h"
#include "tests/tap/basic.h"

/*
 * Three sets of cases. The sweep crosses every (cache, query) dtype pair with every head dim
 * and block size (the group size, KV heads, options and forms rotate with the case index),
 * over short contexts that end anywhere in a block. The long set gives each dtype pair and
 * head dim a context of 600 to 4000 tokens beside short ones, which the GPU splits into
 * partitions (the reduce kernel runs) while the short ones are finished in one. The edge set
 * pins what random choices might miss. The reference is single-threaded, so each long case's
 * context is capped at LONG_BUDGET / (group * head dim) tokens. Cases marked mixed give each
 * sequence its own random layer (seq_layer in device memory, as a merged launch of clients
 * at different layers has it) over a pool whose every layer holds different data; the
 * reference takes the same layers (cpu-decode-t checks that it then gives what each
 * sequence gives alone on its layer). The wide-group set crosses group sizes up to 71 query
 * heads per KV head (1 and 2 KV heads) with every dtype pair (so both partition kernels) and
 * head dims 64, 128 and 256, on short contexts and on long ones that split; the n-tile set
 * gives the tensor-core kernel's sub-groups of 16 heads every head dim that has them.
 */
#define MAXSEQS 24
#define LONG_BUDGET 2500000

static const int32_t dims[] = { 64, 80, 96, 128, 256 };
static const int32_t block_sizes[] = { 8, 16, 32 };
static const int32_t groups[] = { 1, 2, 4, 8 };
/* Group sizes of the wide-group set: every one a CTA serves whole, and wider ones that are
 * split into sub-groups of 8 (the plain kernel, fp8 caches at D 128, D 256; 12: 8 + 4; 71:
 * 8 x 8 + 7) or of 16 (the tensor-core kernel's two n-tiles, beyond 16 heads; 71: 4 x 16 + 7). */
static const int32_t wide_groups[] = { 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32, 48, 64, 71 };
static const int32_t wide_dims[] = { 0, 3, 4 };          /* indexes into dims: 64, 128, 256 */
static const int32_t pairs[][2] = {
    { PAGED_DTYPE_F16, PAGED_DTYPE_F16 },      { PAGED_DTYPE_BF16, PAGED_DTYPE_BF16 },
    { PAGED_DTYPE_F32, PAGED_DTYPE_F32 },      { PAGED_DTYPE_FP8_E4M3, PAGED_DTYPE_F16 },
    { PAGED_DTYPE_FP8_E4M3, PAGED_DTYPE_BF16 }, { PAGED_DTYPE_FP8_E4M3, PAGED_DTYPE_F32 },
};

/* One decode case. */
typedef struct dcase {
    int32_t D, B, G, H, L;          /* head dim, block size, group, KV heads, layers */
    int32_t kv_dtype, q_dtype;
    int nseqs;
    int32_t lens[MAXSEQS];
    int alibi, cap, per_seq, no_workspace, mixed;
    int fused;                      /* the launch also appends each sequence's newest token */
    int32_t window;
    float q_amp;                    /* query magnitude; 0: the default 2 */
} dcase;

/* Cases run, how many of them split, and for how many the workspace query gave another
 * answer without the pointers. */
static int ws_cases, ws_split, ws_pointer_dependent;
static int plan_cases, plan_wrong;   /* pk_cuda_decode_plan against the workspace and the grid */
/* Fused-append cases run, and those whose cache came out byte for byte as the reference's. */
static int fused_cases, fused_cache_same;
/* Launches with their metadata in the kernel's parameters (pk_decode_args.meta_host): run,
 * matching the reference, declined by pk_cuda_decode_meta_inline, and declined ones that
 * pk_cuda_decode did not refuse with PAGED_E_NOTSUP. */
static int meta_cases, meta_same, meta_declined, meta_declined_ran;

/* The host copies of a case's metadata arrays (NULL: none), for packing them into one buffer. */
typedef struct meta_src {
    const int32_t *bt, *lens, *layers;
    const float *slopes;
    void *const *q_seq, *const *out_seq;
    const void *const *new_k_seq, *const *new_v_seq;
} meta_src;

/* Copies bytes of src to offset *len of h (rounded up to 16; h NULL: only counts) and moves
 * *len past it; returns the offset. */
static size_t meta_put(unsigned char *h, size_t *len, const void *src, size_t bytes)
{
    size_t off = (*len + 15) & ~(size_t) 15;
    if (h != NULL && src != NULL)
        memcpy(h + off, src, bytes);
    *len = off + bytes;
    return off;
}

/*
 * Lays out the metadata of launch da (n sequences, host copies m) in one buffer, as the
 * daemon stages it: on the host in *host, and on the device at dev (NULL: only sizes it),
 * pointing the launch's arrays at dev. Returns the bytes.
 */
static size_t meta_pack(pk_decode_args *da, const meta_src *m, int n, unsigned char *host, unsigned char *dev)
{
    size_t len = 0, u = (size_t) n;
    size_t o_bt = meta_put(host, &len, m->bt, u * (size_t) da->bt_stride * sizeof(int32_t));
    size_t o_lens = meta_put(host, &len, m->lens, u * sizeof(int32_t));
    size_t o_layers = m->layers ? meta_put(host, &len, m->layers, u * sizeof(int32_t)) : 0;
    size_t o_slopes = m->slopes ? meta_put(host, &len, m->slopes, (size_t) da->num_q_heads * sizeof(float)) : 0;
    size_t o_q = m->q_seq ? meta_put(host, &len, m->q_seq, u * sizeof(void *)) : 0;
    size_t o_out = m->out_seq ? meta_put(host, &len, m->out_seq, u * sizeof(void *)) : 0;
    size_t o_nk = m->new_k_seq ? meta_put(host, &len, m->new_k_seq, u * sizeof(void *)) : 0;
    size_t o_nv = m->new_v_seq ? meta_put(host, &len, m->new_v_seq, u * sizeof(void *)) : 0;
    if (dev == NULL)
        return len;
    da->block_tables = (const int32_t *) (dev + o_bt);
    da->seq_lens = (const int32_t *) (dev + o_lens);
    da->seq_layer = m->layers ? (const int32_t *) (dev + o_layers) : NULL;
    da->opts.alibi_slopes = m->slopes ? (const float *) (dev + o_slopes) : NULL;
    da->q_seq = m->q_seq ? (const void *const *) (dev + o_q) : NULL;
    da->out_seq = m->out_seq ? (void *const *) (dev + o_out) : NULL;
    da->new_k_seq = m->new_k_seq ? (const void *const *) (dev + o_nk) : NULL;
    da->new_v_seq = m->new_v_seq ? (const void *const *) (dev + o_nv) : NULL;
    return len;
}

/*
 * Runs launch da of case c again with its metadata in the kernel's parameters, where
 * pk_cuda_decode_meta_inline allows it, and checks the outputs against want (per-sequence
 * outputs at op, else at out_d) and, for a fused case, the device pool against the host
 * reference pool. The device copy of the metadata says every sequence is one token long,
 * so a kernel that read it there would be caught. Counts into meta_*; returns nothing.
 */
static void meta_check(const dcase *c, const pk_decode_args *da, const meta_src *m, void *const *op, void *out_d,
                       const void *want, const void *pool_ref, size_t pool_bytes)
{
    pk_decode_args ia = *da;
    size_t len = meta_pack(&ia, m, c->nseqs, NULL, NULL);
    unsigned char *host = bmalloc(len), *decoy = bmalloc(len);
    unsigned char *dev = gu_alloc(len);
    memset(host, 0, len);
    meta_pack(&ia, m, c->nseqs, host, dev);
    memcpy(decoy, host, len);
    int32_t *decoy_lens = (int32_t *) (decoy + ((const unsigned char *) ia.seq_lens - dev));
    for (int s = 0; s < c->nseqs; s++)
        decoy_lens[s] = 1;
    gu_upload(dev, decoy, len);
    ia.meta_host = host;
    ia.meta_dev = dev;
    ia.meta_bytes = len;
    int inl = pk_cuda_decode_meta_inline(&ia);
    if (inl != 1) {
        meta_declined++;
        meta_declined_ran += pk_cuda_decode(&ia, NULL) != PAGED_E_NOTSUP;
        gu_sync("decode with declined metadata");
    } else {
        size_t row = (size_t) c->H * (size_t) c->G * (size_t) c->D * pk_dtype_size(c->q_dtype);
        size_t n = (size_t) c->nseqs;
        for (size_t s = 0; s < n; s++)
            gu_poison(op != NULL ? op[s] : (char *) out_d + s * row, row);
        int rc = pk_cuda_decode(&ia, NULL);
        gu_sync("decode with metadata in parameters");
        void *got = bmalloc(n * row);
        for (size_t s = 0; s < n; s++)
            gu_download((char *) got + s * row, op != NULL ? op[s] : (char *) out_d + s * row, row);
        double worst = 0.0;
        int same = rc == 0 && gu_compare(got, want, n * (size_t) (c->H * c->G), c->D, c->q_dtype,
                                         gu_tolerance(c->q_dtype), &worst);
        if (same && c->fused) {
            void *after = bmalloc(pool_bytes);
            gu_download(after, da->cache.base, pool_bytes);
            same = memcmp(after, pool_ref, pool_bytes) == 0;
            free(after);
        }
        meta_cases++;
        meta_same += same;
        if (!same)
            diag("metadata in parameters: D=%d G=%d H=%d %d sequences: %s, worst row %.2g", (int) c->D,
                 (int) c->G, (int) c->H, c->nseqs, rc == 0 ? "outputs differ" : paged_strerror(rc), worst);
    }
    gu_free(dev);
    free(host);
    free(decoy);
}

/* Fills every plane of a host pool with random values (fp8: K planes by k_scale, V by v_scale). */
static void fill_pool(tap_rng *rng, const pk_cache *c, void *pool)
{
    size_t plane = (size_t) c->num_blocks * (size_t) c->num_kv_heads * (size_t) c->block_size * (size_t) c->head_dim;
    size_t esize = pk_dtype_size(c->dtype);
    for (int32_t l = 0; l < c->num_layers; l++)
        for (int32_t kv = 0; kv < 2; kv++)
            gu_fill(rng, (char *) pool + ((size_t) l * 2 + (size_t) kv) * plane * esize, plane, c->dtype, 1.0f,
                    kv == 0 ? c->k_scale : c->v_scale);
}

/* Returns the most query heads one decode CTA serves for a: 16 (the tensor-core kernel's two
 * n-tiles) for groups of more than 16 heads on the tensor-core pairs at head dims up to 128 (but
 * not fp8 caches at 128) and at 256 with 16-bit caches, else 8. */
static int cta_heads_of(const pk_decode_args *a)
{
    const int group = a->num_q_heads / a->cache.num_kv_heads;
    const int mma = a->cache.dtype != PAGED_DTYPE_F32 && a->q_dtype != PAGED_DTYPE_F32;
    const int32_t d = a->cache.head_dim;
    const int fp8 = a->cache.dtype == PAGED_DTYPE_FP8_E4M3;
    const int wide = d < 128 || (d == 128 && !fp8) || (d == 256 && !fp8);
    return group > 16 && mma && wide ? 16 : 8;
}

/* Returns whether pk_cuda_decode_plan's answer for a (whose workspace is ws bytes, if any)
 * fits the workspace query and the tables: a split exactly when a workspace is there and asked
 * for, one CTA per (sequence, KV head, sub-group of at most cta_heads_of query heads,
 * partition), and partitions of whole tiles covering the longest context the tables allow
 * without one to spare. */
static int plan_agrees(const pk_decode_args *a, size_t ws)
{
    pk_decode_plan_info pi;
    if (pk_cuda_decode_plan(a, &pi) != 0)
        return 0;
    long long span = (long long) a->bt_stride * a->cache.block_size;
    if (a->opts.window > 0 && span > a->opts.window + 15)
        span = a->opts.window + 15;
    int split_expected = a->workspace != NULL && ws > 0;
    if ((pi.parts > 1) != split_expected || pi.part_tokens <= 0 || pi.part_tokens % 16 != 0)
        return 0;
    const int heads = cta_heads_of(a);
    const long long subs = (a->num_q_heads / a->cache.num_kv_heads + heads - 1) / heads;   /* CTAs per KV head */
    if (pi.cta_heads != heads || pi.ctas != (long long) a->num_seqs * a->cache.num_kv_heads * subs * pi.parts)
        return 0;
    return pi.parts == 1 || ((long long) pi.parts * pi.part_tokens >= span
                             && (long long) (pi.parts - 1) * pi.part_tokens < span);
}

/* Runs one case on the GPU and through the reference, and reports whether they agree. */
static void run_case(tap_rng *rng, const dcase *c)
{
    int32_t Hq = c->H * c->G;
    int32_t max_blocks = 0, total_blocks = 0;
    for (int s = 0; s < c->nseqs; s++) {
        int32_t nb = (c->lens[s] + c->B - 1) / c->B;
        total_blocks += nb;
        if (nb > max_blocks)
            max_blocks = nb;
    }
    pk_cache cache = {
        .num_layers = c->L,
        .num_blocks = total_blocks + gu_range(rng, 0, 4),
        .num_kv_heads = c->H,
        .head_dim = c->D,
        .block_size = c->B,
        .dtype = c->kv_dtype,
        .k_scale = c->kv_dtype == PAGED_DTYPE_FP8_E4M3 ? (float) tap_rng_uniform(rng, 0.01, 0.05) : 1.0f,
        .v_scale = c->kv_dtype == PAGED_DTYPE_FP8_E4M3 ? (float) tap_rng_uniform(rng, 0.01, 0.05) : 1.0f,
    };
    size_t pool_bytes = pk_cache_bytes(&cache);
    void *pool = bmalloc(pool_bytes);
    cache.base = pool;
    fill_pool(rng, &cache, pool);
    void *pool_d = gu_clone(pool, pool_bytes);      /* before the fused case's reference append */
    int32_t bt_stride = max_blocks + gu_range(rng, 0, 3);
    int32_t *bt = nv_block_tables(rng, c->nseqs, c->lens, c->B, cache.num_blocks, bt_stride);

    size_t qsize = pk_dtype_size(c->q_dtype);
    size_t row_elems = (size_t) Hq * (size_t) c->D;
    size_t qbytes = (size_t) c->nseqs * row_elems * qsize;
    void *q = bmalloc(qbytes), *want = bmalloc(qbytes), *got = bmalloc(qbytes);
    gu_fill(rng, q, (size_t) c->nseqs * row_elems, c->q_dtype, c->q_amp > 0.0f ? c->q_amp : 2.0f, 1.0f);
    float *slopes = bmalloc((size_t) Hq * sizeof *slopes);
    for (int32_t h = 0; h < Hq; h++)
        slopes[h] = (float) tap_rng_uniform(rng, 0.01, 0.3);
    /* Per-sequence layers: random, the first two different. */
    int32_t *seq_layer = c->mixed ? nv_random_layers(rng, c->nseqs, c->L) : NULL;

    pk_decode_args ha = {
        .cache = cache,
        .layer = gu_range(rng, 0, c->L - 1),
        .num_seqs = c->nseqs,
        .num_q_heads = Hq,
        .q_dtype = c->q_dtype,
        .q = q,
        .out = want,
        .block_tables = bt,
        .bt_stride = bt_stride,
        .seq_lens = c->lens,
        .opts = {
            /* queries of another magnitude keep the logits' scale */
            .sm_scale = (float) (tap_rng_uniform(rng, 0.5, 2.5) / sqrt((double) c->D)
                                 * (c->q_amp > 0.0f ? 2.0 / c->q_amp : 1.0)),
            .soft_cap = c->cap ? (float) tap_rng_uniform(rng, 2.0, 10.0) : 0.0f,
            .window = c->window,
            .alibi_slopes = c->alibi ? slopes : NULL,
        },
        .seq_layer = seq_layer,
    };
    /* The fused case's newest tokens: the reference appends them first (APPEND's own
     * reference, at each sequence's last position of its layer), then decodes. */
    size_t new_bytes = (size_t) c->H * (size_t) c->D * qsize;
    void *nk = NULL, *nv = NULL;
    if (c->fused) {
        nk = bmalloc((size_t) c->nseqs * new_bytes);
        nv = bmalloc((size_t) c->nseqs * new_bytes);
        gu_fill(rng, nk, (size_t) c->nseqs * (size_t) c->H * (size_t) c->D, c->q_dtype, 1.0f, cache.k_scale);
        gu_fill(rng, nv, (size_t) c->nseqs * (size_t) c->H * (size_t) c->D, c->q_dtype, 1.0f, cache.v_scale);
        for (int s = 0; s < c->nseqs; s++) {
            int32_t pos = c->lens[s] - 1;
            int32_t slot = bt[(size_t) s * (size_t) bt_stride + (size_t) (pos / c->B)] * c->B + pos % c->B;
            pk_append_args ap = {
                .cache = cache, .layer_begin = seq_layer ? seq_layer[s] : ha.layer, .num_layers = 1,
                .num_tokens = 1, .src_dtype = c->q_dtype, .k = (char *) nk + (size_t) s * new_bytes,
                .v = (char *) nv + (size_t) s * new_bytes, .slot_mapping = &slot,
            };
            int arc = pk_ref_append(&ap);
            if (arc != 0)
                bail("pk_ref_append: %s", paged_strerror(arc));
        }
    }
    int rc = pk_ref_decode(&ha);
    if (rc != 0)
        bail("pk_ref_decode: %s", paged_strerror(rc));

    /* The same op on the device. */
    pk_decode_args da = ha;
    da.cache.base = pool_d;
    da.block_tables = gu_clone(bt, (size_t) c->nseqs * (size_t) bt_stride * sizeof *bt);
    da.seq_lens = gu_clone(c->lens, (size_t) c->nseqs * sizeof(int32_t));
    da.opts.alibi_slopes = c->alibi ? gu_clone(slopes, (size_t) Hq * sizeof *slopes) : NULL;
    da.seq_layer = c->mixed ? gu_clone(seq_layer, (size_t) c->nseqs * sizeof *seq_layer) : NULL;
    void *q_d = gu_clone(q, qbytes), *out_d = NULL;
    void **qp = NULL, **op = NULL;
    size_t slot_bytes = row_elems * qsize + 64;  /* per-sequence rows sit apart, in shuffled order */
    if (c->per_seq) {
        out_d = gu_alloc((size_t) c->nseqs * slot_bytes);
        gu_poison(out_d, (size_t) c->nseqs * slot_bytes);
        qp = bmalloc((size_t) c->nseqs * sizeof *qp);
        op = bmalloc((size_t) c->nseqs * sizeof *op);
        void *qs_d = gu_alloc((size_t) c->nseqs * slot_bytes);
        for (int s = 0; s < c->nseqs; s++) {
            int where = c->nseqs - 1 - s;   /* reversed: the pointers, not the order, must matter */
            qp[s] = (char *) qs_d + (size_t) where * slot_bytes;
            op[s] = (char *) out_d + (size_t) where * slot_bytes;
            gu_upload(qp[s], (const char *) q + (size_t) s * row_elems * qsize, row_elems * qsize);
        }
        gu_free(q_d);
        q_d = qs_d;
        da.q = NULL;
        da.out = NULL;
        da.q_seq = gu_clone(qp, (size_t) c->nseqs * sizeof *qp);
        da.out_seq = gu_clone(op, (size_t) c->nseqs * sizeof *op);
    } else {
        out_d = gu_alloc(qbytes);
        gu_poison(out_d, qbytes);
        da.q = q_d;
        da.out = out_d;
    }
    void *nk_d = NULL, *nv_d = NULL;
    const void **nkp = NULL, **nvp = NULL;     /* host copies of new_k_seq and new_v_seq */
    if (c->fused && c->per_seq) {
        /* Each sequence's rows at its own place, in reversed order, as merged clients' are. */
        nk_d = gu_alloc((size_t) c->nseqs * (new_bytes + 64));
        nv_d = gu_alloc((size_t) c->nseqs * (new_bytes + 64));
        const void **kp = bmalloc((size_t) c->nseqs * sizeof *kp), **vp = bmalloc((size_t) c->nseqs * sizeof *vp);
        for (int s = 0; s < c->nseqs; s++) {
            size_t where = (size_t) (c->nseqs - 1 - s) * (new_bytes + 64);
            kp[s] = (char *) nk_d + where;
            vp[s] = (char *) nv_d + where;
            gu_upload((void *) kp[s], (const char *) nk + (size_t) s * new_bytes, new_bytes);
            gu_upload((void *) vp[s], (const char *) nv + (size_t) s * new_bytes, new_bytes);
        }
        da.new_k_seq = gu_clone(kp, (size_t) c->nseqs * sizeof *kp);
        da.new_v_seq = gu_clone(vp, (size_t) c->nseqs * sizeof *vp);
        nkp = kp;
        nvp = vp;
    } else if (c->fused) {
        da.new_k = nk_d = gu_clone(nk, (size_t) c->nseqs * new_bytes);
        da.new_v = nv_d = gu_clone(nv, (size_t) c->nseqs * new_bytes);
    }
    size_t ws = pk_cuda_decode_workspace(&da);
    /* The daemon asks before the metadata has device addresses: the answer must not change. */
    pk_decode_args shape_only = da;
    shape_only.block_tables = NULL;
    shape_only.seq_lens = NULL;
    shape_only.q = NULL;
    shape_only.out = NULL;
    shape_only.q_seq = NULL;
    shape_only.out_seq = NULL;
    shape_only.seq_layer = NULL;
    ws_cases++;
    ws_split += ws > 0;
    ws_pointer_dependent += pk_cuda_decode_workspace(&shape_only) != ws;
    da.workspace = NULL;
    da.workspace_size = 0;
    if (!c->no_workspace && ws > 0) {
        da.workspace = gu_alloc(ws);
        gu_poison(da.workspace, ws);
        da.workspace_size = ws;
    }
    plan_cases++;
    plan_wrong += !plan_agrees(&da, ws);
    rc = pk_cuda_decode(&da, NULL);
    gu_sync("decode");
    if (c->per_seq) {
        for (int s = 0; s < c->nseqs; s++)
            gu_download((char *) got + (size_t) s * row_elems * qsize, op[s], row_elems * qsize);
    } else {
        gu_download(got, out_d, qbytes);
    }

    double worst = 0.0;
    int same = rc == 0 && gu_compare(got, want, (size_t) c->nseqs * (size_t) Hq, c->D, c->q_dtype,
                                     gu_tolerance(c->q_dtype), &worst);
    if (c->fused) {
        /* The cache afterwards: every byte as APPEND's reference left the host pool. */
        void *after = bmalloc(pool_bytes);
        gu_download(after, pool_d, pool_bytes);
        fused_cases++;
        fused_cache_same += rc == 0 && memcmp(after, pool, pool_bytes) == 0;
        free(after);
    }
    if (rc == 0) {
        meta_src m = { bt, c->lens, seq_layer, c->alibi ? slopes : NULL, c->per_seq ? qp : NULL,
                       c->per_seq ? op : NULL, nkp, nvp };
        meta_check(c, &da, &m, c->per_seq ? op : NULL, out_d, want, pool, pool_bytes);
    }
    free(nkp);
    free(nvp);
    char lens[160], window[32] = "";
    size_t n = 0;
    for (int s = 0; s < c->nseqs && n < sizeof lens - 12; s++)
        n += (size_t) snprintf(lens + n, sizeof lens - n, "%s%d", s ? "," : "", (int) c->lens[s]);
    if (c->window > 0)
        snprintf(window, sizeof window, " window=%d", (int) c->window);
    char amp[32] = "";
    if (c->q_amp > 0.0f)
        snprintf(amp, sizeof amp, " |q|<%g", (double) c->q_amp);
    char layers[96] = "";
    if (c->mixed) {
        size_t m = (size_t) snprintf(layers, sizeof layers, " seq-layers");
        for (int s = 0; s < c->nseqs && m < sizeof layers - 4; s++)
            m += (size_t) snprintf(layers + m, sizeof layers - m, "%s%d", s ? "," : " ", (int) seq_layer[s]);
    }
    ok(same, "decode %s/%s D=%d B=%d G=%d H=%d L=%d lens %s%s%s%s%s%s%s%s%s%s: matches reference (%s, worst row %.2g)",
       gu_dtype_name(c->kv_dtype), gu_dtype_name(c->q_dtype), (int) c->D, (int) c->B, (int) c->G, (int) c->H,
       (int) c->L, lens, c->alibi ? " alibi" : "", c->cap ? " cap" : "", window, c->per_seq ? " per-seq" : "",
       c->no_workspace ? " no-workspace" : "", ws > 0 && !c->no_workspace ? " split" : "", amp, layers,
       c->fused ? " fused-append" : "", rc == 0 ? "ok" : paged_strerror(rc), worst);

    gu_free(da.cache.base);
    gu_free(nk_d);
    gu_free(nv_d);
    gu_free((void *) da.new_k_seq);
    gu_free((void *) da.new_v_seq);
    free(nk);
    free(nv);
    gu_free((void *) da.block_tables);
    gu_free((void *) da.seq_lens);
    gu_free((void *) da.opts.alibi_slopes);
    gu_free((void *) da.seq_layer);
    gu_free(q_d);
    gu_free(out_d);
    gu_free(da.workspace);
    if (c->per_seq) {
        gu_free((void *) da.q_seq);
        gu_free((void *) da.out_seq);
        free(qp);
        free(op);
    }
    free(pool);
    free(bt);
    free(q);
    free(want);
    free(got);
    free(slopes);
    free(seq_layer);
}

/* Returns a case for dtype pair pi, head dim di and block size bi, the rest chosen by idx and rng. */
static dcase base_case(tap_rng *rng, int pi, int di, int bi, int idx)
{
    dcase c;
    memset(&c, 0, sizeof c);
    c.D = dims[di];
    c.B = block_sizes[bi];
    c.kv_dtype = pairs[pi][0];
    c.q_dtype = pairs[pi][1];
    c.G = groups[idx % 4];
    c.H = 1 + idx % 2;
    c.L = 1 + idx % 3;
    c.alibi = idx % 3 == 0;
    c.cap = idx % 4 == 2;
    c.per_seq = idx % 5 == 3;
    c.window = idx % 6 == 1 ? gu_range(rng, 1, 80) : 0;
    c.mixed = idx % 7 == 4;
    if (c.mixed && c.L == 1)
        c.L = 3;
    c.nseqs = 3;
    c.lens[0] = gu_range(rng, 1, c.B);                      /* within the first block */
    c.lens[1] = gu_range(rng, 1, 300);                      /* ends anywhere */
    c.lens[2] = c.B * gu_range(rng, 1, 300 / c.B);          /* ends on a block boundary */
    return c;
}

/* Runs the long-context case of dtype pair pi and head dim di. */
static void long_case(tap_rng *rng, int pi, int di, int idx)
{
    dcase c = base_case(rng, pi, di, idx % 3, idx);
    c.H = 1;
    int32_t len = LONG_BUDGET / (c.G * c.D);
    if (len > 4000)
        len = 4000;
    if (len < 600)
        len = 600;
    c.lens[0] = len - gu_range(rng, 0, 40);
    c.lens[1] = gu_range(rng, 1, 40);
    c.lens[2] = gu_range(rng, 300, 700);
    c.window = idx % 6 == 1 ? gu_range(rng, 200, 900) : 0;
    run_case(rng, &c);
}

/*
 * The wide-group set: every group size of wide_groups on 1 and 2 KV heads, crossed with every
 * dtype pair (the plain kernel for f32 queries, the tensor-core one for the rest) and head
 * dims 64, 128 and 256 (rotating), on short contexts, then one long context per group size
 * and head dim that the plan splits (the reduce merges the sub-groups' partials). Options and
 * forms rotate with the case index; quick keeps a third of the short cases.
 */
static void wide_group_cases(tap_rng *rng, int quick)
{
    const int ngroups = (int) (sizeof wide_groups / sizeof wide_groups[0]);
    for (int gi = 0; gi < ngroups; gi++)
        for (int pi = 0; pi < 6; pi++) {
            if (quick && (gi + pi) % 3 != 0)
                continue;
            const int k = gi * 6 + pi;
            dcase c = base_case(rng, pi, wide_dims[k % 3], k % 3, 100 + k);
            c.G = wide_groups[gi];
            c.H = 1 + (gi + pi) % 2;
            c.fused = pi != 2 && pi != 5 && k % 4 == 1;    /* the tensor-core pairs only */
            run_case(rng, &c);
        }
    for (int gi = 0; gi < ngroups; gi++)
        for (int di = 0; di < 3; di++) {
            if (quick && di != gi % 3)
                continue;
            const int pi = (gi + di) % 6, k = gi * 3 + di;
            dcase c = base_case(rng, pi, wide_dims[di], k % 3, 200 + k);
            c.G = wide_groups[gi];
            c.H = 1 + k % 2;
            c.L = 1;
            c.mixed = 0;
            int32_t len = LONG_BUDGET / (c.G * c.H * c.D);
            if (len > 3000)
                len = 3000;
            if (len < 700)
                len = 700;
            c.lens[0] = len - gu_range(rng, 0, 40);
            c.lens[1] = gu_range(rng, 1, 40);
            c.lens[2] = gu_range(rng, 300, 700);
            c.window = k % 5 == 1 ? gu_range(rng, 200, 600) : 0;
            run_case(rng, &c);
        }
}

/*
 * The tensor-core kernel's two n-tiles (sub-groups of 16 heads): groups of 9 to 71 heads whose
 * sub-groups are whole or not (9 and 12 stay in sub-groups of 8; 24: 16 + 8; 48: 3 x 16; 71:
 * 4 x 16 + 7), on every tensor-core pair and every head dim (rotating; fp8 at 128 and 256 keeps
 * sub-groups of 8), the options, forms and the fused append rotating with the case index, every
 * third case on a context long enough to split. Quick runs keep them all.
 */
static void ntile_cases(tap_rng *rng)
{
    static const int32_t ngroups[] = { 9, 12, 24, 48, 71 };
    static const int mma_pairs[4] = { 0, 1, 3, 4 };
    for (int gi = 0; gi < 5; gi++)
        for (int k = 0; k < 4; k++) {
            const int idx = gi * 4 + k;
            dcase c = base_case(rng, mma_pairs[k], (gi + k) % 5, idx % 3, 300 + idx);
            c.G = ngroups[gi];
            c.H = 1 + idx % 2;
            c.fused = idx % 3 == 1;
            if (idx % 3 == 2) {
                c.L = 1;
                c.mixed = 0;
                int32_t len = LONG_BUDGET / (c.G * c.H * c.D);
                c.lens[0] = (len > 2000 ? 2000 : len < 700 ? 700 : len) - gu_range(rng, 0, 40);
            }
            run_case(rng, &c);
        }
}

/* Checks the errors returned for shapes the kernels do not support. */
static void error_cases(void)
{
    void *dummy = gu_alloc(4096);
    int32_t *ints = gu_alloc(64);
    pk_decode_args a = {
        .cache = { .base = dummy, .num_layers = 1, .num_blocks = 1, .num_kv_heads = 2, .head_dim = 128,
                   .block_size = 16, .dtype = PAGED_DTYPE_BF16, .k_scale = 1, .v_scale = 1 },
        .num_seqs = 1, .num_q_heads = 4, .q_dtype = PAGED_DTYPE_BF16, .q = dummy, .out = dummy,
        .block_tables = ints, .bt_stride = 1, .seq_lens = ints, .opts = { .sm_scale = 1 },
    };
    pk_decode_args b = a;
    b.cache.head_dim = 72;
    is_int(PAGED_E_GEOMETRY, pk_cuda_decode(&b, NULL), "decode: head dim 72 is PAGED_E_GEOMETRY");
    b = a;
    b.cache.block_size = 24;
    is_int(PAGED_E_GEOMETRY, pk_cuda_decode(&b, NULL), "decode: block size 24 is PAGED_E_GEOMETRY");
    b = a;
    b.cache.num_kv_heads = 4096;
    b.num_q_heads = 4096 * 136;
    is_int(PAGED_E_GEOMETRY, pk_cuda_decode(&b, NULL),
           "decode: 4096 KV heads of 136 query heads (69632 CTAs a partition) is PAGED_E_GEOMETRY");
    b = a;
    b.num_q_heads = 3;
    is_int(PAGED_E_HEADS, pk_cuda_decode(&b, NULL), "decode: 3 query heads over 2 KV heads is PAGED_E_HEADS");
    b = a;
    b.q_dtype = PAGED_DTYPE_F16;
    is_int(PAGED_E_DTYPE, pk_cuda_decode(&b, NULL), "decode: f16 queries on a bf16 cache is PAGED_E_DTYPE");
    b = a;
    b.new_k = dummy;
    is_int(PAGED_E_INVAL, pk_cuda_decode(&b, NULL), "decode: new keys without new values is PAGED_E_INVAL");
    b.new_v = dummy;
    b.q_seq = (const void *const *) ints;
    b.out_seq = (void *const *) ints;
    is_int(PAGED_E_INVAL, pk_cuda_decode(&b, NULL),
           "decode: side-by-side new rows with per-sequence queries is PAGED_E_INVAL");
    b = a;
    b.cache.dtype = PAGED_DTYPE_F32;
    b.q_dtype = PAGED_DTYPE_F32;
    b.new_k = b.new_v = dummy;
    is_int(PAGED_E_NOTSUP, pk_cuda_decode(&b, NULL), "decode: a fused append on an f32 cache is PAGED_E_NOTSUP");
    b = a;
    b.num_seqs = 0;
    is_int(0, pk_cuda_decode(&b, NULL), "decode: no sequences is a no-op");
    is_int(0, (long long) pk_cuda_decode_workspace(&b), "decode: no sequences need no workspace");
    gu_sync("error cases");
    gu_free(dummy);
    gu_free(ints);
}

/* Runs the error checks, the sweep, the long contexts and the edge cases. */
int main(void)
{
    gu_require_device();
    plan_lazy();
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    const int quick = gu_quick();

    error_cases();

    int idx = 0;
    for (int pi = 0; pi < 6; pi++)
        for (int di = 0; di < 5; di++)
            for (int bi = 0; bi < 3; bi++, idx++) {
                if (quick && bi != (pi + di) % 3)
                    continue;
                dcase c = base_case(&rng, pi, di, bi, idx);
                run_case(&rng, &c);
            }

    for (int pi = 0; pi < 6; pi++)
        for (int di = 0; di < 5; di++, idx++) {
            if (quick && di != pi % 5)
                continue;
            long_case(&rng, pi, di, idx);
        }

    /* Edge cases. */
    dcase c = base_case(&rng, 1, 3, 1, 0);
    c.nseqs = MAXSEQS;                      /* many sequences of length 1 to 3 */
    for (int s = 0; s < c.nseqs; s++)
        c.lens[s] = 1 + s % 3;
    c.alibi = 1;
    run_case(&rng, &c);

    /* Per-sequence layers on both kernels (tensor cores: bf16, fp8 with f16 queries; FMAs:
     * f32, fp8 with f32 queries), with and without per-sequence pointers and splits: the
     * shape of a merged launch of clients that drifted to different layers. */
    static const int mixed_pairs[4] = { 1, 3, 2, 5 };
    for (int k = 0; k < 8; k++) {
        c = base_case(&rng, mixed_pairs[k % 4], k % 2 ? 3 : 0, k % 3, 20 + k);
        c.mixed = 1;
        c.L = 4;
        c.per_seq = k < 4;
        c.nseqs = k % 2 ? 16 : 5;
        for (int s = 0; s < c.nseqs; s++)
            c.lens[s] = k >= 6 && s == 0 ? gu_range(&rng, 1500, 2500) : gu_range(&rng, 1, 400);
        run_case(&rng, &c);
    }

    c = base_case(&rng, 0, 0, 0, 1);
    c.window = 1;                           /* only the last token is visible */
    c.lens[1] = 200;
    run_case(&rng, &c);

    c = base_case(&rng, 2, 2, 2, 2);
    c.window = 5000;                        /* a window wider than every context */
    run_case(&rng, &c);

    c = base_case(&rng, 1, 3, 1, 3);        /* the shape the bandwidth target is set on, shorter */
    c.H = 4;
    c.G = 8;
    c.nseqs = 4;
    for (int s = 0; s < c.nseqs; s++)
        c.lens[s] = 700 + 37 * s;
    c.per_seq = 0;
    run_case(&rng, &c);

    c = base_case(&rng, 4, 3, 1, 4);        /* a split-sized context with no workspace: one partition */
    c.H = 1;
    c.lens[0] = 1500;
    c.no_workspace = 1;
    run_case(&rng, &c);

    c = base_case(&rng, 2, 4, 2, 5);        /* f32, D=256: the largest CTA (512 threads) */
    c.G = 8;
    c.H = 1;
    c.lens[1] = 900;
    c.per_seq = 1;
    run_case(&rng, &c);

    c = base_case(&rng, 3, 1, 0, 6);        /* a sliding window deep inside a split context */
    c.H = 1;
    c.G = 2;
    c.lens[0] = 2100;
    c.window = 333;
    run_case(&rng, &c);

    /* bf16 queries far beyond the f16 range on an fp8 cache (the tensor cores see them as
     * f16 after a power-of-two scaling), then tiny ones; sm_scale keeps the logits as usual. */
    c = base_case(&rng, 4, 3, 1, 8);
    c.H = 2;
    c.G = 4;
    c.lens[0] = 1200;
    c.q_amp = 3e6f;
    run_case(&rng, &c);
    c = base_case(&rng, 4, 0, 2, 9);
    c.G = 8;
    c.q_amp = 1e-3f;
    run_case(&rng, &c);

    /* Every group size on one long bf16 context with 3 to 6 KV heads (CTAs serve up to 4 KV
     * heads: some with idle warps): many partitions, each warp with several chunks. */
    for (int g = 0; g < 4; g++) {
        c = base_case(&rng, 1, 3, 1, 4 * g);
        c.G = groups[g];
        c.H = 3 + g;
        c.nseqs = 2;
        c.lens[0] = 3000 / c.G + 17;
        c.lens[1] = 5 + g;
        c.per_seq = g == 2;
        run_case(&rng, &c);
    }

    /* 24 sequences x 4 KV heads of 700-odd tokens, some very short: a grid of a fraction of
     * a wave, which the plan splits into a few partitions (empty ones for the short). */
    static const int32_t cl[3][3] = { { 1, 3, 2 }, { 4, 0, 4 }, { 0, 4, 8 } };   /* pair, dim, group */
    for (int k = 0; k < 3; k++) {
        c = base_case(&rng, cl[k][0], cl[k][1], 1, 10 + k);
        c.G = cl[k][2];
        c.H = 4;
        c.nseqs = MAXSEQS;
        for (int sq = 0; sq < c.nseqs; sq++)
            c.lens[sq] = sq % 5 == 4 ? gu_range(&rng, 1, 20) : gu_range(&rng, 650, 800);
        c.window = k == 1 ? 300 : 0;
        c.alibi = k == 2;
        c.cap = k == 2;
        c.per_seq = k == 2;
        c.mixed = k != 0;
        if (c.mixed)
            c.L = 2 + k;
        run_case(&rng, &c);
    }

    /* More (sequence, KV head) contexts than an H100 holds CTAs (24 x 32 and 24 x 20), of
     * mixed lengths: grids of several waves. */
    static const int32_t many[2][4] = { { 1, 3, 1, 32 }, { 4, 1, 2, 20 } };   /* pair, dim, group, KV heads */
    for (int k = 0; k < 2; k++) {
        c = base_case(&rng, many[k][0], many[k][1], k, 20 + k);
        c.G = many[k][2];
        c.H = many[k][3];
        c.L = 1;
        c.nseqs = MAXSEQS;
        for (int sq = 0; sq < c.nseqs; sq++)
            c.lens[sq] = sq % 7 == 3 ? gu_range(&rng, 1, 16) : gu_range(&rng, 40, 400);
        c.window = k == 1 ? 200 : 0;
        c.alibi = k == 1;
        c.per_seq = k == 0;
        c.mixed = 0;
        run_case(&rng, &c);
    }
    /* Long contexts in a grid under a wave (16 sequences x 8 or 4 KV heads of ~4200 and ~8200
     * tokens, one of them short, D 128 fp8 and bf16): on an H100 (four CTAs per SM with the
     * small rings: 528) the plan splits them into one wave of the small rings, four and eight
     * partitions of at least 1024 tokens. */
    /* pair, dim, group, KV heads, length */
    static const int32_t wide[2][5] = { { 3, 3, 4, 8, 4200 }, { 1, 3, 4, 4, 8200 } };
    for (int k = 0; k < 2; k++) {
        if (quick && k == 1)
            continue;
        c = base_case(&rng, wide[k][0], wide[k][1], 1, 30 + k);
        c.G = wide[k][2];
        c.H = wide[k][3];
        c.L = 1;
        c.nseqs = 16;
        for (int sq = 0; sq < c.nseqs; sq++)
            c.lens[sq] = sq == 5 ? gu_range(&rng, 1, 50) : wide[k][4] - gu_range(&rng, 0, 60);
        c.window = 0;
        c.alibi = 0;
        c.cap = 0;
        c.per_seq = k;
        c.mixed = 0;
        run_case(&rng, &c);
    }
    /* The fused append (the tensor-core pairs): every head dim, per-sequence rows or side by
     * side, per-sequence layers, windows, ALiBi, and long contexts whose newest token lies in
     * the last of several partitions, or in a block of its own. */
    static const int mma_pairs[4] = { 0, 1, 3, 4 };
    for (int k = 0; k < 20; k++) {
        if (quick && k % 2)
            continue;
        c = base_case(&rng, mma_pairs[k % 4], k % 5, k % 3, 40 + k);
        c.fused = 1;
        c.per_seq = k % 2;
        c.mixed = k % 3 == 2;
        if (c.mixed && c.L == 1)
            c.L = 3;
        if (k >= 16) {
            c.H = 2;
            c.nseqs = 4;
            c.lens[0] = gu_range(&rng, 1500, 2500);
            c.lens[1] = c.B * gu_range(&rng, 40, 80) + 1;   /* the newest token opens a block */
            c.lens[2] = gu_range(&rng, 1, 20);
            c.lens[3] = gu_range(&rng, 600, 1200);
        }
        run_case(&rng, &c);
    }
    /* Grids of 72 to 120 CTAs over short contexts, which the plan leaves unsplit (an eighth
     * of a wave to a wave), on every tensor-core pair and head dim, with and without
     * per-sequence rows, layers and the fused append. */
    for (int k = 0; k < 10; k++) {
        if (quick && k % 2)
            continue;
        c = base_case(&rng, mma_pairs[k % 4], k % 5, k % 3, 60 + k);
        c.H = 3 + k % 3;
        c.nseqs = MAXSEQS;
        c.G = k % 2 ? 4 : 8;
        for (int sq = 0; sq < c.nseqs; sq++)
            c.lens[sq] = gu_range(&rng, 1, 600);
        c.window = 0;
        c.fused = k % 3 == 0;
        c.per_seq = k % 2;
        c.mixed = k % 4 == 1;
        if (c.mixed && c.L == 1)
            c.L = 3;
        run_case(&rng, &c);
    }
    wide_group_cases(&rng, quick);
    ntile_cases(&rng);
    ok(fused_cases > 0 && fused_cache_same == fused_cases,
       "decode, fused append: the cache holds afterwards exactly what APPEND's reference writes (%d of %d cases)",
       fused_cache_same, fused_cases);
    ok(meta_cases >= 10 && meta_same == meta_cases,
       "decode with the metadata in the kernel's parameters (the device copy wrong): %d of %d launches match "
       "the reference (%d declined)", meta_same, meta_cases, meta_declined);
    ok(meta_declined > 0 && meta_declined_ran == 0,
       "decode: every launch pk_cuda_decode_meta_inline declined was refused while it carried metadata "
       "(%d of %d ran)", meta_declined_ran, meta_declined);
    ok(plan_cases > 0 && plan_wrong == 0,
       "decode: the plan query agrees with the workspace and the grid (%d of %d cases wrong)", plan_wrong,
       plan_cases);
    ok(ws_pointer_dependent == 0 && ws_split > 0,
       "decode: the workspace query reads only the shapes (%d of %d cases differ without pointers; %d split)",
       ws_pointer_dependent, ws_cases, ws_split);
    return 0;
}
