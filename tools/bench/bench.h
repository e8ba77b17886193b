/* bench.h: paged-bench's options, its two benchmarks, and the small helpers every part shares. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_BENCH_BENCH_H
#define PAGED_TOOLS_BENCH_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "paged.h"
#include "tools/bench/report.h"

/* Where kernels run: as asked on the command line, then resolved. */
enum bench_backend {
    BENCH_AUTO = 0,
    BENCH_CPU = 1,
    BENCH_CUDA = 2,
};

/* How the service's layers are chained (--deps): awaited, or through dependency words in the
 * host arena written by the client's CPU, in the data arena, or in the host arena written by
 * the client's stream. */
enum bench_deps {
    BENCH_DEPS_NONE = 0,
    BENCH_DEPS_HOST = 1,
    BENCH_DEPS_DEVICE = 2,
    BENCH_DEPS_HOST_STREAM = 3,
};

#define BENCH_MAX_CLIENT_COUNTS 8
#define BENCH_MAX_ROUNDS 50          /* --rounds */

/* The command line. */
struct bench_opts {
    int quick;                      /* small shapes, few repetitions: seconds, not minutes */
    const char *json_path;          /* NULL: no JSON */
    enum bench_backend backend;     /* as asked */
    const char *pagedd;             /* the daemon to start for the service benchmark */
    unsigned threads;               /* CPU worker threads (0: one per online CPU) */
    unsigned clients[BENCH_MAX_CLIENT_COUNTS]; /* client process counts of the service runs */
    int nclients;
    unsigned batch;                 /* sequences per client in the multi-client runs */
    unsigned context;               /* service: tokens already in each sequence (0: default) */
    unsigned steps;                 /* service: timed decode steps per client (0: default) */
    long nops;                      /* service: NOP round trips (0: default) */
    int spin_us;                    /* service: clients' paged_connect_opts.spin_us (0: default) */
    enum bench_deps deps;           /* service: layers chained by dependency words (--deps) */
    unsigned rounds;                /* service: times the scenario list runs, interleaved (>= 1) */
    const char *waits;              /* service: the daemon's dependency-waits (NULL: its default) */
    uint32_t pool_memory;           /* service: PAGED_POOL_SEALED or PAGED_POOL_EXPORTED or'ed
                                       into the pools' mode; 0: the daemon's default */
    uint64_t seed;                  /* of every random input */
    unsigned tier_prompts;          /* tiers: system prompts of the TTFT workload (0: default) */
    unsigned tier_tokens;           /* tiers: tokens of each (0: default) */
    unsigned tier_suffix;           /* tiers: tokens of each request's own suffix (0: default) */
    unsigned tier_layers;           /* tiers: layers of the pools (0: default) */
    const char *file_tier;          /* tiers: the directory the file tier and the disk test use */
    int do_kernels, do_service, do_tiers, do_remote, do_peers;
    int list_shapes;                /* --list-shapes: print the decode and prefill shapes and exit */
    int remote_no_recompute;        /* remote: time the adopt only */
};

/* What the machine measured once, the ceilings every percentage refers to. */
struct bench_ceilings {
    enum bench_backend backend;     /* resolved: BENCH_CPU or BENCH_CUDA */
    char name[128];                 /* the GPU's name, or the CPU model */
    int units;                      /* SMs, or CPU worker threads */
    int sm_max_mhz, mem_max_mhz;    /* GPU: highest clocks (0: not known) */
    int power_limit_w;              /* GPU: enforced power limit (0: not known) */
    size_t cache_bytes;             /* L2 of the GPU, last-level cache of the CPU */
    double read_gbps;               /* streaming read, bytes read per second / 1e9 */
    double copy_gbps;               /* the better of the two copies, read + write bytes */
    double copy_kernel_gbps;        /* our copy kernel (CPU: threads running memcpy) */
    double memcpy_gbps;             /* cudaMemcpyAsync device to device (CPU: NAN) */
    double mma_tflops;              /* cuBLAS bf16 8192^3 rate; NAN when n/a */
    int mma_n;                      /* the matrix size it was measured at */
};

/* Runs the kernels benchmark on the resolved backend into the report; exits 1 on failure. */
void bench_kernels(const struct bench_opts *o, const struct bench_ceilings *ceil,
                   struct br_report *r);

/* Times the decode shapes of the kernels benchmark into the report's table "decode", row i
 * being shape i of bk_shapes(BK_DECODE, ...), and prints it; returns the table. */
struct br_table *bench_kernels_decode(const struct bench_opts *o, const struct bench_ceilings *ceil,
                                      struct br_report *r);

/* The same for the prefill shapes, into the table "prefill"; returns the table. */
struct br_table *bench_kernels_prefill(const struct bench_opts *o, const struct bench_ceilings *ceil,
                                       struct br_report *r);

/* Runs the service benchmark (starting pagedd) into the report; exits 1 on failure. The
 * in-process comparison runs on whatever backend the daemon reports. */
void bench_service(const struct bench_opts *o, struct br_report *r);

/* Runs the tiers benchmark (starting pagedd with a host and a file tier) into the report;
 * exits 1 on failure. */
void bench_tiers(const struct bench_opts *o, struct br_report *r);

/* The service benchmark's client process (the hidden "_client" command); returns the exit code. */
int bench_client_main(int argc, char **argv);

/* Maps client c's arenas for who (a name for messages): *cuda says whether the daemon runs
 * the cuda backend (dying where this paged-bench cannot fill device memory), *host and *data
 * get the arenas' bases, and on cuda the data arena's device becomes the current one.
 * Returns PAGED_OK or PAGED_E_NOMEM (an arena could not be mapped). */
int bench_client_arenas(paged_client *c, const char *who, int *cuda, unsigned char **host, unsigned char **data);

/* Measures the CPU ceilings into c (name, threads, cache, read and copy rates). */
void bench_cpu_ceilings(const struct bench_opts *o, struct bench_ceilings *c);

/* ---- helpers (util.c) */

/* Prints "paged-bench: " and the message to stderr and exits 1. */
void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Returns the --deps word of a chaining other than BENCH_DEPS_NONE ("host", "device",
 * "host-stream"), or NULL. */
const char *bench_deps_name(enum bench_deps d);

/* Returns the chaining a --deps word names, or BENCH_DEPS_NONE when it names none. */
enum bench_deps bench_deps_parse(const char *word);

/* Returns malloc(n) (at least 1 byte), or dies naming what it was for. */
void *bench_alloc(size_t n, const char *what);


/* Returns the median of n values (sorts v in place); NAN for n == 0. */
double bench_median(double *v, size_t n);

/* Sorts n int64 samples in place. */
void bench_sort_i64(int64_t *v, size_t n);

/* Returns the nearest-rank p-quantile (0 < p <= 1) of n sorted samples; 0 for n == 0. */
int64_t bench_quantile(const int64_t *sorted, size_t n, double p);

/* Returns a well-mixed 64-bit hash of x (the splitmix64 finalizer). */
static inline uint64_t bench_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* Returns a uniform float in [-1, 1) drawn from element i of the stream named seed. */
static inline float bench_uniform(uint64_t seed, uint64_t i)
{
    uint64_t h = bench_mix64(seed ^ bench_mix64(i));
    return (float) ((double) (h >> 40) * (2.0 / 16777216.0) - 1.0);
}

/* Fills n elements of dtype at p with amp * uniform[-1, 1) values (fp8: divided by scale),
 * element i from stream seed, so any split of the range gives the same data. */
void bench_fill_host(void *p, size_t begin, size_t end, int32_t dtype, float amp, float scale,
                     uint64_t seed);

/* Returns a random permutation of 0..n-1 (malloc'd) drawn from seed. */
int32_t *bench_permutation(int32_t n, uint64_t seed);

/* Returns the number of online CPUs, at least 1. */
unsigned bench_online_cpus(void);

#endif
