/* util.c: paged-bench's small shared helpers: dying loudly, clocks, medians, quantiles, random data. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cpu/dtype.h"
#include "kernels/kernels.h"
#include "tools/bench/bench.h"

/* Prints the message and exits 1; never returns. */
void bench_die(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("paged-bench: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* Returns malloc'd memory or dies. */
void *bench_alloc(size_t n, const char *what)
{
    void *p = malloc(n > 0 ? n : 1);
    if (p == NULL)
        bench_die("out of memory: %zu bytes for %s", n, what);
    return p;
}

/* Orders doubles for qsort; returns -1, 0 or 1. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

/* Returns the median (sorting v). */
double bench_median(double *v, size_t n)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Orders int64 values for qsort; returns -1, 0 or 1. */
static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return (x > y) - (x < y);
}

/* Sorts int64 samples. */
void bench_sort_i64(int64_t *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof *v, cmp_i64);
}

/* Returns the nearest-rank quantile of sorted samples. */
int64_t bench_quantile(const int64_t *sorted, size_t n, double p)
{
    if (n == 0)
        return 0;
    double rank = ceil(p * (double) n);
    size_t i = rank < 1.0 ? 0 : (size_t) rank - 1;
    return sorted[i < n ? i : n - 1];
}

/* Fills elements [begin, end) with seeded uniform values; returns nothing. */
void bench_fill_host(void *p, size_t begin, size_t end, int32_t dtype, float amp, float scale,
                     uint64_t seed)
{
    float inv = dtype == PAGED_DTYPE_FP8_E4M3 ? 1.0f / scale : 1.0f;
    for (size_t i = begin; i < end; i++)
        pk_store(p, i, dtype, amp * bench_uniform(seed, i) * inv);
}

/* Returns a random permutation of 0..n-1 (Fisher-Yates over the seeded hash). */
int32_t *bench_permutation(int32_t n, uint64_t seed)
{
    int32_t *perm = bench_alloc((size_t) (n > 0 ? n : 1) * sizeof *perm, "a permutation");
    for (int32_t i = 0; i < n; i++)
        perm[i] = i;
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t j = (int32_t) (bench_mix64(seed ^ bench_mix64((uint64_t) i)) % (uint64_t) (i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    return perm;
}

/* Returns the number of online CPUs. */
unsigned bench_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned) n : 1u;
}

/* The --deps words, by enum bench_deps. */
static const char *const deps_names[] = { NULL, "host", "device", "host-stream" };

/* Returns a chaining's --deps word; see bench.h. */
const char *bench_deps_name(enum bench_deps d)
{
    return (unsigned) d < sizeof deps_names / sizeof deps_names[0] ? deps_names[d] : NULL;
}

/* Parses a --deps word; see bench.h. */
enum bench_deps bench_deps_parse(const char *word)
{
    for (int d = BENCH_DEPS_HOST; d <= BENCH_DEPS_HOST_STREAM; d++)
        if (strcmp(word, deps_names[d]) == 0)
            return (enum bench_deps) d;
    return BENCH_DEPS_NONE;
}
