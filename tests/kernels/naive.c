/* naive.c: test-side helpers for the kernel tests: stored values, random pools, a naive attention. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tests/kernels/naive.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/dtype.h"

/* Returns +-mag for the sign bit. */
static double signed_value(int negative, double mag)
{
    return negative ? -mag : mag;
}

/* Returns 2^e for -1022 <= e <= 1023, built from its bits (quicker than ldexp). */
static double pow2(int e)
{
    uint64_t bits = (uint64_t) (e + 1023) << 52;
    double x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* Decodes stored bits field by field. */
double nv_value(const void *p, size_t i, int32_t dtype)
{
    switch (dtype) {
    case PAGED_DTYPE_F32:
        return ((const float *) p)[i];
    case PAGED_DTYPE_F16: {
        unsigned h = ((const uint16_t *) p)[i];
        unsigned e = (h >> 10) & 0x1f, m = h & 0x3ff;
        if (e == 0x1f)
            return m != 0 ? NAN : signed_value(h >> 15, INFINITY);
        if (e == 0)
            return signed_value(h >> 15, m * pow2(-24));
        return signed_value(h >> 15, (1024 + m) * pow2((int) e - 25));
    }
    case PAGED_DTYPE_BF16: {
        unsigned b = ((const uint16_t *) p)[i];
        unsigned e = (b >> 7) & 0xff, m = b & 0x7f;
        if (e == 0xff)
            return m != 0 ? NAN : signed_value(b >> 15, INFINITY);
        if (e == 0)
            return signed_value(b >> 15, m * pow2(-133));
        return signed_value(b >> 15, (128 + m) * pow2((int) e - 134));
    }
    case PAGED_DTYPE_FP8_E4M3: {
        unsigned q = ((const uint8_t *) p)[i];
        unsigned e = (q >> 3) & 0xf, m = q & 0x7;
        if (e == 0xf && m == 0x7)
            return NAN;
        if (e == 0)
            return signed_value(q >> 7, m * pow2(-9));
        return signed_value(q >> 7, (8 + m) * pow2((int) e - 10));
    }
    default:
        return NAN;
    }
}

/* Computes the offset from the layout pool[layer][kv][block][head][token][dim]. */
size_t nv_offset(const pk_cache *c, int32_t layer, int32_t kv, int32_t block, int32_t head,
                 int32_t token)
{
    size_t token_stride = (size_t) c->head_dim;
    size_t head_stride = token_stride * (size_t) c->block_size;
    size_t block_stride = head_stride * (size_t) c->num_kv_heads;
    size_t kv_stride = block_stride * (size_t) c->num_blocks;
    size_t layer_stride = 2 * kv_stride;
    return (size_t) layer * layer_stride + (size_t) kv * kv_stride + (size_t) block * block_stride
           + (size_t) head * head_stride + (size_t) token * token_stride;
}

/* Counts a pool's elements. */
size_t nv_pool_elems(const pk_cache *c)
{
    return (size_t) c->num_layers * 2 * (size_t) c->num_blocks * (size_t) c->num_kv_heads
           * (size_t) c->block_size * (size_t) c->head_dim;
}

/* Writes the dtype's quiet NaN pattern into every element. */
void nv_poison(void *p, size_t n, int32_t dtype)
{
    switch (dtype) {
    case PAGED_DTYPE_F32:
        for (size_t i = 0; i < n; i++)
            ((float *) p)[i] = NAN;
        break;
    case PAGED_DTYPE_F16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *) p)[i] = 0x7e00;
        break;
    case PAGED_DTYPE_BF16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *) p)[i] = 0x7fc0;
        break;
    case PAGED_DTYPE_FP8_E4M3:
        memset(p, 0x7f, n);
        break;
    default:
        break;
    }
}

/* Stores one uniform random value. */
void nv_random(tap_rng *rng, void *p, size_t i, int32_t dtype, float scale)
{
    float x = (float) tap_rng_uniform(rng, -1.0, 1.0);
    if (dtype == PAGED_DTYPE_FP8_E4M3)
        x /= scale;
    pk_store(p, i, dtype, x);
}

/* Shuffles 0 .. n-1 (Fisher-Yates). */
int32_t *nv_permutation(tap_rng *rng, int32_t n)
{
    int32_t *perm = bmalloc((size_t) n * sizeof *perm);
    for (int32_t i = 0; i < n; i++)
        perm[i] = i;
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t j = (int32_t) tap_rng_below(rng, (uint64_t) i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    return perm;
}

/* Returns n random layers in [0, range), the first two different when there are two and the
 * range allows (a merged launch over several layers); bmalloc'd. */
int32_t *nv_random_layers(tap_rng *rng, int n, int32_t range)
{
    int32_t *l = bmalloc((size_t) (n > 0 ? n : 1) * sizeof *l);
    for (int i = 0; i < n; i++)
        l[i] = (int32_t) tap_rng_below(rng, (uint64_t) range);
    if (n > 1 && l[1] == l[0])
        l[1] = (l[0] + 1) % range;
    return l;
}

/* Deals out a shuffled pool to the sequences. */
int32_t *nv_block_tables(tap_rng *rng, int nseqs, const int32_t *lens, int32_t block_size,
                         int32_t num_blocks, int32_t bt_stride)
{
    int32_t *perm = nv_permutation(rng, num_blocks);
    int32_t *tables = bmalloc((size_t) (nseqs > 0 ? nseqs : 1) * (size_t) (bt_stride > 0 ? bt_stride : 1)
                              * sizeof *tables);
    int32_t next = 0;
    for (int s = 0; s < nseqs; s++) {
        int32_t used = (lens[s] + block_size - 1) / block_size;
        if (used > bt_stride)
            bail("nv_block_tables: %d blocks do not fit a table row of %d", (int) used, (int) bt_stride);
        for (int32_t b = 0; b < bt_stride; b++)
            tables[(size_t) s * (size_t) bt_stride + (size_t) b] = b < used ? perm[next++] : -1;
        if (next > num_blocks)
            bail("nv_block_tables: pool of %d blocks too small", (int) num_blocks);
    }
    free(perm);
    return tables;
}

/* Writes fresh random keys and values into a sequence's first len tokens. */
void nv_fill_seq(tap_rng *rng, const pk_cache *c, int32_t layer, const int32_t *table,
                 int32_t len)
{
    for (int32_t j = 0; j < len; j++)
        for (int32_t h = 0; h < c->num_kv_heads; h++)
            for (int32_t kv = 0; kv < 2; kv++) {
                size_t at = nv_offset(c, layer, kv, table[j / c->block_size], h, j % c->block_size);
                for (int32_t d = 0; d < c->head_dim; d++)
                    nv_random(rng, c->base, at + (size_t) d, c->dtype, kv == 0 ? c->k_scale : c->v_scale);
            }
}

/* Copies a sequence's keys and values out of their pages. */
void nv_gather(const pk_cache *c, int32_t layer, const int32_t *table, int32_t len, int32_t h,
               double *K, double *V)
{
    int fp8 = c->dtype == PAGED_DTYPE_FP8_E4M3;
    for (int32_t j = 0; j < len; j++) {
        size_t k = nv_offset(c, layer, 0, table[j / c->block_size], h, j % c->block_size);
        size_t v = nv_offset(c, layer, 1, table[j / c->block_size], h, j % c->block_size);
        for (int32_t d = 0; d < c->head_dim; d++) {
            K[(size_t) j * (size_t) c->head_dim + (size_t) d] =
                nv_value(c->base, k + (size_t) d, c->dtype) * (fp8 ? c->k_scale : 1.0);
            V[(size_t) j * (size_t) c->head_dim + (size_t) d] =
                nv_value(c->base, v + (size_t) d, c->dtype) * (fp8 ? c->v_scale : 1.0);
        }
    }
}

/* Attention written out: masks, soft cap and bias per key, then a plain softmax. */
void nv_attend(const double *q, int32_t q_head, int32_t pos, const double *K, const double *V,
               int32_t len, int32_t D, const pk_attn_opts *o, double *out)
{
    double *logit = bmalloc((size_t) len * sizeof *logit);
    int *seen = bmalloc((size_t) len * sizeof *seen);
    double max = -INFINITY;
    for (int32_t j = 0; j < len; j++) {
        seen[j] = j <= pos && !(o->window > 0 && j <= pos - o->window);
        if (!seen[j])
            continue;
        double x = 0.0;
        for (int32_t d = 0; d < D; d++)
            x += q[d] * K[(size_t) j * (size_t) D + (size_t) d];
        x *= o->sm_scale;
        if (o->soft_cap > 0)
            x = o->soft_cap * tanh(x / o->soft_cap);
        if (o->alibi_slopes != NULL)
            x += o->alibi_slopes[q_head] * (double) (j - pos);
        logit[j] = x;
        max = x > max ? x : max;
    }
    double total = 0.0;
    for (int32_t d = 0; d < D; d++)
        out[d] = 0.0;
    for (int32_t j = 0; j < len; j++) {
        if (!seen[j])
            continue;
        double w = exp(logit[j] - max);
        total += w;
        for (int32_t d = 0; d < D; d++)
            out[d] += w * V[(size_t) j * (size_t) D + (size_t) d];
    }
    for (int32_t d = 0; d < D; d++)
        out[d] /= total;
    free(logit);
    free(seen);
}

/* Returns one unit in the last place of x in a type with mbits stored mantissa bits and
 * the given smallest normal exponent. */
static double ulp_of(double x, int mbits, int emin)
{
    int e;
    frexp(fabs(x), &e);            /* |x| in [2^(e-1), 2^e) */
    e -= 1;
    if (e < emin)
        e = emin;
    return ldexp(1.0, e - mbits);
}

/* Compares an output tensor with its expected values. */
int nv_close(const void *out, int32_t dtype, const double *want, size_t rows, int32_t D,
             const char *what)
{
    double worst = 0.0;
    size_t worst_row = 0, worst_d = 0;
    for (size_t r = 0; r < rows; r++) {
        double err2 = 0.0, norm2 = 0.0;
        for (int32_t d = 0; d < D; d++) {
            size_t i = r * (size_t) D + (size_t) d;
            double got = nv_value(out, i, dtype), w = want[i];
            if (!isfinite(got)) {
                diag("%s: row %zu dim %d is %g (expected %.9g)", what, r, (int) d, got, w);
                return 0;
            }
            double bad;
            if (dtype == PAGED_DTYPE_F32) {
                err2 += (got - w) * (got - w);
                norm2 += w * w;
                continue;
            }
            if (dtype == PAGED_DTYPE_F16)
                bad = fabs(got - w) / (2 * ulp_of(w, 10, -14) + 1e-6);
            else
                bad = fabs(got - w) / (2 * ulp_of(w, 7, -126) + 1e-6);
            if (bad > worst) {
                worst = bad;
                worst_row = r;
                worst_d = (size_t) d;
            }
        }
        if (dtype == PAGED_DTYPE_F32) {
            double bad = sqrt(err2) / (1e-5 * fmax(sqrt(norm2), 1e-3));
            if (bad > worst) {
                worst = bad;
                worst_row = r;
                worst_d = 0;
            }
        }
    }
    if (worst > 1.0) {
        size_t i = worst_row * (size_t) D + worst_d;
        diag("%s: row %zu dim %zu: got %.9g, expected %.9g (%.3g x the tolerance)", what, worst_row,
             worst_d, nv_value(out, i, dtype), want[i], worst);
        return 0;
    }
    return 1;
}

/* Cuts [0, items) at random points, then shuffles the pieces. */
size_t nv_split(tap_rng *rng, size_t items, size_t *begin, size_t *end)
{
    size_t n = 0, at = 0;
    size_t most = items / 3 + 1;
    while (at < items) {
        size_t len = 1 + (size_t) tap_rng_below(rng, most);
        if (len > items - at)
            len = items - at;
        begin[n] = at;
        end[n] = at + len;
        at += len;
        n++;
    }
    if (tap_rng_below(rng, 2) == 0) {    /* an empty chunk must do nothing */
        begin[n] = end[n] = (size_t) tap_rng_below(rng, items + 1);
        n++;
    }
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t) tap_rng_below(rng, i), b = begin[i - 1], e = end[i - 1];
        begin[i - 1] = begin[j];
        end[i - 1] = end[j];
        begin[j] = b;
        end[j] = e;
    }
    return n;
}

/* Names a dtype. */
const char *nv_dtype_name(int32_t dtype)
{
    switch (dtype) {
    case PAGED_DTYPE_F32: return "f32";
    case PAGED_DTYPE_F16: return "f16";
    case PAGED_DTYPE_BF16: return "bf16";
    case PAGED_DTYPE_FP8_E4M3: return "fp8";
    default: return "?";
    }
}

/* Returns a poisoned random pool; see naive.h. */
pk_cache nv_random_pool(tap_rng *rng, int32_t L, int32_t used, int32_t H, int32_t D, int32_t B, int32_t dtype)
{
    const int fp8 = dtype == PAGED_DTYPE_FP8_E4M3;
    pk_cache c = {
        .num_layers = L,
        .num_blocks = used + (int32_t) tap_rng_below(rng, 8),
        .num_kv_heads = H,
        .head_dim = D,
        .block_size = B,
        .dtype = dtype,
        .k_scale = fp8 ? (float) tap_rng_uniform(rng, 0.003, 0.02) : 1.0f,
        .v_scale = fp8 ? (float) tap_rng_uniform(rng, 0.003, 0.02) : 1.0f,
    };
    c.base = bmalloc(pk_cache_bytes(&c));
    nv_poison(c.base, nv_pool_elems(&c), dtype);
    return c;
}

/* Returns case c of the covering set; see naive.h. */
nv_covering nv_covering_case(int c)
{
    static const int32_t dims[] = { 64, 80, 96, 128, 256 };
    static const int32_t block_sizes[] = { 8, 16, 32 };
    static const int32_t groups[] = { 1, 2, 4, 8 };
    static const int32_t dtypes[] = { PAGED_DTYPE_F32, PAGED_DTYPE_F16, PAGED_DTYPE_BF16, PAGED_DTYPE_FP8_E4M3 };
    static const int32_t fp8_queries[] = { PAGED_DTYPE_F16, PAGED_DTYPE_BF16, PAGED_DTYPE_F32 };
    nv_covering k = { .D = dims[c % 5], .B = block_sizes[c % 3], .G = groups[c % 4], .dtype = dtypes[(c / 4) % 4],
                      .options = (c / 3) % 8 };
    k.q_dtype = k.dtype == PAGED_DTYPE_FP8_E4M3 ? fp8_queries[(c / 16) % 3] : k.dtype;
    return k;
}

/* Returns a random context length; see naive.h. */
int32_t nv_pick_len(tap_rng *rng, int32_t block)
{
    switch (tap_rng_below(rng, 6)) {
    case 0:
        return 1;
    case 1:
        return block * (int32_t) (1 + tap_rng_below(rng, 8)) + (int32_t) tap_rng_below(rng, 3) - 1;
    case 2:
        return 2000;
    default:
        return (int32_t) exp(tap_rng_uniform(rng, 0.0, log(2000.0)));
    }
}

/* Returns random attention options; see naive.h. */
pk_attn_opts nv_random_opts(tap_rng *rng, int options, int32_t D, int32_t Hq, int32_t max_len, float **slopes)
{
    pk_attn_opts o = { .sm_scale = (float) (exp(tap_rng_uniform(rng, log(0.5), log(12.0))) / sqrt(D)) };
    *slopes = NULL;
    if (options & 1)
        o.soft_cap = (float) tap_rng_uniform(rng, 1.0, 10.0);
    if (options & 2) {
        *slopes = bmalloc((size_t) Hq * sizeof **slopes);
        for (int32_t h = 0; h < Hq; h++)
            (*slopes)[h] = (float) exp(tap_rng_uniform(rng, log(1.0 / 1024), log(0.25)));
        o.alibi_slopes = *slopes;
    }
    if (options & 4)
        o.window = 1 + (int32_t) tap_rng_below(rng, (uint64_t) max_len + 16);
    return o;
}

/* Starts a case's label; see naive.h. */
void nv_case_prefix(char *buf, size_t size, const char *op, int32_t dtype, int32_t q_dtype)
{
    if (dtype == PAGED_DTYPE_FP8_E4M3)
        snprintf(buf, size, "%s fp8 (q %s)", op, nv_dtype_name(q_dtype));
    else
        snprintf(buf, size, "%s %s", op, nv_dtype_name(dtype));
}

/* Labels the options set; see naive.h. */
void nv_opts_label(char *buf, size_t size, const pk_attn_opts *o)
{
    snprintf(buf, size, "%s%s%s%s", o->soft_cap > 0 ? " cap" : "", o->alibi_slopes ? " alibi" : "",
             o->window > 0 ? " window" : "",
             o->soft_cap > 0 || o->alibi_slopes || o->window > 0 ? "" : " plain");
}
