/* basic.c: a small TAP library for paged's C tests. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tests/tap/basic.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned long tap_planned;
static unsigned long tap_run;
static unsigned long tap_failed;
static int tap_lazy;
static pid_t tap_pid;

/* Prints the lazy plan and a summary at exit; only the planning process does this. */
static void tap_finish(void)
{
    if (tap_pid != getpid())
        return;
    if (tap_lazy)
        printf("1..%lu\n", tap_run);
    else if (tap_planned != tap_run)
        printf("# Looks like you planned %lu tests but ran %lu.\n", tap_planned, tap_run);
    if (tap_failed > 0)
        printf("# Looks like you failed %lu of %lu tests.\n", tap_failed, tap_run);
    fflush(stdout);
}

/* Sets up output buffering and the exit hook shared by plan and plan_lazy. */
static void tap_start(void)
{
    setvbuf(stdout, NULL, _IOLBF, BUFSIZ);
    tap_pid = getpid();
    atexit(tap_finish);
}

/* Prints the plan "1..N". */
void plan(unsigned long count)
{
    tap_start();
    tap_planned = count;
    printf("1..%lu\n", count);
}

/* Defers the plan to exit time. */
void plan_lazy(void)
{
    tap_start();
    tap_lazy = 1;
}

/* Prints "1..0 # SKIP reason" and exits successfully. */
void skip_all(const char *fmt, ...)
{
    va_list ap;
    printf("1..0 # SKIP ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    exit(0);
}

/* Prints the result line for one test and counts it; returns success. */
static int tap_report(int success, const char *fmt, va_list ap)
{
    tap_run++;
    if (!success)
        tap_failed++;
    printf("%sok %lu", success ? "" : "not ", tap_run);
    if (fmt != NULL && *fmt != '\0') {
        printf(" - ");
        vprintf(fmt, ap);
    }
    printf("\n");
    fflush(stdout);
    return success;
}

/* Reports one test. */
int ok(int success, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tap_report(success, fmt, ap);
    va_end(ap);
    return success;
}

/* Reports integer equality. */
int is_int(long long wanted, long long seen, const char *fmt, ...)
{
    va_list ap;
    int success = wanted == seen;
    va_start(ap, fmt);
    tap_report(success, fmt, ap);
    va_end(ap);
    if (!success)
        diag("wanted: %lld, seen: %lld", wanted, seen);
    return success;
}

/* Reports closeness of two doubles; NaN never passes. */
int is_double(double wanted, double seen, double tolerance, const char *fmt, ...)
{
    va_list ap;
    int success = !isnan(wanted) && !isnan(seen) && fabs(wanted - seen) <= tolerance;
    va_start(ap, fmt);
    tap_report(success, fmt, ap);
    va_end(ap);
    if (!success)
        diag("wanted: %.9g, seen: %.9g, tolerance: %.3g", wanted, seen, tolerance);
    return success;
}

/* Reports string equality. */
int is_string(const char *wanted, const char *seen, const char *fmt, ...)
{
    va_list ap;
    int success = (wanted == NULL || seen == NULL) ? wanted == seen : strcmp(wanted, seen) == 0;
    va_start(ap, fmt);
    tap_report(success, fmt, ap);
    va_end(ap);
    if (!success)
        diag("wanted: \"%s\", seen: \"%s\"", wanted ? wanted : "(null)", seen ? seen : "(null)");
    return success;
}

/* Reports byte-range equality, naming the first differing offset. */
int is_blob(const void *wanted, const void *seen, size_t len, const char *fmt, ...)
{
    va_list ap;
    const unsigned char *w = wanted, *s = seen;
    size_t i = 0;
    while (i < len && w[i] == s[i])
        i++;
    va_start(ap, fmt);
    tap_report(i == len, fmt, ap);
    va_end(ap);
    if (i != len)
        diag("first difference at byte %zu: wanted 0x%02x, seen 0x%02x", i, w[i], s[i]);
    return i == len;
}

/* Reports count skipped tests. */
void skip(unsigned long count, const char *reason, ...)
{
    va_list ap;
    char buf[512];
    va_start(ap, reason);
    vsnprintf(buf, sizeof buf, reason, ap);
    va_end(ap);
    for (unsigned long i = 0; i < count; i++) {
        tap_run++;
        printf("ok %lu # skip %s\n", tap_run, buf);
    }
    fflush(stdout);
}

/* Prints a diagnostic line and returns 1. */
int diag(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    return 1;
}

/* Bails out of the test program. */
void bail(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    printf("Bail out! ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    _exit(255);
}

/* Bails out with the errno text appended. */
void sysbail(const char *fmt, ...)
{
    va_list ap;
    int err = errno;
    fflush(stdout);
    printf("Bail out! ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf(": %s\n", strerror(err));
    fflush(stdout);
    _exit(255);
}

/* Allocates or bails. */
void *bmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (p == NULL)
        sysbail("failed to allocate %zu bytes", size);
    return p;
}

/* Allocates zeroed memory or bails. */
void *bcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (p == NULL)
        sysbail("failed to allocate %zu x %zu bytes", count, size);
    return p;
}

/* Reallocates or bails. */
void *brealloc(void *p, size_t size)
{
    void *q = realloc(p, size ? size : 1);
    if (q == NULL)
        sysbail("failed to reallocate to %zu bytes", size);
    return q;
}

/* Duplicates a string or bails. */
char *bstrdup(const char *s)
{
    char *p = strdup(s);
    if (p == NULL)
        sysbail("failed to duplicate a string");
    return p;
}

/* Reads the monotonic clock; see basic.h. */
int64_t tap_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Resolves a symbol or bails; see basic.h. */
void bdlsym(void *lib, const char *name, void *slot)
{
    void *p = dlsym(lib, name);
    if (p == NULL)
        bail("the library lacks %s", name);
    /* A data pointer to a function pointer: POSIX guarantees dlsym's result converts. */
    memcpy(slot, &p, sizeof p);
}

/* Flushes stdio and forks or bails. */
pid_t bfork(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        sysbail("fork");
    return pid;
}

/* Returns the failure count. */
unsigned long tap_failures(void)
{
    return tap_failed;
}

/* Mixes a 64-bit value (splitmix64); used to seed the generator state. */
static uint64_t tap_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Seeds the generator. */
void tap_rng_seed(tap_rng *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        rng->s[i] = tap_splitmix(&seed);
}

/* Rotates x left by k bits. */
static inline uint64_t tap_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* Returns the next 64 random bits (xoshiro256**). */
uint64_t tap_rng_u64(tap_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = tap_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = tap_rotl(s[3], 45);
    return result;
}

/* Returns a uniform integer below n by rejection, so there is no modulo bias. */
uint64_t tap_rng_below(tap_rng *rng, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = tap_rng_u64(rng);
    while (x >= limit);
    return x % n;
}

/* Returns a uniform double in [lo, hi). */
double tap_rng_uniform(tap_rng *rng, double lo, double hi)
{
    return lo + (hi - lo) * ((double) (tap_rng_u64(rng) >> 11) * 0x1.0p-53);
}

/* Fills x[0..n) with uniform floats in [lo, hi); see basic.h. */
void tap_rng_fill_uniform(tap_rng *rng, float *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float) tap_rng_uniform(rng, lo, hi);
}

/* Returns the run's seed, from $PAGED_TEST_SEED or the clock, and prints it. */
uint64_t tap_seed(void)
{
    const char *env = getenv("PAGED_TEST_SEED");
    uint64_t seed;
    if (env != NULL && *env != '\0') {
        seed = strtoull(env, NULL, 0);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = (uint64_t) ts.tv_sec * 1000000007ull ^ (uint64_t) ts.tv_nsec ^ ((uint64_t) getpid() << 32);
    }
    diag("seed %" PRIu64 " (replay with PAGED_TEST_SEED=%" PRIu64 ")", seed, seed);
    return seed;
}
