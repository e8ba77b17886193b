/* fuzz.h: what the libFuzzer harnesses and their replay driver share. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_FUZZ_FUZZ_H
#define PAGED_FUZZ_FUZZ_H

/*
 * Each harness (fuzz-control.c, fuzz-validate.c) defines the two libFuzzer entry points
 * below. `make fuzz` links a harness with clang's libFuzzer; `make check` links it with
 * replay.c instead, a TAP driver that feeds it the committed seed corpus, so the harnesses
 * build with any compiler and their code paths run in every check.
 *
 * A harness checks invariants of its own on top of what the sanitizers see; a broken one
 * is reported by fuzz_fail, which aborts so that libFuzzer keeps the input as a crash.
 */

#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry points: one-time setup, and one input (returns 0). */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ASan's manual poisoning where the harness is built with AddressSanitizer (clang or gcc),
 * nothing elsewhere. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(FUZZ_ASAN)
#define FUZZ_ASAN 1
#endif

#ifdef FUZZ_ASAN
#include <sanitizer/asan_interface.h>
#define FUZZ_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define FUZZ_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define FUZZ_POISON(p, n) ((void) (p), (void) (n))
#define FUZZ_UNPOISON(p, n) ((void) (p), (void) (n))
#endif

/* Reports a broken invariant (where, the condition, and a formatted explanation) on the
 * standard error the harness started with, then aborts. Never returns. */
_Noreturn void fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define FUZZ_CHECK(cond, ...)                                                                 \
    do {                                                                                      \
        if (!(cond))                                                                          \
            fuzz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                                \
    } while (0)

/* Sets the daemon's log level from $PAGED_FUZZ_LOG (error, warning, info, debug; error when
 * unset, so a fuzzing run is not slowed by log lines). Returns nothing. */
void fuzz_log_init(void);

/* The descriptors open in [0, FUZZ_FD_WINDOW), one bit each, for leak checks. */
#define FUZZ_FD_WINDOW 128
struct fuzz_fds {
    uint64_t open[FUZZ_FD_WINDOW / 64];
};

/* Records which descriptors are open now (one poll call); returns nothing. */
void fuzz_fds_snapshot(struct fuzz_fds *s);

/* Fails (fuzz_fail) naming the first descriptor open now that was not open in before,
 * with what /proc/self/fd says it is. Returns nothing. */
void fuzz_fds_check(const struct fuzz_fds *before, const char *when);

#endif
