/* kernels.h: the attention and cache kernels' C interface, shared by the CPU and CUDA versions. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_KERNELS_H
#define PAGED_KERNELS_H

/*
 * Pool memory layout (the contract documented in paged(7)): layer-major, K and V separate,
 * HND inside a block:
 *
 *     pool[layer][kv][block][head][token][dim]        kv = 0 for K, 1 for V
 *
 * so layer l's K cache is one contiguous [N][H][B][D] tensor. A token's slot is
 * block * B + offset. Every entry point takes a struct of arguments; the CUDA ones also take
 * a stream (a cudaStream_t passed as void *, so this header stays plain C).
 *
 * Attention semantics, identical in every implementation. For query position i (0-based in
 * its sequence's context) and key position j <= i:
 *     logit = sm_scale * dot(q, k_j)
 *     if soft_cap > 0:  logit = soft_cap * tanh(logit / soft_cap)
 *     if alibi_slopes:  logit += slope[q_head] * (j - i)
 *     if window > 0:    keys with j <= i - window are masked out
 *     out = sum_j softmax(logit)_j * v_j
 * Decode has one query per sequence at i = seq_len - 1. Prefill places the qo_len queries of
 * a sequence at the end of its context: query r sits at i = seq_len - qo_len + r (causal);
 * with causal == 0 every query sees the whole context and stands at i = seq_len - 1 for the
 * window and ALiBi. An fp8 cache stores round(x / scale) and reads back stored *
 * scale, with k_scale for K and v_scale for V.
 *
 * All functions return 0 (PAGED_OK) or a negative paged_error; they check shapes they do not
 * support (PAGED_E_GEOMETRY, PAGED_E_DTYPE) but trust indices: the daemon validates every
 * block id and slot before calling them.
 */

#include <stddef.h>
#include <stdint.h>

#include "paged.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One pool's KV memory as the kernels see it. */
typedef struct pk_cache {
    void *base;            /* [num_layers][2][num_blocks][num_kv_heads][block_size][head_dim] */
    int32_t num_layers;
    int32_t num_blocks;
    int32_t num_kv_heads;
    int32_t head_dim;
    int32_t block_size;
    int32_t dtype;         /* enum paged_dtype of the cache */
    float k_scale;         /* fp8 caches only: stored = value / k_scale */
    float v_scale;
} pk_cache;

/* Attention options shared by decode and prefill (see the semantics above). */
typedef struct pk_attn_opts {
    float sm_scale;
    float soft_cap;               /* <= 0: off */
    int32_t window;               /* <= 0: off */
    const float *alibi_slopes;    /* [num_q_heads], or NULL for none; device memory for CUDA */
} pk_attn_opts;

/*
 * APPEND: scatter num_tokens new keys and values into their slots, layers [layer_begin,
 * +num_layers). The sources are either one contiguous tensor each (k, v) or, when k_seg is
 * not NULL, num_segments of them: segment s holds tokens seg_indptr[s]..seg_indptr[s+1] of
 * the slot mapping, its keys at k_seg[s] and values at v_seg[s], each
 * [num_layers][seg_tokens][num_kv_heads][head_dim] (seg_tokens = seg_indptr[s+1] -
 * seg_indptr[s]). That lets the engine merge APPENDs of several clients into one launch.
 * Zeroed segment fields (k_seg NULL) mean the contiguous form. For CUDA seg_indptr, k_seg
 * and v_seg are device memory (the pointers they hold device pointers too), and like slots
 * they are trusted: seg_indptr must start at 0, never decrease and end at num_tokens.
 *
 * In the segmented form seg_layer, when not NULL, gives each segment its own first layer:
 * segment s writes layers [seg_layer[s], seg_layer[s] + num_layers) and layer_begin is not
 * used (it is still checked), so APPENDs of different layers share a launch. NULL means
 * layer_begin for every segment; seg_layer without k_seg is PAGED_E_INVAL. The CPU versions
 * check every entry (PAGED_E_LAYER); for CUDA seg_layer is device memory and trusted like the
 * slots: every entry must lie in [0, cache.num_layers - num_layers]. Tokens are written in
 * any order, so no (layer, slot) may be written twice by one APPEND.
 */
typedef struct pk_append_args {
    pk_cache cache;
    int32_t layer_begin;
    int32_t num_layers;
    int32_t num_tokens;
    int32_t src_dtype;            /* dtype of k and v: cache.dtype (copied as it is), or for an fp8
                                   * cache f16, bf16 or f32 (quantized with the cache's scales) */
    const void *k;                /* [num_layers][num_tokens][num_kv_heads][head_dim] */
    const void *v;                /* same shape */
    const int32_t *slot_mapping;  /* [num_tokens]; a negative slot is skipped */
    int32_t num_segments;         /* segmented form: >= 1 */
    const int32_t *seg_indptr;    /* [num_segments + 1] token offsets into slot_mapping */
    const void *const *k_seg;     /* [num_segments] per-segment keys, or NULL: contiguous form */
    const void *const *v_seg;     /* [num_segments] per-segment values (with k_seg) */
    const int32_t *seg_layer;     /* [num_segments] per-segment first layers, or NULL (with k_seg) */
} pk_append_args;

/*
 * DECODE: one query token per sequence. Queries and outputs are either one contiguous
 * tensor (q, out: [num_seqs][num_q_heads][head_dim]) or, when q_seq is not NULL, one
 * pointer per sequence (q_seq[s], out_seq[s]: [num_q_heads][head_dim] each), which lets the
 * engine merge requests of several clients into one launch.
 *
 * seq_layer, when not NULL, gives each sequence its own layer: sequence s reads layer
 * seq_layer[s] of the cache and `layer` is not used (it is still checked), so requests of
 * different layers share a launch. NULL means `layer` for every sequence. The CPU versions
 * check every entry (PAGED_E_LAYER); for CUDA seq_layer is device memory and trusted like the
 * block tables: every entry must lie in [0, cache.num_layers).
 */
typedef struct pk_decode_args {
    pk_cache cache;
    int32_t layer;
    int32_t num_seqs;
    int32_t num_q_heads;          /* a multiple of cache.num_kv_heads */
    int32_t q_dtype;              /* dtype of queries and outputs */
    const void *q;
    void *out;
    const void *const *q_seq;     /* optional per-sequence queries */
    void *const *out_seq;         /* optional per-sequence outputs (with q_seq) */
    const int32_t *block_tables;  /* [num_seqs][bt_stride] */
    int32_t bt_stride;
    const int32_t *seq_lens;      /* [num_seqs], each >= 1 and <= bt_stride * block_size */
    pk_attn_opts opts;
    void *workspace;              /* CUDA: scratch for split-KV partials (see pk_cuda_decode_workspace) */
    size_t workspace_size;
    const int32_t *seq_layer;     /* optional [num_seqs] per-sequence layers; NULL: `layer` for all */
    /* Optional fused append: before attending, each sequence's newest token (position
     * seq_lens[s] - 1) gets its keys and values, q_dtype elements [num_kv_heads][head_dim]
     * per sequence, converted as pk_*_append does: new_k and new_v hold [num_seqs] such rows
     * side by side, or (with q_seq) new_k_seq and new_v_seq point at each sequence's. The
     * kernels write that position from the one CTA that reads it, so no block of it may
     * appear in another row of the launch (the caller's promise). CUDA, 16-bit queries
     * and a 16-bit or fp8 cache only (the tensor-core kernel); elsewhere PAGED_E_NOTSUP. */
    const void *new_k, *new_v;
    const void *const *new_k_seq, *const *new_v_seq;
    /* Optional (CUDA): the metadata arrays above (block_tables, seq_lens, seq_layer, q_seq,
     * out_seq, new_k_seq, new_v_seq, opts.alibi_slopes) all lie in the meta_bytes bytes at
     * device address meta_dev, and meta_host holds the same bytes on the host. Where
     * pk_cuda_decode_meta_inline says so, pk_cuda_decode passes those bytes in the kernel's
     * parameters and the kernel reads them there, never at meta_dev: the caller need not
     * have copied them to the device. Elsewhere pk_cuda_decode refuses (PAGED_E_NOTSUP)
     * while meta_host is set. NULL: the kernels read the arrays in device memory. */
    const void *meta_host;
    const void *meta_dev;
    size_t meta_bytes;
} pk_decode_args;

/* PREFILL: qo_indptr[s]..qo_indptr[s+1] are sequence s's query rows in q and out. */
typedef struct pk_prefill_args {
    pk_cache cache;
    int32_t layer;
    int32_t num_seqs;
    int32_t num_q_heads;
    int32_t q_dtype;
    int32_t causal;               /* nonzero: causal mask aligned to the end of the context */
    int32_t total_q;              /* qo_indptr[num_seqs] */
    int32_t max_qo_len;           /* the largest qo_indptr[s+1] - qo_indptr[s] */
    const void *q;                /* [total_q][num_q_heads][head_dim] */
    void *out;                    /* same shape */
    const int32_t *qo_indptr;     /* [num_seqs + 1], non-decreasing, from 0 */
    const int32_t *block_tables;  /* [num_seqs][bt_stride] */
    int32_t bt_stride;
    const int32_t *seq_lens;      /* [num_seqs], each >= that sequence's qo_len */
    pk_attn_opts opts;
    void *workspace;
    size_t workspace_size;
} pk_prefill_args;

/* COPY: copy whole blocks (every layer, K and V) from src_blocks[i] to dst_blocks[i]. */
typedef struct pk_copy_args {
    pk_cache cache;
    int32_t num_pairs;
    const int32_t *src_blocks;
    const int32_t *dst_blocks;
    /* NULL: the destination blocks are cache's own. Else they are in another pool of cache's
     * geometry but dst_num_blocks blocks, at dst_base (on CUDA: memory the launching device
     * can write, its own or a peer's). */
    void *dst_base;
    int32_t dst_num_blocks;
} pk_copy_args;

/* The most blocks one pk_cuda_units_copy moves: their ids travel in the launch's parameters. */
#define PK_UNITS_MAX 512

/* Whole blocks of a pool (every layer, K and V) to or from units: unit i, of
 * num_layers * 2 pieces of H * B * D elements each in the pool's plane order, lies at
 * units + i * unit_bytes and is block blocks[i]'s (the peers' staging layout). */
typedef struct pk_units_args {
    pk_cache cache;
    int32_t n;                      /* 0 to PK_UNITS_MAX */
    const int32_t *blocks;          /* [n] block ids, host memory */
    void *units;                    /* n units one after another */
    int to_units;                   /* 1: pool to units; 0: units to pool */
    uint64_t *sums;                 /* NULL, or [n] device memory: each unit's pk_unit_sum, taken as it moves */
} pk_units_args;

/* Returns the size in bytes of one element of a paged_dtype, or 0 if it is not one. The
 * one definition of the element sizes: libpaged's paged_dtype_size (lib/core/dtype.c) returns
 * this, since a static inline here serves host and device code alike and keeps the kernels
 * free of any library. */
static inline size_t pk_dtype_size(int32_t dtype)
{
    switch (dtype) {
    case PAGED_DTYPE_F32: return 4;
    case PAGED_DTYPE_F16: return 2;
    case PAGED_DTYPE_BF16: return 2;
    case PAGED_DTYPE_FP8_E4M3: return 1;
    default: return 0;
    }
}

/* Returns the element offset of (layer, kv, block, head, token, dim 0) in a cache. */
static inline size_t pk_cache_index(const pk_cache *c, int32_t layer, int32_t kv, int32_t block,
                                    int32_t head, int32_t token)
{
    size_t idx = (size_t) layer * 2 + (size_t) kv;
    idx = idx * (size_t) c->num_blocks + (size_t) block;
    idx = idx * (size_t) c->num_kv_heads + (size_t) head;
    idx = idx * (size_t) c->block_size + (size_t) token;
    return idx * (size_t) c->head_dim;
}

/* Returns the size in bytes of a whole cache (every layer, K and V). */
static inline size_t pk_cache_bytes(const pk_cache *c)
{
    return (size_t) c->num_layers * 2 * (size_t) c->num_blocks * (size_t) c->num_kv_heads
           * (size_t) c->block_size * (size_t) c->head_dim * pk_dtype_size(c->dtype);
}

/* Returns the layer sequence s of a DECODE reads: its own (seq_layer), else a->layer. Host
 * memory only (the CPU paths). */
static inline int32_t pk_decode_seq_layer(const pk_decode_args *a, size_t s)
{
    return a->seq_layer != NULL ? a->seq_layer[s] : a->layer;
}

/* Returns the first layer segment s of a segmented APPEND writes: its own (seg_layer), else
 * a->layer_begin. Host memory only (the CPU paths). */
static inline int32_t pk_append_seg_layer(const pk_append_args *a, size_t s)
{
    return a->seg_layer != NULL ? a->seg_layer[s] : a->layer_begin;
}

/* ---- CPU reference: plain, single-threaded, the oracle the other versions are tested against. */

/* Each runs the whole op and returns 0 or a negative paged_error for an unsupported shape. */
int pk_ref_append(const pk_append_args *a);
int pk_ref_decode(const pk_decode_args *a);
int pk_ref_prefill(const pk_prefill_args *a);
int pk_ref_copy(const pk_copy_args *a);

/*
 * ---- CPU backend: the same ops split into independent work items for a thread pool.
 * pk_cpu_*_check returns 0 or the error for an unsupported shape; pk_cpu_*_items returns the
 * number of work items; pk_cpu_*_run does items [begin, end). Items of one op touch
 * disjoint outputs, so any split over threads gives the same result as running them all.
 */
int pk_cpu_append_check(const pk_append_args *a);
size_t pk_cpu_append_items(const pk_append_args *a);
void pk_cpu_append_run(const pk_append_args *a, size_t begin, size_t end);

int pk_cpu_decode_check(const pk_decode_args *a);
size_t pk_cpu_decode_items(const pk_decode_args *a);
void pk_cpu_decode_run(const pk_decode_args *a, size_t begin, size_t end);

int pk_cpu_prefill_check(const pk_prefill_args *a);
size_t pk_cpu_prefill_items(const pk_prefill_args *a);
void pk_cpu_prefill_run(const pk_prefill_args *a, size_t begin, size_t end);

int pk_cpu_copy_check(const pk_copy_args *a);
size_t pk_cpu_copy_items(const pk_copy_args *a);
void pk_cpu_copy_run(const pk_copy_args *a, size_t begin, size_t end);

/*
 * ---- The unit sum: the 64-bit check of a KV unit (a contiguous byte range the daemons move
 * between them). For a unit of `bytes` bytes (a multiple of 8) read as little-endian uint64
 * words w[0..m), m = bytes / 8, all arithmetic mod 2^64:
 *
 *     mix(z):  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
 *              return z ^ (z >> 31)
 *     acc    = sum over i < m of mix(w[i] ^ (0x9e3779b97f4a7c15 * (i + 1)))
 *     sum    = mix(acc + bytes)
 *
 * The sum over the words is order-free, so a GPU adds its partial sums in any order and
 * agrees with the CPU bit for bit; keying each word by its position makes swapped words
 * count, and mixing in the length tells units of zeros of different sizes apart. It is not
 * cryptographic: the peers are authenticated, and the sum only catches corruption.
 */
/* Returns the unit sum of the bytes bytes at unit (host memory, any alignment). */
uint64_t pk_unit_sum(const void *unit, uint64_t bytes);

/*
 * ---- CUDA: device pointers everywhere (block tables, lengths and slots included); each
 * launches on stream, checks the launch, and returns without synchronizing.
 */
int pk_cuda_append(const pk_append_args *a, void *stream);
/* Returns the workspace bytes pk_cuda_decode needs for a (0 if it will not split); reads only
 * a's shapes, so its pointers may still be NULL. */
size_t pk_cuda_decode_workspace(const pk_decode_args *a);
int pk_cuda_decode(const pk_decode_args *a, void *stream);
/* Returns 1 when pk_cuda_decode will pass a's metadata in its kernels' parameters (a carries
 * meta_host; the tensor-core kernel runs it; meta_bytes is at most PK_CUDA_DECODE_META_MAX),
 * 0 when not, or a negative paged_error for shapes the kernels refuse. Reads only a's shapes,
 * workspace and meta_*. */
int pk_cuda_decode_meta_inline(const pk_decode_args *a);
/* The most metadata bytes a decode launch carries in its parameters (kernel parameters may
 * take 32 KB since CUDA 12.1; a launch copies them whole, used or not, so it is made with the
 * smallest of 1, 4 and 8 KB that holds them). */
#define PK_CUDA_DECODE_META_MAX 8192

/* How pk_cuda_decode runs a decode on the current device. */
typedef struct pk_decode_plan_info {
    int parts;                    /* partitions of the longest context a table allows (1: no split, no reduce) */
    int part_tokens;              /* tokens per partition */
    long long ctas;               /* CTAs of the partition kernel */
    int cta_heads;                /* most query heads of one KV head that one of them serves: 8, or 16 (the
                                   * tensor-core kernel's two n-tiles, for groups of more than 16) */
    int small_rings;              /* 1: the tensor-core kernel's small rings (more CTAs per SM) */
} pk_decode_plan_info;

/* Fills *out with the plan pk_cuda_decode would run for a, given a's workspace (none: no
 * split); reads only a's shapes and workspace. Returns 0 or a negative paged_error. */
int pk_cuda_decode_plan(const pk_decode_args *a, pk_decode_plan_info *out);
size_t pk_cuda_prefill_workspace(const pk_prefill_args *a);
int pk_cuda_prefill(const pk_prefill_args *a, void *stream);
int pk_cuda_copy(const pk_copy_args *a, void *stream);
/* Copies whole blocks to or from contiguous units in one launch (pk_units_args; the pool and
 * the units device memory the launching device reaches; the blocks distinct), summing each
 * unit on the way where sums is set (the unit's bytes a multiple of 8). Returns 0,
 * PAGED_E_INVAL, PAGED_E_GEOMETRY, PAGED_E_DTYPE, or PAGED_E_DEVICE when CUDA failed. */
int pk_cuda_units_copy(const pk_units_args *a, void *stream);
/* Stores in sums[u] the unit sum (pk_unit_sum) of unit u for u < n: the units lie one after
 * another from units, unit_bytes each (a multiple of 8). units and sums are device memory.
 * Returns 0, PAGED_E_INVAL for bad arguments, or PAGED_E_DEVICE when CUDA failed. */
int pk_cuda_unit_sums(const void *units, uint32_t n, uint64_t unit_bytes, uint64_t *sums, void *stream);

/*
 * Dependency words by kernel instead of stream memory operations (the cuda backend uses them
 * under MPS, where a stream's waits and writes cost far more than a one-block kernel's; see
 * HACKING.md). addr is the word's device address: device memory, or host memory mapped into
 * the device's address space.
 */
typedef struct pk_dep_word {
    uint32_t *addr;
    uint32_t value;
} pk_dep_word;
/* Words per launch (they travel in the kernel's parameters); more take several launches. */
#define PK_DEP_WORDS_MAX 64u
/* Queues on stream kernels that end once every word reached its value ((int32_t) (word -
 * value) >= 0) or bound_ns passed, so that the work queued after them waits for the words.
 * Returns 0 or PAGED_E_DEVICE. */
int pk_cuda_dep_wait(const pk_dep_word *words, unsigned n, unsigned long long bound_ns, void *stream);
/* Queues on stream kernels that write each word's value once the work before them is done;
 * returns 0 or PAGED_E_DEVICE. */
int pk_cuda_dep_signal(const pk_dep_word *words, unsigned n, void *stream);
/* Loads both kernels' code into the context now. Under lazy module loading (CUDA's default)
 * a kernel's first launch may wait for the device to go idle, which a gate holding it never
 * lets happen: call this before the first gate. Returns 0 or PAGED_E_DEVICE. */
int pk_cuda_dep_load(void);

/* Queues on stream a kernel that traps, losing the device context (a sticky error in every
 * later call): for testing how the daemon survives a device fault. Returns 0 or a negative
 * paged_error when the launch itself failed. */
int pk_cuda_fault(void *stream);

#ifdef __cplusplus
}
#endif

#endif
