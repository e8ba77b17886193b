/* sealed-t.c: a sealed pool's memory reaches no client; no request changes a published block or writes read-only. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paged.h"
#include "kernels/kernels.h"
#include "tests/hard/hard.h"
#include "tests/service/arena-io.h"
#include "tests/tap/pagedd.h"

/*
 * Root creates three pools over the raw protocol: "sealed" (mode 0666, which the default
 * pool-memory seals), "exported" (0666 | PAGED_POOL_EXPORTED) and "ro" (0444: read-only for
 * the tenant), every one with shared prefixes, so that the tenant's LOOKUP finds root's
 * prompt. Root's client fills and publishes the prompt in "sealed" and decodes over it; a
 * forked tenant (uid nobody when the test runs as root, else a second client of the same uid:
 * the write rules hold for any client) attaches the pools and attacks the prompt; then root
 * decodes again and must get the same bits. With PAGED_TEST_BACKEND=cuda the daemon runs the
 * cuda backend and both processes fill their device arenas through the CUDA runtime; the
 * tenant is forked before the test's process touches CUDA.
 */

/* The pools: 2 layers, 2 KV heads, head_dim 64, blocks of 16, f32, 32 blocks. */
#define L 2
#define H 2
#define D 64
#define B 16
#define N 32
#define QH 4             /* query heads */
#define NB 2             /* blocks of the prompt */
#define X 5              /* tokens the tenant adds after the adopted prompt */
#define SALT 7u
#define TENANT_UID 65534 /* nobody */
#define TOL 1e-4

/* The tenant's report, one int per step (a step that did not run stays -999). */
enum {
    R_CONNECT, R_ATTACH, R_FDS_SEALED, R_MEMFD_SEALED, R_INFO_SEALED, R_MAP_SEALED, R_MAP_WHY, R_BASES,
    R_APPEND_UNHELD, R_LOOKUP, R_APPEND_PUBLISHED, R_COPY_ONTO, R_FORK_APPEND, R_PUBLISH_OTHER, R_LOOKUP_OTHER,
    R_PUBLISH_OVER, R_LOOKUP_AGAIN, R_ADOPT, R_EXTEND_FRESH, R_APPEND_OWN, R_DECODE_ERR, R_PREFILL_ERR,
    R_RO_ATTACH, R_RO_WRITABLE, R_RO_ALLOC, R_RO_APPEND, R_RO_COPY, R_RO_PUBLISH, R_RO_MAP,
    R_EXP_ATTACH, R_EXP_FDS, R_EXP_MEMFD, R_EXP_MAP,
    R_COUNT
};

static struct pagedd daemon_;
static int use_cuda;
static int32_t prompt[NB * B], other[NB * B];
static int32_t owner_ids[NB];    /* root's prompt blocks; the tenant gets them through its go pipe */
static pk_cache ref;             /* the host copy of the pools' geometry and of root's prompt */
static tap_rng rng;

/* Returns the number of this process's open descriptors, and in *pool_memfds how many of them
 * are the cpu backend's pool memory (a memfd named "paged-pool"). Returns -1 if /proc cannot
 * be read. */
static int count_fds(int *pool_memfds)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int n = 0, own = dirfd(d);
    *pool_memfds = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == own)
            continue;
        char path[300], target[256];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        target[len > 0 ? len : 0] = '\0';
        n++;
        if (strstr(target, "memfd:paged-pool") != NULL)
            (*pool_memfds)++;
    }
    closedir(d);
    return n;
}

/* Submits r through a's client and waits for its completion into *comp. Returns 0, or -1 when
 * it could not be submitted or was not answered. */
static int run(const struct aio_client *a, const paged_request *r, paged_completion *comp)
{
    return paged_prep(a->c, r) == PAGED_OK && paged_submit(a->c) == 1 && paged_wait(a->c, comp, 1, 60000) == 1
               ? 0 : -1;
}

/* Returns 1 when r through a is refused with status and its completion names field, else 0. */
static int refused(const struct aio_client *a, const paged_request *r, int status, const char *field)
{
    paged_completion comp;
    return run(a, r, &comp) == 0 && comp.status == status && strcmp(paged_field_name(comp.err_field), field) == 0;
}

/* Returns status of an APPEND through a of n random tokens (every layer) into slots, with the
 * same tokens APPENDed to the host copy *mirror where the daemon took them and mirror is not
 * NULL; -999 when the arguments could not be placed. */
static int append(const struct aio_client *a, uint32_t n, const int32_t *slots, pk_cache *mirror)
{
    size_t elems = (size_t) L * n * H * D;
    float *k = malloc(elems * 4), *v = malloc(elems * 4);
    uint64_t mark_h = paged_arena_mark(a->c, PAGED_ARENA_HOST), mark_d = paged_arena_mark(a->c, PAGED_ARENA_DATA);
    uint64_t koff, voff, soff;
    int rc = -999;
    if (k != NULL && v != NULL && paged_arena_alloc(a->c, PAGED_ARENA_DATA, elems * 4, 256, &koff) == PAGED_OK
        && paged_arena_alloc(a->c, PAGED_ARENA_DATA, elems * 4, 256, &voff) == PAGED_OK
        && paged_arena_alloc(a->c, PAGED_ARENA_HOST, n * 4, 64, &soff) == PAGED_OK) {
        tap_rng_fill_uniform(&rng, k, elems, -1.0, 1.0);
        tap_rng_fill_uniform(&rng, v, elems, -1.0, 1.0);
        memcpy(a->host + soff, slots, n * 4);
        paged_request r = {
            .op = PAGED_OP_APPEND, .pool = a->pool, .layer = PAGED_ALL_LAYERS, .tag = 1,
            .u.append = { .num_tokens = n, .dtype = PAGED_DTYPE_F32, .k_off = koff, .v_off = voff, .slots_off = soff },
        };
        paged_completion comp;
        if (aio_put(a->cuda, a->data, koff, k, elems * 4) == 0 && aio_put(a->cuda, a->data, voff, v, elems * 4) == 0
            && run(a, &r, &comp) == 0)
            rc = comp.status;
        pk_append_args ra = { .cache = *mirror, .layer_begin = 0, .num_layers = L, .num_tokens = (int32_t) n,
                              .src_dtype = PAGED_DTYPE_F32, .k = k, .v = v, .slot_mapping = slots };
        if (rc == PAGED_OK && mirror != NULL && pk_ref_append(&ra) != 0)
            rc = -999;
    }
    paged_arena_release(a->c, PAGED_ARENA_HOST, mark_h);
    paged_arena_release(a->c, PAGED_ARENA_DATA, mark_d);
    free(k);
    free(v);
    return rc;
}

/*
 * Runs a DECODE (qlen 0) or a PREFILL of qlen query rows through a on layer 1 over one
 * sequence of len tokens in blocks table (nblk of them), with the queries q (random from rng
 * where fresh), and compares its output with the CPU reference over mirror. Stores the output
 * in out (qlen or 1 rows of QH * D floats). Returns the worst row error, or -1 when the
 * request failed.
 */
static double attend(const struct aio_client *a, const pk_cache *mirror, const int32_t *table, int nblk, int len,
                     int qlen, float *q, int fresh, float *out)
{
    const int rows = qlen > 0 ? qlen : 1;
    const size_t nq = (size_t) rows * QH * D;
    uint64_t mark_h = paged_arena_mark(a->c, PAGED_ARENA_HOST), mark_d = paged_arena_mark(a->c, PAGED_ARENA_DATA);
    uint64_t qoff, ooff, toff, loff, ioff;
    float *want = malloc(nq * sizeof *want);
    double err = -1;
    if (fresh)
        tap_rng_fill_uniform(&rng, q, nq, -1.0, 1.0);
    if (want != NULL && paged_arena_alloc(a->c, PAGED_ARENA_DATA, nq * 4, 256, &qoff) == PAGED_OK
        && paged_arena_alloc(a->c, PAGED_ARENA_DATA, nq * 4, 256, &ooff) == PAGED_OK
        && paged_arena_alloc(a->c, PAGED_ARENA_HOST, (size_t) nblk * 4, 64, &toff) == PAGED_OK
        && paged_arena_alloc(a->c, PAGED_ARENA_HOST, 4, 64, &loff) == PAGED_OK
        && paged_arena_alloc(a->c, PAGED_ARENA_HOST, 8, 64, &ioff) == PAGED_OK
        && aio_put(a->cuda, a->data, qoff, q, nq * 4) == 0 && aio_poison(a->cuda, a->data, ooff, nq * 4) == 0) {
        int32_t indptr[2] = { 0, rows };
        memcpy(a->host + toff, table, (size_t) nblk * 4);
        memcpy(a->host + loff, &len, 4);
        memcpy(a->host + ioff, indptr, 8);
        paged_request r = {
            .op = qlen > 0 ? PAGED_OP_PREFILL : PAGED_OP_DECODE, .pool = a->pool, .layer = 1, .tag = 2,
            .u.attn = { .num_seqs = 1, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32, .q_off = qoff, .out_off = ooff,
                        .block_tables_off = toff, .bt_stride = (uint32_t) nblk, .seq_lens_off = loff,
                        .qo_indptr_off = qlen > 0 ? ioff : 0 },
        };
        paged_completion comp;
        pk_attn_opts opts = { 1.0f / sqrtf((float) D), 0, 0, NULL };
        int ref_rc;
        if (qlen > 0) {
            pk_prefill_args pa = { .cache = *mirror, .layer = 1, .num_seqs = 1, .num_q_heads = QH,
                                   .q_dtype = PAGED_DTYPE_F32, .causal = 1, .total_q = rows, .max_qo_len = rows,
                                   .q = q, .out = want, .qo_indptr = indptr, .block_tables = table, .bt_stride = nblk,
                                   .seq_lens = &len, .opts = opts };
            ref_rc = pk_ref_prefill(&pa);
        } else {
            pk_decode_args da = { .cache = *mirror, .layer = 1, .num_seqs = 1, .num_q_heads = QH,
                                  .q_dtype = PAGED_DTYPE_F32, .q = q, .out = want, .block_tables = table,
                                  .bt_stride = nblk, .seq_lens = &len, .opts = opts };
            ref_rc = pk_ref_decode(&da);
        }
        if (ref_rc == 0 && run(a, &r, &comp) == 0 && comp.status == PAGED_OK
            && aio_get(a->cuda, a->data, ooff, out, nq * 4) == 0)
            err = aio_row_error(out, want, (size_t) rows * QH, D);
    }
    paged_arena_release(a->c, PAGED_ARENA_HOST, mark_h);
    paged_arena_release(a->c, PAGED_ARENA_DATA, mark_d);
    free(want);
    return err;
}

/* Returns a paged request of op on a's pool with the host arena offset off for its ids or
 * slots (count of them): the shapes of the tenant's attacks. */
static paged_request req_of(const struct aio_client *a, paged_op op, uint32_t count, uint64_t off, uint64_t off2)
{
    paged_request r = { .op = op, .pool = a->pool, .layer = 0, .tag = 3 };
    switch (op) {
    case PAGED_OP_APPEND:
        r.u.append = (typeof(r.u.append)) { .num_tokens = count, .dtype = PAGED_DTYPE_F32, .k_off = 0,
                                            .v_off = 0, .slots_off = off };
        break;
    case PAGED_OP_COPY: r.u.copy = (typeof(r.u.copy)) { .count = count, .src_off = off, .dst_off = off2 }; break;
    case PAGED_OP_PUBLISH:
        r.u.prefix = (typeof(r.u.prefix)) { .num_blocks = count, .tokens_off = off2, .ids_off = off, .salt = SALT };
        break;
    default: r.u.blocks = (typeof(r.u.blocks)) { .count = count, .ids_off = off }; break;
    }
    return r;
}

/* The tenant's attacks on root's published prompt in the sealed pool t (attached, bases
 * found), and its own work over the adopted prompt. Fills res. */
static void tenant_sealed(struct aio_client *t, int *res)
{
    uint64_t off, off2;
    if (paged_arena_alloc(t->c, PAGED_ARENA_HOST, 64, 64, &off) != PAGED_OK
        || paged_arena_alloc(t->c, PAGED_ARENA_HOST, NB * B * 4, 64, &off2) != PAGED_OK)
        return;
    int32_t *w = (int32_t *) (t->host + off);
    w[0] = owner_ids[0] * B;
    paged_request r = req_of(t, PAGED_OP_APPEND, 1, off, 0);
    res[R_APPEND_UNHELD] = refused(t, &r, PAGED_E_NOTHELD, "slots");
    int32_t got[NB];
    res[R_LOOKUP] = paged_lookup(t->pool, NULL, SALT, NB, prompt, got) == NB && memcmp(got, owner_ids, sizeof got) == 0;
    w[0] = owner_ids[NB - 1] * B + B - 1;
    res[R_APPEND_PUBLISHED] = refused(t, &r, PAGED_E_READONLY, "slots");
    int32_t own;
    if (paged_alloc(t->pool, 1, &own) != PAGED_OK)
        return;
    w[0] = own;
    w[1] = owner_ids[0];
    r = req_of(t, PAGED_OP_COPY, 1, off, off + 4);
    res[R_COPY_ONTO] = refused(t, &r, PAGED_E_READONLY, "dst");
    w[0] = owner_ids[0] * B + 3;
    r = req_of(t, PAGED_OP_APPEND, 1, off, 0);
    res[R_FORK_APPEND] = paged_fork(t->pool, 1, owner_ids) == PAGED_OK && refused(t, &r, PAGED_E_READONLY, "slots")
                         && paged_free(t->pool, 1, owner_ids) == PAGED_OK;
    /* Publishing root's blocks under other tokens, or its own under the prompt's, enters
     * nothing: a published block keeps its one hash, and the first publisher wins. */
    res[R_PUBLISH_OTHER] = paged_publish(t->pool, NULL, SALT, NB, other, owner_ids);
    int32_t found[NB];
    res[R_LOOKUP_OTHER] = paged_lookup(t->pool, NULL, SALT, NB, other, found);
    res[R_PUBLISH_OVER] = paged_publish(t->pool, NULL, SALT, 1, prompt, &own);
    res[R_LOOKUP_AGAIN] = paged_lookup(t->pool, NULL, SALT, NB, prompt, found) == NB
                          && memcmp(found, owner_ids, sizeof found) == 0;

    /* Its own work: adopt the prompt, add X tokens of its own, attend over both. */
    pk_cache mine = ref;
    paged_seq *s = NULL;
    if ((mine.base = malloc(pk_cache_bytes(&ref))) == NULL || paged_seq_create(t->pool, SALT, &s) != PAGED_OK) {
        free(mine.base);
        return;
    }
    memcpy(mine.base, ref.base, pk_cache_bytes(&ref));
    res[R_ADOPT] = (int) paged_seq_adopt_prefix(s, prompt, NB * B);
    int32_t slots[X], toks[X] = { 1, 2, 3, 4, 5 };
    uint32_t nblk = 0;
    if (paged_seq_extend(s, X, toks, slots) == PAGED_OK) {
        const int32_t *blocks = paged_seq_blocks(s, &nblk);
        res[R_EXTEND_FRESH] = nblk == NB + 1 && memcmp(blocks, owner_ids, sizeof owner_ids) == 0
                              && slots[0] / B != owner_ids[0] && slots[0] / B != owner_ids[1];
        res[R_APPEND_OWN] = append(t, X, slots, &mine);
        float q[X * QH * D], out[X * QH * D];
        res[R_DECODE_ERR] = (int) (attend(t, &mine, blocks, (int) nblk, NB * B + X, 0, q, 1, out) * 1e9);
        res[R_PREFILL_ERR] = (int) (attend(t, &mine, blocks, (int) nblk, NB * B + X, X, q, 1, out) * 1e9);
    }
    paged_seq_destroy(s);
    free(mine.base);
}

/* The tenant's read-only attachment to "ro": every write is refused at the pool. Fills res. */
static void tenant_read_only(paged_client *c, int *res)
{
    struct aio_client t = { .c = c, .cuda = use_cuda };
    res[R_RO_ATTACH] = paged_pool_attach(c, "ro", &t.pool);
    if (t.pool == NULL || aio_bases(&t, (char[8]) { 0 }, 8) < 0)
        return;
    paged_pool_info info;
    paged_pool_get_info(t.pool, &info);
    res[R_RO_WRITABLE] = info.writable;
    uint64_t off;
    if (paged_arena_alloc(c, PAGED_ARENA_HOST, NB * B * 4 + 64, 64, &off) != PAGED_OK)
        return;
    memset(t.host + off, 0, NB * B * 4 + 64);
    paged_request r = req_of(&t, PAGED_OP_ALLOC, 1, off, 0);
    res[R_RO_ALLOC] = refused(&t, &r, PAGED_E_READONLY, "pool");
    r = req_of(&t, PAGED_OP_APPEND, 1, off, 0);
    res[R_RO_APPEND] = refused(&t, &r, PAGED_E_READONLY, "pool");
    r = req_of(&t, PAGED_OP_COPY, 1, off, off + 4);
    res[R_RO_COPY] = refused(&t, &r, PAGED_E_READONLY, "pool");
    r = req_of(&t, PAGED_OP_PUBLISH, 1, off, off + 64);
    res[R_RO_PUBLISH] = refused(&t, &r, PAGED_E_READONLY, "pool");
    void *base = NULL;
    res[R_RO_MAP] = paged_pool_map(t.pool, &base);
}

/* The tenant: attaches the three pools, watching its descriptors, and runs its steps. Fills
 * res (R_COUNT ints). */
static void tenant_steps(int *res)
{
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = "tenant", .timeout_ms = 10000,
                             .host_arena_size = 1u << 20, .data_arena_size = 4u << 20 };
    struct aio_client t = { .cuda = use_cuda };
    res[R_CONNECT] = paged_client_connect(&o, &t.c) == PAGED_OK;
    if (!res[R_CONNECT])
        return;
    int memfds0, memfds1;
    int n0 = count_fds(&memfds0);
    res[R_ATTACH] = paged_pool_attach(t.c, "sealed", &t.pool);
    int n1 = count_fds(&memfds1);
    res[R_FDS_SEALED] = n1 - n0;
    res[R_MEMFD_SEALED] = memfds1;
    if (t.pool == NULL)
        return;
    paged_pool_info info;
    paged_pool_get_info(t.pool, &info);
    res[R_INFO_SEALED] = (info.mode & PAGED_POOL_SEALED) && !(info.mode & PAGED_POOL_EXPORTED) && info.writable;
    void *base = &base;
    res[R_MAP_SEALED] = paged_pool_map(t.pool, &base);
    res[R_MAP_WHY] = base == NULL && strstr(paged_client_error(t.c), "pool 'sealed' is sealed: its memory is not "
                                            "exported") != NULL;
    char why[256];
    res[R_BASES] = aio_bases(&t, why, sizeof why) == 0;
    if (res[R_BASES])
        tenant_sealed(&t, res);
    tenant_read_only(t.c, res);

    paged_pool *pe = NULL;
    n0 = count_fds(&memfds0);
    res[R_EXP_ATTACH] = paged_pool_attach(t.c, "exported", &pe);
    n1 = count_fds(&memfds1);
    res[R_EXP_FDS] = n1 - n0;
    res[R_EXP_MEMFD] = memfds1 - memfds0;
    base = NULL;
    res[R_EXP_MAP] = pe != NULL && paged_pool_map(pe, &base) == PAGED_OK && base != NULL;
    paged_client_close(t.c);
}

/* The tenant's side once forked: waits for owner_ids and root's prompt (ref's memory) on go,
 * then runs tenant_steps into res. Returns nothing. */
static void tenant_main(int go, int *res, void *ctx)
{
    (void) ctx;
    if (hard_read_full(go, owner_ids, sizeof owner_ids, 60000)
        && hard_read_full(go, ref.base, pk_cache_bytes(&ref), 60000))
        tenant_steps(res);
}

/* Creates pool name of mode over ctl and checks what its POOL_REPLY says of its memory: the
 * mode word's memory bit, and whether a descriptor came (sealed: none, and PCORE_MEM_NONE).
 * Returns nothing. */
static void create_pool(struct rc_client *ctl, const char *name, uint32_t mode, int sealed)
{
    struct pcore_msg_pool_reply r;
    int fd = -1;
    int rc = rc_pool_create(ctl, name, L, H, D, B, PAGED_DTYPE_F32, N, mode, PCORE_ATTACH_WRITE, &r, &fd);
    if (rc != 0)
        bail("cannot create pool %s (mode %#x): %s (%s)", name, mode, paged_strerror(rc), ctl->errmsg);
    uint32_t bit = sealed ? PAGED_POOL_SEALED : PAGED_POOL_EXPORTED;
    is_int(bit, r.mode & (PAGED_POOL_SEALED | PAGED_POOL_EXPORTED), "%s: mode %04o, %s: the reply's mode word says %s",
           name, mode & 0777, mode & PAGED_POOL_EXPORTED ? "exported asked for" : "nothing asked",
           sealed ? "sealed" : "exported");
    if (sealed)
        ok(fd < 0 && r.mem_kind == PCORE_MEM_NONE && r.num_fds == 0 && r.alloc_bytes == 0,
           "%s: its creator got no memory (no descriptor, mem_kind none)", name);
    else if (!use_cuda)
        ok(fd >= 0 && r.mem_kind == PCORE_MEM_MEMFD, "%s: its creator got the memfd", name);
    if (fd >= 0)
        close(fd);
}

/* Checks the tenant's report; returns nothing. */
static void check_tenant(const int *res, int other_uid)
{
    const char *who = other_uid ? "uid nobody" : "a second client of the same uid";
    ok(res[R_CONNECT] == 1 && res[R_ATTACH] == PAGED_OK, "tenant (%s): attaches the sealed pool", who);
    is_int(0, res[R_FDS_SEALED], "tenant: attaching the sealed pool gave it no descriptor");
    is_int(0, res[R_MEMFD_SEALED], "tenant: none of its descriptors is a pool's memfd");
    is_int(1, res[R_INFO_SEALED], "tenant: paged_pool_get_info says sealed, not exported, and writable");
    is_int(PAGED_E_PERM, res[R_MAP_SEALED], "tenant: paged_pool_map of the sealed pool is PAGED_E_PERM");
    is_int(1, res[R_MAP_WHY], "tenant: the map stores NULL and paged_client_error says the pool is sealed");
    is_int(1, res[R_BASES], "tenant: its arenas are there");
    is_int(1, res[R_APPEND_UNHELD], "tenant: APPEND into root's published block, not held: PAGED_E_NOTHELD on slots");
    is_int(1, res[R_LOOKUP], "tenant: LOOKUP of the prompt finds root's blocks");
    is_int(1, res[R_APPEND_PUBLISHED], "tenant: APPEND into a published block it holds: PAGED_E_READONLY on slots");
    is_int(1, res[R_COPY_ONTO], "tenant: COPY onto a published block: PAGED_E_READONLY on dst");
    is_int(1, res[R_FORK_APPEND], "tenant: FORK of a published block, then APPEND into it: PAGED_E_READONLY on slots");
    is_int(0, res[R_PUBLISH_OTHER], "tenant: PUBLISH of root's blocks under other tokens enters nothing");
    is_int(0, res[R_LOOKUP_OTHER], "tenant: LOOKUP of those other tokens finds nothing");
    is_int(0, res[R_PUBLISH_OVER], "tenant: PUBLISH of its own block under the prompt's tokens enters nothing");
    is_int(1, res[R_LOOKUP_AGAIN], "tenant: LOOKUP of the prompt still finds root's blocks");
    is_int(NB * B, res[R_ADOPT], "tenant: paged_seq_adopt_prefix adopts the %d tokens of the prompt", NB * B);
    is_int(1, res[R_EXTEND_FRESH], "tenant: extending the adopted sequence writes a fresh block of its own");
    is_int(PAGED_OK, res[R_APPEND_OWN], "tenant: APPEND into its own block works");
    ok(res[R_DECODE_ERR] >= 0 && res[R_DECODE_ERR] < TOL * 1e9,
       "tenant: DECODE over the adopted prompt and its own tokens matches the reference (error %.2g)",
       res[R_DECODE_ERR] / 1e9);
    ok(res[R_PREFILL_ERR] >= 0 && res[R_PREFILL_ERR] < TOL * 1e9,
       "tenant: PREFILL of its %d tokens over the adopted prompt matches the reference (error %.2g)", X,
       res[R_PREFILL_ERR] / 1e9);
    is_int(PAGED_OK, res[R_RO_ATTACH], "tenant: attaches the 0444 pool");
    is_int(0, res[R_RO_WRITABLE], "tenant: the 0444 pool is read-only for it");
    is_int(1, res[R_RO_ALLOC], "tenant: ALLOC on a read-only attachment: PAGED_E_READONLY on pool");
    is_int(1, res[R_RO_APPEND], "tenant: APPEND on a read-only attachment: PAGED_E_READONLY on pool");
    is_int(1, res[R_RO_COPY], "tenant: COPY on a read-only attachment: PAGED_E_READONLY on pool");
    is_int(1, res[R_RO_PUBLISH], "tenant: PUBLISH on a read-only attachment: PAGED_E_READONLY on pool");
    is_int(PAGED_E_PERM, res[R_RO_MAP], "tenant: paged_pool_map of the sealed read-only pool is PAGED_E_PERM");
    is_int(PAGED_OK, res[R_EXP_ATTACH], "tenant: attaches the exported pool");
    if (use_cuda)
        skip(2, "cuda: the exported memory is a VMM descriptor or an IPC handle, named by the driver");
    else {
        is_int(1, res[R_EXP_FDS], "tenant: attaching the exported pool gave it one descriptor");
        is_int(1, res[R_EXP_MEMFD], "tenant: that descriptor is the pool's memfd");
    }
    is_int(1, res[R_EXP_MAP], "tenant: paged_pool_map of the exported pool works");
}

/* Root's side: fills and publishes the prompt, decodes before and after the tenant's
 * attempts (whose report it checks), and prefills over the prompt. Returns nothing. */
static void owner_side(pid_t tenant, int go, int report)
{
    struct aio_client o = { .cuda = use_cuda, .ids = owner_ids, .nseq = 1, .maxblk = NB };
    char why[256];
    if (aio_open(&o, daemon_.socket, "owner", "sealed", 1u << 20, 4u << 20, why, sizeof why) < 0)
        bail("root's client: %s", why);
    void *base = NULL;
    is_int(PAGED_E_PERM, paged_pool_map(o.pool, &base), "root: paged_pool_map of its own sealed pool is PAGED_E_PERM");
    int32_t slots[NB * B];
    for (int t = 0; t < NB * B; t++)
        slots[t] = owner_ids[t / B] * B + t % B;
    is_int(PAGED_OK, append(&o, NB * B, slots, &ref), "root: APPENDs the prompt's keys and values");
    is_int(NB, paged_publish(o.pool, NULL, SALT, NB, prompt, owner_ids), "root: publishes the prompt");
    float q[QH * D], before[QH * D], after[QH * D], rows_q[NB * B * QH * D], rows_out[NB * B * QH * D];
    double e = attend(&o, &ref, owner_ids, NB, NB * B, 0, q, 1, before);
    ok(e >= 0 && e < TOL, "root: DECODE over the prompt matches the reference (error %.2g)", e);

    /* A tenant that could not drop to nobody is gone already: the write fails (SIGPIPE is
     * ignored) and its status says why. */
    int st = 0, res[R_COUNT];
    int sent = write(go, owner_ids, sizeof owner_ids) == (ssize_t) sizeof owner_ids
               && write(go, ref.base, pk_cache_bytes(&ref)) == (ssize_t) pk_cache_bytes(&ref);
    close(go);
    int got = hard_child_report(report, tenant, res, sizeof res, 120000, &st);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
        skip(33, "root, but setuid to nobody (%d) is refused here", TENANT_UID);
    else {
        ok(sent && got, "the tenant got the prompt and reported (status %d)", st);
        check_tenant(res, getuid() == 0);
    }
    e = attend(&o, &ref, owner_ids, NB, NB * B, 0, q, 0, after);
    ok(e >= 0 && e < TOL, "root: DECODE over the prompt after the tenant's attempts matches the reference (error %.2g)",
       e);
    ok(memcmp(before, after, sizeof before) == 0, "root: the same DECODE gives the same bits before and after");
    e = attend(&o, &ref, owner_ids, NB, NB * B, NB * B, rows_q, 1, rows_out);
    ok(e >= 0 && e < TOL, "root: PREFILL of the prompt over itself matches the reference (error %.2g)", e);
    paged_client_close(o.c);
}

/* Runs the cases; returns 0 (TAP reports). */
int main(void)
{
    tap_rng_seed(&rng, tap_seed());
    plan_lazy();
    signal(SIGPIPE, SIG_IGN);
    for (int t = 0; t < NB * B; t++) {
        prompt[t] = (int32_t) tap_rng_below(&rng, 50000);
        other[t] = prompt[t] + 1;
    }
    ref = (pk_cache) { .num_layers = L, .num_blocks = N, .num_kv_heads = H, .head_dim = D, .block_size = B,
                       .dtype = PAGED_DTYPE_F32, .k_scale = 1, .v_scale = 1 };
    if ((ref.base = calloc(1, pk_cache_bytes(&ref))) == NULL)
        bail("out of memory");

    /* Other uids must reach the socket: a world-searchable directory, a 0666 socket. The
     * tenant is forked before this process starts the daemon or touches CUDA. */
    pagedd_mkdir(&daemon_);
    if (chmod(daemon_.dir, 0755) != 0)
        sysbail("chmod %s", daemon_.dir);
    const char *be = getenv("PAGED_TEST_BACKEND");
    use_cuda = be != NULL && strcmp(be, "cuda") == 0;
    int go = -1, report = -1;
    pid_t tenant = hard_fork_tenant(getuid() == 0 ? TENANT_UID : -1, tenant_main, NULL, R_COUNT, &go, &report);
    const char *args[] = { "--socket-mode=0666", NULL };
    if (aio_start(&daemon_, args) != use_cuda)
        bail("the daemon's backend is not the one asked for");

    struct rc_client ctl;
    if (rc_connect(daemon_.socket, "creator", PCORE_HELLO_CONTROL, &ctl) != 0)
        bail("cannot connect");
    create_pool(&ctl, "sealed", 0666 | PAGED_POOL_SHARED_PREFIXES, 1);
    create_pool(&ctl, "exported", 0666 | PAGED_POOL_SHARED_PREFIXES | PAGED_POOL_EXPORTED, 0);
    create_pool(&ctl, "ro", 0444 | PAGED_POOL_SHARED_PREFIXES, 1);
    create_pool(&ctl, "own", 0600, 0);
    owner_side(tenant, go, report);
    if (getuid() != 0)
        diag("not root: the tenant ran as a second client of this uid (CI runs this as root, the tenant as nobody)");
    ok(pagedd_log_contains(&daemon_, "memory sealed)") && pagedd_log_contains(&daemon_, "memory exported)"),
       "pagedd's log says which pools are sealed and which exported");

    rc_close(&ctl);
    int st = pagedd_stop(&daemon_);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exited cleanly on SIGTERM (status %d)", st);
    pagedd_cleanup(&daemon_);
    free(ref.base);
    return 0;
}
