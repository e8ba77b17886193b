/* mkseeds.c: writes the seed corpora of the fuzzing harnesses (make fuzz-seeds). */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz/validate-setup.h"
#include "lib/core/proto.h"

/*
 * Usage: mkseeds DIR. Writes DIR/control/NAME and DIR/validate/NAME, the inputs the
 * harnesses start from: for fuzz-control, conversations that reach every control message
 * (accepted and refused); for fuzz-validate, one accepted request of each opcode on pools
 * of each dtype, with the arena data it needs, plus typical refusals. The formats are those
 * fuzz-control.c and fuzz-validate.c describe. The seeds are committed; run this again only
 * when a format or the setup of a harness changes.
 */

/* A growing byte buffer. */
struct buf {
    unsigned char *p;
    size_t n, cap;
};

/* Appends len bytes; returns the offset they start at. */
static size_t put(struct buf *b, const void *data, size_t len)
{
    if (b->n + len > b->cap) {
        b->cap = (b->n + len) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (b->p == NULL) {
            perror("mkseeds");
            exit(1);
        }
    }
    size_t at = b->n;
    if (data != NULL)
        memcpy(b->p + at, data, len);
    else
        memset(b->p + at, 0, len);
    b->n += len;
    return at;
}

/* Pads to a multiple of align; returns the new length. */
static size_t pad(struct buf *b, size_t align)
{
    while (b->n % align != 0)
        put(b, NULL, 1);
    return b->n;
}

static const char *outdir;

/* Writes b as corpus file dir/name; returns nothing (exits on error). */
static void emit(const char *dir, const char *name, const struct buf *b)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%s", outdir, dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(b->p, 1, b->n, f) != b->n || fclose(f) != 0) {
        fprintf(stderr, "mkseeds: %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

/* ---- fuzz-control: a setup byte, then records of a 16-bit length and a message. */

/* Appends one record; returns nothing. */
static void rec(struct buf *b, const void *msg, size_t len)
{
    unsigned char l[2] = { (unsigned char) (len & 0xff), (unsigned char) (len >> 8) };
    put(b, l, 2);
    put(b, msg, len);
}

/* Appends a HELLO record; returns nothing. */
static void hello(struct buf *b, uint32_t flags, uint32_t sq, uint64_t arena, const char *name)
{
    struct pcore_msg_hello h;
    memset(&h, 0, sizeof h);
    h.hdr = (struct pcore_msg_hdr) { PCORE_MSG_HELLO, 1, 0, sizeof h };
    h.magic = PCORE_HELLO_MAGIC;
    h.version = PCORE_PROTO_VERSION;
    h.flags = flags;
    h.pid = 4242;
    h.sq_entries = sq;
    h.cq_entries = sq * 2;
    h.host_arena_size = arena;
    snprintf(h.name, sizeof h.name, "%s", name);
    rec(b, &h, sizeof h);
}

/* Appends a POOL_CREATE record; returns nothing. */
static void create(struct buf *b, uint32_t seq, const char *name, uint32_t layers, uint32_t heads,
                   uint32_t dim, uint32_t bs, uint32_t dtype, uint32_t blocks, uint64_t budget,
                   uint32_t mode, uint32_t flags)
{
    struct pcore_msg_pool_create m;
    memset(&m, 0, sizeof m);
    m.hdr = (struct pcore_msg_hdr) { PCORE_MSG_POOL_CREATE, seq, 0, sizeof m };
    snprintf(m.name, sizeof m.name, "%s", name);
    m.num_layers = layers;
    m.num_kv_heads = heads;
    m.head_dim = dim;
    m.block_size = bs;
    m.dtype = dtype;
    m.num_blocks = blocks;
    m.byte_budget = budget;
    m.mode = mode;
    m.flags = flags;
    if (dtype == PAGED_DTYPE_FP8_E4M3) {
        m.k_scale = 0.25f;
        m.v_scale = 4.0f;
    }
    rec(b, &m, sizeof m);
}

/* Appends a POOL_ATTACH record; returns nothing. */
static void attach(struct buf *b, uint32_t seq, const char *name, uint32_t flags)
{
    struct pcore_msg_pool_attach m;
    memset(&m, 0, sizeof m);
    m.hdr = (struct pcore_msg_hdr) { PCORE_MSG_POOL_ATTACH, seq, 0, sizeof m };
    snprintf(m.name, sizeof m.name, "%s", name);
    m.flags = flags;
    rec(b, &m, sizeof m);
}

/* Appends a POOL_CREATE of a tensor-parallel pool name of shards shards (2 layers, heads KV
 * heads, D 64, block 16, f32, 16 blocks), its creator attached as shard of group; returns
 * nothing. */
static void create_sharded(struct buf *b, uint32_t seq, const char *name, uint32_t heads, uint32_t shards,
                           uint32_t shard, const char *group)
{
    struct pcore_msg_pool_create m;
    memset(&m, 0, sizeof m);
    m.hdr = (struct pcore_msg_hdr) { PCORE_MSG_POOL_CREATE, seq, 0, sizeof m };
    snprintf(m.name, sizeof m.name, "%s", name);
    m.num_layers = 2;
    m.num_kv_heads = heads;
    m.head_dim = 64;
    m.block_size = 16;
    m.dtype = PAGED_DTYPE_F32;
    m.num_blocks = 16;
    m.mode = 0600;
    m.flags = PCORE_ATTACH_WRITE;
    m.shards = shards;
    m.as.shard = shard;
    snprintf(m.as.group, sizeof m.as.group, "%s", group);
    rec(b, &m, sizeof m);
}

/* Appends a POOL_ATTACH of shard of pool name in group; returns nothing. */
static void attach_shard(struct buf *b, uint32_t seq, const char *name, uint32_t shard, const char *group)
{
    struct pcore_msg_pool_attach m;
    memset(&m, 0, sizeof m);
    m.hdr = (struct pcore_msg_hdr) { PCORE_MSG_POOL_ATTACH, seq, 0, sizeof m };
    snprintf(m.name, sizeof m.name, "%s", name);
    m.flags = PCORE_ATTACH_WRITE;
    m.as.shard = shard;
    snprintf(m.as.group, sizeof m.as.group, "%s", group);
    rec(b, &m, sizeof m);
}

/* Appends a pool_ref record (DETACH, DESTROY, EVICT); returns nothing. */
static void pool_ref(struct buf *b, uint32_t type, uint32_t seq, uint32_t id, const char *name)
{
    struct pcore_msg_pool_ref m;
    memset(&m, 0, sizeof m);
    m.hdr = (struct pcore_msg_hdr) { type, seq, 0, sizeof m };
    m.pool_id = id;
    snprintf(m.name, sizeof m.name, "%s", name);
    rec(b, &m, sizeof m);
}

/* Appends a PREFIX record of op on pool name (or id) with n hashes (seeded by h) and ttl_ms;
 * returns nothing. */
static void prefix(struct buf *b, uint32_t seq, uint32_t op, uint32_t id, const char *name, uint32_t n,
                   uint64_t h, uint64_t ttl_ms)
{
    unsigned char m[sizeof(struct pcore_msg_prefix) + 4 * sizeof(paged_hash)];
    struct pcore_msg_prefix p;
    memset(&p, 0, sizeof p);
    size_t len = sizeof p + (size_t) n * sizeof(paged_hash);
    p.hdr = (struct pcore_msg_hdr) { PCORE_MSG_PREFIX, seq, 0, (uint32_t) len };
    p.op = op;
    p.count = n;
    p.pool_id = id;
    p.ttl_ms = ttl_ms;
    snprintf(p.name, sizeof p.name, "%s", name);
    memcpy(m, &p, sizeof p);
    for (uint32_t i = 0; i < n && i < 4; i++) {
        paged_hash x = { h + i, ~(h + i) };
        memcpy(m + sizeof p + i * sizeof x, &x, sizeof x);
    }
    rec(b, m, len);
}

/* Appends a bare header record (STATUS, STATS, SUBSCRIBE); returns nothing. */
static void bare(struct buf *b, uint32_t type, uint32_t seq)
{
    struct pcore_msg_hdr h = { type, seq, 0, sizeof h };
    rec(b, &h, sizeof h);
}

/* Appends a LIST record; returns nothing. */
static void list(struct buf *b, uint32_t seq, uint32_t what, const char *name)
{
    struct pcore_msg_list m;
    memset(&m, 0, sizeof m);
    m.hdr = (struct pcore_msg_hdr) { PCORE_MSG_LIST, seq, 0, sizeof m };
    m.what = what;
    snprintf(m.name, sizeof m.name, "%s", name);
    rec(b, &m, sizeof m);
}

/* Appends a KILL_CLIENT record; returns nothing. */
static void kill_client(struct buf *b, uint32_t seq, uint32_t id)
{
    struct pcore_msg_kill m;
    memset(&m, 0, sizeof m);
    m.hdr = (struct pcore_msg_hdr) { PCORE_MSG_KILL_CLIENT, seq, 0, sizeof m };
    m.client_id = id;
    rec(b, &m, sizeof m);
}

/* Starts a control input with its setup byte; returns the buffer. */
static struct buf cstart(unsigned setup)
{
    struct buf b = { NULL, 0, 0 };
    unsigned char s = (unsigned char) setup;
    put(&b, &s, 1);
    return b;
}

/* Setup bits of fuzz-control.c. */
enum { ROOT = 0, OWNER = 1, GROUP = 2, STRANGER = 3, BYSTANDER = 4, TIGHT = 8 };

/* Writes the fuzz-control seeds; returns nothing. */
static void control_seeds(void)
{
    struct buf b;

    b = cstart(OWNER);
    hello(&b, 0, 8, 64u << 10, "seed");
    emit("control", "hello-channel", &b);

    b = cstart(ROOT);
    hello(&b, PCORE_HELLO_CONTROL, 0, 0, "pactl");
    bare(&b, PCORE_MSG_STATUS, 2);
    bare(&b, PCORE_MSG_STATS, 3);
    list(&b, 4, PCORE_LIST_POOLS, "");
    emit("control", "control-status", &b);

    /* An inspection connection (pactl's) that subscribes to every event, then destroys. */
    b = cstart(ROOT | BYSTANDER);
    hello(&b, PCORE_HELLO_CONTROL | PCORE_HELLO_INSPECT, 0, 0, "pactl");
    struct pcore_msg_subscribe sub = { { PCORE_MSG_SUBSCRIBE, 2, 0, sizeof sub }, PCORE_SUBSCRIBE_INSPECT, 0 };
    rec(&b, &sub, sizeof sub);
    pool_ref(&b, PCORE_MSG_POOL_DESTROY, 3, 0, "base");
    emit("control", "inspect-subscribe-destroy", &b);

    /* Refused HELLOs: magic, version, length, flags, name, type. */
    b = cstart(OWNER);
    hello(&b, 0, 8, 0, "x");
    b.p[1 + 2 + sizeof(struct pcore_msg_hdr)] ^= 0xff;
    emit("control", "hello-bad-magic", &b);
    b = cstart(OWNER);
    hello(&b, 0, 8, 0, "x");
    b.p[1 + 2 + sizeof(struct pcore_msg_hdr) + 4] = 9;
    emit("control", "hello-bad-version", &b);
    b = cstart(OWNER);
    hello(&b, 0x80, 8, 0, "x");
    emit("control", "hello-bad-flags", &b);
    b = cstart(OWNER);
    {
        struct pcore_msg_hello h;
        memset(&h, 'A', sizeof h);
        h.hdr = (struct pcore_msg_hdr) { PCORE_MSG_HELLO, 1, 0, sizeof h };
        h.magic = PCORE_HELLO_MAGIC;
        h.version = PCORE_PROTO_VERSION;
        h.flags = 0;
        rec(&b, &h, sizeof h);
    }
    emit("control", "hello-unterminated", &b);
    b = cstart(OWNER);
    {
        struct pcore_msg_hello h;
        memset(&h, 0, sizeof h);
        h.hdr = (struct pcore_msg_hdr) { PCORE_MSG_HELLO, 1, 0, sizeof h };
        h.magic = PCORE_HELLO_MAGIC;
        h.version = PCORE_PROTO_VERSION;
        rec(&b, &h, 12);
        emit("control", "hello-short", &b);
    }
    b = cstart(OWNER);
    bare(&b, PCORE_MSG_STATUS, 1);
    emit("control", "hello-not-first", &b);

    /* The owner with a bystander: every message, most accepted. */
    b = cstart(OWNER | BYSTANDER);
    hello(&b, 0, 16, 128u << 10, "worker");
    create(&b, 2, "p1", 2, 2, 64, 16, PAGED_DTYPE_F16, 32, 0, 0644, PCORE_ATTACH_WRITE);
    attach(&b, 3, "base", PCORE_ATTACH_WRITE);
    bare(&b, PCORE_MSG_SUBSCRIBE, 4);
    list(&b, 5, PCORE_LIST_POOLS, "");
    list(&b, 6, PCORE_LIST_CLIENTS, "");
    list(&b, 7, PCORE_LIST_BLOCKS, "");
    list(&b, 8, PCORE_LIST_BLOCKS, "base");
    bare(&b, PCORE_MSG_STATUS, 9);
    bare(&b, PCORE_MSG_STATS, 10);
    pool_ref(&b, PCORE_MSG_EVICT, 11, 0, "base");
    pool_ref(&b, PCORE_MSG_POOL_DETACH, 12, 2, "");
    pool_ref(&b, PCORE_MSG_POOL_DESTROY, 13, 0, "p1");
    pool_ref(&b, PCORE_MSG_POOL_DESTROY, 14, 1, "");
    kill_client(&b, 15, 1);
    list(&b, 16, PCORE_LIST_CLIENTS, "");
    emit("control", "owner-everything", &b);

    /* Root destroys the base pool under the bystander, evicts by id, kills both. */
    b = cstart(ROOT | BYSTANDER);
    hello(&b, PCORE_HELLO_CONTROL, 0, 0, "admin");
    bare(&b, PCORE_MSG_SUBSCRIBE, 2);
    pool_ref(&b, PCORE_MSG_POOL_DESTROY, 3, 0, "base");
    list(&b, 4, PCORE_LIST_BLOCKS, "");
    pool_ref(&b, PCORE_MSG_EVICT, 5, 1, "");
    kill_client(&b, 6, 1);
    list(&b, 7, PCORE_LIST_POOLS, "");
    kill_client(&b, 8, 2);
    emit("control", "root-destroy-kill", &b);

    /* The prefix cache's controls: pin, unpin, evict a prefix, ttl; refusals of each field. */
    b = cstart(OWNER | BYSTANDER);
    hello(&b, PCORE_HELLO_CONTROL, 0, 0, "prefix");
    prefix(&b, 2, PCORE_PREFIX_PIN, 0, "base", 2, 1, 0);
    prefix(&b, 3, PCORE_PREFIX_UNPIN, 0, "base", 2, 1, 0);
    prefix(&b, 4, PCORE_PREFIX_EVICT, 1, "", 1, 1, 0);
    prefix(&b, 5, PCORE_PREFIX_TTL, 0, "base", 0, 0, 1000);
    prefix(&b, 6, PCORE_PREFIX_TTL, 0, "base", 0, 0, PCORE_PREFIX_MAX_TTL_MS + 1);
    prefix(&b, 7, 9, 0, "base", 1, 1, 0);
    prefix(&b, 8, PCORE_PREFIX_PIN, 0, "base", 0, 0, 0);
    prefix(&b, 9, PCORE_PREFIX_PIN, 0, "no-such", 1, 1, 0);
    prefix(&b, 10, PCORE_PREFIX_TTL, 0, "base", 1, 1, 5);
    emit("control", "prefix-controls", &b);

    /* A stranger is refused everything on the base pool and the bystander. */
    b = cstart(STRANGER | BYSTANDER);
    hello(&b, 0, 8, 0, "stranger");
    attach(&b, 2, "base", 0);
    pool_ref(&b, PCORE_MSG_POOL_DESTROY, 3, 0, "base");
    pool_ref(&b, PCORE_MSG_EVICT, 4, 0, "base");
    kill_client(&b, 5, 1);
    kill_client(&b, 6, 99);
    pool_ref(&b, PCORE_MSG_POOL_DETACH, 7, 1, "");
    emit("control", "stranger-refused", &b);

    /* A group member attaches read-only though it asks for write, cannot evict. */
    b = cstart(GROUP);
    hello(&b, 0, 8, 0, "group");
    attach(&b, 2, "base", PCORE_ATTACH_WRITE);
    attach(&b, 3, "base", 0);
    pool_ref(&b, PCORE_MSG_EVICT, 4, 0, "base");
    pool_ref(&b, PCORE_MSG_POOL_DETACH, 5, 1, "");
    emit("control", "group-readonly", &b);

    /* Pool creation: fp8, a byte budget, refusals of every kind, limits. */
    b = cstart(OWNER | TIGHT);
    hello(&b, PCORE_HELLO_CONTROL, 0, 0, "creator");
    create(&b, 2, "fp8", 1, 1, 128, 32, PAGED_DTYPE_FP8_E4M3, 16, 0, 0600, PCORE_ATTACH_WRITE);
    create(&b, 3, "budget", 4, 8, 256, 8, PAGED_DTYPE_BF16, 0, 1u << 20, 0, 0);
    create(&b, 4, "odd", 1, 1, 100, 16, PAGED_DTYPE_F32, 4, 0, 0, 0);
    create(&b, 5, "bad name!", 1, 1, 64, 16, PAGED_DTYPE_F32, 4, 0, 0, 0);
    create(&b, 6, "base", 1, 1, 64, 16, PAGED_DTYPE_F32, 4, 0, 0, 0);
    create(&b, 7, "huge", 4096, 4096, 256, 32, PAGED_DTYPE_F32, 0, UINT64_MAX, 0, 0);
    create(&b, 8, "mode", 1, 1, 64, 8, PAGED_DTYPE_F16, 4, 0, 01777, 0);
    emit("control", "create-variants", &b);

    /* Tensor-parallel pools: made, attached shard by shard and group by group, refused. */
    b = cstart(OWNER);
    hello(&b, PCORE_HELLO_CONTROL, 0, 0, "ranks");
    create_sharded(&b, 2, "tp", 4, 2, 0, "model");
    attach_shard(&b, 3, "tp", 1, "model");
    attach_shard(&b, 4, "tp", 1, "model");
    attach_shard(&b, 5, "tp", 2, "model");
    attach_shard(&b, 6, "tp", 0, "");
    attach_shard(&b, 7, "tp", 1, "bad group!");
    attach_shard(&b, 8, "base", 1, "");
    create_sharded(&b, 9, "tp3", 4, 3, 0, "");
    create_sharded(&b, 10, "tp17", 34, 17, 0, "");
    create_sharded(&b, 11, "tpbad", 4, 2, 5, "g");
    pool_ref(&b, PCORE_MSG_POOL_DESTROY, 12, 0, "tp");
    emit("control", "sharded", &b);

    b = cstart(OWNER);
    hello(&b, 0, 4096, 1u << 30, "big");
    create(&b, 2, "a", 1, 2, 80, 16, PAGED_DTYPE_F32, 8, 0, 0666, PCORE_ATTACH_WRITE);
    create(&b, 3, "b", 3, 1, 96, 8, PAGED_DTYPE_F16, 8, 0, 0600, 0);
    list(&b, 4, PCORE_LIST_BLOCKS, "a");
    pool_ref(&b, PCORE_MSG_POOL_DESTROY, 5, 0, "a");
    pool_ref(&b, PCORE_MSG_POOL_DETACH, 6, 2, "");
    list(&b, 7, PCORE_LIST_POOLS, "");
    emit("control", "create-destroy-detach", &b);

    /* The tight client limit refuses a second channel. */
    b = cstart(OWNER | BYSTANDER | TIGHT);
    hello(&b, 0, 8, 0, "second");
    emit("control", "too-many-clients", &b);

    /* Malformed control messages after a good HELLO. */
    b = cstart(OWNER);
    hello(&b, 0, 8, 0, "sloppy");
    {
        struct pcore_msg_hdr h = { PCORE_MSG_STATUS, 2, 0, 99 };
        rec(&b, &h, sizeof h);
        h = (struct pcore_msg_hdr) { PCORE_MSG_POOL_CREATE, 3, 0, sizeof h };
        rec(&b, &h, sizeof h);
        h = (struct pcore_msg_hdr) { 77, 4, 0, sizeof h };
        rec(&b, &h, sizeof h);
        h = (struct pcore_msg_hdr) { PCORE_MSG_HELLO, 5, 0, sizeof h };
        rec(&b, &h, sizeof h);
        rec(&b, &h, 7);
    }
    list(&b, 6, 9, "");
    {
        struct pcore_msg_list m;
        memset(&m, 'z', sizeof m);
        m.hdr = (struct pcore_msg_hdr) { PCORE_MSG_LIST, 7, 0, sizeof m };
        m.what = PCORE_LIST_POOLS;
        rec(&b, &m, sizeof m);
    }
    attach(&b, 8, "base", 0x10);
    attach(&b, 9, "", 0);
    pool_ref(&b, PCORE_MSG_EVICT, 10, 0, "no-such");
    pool_ref(&b, PCORE_MSG_POOL_DESTROY, 11, 42, "");
    rec(&b, NULL, 0);
    emit("control", "malformed", &b);
}

/* ---- fuzz-validate: a setup byte, the 128-byte entry, then the arena. */

/* One validate input under construction: the entries done, the current one, the arena. */
struct vin {
    unsigned setup;
    struct pcore_sqe done[7];
    unsigned ndone;
    struct pcore_sqe sqe;
    struct buf arena;
};

/* Starts a request of opcode on pool; returns it. */
static struct vin vstart(uint8_t opcode, uint32_t pool)
{
    struct vin v;
    memset(&v, 0, sizeof v);
    v.sqe.opcode = opcode;
    v.sqe.pool = pool;
    v.sqe.tag = 0x1234;
    return v;
}

/* Ends the current entry of v and starts the next, of opcode on pool; returns nothing. */
static void vnext(struct vin *v, uint8_t opcode, uint32_t pool)
{
    v->done[v->ndone++] = v->sqe;
    memset(&v->sqe, 0, sizeof v->sqe);
    v->sqe.opcode = opcode;
    v->sqe.pool = pool;
    v->sqe.tag = 0x1234 + v->ndone;
}

/* Writes a validate input; returns nothing. */
static void vemit(const char *name, struct vin *v)
{
    struct buf b = { NULL, 0, 0 };
    unsigned char s = (unsigned char) (v->setup | v->ndone << 3);
    put(&b, &s, 1);
    put(&b, v->done, v->ndone * sizeof v->done[0]);
    put(&b, &v->sqe, sizeof v->sqe);
    put(&b, v->arena.p, v->arena.n);
    emit("validate", name, &b);
    free(b.p);
    free(v->arena.p);
}

/* Appends n int32 to the arena (4-aligned); returns their offset. */
static uint64_t ints(struct buf *a, const int32_t *x, size_t n)
{
    pad(a, 4);
    return put(a, x, n * 4);
}

/* Returns the bits of a small float in dtype (f32, f16 or bf16) for element i. */
static void element(unsigned char *dst, int32_t dtype, unsigned i)
{
    float f = (float) ((int) ((i * 37u) % 17u) - 8) / 8.0f;
    if (dtype == PAGED_DTYPE_F32) {
        memcpy(dst, &f, 4);
    } else if (dtype == PAGED_DTYPE_BF16) {
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t h = (uint16_t) (u >> 16);
        memcpy(dst, &h, 2);
    } else {
        /* f16 of the same value: exact for these eighths. */
        uint16_t h = 0;
        if (f != 0) {
            float a = f < 0 ? -f : f;
            int e = 0;
            while (a >= 2.0f) {
                a /= 2;
                e++;
            }
            while (a < 1.0f) {
                a *= 2;
                e--;
            }
            h = (uint16_t) ((f < 0) << 15 | (unsigned) (e + 15) << 10
                            | (unsigned) ((a - 1.0f) * 1024.0f));
        }
        memcpy(dst, &h, 2);
    }
}

/* Appends n elements of dtype (aligned to 16); returns their offset. */
static uint64_t tensor(struct buf *a, int32_t dtype, size_t n)
{
    size_t es = dtype == PAGED_DTYPE_F32 ? 4 : 2;
    pad(a, 16);
    uint64_t at = put(a, NULL, n * es);
    for (size_t i = 0; i < n; i++)
        element(a->p + at + i * es, dtype, (unsigned) i);
    return at;
}

/* Reserves n zero bytes (aligned to 16); returns their offset. */
static uint64_t space(struct buf *a, size_t n)
{
    pad(a, 16);
    return put(a, NULL, n);
}

/* Emits seed name: a COPY of the three blocks src of pool into dst of dst_pool (0: the same
 * pool). Returns nothing. */
static void copy_seed(const char *name, uint32_t pool, uint32_t dst_pool, const int32_t *src, const int32_t *dst)
{
    struct vin v = vstart(PAGED_OP_COPY, pool);
    v.sqe.u.copy.count = 3;
    v.sqe.u.copy.dst_pool = dst_pool;
    v.sqe.u.copy.src_off = ints(&v.arena, src, 3);
    v.sqe.u.copy.dst_off = ints(&v.arena, dst, 3);
    vemit(name, &v);
}

/* Fills v's current entry with an APPEND of the given slots, its data in v's arena;
 * returns nothing. */
static void append_into(struct vin *v, int all, int32_t layer, int32_t src_dtype, const int32_t *slots,
                        uint32_t n)
{
    const struct fv_pool *p = &fv_pools[v->sqe.pool - 1];
    v->sqe.opcode = PAGED_OP_APPEND;
    v->sqe.flags = all ? PCORE_SQE_ALL_LAYERS : 0;
    v->sqe.layer = layer;
    uint32_t layers = all ? p->num_layers : 1;
    size_t elems = (size_t) layers * n * p->num_kv_heads * p->head_dim;
    v->sqe.u.append.num_tokens = n;
    v->sqe.u.append.dtype = (uint32_t) src_dtype;
    v->sqe.u.append.slots_off = ints(&v->arena, slots, n);
    v->sqe.u.append.k_off = tensor(&v->arena, src_dtype, elems);
    v->sqe.u.append.v_off = tensor(&v->arena, src_dtype, elems);
}

/* Builds an APPEND of the given slots; returns the input. */
static struct vin append(uint32_t pool, int all, int32_t layer, int32_t src_dtype, const int32_t *slots,
                         uint32_t n)
{
    struct vin v = vstart(PAGED_OP_APPEND, pool);
    append_into(&v, all, layer, src_dtype, slots, n);
    return v;
}

/* Fills v's current entry (DECODE or PREFILL, on its pool) with ns sequences of lens, rows of
 * the block table (stride entries each), qo (PREFILL, ns + 1 entries) and nq query heads,
 * its data in v's arena; returns nothing. */
static void attn_into(struct vin *v, int32_t dtype, uint32_t nq, uint32_t ns, const int32_t *lens,
                      const int32_t *bt, uint32_t stride, const int32_t *qo)
{
    uint32_t head_dim = fv_pools[v->sqe.pool - 1].head_dim;
    struct pcore_req_attn *a = &v->sqe.u.attn;
    v->sqe.layer = 0;
    a->num_seqs = ns;
    a->num_q_heads = nq;
    a->dtype = (uint32_t) dtype;
    a->bt_stride = stride;
    a->bt_off = ints(&v->arena, bt, (size_t) ns * stride);
    a->lens_off = ints(&v->arena, lens, ns);
    uint32_t rows = ns;
    if (v->sqe.opcode == PAGED_OP_PREFILL) {
        a->qo_indptr_off = ints(&v->arena, qo, ns + 1);
        rows = (uint32_t) qo[ns];
    }
    size_t elems = (size_t) rows * nq * head_dim;
    a->q_off = tensor(&v->arena, dtype, elems);
    a->out_off = space(&v->arena, elems * (dtype == PAGED_DTYPE_F32 ? 4 : 2));
}

/* Builds a DECODE or PREFILL (see attn_into); returns the input. */
static struct vin attn(uint8_t opcode, uint32_t pool, int32_t dtype, uint32_t nq, uint32_t ns,
                       const int32_t *lens, const int32_t *bt, uint32_t stride, const int32_t *qo)
{
    struct vin v = vstart(opcode, pool);
    attn_into(&v, dtype, nq, ns, lens, bt, stride, qo);
    return v;
}

/* Writes the fuzz-validate seeds; returns nothing. */
static void validate_seeds(void)
{
    /* Block groups of validate-setup.h for the 64-block pools (q = 4). */
    enum { W0 = 0, FORKED = 4, MINE_PUB = 8, W1 = 12, SHARED = 16, CACHED = 20, OTHERS = 24, FREE = 32 };
    struct vin v;

    v = vstart(PAGED_OP_NOP, 0);
    vemit("nop", &v);

    v = vstart(PAGED_OP_ALLOC, 2);
    v.sqe.u.alloc.count = 4;
    v.sqe.u.alloc.ids_off = space(&v.arena, 16);
    vemit("alloc", &v);
    v = vstart(PAGED_OP_ALLOC, 1);
    v.setup = 3; /* a limit of two references more than held */
    v.sqe.u.alloc.count = 3;
    v.sqe.u.alloc.ids_off = space(&v.arena, 12);
    vemit("alloc-limit", &v);
    v = vstart(PAGED_OP_ALLOC, 6);
    v.sqe.u.alloc.count = 20;
    v.sqe.u.alloc.ids_off = space(&v.arena, 80);
    vemit("alloc-nospc", &v);

    {
        int32_t ids[] = { W0, W0 + 1, FORKED, SHARED };
        v = vstart(PAGED_OP_FREE, 2);
        v.sqe.u.blocks.count = 4;
        v.sqe.u.blocks.ids_off = ints(&v.arena, ids, 4);
        vemit("free", &v);
        v = vstart(PAGED_OP_FORK, 3);
        v.sqe.u.blocks.count = 4;
        v.sqe.u.blocks.ids_off = ints(&v.arena, ids, 4);
        vemit("fork", &v);
        int32_t bad[] = { W0, OTHERS };
        v = vstart(PAGED_OP_FREE, 1);
        v.sqe.u.blocks.count = 2;
        v.sqe.u.blocks.ids_off = ints(&v.arena, bad, 2);
        vemit("free-notheld", &v);
        int32_t twice[] = { W0, W0 };
        v = vstart(PAGED_OP_FREE, 4);
        v.sqe.u.blocks.count = 2;
        v.sqe.u.blocks.ids_off = ints(&v.arena, twice, 2);
        vemit("free-twice", &v);
    }

    {
        int32_t slots[] = { W0 * 8 + 0, W0 * 8 + 7, -1, W1 * 8 + 3 };
        v = append(2, 0, 1, PAGED_DTYPE_F16, slots, 4);
        vemit("append-f16", &v);
        v = append(1, 1, 0, PAGED_DTYPE_F32, slots, 4);
        vemit("append-f32-all-layers", &v);
        v = append(3, 0, 0, PAGED_DTYPE_BF16, slots, 4);
        vemit("append-bf16", &v);
        v = append(4, 0, 1, PAGED_DTYPE_F32, slots, 4);
        vemit("append-fp8-from-f32", &v);
        v = append(4, 1, 0, PAGED_DTYPE_BF16, slots, 4);
        vemit("append-fp8-from-bf16", &v);
        int32_t ro[] = { FORKED * 8 + 1 };
        v = append(2, 0, 0, PAGED_DTYPE_F16, ro, 1);
        vemit("append-readonly", &v);
        int32_t dup[] = { W1 * 8, W1 * 8 };
        v = append(2, 0, 0, PAGED_DTYPE_F16, dup, 2);
        vemit("append-duplicate", &v);
        v = append(5, 0, 0, PAGED_DTYPE_BF16, slots, 1);
        vemit("append-readonly-pool", &v);
        int32_t s6[] = { 0 * 16 + 5, 6 * 16 + 15 }; /* pool 6: q = 2, writable 0-1 and 6-7 */
        v = append(6, 0, 0, PAGED_DTYPE_F16, s6, 2);
        vemit("append-pool6", &v);
    }

    {
        /* Two sequences: one over the client's own blocks, one over shared ones. */
        int32_t lens[] = { 13, 30 };
        int32_t bt[] = { W0, FORKED, -5, 99, SHARED, MINE_PUB, W1, SHARED + 1 };
        v = attn(PAGED_OP_DECODE, 2, PAGED_DTYPE_F16, 4, 2, lens, bt, 4, NULL);
        vemit("decode-f16-gqa", &v);
        v = attn(PAGED_OP_DECODE, 1, PAGED_DTYPE_F32, 2, 2, lens, bt, 4, NULL);
        v.sqe.u.attn.attn.soft_cap = 30.0f;
        v.sqe.u.attn.attn.window = 7;
        v.sqe.u.attn.attn.sm_scale = 0.2f;
        vemit("decode-f32-softcap-window", &v);
        v = attn(PAGED_OP_DECODE, 4, PAGED_DTYPE_BF16, 2, 2, lens, bt, 4, NULL);
        float slopes[] = { 0.5f, 0.25f };
        pad(&v.arena, 4);
        v.sqe.u.attn.attn.has_alibi = 1;
        v.sqe.u.attn.attn.alibi_off = put(&v.arena, slopes, sizeof slopes);
        vemit("decode-fp8-alibi", &v);
        v = attn(PAGED_OP_DECODE, 5, PAGED_DTYPE_BF16, 2, 2, lens, bt, 4, NULL);
        vemit("decode-readonly-pool", &v);
        int32_t bad[] = { W0, OTHERS, 0, 0 };
        v = attn(PAGED_OP_DECODE, 3, PAGED_DTYPE_BF16, 2, 1, lens + 1, bad, 4, NULL);
        vemit("decode-notheld", &v);
        int32_t qo[] = { 0, 5, 9 };
        v = attn(PAGED_OP_PREFILL, 2, PAGED_DTYPE_F16, 2, 2, lens, bt, 4, qo);
        vemit("prefill-f16", &v);
        v = attn(PAGED_OP_PREFILL, 4, PAGED_DTYPE_BF16, 2, 2, lens, bt, 4, qo);
        v.sqe.u.attn.attn.window = 4;
        vemit("prefill-fp8-window", &v);
        int32_t lens6[] = { 40 };
        int32_t bt6[] = { 0, 2, 1, 8 };   /* pool 6: q = 2, shared block 8 */
        int32_t qo6[] = { 0, 3 };
        v = attn(PAGED_OP_PREFILL, 6, PAGED_DTYPE_F16, 8, 1, lens6, bt6, 4, qo6);
        vemit("prefill-pool6-gqa", &v);
        v = attn(PAGED_OP_DECODE, 6, PAGED_DTYPE_F16, 4, 1, lens6, bt6, 4, NULL);
        vemit("decode-pool6", &v);
    }

    {
        int32_t src[] = { FORKED, SHARED, W0 };
        int32_t dst[] = { W1, W1 + 1, W1 + 2 };
        int32_t dst_ro[] = { W1, SHARED, W1 + 3 };
        copy_seed("copy", 2, 0, src, dst);
        copy_seed("copy-readonly-dst", 4, 0, src, dst_ro);
        /* Into another pool: from pool 5 (bf16, attached read-only) into pool 3 (bf16); back
         * into pool 5, which may not be written; into pool 6, of another geometry. */
        copy_seed("copy-across", 5, 3, src, dst);
        copy_seed("copy-across-readonly-dst", 3, 5, src, dst);
        copy_seed("copy-across-geometry", 2, 6, src, dst);
    }

    {
        /* PUBLISH two of the client's writable blocks under fresh tokens. */
        int32_t ids[] = { W0, W0 + 1 };
        int32_t tokens[16];
        for (int i = 0; i < 16; i++)
            tokens[i] = 7000 + i;
        v = vstart(PAGED_OP_PUBLISH, 2);
        v.sqe.u.prefix.num_blocks = 2;
        v.sqe.u.prefix.tokens_off = ints(&v.arena, tokens, 16);
        v.sqe.u.prefix.ids_off = ints(&v.arena, ids, 2);
        v.sqe.u.prefix.salt = 3;
        vemit("publish", &v);

        /* LOOKUP the other holder's chain: shared blocks, then cached ones. */
        int32_t chain[8 * 8];
        for (int i = 0; i < 64; i++)
            chain[i] = FV_TOKENS_OTHER + i;
        v = vstart(PAGED_OP_LOOKUP, 2);
        v.sqe.u.prefix.num_blocks = 8;
        v.sqe.u.prefix.tokens_off = ints(&v.arena, chain, 64);
        v.sqe.u.prefix.ids_off = space(&v.arena, 32);
        v.sqe.u.prefix.salt = FV_SALT;
        vemit("lookup-chain", &v);
        v = vstart(PAGED_OP_LOOKUP, 6);
        v.setup = 2;
        v.sqe.u.prefix.num_blocks = 4;
        v.sqe.u.prefix.tokens_off = ints(&v.arena, chain, 64);
        v.sqe.u.prefix.ids_off = space(&v.arena, 16);
        vemit("lookup-pool6-limit", &v);
        int32_t mine[4 * 8];
        for (int i = 0; i < 32; i++)
            mine[i] = FV_TOKENS_MINE + i;
        v = vstart(PAGED_OP_LOOKUP, 5);
        v.sqe.u.prefix.num_blocks = 4;
        v.sqe.u.prefix.tokens_off = ints(&v.arena, mine, 32);
        v.sqe.u.prefix.ids_off = space(&v.arena, 16);
        vemit("lookup-mine-readonly-pool", &v);
    }

    /* Several entries: passes as batch.h makes them. */
    {
        int32_t lens[] = { 13, 30, 5 };
        int32_t bt[] = { W0, FORKED, -5, 99, SHARED, MINE_PUB, W1, SHARED + 1, W1 + 1, 0, 0, 0 };
        /* Three DECODEs of one pool and options: one merged launch. */
        v = vstart(PAGED_OP_DECODE, 2);
        attn_into(&v, PAGED_DTYPE_F16, 4, 2, lens, bt, 4, NULL);
        vnext(&v, PAGED_OP_DECODE, 2);
        attn_into(&v, PAGED_DTYPE_F16, 4, 1, lens + 2, bt + 8, 4, NULL);
        vnext(&v, PAGED_OP_DECODE, 2);
        attn_into(&v, PAGED_DTYPE_F16, 4, 3, lens, bt, 4, NULL);
        vemit("multi-decode-merged", &v);

        /* The second DECODE reads the first one's output: the next pass. */
        v = vstart(PAGED_OP_DECODE, 1);
        attn_into(&v, PAGED_DTYPE_F32, 2, 1, lens, bt, 4, NULL);
        vnext(&v, PAGED_OP_DECODE, 1);
        v.sqe = v.done[0];
        v.sqe.tag = 0x1235;
        v.sqe.u.attn.q_off = v.done[0].u.attn.out_off;
        v.sqe.u.attn.out_off = space(&v.arena, 2 * 64 * 4);
        vemit("multi-decode-chained", &v);

        /* ALLOC, an APPEND into a writable block, a PREFILL, a DECODE, then a NOP. */
        int32_t slots[] = { W1 * 8 + 2, W1 * 8 + 3 };
        int32_t qo[] = { 0, 2, 3 };
        v = vstart(PAGED_OP_ALLOC, 3);
        v.sqe.u.alloc.count = 2;
        v.sqe.u.alloc.ids_off = space(&v.arena, 8);
        vnext(&v, PAGED_OP_APPEND, 3);
        append_into(&v, 0, 0, PAGED_DTYPE_BF16, slots, 2);
        vnext(&v, PAGED_OP_PREFILL, 3);
        attn_into(&v, PAGED_DTYPE_BF16, 2, 2, lens, bt, 4, qo);
        vnext(&v, PAGED_OP_DECODE, 3);
        attn_into(&v, PAGED_DTYPE_BF16, 2, 2, lens, bt, 4, NULL);
        vnext(&v, PAGED_OP_NOP, 0);
        vemit("multi-alloc-append-prefill-decode", &v);

        /* COPY, then DECODEs of two pools, then a LOOKUP (next pass). */
        int32_t src[] = { SHARED }, dst[] = { W1 + 2 };
        int32_t chain[8 * 8];
        for (int i = 0; i < 64; i++)
            chain[i] = FV_TOKENS_OTHER + i;
        v = vstart(PAGED_OP_COPY, 4);
        v.sqe.u.copy.count = 1;
        v.sqe.u.copy.src_off = ints(&v.arena, src, 1);
        v.sqe.u.copy.dst_off = ints(&v.arena, dst, 1);
        vnext(&v, PAGED_OP_DECODE, 4);
        attn_into(&v, PAGED_DTYPE_F32, 2, 1, lens, bt, 4, NULL);
        vnext(&v, PAGED_OP_DECODE, 2);
        attn_into(&v, PAGED_DTYPE_F16, 2, 1, lens, bt, 4, NULL);
        vnext(&v, PAGED_OP_LOOKUP, 2);
        v.sqe.u.prefix.num_blocks = 8;
        v.sqe.u.prefix.tokens_off = ints(&v.arena, chain, 64);
        v.sqe.u.prefix.ids_off = space(&v.arena, 32);
        vemit("multi-copy-decode-lookup", &v);

        /* FORK, PUBLISH and FREE between them, all allocator ops: one pass. */
        int32_t ids[] = { W0 + 2, W0 + 3 };
        int32_t tokens[16];
        for (int i = 0; i < 16; i++)
            tokens[i] = 9000 + i;
        v = vstart(PAGED_OP_FORK, 2);
        v.sqe.u.blocks.count = 1;
        v.sqe.u.blocks.ids_off = ints(&v.arena, ids, 1);
        vnext(&v, PAGED_OP_PUBLISH, 2);
        v.sqe.u.prefix.num_blocks = 2;
        v.sqe.u.prefix.tokens_off = ints(&v.arena, tokens, 16);
        v.sqe.u.prefix.ids_off = ints(&v.arena, ids, 2);
        vnext(&v, PAGED_OP_FREE, 2);
        v.sqe.u.blocks.count = 2;
        v.sqe.u.blocks.ids_off = ints(&v.arena, ids, 2);
        vemit("multi-fork-publish-free", &v);
    }

    /* An APPEND or COPY, then a FREE, FORK or PUBLISH of a block it touches: those must
     * wait for the next pass, or the backend would run the APPEND or COPY on a block the
     * client no longer holds, or may no longer write (found by fuzz-validate). */
    {
        int32_t slots[] = { W0 * 8 + 1 };
        int32_t ids[] = { W0 };
        v = vstart(PAGED_OP_APPEND, 2);
        append_into(&v, 0, 0, PAGED_DTYPE_F16, slots, 1);
        vnext(&v, PAGED_OP_FREE, 2);
        v.sqe.u.blocks.count = 1;
        v.sqe.u.blocks.ids_off = ints(&v.arena, ids, 1);
        vemit("regress-append-then-free", &v);
        int32_t src[] = { W0 }, dst[] = { W1 };
        v = vstart(PAGED_OP_COPY, 3);
        v.sqe.u.copy.count = 1;
        v.sqe.u.copy.src_off = ints(&v.arena, src, 1);
        v.sqe.u.copy.dst_off = ints(&v.arena, dst, 1);
        vnext(&v, PAGED_OP_FREE, 3);
        v.sqe.u.blocks.count = 2;
        int32_t both[] = { W0, W1 };
        v.sqe.u.blocks.ids_off = ints(&v.arena, both, 2);
        vemit("regress-copy-then-free", &v);
        v = vstart(PAGED_OP_APPEND, 1);
        append_into(&v, 1, 0, PAGED_DTYPE_F32, slots, 1);
        vnext(&v, PAGED_OP_FORK, 1);
        v.sqe.u.blocks.count = 1;
        v.sqe.u.blocks.ids_off = ints(&v.arena, ids, 1);
        vemit("regress-append-then-fork", &v);
        int32_t tokens[8];
        for (int i = 0; i < 8; i++)
            tokens[i] = 4000 + i;
        v = vstart(PAGED_OP_APPEND, 4);
        append_into(&v, 0, 1, PAGED_DTYPE_F16, slots, 1);
        vnext(&v, PAGED_OP_PUBLISH, 4);
        v.sqe.u.prefix.num_blocks = 1;
        v.sqe.u.prefix.tokens_off = ints(&v.arena, tokens, 8);
        v.sqe.u.prefix.ids_off = ints(&v.arena, ids, 1);
        vemit("regress-append-then-publish", &v);
    }

    /* A DECODE of no sequences with a block-table stride past INT32_MAX: the stride must be
     * refused even then, as the kernels take it as an int32 (found by fuzz-validate). */
    v = vstart(PAGED_OP_DECODE, 1);
    v.sqe.u.attn.num_seqs = 0;
    v.sqe.u.attn.num_q_heads = 2;
    v.sqe.u.attn.dtype = PAGED_DTYPE_F32;
    v.sqe.u.attn.bt_stride = 0x80003282u;
    space(&v.arena, 64);
    vemit("regress-decode-no-seqs-huge-stride", &v);
    v = vstart(PAGED_OP_PREFILL, 2);
    v.sqe.u.attn.num_seqs = 0;
    v.sqe.u.attn.num_q_heads = 2;
    v.sqe.u.attn.dtype = PAGED_DTYPE_F16;
    v.sqe.u.attn.bt_stride = 0xffffffffu;
    space(&v.arena, 64);
    vemit("regress-prefill-no-seqs-huge-stride", &v);

    /* Refused at the front: opcode, flags, pool, layer. */
    v = vstart(42, 2);
    vemit("bad-opcode", &v);
    v = vstart(PAGED_OP_DECODE, 2);
    v.sqe.flags = PCORE_SQE_ALL_LAYERS;
    vemit("bad-flags", &v);
    v = vstart(PAGED_OP_FREE, 77);
    vemit("bad-pool", &v);
    v = vstart(PAGED_OP_DECODE, 1);
    v.sqe.layer = 2;
    vemit("bad-layer", &v);

    /* Dependency words: an APPEND whose wait is met, then a DECODE (of host-arena words) whose
     * wait is met too but which must wait for the next pass, as an earlier request of its
     * client is in this one; a wait not met; words refused. */
    {
        int32_t slots[] = { W0 * 8 + 2, W1 * 8 + 4 };
        int32_t lens[] = { 13, 30 };
        int32_t bt[] = { W0, FORKED, -5, 99, SHARED, MINE_PUB, W1, SHARED + 1 };
        v = vstart(PAGED_OP_APPEND, 2);
        uint64_t words = space(&v.arena, 16);
        append_into(&v, 0, 1, PAGED_DTYPE_F16, slots, 2);
        v.sqe.flags |= PCORE_SQE_WAIT | PCORE_SQE_SIGNAL;
        v.sqe.dep = (struct pcore_dep_wire) { .wait_off = words, .signal_off = words + 4, .wait_value = 3,
                                              .signal_value = 7 };
        vnext(&v, PAGED_OP_DECODE, 2);
        attn_into(&v, PAGED_DTYPE_F16, 4, 2, lens, bt, 4, NULL);
        v.sqe.flags = PCORE_SQE_WAIT | PCORE_SQE_SIGNAL | PCORE_SQE_HOST_WORDS;
        v.sqe.dep = (struct pcore_dep_wire) { .wait_off = words + 4, .signal_off = words + 8, .wait_value = 7,
                                              .signal_value = 1 };
        /* The DECODE's word is reached already: only the rule keeps it out of the APPEND's pass. */
        uint32_t three = 3, seven = 7;
        memcpy(v.arena.p + words, &three, 4);
        memcpy(v.arena.p + words + 4, &seven, 4);
        vemit("deps-chain", &v);

        v = attn(PAGED_OP_DECODE, 1, PAGED_DTYPE_F32, 2, 2, lens, bt, 4, NULL);
        words = space(&v.arena, 8);
        v.sqe.flags = PCORE_SQE_WAIT;
        v.sqe.dep = (struct pcore_dep_wire) { .wait_off = words, .wait_value = 5 };
        vemit("deps-wait-unmet", &v);
        v = attn(PAGED_OP_DECODE, 1, PAGED_DTYPE_F32, 2, 2, lens, bt, 4, NULL);
        words = space(&v.arena, 8);
        v.setup = 1u << 6; /* the wait times out at once */
        v.sqe.flags = PCORE_SQE_WAIT | PCORE_SQE_SIGNAL;
        v.sqe.dep = (struct pcore_dep_wire) { .wait_off = words, .signal_off = words + 4, .wait_value = 5,
                                              .signal_value = 9 };
        vnext(&v, PAGED_OP_NOP, 0);
        vemit("deps-wait-timeout", &v);
        /* Two waits in vain in one pass: only the first times out at once (found by
         * fuzz-validate, a model that timed out both). */
        v = attn(PAGED_OP_DECODE, 1, PAGED_DTYPE_F32, 2, 2, lens, bt, 4, NULL);
        words = space(&v.arena, 8);
        v.setup = 1u << 6;
        v.sqe.flags = PCORE_SQE_WAIT;
        v.sqe.dep = (struct pcore_dep_wire) { .wait_off = words, .wait_value = 5 };
        vnext(&v, PAGED_OP_DECODE, 1);
        attn_into(&v, PAGED_DTYPE_F32, 2, 2, lens, bt, 4, NULL);
        v.sqe.flags = PCORE_SQE_WAIT;
        v.sqe.dep = (struct pcore_dep_wire) { .wait_off = words + 4, .wait_value = 6 };
        vemit("regress-two-waits-time-out", &v);

        v = attn(PAGED_OP_DECODE, 2, PAGED_DTYPE_F16, 4, 2, lens, bt, 4, NULL);
        v.sqe.flags = PCORE_SQE_WAIT;
        v.sqe.dep = (struct pcore_dep_wire) { .wait_off = 1ull << 40, .wait_value = 1 };
        vnext(&v, PAGED_OP_NOP, 0);
        v.sqe.flags = PCORE_SQE_SIGNAL;
        vnext(&v, PAGED_OP_DECODE, 2);
        attn_into(&v, PAGED_DTYPE_F16, 4, 2, lens, bt, 4, NULL);
        v.sqe.flags = PCORE_SQE_HOST_WORDS;
        vemit("deps-refused", &v);
    }
}

/* Writes both corpora under argv[1]; returns 0 or 1. */
int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mkseeds DIR\n");
        return 1;
    }
    outdir = argv[1];
    char path[4096];
    snprintf(path, sizeof path, "%s/control", outdir);
    mkdir(outdir, 0755);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/validate", outdir);
    mkdir(path, 0755);
    control_seeds();
    validate_seeds();
    return 0;
}
