/* cuda-dep-t.c: pk_cuda_dep_wait and pk_cuda_dep_signal: work held behind dependency words, words written after it. */
/* SPDX-License-Identifier: MIT */
/*
 * pk_cuda_dep_wait holds the work queued behind it until every word (device or mapped host
 * memory) reaches its value by the protocol's wrapping comparison, and gives up past its
 * bound; pk_cuda_dep_signal writes its words only once the work before it is done.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/kernels.h"
#include "tests/kernels/gpu_util.h"
#include "tests/tap/basic.h"

/*
 * A held stream is one that has not moved for WATCH_NS while the test watched it: the
 * queued copy behind a gate that let it through would land within microseconds. Every wait
 * for a stream that should move is bounded by MOVE_NS.
 */
#define WATCH_NS 20000000ll
#define MOVE_NS 10000000000ll
#define BIG_BYTES ((size_t) 64 << 20)   /* the work a signal must wait for */

/* Bails naming what when e is not cudaSuccess; returns nothing. */
static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        bail("%s: %s", what, cudaGetErrorString(e));
}

/* n words, each in device memory or in mapped pinned host memory, and their pk_dep_word. */
struct word_set {
    unsigned n;
    uint32_t *dev;                /* device words [n] (those not in host memory unused) */
    volatile uint32_t *host;      /* mapped pinned words [n] */
    uint32_t *host_dev;           /* host's device address */
    int *in_host;
    pk_dep_word *w;
};

/* Makes a set of n words, each in host memory with probability 1/2; returns nothing. */
static void words_make(tap_rng *rng, struct word_set *s, unsigned n)
{
    s->n = n;
    s->dev = gu_alloc(n * sizeof *s->dev);
    void *h = NULL;
    check(cudaHostAlloc(&h, n * sizeof(uint32_t), cudaHostAllocMapped), "cudaHostAlloc");
    s->host = h;
    check(cudaHostGetDevicePointer((void **) &s->host_dev, h, 0), "cudaHostGetDevicePointer");
    s->in_host = bcalloc(n, sizeof *s->in_host);
    s->w = bcalloc(n, sizeof *s->w);
    for (unsigned i = 0; i < n; i++) {
        s->in_host[i] = (int) tap_rng_below(rng, 2);
        s->w[i].addr = s->in_host[i] ? s->host_dev + i : s->dev + i;
    }
}

/* Frees what words_make made; returns nothing. */
static void words_free(struct word_set *s)
{
    gu_free(s->dev);
    check(cudaFreeHost((void *) s->host), "cudaFreeHost");
    free(s->in_host);
    free(s->w);
}

/* Stores v in word i from the host (device words by a synchronous copy); returns nothing. */
static void word_set(struct word_set *s, unsigned i, uint32_t v)
{
    if (s->in_host[i]) {
        __atomic_store_n(&s->host[i], v, __ATOMIC_RELEASE);
        return;
    }
    check(cudaMemcpy(s->dev + i, &v, sizeof v, cudaMemcpyHostToDevice), "setting a device word");
}

/* Returns word i as the host sees it now. */
static uint32_t word_get(struct word_set *s, unsigned i)
{
    if (s->in_host[i])
        return __atomic_load_n(&s->host[i], __ATOMIC_ACQUIRE);
    uint32_t v;
    check(cudaMemcpy(&v, s->dev + i, sizeof v, cudaMemcpyDeviceToHost), "reading a device word");
    return v;
}

/* Returns 1 when stream st stays unfinished and *marker 0 for WATCH_NS, else 0. */
static int held(cudaStream_t st, volatile uint32_t *marker)
{
    for (int64_t end = tap_now_ns() + WATCH_NS; tap_now_ns() < end;) {
        cudaError_t e = cudaStreamQuery(st);
        if (e != cudaErrorNotReady || __atomic_load_n(marker, __ATOMIC_ACQUIRE) != 0) {
            (void) cudaGetLastError();
            return 0;
        }
    }
    return 1;
}

/* Returns 1 once stream st finished without error, 0 if it did not within MOVE_NS. */
static int moves(cudaStream_t st)
{
    for (int64_t end = tap_now_ns() + MOVE_NS; tap_now_ns() < end;) {
        cudaError_t e = cudaStreamQuery(st);
        if (e == cudaSuccess)
            return 1;
        if (e != cudaErrorNotReady)
            bail("the stream failed: %s", cudaGetErrorString(e));
    }
    return 0;
}

/* Returns a random target for a word: near zero a quarter of the time, so that the words
 * short of it wrap below zero. */
static uint32_t random_target(tap_rng *rng)
{
    return tap_rng_below(rng, 4) == 0 ? (uint32_t) tap_rng_below(rng, 8) : (uint32_t) tap_rng_u64(rng);
}

/*
 * The gate over n words, of which some already stand at or past their value (by up to 2^31
 * - 1, wrapping) and the rest short of it (by up to 2^31): the copy queued behind it must
 * not run while any word is short, not even the last, and must run once that one arrives.
 * Returns nothing.
 */
static void gate_case(tap_rng *rng, unsigned n, cudaStream_t st, volatile uint32_t *marker, const uint32_t *one)
{
    struct word_set s;
    words_make(rng, &s, n);
    unsigned *order = bcalloc(n, sizeof *order);
    unsigned nshort = 0;
    for (unsigned i = 0; i < n; i++) {
        s.w[i].value = random_target(rng);
        int is_short = i == 0 || tap_rng_below(rng, 4) != 0;
        uint32_t d = tap_rng_below(rng, 8) == 0 ? 0x80000000u : 1u + (uint32_t) tap_rng_below(rng, 1000);
        word_set(&s, i, is_short ? s.w[i].value - d : s.w[i].value + (d - 1u) % 0x80000000u);
        if (is_short)
            order[nshort++] = i;
    }
    for (unsigned i = nshort; i > 1; i--) {
        unsigned j = (unsigned) tap_rng_below(rng, i), t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    *marker = 0;
    check(cudaDeviceSynchronize(), "setting the words");
    if (pk_cuda_dep_wait(s.w, n, 30000000000ull, st) != 0)
        bail("pk_cuda_dep_wait over %u words refused", n);
    check(cudaMemcpyAsync((void *) marker, one, sizeof *one, cudaMemcpyDeviceToHost, st), "the marker copy");
    ok(held(st, marker), "gate over %u words (%u short): holds the stream", n, nshort);
    for (unsigned k = 0; k + 1 < nshort; k++) {
        unsigned i = order[k];
        word_set(&s, i, s.w[i].value + (uint32_t) tap_rng_below(rng, 3));
    }
    if (nshort > 1)
        ok(held(st, marker), "gate over %u words: still holds with one short of %u", n, nshort);
    unsigned last = order[nshort - 1];
    word_set(&s, last, s.w[last].value);
    ok(moves(st) && *marker == 1, "gate over %u words: lets the copy through once the last arrives", n);
    free(order);
    words_free(&s);
}

/* A gate whose word never comes ends past its bound, and the work behind it runs. Returns
 * nothing. */
static void bound_case(tap_rng *rng, cudaStream_t st, volatile uint32_t *marker, const uint32_t *one)
{
    struct word_set s;
    words_make(rng, &s, 3);
    for (unsigned i = 0; i < 3; i++) {
        s.w[i].value = random_target(rng);
        word_set(&s, i, s.w[i].value - 1u - (uint32_t) tap_rng_below(rng, 100));
    }
    *marker = 0;
    check(cudaDeviceSynchronize(), "setting the words");
    if (pk_cuda_dep_wait(s.w, 3, 2000000ull, st) != 0)
        bail("pk_cuda_dep_wait refused");
    check(cudaMemcpyAsync((void *) marker, one, sizeof *one, cudaMemcpyDeviceToHost, st), "the marker copy");
    ok(moves(st) && *marker == 1, "a gate whose words never come ends past its bound of 2 ms");
    words_free(&s);
}

/*
 * The signal of n words behind a 64 MB copy, itself behind a gate on one word: no word may
 * change while the gate holds; the first host word the host sees written must find the copy
 * complete (read on another stream at once); at the end every word holds its value. after_gate
 * queues the signal straight behind the gate instead (a kernel before it, not a copy). Returns
 * nothing.
 */
static void signal_case(tap_rng *rng, unsigned n, int after_gate, cudaStream_t st, cudaStream_t other,
                        unsigned char *src, unsigned char *dst, const unsigned char *want)
{
    struct word_set g, s;
    words_make(rng, &g, 1);
    words_make(rng, &s, n);
    g.w[0].value = random_target(rng);
    word_set(&g, 0, g.w[0].value - 1u);
    uint32_t *before = bcalloc(n, sizeof *before);
    int any_host = 0;
    for (unsigned i = 0; i < n; i++) {
        s.w[i].value = random_target(rng);
        before[i] = s.w[i].value ^ (1u + (uint32_t) tap_rng_below(rng, 0xffff));
        word_set(&s, i, before[i]);
        any_host |= s.in_host[i];
    }
    check(cudaMemset(dst, 0, BIG_BYTES), "clearing the copy's destination");
    check(cudaDeviceSynchronize(), "setting the words");
    if (pk_cuda_dep_wait(g.w, 1, 30000000000ull, st) != 0)
        bail("pk_cuda_dep_wait refused");
    if (!after_gate)
        check(cudaMemcpyAsync(dst, src, BIG_BYTES, cudaMemcpyDeviceToDevice, st), "the big copy");
    if (pk_cuda_dep_signal(s.w, n, st) != 0)
        bail("pk_cuda_dep_signal over %u words refused", n);
    int still = 1;
    for (int64_t end = tap_now_ns() + WATCH_NS; still && tap_now_ns() < end;)
        for (unsigned i = 0; i < n; i++)
            if (s.in_host[i] && word_get(&s, i) != before[i])
                still = 0;
    for (unsigned i = 0; i < n; i++)
        if (!s.in_host[i] && word_get(&s, i) != before[i])
            still = 0;
    ok(still && cudaStreamQuery(st) == cudaErrorNotReady, "signal of %u words behind %s: none written while held", n,
       after_gate ? "a gate" : "a copy");
    (void) cudaGetLastError();
    word_set(&g, 0, g.w[0].value);
    if (any_host && !after_gate) {
        int seen = 0;
        for (int64_t end = tap_now_ns() + MOVE_NS; !seen && tap_now_ns() < end;)
            for (unsigned i = 0; i < n && !seen; i++)
                seen = s.in_host[i] && word_get(&s, i) == s.w[i].value;
        /* The copy's last megabyte, read now on another stream: written before the word. */
        unsigned char *tail = bmalloc(1u << 20);
        check(cudaMemcpyAsync(tail, dst + BIG_BYTES - (1u << 20), 1u << 20, cudaMemcpyDeviceToHost, other),
              "reading the copy");
        check(cudaStreamSynchronize(other), "reading the copy");
        ok(seen && memcmp(tail, want + BIG_BYTES - (1u << 20), 1u << 20) == 0,
           "signal of %u words: the first word seen finds the copy before it done", n);
        free(tail);
    }
    int all = moves(st);
    for (unsigned i = 0; i < n && all; i++)
        all = word_get(&s, i) == s.w[i].value;
    ok(all, "signal of %u words behind %s: every word holds its value", n, after_gate ? "a gate" : "a copy");
    free(before);
    words_free(&g);
    words_free(&s);
}

/* Runs the gate cases (word counts around a launch's 64, then random ones), the bound case and
 * the signal cases on the device; returns 0 (the TAP output tells the rest). */
int main(void)
{
    gu_require_device();
    if (pk_cuda_dep_load() != 0)
        bail("pk_cuda_dep_load failed");
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    plan_lazy();
    cudaStream_t st, other;
    check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "a stream");
    check(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), "a stream");
    void *m = NULL;
    check(cudaHostAlloc(&m, sizeof(uint32_t), cudaHostAllocMapped), "the marker");
    volatile uint32_t *marker = m;
    const uint32_t one_h = 1;
    uint32_t *one = gu_clone(&one_h, sizeof one_h);

    /* Word counts around a launch's 64 (PK_DEP_WORDS_MAX), then random ones. */
    const unsigned counts[] = { 1, 2, 63, 64, 65, 129 };
    const int quick = gu_quick();
    for (unsigned k = 0; k < (quick ? 3u : 6u); k++)
        gate_case(&rng, counts[k], st, marker, one);
    for (int r = 0; r < (quick ? 1 : 6); r++)
        gate_case(&rng, 1 + (unsigned) tap_rng_below(&rng, 200), st, marker, one);
    bound_case(&rng, st, marker, one);

    unsigned char *want = bmalloc(BIG_BYTES);
    for (size_t i = 0; i < BIG_BYTES; i += 8) {
        uint64_t x = tap_rng_u64(&rng);
        memcpy(want + i, &x, 8);
    }
    unsigned char *src = gu_clone(want, BIG_BYTES), *dst = gu_alloc(BIG_BYTES);
    for (unsigned k = 0; k < (quick ? 2u : 6u); k++) {
        signal_case(&rng, counts[k], 0, st, other, src, dst, want);
        signal_case(&rng, counts[k], 1, st, other, src, dst, want);
    }
    gu_free(src);
    gu_free(dst);
    free(want);
    gu_free(one);
    check(cudaFreeHost(m), "cudaFreeHost");
    check(cudaStreamDestroy(st), "cudaStreamDestroy");
    check(cudaStreamDestroy(other), "cudaStreamDestroy");
    return 0;
}
