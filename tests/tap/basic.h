/* basic.h: a small TAP library for paged's C tests. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_TAP_BASIC_H
#define PAGED_TESTS_TAP_BASIC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#if defined(__GNUC__)
#define TAP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define TAP_NORETURN __attribute__((noreturn))
#else
#define TAP_PRINTF(f, a)
#define TAP_NORETURN
#endif

/* Prints the plan "1..N"; at exit, the library reports a wrong count of tests run. */
void plan(unsigned long count);
/* Defers the plan: it is printed at exit from the number of tests run. */
void plan_lazy(void);
/* Skips the whole test program with a reason ("1..0 # SKIP reason") and exits 0. */
TAP_NORETURN void skip_all(const char *fmt, ...) TAP_PRINTF(1, 2);

/* Reports one test: returns success, printing "ok N - message" or "not ok N - message". */
int ok(int success, const char *fmt, ...) TAP_PRINTF(2, 3);
/* Reports whether two integers are equal, printing both as a diagnostic when not. */
int is_int(long long wanted, long long seen, const char *fmt, ...) TAP_PRINTF(3, 4);
/* Reports whether seen is within tolerance of wanted; NaN in either never passes. */
int is_double(double wanted, double seen, double tolerance, const char *fmt, ...) TAP_PRINTF(4, 5);
/* Reports whether two strings are equal (NULL equals only NULL). */
int is_string(const char *wanted, const char *seen, const char *fmt, ...) TAP_PRINTF(3, 4);
/* Reports whether two byte ranges of length len are equal, naming the first difference. */
int is_blob(const void *wanted, const void *seen, size_t len, const char *fmt, ...) TAP_PRINTF(4, 5);
/* Reports count tests as skipped with a reason. */
void skip(unsigned long count, const char *reason, ...) TAP_PRINTF(2, 3);

/* Prints a diagnostic line ("# ..."); returns 1 so it can sit in a condition. */
int diag(const char *fmt, ...) TAP_PRINTF(1, 2);
/* Aborts the test program with "Bail out! reason" and exit status 255. */
TAP_NORETURN void bail(const char *fmt, ...) TAP_PRINTF(1, 2);
/* Like bail, with the text of errno appended. */
TAP_NORETURN void sysbail(const char *fmt, ...) TAP_PRINTF(1, 2);

/* Allocation helpers that bail instead of returning NULL. */
void *bmalloc(size_t size);
void *bcalloc(size_t count, size_t size);
void *brealloc(void *p, size_t size);
char *bstrdup(const char *s);

/* Returns CLOCK_MONOTONIC in nanoseconds: the clock of a test's bounded waits. */
int64_t tap_now_ns(void);

/* Resolves name in the dlopen'd lib into *slot (a function pointer, stored whole), or bails
 * naming what is missing. */
void bdlsym(void *lib, const char *name, void *slot);

/* Flushes every stdio stream (so the child does not print what the parent buffered again)
 * and forks, bailing if fork fails. Returns the child's pid in the parent, 0 in the child. */
pid_t bfork(void);

/* Returns the number of tests reported failing so far. */
unsigned long tap_failures(void);

/* A small, fast, seedable generator for test data (xoshiro256**). */
typedef struct tap_rng {
    uint64_t s[4];
} tap_rng;
/* Seeds rng from seed (any value, zero included). */
void tap_rng_seed(tap_rng *rng, uint64_t seed);
/* Returns the next 64 random bits. */
uint64_t tap_rng_u64(tap_rng *rng);
/* Returns a uniform integer in [0, n); n must be > 0. */
uint64_t tap_rng_below(tap_rng *rng, uint64_t n);
/* Returns a uniform double in [lo, hi). */
double tap_rng_uniform(tap_rng *rng, double lo, double hi);
/* Fills x[0..n) with uniform floats in [lo, hi), drawn in order; returns nothing. */
void tap_rng_fill_uniform(tap_rng *rng, float *x, size_t n, double lo, double hi);
/* Returns the seed for this run: $PAGED_TEST_SEED if set, else one from the clock, printed as a
 * diagnostic so a failure can be replayed. */
uint64_t tap_seed(void);

#endif
