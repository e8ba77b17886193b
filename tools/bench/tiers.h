/* tiers.h: what paged-bench's tiers benchmark shares between its parts: geometry, client, limits, page cache, LIST. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_BENCH_TIERS_H
#define PAGED_TOOLS_BENCH_TIERS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/proto.h"
#include "paged.h"
#include "tools/bench/bench.h"

/*
 * The model of the tiers benchmark: tier_layers layers, 32 query heads over 8 KV heads of
 * dimension 128, bf16, blocks of 16 tokens (a unit, one block of every layer's K and V, is
 * 2 MiB at 32 layers). Prompts are published in pools with a host tier (and the daemon's
 * file tier behind it); a request looks its prompt up (reloading it), then per layer APPENDs
 * its suffix's keys and values and PREFILLs its suffix's queries over prompt and suffix.
 * The recompute request APPENDs and PREFILLs prompt and suffix in a fresh sequence.
 */
#define TB_HQ 32
#define TB_HKV 8
#define TB_D 128
#define TB_B 16
#define TB_ELEM 2               /* bytes of a bf16 element */
#define TB_SALT 0x7469657273ull /* every prompt's prefix salt */

/* The sizes of one run. */
struct tb_geom {
    unsigned layers;
    unsigned prompts;           /* system prompts */
    unsigned tokens;            /* tokens of each, a multiple of TB_B */
    unsigned suffix;            /* tokens of each request's own suffix */
    unsigned prompt_blocks;     /* tokens / TB_B */
    unsigned suffix_blocks;     /* blocks the suffix needs */
    uint64_t unit_bytes;        /* one block, every layer, K and V */
};

/* The benchmark's one libpaged client (this process) and its arena buffers: keys, values,
 * queries and outputs of tokens + suffix rows (reused by every layer), slots, block table,
 * lengths and query offsets. */
struct tb_client {
    paged_client *c;
    int cuda;                   /* the daemon runs the cuda backend: the data arena is device memory */
    int device;                 /* cuda: the data arena's device, made current before work on it */
    unsigned char *host, *data; /* arena bases (data: a device pointer on cuda) */
    const struct tb_geom *g;
    unsigned rows;              /* tokens + suffix */
    uint64_t k_off, v_off, q_off, out_off;             /* data arena */
    uint64_t slots_off, table_off, lens_off, indptr_off; /* host arena */
    uint64_t seed;
};

/* One pool of the benchmark and the blocks a request holds in it. */
struct tb_pool {
    paged_pool *p;
    char name[64];
    uint32_t num_blocks;
    int32_t *ids;               /* prompt_blocks + suffix_blocks (a recompute: all of them) */
};

/* ---- tierclient.c */

/* Connects to the daemon at socket and carves and fills the arenas for geometry g (fresh
 * random keys, values and queries from seed). Dies on failure. */
void tb_client_open(struct tb_client *cl, const char *socket, const struct tb_geom *g, uint64_t seed);

/* Closes the connection. */
void tb_client_close(struct tb_client *cl);

/* Dies naming what failed, the error and the daemon's explanation. */
void tb_fail(const struct tb_client *cl, int rc, const char *what) __attribute__((noreturn));

/* Creates pool name with num_blocks blocks and a host tier of host_units units (0: none).
 * Dies on failure. */
void tb_pool_create(struct tb_client *cl, struct tb_pool *tp, const char *name, uint32_t num_blocks,
                    uint32_t host_units);

/* Destroys and detaches the pool. Dies on failure. */
void tb_pool_destroy(struct tb_client *cl, struct tb_pool *tp);

/* Fills token ids of prompt k (tokens of them) into out. */
void tb_prompt_tokens(const struct tb_geom *g, uint64_t seed, unsigned k, int32_t *out);

/* Writes prompt k (fresh keys and values from the seed and k, every layer) into new blocks
 * of the pool, publishes them and lets them go (cached). Dies on failure. */
void tb_publish_prompt(struct tb_client *cl, struct tb_pool *tp, unsigned k);

/* Looks prompt k up (taking references; the daemon reloads what its tiers hold). Returns
 * the blocks found: all of them held in tp->ids, or fewer and none held. Dies on an error. */
unsigned tb_lookup_prompt(struct tb_client *cl, struct tb_pool *tp, unsigned k);

/* The rest of a request after its prompt's lookup: takes the suffix's blocks, then per layer
 * APPENDs the suffix's keys and values and PREFILLs its queries over prompt + suffix,
 * awaiting both before the next layer. With outs (layers * suffix * TB_HQ * TB_D bf16), each
 * layer's output is copied there (untimed callers only). Dies on failure. */
void tb_suffix(struct tb_client *cl, struct tb_pool *tp, uint16_t *outs);

/* A recompute request: takes the blocks of prompt + suffix and per layer APPENDs all their
 * keys and values and PREFILLs all their queries (causal), awaiting both before the next
 * layer. Dies on failure. */
void tb_recompute(struct tb_client *cl, struct tb_pool *tp);

/* Drops the request's references (n blocks of tp->ids). Dies on failure. */
void tb_release(struct tb_client *cl, struct tb_pool *tp, uint32_t n);

/* ---- tierlist.c */

/* Fills *it with pool name's LIST item, asked on a control connection to socket. Dies on
 * failure. */
void tb_pool_item(const char *socket, const char *name, struct pcore_pool_item *it);

/* Fetches LIST what (name: the pool filter, or NULL) from the daemon at socket into *list (free
 * it with pactl_list_free). Dies on failure. */
struct pactl_list;
void tb_list(const char *socket, uint32_t what, const char *name, struct pactl_list *list);

/* ---- tierlimits.c */

/* The physical limits: host-to-device and device-to-host copy rates (cuda: pinned host
 * memory and device memory, cudaMemcpyAsync; cpu: memcpy both) and the disk's sequential
 * read rate in a directory. */
struct tb_limits {
    int cuda;
    size_t copy_bytes;
    double h2d_gbps, d2h_gbps;  /* best of a few */
    size_t disk_bytes;
    double disk_read_gbps;
    int disk_cache_dropped;     /* the file left the page cache before it was read */
};

/* Measures the copy rates of bytes (cuda: on the GPU) into l. Dies on failure. */
void tb_copy_limits(int cuda, size_t bytes, struct tb_limits *l);

/* Stores in *push and *pull the rates in GB/s of a copy of bytes from device 0's memory to
 * device 1's (peer access enabled both ways where the devices allow it: NVLink or PCIe), best
 * of a few each, timed by events: run by device 0 (a push) and by device 1 (a pull, as a get of
 * device 1 reads device 0's memory); 0 where there are not two devices or no CUDA. Dies on a
 * CUDA error. */
void tb_p2p_gbps(size_t bytes, double *push, double *pull);

/* Measures the sequential read rate of a file of bytes written in dir into l (the file is
 * removed). Dies on failure. */
void tb_disk_limit(const char *dir, size_t bytes, struct tb_limits *l);

/* ---- tiercache.c */

/* Writes back and drops from the page cache every regular file under dir (fdatasync, then
 * posix_fadvise POSIX_FADV_DONTNEED). Returns the fraction of their pages still resident
 * afterwards (mincore; 0 when there are none), or -1 when dir cannot be walked. */
double tb_drop_cache(const char *dir);

/* Returns the fraction of the pages of the open file fd (size bytes) in the page cache
 * (mincore), or 1 when it cannot be told. */
double tb_resident(int fd, size_t size);

#endif
