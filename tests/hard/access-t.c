/* access-t.c: pool modes keep other uids out, and no request reaches another client's blocks or arena. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "lib/core/shm.h"
#include "paged.h"
#include "tests/hard/hard.h"
#include "tests/tap/pagedd.h"

/* The pools: 2 layers, 2 KV heads, head_dim 64, blocks of 16, f32. */
#define L 2
#define H 2
#define QH 4
#define D 64
#define B 16
#define N 64

/* The users of the uid tests: an owner, a member of its group, and someone else. */
#define OWNER_UID 65533
#define MEMBER_UID 65534  /* nobody */
#define OTHER_UID 65532
#define GROUP_GID 65530
#define OTHER_GID 65532

#define NRES 16

static struct pagedd daemon_;
static tap_rng rng;

/* ---------------------------------------------------------------------------------------
 * Uids: pool modes, tried from processes that switched to other users.
 */

/*
 * Forks a child that drops every group, switches to gid and uid and runs fn, which fills
 * res (NRES ints). Returns 1 with res filled, 0 when the switch is not possible here (res
 * untouched), or -1 when the child failed otherwise.
 */
static int as_user(uid_t uid, gid_t gid, void (*fn)(int *res), int *res)
{
    int p[2];
    if (pipe(p) < 0)
        sysbail("pipe");
    pid_t pid = bfork();
    if (pid == 0) {
        close(p[0]);
        if (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0 || getuid() != uid
            || getgid() != gid)
            _exit(77);
        int r[NRES];
        for (int i = 0; i < NRES; i++)
            r[i] = 1; /* a value no step reports: a step that did not run stays visible */
        fn(r);
        _exit(write(p[1], r, sizeof r) == (ssize_t) sizeof r ? 0 : 1);
    }
    close(p[1]);
    int st;
    int got = hard_child_report(p[0], pid, res, NRES * sizeof(int), 30000, &st);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
        return 0;
    return got && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 1 : -1;
}

/* Connects a raw client in a switched child; exits on failure. Returns nothing. */
static void child_connect(struct rc_client *c, const char *name, uint32_t flags)
{
    if (rc_connect(daemon_.socket, name, flags, c) != 0)
        _exit(3);
}

/* The owner: creates p600, p640 (exported, so that its descriptor's protections are tried)
 * and p666, and attaches p600 from a second connection.
 * res: the three creates, the second attach, whether it is writable. */
static void owner_creates(int *res)
{
    struct rc_client c, c2;
    struct pcore_msg_pool_reply r;
    memset(&r, 0, sizeof r);
    child_connect(&c, "owner", 0);
    res[0] = rc_pool_create(&c, "p600", L, H, D, B, PAGED_DTYPE_F32, N, 0600, PCORE_ATTACH_WRITE, &r, NULL);
    res[1] = rc_pool_create(&c, "p640", L, H, D, B, PAGED_DTYPE_F32, N, 0640 | PAGED_POOL_EXPORTED,
                           PCORE_ATTACH_WRITE, &r, NULL);
    res[2] = rc_pool_create(&c, "p666", L, H, D, B, PAGED_DTYPE_F32, N, 0666, PCORE_ATTACH_WRITE, &r, NULL);
    child_connect(&c2, "owner-2", 0);
    res[3] = rc_pool_attach(&c2, "p600", PCORE_ATTACH_WRITE, &r, NULL);
    res[4] = (int) r.writable;
    res[5] = (int) r.owner_uid;
    rc_close(&c2);
    rc_close(&c);
}

/* Returns the status of a one-block ALLOC on pool id through c. */
static int try_alloc(struct rc_client *c, uint32_t pool)
{
    struct pcore_sqe s;
    struct pcore_cqe q;
    memset(&s, 0, sizeof s);
    s.opcode = PAGED_OP_ALLOC;
    s.pool = pool;
    s.tag = 5;
    s.u.alloc.count = 1;
    s.u.alloc.ids_off = rc_alloc(c, 4);
    return rc_call(c, &s, &q);
}

/*
 * A member of the owner's group: p600 is closed to it; p640 opens read-only, and its
 * descriptor cannot be turned into a writable mapping by any route. res: attach p600;
 * attach p640, writable; errno of a shared writable mmap, of reopening /proc/self/fd
 * read-write, of mprotect to writable; whether a read-only mapping reads; ALLOC on p640;
 * DESTROY and EVICT of p640.
 */
static void member_tries(int *res)
{
    struct rc_client c;
    struct pcore_msg_pool_reply r;
    int fd = -1;
    memset(&r, 0, sizeof r);
    child_connect(&c, "member", 0);
    res[0] = rc_pool_attach(&c, "p600", PCORE_ATTACH_WRITE, &r, NULL);
    res[1] = rc_pool_attach(&c, "p640", PCORE_ATTACH_WRITE, &r, &fd);
    res[2] = (int) r.writable;
    if (res[1] == 0 && fd >= 0) {
        void *w = mmap(NULL, r.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        res[3] = w == MAP_FAILED ? errno : 0;
        if (w != MAP_FAILED)
            munmap(w, r.bytes);
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        int rw = open(path, O_RDWR);
        res[4] = rw < 0 ? errno : 0;
        if (rw >= 0)
            close(rw);
        void *ro = mmap(NULL, r.bytes, PROT_READ, MAP_SHARED, fd, 0);
        if (ro != MAP_FAILED) {
            volatile const unsigned char *b = ro;
            unsigned sum = 0;
            for (uint64_t i = 0; i < r.bytes; i += 4096)
                sum += b[i];
            res[6] = sum < 0x7fffffffu; /* read every page without a fault */
            res[5] = mprotect(ro, r.bytes, PROT_READ | PROT_WRITE) != 0 ? errno : 0;
            munmap(ro, r.bytes);
        } else
            res[6] = 0;
        close(fd);
    }
    res[7] = try_alloc(&c, r.pool_id);
    struct pcore_msg_pool_ref m;
    struct pcore_msg_hdr reply;
    memset(&m, 0, sizeof m);
    m.hdr.type = PCORE_MSG_POOL_DESTROY;
    m.hdr.len = sizeof m;
    snprintf(m.name, sizeof m.name, "p640");
    long n = rc_control(&c, &m, sizeof m, &reply, sizeof reply, NULL);
    res[8] = n < 0 ? (int) n : 0;
    m.hdr.type = PCORE_MSG_EVICT;
    n = rc_control(&c, &m, sizeof m, &reply, sizeof reply, NULL);
    res[9] = n < 0 ? (int) n : 0;
    rc_close(&c);
}

/*
 * Another user, in no group of the owner's: p600 and p640 are closed to it (raw and through
 * libpaged), p666 opens read-write. res: raw attach p600, p640, p666, p666 writable, ALLOC
 * on p666; libpaged attach p600, p666.
 */
static void other_tries(int *res)
{
    struct rc_client c;
    struct pcore_msg_pool_reply r;
    memset(&r, 0, sizeof r);
    child_connect(&c, "other", 0);
    res[0] = rc_pool_attach(&c, "p600", 0, &r, NULL);
    res[1] = rc_pool_attach(&c, "p640", 0, &r, NULL);
    res[2] = rc_pool_attach(&c, "p666", PCORE_ATTACH_WRITE, &r, NULL);
    res[3] = (int) r.writable;
    res[4] = res[2] == 0 ? try_alloc(&c, r.pool_id) : res[2];
    rc_close(&c);
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = "other-libpaged" };
    paged_client *pc = NULL;
    paged_pool *p = NULL;
    if (paged_client_connect(&o, &pc) != PAGED_OK)
        _exit(4);
    res[5] = paged_pool_attach(pc, "p600", &p);
    res[6] = paged_pool_attach(pc, "p666", &p);
    paged_client_close(pc);
}

/* Runs the uid cases (as root) or skips them; returns nothing. */
static void uid_cases(void)
{
    enum { NTESTS = 23 };
    if (geteuid() != 0) {
        skip(NTESTS, "not root: the uid cases switch to uids %d, %d and %d", OWNER_UID, MEMBER_UID, OTHER_UID);
        return;
    }
    int res[NRES];
    int ran = as_user(OWNER_UID, GROUP_GID, owner_creates, res);
    if (ran == 0) {
        skip(NTESTS, "root, but setuid/setgid to %d/%d is refused here", OWNER_UID, GROUP_GID);
        return;
    }
    ok(ran == 1, "uid %d (gid %d) ran its part", OWNER_UID, GROUP_GID);
    ok(res[0] == 0 && res[1] == 0 && res[2] == 0, "uid %d creates pools of modes 0600, 0640, 0666", OWNER_UID);
    ok(res[3] == 0 && res[4] == 1, "the owner attaches its 0600 pool again, read-write");
    is_int(OWNER_UID, res[5], "the pool's owner is uid %d", OWNER_UID);

    ran = as_user(MEMBER_UID, GROUP_GID, member_tries, res);
    ok(ran == 1, "uid %d (gid %d, the owner's group) ran its part", MEMBER_UID, GROUP_GID);
    is_int(PAGED_E_PERM, res[0], "group member: attaching the 0600 pool is PAGED_E_PERM");
    is_int(0, res[1], "group member: the 0640 pool attaches");
    is_int(0, res[2], "group member: read-only, though write was asked for");
    is_int(EACCES, res[3], "group member: its descriptor refuses a shared writable mmap (EACCES)");
    is_int(EACCES, res[4], "group member: reopening it read-write through /proc/self/fd: EACCES");
    is_int(EACCES, res[5], "group member: mprotect of its read-only mapping to writable: EACCES");
    is_int(1, res[6], "group member: the read-only mapping reads");
    is_int(PAGED_E_READONLY, res[7], "group member: ALLOC on the 0640 pool is PAGED_E_READONLY");
    is_int(PAGED_E_PERM, res[8], "group member: POOL_DESTROY of the owner's pool is PAGED_E_PERM");
    is_int(PAGED_E_PERM, res[9], "group member: EVICT of a pool it may not write is PAGED_E_PERM");

    ran = as_user(OTHER_UID, OTHER_GID, other_tries, res);
    ok(ran == 1, "uid %d (gid %d) ran its part", OTHER_UID, OTHER_GID);
    is_int(PAGED_E_PERM, res[0], "another uid: attaching the 0600 pool is PAGED_E_PERM");
    is_int(PAGED_E_PERM, res[1], "another uid: attaching the 0640 pool is PAGED_E_PERM");
    ok(res[2] == 0 && res[3] == 1, "another uid: the 0666 pool attaches read-write");
    is_int(0, res[4], "another uid: ALLOC on the 0666 pool works");
    is_int(PAGED_E_PERM, res[5], "another uid through libpaged: paged_pool_attach of the 0600 pool: PAGED_E_PERM");
    is_int(PAGED_OK, res[6], "another uid through libpaged: paged_pool_attach of the 0666 pool works");

    /* Root is the documented exception: it may attach any pool. */
    struct rc_client c;
    struct pcore_msg_pool_reply r;
    if (rc_connect(daemon_.socket, "root", 0, &c) != 0)
        bail("root cannot connect: %s", c.errmsg);
    is_int(0, rc_pool_attach(&c, "p600", 0, &r, NULL), "root attaches another uid's 0600 pool (root is trusted)");
    rc_close(&c);
}

/* ---------------------------------------------------------------------------------------
 * Blocks and arenas: clients of one uid in one pool.
 */

static struct rc_client cx, cy, cr; /* the holder, the intruder, a read-only reader */
static uint32_t pool_id;
static int32_t xb[4], yb[2];        /* blocks x and y hold */
static pk_cache mirror;             /* what x wrote, kept privately */
static const unsigned char *view;   /* the reader's read-only mapping of the pool */
static int32_t x_tokens[4][B];      /* token ids of x's blocks */

/* Runs one request on client c; bails unless it succeeds. Returns its CQE count. */
static uint32_t must(struct rc_client *c, struct pcore_sqe s, const char *what)
{
    struct pcore_cqe q;
    int rc = rc_call(c, &s, &q);
    if (rc != 0)
        bail("%s failed: %s (field %u, index %u)", what, paged_strerror(rc), q.err_field, q.err_index);
    return q.count;
}

/* Runs a request on c that must be refused with status on field (and index, unless index <
 * 0); then checks that c is still served. Returns nothing. */
static void refused(struct rc_client *c, const char *what, struct pcore_sqe s, int status,
                    enum pcore_field field, long index)
{
    struct pcore_cqe q;
    int rc = rc_call(c, &s, &q);
    char at[32] = "";
    if (index >= 0)
        snprintf(at, sizeof at, "[%ld]", index);
    if (!ok(rc == status && q.err_field == field && (index < 0 || q.err_index == (uint32_t) index),
            "%s: %s (%s%s)", what, paged_strerror(status), paged_field_name(field), at))
        diag("got: %s, field %s[%u]", paged_strerror(rc), paged_field_name(q.err_field), q.err_index);
    if (rc_nop(c) != 0)
        bail("%s: the daemon no longer answers", what);
}

/* Returns an empty SQE of opcode on the pool. */
static struct pcore_sqe sqe(int opcode)
{
    struct pcore_sqe s;
    memset(&s, 0, sizeof s);
    s.opcode = (uint8_t) opcode;
    s.pool = pool_id;
    s.tag = 0x5eed;
    return s;
}

/* Returns the offset of n int32 values copied into c's host arena. */
static uint64_t ints(struct rc_client *c, const int32_t *v, size_t n)
{
    uint64_t off = rc_alloc(c, n * 4);
    memcpy(rc_ptr(c, off), v, n * 4);
    return off;
}

/* Returns the offset of n random floats in c's arena. */
static uint64_t floats(struct rc_client *c, size_t n)
{
    uint64_t off = rc_alloc(c, n * 4);
    hard_fill(&rng, rc_ptr(c, off), n);
    return off;
}

/* Returns a valid DECODE for y over bt (2 entries, 20 tokens). */
static struct pcore_sqe y_decode(int32_t b0, int32_t b1)
{
    int32_t bt[2] = { b0, b1 }, len = 20;
    struct pcore_sqe s = sqe(PAGED_OP_DECODE);
    s.layer = 1;
    s.u.attn = (struct pcore_req_attn) { .num_seqs = 1, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32,
                                         .bt_stride = 2, .q_off = floats(&cy, QH * D),
                                         .out_off = rc_alloc(&cy, QH * D * 4), .bt_off = ints(&cy, bt, 2),
                                         .lens_off = ints(&cy, &len, 1) };
    return s;
}

/* Returns a valid PREFILL for y: 2 query rows of a 20-token sequence over bt. */
static struct pcore_sqe y_prefill(int32_t b0, int32_t b1)
{
    int32_t bt[2] = { b0, b1 }, len = 20, qo[2] = { 0, 2 };
    struct pcore_sqe s = sqe(PAGED_OP_PREFILL);
    s.u.attn = (struct pcore_req_attn) { .num_seqs = 1, .num_q_heads = QH, .dtype = PAGED_DTYPE_F32,
                                         .bt_stride = 2, .q_off = floats(&cy, 2 * QH * D),
                                         .out_off = rc_alloc(&cy, 2 * QH * D * 4), .bt_off = ints(&cy, bt, 2),
                                         .lens_off = ints(&cy, &len, 1), .qo_indptr_off = ints(&cy, qo, 2) };
    return s;
}

/* Returns a valid APPEND for c of n tokens into slots, one layer (or all with all). */
static struct pcore_sqe append_sqe(struct rc_client *c, const int32_t *slots, uint32_t n, int all)
{
    uint32_t layers = all ? L : 1;
    struct pcore_sqe s = sqe(PAGED_OP_APPEND);
    s.flags = all ? PCORE_SQE_ALL_LAYERS : 0;
    s.u.append = (struct pcore_req_append) { n, PAGED_DTYPE_F32, floats(c, (size_t) layers * n * H * D),
                                             floats(c, (size_t) layers * n * H * D), ints(c, slots, n) };
    return s;
}

/* Returns a FREE, FORK (or ALLOC) SQE for c over ids. */
static struct pcore_sqe ids_sqe(struct rc_client *c, int opcode, const int32_t *ids, uint32_t n)
{
    struct pcore_sqe s = sqe(opcode);
    s.u.blocks = (struct pcore_req_blocks) { n, 0, ints(c, ids, n) };
    return s;
}

/* Returns a COPY SQE for c of one block. */
static struct pcore_sqe copy_sqe(struct rc_client *c, int32_t src, int32_t dst)
{
    struct pcore_sqe s = sqe(PAGED_OP_COPY);
    s.u.copy = (struct pcore_req_copy) { 1, 0, ints(c, &src, 1), ints(c, &dst, 1) };
    return s;
}

/* Returns a PUBLISH or LOOKUP SQE for c of one block with tokens (ids: PUBLISH's block). */
static struct pcore_sqe prefix_sqe(struct rc_client *c, int opcode, const int32_t *tokens, int32_t id)
{
    struct pcore_sqe s = sqe(opcode);
    s.u.prefix.num_blocks = 1;
    s.u.prefix.tokens_off = ints(c, tokens, B);
    s.u.prefix.ids_off = ints(c, &id, 1);
    s.u.prefix.salt = 3;
    return s;
}

/* Checks x's blocks through the reader's read-only mapping against what x wrote; returns
 * the number of differing floats. */
static long x_blocks_differ(void)
{
    long bad = 0;
    for (int i = 0; i < 4; i++)
        for (int l = 0; l < L; l++)
            for (int kv = 0; kv < 2; kv++) {
                size_t at = pk_cache_index(&mirror, l, kv, xb[i], 0, 0);
                const float *want = (const float *) mirror.base + at;
                const float *got = (const float *) view + at;
                for (size_t e = 0; e < (size_t) H * B * D; e++)
                    bad += memcmp(&want[e], &got[e], 4) != 0;
            }
    return bad;
}

/* Checks LIST blocks: each of x's blocks has one reference, x's; returns how many do. */
static int x_blocks_held_by_x_only(void)
{
    static struct pcore_block_item items[N];
    long n = rc_list(&cr, PCORE_LIST_BLOCKS, "shared", items, sizeof items[0], N);
    int good = 0;
    for (int i = 0; i < 4; i++)
        for (long k = 0; k < n && k < N; k++)
            if (items[k].block == xb[i])
                good += items[k].refcount == 1 && items[k].num_holders == 1 && items[k].holders[0] == cx.id;
    return good;
}

/* The intruder y names x's blocks in every request that takes block ids. */
static void block_cases(void)
{
    refused(&cy, "DECODE with x's block in y's block table", y_decode(yb[0], xb[0]), PAGED_E_NOTHELD,
            PCORE_FIELD_BLOCK_TABLE, 1);
    refused(&cy, "PREFILL with x's block in y's block table", y_prefill(xb[1], yb[1]), PAGED_E_NOTHELD,
            PCORE_FIELD_BLOCK_TABLE, 0);
    int32_t slots[2] = { yb[0] * B + 1, xb[2] * B + 3 };
    refused(&cy, "APPEND (one layer) into a slot of x's block", append_sqe(&cy, slots, 2, 0), PAGED_E_NOTHELD,
            PCORE_FIELD_SLOTS, 1);
    slots[0] = xb[3] * B;
    refused(&cy, "APPEND (all layers) into a slot of x's block", append_sqe(&cy, slots, 1, 1), PAGED_E_NOTHELD,
            PCORE_FIELD_SLOTS, 0);
    refused(&cy, "COPY from x's block into y's", copy_sqe(&cy, xb[0], yb[1]), PAGED_E_NOTHELD, PCORE_FIELD_SRC, 0);
    refused(&cy, "COPY from y's block onto x's", copy_sqe(&cy, yb[0], xb[1]), PAGED_E_NOTHELD, PCORE_FIELD_DST, 0);
    refused(&cy, "FREE of x's block", ids_sqe(&cy, PAGED_OP_FREE, &xb[0], 1), PAGED_E_NOTHELD, PCORE_FIELD_IDS, 0);
    int32_t mixed[2] = { yb[0], xb[3] };
    refused(&cy, "FREE of y's block and x's", ids_sqe(&cy, PAGED_OP_FREE, mixed, 2), PAGED_E_NOTHELD,
            PCORE_FIELD_IDS, 1);
    refused(&cy, "FORK of x's block", ids_sqe(&cy, PAGED_OP_FORK, &xb[1], 1), PAGED_E_NOTHELD, PCORE_FIELD_IDS, 0);
    refused(&cy, "PUBLISH of x's block", prefix_sqe(&cy, PAGED_OP_PUBLISH, x_tokens[2], xb[2]), PAGED_E_NOTHELD,
            PCORE_FIELD_IDS, 0);
    struct pcore_cqe q;
    struct pcore_sqe s = prefix_sqe(&cy, PAGED_OP_LOOKUP, x_tokens[0], -1);
    is_int(0, rc_call(&cy, &s, &q), "LOOKUP of the tokens of x's unpublished block succeeds");
    is_int(0, q.count, "and finds nothing: an unpublished block is reachable by no content");
    /* The all-or-nothing FREE left y's own block alone: y still reads it. */
    s = y_decode(yb[0], yb[1]);
    is_int(0, rc_call(&cy, &s, &q), "y still holds its blocks after the refused FREE");

    /* A pool y never attached is out of its reach, whatever ids it names. */
    struct pcore_msg_pool_reply r;
    if (rc_pool_create(&cx, "xonly", L, H, D, B, PAGED_DTYPE_F32, N, 0600, PCORE_ATTACH_WRITE, &r, NULL) != 0)
        bail("x cannot create pool xonly: %s", cx.errmsg);
    s = y_decode(0, 1);
    s.pool = r.pool_id;
    refused(&cy, "DECODE in a pool y did not attach", s, PAGED_E_NOENT, PCORE_FIELD_POOL, -1);
    s = ids_sqe(&cy, PAGED_OP_FREE, yb, 1);
    s.pool = r.pool_id;
    refused(&cy, "FREE in a pool y did not attach", s, PAGED_E_NOENT, PCORE_FIELD_POOL, -1);

    is_int(0, x_blocks_differ(), "x's blocks hold what x wrote (read through a read-only mapping)");
    is_int(4, x_blocks_held_by_x_only(), "LIST blocks: each of x's blocks has one reference, x's");

    /* Published: readable by all who LOOKUP it, writable by none. */
    must(&cx, prefix_sqe(&cx, PAGED_OP_PUBLISH, x_tokens[3], xb[3]), "x's PUBLISH");
    s = prefix_sqe(&cy, PAGED_OP_LOOKUP, x_tokens[3], -1);
    is_int(1, must(&cy, s, "y's LOOKUP"), "y finds x's published block by LOOKUP");
    int32_t found;
    memcpy(&found, rc_ptr(&cy, s.u.prefix.ids_off), 4);
    is_int(xb[3], found, "LOOKUP hands y x's block %d", xb[3]);
    slots[0] = xb[3] * B + 2;
    refused(&cy, "APPEND into the published block", append_sqe(&cy, slots, 1, 0), PAGED_E_READONLY,
            PCORE_FIELD_SLOTS, 0);
    refused(&cy, "COPY onto the published block", copy_sqe(&cy, yb[0], xb[3]), PAGED_E_READONLY, PCORE_FIELD_DST, 0);
    must(&cy, ids_sqe(&cy, PAGED_OP_FREE, &xb[3], 1), "y's FREE of its reference");
    refused(&cy, "a second FREE of the published block", ids_sqe(&cy, PAGED_OP_FREE, &xb[3], 1), PAGED_E_NOTHELD,
            PCORE_FIELD_IDS, 0);
    s = prefix_sqe(&cr, PAGED_OP_LOOKUP, x_tokens[3], -1);
    is_int(1, must(&cr, s, "the reader's LOOKUP"), "a read-only attachment may LOOKUP the published block");
    refused(&cr, "PUBLISH through a read-only attachment", prefix_sqe(&cr, PAGED_OP_PUBLISH, x_tokens[3], xb[3]),
            PAGED_E_READONLY, PCORE_FIELD_POOL, -1);
    must(&cr, ids_sqe(&cr, PAGED_OP_FREE, &xb[3], 1), "the reader's FREE");
    is_int(0, x_blocks_differ(), "x's blocks, the published one too, are unchanged");
    is_int(4, x_blocks_held_by_x_only(), "LIST blocks: x's blocks are still held by x alone");
}

/* Sets the offset named by field in s to off; returns nothing. */
static void set_off(struct pcore_sqe *s, enum pcore_field field, uint64_t off)
{
    switch (field) {
    case PCORE_FIELD_IDS:
        if (s->opcode == PAGED_OP_PUBLISH || s->opcode == PAGED_OP_LOOKUP)
            s->u.prefix.ids_off = off;
        else
            s->u.blocks.ids_off = off;
        break;
    case PCORE_FIELD_K: s->u.append.k_off = off; break;
    case PCORE_FIELD_V: s->u.append.v_off = off; break;
    case PCORE_FIELD_SLOTS: s->u.append.slots_off = off; break;
    case PCORE_FIELD_Q: s->u.attn.q_off = off; break;
    case PCORE_FIELD_OUT: s->u.attn.out_off = off; break;
    case PCORE_FIELD_BLOCK_TABLE: s->u.attn.bt_off = off; break;
    case PCORE_FIELD_SEQ_LENS: s->u.attn.lens_off = off; break;
    case PCORE_FIELD_QO_INDPTR: s->u.attn.qo_indptr_off = off; break;
    case PCORE_FIELD_ALIBI: s->u.attn.attn.has_alibi = 1; s->u.attn.attn.alibi_off = off; break;
    case PCORE_FIELD_SRC: s->u.copy.src_off = off; break;
    case PCORE_FIELD_DST: s->u.copy.dst_off = off; break;
    case PCORE_FIELD_TOKENS: s->u.prefix.tokens_off = off; break;
    default: bail("no offset field %d", (int) field);
    }
}

/* The intruder points every offset of every request past the end of its own arena, where
 * an unchecked daemon would reach other memory, another client's arena among it. */
static void arena_cases(void)
{
    /* x's arena holds a pattern that must survive whatever y asks for. */
    size_t canary_len = 64 * 1024;
    uint64_t canary_off = rc_alloc(&cx, canary_len);
    unsigned char *canary = bmalloc(canary_len);
    for (size_t i = 0; i < canary_len; i++)
        canary[i] = (unsigned char) (tap_rng_below(&rng, 255) + 1);
    memcpy(rc_ptr(&cx, canary_off), canary, canary_len);

    int32_t slots[1] = { yb[1] * B + 4 };
    struct {
        const char *op;
        struct pcore_sqe s;
        enum pcore_field field;
    } cases[] = {
        { "ALLOC", ids_sqe(&cy, PAGED_OP_ALLOC, yb, 1), PCORE_FIELD_IDS },
        { "FREE", ids_sqe(&cy, PAGED_OP_FREE, yb, 1), PCORE_FIELD_IDS },
        { "FORK", ids_sqe(&cy, PAGED_OP_FORK, yb, 1), PCORE_FIELD_IDS },
        { "APPEND", append_sqe(&cy, slots, 1, 0), PCORE_FIELD_K },
        { "APPEND", append_sqe(&cy, slots, 1, 1), PCORE_FIELD_V },
        { "APPEND", append_sqe(&cy, slots, 1, 0), PCORE_FIELD_SLOTS },
        { "DECODE", y_decode(yb[0], yb[1]), PCORE_FIELD_Q },
        { "DECODE", y_decode(yb[0], yb[1]), PCORE_FIELD_OUT },
        { "DECODE", y_decode(yb[0], yb[1]), PCORE_FIELD_BLOCK_TABLE },
        { "DECODE", y_decode(yb[0], yb[1]), PCORE_FIELD_SEQ_LENS },
        { "DECODE", y_decode(yb[0], yb[1]), PCORE_FIELD_ALIBI },
        { "PREFILL", y_prefill(yb[0], yb[1]), PCORE_FIELD_QO_INDPTR },
        { "PREFILL", y_prefill(yb[0], yb[1]), PCORE_FIELD_OUT },
        { "COPY", copy_sqe(&cy, yb[0], yb[1]), PCORE_FIELD_SRC },
        { "COPY", copy_sqe(&cy, yb[0], yb[1]), PCORE_FIELD_DST },
        { "PUBLISH", prefix_sqe(&cy, PAGED_OP_PUBLISH, x_tokens[0], yb[0]), PCORE_FIELD_TOKENS },
        { "PUBLISH", prefix_sqe(&cy, PAGED_OP_PUBLISH, x_tokens[0], yb[0]), PCORE_FIELD_IDS },
        { "LOOKUP", prefix_sqe(&cy, PAGED_OP_LOOKUP, x_tokens[3], -1), PCORE_FIELD_TOKENS },
        { "LOOKUP", prefix_sqe(&cy, PAGED_OP_LOOKUP, x_tokens[3], -1), PCORE_FIELD_IDS },
    };
    const uint64_t offs[] = { cy.arena_size, cy.arena_size + 1, cy.arena_size + (1u << 20), 1ull << 40,
                              UINT64_MAX - 3 };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int good = 0;
        char got[160] = "";
        for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++) {
            struct pcore_sqe s = cases[i].s;
            set_off(&s, cases[i].field, offs[k]);
            struct pcore_cqe q;
            int rc = rc_call(&cy, &s, &q);
            if (rc == PAGED_E_RANGE && q.err_field == cases[i].field)
                good++;
            else if (got[0] == '\0')
                snprintf(got, sizeof got, ": offset %llu gave %s, field %u", (unsigned long long) offs[k],
                         paged_strerror(rc), q.err_field);
        }
        ok(good == (int) (sizeof offs / sizeof offs[0]), "%s with %s past y's arena (5 offsets, up to "
           "UINT64_MAX - 3): PAGED_E_RANGE%s", cases[i].op, paged_field_name(cases[i].field), got);
    }
    is_int(0, rc_nop(&cy), "the daemon still serves y");
    is_blob(canary, rc_ptr(&cx, canary_off), canary_len, "x's arena is untouched by y's requests");
    is_int(0, x_blocks_differ(), "x's blocks are untouched by y's requests");
    free(canary);
}

/* Sets up x, y and the reader in pool "shared"; returns nothing. */
static void setup_clients(void)
{
    struct pcore_msg_pool_reply r;
    int fd = -1;
    if (rc_connect(daemon_.socket, "x", 0, &cx) != 0 || rc_connect(daemon_.socket, "y", 0, &cy) != 0
        || rc_connect(daemon_.socket, "reader", 0, &cr) != 0)
        bail("clients cannot connect");
    if (rc_pool_create(&cx, "shared", L, H, D, B, PAGED_DTYPE_F32, N, 0600, PCORE_ATTACH_WRITE, &r, NULL) != 0)
        bail("cannot create the pool: %s", cx.errmsg);
    pool_id = r.pool_id;
    if (rc_pool_attach(&cy, "shared", PCORE_ATTACH_WRITE, &r, NULL) != 0
        || rc_pool_attach(&cr, "shared", 0, &r, &fd) != 0)
        bail("cannot attach: %s %s", cy.errmsg, cr.errmsg);
    void *map = NULL;
    if (fd < 0 || pcore_shm_map(fd, r.bytes, 0, &map) != 0)
        bail("the reader cannot map the pool");
    close(fd);
    view = map;

    /* x: four full blocks of random K and V in every layer, mirrored privately. */
    struct pcore_sqe s = ids_sqe(&cx, PAGED_OP_ALLOC, xb, 4);
    must(&cx, s, "x's ALLOC");
    memcpy(xb, rc_ptr(&cx, s.u.blocks.ids_off), sizeof xb);
    int32_t slots[4 * B];
    for (int t = 0; t < 4 * B; t++)
        slots[t] = xb[t / B] * B + t % B;
    s = append_sqe(&cx, slots, 4 * B, 1);
    must(&cx, s, "x's APPEND");
    mirror = (pk_cache) { NULL, L, N, H, D, B, PAGED_DTYPE_F32, 1.0f, 1.0f };
    mirror.base = bcalloc(pk_cache_bytes(&mirror), 1);
    pk_append_args a = { .cache = mirror, .layer_begin = 0, .num_layers = L, .num_tokens = 4 * B,
                         .src_dtype = PAGED_DTYPE_F32, .k = rc_ptr(&cx, s.u.append.k_off),
                         .v = rc_ptr(&cx, s.u.append.v_off), .slot_mapping = slots };
    if (pk_ref_append(&a) != 0)
        bail("reference append failed");
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < B; t++)
            x_tokens[i][t] = (int32_t) tap_rng_below(&rng, 50000);

    /* y: two blocks of its own with 20 tokens, so its valid requests have data to read. */
    s = ids_sqe(&cy, PAGED_OP_ALLOC, yb, 2);
    must(&cy, s, "y's ALLOC");
    memcpy(yb, rc_ptr(&cy, s.u.blocks.ids_off), sizeof yb);
    int32_t ys[20];
    for (int t = 0; t < 20; t++)
        ys[t] = yb[t / B] * B + t % B;
    must(&cy, append_sqe(&cy, ys, 20, 1), "y's APPEND");
    ok(x_blocks_differ() == 0, "x's four blocks read back through the reader's read-only mapping");
}

/* Runs the uid cases, then the block and arena cases; returns 0 (TAP reports). */
int main(void)
{
    tap_rng_seed(&rng, tap_seed());
    plan_lazy();
    /* Other uids must reach the socket: a world-searchable directory, a 0666 socket. */
    pagedd_mkdir(&daemon_);
    if (chmod(daemon_.dir, 0755) != 0)
        sysbail("chmod %s", daemon_.dir);
    const char *args[] = { "--socket-mode=0666", NULL };
    int st;
    if (pagedd_start(&daemon_, args, NULL, &st) != 0)
        bail("pagedd did not start (status %d)", st);

    uid_cases();
    setup_clients();
    block_cases();
    arena_cases();

    rc_close(&cx);
    rc_close(&cy);
    rc_close(&cr);
    st = pagedd_stop(&daemon_);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exited cleanly on SIGTERM (status %d)", st);
    pagedd_cleanup(&daemon_);
    free(mirror.base);
    return 0;
}
