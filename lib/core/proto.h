/* proto.h: paged's wire protocol: the shared channel layout, ring entries and control messages. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_CORE_PROTO_H
#define PAGED_CORE_PROTO_H

/*
 * Everything two processes exchange is defined here and nowhere else: the layout of a
 * client's channel memory (header, submission ring, completion ring, host arena), the
 * fixed-size ring entries, and the control messages on the SOCK_SEQPACKET socket.
 * All integers are in host byte order (client and daemon share a machine).
 *
 * Trust: the daemon never believes anything a client can write after the fact. It keeps
 * its own copy of every geometry it handed out, copies each submission entry out of the
 * ring before looking at it, and copies block tables and slot mappings out of the arena
 * before validating them.
 */

#include <stdint.h>

#include "paged.h"

#define PCORE_PROTO_VERSION 2u
#define PCORE_CHANNEL_MAGIC 0x4e484350u /* "PCHN" */
#define PCORE_CACHELINE 64u
#define PCORE_NAME_MAX 64u              /* pool and client names, NUL included */

/* ---------------------------------------------------------------------------------------
 * Channel memory: one memfd per client, created by the daemon, sealed against resizing.
 *
 *   offset 0                 struct pcore_channel_hdr (one 4 KiB page)
 *   sq_ctl_off               struct pcore_ring_ctl for the submission queue
 *   sq_off                   sq_entries x struct pcore_sqe
 *   cq_ctl_off               struct pcore_ring_ctl for the completion queue
 *   cq_off                   cq_entries x struct pcore_cqe
 *   arena_off                the host arena, arena_size bytes (page aligned)
 */

/* Written once by the daemon when the channel is made; read by the client. */
struct pcore_channel_hdr {
    uint32_t magic;        /* PCORE_CHANNEL_MAGIC */
    uint32_t version;      /* PCORE_PROTO_VERSION */
    uint32_t sq_entries;   /* power of two */
    uint32_t cq_entries;   /* power of two, >= sq_entries */
    uint64_t sq_ctl_off;
    uint64_t sq_off;
    uint64_t cq_ctl_off;
    uint64_t cq_off;
    uint64_t arena_off;
    uint64_t arena_size;
    uint64_t total_size;   /* size of the whole memfd */
};

/*
 * Control words of one single-producer single-consumer ring. Head belongs to the consumer,
 * tail to the producer; both run freely over 32 bits and wrap. Each word sits on its own
 * cache line so producer and consumer do not false-share. A consumer that is about to sleep
 * sets consumer_waiting (then re-checks the ring); a producer that sees it set after
 * publishing writes the consumer's wake-up pipe (lib/core/wake.h). The ring never stores its geometry here: each
 * side keeps its own copy.
 */
struct pcore_ring_ctl {
    _Alignas(PCORE_CACHELINE) uint32_t head;             /* accessed with C11 atomics */
    _Alignas(PCORE_CACHELINE) uint32_t tail;             /* accessed with C11 atomics */
    _Alignas(PCORE_CACHELINE) uint32_t consumer_waiting; /* accessed with C11 atomics */
    /* Nonzero: the producer asks the consumer not to spin before it sleeps (pagedd sets it
     * on the completion rings of the clients beyond those its CPUs can spare a spin for). */
    _Alignas(PCORE_CACHELINE) uint32_t consumer_nospin;  /* accessed with C11 atomics */
};

/* ---------------------------------------------------------------------------------------
 * Requests.
 *
 * Arena references: a *_off field is a byte offset. Tensors (queries, new keys and values,
 * outputs) live in the client's data arena: the device arena on the cuda backend, the host
 * arena on the cpu backend. Metadata the daemon must read on the CPU (block ids, block
 * tables, lengths, slot mappings, token ids, ALiBi slopes) always lives in the host arena.
 * The daemon checks every offset and length against the arena's size, overflow included.
 */
/* Opcodes are enum paged_op of paged.h; PCORE_OP_COUNT_ bounds them. */
#define PCORE_OP_COUNT_ 10

/* struct pcore_sqe.flags */
#define PCORE_SQE_ALL_LAYERS 0x1u /* APPEND: layer is ignored; k and v hold every layer */
#define PCORE_SQE_WAIT 0x2u       /* backend ops: start only once dep.wait_off reaches wait_value */
#define PCORE_SQE_SIGNAL 0x4u     /* backend ops: write signal_value to dep.signal_off when done */
#define PCORE_SQE_HOST_WORDS 0x8u /* with WAIT or SIGNAL: the words are in the host arena */

/*
 * A request's device-side dependencies (struct pcore_sqe.dep, used with PCORE_SQE_WAIT and
 * PCORE_SQE_SIGNAL): 32-bit words in the client's data arena. A wait is met once
 * (int32_t) (word - wait_value) >= 0, so a counter may wrap.
 */
struct pcore_dep_wire {
    uint64_t wait_off;     /* data arena (host arena with PCORE_SQE_HOST_WORDS), 4-byte aligned */
    uint64_t signal_off;   /* the same */
    uint32_t wait_value;
    uint32_t signal_value;
};

/* Per-request attention options (DECODE and PREFILL). */
struct pcore_attn_wire {
    float sm_scale;       /* 0 means 1/sqrt(head_dim) */
    float soft_cap;       /* > 0: logit = soft_cap * tanh(logit / soft_cap) */
    int32_t window;       /* > 0: a query attends to its last `window` positions only */
    uint32_t has_alibi;   /* nonzero: alibi_off holds num_q_heads float slopes */
    uint64_t alibi_off;   /* host arena */
};

struct pcore_req_alloc {
    uint32_t count;       /* blocks to take, all or nothing */
    uint32_t reserved;
    uint64_t ids_off;     /* host arena: count int32 block ids written on success */
};

struct pcore_req_blocks { /* FREE and FORK */
    uint32_t count;
    uint32_t reserved;
    uint64_t ids_off;     /* host arena: count int32 block ids */
};

struct pcore_req_append {
    uint32_t num_tokens;
    uint32_t dtype;       /* dtype of k and v: the pool's, or any non-fp8 one for an fp8 pool */
    uint64_t k_off;       /* data arena: [layers][num_tokens][kv_heads][head_dim] */
    uint64_t v_off;       /* data arena: same shape as k */
    uint64_t slots_off;   /* host arena: num_tokens int32 slots (block * block_size + offset; -1 skips) */
};

struct pcore_req_attn {   /* DECODE and PREFILL */
    uint32_t num_seqs;
    uint32_t num_q_heads;
    uint32_t dtype;       /* dtype of q and out: the pool's, or any non-fp8 one for an fp8 pool */
    uint32_t bt_stride;   /* int32 entries per block-table row */
    uint64_t q_off;       /* data arena: [num_tokens][num_q_heads][head_dim] */
    uint64_t out_off;     /* data arena: same shape as q */
    uint64_t bt_off;      /* host arena: [num_seqs][bt_stride] int32 block ids */
    uint64_t lens_off;    /* host arena: [num_seqs] int32 context lengths (new tokens included) */
    uint64_t qo_indptr_off; /* PREFILL: host arena, [num_seqs + 1] int32; DECODE: unused */
    struct pcore_attn_wire attn;
};

struct pcore_req_copy {
    uint32_t count;
    uint32_t dst_pool;    /* 0 or the entry's pool: the same pool; else another pool the client is
                           * attached to, writable, of the same geometry (blocks aside) */
    uint64_t src_off;     /* host arena: count int32 source blocks (held by the client) */
    uint64_t dst_off;     /* host arena: count int32 destination blocks (writable by the client) */
};

struct pcore_req_prefix { /* PUBLISH and LOOKUP */
    uint32_t num_blocks;  /* PUBLISH: blocks to publish; LOOKUP: most blocks to look for */
    uint32_t reserved;
    uint64_t tokens_off;  /* host arena: num_blocks * block_size int32 token ids */
    uint64_t ids_off;     /* host arena: PUBLISH reads, LOOKUP writes num_blocks int32 ids */
    uint64_t salt;        /* mixed into every hash (model or adapter identity) */
    paged_hash parent;    /* hash of the block before the first one; zero for a prompt start */
};

/* A submission queue entry: 128 bytes, copied whole by the daemon before it looks at it. */
struct pcore_sqe {
    uint8_t opcode;       /* enum paged_op */
    uint8_t flags;        /* PCORE_SQE_* */
    uint16_t reserved0;
    uint32_t pool;        /* pool id from create or attach */
    uint64_t tag;         /* caller's tag, returned in the completion */
    int32_t layer;        /* layer index, where the op has one */
    uint32_t reserved1;
    union {
        struct pcore_req_alloc alloc;
        struct pcore_req_blocks blocks;
        struct pcore_req_append append;
        struct pcore_req_attn attn;
        struct pcore_req_copy copy;
        struct pcore_req_prefix prefix;
        uint8_t raw[80];
    } u;
    struct pcore_dep_wire dep;   /* with PCORE_SQE_WAIT or PCORE_SQE_SIGNAL */
};

/*
 * Which field of a request an error is about, so a completion can name it together with
 * the element index (err_index) within that field.
 */
enum pcore_field {
    PCORE_FIELD_NONE = 0,
    PCORE_FIELD_OPCODE, PCORE_FIELD_POOL, PCORE_FIELD_LAYER, PCORE_FIELD_COUNT,
    PCORE_FIELD_DTYPE, PCORE_FIELD_HEADS, PCORE_FIELD_IDS, PCORE_FIELD_K, PCORE_FIELD_V,
    PCORE_FIELD_SLOTS, PCORE_FIELD_Q, PCORE_FIELD_OUT, PCORE_FIELD_BLOCK_TABLE,
    PCORE_FIELD_SEQ_LENS, PCORE_FIELD_QO_INDPTR, PCORE_FIELD_ALIBI, PCORE_FIELD_SRC,
    PCORE_FIELD_DST, PCORE_FIELD_TOKENS, PCORE_FIELD_WINDOW, PCORE_FIELD_SCALE,
    PCORE_FIELD_FLAGS, PCORE_FIELD_WAIT, PCORE_FIELD_SIGNAL, PCORE_FIELD_DST_POOL, PCORE_FIELD_COUNT_
};

/* A completion queue entry: 32 bytes. */
struct pcore_cqe {
    uint64_t tag;         /* the submission's tag */
    int32_t status;       /* PAGED_OK or a negative paged_error */
    uint32_t count;       /* op result: blocks taken, found, copied; tokens written */
    uint16_t err_field;   /* enum pcore_field, on error */
    uint16_t opcode;      /* the submission's opcode */
    uint32_t err_index;   /* element index within err_field, on error */
    uint64_t value;       /* op-specific: nanoseconds of service time */
};

_Static_assert(sizeof(struct pcore_sqe) == 128, "SQE is 128 bytes");
_Static_assert(sizeof(((struct pcore_sqe *) 0)->u) == 80, "every request body fits before dep");
_Static_assert(sizeof(struct pcore_cqe) == 32, "CQE is 32 bytes");
_Static_assert(sizeof(struct pcore_ring_ctl) == 4 * PCORE_CACHELINE, "ring control is 4 lines");

/* ---------------------------------------------------------------------------------------
 * Control messages on the SOCK_SEQPACKET socket: one message per packet, each starting
 * with struct pcore_msg_hdr. A request carries a sequence number that its reply echoes;
 * EVENT and SHUTDOWN arrive unsolicited. Any request may be answered by PCORE_MSG_ERROR
 * instead of its reply; an ERROR that refuses the connection itself (a bad HELLO, a
 * corrupt ring) carries sequence number 0 and the daemon then closes the socket. The first
 * two members of HELLO after the header never change, so a daemon of any version can read
 * a client's version and refuse it clearly.
 */
enum pcore_msg_type {
    PCORE_MSG_HELLO = 1,        /* client: first message */
    PCORE_MSG_WELCOME = 2,      /* daemon: + SCM_RIGHTS channel memfd, the write end of the
                                   SQ wake-up pipe, the read end of the CQ wake-up pipe
                                   [, device arena fd] */
    PCORE_MSG_ERROR = 3,        /* daemon: struct pcore_msg_error */
    PCORE_MSG_OK = 4,           /* daemon: bare header, status = result count (>= 0) */
    PCORE_MSG_SHUTDOWN = 5,     /* daemon, unsolicited: it is shutting down */
    PCORE_MSG_POOL_CREATE = 10, /* -> POOL_REPLY + pool fd */
    PCORE_MSG_POOL_ATTACH = 11, /* -> POOL_REPLY + pool fd */
    PCORE_MSG_POOL_REPLY = 12,
    PCORE_MSG_POOL_DETACH = 13, /* -> OK */
    PCORE_MSG_POOL_DESTROY = 14,/* -> OK, status = clients still attached */
    PCORE_MSG_STATUS = 20,      /* -> STATUS_REPLY */
    PCORE_MSG_STATUS_REPLY = 21,
    PCORE_MSG_LIST = 22,        /* -> LIST_ITEMS ... LIST_END */
    PCORE_MSG_LIST_ITEMS = 23,
    PCORE_MSG_LIST_END = 24,
    PCORE_MSG_STATS = 25,       /* -> STATS_REPLY */
    PCORE_MSG_STATS_REPLY = 26,
    PCORE_MSG_SUBSCRIBE = 27,   /* bare header or struct pcore_msg_subscribe -> OK, then EVENTs */
    PCORE_MSG_EVENT = 28,
    PCORE_MSG_KILL_CLIENT = 29, /* -> OK */
    PCORE_MSG_EVICT = 30,       /* -> OK, status = blocks evicted */
    PCORE_MSG_PREFIX = 31,      /* struct pcore_msg_prefix + hashes -> OK, status as its op says */
    PCORE_MSG_POOL_STATS = 32,  /* struct pcore_msg_pool_ref (name) -> POOL_STATS_REPLY */
    PCORE_MSG_POOL_STATS_REPLY = 33,
};

#define PCORE_HELLO_MAGIC 0x4f4c4548u     /* "HELO" */
#define PCORE_HELLO_CONTROL 0x1u           /* control-only client (pactl): no channel */
/* With PCORE_HELLO_CONTROL: a short-lived inspection connection (each pactl call). The daemon
 * logs its connect and disconnect at debug level and announces them only to subscribers that
 * ask for them (PCORE_SUBSCRIBE_INSPECT); what it does (a pool destroyed, an eviction) is
 * announced as usual. A daemon that predates the flag refuses it as unknown (PAGED_E_PROTO). */
#define PCORE_HELLO_INSPECT 0x2u
#define PCORE_MSG_MAX 65536u               /* no packet is larger */
#define PCORE_ERRMSG_MAX 240u

struct pcore_msg_hdr {
    uint32_t type;        /* enum pcore_msg_type */
    uint32_t seq;         /* request number, echoed by the reply */
    int32_t status;       /* replies: PAGED_OK or a negative paged_error */
    uint32_t len;         /* bytes of the whole message, header included */
};

struct pcore_msg_hello {
    struct pcore_msg_hdr hdr;
    uint32_t magic;            /* PCORE_HELLO_MAGIC */
    uint32_t version;          /* PCORE_PROTO_VERSION */
    uint32_t flags;            /* PCORE_HELLO_* */
    uint32_t pid;              /* informative: SO_PEERCRED is what the daemon believes */
    uint32_t sq_entries;
    uint32_t cq_entries;
    uint64_t host_arena_size;
    uint64_t data_arena_size;
    uint32_t device;           /* the daemon's device (index) of the client's data arena */
    uint32_t reserved;         /* 0 */
    char name[PCORE_NAME_MAX];
};

struct pcore_msg_welcome {
    struct pcore_msg_hdr hdr;
    uint32_t version;
    uint32_t client_id;
    uint32_t backend;          /* enum paged_backend */
    uint32_t num_fds;          /* descriptors passed with this message */
    int32_t device_ordinal;    /* daemon's device index, -1 for cpu */
    uint32_t data_arena_kind;  /* enum pcore_mem_kind of the data arena (memfd on cpu: the host arena) */
    uint8_t device_uuid[16];   /* the GPU's UUID, so clients map the right one */
    uint64_t channel_size;     /* size of the channel memfd */
    uint64_t data_arena_size;  /* cuda: device arena bytes; cpu: 0 (the host arena serves) */
    uint64_t data_arena_alloc; /* cuda: size of the exported allocation (granularity aligned) */
    uint8_t ipc_handle[64];    /* cuda legacy IPC handle when data_arena_kind says so */
    char daemon_version[32];
    uint32_t device;           /* the client's device: an index below devices (device_ordinal and
                                * device_uuid are its) */
    uint32_t devices;          /* the devices the daemon serves */
};

struct pcore_msg_error {
    struct pcore_msg_hdr hdr;  /* status: the error */
    char message[PCORE_ERRMSG_MAX]; /* names what was wrong; NUL-terminated */
};

/* How a memory object was exported. */
enum pcore_mem_kind {
    PCORE_MEM_NONE = 0,        /* not sent: a sealed pool's memory (no descriptor, no handle) */
    PCORE_MEM_MEMFD = 1,       /* host shared memory: mmap the fd */
    PCORE_MEM_CUDA_VMM = 2,    /* cuMemExportToShareableHandle POSIX fd: cuMemImportFromShareableHandle */
    PCORE_MEM_CUDA_IPC = 3,    /* cudaIpcMemHandle in ipc_handle: cudaIpcOpenMemHandle */
};

#define PCORE_ATTACH_WRITE 0x1u    /* ask for a writable mapping (granted if mode allows) */

/* Most shards a tensor-parallel pool may have. */
#define PCORE_MAX_SHARDS 16u

/* Holder ids from here on are groups of a tensor-parallel pool's workers, not clients (the
 * LIST of blocks names both). */
#define PCORE_GROUP_HOLDER_BASE 0x80000000u

/* Which shard of a tensor-parallel pool an attachment reaches, and the group of workers (of
 * one uid) whose attachments share one holder of blocks: a block one rank allocates is the
 * same block, held alike, on every rank's shard. An empty group is the uid's default one. */
struct pcore_shard_ref {
    uint32_t shard;
    uint32_t reserved;         /* 0 */
    char group[PCORE_NAME_MAX];
};

struct pcore_msg_pool_create {
    struct pcore_msg_hdr hdr;
    char name[PCORE_NAME_MAX];
    uint32_t num_layers, num_kv_heads, head_dim, block_size, dtype, num_blocks;
    uint64_t byte_budget;
    uint32_t mode;             /* 0777 bits | PAGED_POOL_SHARED_PREFIXES, SEALED or EXPORTED */
    float k_scale;
    float v_scale;
    uint32_t flags;            /* PCORE_ATTACH_* for the creator's own attachment */
    uint32_t shards;           /* 0 or 1: one memory; N (2 to PCORE_MAX_SHARDS): sharded by KV head */
    uint64_t host_tier_bytes;  /* 0: the daemon's default */
    struct pcore_shard_ref as; /* the creator's shard and group (a sharded pool only) */
    uint32_t device;           /* 0: the creator's device; n: device n - 1 (of shard 0) */
    uint32_t reserved;         /* 0 */
};

struct pcore_msg_pool_attach {
    struct pcore_msg_hdr hdr;
    char name[PCORE_NAME_MAX];
    uint32_t flags;            /* PCORE_ATTACH_* */
    uint32_t reserved;         /* 0 */
    struct pcore_shard_ref as; /* the shard and group (a sharded pool only; else zero) */
};

struct pcore_msg_pool_reply {
    struct pcore_msg_hdr hdr;  /* + SCM_RIGHTS: the pool memory fd (none for a sealed pool) */
    uint32_t pool_id;
    uint32_t num_layers, num_kv_heads, head_dim, block_size, dtype, num_blocks;
    uint32_t writable;
    uint32_t owner_uid;
    uint32_t mode;             /* as pd_pool_mode_word: one of SEALED and EXPORTED always */
    float k_scale;
    float v_scale;
    uint32_t mem_kind;         /* enum pcore_mem_kind; PCORE_MEM_NONE exactly when sealed */
    uint32_t num_fds;
    uint64_t bytes;            /* the layout's size */
    uint64_t alloc_bytes;      /* size of the exported object (>= bytes); 0 when sealed */
    uint8_t ipc_handle[64];    /* PCORE_MEM_CUDA_IPC */
    uint8_t device_uuid[16];
    uint32_t shards;           /* 1, or the pool's shards: num_kv_heads and bytes are then the shard's */
    uint32_t shard;            /* the shard attached (0 when not sharded) */
    uint32_t kv_head_offset;   /* its first KV head of the pool's (shard * num_kv_heads) */
    uint32_t device;           /* the daemon's device (index) of the attached shard's memory */
};

struct pcore_msg_pool_ref {     /* POOL_DETACH (pool_id) and POOL_DESTROY, EVICT (name) */
    struct pcore_msg_hdr hdr;
    uint32_t pool_id;
    uint32_t reserved;
    char name[PCORE_NAME_MAX];
};

/* PREFIX's ops: the prefix cache's controls. PIN, UNPIN and EVICT act on the longest prefix of
 * the chain of hashes published in the caller's prefix scope (up to the first hash not
 * found) and answer its length; UNPIN with no hashes drops every pin the caller may drop
 * (its own; every pin for the pool's owner and root) and answers how many; TTL sets the
 * pool's time to live and answers 0. */
enum pcore_prefix_op {
    PCORE_PREFIX_PIN = 1,      /* never evict or expire its blocks until unpinned */
    PCORE_PREFIX_UNPIN = 2,    /* drop their pins: they age and are evicted as any cached block */
    PCORE_PREFIX_EVICT = 3,    /* take them out of the cache (their pins too) */
    PCORE_PREFIX_TTL = 4,      /* ttl_ms: how long a cached unpinned block stays; 0: no limit */
};

/* The most hashes one PREFIX carries (the message stays under PCORE_MSG_MAX). */
#define PCORE_PREFIX_MAX_HASHES 4000u

struct pcore_msg_prefix {      /* followed by count paged_hash */
    struct pcore_msg_hdr hdr;
    uint32_t op;               /* enum pcore_prefix_op */
    uint32_t count;            /* hashes that follow: up to PCORE_PREFIX_MAX_HASHES; 0 for TTL
                                  and for UNPIN of every pin */
    uint32_t pool_id;          /* the pool, when name is "" */
    uint32_t reserved;         /* zero */
    uint64_t ttl_ms;           /* TTL: milliseconds, up to PCORE_PREFIX_MAX_TTL_MS; others: zero */
    char name[PCORE_NAME_MAX]; /* the pool by name, or "" */
};

_Static_assert(sizeof(struct pcore_msg_prefix) + PCORE_PREFIX_MAX_HASHES * sizeof(paged_hash) <= PCORE_MSG_MAX,
               "a PREFIX with the most hashes fits a packet");

/* The longest time to live: 30 days. */
#define PCORE_PREFIX_MAX_TTL_MS (30ull * 24 * 3600 * 1000)

/* SUBSCRIBE with options; a bare header asks for the same with flags 0. */
#define PCORE_SUBSCRIBE_INSPECT 0x1u       /* also the connects and disconnects of inspection
                                              connections (PCORE_HELLO_INSPECT) */
#define PCORE_SUBSCRIBE_BLOCKS 0x2u        /* also BLOCKS events: what happens to each prefix
                                              block (stored, offloaded, reloaded, removed) */
struct pcore_msg_subscribe {
    struct pcore_msg_hdr hdr;
    uint32_t flags;            /* PCORE_SUBSCRIBE_* */
    uint32_t reserved;
};

struct pcore_msg_kill {
    struct pcore_msg_hdr hdr;
    uint32_t client_id;
    uint32_t reserved;
};

struct pcore_msg_status_reply {
    struct pcore_msg_hdr hdr;
    char version[32];
    uint32_t backend;          /* enum paged_backend */
    int32_t device_ordinal;
    char device_name[64];
    uint64_t uptime_ns;
    uint32_t clients;
    uint32_t pools;
    uint64_t mem_used;         /* bytes of pool memory in referenced or cached blocks */
    uint64_t mem_total;        /* bytes of all pool memory */
    uint64_t device_mem_free;  /* cuda: free device memory; cpu: 0 */
    uint32_t healthy;          /* 0 after a sticky device error: the daemon serves no more kernels */
    uint32_t pid;
    char health[128];          /* "ok" or the error that made it unhealthy */
    uint32_t devices;          /* the devices it serves (device_*, healthy and health: the first's;
                                * LIST DEVICES: each) */
    uint32_t reserved;
};

enum pcore_list_what {
    PCORE_LIST_POOLS = 1,
    PCORE_LIST_CLIENTS = 2,
    PCORE_LIST_BLOCKS = 3,     /* blocks that are not free, of one pool (name) or all */
    PCORE_LIST_PEERS = 4,      /* the daemon's peers (none in a daemon built without UCX) */
    PCORE_LIST_DEVICES = 5,    /* the devices it serves */
};

struct pcore_msg_list {
    struct pcore_msg_hdr hdr;
    uint32_t what;             /* enum pcore_list_what */
    uint32_t reserved;
    char name[PCORE_NAME_MAX]; /* pool filter; "" for all */
};

struct pcore_pool_item {
    char name[PCORE_NAME_MAX];
    uint32_t id;
    uint32_t num_layers, num_kv_heads, head_dim, block_size, dtype, num_blocks;
    uint32_t owner_uid, mode;
    uint32_t free, referenced, cached;
    uint32_t attached;         /* clients attached */
    uint32_t destroyed;        /* name removed, waiting for the last detach */
    uint64_t bytes;
    uint64_t evictions;
    uint64_t lookups, lookup_hits;
    uint64_t lookup_tokens;    /* tokens LOOKUPs asked for (blocks times block_size) */
    uint64_t hit_tokens;       /* of them, found */
    uint64_t expired;          /* cached blocks dropped by the time to live */
    uint64_t ttl_ms;           /* the pool's time to live; 0: none */
    uint32_t pinned;           /* blocks pinned, referenced or not */
    uint32_t shards;           /* 1, or the shards of a tensor-parallel pool */
    /* The host and file tiers (all 0 where the pool has none). */
    uint32_t host_units;       /* the host tier's capacity, in units of one block */
    uint32_t host_stored;      /* units stored there */
    uint32_t file_units;       /* unit files of the pool */
    uint32_t tier_reserved;
    uint64_t file_bytes;       /* their size */
    uint64_t host_hit_tokens;  /* tokens LOOKUPs reloaded from the host tier */
    uint64_t file_hit_tokens;  /* from the file tier */
    uint64_t offloaded_bytes;  /* copied from the pool to the host tier */
    uint64_t written_bytes;    /* written from the host tier to files */
    uint64_t reloaded_bytes;   /* copied back into the pool */
    uint64_t reloads;          /* LOOKUPs that reloaded blocks */
    uint64_t reload_ns;        /* their time reloading, summed */
    uint64_t tier_dropped;     /* units dropped: no room below, expired, evicted, a failed copy */
    uint64_t tier_damaged;     /* unit files refused: short or failing a check */
    uint64_t tier_failures;    /* copies and writes that failed */
    uint64_t offload_ns;       /* time the offload copies took, summed */
    uint32_t device;           /* the device of its memory (of shard 0; shard r is on device + r,
                                * modulo the daemon's devices) */
    uint32_t device_reserved;
};

/* One device the daemon serves (LIST DEVICES). */
struct pcore_device_item {
    uint32_t index;            /* the daemon's device number: what clients and pools name */
    int32_t ordinal;           /* the CUDA runtime's, or -1 (cpu) */
    char name[64];
    uint8_t uuid[16];          /* zero on cpu */
    uint64_t mem_free;         /* cuda: free device memory; cpu: 0 */
    uint64_t pool_bytes;       /* pool memory on it (shards counted where they are) */
    uint32_t pools;            /* pools or shards with memory on it */
    uint32_t clients;          /* clients whose data arena is on it */
    uint32_t healthy;
    uint32_t reserved;
    char health[128];
};

/* One connection's prefix-cache figures since it connected: what its LOOKUPs asked for and
 * found in the pool and in each tier, what its reloads moved and took, and what its ALLOCs
 * pushed out to host tiers. */
struct pcore_prefix_stats {
    uint64_t lookups;
    uint64_t lookup_tokens;
    uint64_t pool_hit_tokens;
    uint64_t host_hit_tokens;
    uint64_t file_hit_tokens;
    uint64_t reloaded_bytes;
    uint64_t reload_ns;
    uint64_t offloaded_bytes;
};

/* POOL_STATS_REPLY: one pool's LIST item, for a client that may read the pool. */
struct pcore_msg_pool_stats_reply {
    struct pcore_msg_hdr hdr;
    struct pcore_pool_item item;
};

struct pcore_client_item {
    uint32_t id;
    uint32_t pid;
    uint32_t uid;
    uint32_t pools;            /* pools attached */
    uint64_t blocks;           /* block references held, all pools */
    uint64_t requests;         /* requests completed */
    uint64_t errors;           /* requests completed with an error */
    uint64_t connected_ns;     /* time since it connected */
    uint32_t control_only;
    uint32_t nospin;           /* told not to spin in its waits (the daemon's spin hint) */
    char name[PCORE_NAME_MAX];
    struct pcore_prefix_stats prefix;
};

/* A block item's published field. */
enum pcore_block_published {
    PCORE_BLOCK_UNPUBLISHED = 0,
    PCORE_BLOCK_PUBLISHED = 1,     /* hash and tenant as the block was published */
    PCORE_BLOCK_WITHHELD = 2,      /* published in a prefix scope the lister is not in: hash zero */
};

/* A peer of the daemon's peer module (daemon/peer/peer.h). */
enum pcore_peer_state { PCORE_PEER_CONNECTING = 0, PCORE_PEER_AUTHENTICATED = 1, PCORE_PEER_FAILED = 2 };

struct pcore_peer_item {
    char addr[80];             /* ADDR:PORT, NUL-terminated */
    uint32_t state;            /* enum pcore_peer_state */
    uint32_t outgoing;         /* 1: one of peers, asked by LOOKUPs; 0: it connected here */
    char why[128];             /* PCORE_PEER_FAILED: why, NUL-terminated */
    uint64_t blocks;           /* blocks fetched from it */
    uint64_t bytes;            /* their bytes */
    uint64_t fetch_ns;         /* time the fetches that brought blocks took, summed */
    uint64_t fetches;          /* requests made to it */
    uint64_t failures;         /* of them, failed: timeout, refused, a bad checksum, the connection */
    uint64_t auth_failures;    /* handshakes with it that failed */
    uint64_t served_blocks;    /* blocks this daemon served it */
    char transports[96];       /* the UCX transports its gets move over ("tcp/lo.0 ..."), NUL-terminated;
                                * empty until authenticated */
    uint32_t tcp_only;         /* 1: every one is TCP (no RDMA, shared memory or cuda_ipc) */
    uint32_t reserved;
};

struct pcore_block_item {
    uint32_t pool_id;
    int32_t block;
    uint32_t refcount;
    uint32_t published;        /* enum pcore_block_published */
    paged_hash hash;
    uint32_t holders[4];       /* first holders' client ids */
    uint32_t num_holders;
    uint32_t tenant;           /* published: the publisher's uid, or UINT32_MAX for a pool's
                                  shared prefix scope */
    uint32_t pinned;           /* never evicted until unpinned */
    uint32_t pinner_uid;       /* who pinned it; UINT32_MAX when not pinned or withheld */
};

struct pcore_msg_list_items {
    struct pcore_msg_hdr hdr;
    uint32_t what;
    uint32_t count;            /* items that follow, each of the type for `what` */
    /* struct pcore_pool_item / pcore_client_item / pcore_block_item items[count]; */
};

struct pcore_op_stats {
    uint64_t requests;
    uint64_t errors;
    uint64_t tokens;           /* tokens appended or attended */
    uint64_t bytes;            /* bytes of K/V read or written */
    uint64_t latency_p50_ns;   /* service time, submission seen to completion posted */
    uint64_t latency_p99_ns;
};

/* What the request engine did since the daemon started: its batches (engine passes that ran
 * backend work), their launches, and how well requests of several clients merged. */
struct pcore_engine_stats {
    uint64_t batches;          /* passes that handed work to the backend */
    uint64_t launches;         /* kernel launches made (a merged or fused one counts once) */
    uint64_t decode_batches;   /* batches with a DECODE */
    uint64_t decode_requests;  /* DECODE requests in them */
    uint64_t decode_clients;   /* clients with a DECODE in them, summed over the batches */
    uint64_t merged_decode_launches;  /* DECODE launches serving more than one request */
    uint64_t merged_decode_requests;  /* the requests they served */
    uint64_t append_requests;         /* APPEND requests run */
    uint64_t merged_append_launches;  /* APPEND launches serving more than one request */
    uint64_t merged_append_requests;  /* the requests they served */
    uint64_t backend_ns;       /* time in the backend, batches summed */
    uint64_t device_wait_ns;   /* of it, waiting for the device */
    uint64_t gather_ns;        /* time batches with a DECODE waited for late clients */
    uint64_t early_batches;    /* batches completed once queued (every request signals) */
};

struct pcore_msg_stats_reply {
    struct pcore_msg_hdr hdr;
    uint32_t num_ops;          /* PCORE_OP_COUNT_ */
    uint32_t reserved;
    struct pcore_op_stats ops[PCORE_OP_COUNT_];
    struct pcore_engine_stats engine;
    struct pcore_prefix_stats prefix;  /* the asking connection's own */
};

enum pcore_event_type {
    PCORE_EVENT_CONNECT = 1,
    PCORE_EVENT_DISCONNECT = 2,
    PCORE_EVENT_POOL_CREATE = 3,
    PCORE_EVENT_POOL_DESTROY = 4,
    PCORE_EVENT_EVICT = 5,     /* count cached blocks evicted from pool */
    PCORE_EVENT_ATTACH = 6,
    PCORE_EVENT_DETACH = 7,
    PCORE_EVENT_LOST = 8,      /* count events this subscriber missed: it did not read them in time */
    PCORE_EVENT_EXPIRE = 9,    /* count cached blocks of pool dropped by its time to live */
    PCORE_EVENT_BLOCKS = 10,   /* count struct pcore_block_entry of pool follow (subscribers
                                  with PCORE_SUBSCRIBE_BLOCKS only) */
};

struct pcore_msg_event {
    struct pcore_msg_hdr hdr;
    uint32_t event;            /* enum pcore_event_type */
    uint32_t client_id;
    uint32_t pid;
    uint32_t count;
    uint64_t time_ns;          /* CLOCK_REALTIME */
    char client_name[PCORE_NAME_MAX];
    char pool[PCORE_NAME_MAX];
};

/*
 * A BLOCKS event is struct pcore_msg_event followed by count entries (1 to
 * PCORE_EVENT_MAX_BLOCKS), hdr.len covering them; a pass's entries of one pool take as many
 * messages as they need, in the order the blocks changed. client_id, pid and client_name are
 * zero. A subscriber that is neither root nor the daemon's uid receives only the entries of
 * the prefix scope its uid has in the pool (its own uid, or the shared scope of a pool with
 * shared prefixes).
 */
#define PCORE_EVENT_MAX_BLOCKS 256u

struct pcore_block_entry {
    uint8_t action;            /* PAGED_BLOCK_STORED, _OFFLOADED, _RELOADED, _REMOVED */
    uint8_t tier;              /* PAGED_TIER_POOL, _HOST, _FILE */
    uint16_t reserved;         /* zero */
    uint32_t tenant;           /* the publisher's uid, or UINT32_MAX for a pool's shared prefix scope */
    paged_hash hash;
};

_Static_assert(sizeof(struct pcore_block_entry) == 24, "a block entry is 24 bytes");
_Static_assert(sizeof(struct pcore_msg_event) + PCORE_EVENT_MAX_BLOCKS * sizeof(struct pcore_block_entry)
               <= PCORE_MSG_MAX, "a BLOCKS event with the most entries fits a packet");

#endif
