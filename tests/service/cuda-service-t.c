/* cuda-service-t.c: pagedd --backend cuda, several client processes: mapped pools, APPEND, DECODE, PREFILL, reclaim. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "paged.h"
#include "kernels/kernels.h"
#include "lib/cuda_driver.h"
#include "lib/core/proto.h"
#include "tests/kernels/gpu_util.h"
#include "tests/service/rawclient.h"
#include "tests/service/proc.h"
#include "tests/tap/basic.h"

/*
 * The parent never touches CUDA: a process that has initialized CUDA cannot use it in a
 * child it forks, and every client here is a forked child. So the device probe runs in a
 * child of its own, each child reports its checks through a pipe as fixed-size records
 * (atomic, being under PIPE_BUF), and only the parent prints TAP. The whole scenario runs
 * twice: with the daemon exporting VMM allocations as POSIX descriptors (the default on an
 * H100) and the device named by index, then with PAGEDD_CUDA_EXPORT=ipc forcing the legacy
 * CUDA IPC fallback and the device named by its UUID.
 */

#define L 2
#define H 2               /* KV heads */
#define QH 8              /* query heads: GQA groups of 4 */
#define D 128
#define B 16
#define N 256
#define NSEQ 3
#define MAXBLK 6          /* block-table row: contexts of up to 96 tokens */
#define QO_MAX 8          /* PREFILL query rows per sequence at most */
#define WORKERS 4         /* clean workers; one more, the victim, is killed */
#define VICTIM WORKERS
#define NPROC (WORKERS + 1)
#define WAIT_MS 120000    /* the longest any step may take before the test gives up */

static const char *const pool_names[2] = { "cuda-f16", "cuda-bf16" };
static const int32_t pool_dtypes[2] = { PAGED_DTYPE_F16, PAGED_DTYPE_BF16 };

enum rec_kind { REC_RESULT = 1, REC_BLOCKS, REC_READY };

/* What a child tells the parent: one check, the blocks it wrote, or that it is ready. */
struct rec {
    int32_t kind;
    int32_t who;              /* worker index; -1 for the reader */
    int32_t ok;
    int32_t pool;             /* REC_BLOCKS: pool index */
    int32_t nblocks;
    int32_t ids[NSEQ * MAXBLK];
    uint64_t hash;            /* REC_BLOCKS: FNV-1a of those blocks, every layer, K and V */
    char msg[200];
};
_Static_assert(sizeof(struct rec) <= PIPE_BUF, "records are written atomically");

static struct pagedd daemon_;
static uint64_t seed;
static int round_;            /* 0: VMM export, 1: legacy IPC */
static char device_uuid[64];  /* device 0's, "GPU-..." (the parent learns it from a child) */
static const char *round_name;
static int out_fd = -1;       /* in a child: the write end of the result pipe */
static int child_who;

/* Writes one record to the parent; a child that cannot report has nothing left to do. */
static void send_rec(const struct rec *r)
{
    if (write(out_fd, r, sizeof *r) != (ssize_t) sizeof *r)
        _exit(90);
}

/* Reports one check from a child; returns cond. */
static int check(int cond, const char *fmt, ...) TAP_PRINTF(2, 3);
static int check(int cond, const char *fmt, ...)
{
    struct rec r;
    memset(&r, 0, sizeof r);
    r.kind = REC_RESULT;
    r.who = child_who;
    r.ok = cond != 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r.msg, sizeof r.msg, fmt, ap);
    va_end(ap);
    send_rec(&r);
    return cond;
}

/* Reports a failed check that leaves a child nothing more to test, and exits. */
static void fatal(const char *fmt, ...) TAP_PRINTF(1, 2);
static void fatal(const char *fmt, ...)
{
    struct rec r;
    memset(&r, 0, sizeof r);
    r.kind = REC_RESULT;
    r.who = child_who;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r.msg, sizeof r.msg, fmt, ap);
    va_end(ap);
    send_rec(&r);
    _exit(1);
}

/* Returns n bytes of host memory, or exits the child. */
static void *xmalloc(size_t n)
{
    void *p = malloc(n > 0 ? n : 1);
    if (p == NULL)
        fatal("[%s] process %d: out of host memory", round_name, child_who);
    return p;
}

/* Returns n bytes of device memory, or exits the child. */
static void *dev_alloc(size_t n)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess)
        fatal("[%s] process %d: cudaMalloc(%zu): %s", round_name, child_who, n, cudaGetErrorString(e));
    return p;
}

/* Copies n bytes between host and device (either way), or exits the child. */
static void copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    cudaError_t e = cudaMemcpy(dst, src, n, kind);
    if (e != cudaSuccess)
        fatal("[%s] process %d: cudaMemcpy of %zu bytes: %s", round_name, child_who, n,
              cudaGetErrorString(e));
}

/* Returns the FNV-1a hash of blocks ids[0..n) of a host copy of a pool, every layer, K and
 * V (each block of a layer's K or V is one contiguous [H][B][D] run). */
static uint64_t blocks_hash(const pk_cache *hc, const int32_t *ids, int n)
{
    uint64_t h = 1469598103934665603ull;
    size_t run = (size_t) H * B * D * pk_dtype_size(hc->dtype);
    for (int i = 0; i < n; i++)
        for (int l = 0; l < L; l++)
            for (int kv = 0; kv < 2; kv++) {
                const unsigned char *p = (const unsigned char *) hc->base
                                         + pk_cache_index(hc, l, kv, ids[i], 0, 0) * pk_dtype_size(hc->dtype);
                for (size_t j = 0; j < run; j++) {
                    h ^= p[j];
                    h *= 1099511628211ull;
                }
            }
    return h;
}

/* One worker's sequences: lengths, block tables and the blocks behind them. */
struct seqs {
    int32_t lens[NSEQ];
    int32_t bt[NSEQ * MAXBLK];
    int32_t ids[NSEQ * MAXBLK];
    int nblocks;
    int tokens;
};

/* Fills the ALiBi slopes of the query heads (ALiBi's geometric series); returns nothing. */
static void alibi_slopes(float *s)
{
    for (int h = 0; h < QH; h++)
        s[h] = exp2f(-8.0f * (float) (h + 1) / QH);
}

/* DECODE through the daemon (q and out in this process's device memory) against the CPU
 * reference on the host copy hc of the pool; with_opts adds ALiBi, a soft cap and a window.
 * Reports the check. */
static void decode_case(paged_pool *p, const pk_cache *hc, const struct seqs *sq, int with_opts,
                        tap_rng *rng)
{
    int32_t dt = hc->dtype;
    size_t qn = (size_t) NSEQ * QH * D, bytes = qn * pk_dtype_size(dt);
    void *q = xmalloc(bytes), *got = xmalloc(bytes), *want = xmalloc(bytes);
    gu_fill(rng, q, qn, dt, 1.0f, 1.0f);
    void *dq = dev_alloc(bytes), *dout = dev_alloc(bytes);
    copy(dq, q, bytes, cudaMemcpyHostToDevice);
    /* Poison the output: NaN in every float type, so an unwritten row fails. */
    if (cudaMemset(dout, 0xff, bytes) != cudaSuccess)
        fatal("[%s] worker %d: cudaMemset", round_name, child_who);
    float slopes[QH];
    alibi_slopes(slopes);
    paged_attn_args a = {
        .num_seqs = NSEQ, .num_q_heads = QH, .dtype = (paged_dtype) dt, .q = dq, .out = dout,
        .block_tables = sq->bt, .bt_stride = MAXBLK, .seq_lens = sq->lens,
        .sm_scale = 1.0f / sqrtf((float) D),
    };
    if (with_opts) {
        a.soft_cap = 0.5f;
        a.window = 5;
        a.alibi_slopes = slopes;
    }
    const char *what = with_opts ? " with ALiBi, soft cap 0.5, window 5" : "";
    int rc = paged_decode(p, 1, &a);
    if (check(rc == 0, "[%s] worker %d: DECODE %s%s returns OK (%s)", round_name, child_who,
              gu_dtype_name(dt), what, rc == 0 ? "ok" : paged_strerror(rc))) {
        copy(got, dout, bytes, cudaMemcpyDeviceToHost);
        pk_decode_args r = {
            .cache = *hc, .layer = 1, .num_seqs = NSEQ, .num_q_heads = QH, .q_dtype = dt,
            .q = q, .out = want, .block_tables = sq->bt, .bt_stride = MAXBLK,
            .seq_lens = sq->lens,
            .opts = { a.sm_scale, a.soft_cap, a.window, with_opts ? slopes : NULL },
        };
        double worst = 0;
        int good = pk_ref_decode(&r) == 0
                   && gu_compare(got, want, (size_t) NSEQ * QH, D, dt, gu_tolerance(dt), &worst);
        check(good, "[%s] worker %d: DECODE %s D=%d B=%d GQA %d%s, lengths %d %d %d: matches "
              "pk_ref_decode (worst row error %.2g)", round_name, child_who, gu_dtype_name(dt), D, B,
              QH / H, what, sq->lens[0], sq->lens[1], sq->lens[2], worst);
    }
    cudaFree(dq);
    cudaFree(dout);
    free(q);
    free(got);
    free(want);
}

/* PREFILL through the daemon against the CPU reference, causal, ragged query rows. Reports
 * the check. */
static void prefill_case(paged_pool *p, const pk_cache *hc, const struct seqs *sq, tap_rng *rng)
{
    int32_t dt = hc->dtype;
    int32_t qo[NSEQ + 1] = { 0 };
    int32_t max_qo = 0;
    for (int s = 0; s < NSEQ; s++) {
        int32_t n = gu_range(rng, 1, QO_MAX);
        if (n > sq->lens[s])
            n = sq->lens[s];
        qo[s + 1] = qo[s] + n;
        if (n > max_qo)
            max_qo = n;
    }
    size_t qn = (size_t) qo[NSEQ] * QH * D, bytes = qn * pk_dtype_size(dt);
    void *q = xmalloc(bytes), *got = xmalloc(bytes), *want = xmalloc(bytes);
    gu_fill(rng, q, qn, dt, 1.0f, 1.0f);
    void *dq = dev_alloc(bytes), *dout = dev_alloc(bytes);
    copy(dq, q, bytes, cudaMemcpyHostToDevice);
    if (cudaMemset(dout, 0xff, bytes) != cudaSuccess)
        fatal("[%s] worker %d: cudaMemset", round_name, child_who);
    paged_attn_args a = {
        .num_seqs = NSEQ, .num_q_heads = QH, .dtype = (paged_dtype) dt, .q = dq, .out = dout,
        .block_tables = sq->bt, .bt_stride = MAXBLK, .seq_lens = sq->lens, .qo_indptr = qo,
        .sm_scale = 1.0f / sqrtf((float) D),
    };
    int rc = paged_prefill(p, 0, &a);
    if (check(rc == 0, "[%s] worker %d: PREFILL %s returns OK (%s)", round_name, child_who,
              gu_dtype_name(dt), rc == 0 ? "ok" : paged_strerror(rc))) {
        copy(got, dout, bytes, cudaMemcpyDeviceToHost);
        pk_prefill_args r = {
            .cache = *hc, .layer = 0, .num_seqs = NSEQ, .num_q_heads = QH, .q_dtype = dt,
            .causal = 1, .total_q = qo[NSEQ], .max_qo_len = max_qo, .q = q, .out = want,
            .qo_indptr = qo, .block_tables = sq->bt, .bt_stride = MAXBLK, .seq_lens = sq->lens,
            .opts = { a.sm_scale, 0, 0, NULL },
        };
        double worst = 0;
        int good = pk_ref_prefill(&r) == 0
                   && gu_compare(got, want, (size_t) qo[NSEQ] * QH, D, dt, gu_tolerance(dt), &worst);
        check(good, "[%s] worker %d: PREFILL %s D=%d B=%d GQA %d, %d query rows: matches "
              "pk_ref_prefill (worst row error %.2g)", round_name, child_who, gu_dtype_name(dt), D,
              B, QH / H, qo[NSEQ], worst);
    }
    cudaFree(dq);
    cudaFree(dout);
    free(q);
    free(got);
    free(want);
}

/* Lays out a worker's three sequences: one token, whole blocks, one ending mid-block. */
static void make_seqs(struct seqs *sq, tap_rng *rng)
{
    memset(sq, 0, sizeof *sq);
    sq->lens[0] = 1;
    sq->lens[1] = B * gu_range(rng, 1, 3);
    sq->lens[2] = gu_range(rng, B + 1, MAXBLK * B - 1);
    if (sq->lens[2] % B == 0)
        sq->lens[2]--;
    for (int s = 0; s < NSEQ; s++) {
        sq->nblocks += (sq->lens[s] + B - 1) / B;
        sq->tokens += sq->lens[s];
    }
}

/*
 * A client process: attaches to its pool through libpaged, allocates blocks, APPENDs K and
 * V from its own device memory, reads its mapping of the pool back, runs DECODE and
 * PREFILL, and reports the blocks it wrote. Then it holds everything until the parent
 * writes to cmd_fd, and leaves: workers 0 and 1 close, 2 and 3 just exit. The victim stops
 * after the APPEND check and streams DECODEs until the parent kills it.
 */
static void worker(int w, int cmd_fd)
{
    child_who = w;
    int pi = w == VICTIM ? 0 : w % 2;
    int32_t dt = pool_dtypes[pi];
    tap_rng rng;
    tap_rng_seed(&rng, seed * 1000003u + (uint64_t) w * 7919u + (uint64_t) round_);
    if (cudaSetDevice(0) != cudaSuccess || cudaFree(NULL) != cudaSuccess)
        fatal("[%s] worker %d: CUDA device 0 is usable", round_name, w);
    char name[32], err[256];
    snprintf(name, sizeof name, "cuda-worker-%d", w);
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = name, .data_arena_size = 8u << 20 };
    paged_client *c = NULL;
    int rc = paged_client_connect_err(&o, &c, err, sizeof err);
    if (!check(rc == 0, "[%s] worker %d connects to the cuda daemon (%s)", round_name, w,
               rc == 0 ? "ok" : err))
        _exit(1);
    check(paged_client_backend(c) == PAGED_BACKEND_CUDA, "[%s] worker %d: the daemon says backend cuda",
          round_name, w);
    paged_pool *p = NULL;
    rc = paged_pool_attach(c, pool_names[pi], &p);
    if (!check(rc == 0, "[%s] worker %d attaches to pool %s (%s)", round_name, w, pool_names[pi],
               rc == 0 ? "ok" : paged_client_error(c)))
        _exit(1);
    paged_pool_info info;
    paged_pool_get_info(p, &info);
    check(info.writable && (int32_t) info.dtype == dt && info.num_blocks == N,
          "[%s] worker %d: pool %s is writable, %s, %d blocks", round_name, w, pool_names[pi],
          gu_dtype_name(dt), N);

    struct seqs sq;
    make_seqs(&sq, &rng);
    rc = paged_alloc(p, (uint32_t) sq.nblocks, sq.ids);
    if (!check(rc == 0, "[%s] worker %d: ALLOC of %d blocks (%s)", round_name, w, sq.nblocks,
               rc == 0 ? "ok" : paged_client_error(c)))
        _exit(1);
    int next = 0;
    for (int s = 0; s < NSEQ; s++) {
        int used = (sq.lens[s] + B - 1) / B;
        for (int j = 0; j < MAXBLK; j++)
            sq.bt[s * MAXBLK + j] = j < used ? sq.ids[next++] : -1;
    }

    /* K and V of every token, every layer, [L][T][H][D], random in the pool's dtype. */
    int T = sq.tokens;
    size_t kvn = (size_t) L * (size_t) T * H * D, kvbytes = kvn * pk_dtype_size(dt);
    uint16_t *k = xmalloc(kvbytes), *v = xmalloc(kvbytes);
    gu_fill(&rng, k, kvn, dt, 1.0f, 1.0f);
    gu_fill(&rng, v, kvn, dt, 1.0f, 1.0f);
    int32_t *slots = xmalloc((size_t) T * 4);
    for (int s = 0, g = 0; s < NSEQ; s++)
        for (int t = 0; t < sq.lens[s]; t++, g++)
            slots[g] = sq.bt[s * MAXBLK + t / B] * B + t % B;
    void *dk = dev_alloc(kvbytes), *dv = dev_alloc(kvbytes);
    copy(dk, k, kvbytes, cudaMemcpyHostToDevice);
    copy(dv, v, kvbytes, cudaMemcpyHostToDevice);
    rc = paged_append(p, PAGED_ALL_LAYERS, (uint32_t) T, (paged_dtype) dt, dk, dv, slots);
    check(rc == 0, "[%s] worker %d: APPEND of %d tokens, every layer, from device memory (%s)",
          round_name, w, T, rc == 0 ? "ok" : paged_client_error(c));

    /* Read the pool back through this process's own mapping of it. */
    void *base = NULL;
    rc = paged_pool_map(p, &base);
    if (!check(rc == 0 && base != NULL, "[%s] worker %d: paged_pool_map gives a device pointer (%s)",
               round_name, w, rc == 0 ? "ok" : paged_client_error(c)))
        _exit(1);
    unsigned char *pool = xmalloc((size_t) info.bytes);
    copy(pool, base, (size_t) info.bytes, cudaMemcpyDeviceToHost);
    pk_cache hc = {
        .base = pool, .num_layers = L, .num_blocks = N, .num_kv_heads = H, .head_dim = D,
        .block_size = B, .dtype = dt, .k_scale = 1.0f, .v_scale = 1.0f,
    };
    long bad = 0;
    for (int l = 0; l < L; l++)
        for (int g = 0; g < T; g++)
            for (int h = 0; h < H; h++) {
                size_t src = (((size_t) l * (size_t) T + (size_t) g) * H + (size_t) h) * D;
                int32_t blk = slots[g] / B, off = slots[g] % B;
                const uint16_t *kp = (const uint16_t *) pool + pk_cache_index(&hc, l, 0, blk, h, off);
                const uint16_t *vp = (const uint16_t *) pool + pk_cache_index(&hc, l, 1, blk, h, off);
                bad += memcmp(kp, k + src, D * 2) != 0;
                bad += memcmp(vp, v + src, D * 2) != 0;
            }
    check(bad == 0, "[%s] worker %d: its mapping of pool %s holds every appended K and V row "
          "bit-exactly at its slot (%ld rows wrong)", round_name, w, pool_names[pi], bad);
    cudaFree(dk);
    cudaFree(dv);

    if (w == VICTIM) {
        size_t qn = (size_t) NSEQ * QH * D, qb = qn * pk_dtype_size(dt);
        void *q = xmalloc(qb), *dq = dev_alloc(qb), *dout = dev_alloc(qb);
        gu_fill(&rng, q, qn, dt, 1.0f, 1.0f);
        copy(dq, q, qb, cudaMemcpyHostToDevice);
        paged_attn_args a = {
            .num_seqs = NSEQ, .num_q_heads = QH, .dtype = (paged_dtype) dt, .q = dq,
            .out = dout, .block_tables = sq.bt, .bt_stride = MAXBLK, .seq_lens = sq.lens,
        };
        struct rec r = { .kind = REC_READY, .who = w, .ok = 1 };
        send_rec(&r);
        /* Requests in flight most of the time: that is where the SIGKILL lands. */
        for (long i = 0; i < 10000000; i++)
            if (paged_decode(p, 0, &a) != 0)
                _exit(4);
        _exit(5);
    }

    decode_case(p, &hc, &sq, 0, &rng);
    decode_case(p, &hc, &sq, 1, &rng);
    prefill_case(p, &hc, &sq, &rng);

    struct rec r = { .kind = REC_BLOCKS, .who = w, .ok = 1, .pool = pi, .nblocks = sq.nblocks };
    memcpy(r.ids, sq.ids, sizeof r.ids);
    r.hash = blocks_hash(&hc, sq.ids, sq.nblocks);
    send_rec(&r);

    /* Hold the blocks while the reader looks at them. */
    struct pollfd pf = { .fd = cmd_fd, .events = POLLIN };
    char ch;
    if (poll(&pf, 1, WAIT_MS) <= 0 || read(cmd_fd, &ch, 1) != 1)
        _exit(6);
    free(k);
    free(v);
    free(slots);
    free(pool);
    if (w < 2)
        paged_client_close(c);
    /* Workers 2 and 3 leave holding their blocks, mapping and arena: the hang-up reclaims. */
    _exit(0);
}

/*
 * A read-only attacher: a raw control connection attaches to each pool without asking for
 * write, maps the memory read-only with libpaged's own driver code, and checks that each
 * worker's blocks hold what that worker reported (blocks[w], hashed the same way).
 */
static void reader(const struct rec *blocks, uint32_t want_kind)
{
    child_who = -1;
    struct rc_client ctl;
    if (rc_connect(daemon_.socket, "cuda-reader", PCORE_HELLO_CONTROL, &ctl) != 0)
        fatal("[%s] the reader connects (%s)", round_name, ctl.errmsg);
    struct pc_cuda *cu = NULL;
    char err[256] = "";
    if (pc_cuda_load(&cu, err, sizeof err) != 0)
        fatal("[%s] the reader loads the CUDA driver (%s)", round_name, err);
    for (int pi = 0; pi < 2; pi++) {
        struct pcore_msg_pool_reply r;
        int fd = -1;
        int rc = rc_pool_attach(&ctl, pool_names[pi], 0, &r, &fd);
        if (!check(rc == 0 && r.writable == 0, "[%s] an attacher of %s that does not ask to write is "
                   "granted read-only (%s)", round_name, pool_names[pi], rc == 0 ? "ok" : ctl.errmsg))
            continue;
        check(r.mem_kind == want_kind && (fd >= 0) == (want_kind == PCORE_MEM_CUDA_VMM)
              && r.alloc_bytes >= r.bytes, "[%s] the read-only export of %s is %s (kind %u, %s)",
              round_name, pool_names[pi], want_kind == PCORE_MEM_CUDA_VMM ? "a VMM descriptor" : "an IPC handle",
              r.mem_kind, fd >= 0 ? "a descriptor" : "no descriptor");
        int dev = 0;
        struct pc_devmap m;
        memset(&m, 0, sizeof m);
        rc = pc_cuda_find_device(cu, r.device_uuid, &dev, err, sizeof err);
        if (rc == 0)
            rc = r.mem_kind == PCORE_MEM_CUDA_VMM
                     ? pc_cuda_map_vmm(cu, dev, fd, r.alloc_bytes, 0, &m, err, sizeof err)
                     : pc_cuda_map_ipc(cu, dev, r.ipc_handle, &m, err, sizeof err);
        if (fd >= 0)
            close(fd);
        if (!check(rc == 0, "[%s] the reader maps %s read-only on the daemon's GPU (%s)", round_name,
                   pool_names[pi], rc == 0 ? "ok" : err))
            continue;
        if (cudaSetDevice(dev) != cudaSuccess)
            fatal("[%s] reader: cudaSetDevice(%d)", round_name, dev);
        unsigned char *pool = xmalloc((size_t) r.bytes);
        copy(pool, (const void *) (uintptr_t) m.dptr, (size_t) r.bytes, cudaMemcpyDeviceToHost);
        pk_cache hc = {
            .base = pool, .num_layers = L, .num_blocks = N, .num_kv_heads = H, .head_dim = D,
            .block_size = B, .dtype = pool_dtypes[pi], .k_scale = 1.0f, .v_scale = 1.0f,
        };
        for (int w = 0; w < WORKERS; w++)
            if (blocks[w].kind == REC_BLOCKS && blocks[w].pool == pi)
                check(blocks_hash(&hc, blocks[w].ids, blocks[w].nblocks) == blocks[w].hash,
                      "[%s] the read-only attacher sees the bytes worker %d appended to %s (%d blocks)",
                      round_name, w, pool_names[pi], blocks[w].nblocks);
        free(pool);
        pc_cuda_unmap(cu, &m);
    }
    pc_cuda_unload(cu);
    rc_close(&ctl);
    struct rec done = { .kind = REC_READY, .who = -1, .ok = 1 };
    send_rec(&done);
    _exit(0);
}

/* Forks worker w, or the reader when w < 0, with the result pipe's ends res_w and res_r,
 * its command pipe's ends cmd_r and cmd_w (-1 for the reader) and the parent's control
 * socket (closed in the child). Returns the child's pid; the child never returns. */
static pid_t spawn_child(int w, int res_w, int res_r, int cmd_r, int cmd_w, const struct rec *blocks,
                         uint32_t want_kind, int ctl_sock)
{
    pid_t pid = bfork();
    if (pid > 0)
        return pid;
    close(ctl_sock);
    close(res_r);
    if (cmd_w >= 0)
        close(cmd_w);
    out_fd = res_w;
    if (w < 0)
        reader(blocks, want_kind);
    else
        worker(w, cmd_r);
    _exit(99);
}

/* Reads records and prints the checks among them until done() says so, every child has
 * hung up, or WAIT_MS pass. blocks and flags collect what came; returns 0 on EOF, 1 when
 * done, -1 on timeout. */
static int collect(int fd, struct rec *blocks, int *ready, int (*done)(const struct rec *, const int *))
{
    for (int i = 0; i < WAIT_MS / 100; i++) {
        if (done != NULL && done(blocks, ready))
            return 1;
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        int n = poll(&pf, 1, 100);
        if (n < 0)
            sysbail("poll");
        if (n == 0)
            continue;
        struct rec r;
        ssize_t got = read(fd, &r, sizeof r);
        if (got == 0)
            return 0;
        if (got != (ssize_t) sizeof r)
            bail("short record from a child (%zd bytes)", got);
        i = 0;
        if (r.kind == REC_RESULT)
            ok(r.ok, "%s", r.msg);
        else if (r.kind == REC_BLOCKS && r.who >= 0 && r.who < WORKERS)
            blocks[r.who] = r;
        else if (r.kind == REC_READY)
            ready[r.who < 0 ? NPROC : r.who] = 1;
    }
    return -1;
}

/* The children of a round (the reader last) and which have been reaped early. */
static pid_t pids[NPROC + 1];
static int gone[NPROC + 1];

/* Marks children that exited; returns nothing. */
static void reap_early(void)
{
    for (int i = 0; i <= NPROC; i++)
        if (pids[i] > 0 && !gone[i]) {
            int st;
            if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
                gone[i] = 1;
                if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
                    ok(0, "[%s] process %d ended early (status %d)", round_name, i, st);
            }
        }
}

/* Returns whether phase one is over: every worker reported its blocks or is gone, and the
 * victim streams or is gone. */
static int setup_done(const struct rec *blocks, const int *ready)
{
    reap_early();
    for (int w = 0; w < WORKERS; w++)
        if (blocks[w].kind != REC_BLOCKS && !gone[w])
            return 0;
    return ready[VICTIM] || gone[VICTIM];
}

/* Returns whether the reader said it is done (or is gone). */
static int reader_done(const struct rec *blocks, const int *ready)
{
    (void) blocks;
    reap_early();
    return ready[NPROC] || gone[NPROC];
}

/* Checks STATUS: backend cuda, healthy, some free device memory. Returns nothing. */
static void status_check(struct rc_client *ctl, const char *when)
{
    struct pcore_msg_hdr h = { PCORE_MSG_STATUS, 0, 0, sizeof h };
    struct pcore_msg_status_reply sr;
    memset(&sr, 0, sizeof sr);
    is_int(sizeof sr, rc_control(ctl, &h, sizeof h, &sr, sizeof sr, NULL), "[%s] STATUS answers %s",
           round_name, when);
    ok(sr.backend == PAGED_BACKEND_CUDA && sr.device_ordinal == 0 && sr.healthy == 1
       && strcmp(sr.health, "ok") == 0 && sr.device_mem_free > 0,
       "[%s] STATUS %s: backend cuda, device 0 (%.40s, named %s), healthy, %llu bytes free", round_name, when,
       sr.device_name, round_ == 0 ? "0" : device_uuid, (unsigned long long) sr.device_mem_free);
}

/* Runs the whole scenario against one daemon; returns nothing. */
static void run_round(int round)
{
    round_ = round;
    round_name = round == 0 ? "vmm" : "ipc";
    uint32_t want_kind = round == 0 ? PCORE_MEM_CUDA_VMM : PCORE_MEM_CUDA_IPC;
    /* The VMM round names the device by index, the IPC round by its UUID. */
    char device[80];
    snprintf(device, sizeof device, "--device=%s", round == 0 ? "0" : device_uuid);
    const char *extra[] = { "--backend=cuda", device, "--log-level=debug", NULL };
    memset(&daemon_, 0, sizeof daemon_);
    int st = 0;
    const char *ipc[] = { "PAGEDD_CUDA_EXPORT=ipc", NULL };
    int started = pagedd_start(&daemon_, extra, round == 1 ? ipc : NULL, &st);
    if (started != 0) {
        pagedd_log_diag(&daemon_, 40);
        bail("pagedd --backend cuda did not start (status %d)", st);
    }
    struct rc_client ctl;
    if (rc_connect(daemon_.socket, "cuda-ctl", PCORE_HELLO_CONTROL, &ctl) != 0)
        bail("control connection failed: %s", ctl.errmsg);
    status_check(&ctl, "at start");
    struct pcore_pool_item start[2];
    for (int pi = 0; pi < 2; pi++) {
        struct pcore_msg_pool_reply r;
        int fd = -1;
        int rc = rc_pool_create(&ctl, pool_names[pi], L, H, D, B, (uint32_t) pool_dtypes[pi], N,
                                0600, 0, &r, &fd);
        if (rc != 0)
            bail("cannot create pool %s: %s", pool_names[pi], ctl.errmsg);
        ok(r.mem_kind == want_kind && (fd >= 0) == (want_kind == PCORE_MEM_CUDA_VMM)
           && r.alloc_bytes >= r.bytes && r.alloc_bytes % (2u << 20) == 0,
           "[%s] pool %s is exported as %s, %llu bytes allocated for %llu", round_name,
           pool_names[pi], want_kind == PCORE_MEM_CUDA_VMM ? "a VMM descriptor" : "an IPC handle",
           (unsigned long long) r.alloc_bytes, (unsigned long long) r.bytes);
        if (fd >= 0)
            close(fd);
        is_int(0, rc_pool_item(&ctl, pool_names[pi], &start[pi]), "[%s] LIST pools finds %s",
               round_name, pool_names[pi]);
        is_int(N, start[pi].free, "[%s] %s starts with %d free blocks", round_name, pool_names[pi], N);
    }

    int res[2];
    if (pipe(res) < 0)
        sysbail("pipe");
    int cmd[NPROC][2];
    struct rec blocks[WORKERS];
    int ready[NPROC + 1];
    memset(blocks, 0, sizeof blocks);
    memset(ready, 0, sizeof ready);
    memset(pids, 0, sizeof pids);
    memset(gone, 0, sizeof gone);
    for (int w = 0; w < NPROC; w++) {
        if (pipe(cmd[w]) < 0)
            sysbail("pipe");
        pids[w] = spawn_child(w, res[1], res[0], cmd[w][0], cmd[w][1], NULL, want_kind, ctl.sock);
        close(cmd[w][0]);
    }
    if (collect(res[0], blocks, ready, setup_done) != 1) {
        pagedd_log_diag(&daemon_, 40);
        bail("[%s] the workers did not finish their setup within %d ms", round_name, WAIT_MS);
    }
    ok(ready[VICTIM], "[%s] the victim streams DECODEs", round_name);

    /* The read-only attacher, while the workers still hold their blocks. */
    pids[NPROC] = spawn_child(-1, res[1], res[0], -1, -1, blocks, want_kind, ctl.sock);
    close(res[1]);
    if (collect(res[0], blocks, ready, reader_done) != 1) {
        pagedd_log_diag(&daemon_, 40);
        bail("[%s] the reader did not finish within %d ms", round_name, WAIT_MS);
    }

    /* Kill the victim mid-stream, let the others go, and wait for every one of them. */
    if (!gone[VICTIM])
        kill(pids[VICTIM], SIGKILL);
    for (int w = 0; w < NPROC; w++) {
        if (write(cmd[w][1], "g", 1) != 1 && !gone[w] && w != VICTIM)
            diag("[%s] cannot tell worker %d to go", round_name, w);
        close(cmd[w][1]);
    }
    if (collect(res[0], blocks, ready, NULL) != 0) {
        pagedd_log_diag(&daemon_, 40);
        bail("[%s] the children did not all exit within %d ms", round_name, WAIT_MS);
    }
    close(res[0]);
    for (int i = 0; i <= NPROC; i++) {
        if (gone[i])
            continue;
        waitpid(pids[i], &st, 0);
        if (i == VICTIM)
            ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "[%s] the victim died of SIGKILL", round_name);
        else
            ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "[%s] %s %d exited normally (status %d)",
               round_name, i == NPROC ? "reader" : "worker", i, st);
    }

    /* Every block comes back once the daemon has seen every hang-up. */
    for (int pi = 0; pi < 2; pi++) {
        struct pcore_pool_item it;
        memset(&it, 0, sizeof it);
        for (int i = 0; i < 10000; i++) {
            if (rc_pool_item(&ctl, pool_names[pi], &it) != 0)
                bail("LIST pools failed");
            if (it.referenced == 0 && it.attached == 1)
                break;
            td_pause_ms(1);
        }
        is_int(0, it.referenced, "[%s] %s: no block is referenced once every client is gone",
               round_name, pool_names[pi]);
        is_int(start[pi].free, it.free, "[%s] %s: the free count is back to %u", round_name,
               pool_names[pi], start[pi].free);
        is_int(1, it.attached, "[%s] %s: only the control connection is still attached", round_name,
               pool_names[pi]);
    }
    status_check(&ctl, "after the clients");
    rc_close(&ctl);
    st = pagedd_stop(&daemon_);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "[%s] pagedd exited cleanly on SIGTERM (status %d)",
       round_name, st);
    if (tap_failures() != 0)
        pagedd_log_diag(&daemon_, 40);
    pagedd_cleanup(&daemon_);
}

/* Returns whether this machine has a CUDA device, asking in a child so that this process
 * never initializes CUDA (its children could not use it after a fork). */
static int have_device(void)
{
    int fds[2];
    if (pipe(fds) != 0)
        sysbail("pipe");
    pid_t pid = bfork();
    if (pid == 0) {
        close(fds[0]);
        int n = 0;
        struct cudaDeviceProp prop;
        if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0 || cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
            _exit(1);
        /* Device 0's UUID as nvidia-smi -L prints it, for the round that names it so. */
        char u[64];
        const unsigned char *b = (const unsigned char *) prop.uuid.bytes;
        int len = snprintf(u, sizeof u, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                           b[14], b[15]);
        _exit(write(fds[1], u, (size_t) len) == len ? 0 : 1);
    }
    close(fds[1]);
    ssize_t got = read(fds[0], device_uuid, sizeof device_uuid - 1);
    device_uuid[got > 0 ? got : 0] = '\0';
    close(fds[0]);
    int st;
    if (waitpid(pid, &st, 0) != pid)
        sysbail("waitpid");
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 && strncmp(device_uuid, "GPU-", 4) == 0;
}

/* Runs both rounds; returns 0 (TAP reports the results). */
int main(void)
{
    if (!have_device())
        skip_all("no CUDA device");
    seed = tap_seed();
    plan_lazy();
    run_round(0);
    run_round(1);
    return 0;
}
