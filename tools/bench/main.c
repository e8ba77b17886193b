/* main.c: paged-bench: options, the device header, the kernels and service benchmarks, the JSON. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "paged.h"
#include "tools/bench/bench.h"
#include "tools/bench/cpuwork.h"
#include "tools/bench/peers.h"
#include "tools/bench/remote.h"
#include "paths.h"
#ifdef HAVE_CUDA
#include "tools/bench/gpu.h"
#endif

/* Prints usage to f; returns nothing. */
static void usage(FILE *f)
{
    fprintf(f,
            "Usage: paged-bench [OPTION]... kernels|service|tiers|remote|peers|all\n"
            "  or:  paged-bench [-q] [-b NAME] --list-shapes\n"
            "Benchmark paged's attention kernels and its service against the hardware's limits.\n\n"
            "  -q, --quick            small shapes and few runs: finishes in seconds\n"
            "  -j, --json=FILE        also write every figure to FILE as JSON\n"
            "  -b, --backend=NAME     cpu, cuda or auto (default: cuda when built in and a\n"
            "                         device is present, else cpu)\n"
            "      --pagedd=PATH      the daemon to start for the service benchmark (default\n"
            "                         $PAGED_BENCH_PAGEDD, else the build tree's daemon/pagedd\n"
            "                         when run from one, else %s)\n"
            "  -t, --threads=N        CPU worker threads, here and in the daemon (0: one per CPU)\n"
            "  -c, --clients=LIST     client process counts of the service runs (default 1,4,16;\n"
            "                         with --quick 1,4)\n"
            "  -B, --batch=N          sequences per client in those runs (default 1); one more\n"
            "                         run puts the largest count's sequences in one client\n"
            "      --context=N        service: tokens in each sequence before decoding\n"
            "                         (default 1024 on cuda, 256 on cpu; with --quick 32)\n"
            "      --steps=N          service: timed decode steps per client (default 100 on\n"
            "                         cuda, 10 on cpu; with --quick 3)\n"
            "      --nops=N           service: NOP round trips (default 100000; --quick 1000)\n"
            "      --spin-us=N        service: how long the clients' waits spin before they\n"
            "                         sleep, in microseconds (-1: never; default: libpaged's)\n"
            "      --deps[=host|device|host-stream]  service: chain the layers through\n"
            "                         dependency words (in the host arena by the CPU, the\n"
            "                         default; in the data arena or the host arena by the\n"
            "                         client's stream)\n"
            "                         instead of awaiting each layer's completion\n"
            "      --rounds=N         service: run every client count N times, interleaved, and\n"
            "                         give the merge ratio's median (default 1)\n"
            "      --memory=sealed|exported  service: create the pools sealed (no client\n"
            "                         receives their memory) or exported (default: the\n"
            "                         daemon's choice, exported for the owner-only pools)\n"
            "      --sealed           service: the same as --memory=sealed\n"
            "      --waits=isolated|inline  service: the daemon's dependency-waits (default:\n"
            "                         its own, isolated)\n"
            "      --tier-prompts=N   tiers: system prompts the requests share (default 8;\n"
            "                         with --quick 5; at least 3)\n"
            "      --tier-tokens=N    tiers, remote: tokens of each prompt, a multiple of 16\n"
            "                         (default 8192, remote 32768; with --quick 256, remote 1024)\n"
            "      --tier-suffix=N    tiers, remote: tokens of each request's own suffix\n"
            "                         (default 64)\n"
            "      --tier-layers=N    tiers, remote: layers of the pools (default 32; with\n"
            "                         --quick 4)\n"
            "      --no-recompute     remote: time adopting the prompt only, not recomputing it\n"
            "      --file-tier=DIR    tiers: the directory on the disk to measure, for the file\n"
            "                         tier and the read test (default: a temporary directory)\n"
            "      --seed=N           seed of every random input (default: from the clock)\n"
            "      --list-shapes      print the bf16 decode and prefill shapes as JSON (what\n"
            "                         peers compares) and exit\n"
            "  -h, --help             print this help and exit\n"
            "  -V, --version          print the version and exit\n\n"
            "kernels times decode, prefill and append on every shape of the benchmark; service\n"
            "starts its own pagedd and drives it with client processes; tiers measures the host\n"
            "and file tiers (offload, reload, time to first token against recomputing); remote\n"
            "starts two daemons peered over loopback and times adopting a prompt from the\n"
            "other against recomputing it; peers runs FlashInfer on a zero-copy view of a\n"
            "paged pool beside paged's kernels (tools/bench/peers.py, installed beside\n"
            "paged-bench), outputs compared; all does kernels and service.\n",
            PAGED_PAGEDD_PATH);
}

/* Parses a positive integer option or dies; returns it. */
static unsigned long parse_count(const char *s, const char *what, unsigned long min)
{
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > 100000000ul)
        bench_die("bad %s '%s'", what, s);
    return v;
}

/* Parses --clients (comma-separated counts) into o; dies on a bad list. Returns nothing. */
static void parse_clients(struct bench_opts *o, const char *s)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    o->nclients = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (o->nclients == BENCH_MAX_CLIENT_COUNTS)
            bench_die("--clients: at most %d counts", BENCH_MAX_CLIENT_COUNTS);
        o->clients[o->nclients++] = (unsigned) parse_count(tok, "client count", 1);
    }
    if (o->nclients == 0)
        bench_die("--clients: an empty list");
}

/* Parses the command line into o; exits for --help, --version and usage errors. Returns nothing. */
static void parse_args(int argc, char **argv, struct bench_opts *o)
{
    enum { OPT_PAGEDD = 1000, OPT_CONTEXT, OPT_STEPS, OPT_NOPS, OPT_SEED, OPT_SPIN, OPT_DEPS, OPT_ROUNDS,
           OPT_MEMORY, OPT_SEALED, OPT_WAITS, OPT_TIER_PROMPTS, OPT_TIER_TOKENS, OPT_TIER_SUFFIX,
           OPT_TIER_LAYERS, OPT_FILE_TIER, OPT_NO_RECOMPUTE, OPT_LIST_SHAPES };
    static const struct option longopts[] = {
        { "quick", no_argument, NULL, 'q' },      { "json", required_argument, NULL, 'j' },
        { "backend", required_argument, NULL, 'b' }, { "pagedd", required_argument, NULL, OPT_PAGEDD },
        { "threads", required_argument, NULL, 't' }, { "clients", required_argument, NULL, 'c' },
        { "batch", required_argument, NULL, 'B' }, { "context", required_argument, NULL, OPT_CONTEXT },
        { "steps", required_argument, NULL, OPT_STEPS }, { "nops", required_argument, NULL, OPT_NOPS },
        { "seed", required_argument, NULL, OPT_SEED }, { "spin-us", required_argument, NULL, OPT_SPIN },
        { "deps", optional_argument, NULL, OPT_DEPS }, { "rounds", required_argument, NULL, OPT_ROUNDS },
        { "memory", required_argument, NULL, OPT_MEMORY }, { "sealed", no_argument, NULL, OPT_SEALED },
        { "waits", required_argument, NULL, OPT_WAITS },
        { "tier-prompts", required_argument, NULL, OPT_TIER_PROMPTS },
        { "tier-tokens", required_argument, NULL, OPT_TIER_TOKENS },
        { "tier-suffix", required_argument, NULL, OPT_TIER_SUFFIX },
        { "tier-layers", required_argument, NULL, OPT_TIER_LAYERS },
        { "file-tier", required_argument, NULL, OPT_FILE_TIER },
        { "no-recompute", no_argument, NULL, OPT_NO_RECOMPUTE },
        { "list-shapes", no_argument, NULL, OPT_LIST_SHAPES },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },    { NULL, 0, NULL, 0 },
    };
    const char *clients = NULL;
    int seeded = 0, c;
    memset(o, 0, sizeof *o);
    o->batch = 1;
    o->rounds = 1;
    while ((c = getopt_long(argc, argv, "qj:b:t:c:B:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'q': o->quick = 1; break;
        case 'j': o->json_path = optarg; break;
        case 'b':
            if (strcmp(optarg, "cpu") == 0)
                o->backend = BENCH_CPU;
            else if (strcmp(optarg, "cuda") == 0)
                o->backend = BENCH_CUDA;
            else if (strcmp(optarg, "auto") == 0)
                o->backend = BENCH_AUTO;
            else
                bench_die("--backend: cpu, cuda or auto, not '%s'", optarg);
            break;
        case OPT_PAGEDD: o->pagedd = optarg; break;
        case 't': o->threads = (unsigned) parse_count(optarg, "thread count", 0); break;
        case 'c': clients = optarg; break;
        case 'B': o->batch = (unsigned) parse_count(optarg, "batch", 1); break;
        case OPT_CONTEXT: o->context = (unsigned) parse_count(optarg, "context", 1); break;
        case OPT_STEPS: o->steps = (unsigned) parse_count(optarg, "step count", 1); break;
        case OPT_NOPS: o->nops = (long) parse_count(optarg, "NOP count", 1); break;
        case OPT_ROUNDS:
            o->rounds = (unsigned) parse_count(optarg, "round count", 1);
            if (o->rounds > BENCH_MAX_ROUNDS)
                bench_die("--rounds: at most %d, not %s", BENCH_MAX_ROUNDS, optarg);
            break;
        case OPT_SPIN:
            o->spin_us = strcmp(optarg, "-1") == 0 ? -1 : (int) parse_count(optarg, "spin", 1);
            if (o->spin_us > 1000000)
                bench_die("--spin-us: at most 1000000, not %s", optarg);
            break;
        case OPT_DEPS:
            o->deps = optarg == NULL ? BENCH_DEPS_HOST : bench_deps_parse(optarg);
            if (o->deps == BENCH_DEPS_NONE)
                bench_die("--deps: host, device or host-stream, not '%s'", optarg);
            break;
        case OPT_MEMORY:
            o->pool_memory = strcmp(optarg, "sealed") == 0     ? PAGED_POOL_SEALED
                             : strcmp(optarg, "exported") == 0 ? PAGED_POOL_EXPORTED
                                                               : 0;
            if (o->pool_memory == 0)
                bench_die("--memory: sealed or exported, not '%s'", optarg);
            break;
        case OPT_SEALED: o->pool_memory = PAGED_POOL_SEALED; break;
        case OPT_WAITS:
            if (strcmp(optarg, "isolated") != 0 && strcmp(optarg, "inline") != 0)
                bench_die("--waits: isolated or inline, not '%s'", optarg);
            o->waits = optarg;
            break;
        case OPT_TIER_PROMPTS: o->tier_prompts = (unsigned) parse_count(optarg, "prompt count", 3); break;
        case OPT_TIER_TOKENS:
            o->tier_tokens = (unsigned) parse_count(optarg, "prompt tokens", 16);
            if (o->tier_tokens % 16 != 0 || o->tier_tokens > 1000000)
                bench_die("--tier-tokens: a multiple of 16 up to 1000000, not %s", optarg);
            break;
        case OPT_TIER_SUFFIX:
            o->tier_suffix = (unsigned) parse_count(optarg, "suffix tokens", 1);
            if (o->tier_suffix > 65536)
                bench_die("--tier-suffix: at most 65536, not %s", optarg);
            break;
        case OPT_TIER_LAYERS:
            o->tier_layers = (unsigned) parse_count(optarg, "layer count", 1);
            if (o->tier_layers > 1024)
                bench_die("--tier-layers: at most 1024, not %s", optarg);
            break;
        case OPT_FILE_TIER: o->file_tier = optarg; break;
        case OPT_NO_RECOMPUTE: o->remote_no_recompute = 1; break;
        case OPT_LIST_SHAPES: o->list_shapes = 1; break;
        case OPT_SEED:
            o->seed = strtoull(optarg, NULL, 0) & ((1ull << 48) - 1);
            seeded = 1;
            break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf("paged-bench (paged) %s\n", PACKAGE_VERSION); exit(0);
        default: fprintf(stderr, "Try 'paged-bench --help' for more information.\n"); exit(2);
        }
    }
    if (o->list_shapes && optind == argc)
        return;
    if (optind + 1 != argc) {
        fprintf(stderr, "paged-bench: say what to run: kernels, service, tiers, remote, peers or all\n"
                        "Try 'paged-bench --help' for more information.\n");
        exit(2);
    }
    const char *what = argv[optind];
    o->do_kernels = strcmp(what, "kernels") == 0 || strcmp(what, "all") == 0;
    o->do_service = strcmp(what, "service") == 0 || strcmp(what, "all") == 0;
    o->do_tiers = strcmp(what, "tiers") == 0;
    o->do_remote = strcmp(what, "remote") == 0;
    o->do_peers = strcmp(what, "peers") == 0;
    if (!o->do_kernels && !o->do_service && !o->do_tiers && !o->do_remote && !o->do_peers) {
        fprintf(stderr, "paged-bench: unknown benchmark '%s': kernels, service, tiers, remote, peers or all\n",
                what);
        exit(2);
    }
    if (clients != NULL)
        parse_clients(o, clients);
    else {
        static const unsigned quick_counts[] = { 1, 4 }, full_counts[] = { 1, 4, 16 };
        o->nclients = o->quick ? 2 : 3;
        memcpy(o->clients, o->quick ? quick_counts : full_counts, (size_t) o->nclients * sizeof o->clients[0]);
    }
    if (!seeded) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        o->seed = ((uint64_t) ts.tv_sec * 1000003u ^ (uint64_t) ts.tv_nsec ^ (uint64_t) getpid()) & ((1ull << 48) - 1);
    }
}

/* Resolves the kernels' backend: auto is cuda when built in and a device is present.
 * Dies when cuda was asked for and cannot be had. Returns BENCH_CPU or BENCH_CUDA. */
static enum bench_backend resolve_backend(const struct bench_opts *o)
{
#ifdef HAVE_CUDA
    int devices = bg_device_count();
    if (o->backend == BENCH_CUDA && devices == 0)
        bench_die("--backend cuda: no CUDA device (or no driver) here");
    if (o->backend != BENCH_CPU && devices > 0)
        return BENCH_CUDA;
#else
    if (o->backend == BENCH_CUDA)
        bench_die("--backend cuda: this paged-bench was built without CUDA");
#endif
    return BENCH_CPU;
}

/* Puts the device and its ceilings into the report's header. Returns nothing. */
static void header(const struct bench_ceilings *c, struct br_report *r)
{
    int gpu = c->backend == BENCH_CUDA;
    br_device_str(r, "backend", "backend", gpu ? "cuda" : "cpu");
    br_device_str(r, "name", gpu ? "device" : "cpu", c->name);
    br_device_int(r, gpu ? "sms" : "threads", gpu ? "SMs" : "worker threads", c->units);
    br_device_int(r, gpu ? "l2_bytes" : "llc_bytes", gpu ? "L2 bytes" : "last-level cache bytes",
                  (long long) c->cache_bytes);
    /* What tells boxes of one name apart (from NVML, where the driver has it). */
    if (c->sm_max_mhz > 0)
        br_device_int(r, "sm_clock_max_mhz", "SM clock max MHz", c->sm_max_mhz);
    if (c->mem_max_mhz > 0)
        br_device_int(r, "mem_clock_max_mhz", "memory clock max MHz", c->mem_max_mhz);
    if (c->power_limit_w > 0)
        br_device_int(r, "power_limit_w", "power limit W", c->power_limit_w);
    br_device_fig(r, "read_gbps", "stream read", c->read_gbps, "GB/s", 1);
    br_device_fig(r, "copy_gbps", "copy (read + write)", c->copy_gbps, "GB/s", 1);
    br_device_fig(r, "copy_kernel_gbps", gpu ? "  copy kernel" : "  memcpy on threads", c->copy_kernel_gbps,
                  "GB/s", 1);
    if (gpu)
        br_device_fig(r, "memcpy_gbps", "  cudaMemcpyAsync D2D", c->memcpy_gbps, "GB/s", 1);
    char label[64];
    snprintf(label, sizeof label, "cuBLAS bf16 %d^3", c->mma_n > 0 ? c->mma_n : 8192);
    br_device_fig(r, "mma_tflops", label, c->mma_tflops, "TFLOP/s", 1);
}

/* Runs paged-bench; returns the exit status. */
int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "_client") == 0)
        return bench_client_main(argc - 1, argv + 1);
    struct bench_opts o;
    parse_args(argc, argv, &o);
    if (o.list_shapes) {
        if (bench_peers_list(&o, resolve_backend(&o) == BENCH_CPU, stdout) != 0 || fflush(stdout) != 0)
            bench_die("--list-shapes: writing the shapes: %s", strerror(errno));
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    struct br_report r;
    br_init(&r, argc, argv, o.quick, o.seed);
    struct bench_ceilings ceil;
    memset(&ceil, 0, sizeof ceil);
    bench_workers(o.threads);
    if (resolve_backend(&o) == BENCH_CUDA) {
#ifdef HAVE_CUDA
        bk_cuda_ceilings(&o, &ceil);
#endif
    } else
        bench_cpu_ceilings(&o, &ceil);
    header(&ceil, &r);
    br_print_header(&r, stdout);

    if (o.do_kernels)
        bench_kernels(&o, &ceil, &r);
    if (o.do_service)
        bench_service(&o, &r);
    if (o.do_tiers)
        bench_tiers(&o, &r);
    if (o.do_remote)
        bench_remote(&o, &r);
    int status = 0;
    if (o.do_peers && bench_peers(&o, &ceil, &r) != 0)
        status = 1;
    br_print_summary(&r, stdout);

    if (br_check(&r) < 0)
        status = 1;
    if (o.json_path != NULL && br_write_json(&r, o.json_path) < 0) {
        fprintf(stderr, "paged-bench: writing %s: %s\n", o.json_path, strerror(errno));
        status = 1;
    }
    br_free(&r);
    bench_workers_close();
    return status;
}
