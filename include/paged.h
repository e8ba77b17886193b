/* paged.h: the client library of paged, a shared KV-cache manager with an attention service. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_H
#define PAGED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Versions. PAGED_VERSION_* is the library release; a call marked "since 0.1" exists from
 * that release on.
 */
#define PAGED_VERSION_MAJOR 0
#define PAGED_VERSION_MINOR 1
#define PAGED_VERSION_PATCH 0

/* Cache and activation element types (since 0.1). */
typedef enum paged_dtype {
    PAGED_DTYPE_INVALID = 0,
    PAGED_DTYPE_F32 = 1,      /* IEEE binary32 */
    PAGED_DTYPE_F16 = 2,      /* IEEE binary16 */
    PAGED_DTYPE_BF16 = 3,     /* bfloat16 */
    PAGED_DTYPE_FP8_E4M3 = 4, /* OCP fp8 e4m3 (finite, saturating), with a scale: caches, and
                                 APPEND into them (stored as given); never queries */
} paged_dtype;

/*
 * Error codes (since 0.1). Every call that can fail returns PAGED_OK or one of these
 * negative codes; paged_strerror names each one.
 */
typedef enum paged_error {
    PAGED_OK = 0,
    PAGED_E_INVAL = -1,        /* an argument is invalid (the message or completion names it) */
    PAGED_E_NOMEM = -2,        /* out of memory (host or device) */
    PAGED_E_NOSPC = -3,        /* no free blocks left in the pool */
    PAGED_E_NOENT = -4,        /* no such pool */
    PAGED_E_EXIST = -5,        /* a pool of that name already exists */
    PAGED_E_PERM = -6,         /* permission denied by the owner and mode of the pool or the socket */
    PAGED_E_PROTO = -7,        /* malformed protocol message */
    PAGED_E_VERSION = -8,      /* client and daemon speak different protocol versions */
    PAGED_E_OPCODE = -9,       /* unknown request opcode, or one changed in the ring after submission */
    PAGED_E_LAYER = -10,       /* layer index outside the pool */
    PAGED_E_RANGE = -11,       /* an offset or length lies outside the client's arena */
    PAGED_E_BLOCK = -12,       /* a block id is outside the pool */
    PAGED_E_NOTHELD = -13,     /* a block is not held by this client */
    PAGED_E_READONLY = -14,    /* a write to a block that is shared, published or read-only */
    PAGED_E_SEQLEN = -15,      /* a sequence is longer than its block table covers */
    PAGED_E_HEADS = -16,       /* query heads are not a multiple of the pool's KV heads */
    PAGED_E_DTYPE = -17,       /* a dtype does not match the pool or is not supported */
    PAGED_E_GEOMETRY = -18,    /* a pool geometry field is invalid or unsupported */
    PAGED_E_RING = -19,        /* the client's ring indices are corrupt */
    PAGED_E_SHUTDOWN = -20,    /* the daemon is shutting down */
    PAGED_E_DISCONNECTED = -21,/* the connection to the daemon is gone */
    PAGED_E_TIMEOUT = -22,     /* the wait timed out */
    PAGED_E_AGAIN = -23,       /* the submission ring is full; reap completions and retry */
    PAGED_E_LIMIT = -24,       /* a daemon limit (clients, pools, blocks per client) was reached */
    PAGED_E_DEVICE = -25,      /* the device or a kernel failed */
    PAGED_E_SYSTEM = -26,      /* a system call failed (errno says more) */
    PAGED_E_NOTSUP = -27,      /* not supported by this daemon or backend */
    PAGED_E_BUSY = -28,        /* reserved, no call returns it (destroy of a pool in use succeeds) */
    PAGED_E_NOTCONN = -29,     /* no daemon is listening on the socket */
    PAGED_E_XDEV = -30,        /* the pool is on another device than the client's data arena
                                  (paged_connect_opts.device) */
} paged_error;

/* Returns a static, human-readable description of an error code (since 0.1). */
const char *paged_strerror(int err);

/* A 128-bit content hash of a prefix block (XXH3-128), chained over the prefix (since 0.1). */
typedef struct paged_hash {
    uint64_t lo;
    uint64_t hi;
} paged_hash;

/*
 * Computes the chained content hashes of the full blocks of a token sequence (since 0.1).
 * Block i's hash covers the hash of block i-1, the salt and the block_size token ids of
 * block i, so equal hashes mean equal prefixes. The block before the first is parent
 * (NULL: the zero hash, for a sequence that starts at the beginning of a prompt). Writes
 * ntokens / block_size hashes to out and returns their number, or PAGED_E_INVAL when
 * block_size is zero or an array is NULL while needed. The daemon computes the same
 * hashes for PUBLISH and LOOKUP; a client uses this to reason about what it will find.
 * The salt is the client's (a model's identity); the daemon files each block under the
 * hash and the publisher's tenant scope, which no field of a request chooses (see
 * PAGED_POOL_SHARED_PREFIXES).
 */
long paged_hash_blocks(const paged_hash *parent, const int32_t *tokens, size_t ntokens,
                       uint32_t block_size, uint64_t salt, paged_hash *out);

/* Returns the size in bytes of one element of dtype, or 0 for an invalid dtype (since 0.1). */
size_t paged_dtype_size(paged_dtype dtype);

/* Returns the lower-case name of a dtype ("bf16"), or NULL for an invalid one (since 0.1). */
const char *paged_dtype_name(paged_dtype dtype);

/* Returns the library version as "major.minor.patch" (since 0.1). */
const char *paged_version(void);

/* ===========================================================================================
 * Threads. A paged_client and everything reached through it (pools, sequences, its rings
 * and arenas) belong to one thread at a time: calls on one client are not safe from several
 * threads at once without a lock of the caller's. Different clients are independent; a
 * process may open one client per thread, each with its own rings. The library keeps no
 * global state, never calls exit or abort, and installs no signal handlers (it sends with
 * MSG_NOSIGNAL, so a dead daemon gives PAGED_E_DISCONNECTED, not SIGPIPE).
 * =========================================================================================*/

typedef struct paged_client paged_client;
typedef struct paged_pool paged_pool;
typedef struct paged_seq paged_seq;

/* The daemon's backend, as reported at connection time. */
typedef enum paged_backend {
    PAGED_BACKEND_CPU = 1,   /* pool memory in host shared memory (memfd) */
    PAGED_BACKEND_CUDA = 2,  /* pool memory on a GPU, exported through CUDA IPC */
} paged_backend;

/* Options for paged_client_connect; zero-initialize, then set what you need (since 0.1). */
typedef struct paged_connect_opts {
    const char *socket_path;  /* NULL: $PAGED_SOCKET, else $XDG_RUNTIME_DIR/paged/pagedd.sock,
                                 else /run/paged/pagedd.sock */
    const char *name;         /* UTF-8, up to 63 bytes, shown by pactl; NULL: the program's name */
    uint32_t sq_entries;      /* submission ring entries, a power of two; 0: 256 */
    uint32_t cq_entries;      /* completion ring entries, >= sq_entries; 0: 2 * sq_entries */
    uint64_t host_arena_size; /* bytes; 0: 64 MiB. The daemon may cap it. */
    uint64_t data_arena_size; /* device arena bytes on the cuda backend; 0: 256 MiB */
    int timeout_ms;           /* for connect and control calls; 0: 10000; -1: forever */
    int spin_us;              /* the longest a wait for completions spins before it sleeps,
                                 in microseconds, up to 1000000 (it adapts below that); 0: 300;
                                 -1: never spins. Spinning answers sooner and burns a core
                                 meanwhile (since 0.1). */
    uint32_t device;          /* the daemon's device (0 to paged_client_devices - 1, as pactl
                                 devices lists them) of this client's data arena: its APPEND,
                                 DECODE and PREFILL name pools of that device (paged(7), SEVERAL
                                 GPUS; since 0.1). 0: the first */
} paged_connect_opts;

/*
 * Connects to pagedd, says HELLO and maps the channel the daemon hands back (since 0.1).
 * opts may be NULL for defaults. On success stores a new client in *out and returns
 * PAGED_OK; otherwise returns PAGED_E_NOTCONN (nobody listening), PAGED_E_VERSION (the daemon
 * speaks another protocol version), PAGED_E_PERM, PAGED_E_LIMIT (too many clients, or as
 * many of this user's as its share allows: the reason names the limit), PAGED_E_PROTO,
 * PAGED_E_TIMEOUT, PAGED_E_NOMEM or PAGED_E_SYSTEM, and *out is NULL.
 */
int paged_client_connect(const paged_connect_opts *opts, paged_client **out);

/* As paged_client_connect, and on failure also writes a one-line reason to errbuf
 * (errbuf_size bytes, NUL-terminated; the daemon's own words when it refused, such as a
 * protocol version mismatch), since a failed connect leaves no client to ask (since 0.1). */
int paged_client_connect_err(const paged_connect_opts *opts, paged_client **out, char *errbuf,
                             size_t errbuf_size);

/* Closes the connection; the daemon releases every block reference the client held. Pools,
 * sequences and completions of the client become invalid. NULL is ignored (since 0.1). */
void paged_client_close(paged_client *c);

/* Returns the id the daemon gave this client (since 0.1). */
uint32_t paged_client_id(const paged_client *c);

/* Returns the daemon's backend (since 0.1). */
paged_backend paged_client_backend(const paged_client *c);

/* Returns the client's device: paged_connect_opts.device (since 0.1). */
uint32_t paged_client_device(const paged_client *c);

/* Returns how many devices the daemon serves (since 0.1). */
uint32_t paged_client_devices(const paged_client *c);

/* paged_pool_desc.device for the daemon's device n (since 0.1). */
#define PAGED_DEVICE(n) ((uint32_t) (n) + 1u)

/* Returns the text of the last error the daemon explained for this client ("pool 'llama':
 * head_dim 100 is not supported"), or "" (since 0.1). Valid until the next call. */
const char *paged_client_error(const paged_client *c);

/* Returns a descriptor that becomes readable when completions may be waiting or the
 * connection changed, for callers with their own poll loop (since 0.1). It is an epoll
 * descriptor over the completion wake-up and the control socket; the daemon signals the
 * wake-up only once the client has said it may sleep, which paged_reap does when it finds
 * nothing: call paged_reap until it returns 0, then poll. Do not read it. */
int paged_client_fd(const paged_client *c);

/* One op's counters in the daemon, over all its clients since it started (since 0.1). */
typedef struct paged_op_stats {
    uint64_t requests;        /* requests of the op completed */
    uint64_t errors;          /* of them, failed */
    uint64_t tokens;          /* tokens appended or attended */
    uint64_t bytes;           /* bytes of keys and values read or written */
    uint64_t latency_p50_ns;  /* service time, submission seen to completion posted: median */
    uint64_t latency_p99_ns;  /* and 99th percentile */
} paged_op_stats;

/* Asks the daemon for its request statistics: out[op] receives the counters of each
 * paged_op the daemon counts, up to max_ops entries (out may be NULL when max_ops is 0).
 * Returns the number of ops the daemon counts, which may exceed max_ops, or PAGED_E_INVAL,
 * PAGED_E_TIMEOUT, PAGED_E_PROTO or a connection error (since 0.1). */
int paged_stats(paged_client *c, paged_op_stats *out, unsigned max_ops);

/* This client's prefix-cache figures since it connected, over all its pools (since 0.1). */
typedef struct paged_prefix_counts {
    uint64_t lookups;         /* LOOKUP requests */
    uint64_t lookup_tokens;   /* tokens they asked for (blocks times block_size) */
    uint64_t pool_hit_tokens; /* of them, found in the pools */
    uint64_t host_hit_tokens; /* reloaded from host tiers */
    uint64_t file_hit_tokens; /* reloaded from file tiers */
    uint64_t reloaded_bytes;  /* bytes those reloads copied back */
    uint64_t reload_ns;       /* time they took, summed */
    uint64_t offloaded_bytes; /* bytes this client's ALLOCs pushed out to host tiers */
} paged_prefix_counts;

/* Asks the daemon for this client's prefix-cache figures. Returns PAGED_OK, PAGED_E_INVAL or
 * a connection error (since 0.1). */
int paged_prefix_stats(paged_client *c, paged_prefix_counts *out);

/* ===========================================================================================
 * Pools: named KV caches of fixed geometry, owned by a uid with a file-like mode.
 * =========================================================================================*/

/* A bit of paged_pool_desc's and paged_pool_info's mode: the pool's prefix cache is one for
 * all uids. Without it (the default) each uid has its own: a LOOKUP finds only blocks that
 * clients of the same uid published, so no uid learns by a hit or by timing what another
 * sent (since 0.1). */
#define PAGED_POOL_SHARED_PREFIXES 0x10000u

/* How a pool's memory reaches its clients, a bit of paged_pool_desc.mode at creation (since
 * 0.1). A sealed pool's memory is never sent to any client: every access is a request the
 * daemon validates, so a client writes only slots of blocks it holds and has not published,
 * and a read-only client writes nothing (paged(7), TRUST MODEL); paged_pool_map(3) fails. An
 * exported pool's memory is sent to each client that attaches, which may map it (and, on the
 * GPU, write it whatever its mode). With neither bit the daemon's pool-memory setting decides
 * (paged.conf(5); by default sealed when the mode grants group or others anything, exported
 * when only the owner may attach); paged_pool_info.mode carries the one in effect. */
#define PAGED_POOL_SEALED 0x20000u
#define PAGED_POOL_EXPORTED 0x40000u

/* A bit of paged_pool_desc.mode at creation and of paged_pool_info.mode: the pool's published
 * blocks are served to the daemon's authenticated peers, and its LOOKUPs ask them for what
 * they miss (paged(7), SEVERAL HOSTS). Without it a pool is never read by a peer. A daemon
 * built without UCX accepts the bit and has no peers. */
#define PAGED_POOL_PEERS 0x80000u

/* A pool's geometry and creation parameters; zero-initialize, then set (since 0.1). */
typedef struct paged_pool_desc {
    const char *name;         /* 1..63 bytes of [A-Za-z0-9._-] */
    uint32_t num_layers;      /* L >= 1 */
    uint32_t num_kv_heads;    /* H >= 1 */
    uint32_t head_dim;        /* D: 64, 80, 96, 128 or 256 */
    uint32_t block_size;      /* B, tokens per block: 8, 16 or 32 */
    paged_dtype dtype;        /* cache element type */
    uint32_t num_blocks;      /* N; 0: as many as byte_budget allows */
    uint64_t byte_budget;     /* used when num_blocks is 0 */
    uint32_t mode;            /* permission bits as for files (0600, 0640, 0666); none: 0600.
                                 Read: attach, DECODE, PREFILL, LOOKUP, and FREE and FORK of
                                 blocks already held. Write: ALLOC, APPEND, COPY, PUBLISH.
                                 Or'ed with PAGED_POOL_SHARED_PREFIXES, every uid's LOOKUP
                                 finds what any uid published; without, only its own. */
    float k_scale;            /* fp8 caches: stored = value / k_scale; 0: 1.0 */
    float v_scale;            /* fp8 caches: likewise for V */
    uint64_t host_tier_bytes; /* host memory behind the pool for the published blocks it
                                 evicts, reloaded when a LOOKUP asks for them (paged(7),
                                 TIERS); 0: the daemon's default, paged.conf's host-tier-mb
                                 (since 0.1) */
    uint32_t shards;          /* 0 or 1: one memory; N (2 to 16, dividing num_kv_heads): a
                                 tensor-parallel pool, its KV heads split over N shards
                                 (paged(7), TENSOR-PARALLEL POOLS; since 0.1) */
    uint32_t shard;           /* sharded pool: the shard the creator attaches */
    const char *group;        /* sharded pool: the creator's group of workers; NULL or "":
                                 the uid's default group */
    uint32_t device;          /* PAGED_DEVICE(n): the pool's memory on the daemon's device n
                                 (a sharded pool's shard r on device n + r, modulo the
                                 devices); 0: the creator's device (since 0.1) */
} paged_pool_desc;

/* Where a pool's memory is and how it is laid out (since 0.1). */
typedef struct paged_pool_info {
    uint32_t id;              /* the daemon's pool id */
    uint32_t num_layers, num_kv_heads, head_dim, block_size, num_blocks;
    paged_dtype dtype;
    float k_scale, v_scale;
    int writable;             /* this client may write (mode allows it) */
    uint32_t owner_uid;
    uint32_t mode;            /* permission bits, | PAGED_POOL_SHARED_PREFIXES if it shares,
                                 | PAGED_POOL_SEALED or PAGED_POOL_EXPORTED (exactly one) */
    uint64_t bytes;           /* L * 2 * N * H * B * D * element size */
    /* Element (l, kv, b, h, t, d) is at byte
     * ((((l * 2 + kv) * N + b) * H + h) * B + t) * D + d, times the element size. */
    uint32_t shards;          /* 1, or the pool's shards: num_kv_heads and bytes are then this
                                 attachment's shard's (since 0.1) */
    uint32_t shard;           /* the shard attached: the pool's KV heads kv_head_offset to
                                 kv_head_offset + num_kv_heads - 1 */
    uint32_t kv_head_offset;
    uint32_t device;          /* the daemon's device of the attached memory (since 0.1) */
} paged_pool_info;

/* Creates a pool and attaches to it (since 0.1). Returns PAGED_OK and a handle, or
 * PAGED_E_EXIST, PAGED_E_GEOMETRY / PAGED_E_DTYPE (paged_client_error names the field),
 * PAGED_E_NOMEM, PAGED_E_LIMIT, PAGED_E_DISCONNECTED. */
int paged_pool_create(paged_client *c, const paged_pool_desc *desc, paged_pool **out);

/* Attaches to an existing pool by name (since 0.1). Returns PAGED_OK, PAGED_E_NOENT or
 * PAGED_E_PERM (its mode does not let this uid read it). */
int paged_pool_attach(paged_client *c, const char *name, paged_pool **out);

/* Attaches to shard shard of a tensor-parallel pool as a member of group (NULL or "": the
 * uid's default group), whose members share their blocks: what one rank allocates, looks up
 * or frees is the group's, and a block is published once every shard's rank published it
 * (paged(7), TENSOR-PARALLEL POOLS; since 0.1). Returns as paged_pool_attach, or
 * PAGED_E_INVAL (not a sharded pool, no such shard), PAGED_E_EXIST (that shard of the group
 * is attached). */
int paged_pool_attach_shard(paged_client *c, const char *name, uint32_t shard, const char *group,
                            paged_pool **out);

/* Detaches: the daemon drops every block reference this client held in the pool and the
 * library unmaps its memory. Returns PAGED_OK or a connection error; the handle is freed
 * either way, and so are the pool's sequences (since 0.1). */
int paged_pool_detach(paged_pool *p);

/* Removes a pool's name (owner or root only); its memory goes when the last client
 * detaches, as with an unlinked file. Returns PAGED_OK, PAGED_E_NOENT or PAGED_E_PERM (since 0.1). */
int paged_pool_destroy(paged_client *c, const char *name);

/* A pool's counters, over all its clients since it was created, as pactl info shows them
 * (since 0.1). The tiers' fields are 0 for a pool without tiers. */
typedef struct paged_pool_counts {
    uint32_t free, referenced, cached, pinned;   /* blocks in each state now */
    uint64_t lookups;         /* LOOKUP requests */
    uint64_t lookup_tokens;   /* tokens they asked for */
    uint64_t pool_hit_tokens; /* found in the pool */
    uint64_t host_hit_tokens; /* reloaded from the host tier */
    uint64_t file_hit_tokens; /* reloaded from the file tier */
    uint64_t evictions;       /* cached blocks evicted from the pool (offloaded or dropped) */
    uint64_t expired;         /* cached blocks and host units dropped by the time to live */
    uint32_t host_units;      /* the host tier's capacity, in blocks */
    uint32_t host_stored;     /* blocks stored there now */
    uint32_t file_units;      /* unit files now */
    uint64_t file_bytes;      /* their size on disk */
    uint64_t offloaded_bytes; /* copied from the pool to the host tier */
    uint64_t offload_ns;      /* time those copies took */
    uint64_t written_bytes;   /* written from the host tier to files */
    uint64_t reloaded_bytes;  /* copied back into the pool */
    uint64_t reloads;         /* LOOKUPs that reloaded blocks */
    uint64_t reload_ns;       /* time they spent reloading */
    uint64_t tier_dropped;    /* units dropped: no room below, expired, evicted, a failed copy */
    uint64_t tier_damaged;    /* unit files refused: short or failing a check */
    uint64_t tier_failures;   /* copies and writes that failed */
} paged_pool_counts;

/* Asks the daemon for an attached pool's counters. Returns PAGED_OK, PAGED_E_INVAL,
 * PAGED_E_NOENT (the pool was destroyed), PAGED_E_PERM or a connection error (since 0.1). */
int paged_pool_stats(paged_pool *p, paged_pool_counts *out);

/* Fills *info for an attached pool (since 0.1). */
void paged_pool_get_info(const paged_pool *p, paged_pool_info *info);

/* Returns a pointer through which this process reads the pool's memory (read-only unless
 * the pool is writable for it), mapping it on first use (since 0.1). On the cpu backend it
 * is a host pointer; on the cuda backend a device pointer in this process's CUDA context,
 * for which the library loads the CUDA driver at that moment. Stores NULL and returns an
 * error (PAGED_E_NOTSUP if CUDA is not available here; PAGED_E_PERM for a sealed pool, whose
 * memory the daemon never sends) otherwise. */
int paged_pool_map(paged_pool *p, void **base);

/* ===========================================================================================
 * Arenas: the client's own memory the daemon reads arguments from and writes results to.
 * The host arena is shared memory mapped by both; the data arena is the same memory on the
 * cpu backend and a device allocation the daemon exported to this client on the cuda one.
 * Requests refer to arena memory by byte offset.
 * =========================================================================================*/

typedef enum paged_arena_kind {
    PAGED_ARENA_HOST = 0,     /* metadata: block ids, tables, lengths, slots, token ids */
    PAGED_ARENA_DATA = 1,     /* tensors: queries, new keys and values, outputs */
} paged_arena_kind;

/* Returns the base address of an arena and stores its size (since 0.1). The data arena's
 * base is a device pointer on the cuda backend (mapped when first asked for). */
void *paged_arena_base(paged_client *c, paged_arena_kind kind, size_t *size);

/* Carves size bytes aligned to align (a power of two; 0 means 64) out of an arena with a
 * bump allocator; stores the offset. Returns PAGED_OK or PAGED_E_NOMEM (since 0.1). */
int paged_arena_alloc(paged_client *c, paged_arena_kind kind, size_t size, size_t align,
                      uint64_t *off);

/* Returns the arena's current allocation mark, and rewinds it to a mark taken earlier,
 * freeing everything carved since (since 0.1). */
uint64_t paged_arena_mark(const paged_client *c, paged_arena_kind kind);
void paged_arena_release(paged_client *c, paged_arena_kind kind, uint64_t mark);

/* ===========================================================================================
 * The asynchronous API: prepare requests into the submission ring, submit, reap
 * completions. Arguments live in the arenas (offsets below). A request is complete, its
 * outputs written and visible, when its completion has been reaped.
 * =========================================================================================*/

typedef enum paged_op {
    PAGED_OP_NOP = 0,         /* round trip */
    PAGED_OP_ALLOC = 1,       /* take count blocks; ids written to ids_off */
    PAGED_OP_FREE = 2,        /* drop one reference to each block in ids_off */
    PAGED_OP_APPEND = 3,      /* write new K and V into slots */
    PAGED_OP_DECODE = 4,      /* one query token per sequence */
    PAGED_OP_PREFILL = 5,     /* ragged query tokens per sequence, causal */
    PAGED_OP_FORK = 6,        /* take one more reference to blocks already held */
    PAGED_OP_COPY = 7,        /* copy whole blocks (all layers, K and V) */
    PAGED_OP_PUBLISH = 8,     /* enter full blocks in the prefix cache */
    PAGED_OP_LOOKUP = 9,      /* find a cached prefix, taking references to its blocks */
} paged_op;

#define PAGED_ALL_LAYERS (-1) /* APPEND: k and v hold every layer, [L][n][H][D] */

/* Attention options for DECODE and PREFILL. Logits are sm_scale * q.k, then soft-capped
 * (cap * tanh(x / cap)) if soft_cap > 0, then ALiBi-biased (slope * (j - i)) if alibi_off
 * is set; with window > 0 a query sees only its last window positions. */
typedef struct paged_attn_opts {
    float sm_scale;           /* 0: 1 / sqrt(head_dim) */
    float soft_cap;           /* <= 0: off */
    int32_t window;           /* 0: off; negative is refused (PAGED_E_INVAL) */
    int has_alibi;            /* nonzero: alibi_off holds num_q_heads float slopes (host arena) */
    uint64_t alibi_off;
} paged_attn_opts;

/*
 * Device-side dependencies of an APPEND, DECODE, PREFILL or COPY: 32-bit words in the
 * client's data arena (4-byte aligned offsets), so that a worker can chain its own GPU work
 * and the daemon's without a round trip through the CPU (libpaged(3), DEPENDENCIES).
 * PAGED_DEP_WAIT: the request's device work starts only once the word at wait_off satisfies
 * (int32_t) (word - wait_value) >= 0 (a counter may wrap); a wait not met within the
 * daemon's dependency_timeout_ms fails the request with PAGED_E_TIMEOUT (field
 * "dep.wait_off"), or, once its completion was posted, disconnects the client.
 * PAGED_DEP_SIGNAL: once the request's device work is done the daemon writes signal_value to
 * the word at signal_off. On the cuda backend a pass whose device requests all signal is
 * completed when it is queued on the GPU: the completion then says the request was accepted,
 * and the word says when its outputs are there. PAGED_DEP_HOST puts both words in the host
 * arena instead, for a worker that chains from its CPU: on the cuda backend the daemon's
 * stream then waits for and writes host memory, and the worker's GPU runs nothing in between
 * (a stream wait of its own makes the GPU switch between its context and the daemon's).
 */
#define PAGED_DEP_WAIT 0x1u
#define PAGED_DEP_SIGNAL 0x2u
#define PAGED_DEP_HOST 0x4u       /* the words are in the host arena (see above) */
typedef struct paged_dep {
    unsigned flags;           /* PAGED_DEP_WAIT | PAGED_DEP_SIGNAL [| PAGED_DEP_HOST], or 0 */
    uint32_t wait_value, signal_value;
    uint64_t wait_off, signal_off;
} paged_dep;

/* One request. Set op, pool (NULL for NOP), layer where the op has one, tag, and the
 * member of the union for the op; *_off fields are arena offsets (data arena for q, k, v
 * and out; host arena for the rest). dep is optional (all zero: none). */
typedef struct paged_request {
    paged_op op;
    paged_pool *pool;
    int32_t layer;
    uint64_t tag;             /* returned in the completion */
    union {
        struct { uint32_t count; uint64_t ids_off; } blocks;           /* ALLOC, FREE, FORK */
        struct {
            uint32_t num_tokens;
            paged_dtype dtype;                /* of k and v: the pool's (fp8: stored as given), or
                                                 for an fp8 pool f32, f16, bf16 (divided by the scales) */
            uint64_t k_off, v_off;            /* [layers][num_tokens][H][D] */
            uint64_t slots_off;               /* num_tokens int32; -1 skips a token */
        } append;
        struct {
            uint32_t num_seqs, num_q_heads;
            paged_dtype dtype;                /* of q and out: the pool's, or for an fp8 pool
                                                 f32, f16 or bf16; never fp8 */
            uint64_t q_off, out_off;          /* [tokens][num_q_heads][D] */
            uint64_t block_tables_off;        /* [num_seqs][bt_stride] int32 */
            uint32_t bt_stride;
            uint64_t seq_lens_off;            /* [num_seqs] int32, context incl. new tokens */
            uint64_t qo_indptr_off;           /* PREFILL: [num_seqs + 1] int32 */
            paged_attn_opts opts;
        } attn;                                                        /* DECODE, PREFILL */
        struct {
            uint32_t count;
            uint64_t src_off, dst_off;
            paged_pool *dst_pool;             /* NULL: pool itself; else another pool of this
                                                 client, writable, of pool's geometry (since 0.1) */
        } copy;                                                        /* COPY */
        struct {
            uint32_t num_blocks;
            uint64_t tokens_off;              /* num_blocks * B int32 token ids */
            uint64_t ids_off;                 /* PUBLISH: blocks; LOOKUP: receives blocks */
            uint64_t salt;
            paged_hash parent;                /* hash of the preceding block, zero at the start */
        } prefix;                                                      /* PUBLISH, LOOKUP */
    } u;
    paged_dep dep;
} paged_request;

/* A reaped completion. On error, err_field names the request field at fault (see
 * paged_field_name) and err_index the element within it. */
typedef struct paged_completion {
    uint64_t tag;
    int status;               /* PAGED_OK or a negative paged_error */
    paged_op op;
    uint32_t count;           /* blocks taken, freed, found, published, copied; tokens written */
    uint32_t err_field;
    uint32_t err_index;
    uint64_t service_ns;      /* time the daemon spent on it */
} paged_completion;

/* Returns the name of a request field ("block_tables", "seq_lens") for a completion's
 * err_field, or "none" (since 0.1). */
const char *paged_field_name(uint32_t field);

/* Returns the name of an op ("decode", "append"), as the library's messages and pactl spell
 * it, or NULL for a number that is no op (since 0.1). */
const char *paged_op_name(paged_op op);

/* Writes one request into the submission ring without waking the daemon (since 0.1).
 * Returns PAGED_OK, PAGED_E_AGAIN if the ring is full (submit and reap first), or
 * PAGED_E_INVAL for a request the library can already see is wrong. */
int paged_prep(paged_client *c, const paged_request *req);

/* Publishes every prepared request to the daemon, waking it only if it sleeps. Returns the
 * number published, or a negative error (since 0.1). */
int paged_submit(paged_client *c);

/* Copies up to max completions that are ready into out without blocking. Returns how many
 * (0 if none), or PAGED_E_RING / PAGED_E_DISCONNECTED / PAGED_E_SHUTDOWN (since 0.1). */
int paged_reap(paged_client *c, paged_completion *out, unsigned max);

/* Waits until at least one completion is ready (spinning briefly, then sleeping), then
 * reaps up to max. timeout_ms < 0 waits forever. Returns how many, PAGED_E_TIMEOUT, or a
 * connection error: a daemon that dies or shuts down ends the wait (since 0.1). */
int paged_wait(paged_client *c, paged_completion *out, unsigned max, int timeout_ms);

/* Returns the number of submitted requests whose completions have not been reaped (since 0.1). */
unsigned paged_inflight(const paged_client *c);

/* ===========================================================================================
 * Dependency words on a worker's CUDA stream (cuda backend): the stream's side of
 * paged_dep's device words, so that a worker chains its kernels and the daemon's without its
 * CPU in between, the fastest way the device it runs on allows (libpaged(3), DEPENDENCIES).
 * stream is a CUstream or cudaStream_t of the primary context of the daemon's device (the
 * CUDA runtime's); NULL is that context's legacy default stream. off is a 4-byte aligned
 * offset of a word in the data arena, or with PAGED_STREAM_HOST in the host arena (the words
 * of requests with PAGED_DEP_HOST, which pagedd sees at once without the GPU: the fastest
 * chain that holds up no other client; libpaged registers the host arena with the device on
 * first use). Neither call needs the daemon: after a daemon went away, writing a word
 * releases a stream that waits for it.
 * =========================================================================================*/

#define PAGED_STREAM_AUTO 0x0u    /* by kernels where the device runs under MPS, else MEMOP */
#define PAGED_STREAM_KERNEL 0x1u  /* a one-thread kernel that polls the word, or writes it */
#define PAGED_STREAM_MEMOP 0x2u   /* cuStreamWaitValue32, cuStreamWriteValue32 */
#define PAGED_STREAM_HOST 0x4u    /* the word is in the host arena (since 0.1) */

/* Queues on stream a wait until the word at off satisfies (int32_t) (word - value) >= 0;
 * the stream's later work starts after it and sees what the daemon wrote before the word.
 * Returns PAGED_OK, PAGED_E_INVAL (a bad offset, flags or stream), PAGED_E_NOTSUP (the cpu
 * backend, whose words the CPU waits for), or PAGED_E_DEVICE (since 0.1). */
int paged_stream_wait(paged_client *c, void *stream, uint64_t off, uint32_t value, unsigned flags);

/* Queues on stream a write of value to the word at off, after the stream's earlier work and
 * with it visible. Returns as paged_stream_wait (since 0.1). */
int paged_stream_signal(paged_client *c, void *stream, uint64_t off, uint32_t value, unsigned flags);

/* ===========================================================================================
 * The synchronous API: each call stages its arguments through the arenas, submits one
 * request, waits for it and copies results back. Pointers are host memory on the cpu
 * backend; on the cuda backend q, k, v and out are device pointers of this process's
 * current CUDA context and the rest host memory. Each returns PAGED_OK or the request's
 * error (paged_client_error then names the field and element). A call also submits what
 * paged_prep prepared and was not yet submitted; completions of asynchronous requests that
 * arrive meanwhile are kept for paged_reap and paged_wait. It waits for as long as the
 * daemon takes (the daemon may still write its staging memory), unless the connection
 * ends. It needs one request slot: PAGED_E_AGAIN while cq_entries requests are unreaped.
 * =========================================================================================*/

/* Returns after a NOP round trip (since 0.1). */
int paged_nop(paged_client *c);

/* Takes count blocks, all or nothing; ids receives them. PAGED_E_NOSPC if the pool cannot
 * supply them even after evicting cached prefix blocks (since 0.1). */
int paged_alloc(paged_pool *p, uint32_t count, int32_t *ids);

/* Drops one reference to each block (since 0.1). */
int paged_free(paged_pool *p, uint32_t count, const int32_t *ids);

/* Takes one more reference to each block, already held (since 0.1). */
int paged_fork(paged_pool *p, uint32_t count, const int32_t *ids);

/* Copies whole blocks src[i] -> dst[i]; dst blocks must be writable by this client (since 0.1). */
int paged_copy(paged_pool *p, uint32_t count, const int32_t *src, const int32_t *dst);

/* Copies whole blocks src[i] of pool from into blocks dst[i] of pool to, another pool of this
 * client of the same geometry (its number of blocks aside), which it may write; from needs only
 * be readable. Returns PAGED_OK, or an error naming dst_pool (PAGED_E_GEOMETRY, PAGED_E_DTYPE,
 * PAGED_E_READONLY), src or dst (since 0.1). */
int paged_copy_to(paged_pool *from, paged_pool *to, uint32_t count, const int32_t *src, const int32_t *dst);

/* Writes num_tokens new keys and values into slots (layer, or PAGED_ALL_LAYERS); dtype as
 * paged_request's append.dtype (since 0.1). */
int paged_append(paged_pool *p, int32_t layer, uint32_t num_tokens, paged_dtype dtype,
                 const void *k, const void *v, const int32_t *slots);

/* Arguments of the synchronous attention calls. */
typedef struct paged_attn_args {
    uint32_t num_seqs;
    uint32_t num_q_heads;
    paged_dtype dtype;                 /* of q and out: as paged_request's attn.dtype */
    const void *q;                     /* [tokens][num_q_heads][D] */
    void *out;                         /* same shape */
    const int32_t *block_tables;       /* [num_seqs][bt_stride] */
    uint32_t bt_stride;
    const int32_t *seq_lens;           /* [num_seqs] */
    const int32_t *qo_indptr;          /* PREFILL only: [num_seqs + 1] */
    float sm_scale, soft_cap;          /* as in paged_attn_opts */
    int32_t window;
    const float *alibi_slopes;         /* [num_q_heads] host floats, or NULL */
} paged_attn_args;

/* One query token per sequence against its context (since 0.1). */
int paged_decode(paged_pool *p, int32_t layer, const paged_attn_args *args);

/* qo_indptr-delimited query tokens per sequence, causally masked at the end of each
 * context (since 0.1). */
int paged_prefill(paged_pool *p, int32_t layer, const paged_attn_args *args);

/* Publishes num_blocks full blocks (ids, held by this client) with the tokens they hold,
 * continuing the chain from parent (NULL: a prompt start), in this uid's prefix scope (all
 * uids' with PAGED_POOL_SHARED_PREFIXES). Returns the number newly published or an error
 * (since 0.1). */
int paged_publish(paged_pool *p, const paged_hash *parent, uint64_t salt, uint32_t num_blocks,
                  const int32_t *tokens, const int32_t *ids);

/* Looks up to num_blocks full blocks of tokens in the prefix cache and takes a reference to
 * each block found, longest prefix first; it finds only blocks published by this uid (any
 * uid with PAGED_POOL_SHARED_PREFIXES). Returns the number found (ids receives them) or an
 * error (since 0.1). */
int paged_lookup(paged_pool *p, const paged_hash *parent, uint64_t salt, uint32_t num_blocks,
                 const int32_t *tokens, int32_t *ids);

/* ===========================================================================================
 * The prefix cache's controls (paged_prefix_pin(3)). PIN, UNPIN and EVICT name a prefix as
 * LOOKUP does, by its tokens (the library hashes them), and act in this uid's prefix scope
 * (all uids' with PAGED_POOL_SHARED_PREFIXES) on the longest prefix of them cached, up to the
 * first block not found; each needs write permission on the pool and returns that prefix's
 * length in blocks (0: none cached), or an error. num_blocks is 1 to 4000.
 * =========================================================================================*/

/* Pins the prefix: its blocks are never evicted, to make room or by the time to live, until
 * unpinned. Pins count against a limit per uid (by default a quarter of the pool's blocks;
 * root has none) and per pool (half its blocks): PAGED_E_LIMIT pins nothing (since 0.1). */
int paged_prefix_pin(paged_pool *p, const paged_hash *parent, uint64_t salt, uint32_t num_blocks,
                     const int32_t *tokens);

/* Drops the prefix's pins; its blocks age from now on as any cached block. A pin is the
 * pinning uid's to drop, or the pool owner's or root's: PAGED_E_PERM drops none. With
 * num_blocks 0 (tokens unused) it drops every pin the caller may drop, its own or, for the
 * pool's owner and root, everyone's, and returns how many (since 0.1). */
int paged_prefix_unpin(paged_pool *p, const paged_hash *parent, uint64_t salt, uint32_t num_blocks,
                       const int32_t *tokens);

/* Takes the prefix out of the cache, its pins too (as paged_prefix_unpin allows): no LOOKUP
 * finds it again; unreferenced blocks are free at once, referenced ones when their holders
 * free them (since 0.1). */
int paged_prefix_evict(paged_pool *p, const paged_hash *parent, uint64_t salt, uint32_t num_blocks,
                       const int32_t *tokens);

/* Sets the pool's time to live (the pool's owner or root): a cached block nobody references
 * and nobody pinned is dropped ttl_ms milliseconds after its last reference went; 0, a new
 * pool's, keeps it until room is needed. Up to 30 days. Returns PAGED_OK, PAGED_E_PERM,
 * PAGED_E_NOENT or PAGED_E_INVAL (since 0.1). */
int paged_pool_set_ttl(paged_client *c, const char *name, uint64_t ttl_ms);

/* ===========================================================================================
 * Sequences: the library keeps a sequence's block table and slots as tokens are added.
 * =========================================================================================*/

/* Creates an empty sequence in a pool; salt is mixed into its prefix hashes (since 0.1). */
int paged_seq_create(paged_pool *p, uint64_t salt, paged_seq **out);

/* Frees the sequence's block references and the handle (since 0.1). */
void paged_seq_destroy(paged_seq *s);

/* Returns the number of tokens in the sequence (since 0.1). */
uint32_t paged_seq_len(const paged_seq *s);

/* Returns the block table (valid until the sequence next changes) and its length (since 0.1). */
const int32_t *paged_seq_blocks(const paged_seq *s, uint32_t *num_blocks);

/*
 * Adds n tokens (their ids; NULL if prefix caching is not wanted) to the end of the
 * sequence: allocates blocks as needed, copies a shared last block first (copy-on-write),
 * and writes the new tokens' slots to slots (n int32). The caller then APPENDs their K and
 * V to those slots. Returns PAGED_OK or an error, with the sequence unchanged (since 0.1).
 */
int paged_seq_extend(paged_seq *s, uint32_t n, const int32_t *tokens, int32_t *slots);

/* Starts an empty sequence with the longest cached prefix of tokens: returns the number of
 * tokens adopted (a multiple of the block size), whose K and V need not be computed again (since 0.1). */
long paged_seq_adopt_prefix(paged_seq *s, const int32_t *tokens, uint32_t n);

/* Publishes the sequence's full blocks that are not yet published (since 0.1). */
int paged_seq_publish(paged_seq *s);

/* Creates a sequence sharing every block of s (FORK; the shared last block is copied on
 * the first write to either) (since 0.1). */
int paged_seq_fork(paged_seq *s, paged_seq **out);

/* ===========================================================================================
 * Events: what happens in the daemon, as it happens, on a connection of its own (a control
 * connection, as pactl subscribe's): clients and pools coming and going, evictions and, with
 * PAGED_EVENTS_BLOCKS, what happens to each published prefix block, for a router that sends
 * each prompt where its prefix is cached. A handle belongs to one thread at a time.
 * =========================================================================================*/

typedef struct paged_events paged_events;

/* paged_events_open's flags. */
#define PAGED_EVENTS_INSPECT 0x1u  /* also the connects and disconnects of pactl's own connections */
#define PAGED_EVENTS_BLOCKS 0x2u   /* also PAGED_EVENT_BLOCKS: each prefix block stored, moved, removed */

/* An event's type (paged_event.type). */
typedef enum paged_event_type {
    PAGED_EVENT_CONNECT = 1,       /* a client connected */
    PAGED_EVENT_DISCONNECT = 2,    /* a client went; count: block references released */
    PAGED_EVENT_POOL_CREATE = 3,   /* count: the pool's blocks */
    PAGED_EVENT_POOL_DESTROY = 4,  /* count: clients still attached; its blocks are gone with it */
    PAGED_EVENT_EVICT = 5,         /* count: cached blocks evicted from the pool */
    PAGED_EVENT_ATTACH = 6,
    PAGED_EVENT_DETACH = 7,        /* count: block references released */
    PAGED_EVENT_LOST = 8,          /* count: events missed (not read in time), each block entry
                                      counting as one: the picture has a gap */
    PAGED_EVENT_EXPIRE = 9,        /* count: cached blocks dropped by the pool's time to live */
    PAGED_EVENT_BLOCKS = 10,       /* blocks[num_blocks]: what happened to prefix blocks, in order */
} paged_event_type;

/* What happened to a block (paged_block_event.action). */
#define PAGED_BLOCK_STORED 1u      /* published in the pool: LOOKUP finds it there */
#define PAGED_BLOCK_OFFLOADED 2u   /* moved down to tier (host memory, or a file) */
#define PAGED_BLOCK_RELOADED 3u    /* brought back into the pool from tier */
#define PAGED_BLOCK_REMOVED 4u     /* gone from the daemon; tier: the last one that held it */

/* Where a block is (paged_block_event.tier). */
#define PAGED_TIER_POOL 0u         /* the pool's own memory (GPU memory on the cuda backend) */
#define PAGED_TIER_HOST 1u
#define PAGED_TIER_FILE 2u

/* One prefix block's change. */
typedef struct paged_block_event {
    uint32_t action;           /* PAGED_BLOCK_* */
    uint32_t tier;             /* PAGED_TIER_* */
    uint32_t tenant;           /* the publisher's uid, or UINT32_MAX: the pool's shared prefix scope */
    paged_hash hash;           /* as paged_hash_blocks computes it */
} paged_block_event;

/* One event. */
typedef struct paged_event {
    uint32_t type;             /* paged_event_type */
    uint32_t client_id;        /* the client it is about, or 0 */
    uint32_t pid;              /* that client's process id, or 0 */
    uint32_t count;            /* as the type says; BLOCKS: num_blocks */
    uint64_t time_ns;          /* when, CLOCK_REALTIME nanoseconds */
    char client_name[64];      /* the client's name (UTF-8, NUL-terminated), or "" */
    char pool[64];             /* the pool's name, or "" */
    const paged_block_event *blocks; /* BLOCKS: the entries, valid until the next call on the
                                        handle; otherwise NULL */
    uint32_t num_blocks;
} paged_event;

/*
 * Connects to pagedd at socket_path (NULL: as paged_connect_opts.socket_path says) and
 * subscribes to its events, with flags PAGED_EVENTS_* (since 0.1). A subscriber that is
 * neither root nor the daemon's uid receives only the block events of the prefix scope its
 * uid has in each pool. Returns PAGED_OK with *out, or PAGED_E_NOTCONN, PAGED_E_PERM,
 * PAGED_E_INVAL (unknown flags), PAGED_E_NOTSUP (a daemon without block events),
 * PAGED_E_LIMIT, PAGED_E_VERSION, PAGED_E_PROTO, PAGED_E_TIMEOUT, PAGED_E_NOMEM or
 * PAGED_E_SYSTEM, with *out NULL.
 */
int paged_events_open(const char *socket_path, unsigned flags, paged_events **out);

/* Waits up to timeout_ms (-1: forever, 0: not at all) for the next event and stores it in
 * *out. Returns PAGED_OK, PAGED_E_TIMEOUT, PAGED_E_SHUTDOWN (the daemon is shutting down),
 * PAGED_E_DISCONNECTED, or PAGED_E_PROTO for a malformed event (since 0.1). */
int paged_events_next(paged_events *ev, paged_event *out, int timeout_ms);

/* Returns a descriptor that polls readable when an event may wait, or -1 for NULL (since 0.1). */
int paged_events_fd(const paged_events *ev);

/* Returns the reason of the handle's last error, or "" (since 0.1). */
const char *paged_events_error(const paged_events *ev);

/* Closes the connection and frees the handle; NULL is ignored (since 0.1). */
void paged_events_close(paged_events *ev);

#ifdef __cplusplus
}
#endif

#endif
