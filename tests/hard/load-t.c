/* load-t.c: many clients, many pipelined requests of every kind: each answered once, and the daemon does not grow. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paged.h"
#include "tests/hard/hard.h"
#include "tests/service/proc.h"

/* The pool: 2 layers, 2 KV heads, head_dim 64, blocks of 16, f32. */
#define L 2
#define H 2
#define QH 4
#define D 64
#define B 16
#define N 1536
#define PROMPT 32         /* a published prompt of 2 blocks every client LOOKUPs */
#define NSLOT 8           /* id areas for ALLOC and LOOKUP results awaiting their FREE */
#define MAXFORK 8         /* FORKs whose FREE has not completed yet */
#define WINDOW 24         /* requests in flight per client */
#define BATCH 8           /* requests prepared per submit */

#define CLIENTS_SHORT 16
#define REQUESTS_SHORT 1000
#define CLIENTS_LONG 64
#define REQUESTS_LONG 10000

static struct pagedd daemon_;
static uint64_t seed;
static int32_t prompt_tokens[PROMPT];

/* One client's account of its run. */
struct load_report {
    long sent;            /* requests submitted, the synchronous ones included */
    long tags;            /* user tags handed out in the asynchronous stream */
    long answered;        /* completions reaped for them */
    long dup, unknown, missing, errors;
    long by_op[PCORE_OP_COUNT_];
    char why[160];
};

/* What one tag was for, so its completion can be followed up. */
struct tag_info {
    uint8_t op;
    int8_t slot;          /* id area of an ALLOC or LOOKUP, or of the FREE that empties it */
    uint8_t seen;
    uint8_t fork_free;    /* a FREE that undoes a FORK */
};

/* A FREE to issue once its ALLOC, LOOKUP or FORK has completed. */
struct pending_free {
    int8_t slot;          /* -1: the FORK's two blocks */
    uint32_t count;
};

/* Records a client failure's first reason; returns nothing. */
static void why(struct load_report *r, const char *what, long tag, int status)
{
    if (r->why[0] == '\0')
        snprintf(r->why, sizeof r->why, "%s (tag %ld, %s)", what, tag, paged_strerror(status));
}

/* Runs one synchronous call's accounting: counts it, records a failure. Returns rc. */
static int sync_call(struct load_report *r, int rc, const char *what)
{
    r->sent++;
    if (rc < 0) {
        r->errors++;
        why(r, what, 0, rc);
    }
    return rc;
}

/*
 * One client: takes 5 blocks and the published prompt, then streams `requests` requests
 * drawn from NOP, ALLOC, FORK, LOOKUP, APPEND, DECODE and COPY, WINDOW in flight, BATCH per
 * submit; every ALLOC, FORK and LOOKUP is undone by a FREE once it completes. Every tag
 * must come back exactly once with PAGED_OK. Writes its report to report_fd and exits.
 */
static void load_client(int id, long requests, int report_fd)
{
    struct load_report r;
    memset(&r, 0, sizeof r);
    tap_rng rng;
    tap_rng_seed(&rng, seed * 131 + (uint64_t) id + (uint64_t) requests * 7);
    char name[32];
    snprintf(name, sizeof name, "load-%d", id);
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = name, .sq_entries = 32,
                             .cq_entries = 64, .host_arena_size = 1 << 20 };
    paged_client *c = NULL;
    paged_pool *p = NULL;
    if (paged_client_connect(&o, &c) != PAGED_OK || paged_pool_attach(c, "load", &p) != PAGED_OK)
        _exit(2);
    paged_pool_info info;
    paged_pool_get_info(p, &info);

    /* Setup: 2 blocks to append to, 2 to fork, 1 to copy into; the prompt; 32 tokens of K/V. */
    int32_t own[5], pr[PROMPT / B];
    sync_call(&r, paged_alloc(p, 5, own), "setup alloc");
    if (sync_call(&r, paged_lookup(p, NULL, 0, PROMPT / B, prompt_tokens, pr), "setup lookup") != PROMPT / B)
        _exit(3);
    size_t kvn = (size_t) L * 2 * B * H * D;
    float *k = bmalloc(kvn * 4), *v = bmalloc(kvn * 4);
    hard_fill(&rng, k, kvn);
    hard_fill(&rng, v, kvn);
    int32_t slots[2 * B];
    for (int t = 0; t < 2 * B; t++)
        slots[t] = own[t / B] * B + t % B;
    sync_call(&r, paged_append(p, PAGED_ALL_LAYERS, 2 * B, PAGED_DTYPE_F32, k, v, slots), "setup append");
    free(k);
    free(v);

    /* Arguments that never change while requests are in flight. */
    uint64_t slots_off, ids_off, fork_off, bt_off, len_off, tok_off, src_off, dst_off;
    uint64_t k_off, v_off, q_off, out_off;
    int rc = PAGED_OK;
    rc |= paged_arena_alloc(c, PAGED_ARENA_HOST, sizeof slots, 4, &slots_off);
    rc |= paged_arena_alloc(c, PAGED_ARENA_HOST, NSLOT * 2 * 4, 4, &ids_off);
    rc |= paged_arena_alloc(c, PAGED_ARENA_HOST, 2 * 4, 4, &fork_off);
    rc |= paged_arena_alloc(c, PAGED_ARENA_HOST, 4 * 4, 4, &bt_off);
    rc |= paged_arena_alloc(c, PAGED_ARENA_HOST, 4, 4, &len_off);
    rc |= paged_arena_alloc(c, PAGED_ARENA_HOST, sizeof prompt_tokens, 4, &tok_off);
    rc |= paged_arena_alloc(c, PAGED_ARENA_HOST, 4, 4, &src_off);
    rc |= paged_arena_alloc(c, PAGED_ARENA_HOST, 4, 4, &dst_off);
    rc |= paged_arena_alloc(c, PAGED_ARENA_DATA, L * H * D * 4, 0, &k_off);
    rc |= paged_arena_alloc(c, PAGED_ARENA_DATA, L * H * D * 4, 0, &v_off);
    rc |= paged_arena_alloc(c, PAGED_ARENA_DATA, QH * D * 4, 0, &q_off);
    rc |= paged_arena_alloc(c, PAGED_ARENA_DATA, QH * D * 4, 0, &out_off);
    if (rc != PAGED_OK)
        _exit(4);
    unsigned char *host = paged_arena_base(c, PAGED_ARENA_HOST, NULL);
    unsigned char *data = paged_arena_base(c, PAGED_ARENA_DATA, NULL);
    memcpy(host + slots_off, slots, sizeof slots);
    memcpy(host + fork_off, own + 2, 2 * 4);
    int32_t bt[4] = { pr[0], pr[1], own[0], own[1] }, len = PROMPT + 2 * B;
    memcpy(host + bt_off, bt, sizeof bt);
    memcpy(host + len_off, &len, 4);
    memcpy(host + tok_off, prompt_tokens, sizeof prompt_tokens);
    memcpy(host + src_off, &own[2], 4);
    memcpy(host + dst_off, &own[4], 4);
    hard_fill(&rng, (float *) (data + k_off), L * H * D);
    hard_fill(&rng, (float *) (data + v_off), L * H * D);
    hard_fill(&rng, (float *) (data + q_off), QH * D);

    /* The stream. Tags count from 1; every FREE gets a tag of its own too. */
    long max_tags = 2 * requests + 2;
    struct tag_info *tags = bcalloc((size_t) max_tags, sizeof *tags);
    struct pending_free pend[NSLOT + MAXFORK];
    int npend = 0, slot_busy[NSLOT] = { 0 }, forks_out = 0;
    long issued = 0, inflight = 0;
    paged_completion comp[WINDOW];
    for (long iter = 0; iter < 100 * requests + 1000; iter++) {
        if (issued >= requests && npend == 0 && inflight == 0)
            break;
        int prepared = 0;
        while (prepared < BATCH && inflight + prepared < WINDOW && r.tags + 1 < max_tags) {
            paged_request rq;
            memset(&rq, 0, sizeof rq);
            rq.pool = p;
            long tag = r.tags + 1;
            struct tag_info ti = { 0, -1, 0, 0 };
            if (npend > 0 && (issued >= requests || tap_rng_below(&rng, 2) == 0)) {
                struct pending_free pf = pend[--npend];
                rq.op = PAGED_OP_FREE;
                rq.u.blocks.count = pf.count;
                rq.u.blocks.ids_off = pf.slot < 0 ? fork_off : ids_off + (uint64_t) pf.slot * 8;
                ti.slot = pf.slot;
                ti.fork_free = pf.slot < 0;
            } else if (issued < requests) {
                int free_slot = -1;
                for (int s = 0; s < NSLOT && free_slot < 0; s++)
                    if (!slot_busy[s])
                        free_slot = s;
                unsigned pick = (unsigned) tap_rng_below(&rng, 7);
                if ((pick == 1 || pick == 2) && free_slot < 0)
                    pick = 3; /* no id area free: copy instead */
                if (pick == 4 && forks_out >= MAXFORK)
                    pick = 5; /* enough forks out: append instead */
                switch (pick) {
                case 0:
                    rq.op = PAGED_OP_NOP;
                    rq.pool = NULL;
                    break;
                case 1:
                    rq.op = PAGED_OP_ALLOC;
                    rq.u.blocks.count = 1 + (uint32_t) tap_rng_below(&rng, 2);
                    rq.u.blocks.ids_off = ids_off + (uint64_t) free_slot * 8;
                    slot_busy[free_slot] = 1;
                    ti.slot = (int8_t) free_slot;
                    break;
                case 2:
                    rq.op = PAGED_OP_LOOKUP;
                    rq.u.prefix.num_blocks = PROMPT / B;
                    rq.u.prefix.tokens_off = tok_off;
                    rq.u.prefix.ids_off = ids_off + (uint64_t) free_slot * 8;
                    slot_busy[free_slot] = 1;
                    ti.slot = (int8_t) free_slot;
                    break;
                case 3:
                    rq.op = PAGED_OP_COPY;
                    rq.u.copy.count = 1;
                    rq.u.copy.src_off = src_off;
                    rq.u.copy.dst_off = dst_off;
                    break;
                case 4:
                    rq.op = PAGED_OP_FORK;
                    rq.u.blocks.count = 2;
                    rq.u.blocks.ids_off = fork_off;
                    forks_out++;
                    break;
                case 5:
                    rq.op = PAGED_OP_APPEND;
                    rq.layer = (int32_t) tap_rng_below(&rng, L);
                    rq.u.append.num_tokens = 1;
                    rq.u.append.dtype = PAGED_DTYPE_F32;
                    rq.u.append.k_off = k_off;
                    rq.u.append.v_off = v_off;
                    rq.u.append.slots_off = slots_off + 4 * tap_rng_below(&rng, 2 * B);
                    break;
                default:
                    rq.op = PAGED_OP_DECODE;
                    rq.layer = (int32_t) tap_rng_below(&rng, L);
                    rq.u.attn.num_seqs = 1;
                    rq.u.attn.num_q_heads = QH;
                    rq.u.attn.dtype = PAGED_DTYPE_F32;
                    rq.u.attn.q_off = q_off;
                    rq.u.attn.out_off = out_off;
                    rq.u.attn.block_tables_off = bt_off;
                    rq.u.attn.bt_stride = 4;
                    rq.u.attn.seq_lens_off = len_off;
                    break;
                }
                issued++;
            } else
                break;
            rq.tag = (uint64_t) tag;
            ti.op = (uint8_t) rq.op;
            rc = paged_prep(c, &rq);
            if (rc != PAGED_OK) {
                why(&r, "prep", tag, rc);
                r.errors++;
                _exit(write(report_fd, &r, sizeof r) == (ssize_t) sizeof r ? 5 : 6);
            }
            tags[tag] = ti;
            r.tags = tag;
            r.by_op[rq.op]++;
            prepared++;
        }
        if (prepared > 0) {
            rc = paged_submit(c);
            if (rc != prepared) {
                why(&r, "submit", r.tags, rc);
                r.errors++;
                break;
            }
            r.sent += prepared;
            inflight += prepared;
        }
        /* Wait only when the window is full or nothing more can go out now. */
        int full = inflight >= WINDOW || (issued >= requests && prepared == 0);
        int n = full ? paged_wait(c, comp, WINDOW, 10000) : paged_reap(c, comp, WINDOW);
        if (n < 0) {
            why(&r, full ? "wait" : "reap", 0, n);
            r.errors++;
            break;
        }
        for (int i = 0; i < n; i++) {
            long tag = (long) comp[i].tag;
            inflight--;
            r.answered++;
            if (tag < 1 || tag > r.tags) {
                r.unknown++;
                continue;
            }
            struct tag_info *ti = &tags[tag];
            if (ti->seen++ != 0) {
                r.dup++;
                continue;
            }
            if (comp[i].status != PAGED_OK || comp[i].op != (paged_op) ti->op) {
                r.errors++;
                why(&r, "completion", tag, comp[i].status);
            }
            if (ti->op == PAGED_OP_FREE) {
                if (ti->fork_free)
                    forks_out--;
                else
                    slot_busy[ti->slot] = 0;
            } else if (ti->op == PAGED_OP_FORK) {
                pend[npend++] = (struct pending_free) { -1, 2 };
            } else if (ti->op == PAGED_OP_ALLOC || ti->op == PAGED_OP_LOOKUP) {
                if (comp[i].status == PAGED_OK && comp[i].count > 0)
                    pend[npend++] = (struct pending_free) { ti->slot, comp[i].count };
                else
                    slot_busy[ti->slot] = 0;
            }
        }
    }
    for (long t = 1; t <= r.tags; t++)
        r.missing += tags[t].seen == 0;
    /* Half the clients give their blocks back, the others leave that to the daemon. */
    if (id % 2 == 0) {
        sync_call(&r, paged_free(p, 5, own), "final free");
        sync_call(&r, paged_free(p, PROMPT / B, pr), "final free of the prompt");
    }
    paged_client_close(c);
    free(tags);
    _exit(write(report_fd, &r, sizeof r) == (ssize_t) sizeof r ? 0 : 7);
}

/* Waits (bounded) until the daemon lists no client with a channel and the pool has no
 * referenced block. Returns 1, or 0 when that did not happen within 20 s. */
static int wait_idle(struct rc_client *ctl)
{
    static struct pcore_client_item items[512];
    for (int i = 0; i < 20000; i++) {
        long n = rc_list(ctl, PCORE_LIST_CLIENTS, "", items, sizeof items[0], 512);
        int channels = 0;
        for (long k = 0; k < n && k < 512; k++)
            channels += !items[k].control_only;
        struct pcore_pool_item it;
        if (n >= 0 && channels == 0 && rc_pool_item(ctl, "load", &it) == 0 && it.referenced == 0)
            return 1;
        td_pause_us(1000);
    }
    return 0;
}

/* Runs one round of `clients` clients of `requests` requests each; reports it in TAP.
 * Returns the number of requests the clients submitted. */
static long run_round(const char *label, struct rc_client *ctl, int clients, long requests)
{
    pid_t *pids = bcalloc((size_t) clients, sizeof *pids);
    int *fds = bcalloc((size_t) clients, sizeof *fds);
    uint64_t t0 = hard_now_ns();
    for (int i = 0; i < clients; i++) {
        int rp[2];
        if (pipe(rp) < 0)
            sysbail("pipe");
        pids[i] = bfork();
        if (pids[i] == 0) {
            close(ctl->sock);
            close(rp[0]);
            for (int j = 0; j < i; j++)
                close(fds[j]);
            load_client(i, requests, rp[1]);
        }
        close(rp[1]);
        fds[i] = rp[0];
    }
    struct load_report sum;
    memset(&sum, 0, sizeof sum);
    int reported = 0, clean = 0;
    for (int i = 0; i < clients; i++) {
        struct load_report r;
        memset(&r, 0, sizeof r);
        int st;
        int got = hard_child_report(fds[i], pids[i], &r, sizeof r, 600000, &st);
        reported += got;
        clean += WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (!got || r.dup || r.unknown || r.missing || r.errors || r.answered != r.tags)
            diag("%s: client %d: status %d, %ld tags, %ld answered, %ld duplicate, %ld unknown, "
                 "%ld missing, %ld errors%s%s", label, i, st, r.tags, r.answered, r.dup, r.unknown,
                 r.missing, r.errors, r.why[0] ? ": " : "", r.why);
        sum.sent += r.sent;
        sum.tags += r.tags;
        sum.answered += r.answered;
        sum.dup += r.dup;
        sum.unknown += r.unknown;
        sum.missing += r.missing;
        sum.errors += r.errors;
        for (int op = 0; op < PCORE_OP_COUNT_; op++)
            sum.by_op[op] += r.by_op[op];
    }
    double secs = (double) (hard_now_ns() - t0) / 1e9;
    is_int(clients, reported, "%s: all %d clients reported", label, clients);
    is_int(clients, clean, "%s: all %d clients exited cleanly", label, clients);
    ok(sum.tags >= (long) clients * requests, "%s: %ld tags handed out (%d clients x %ld requests, "
       "plus the FREEs that undo them)", label, sum.tags, clients, requests);
    ok(sum.answered == sum.tags && sum.dup == 0 && sum.unknown == 0 && sum.missing == 0,
       "%s: every tag answered exactly once (%ld answered, %ld duplicate, %ld unknown, %ld missing)",
       label, sum.answered, sum.dup, sum.unknown, sum.missing);
    is_int(0, sum.errors, "%s: no request failed", label);
    diag("%s: %ld requests in %.2f s (%.0f/s): nop %ld, alloc %ld, free %ld, append %ld, decode %ld, "
         "fork %ld, copy %ld, lookup %ld", label, sum.sent, secs, (double) sum.sent / secs,
         sum.by_op[PAGED_OP_NOP], sum.by_op[PAGED_OP_ALLOC], sum.by_op[PAGED_OP_FREE],
         sum.by_op[PAGED_OP_APPEND], sum.by_op[PAGED_OP_DECODE], sum.by_op[PAGED_OP_FORK],
         sum.by_op[PAGED_OP_COPY], sum.by_op[PAGED_OP_LOOKUP]);
    ok(wait_idle(ctl), "%s: afterwards no client is left and no block is referenced", label);
    free(pids);
    free(fds);
    return sum.sent;
}

/* Returns the daemon's count of requests served (STATS, all opcodes), or -1. */
static long stats_requests(struct rc_client *ctl)
{
    struct pcore_msg_stats_reply r;
    if (rc_stats(ctl, &r) != 0)
        return -1;
    long n = 0;
    for (int op = 0; op < PCORE_OP_COUNT_; op++)
        n += (long) r.ops[op].requests;
    return n;
}

/* Creates the pool and publishes the prompt; bails on failure. Returns nothing. */
static void setup(tap_rng *rng)
{
    paged_connect_opts o = { .socket_path = daemon_.socket, .name = "load-setup" };
    paged_client *c = NULL;
    paged_pool *p = NULL;
    paged_seq *s = NULL;
    if (paged_client_connect(&o, &c) != PAGED_OK)
        bail("setup cannot connect");
    paged_pool_desc d = { .name = "load", .num_layers = L, .num_kv_heads = H, .head_dim = D,
                          .block_size = B, .dtype = PAGED_DTYPE_F32, .num_blocks = N };
    if (paged_pool_create(c, &d, &p) != PAGED_OK)
        bail("creating the pool: %s", paged_client_error(c));
    size_t n = (size_t) L * PROMPT * H * D;
    float *k = bmalloc(n * 4), *v = bmalloc(n * 4);
    hard_fill(rng, k, n);
    hard_fill(rng, v, n);
    int32_t slots[PROMPT];
    if (paged_seq_create(p, 0, &s) != PAGED_OK || paged_seq_extend(s, PROMPT, prompt_tokens, slots) != PAGED_OK
        || paged_append(p, PAGED_ALL_LAYERS, PROMPT, PAGED_DTYPE_F32, k, v, slots) != PAGED_OK
        || paged_seq_publish(s) != PROMPT / B)
        bail("publishing the prompt: %s", paged_client_error(c));
    paged_seq_destroy(s);
    free(k);
    free(v);
    paged_client_close(c);
}

/* Runs a warm-up round and the measured round; checks tags, RSS and descriptors. */
int main(void)
{
    seed = tap_seed();
    plan_lazy();
    int clients = hard_long() ? CLIENTS_LONG : CLIENTS_SHORT;
    long requests = hard_long() ? REQUESTS_LONG : REQUESTS_SHORT;
    tap_rng rng;
    tap_rng_seed(&rng, seed);
    for (int i = 0; i < PROMPT; i++)
        prompt_tokens[i] = (int32_t) tap_rng_below(&rng, 50000);

    const char *args[] = { "--log-level=warning", NULL };
    int st;
    if (pagedd_start(&daemon_, args, NULL, &st) != 0)
        bail("pagedd did not start (status %d)", st);
    setup(&rng);
    struct rc_client ctl;
    if (rc_connect(daemon_.socket, "load-ctl", PCORE_HELLO_CONTROL, &ctl) != 0)
        bail("control connection failed: %s", ctl.errmsg);
    ok(wait_idle(&ctl), "the setup client is gone");
    int fd_start = td_fd_count(daemon_.pid);
    long rss_start = hard_status_kb(daemon_.pid, "VmRSS"), anon_start = hard_status_kb(daemon_.pid, "RssAnon");
    long served0 = stats_requests(&ctl);
    ok(fd_start > 0 && rss_start > 0 && served0 >= 0, "the daemon's figures can be read");

    long sent = run_round("warm-up", &ctl, clients, requests / 5);
    long rss_warm = hard_status_kb(daemon_.pid, "VmRSS"), anon_warm = hard_status_kb(daemon_.pid, "RssAnon");
    sent += run_round("load", &ctl, clients, requests);
    long rss_end = hard_status_kb(daemon_.pid, "VmRSS"), anon_end = hard_status_kb(daemon_.pid, "RssAnon");
    long served = stats_requests(&ctl) - served0;
    is_int(sent, served, "the daemon served exactly the %ld requests the clients submitted", sent);

    diag("daemon VmRSS: %ld KiB at the start, %ld after the warm-up, %ld at the end", rss_start, rss_warm, rss_end);
    diag("daemon RssAnon: %ld KiB at the start, %ld after the warm-up, %ld at the end", anon_start, anon_warm,
         anon_end);
    diag("daemon RssShmem (pool and channel pages it touched): %ld KiB at the end",
         hard_status_kb(daemon_.pid, "RssShmem"));
    /* Private memory is what a leak grows; VmRSS also counts the pool pages the daemon has
     * touched, shared memory that is the pool's, not growth. */
    long slack = anon_warm / 10 > 2048 ? anon_warm / 10 : 2048;
#if defined(__SANITIZE_ADDRESS__)
    skip(1, "RSS under AddressSanitizer includes its quarantine of freed memory");
    (void) slack;
#else
    if (getenv("PAGED_DAEMON_WRAPPER") != NULL)
        skip(1, "the daemon runs under $PAGED_DAEMON_WRAPPER, whose memory is not the daemon's");
    else
        ok(anon_end <= anon_warm + slack, "daemon RssAnon flat after the warm-up: %ld KiB -> %ld KiB (slack %ld)",
           anon_warm, anon_end, slack);
#endif

    /* Every descriptor of the departed clients closed. */
    int fd_end = -1;
    for (int i = 0; i < 5000; i++) {
        fd_end = td_fd_count(daemon_.pid);
        if (fd_end == fd_start)
            break;
        td_pause_us(1000);
    }
    is_int(fd_start, fd_end, "daemon's open descriptors back to %d after the clients left (%d)", fd_start, fd_end);
    diag("daemon open descriptors: %d before the clients, %d after", fd_start, fd_end);

    rc_close(&ctl);
    st = pagedd_stop(&daemon_);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exited cleanly on SIGTERM (status %d)", st);
    pagedd_cleanup(&daemon_);
    return 0;
}
