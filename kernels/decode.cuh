/* decode.cuh: what the decode entry point shares with the per-head-dim decode kernel instances. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_DECODE_CUH
#define PAGED_KERNELS_DECODE_CUH

#include "kernels/common.cuh"

/*
 * Decode splits each sequence's context into partitions of part_tokens tokens (a multiple of
 * PK_DECODE_TILE), one CTA per (sequence, KV head, partition). The context a sequence
 * attends to starts at lo (0, or seq_len - window with a sliding window) rounded down to a
 * tile; partitions are counted from there.
 */
#define PK_DECODE_TILE 16           /* partition granule: one warp's chunk, one mma row tile */
#define PK_DECODE_MIN_PART 128      /* shortest partition worth a CTA of its own */
#define PK_DECODE_MAX_PARTS 1024    /* bounds the partials and the reduce kernel's loop */
#define PK_DECODE_WAVES 4           /* split a grid of less than a wave of CTAs into this many waves */
#define PK_DECODE_SHORT_CTX 4096    /* contexts shorter than this: no split from an eighth of a wave to a wave */
#define PK_DECODE_SMALL_SPLIT 1024  /* shortest partition of a split into one wave of the small rings */

/* The launch knobs. */
struct pk_decode_knobs {
    int waves;                      /* PK_DECODE_WAVES */
    int min_part;                   /* PK_DECODE_MIN_PART */
    bool pdl;                       /* programmatic dependent launches */
    int short_ctx;                  /* PK_DECODE_SHORT_CTX */
    int parts_cap;                  /* 0, or at most this many partitions (no half-wave rule) */
};

/* Returns the launch knobs: the defaults, unless the environment variable
 * PAGED_DECODE_PLAN=WAVES,MIN_PART[,PDL[,SHORT_CTX[,PARTS_CAP]]] (a benchmarking aid, read
 * once) overrides them. Defined in decode.cu. */
const pk_decode_knobs &pk_decode_tuning(void);

/* How one launch splits the contexts (the same on the host and in both kernels). */
typedef struct pk_decode_plan {
    int part_tokens;                /* tokens per partition, a multiple of PK_DECODE_TILE */
    int max_parts;                  /* partitions of the longest possible context; 1: no split */
    int small;                      /* tensor-core kernel: run with the small rings */
    int meta;                       /* the metadata goes in the kernel's parameters (pk_cuda_decode_meta_inline) */
    int subs;                       /* CTAs per KV head (pk_decode_subs for the kernel that runs) */
    int cta_heads;                  /* most query heads one CTA of that kernel serves: 8 or 16 */
} pk_decode_plan;

/* Kernel arguments of the split-decode reduce kernel. */
typedef struct pk_decode_reduce_params {
    const int32_t *seq_lens;
    const float *ws_o, *ws_m, *ws_l; /* partials: [seq][q_head][part][D], [seq][q_head][part] twice */
    void *out;
    void *const *out_seq;
    int num_q_heads, head_dim, window, part_tokens, max_parts;
    float v_scale;
    const char *meta_base;          /* with pk_decode_meta: see pk_decode_params */
} pk_decode_reduce_params;

/* Metadata carried in a launch's parameters (pk_decode_args.meta_host's bytes, N at most: a
 * launch copies all N, so the smallest size that holds them is launched). */
template <int N> struct pk_decode_meta {
    alignas(16) unsigned char bytes[N];
};

/* Returns a parameter holding a's metadata (meta_host's meta_bytes, then zeros). */
template <int N>
static inline pk_decode_meta<N> pk_decode_meta_of(const pk_decode_args *a)
{
    pk_decode_meta<N> m;
    memcpy(m.bytes, a->meta_host, a->meta_bytes);
    memset(m.bytes + a->meta_bytes, 0, N - a->meta_bytes);
    return m;
}

/* Returns f(std::integral_constant<int, N>()) for the smallest N of 1, 4 and 8 KB that holds
 * bytes of metadata (at most PK_CUDA_DECODE_META_MAX). */
template <typename F>
static inline int pk_decode_meta_sized(size_t bytes, F f)
{
    if (bytes <= 1024)
        return f(std::integral_constant<int, 1024>());
    if (bytes <= 4096)
        return f(std::integral_constant<int, 4096>());
    return f(std::integral_constant<int, PK_CUDA_DECODE_META_MAX>());
}

/* Returns where metadata pointer ptr (a device address at or after base, or nullptr) points
 * in the parameter copy bytes of the metadata that starts at base. */
template <typename T>
__device__ __forceinline__ T *pk_meta_rebase(T *ptr, const char *base, const unsigned char *bytes)
{
    return ptr != nullptr ? (T *) (bytes + ((const char *) ptr - base)) : nullptr;
}


/* Returns the CTAs that serve one KV head's group of `group` query heads in a kernel whose CTA
 * serves up to cta_heads of them (8: the plain kernel, whose PV slots and shared query and
 * softmax rows hold 8, and the tensor-core kernel with one n-tile; 16: that one with two): 1
 * for a group that fits (one CTA for the whole group), else one per sub-group of cta_heads
 * heads, the last one the rest. Those CTAs are adjacent in the launch, so their reads of the
 * KV head's keys and values hit L2. */
static inline int pk_decode_subs(int group, int cta_heads)
{
    return (group + cta_heads - 1) / cta_heads;
}

/* Returns the first context position a sequence of seq_len tokens attends to: 0, or the
 * start of its window. */
__host__ __device__ __forceinline__ int pk_decode_window_start(int seq_len, int window)
{
    return window > 0 && seq_len > window ? seq_len - window : 0;
}

/* Returns the first context position attended by a sequence of seq_len tokens, rounded down to a tile. */
__host__ __device__ __forceinline__ int pk_decode_lo(int seq_len, int window)
{
    return pk_decode_window_start(seq_len, window) / PK_DECODE_TILE * PK_DECODE_TILE;
}

/* Returns the number of partitions of a sequence of seq_len (>= 1) tokens. */
__host__ __device__ __forceinline__ int pk_decode_nparts(int seq_len, int window, int part_tokens)
{
    return (seq_len - pk_decode_lo(seq_len, window) + part_tokens - 1) / part_tokens;
}

/* Returns whether the array of n elements of size bytes at ptr (NULL: none) lies in the
 * metadata a carries (meta_dev, meta_bytes). */
static inline bool pk_decode_meta_holds(const pk_decode_args *a, const void *ptr, size_t n, size_t size)
{
    if (ptr == NULL)
        return true;
    const uintptr_t lo = (uintptr_t) a->meta_dev, p = (uintptr_t) ptr;
    return p >= lo && p - lo <= a->meta_bytes && n <= (a->meta_bytes - (p - lo)) / size;
}

/* Returns whether every metadata array of a lies in the metadata it carries (see
 * pk_decode_args.meta_host). */
static inline bool pk_decode_meta_covers(const pk_decode_args *a)
{
    const size_t n = (size_t) a->num_seqs;
    return pk_decode_meta_holds(a, a->block_tables, n * (size_t) a->bt_stride, sizeof(int32_t))
           && pk_decode_meta_holds(a, a->seq_lens, n, sizeof(int32_t))
           && pk_decode_meta_holds(a, a->seq_layer, n, sizeof(int32_t))
           && pk_decode_meta_holds(a, a->opts.alibi_slopes, (size_t) a->num_q_heads, sizeof(float))
           && pk_decode_meta_holds(a, a->q_seq, a->q_seq ? n : 0, sizeof(void *))
           && pk_decode_meta_holds(a, a->q_seq ? a->out_seq : NULL, n, sizeof(void *))
           && pk_decode_meta_holds(a, a->q_seq ? a->new_k_seq : NULL, n, sizeof(void *))
           && pk_decode_meta_holds(a, a->q_seq ? a->new_v_seq : NULL, n, sizeof(void *));
}

/* Returns the workspace bytes a plan needs: unnormalized outputs plus running max and sum per partition. */
static inline size_t pk_decode_plan_bytes(const pk_decode_args *a, const pk_decode_plan *pl)
{
    if (pl->max_parts <= 1)
        return 0;
    return (size_t) a->num_seqs * (size_t) a->num_q_heads * (size_t) pl->max_parts
           * ((size_t) a->cache.head_dim + 2) * sizeof(float);
}

/*
 * Chooses the partition size. units CTAs serve one partition of every (sequence, KV head, sub-group);
 * cta_slots CTAs fit on the GPU at once. Splitting costs the partials (G / part_tokens of the
 * bytes, written, then read by the reduce) and the reduce kernel; a thin last wave of CTAs
 * costs more. So: no split from 1.9 waves up; from 1 wave, split into 2 waves or more; below
 * 1 wave, into PK_DECODE_WAVES waves (all measured best on an H100; BENCHMARKS.md,
 * Experiments). But contexts shorter than PK_DECODE_SHORT_CTX are not split
 * when the grid has from an eighth of a wave to a wave of CTAs: their rings already keep
 * enough bytes in flight, and a split would cut them into CTAs of a few chunks whose start-up,
 * partials and reduce cost more than it gains (32-layer steps of 1024-token contexts, 32/8
 * heads, H100, with three CTAs per SM (396 slots): 16 sequences, 128 CTAs, 1.07 ms unsplit against 1.32; 12, 10
 * and 8 sequences 0.90, 0.83, 0.79 ms against 1.11, 0.98, 0.86; 6 sequences, 48 CTAs, 0.77
 * against 0.74 split). From a wave up the 2-wave split stays (64 x 2048 x 32/8 with
 * an fp8 cache: 110 us split, 120 unsplit). Partitions keep at least PK_DECODE_MIN_PART tokens (batch 1
 * gets as many as that allows), and a split grid of more than half a wave and less than one
 * and a half is cut to half a wave: with the slots full, the next layer's CTAs cannot become
 * resident early (programmatic dependent launch), and 32-layer steps of 4 x 1024 tokens
 * (tables of 1152) ran at 0.50 ms in 288 CTAs of 264 slots against 0.42 in 160. Never
 * more partials than ws_limit bytes hold. Where the tensor-core kernel's small rings hold
 * more CTAs (small_slots, else 0), an unsplit grid of more than a wave runs in them (pl->small),
 * and one of more than a wave that they hold in one is not split at all; a grid under a wave
 * of long contexts is split into one wave of them, in partitions of at least
 * PK_DECODE_SMALL_SPLIT tokens (16 x 8192 x 32/8: 4 partitions, 512 CTAs, 188 us against 193
 * in 9 partitions, 4.4 waves of the deep rings; 4 x 65536: 16 partitions, 361 against 364).
 * The host
 * cannot see the lengths (they live in device memory), so the plan depends only on shapes:
 * the workspace query and the launch agree.
 */
static inline void pk_decode_make_plan(const pk_decode_args *a, long long units, long long cta_slots,
                                       long long small_slots, size_t ws_limit, pk_decode_plan *pl)
{
    const long long T = PK_DECODE_TILE;
    long long eff = (long long) a->bt_stride * a->cache.block_size;
    if (a->opts.window > 0 && eff > (long long) a->opts.window + T - 1)
        eff = (long long) a->opts.window + T - 1;   /* lo is rounded down by at most T - 1 */
    if (eff < 1)
        eff = 1;
    const pk_decode_knobs &k = pk_decode_tuning();
    long long parts = 1;
    const bool short_enough = eff < k.short_ctx && units * 8 >= cta_slots && units < cta_slots;
    /* More than a wave, but one wave of the small rings: unsplit, in them (below). */
    const bool small_wave = units > cta_slots && units <= small_slots;
    if (units * 10 < cta_slots * 19 && !short_enough && !small_wave)
        parts = pk_ceil_div(cta_slots * (units >= cta_slots && k.waves > 2 ? 2 : k.waves), units);
    if (k.parts_cap > 0 && parts > k.parts_cap)
        parts = k.parts_cap;
    /* Long contexts under a wave: one wave of the small rings, in partitions of at least
     * PK_DECODE_SMALL_SPLIT tokens, instead of several waves of the deep ones. */
    bool small_split = false;
    if (parts > 1 && units < cta_slots && small_slots > cta_slots && small_slots / units >= 2
        && eff / (small_slots / units) >= PK_DECODE_SMALL_SPLIT) {
        parts = small_slots / units;
        small_split = true;
    }
    long long part = pk_ceil_div(pk_ceil_div(eff, parts), T) * T;
    if (part < k.min_part)
        part = pk_ceil_div(k.min_part, T) * T;
    /* A split grid of more than half a wave and less than one and a half: half a wave, so
     * that the next launch's CTAs find free slots to become resident in while it runs. */
    const long long grid = units * pk_ceil_div(eff, part);
    if (parts > 1 && !small_split && k.parts_cap == 0 && grid * 2 > cta_slots && grid * 2 < cta_slots * 3) {
        const long long most = cta_slots / 2 / units > 1 ? cta_slots / 2 / units : 1;
        const long long longer = pk_ceil_div(pk_ceil_div(eff, most), T) * T;
        if (longer > part)
            part = longer;          /* only ever fewer partitions */
    }
    if (pk_ceil_div(eff, part) > PK_DECODE_MAX_PARTS)
        part = pk_ceil_div(pk_ceil_div(eff, PK_DECODE_MAX_PARTS), T) * T;
    pl->part_tokens = (int) part;
    pl->max_parts = (int) pk_ceil_div(eff, part);
    while (pl->max_parts > 1 && pk_decode_plan_bytes(a, pl) > ws_limit) {
        part *= 2;
        pl->part_tokens = (int) part;
        pl->max_parts = (int) pk_ceil_div(eff, part);
    }
    if (pl->max_parts <= 1) {
        pl->max_parts = 1;
        pl->part_tokens = (int) (pk_ceil_div(eff, T) * T);
    }
    pl->small = small_slots > cta_slots
                && (pl->max_parts == 1 ? units > cta_slots : small_split && units * pl->max_parts <= small_slots);
}

/*
 * The decode kernel of one (head dim, cache dtype, query dtype): plans the launch for the
 * current device into *plan (ws_limit: workspace bytes available) and, if launch, launches
 * the partition kernel on stream (the caller launches the reduce). Returns 0 or a negative
 * paged_error. Defined in decode_impl.cuh, instantiated in decode_d*.cu.
 */
template <int D, typename KT, typename QT>
int pk_decode_run(const pk_decode_args *a, size_t ws_limit, cudaStream_t stream, bool launch, pk_decode_plan *plan);

#endif
