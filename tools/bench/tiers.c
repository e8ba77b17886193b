/* tiers.c: paged-bench tiers: the tiers' offload and reload rates, time to first token against recomputing. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/clock.h"
#include "tools/bench/daemon.h"
#include "tools/bench/tiers.h"
#include "tools/common/spawn.h"

#define TB_FEW_UNITS 16          /* the file-tier pools' host tier, at most */
#define TB_CACHE_KEPT 0.05       /* a drop that leaves more of the files resident did not work */

/* Everything the parts share: options, geometry, the daemon, the client, the limits. */
struct tb {
    const struct bench_opts *o;
    struct tb_geom g;
    struct bd_daemon d;
    struct tb_client cl;
    struct tb_limits lim;
    char units_dir[1200];        /* the daemon's file tier */
};

/* One transfer row: what moved, how fast as the client and as the daemon saw it. */
struct tb_xfer {
    uint64_t bytes;
    double client_gbps, daemon_gbps;   /* best of the repetitions; NAN: n/a */
    double kept;                       /* file rows: most of the unit files left in the page cache */
};

/* One TTFT path's requests. */
struct tb_ttft {
    unsigned n;
    int64_t *lat;                /* request times, sorted once done */
    double mean_ns, lookup_ns;   /* mean of the requests and of their LOOKUPs (tier paths) */
    uint64_t reloaded_bytes, reload_ns, file_bytes;
    double kept;                 /* file path: most of the unit files left in the page cache */
};

/* The work directory (for the atexit clean-up: a benchmark that dies leaves nothing there). */
static char work_dir[1100];

/* Removes the work directory; registered with atexit. */
static void remove_work_dir(void)
{
    if (work_dir[0] != '\0')
        spawn_rmdir(work_dir);
    work_dir[0] = '\0';
}

/* Fills the geometry from the options (--quick: small). Returns nothing. */
static void geometry(const struct bench_opts *o, struct tb_geom *g)
{
    g->layers = o->tier_layers ? o->tier_layers : o->quick ? 4 : 32;
    g->prompts = o->tier_prompts ? o->tier_prompts : o->quick ? 5 : 8;
    g->tokens = o->tier_tokens ? o->tier_tokens : o->quick ? 256 : 8192;
    g->suffix = o->tier_suffix ? o->tier_suffix : 64;
    g->prompt_blocks = g->tokens / TB_B;
    g->suffix_blocks = (g->suffix + TB_B - 1) / TB_B;
    g->unit_bytes = (uint64_t) g->layers * 2 * TB_HKV * TB_B * TB_D * TB_ELEM;
}

/* Returns the bytes of the units of the blocks of n tokens. */
static uint64_t token_bytes(const struct tb_geom *g, uint64_t tokens)
{
    return tokens / TB_B * g->unit_bytes;
}

/* Returns the LIST item of pool tp. */
static struct pcore_pool_item item(const struct tb *t, const struct tb_pool *tp)
{
    struct pcore_pool_item it;
    tb_pool_item(t->d.socket, tp->name, &it);
    return it;
}

/* Looks prompt k up in tp, dying with the pool's tier counters unless every block of it
 * comes back. Returns nothing. */
static void lookup(struct tb *t, struct tb_pool *tp, unsigned k)
{
    unsigned n = tb_lookup_prompt(&t->cl, tp, k);
    if (n == t->g.prompt_blocks)
        return;
    struct pcore_pool_item it = item(t, tp);
    bench_die("tiers: LOOKUP of prompt %u in pool %s found %u of its %u blocks: the tiers did not bring it back "
              "whole (pool: %u cached, %u free; host tier: %u of %u units; files: %u; dropped %llu, damaged %llu, "
              "failures %llu)", k, tp->name, n, t->g.prompt_blocks, it.cached, it.free, it.host_stored,
              it.host_units, it.file_units, (unsigned long long) it.tier_dropped,
              (unsigned long long) it.tier_damaged, (unsigned long long) it.tier_failures);
}

/* Returns bytes per nanosecond (GB/s), NAN when ns is 0. */
static double rate(uint64_t bytes, uint64_t ns)
{
    return ns > 0 && bytes > 0 ? (double) bytes / (double) ns : NAN;
}

/* Returns the larger of two rates, a NAN counting as nothing. */
static double best(double a, double b)
{
    return isnan(a) || (!isnan(b) && b > a) ? b : a;
}

/* Pushes a published prompt out of a pool of its size with an ALLOC of every block and looks
 * it up again, reps times: the offload and reload rates (file: the host tier holds few
 * units, the rest goes to files, dropped from the page cache before each LOOKUP). Returns
 * nothing. */
static void transfer(struct tb *t, int file, struct tb_xfer *off, struct tb_xfer *on)
{
    const struct tb_geom *g = &t->g;
    const uint32_t pb = g->prompt_blocks;
    uint32_t few = pb / 4 < TB_FEW_UNITS ? pb / 4 : TB_FEW_UNITS;
    struct tb_pool tp;
    tb_pool_create(&t->cl, &tp, file ? "tiers-xfer-file" : "tiers-xfer-host", pb, file ? (few ? few : 1) : pb);
    tb_publish_prompt(&t->cl, &tp, 0);
    *off = (struct tb_xfer) { .client_gbps = NAN, .daemon_gbps = NAN };
    *on = (struct tb_xfer) { .client_gbps = NAN, .daemon_gbps = NAN };
    const int reps = t->o->quick ? 2 : 3;
    for (int r = 0; r < reps; r++) {
        struct pcore_pool_item a = item(t, &tp);
        uint64_t t0 = pcore_now_ns();
        int rc = paged_alloc(tp.p, pb, tp.ids);
        uint64_t t1 = pcore_now_ns();
        if (rc != PAGED_OK)
            tb_fail(&t->cl, rc, "taking a whole pool");
        struct pcore_pool_item b = item(t, &tp);
        tb_release(&t->cl, &tp, pb);
        uint64_t moved = b.offloaded_bytes - a.offloaded_bytes;
        if (moved != (uint64_t) pb * g->unit_bytes)
            bench_die("tiers: the ALLOC of pool %s pushed %llu bytes to the host tier, not the prompt's %llu",
                      tp.name, (unsigned long long) moved, (unsigned long long) pb * g->unit_bytes);
        off->bytes = moved;
        off->client_gbps = best(off->client_gbps, rate(moved, t1 - t0));
        if (!file)
            off->daemon_gbps = best(off->daemon_gbps, rate(moved, b.offload_ns - a.offload_ns));
        if (file) {
            double kept = tb_drop_cache(t->units_dir);
            on->kept = kept > on->kept ? kept : on->kept;
            off->kept = on->kept;
        }
        a = item(t, &tp);
        t0 = pcore_now_ns();
        lookup(t, &tp, 0);
        t1 = pcore_now_ns();
        b = item(t, &tp);
        tb_release(&t->cl, &tp, pb);
        moved = b.reloaded_bytes - a.reloaded_bytes;
        if (moved != (uint64_t) pb * g->unit_bytes)
            bench_die("tiers: the LOOKUP of pool %s reloaded %llu bytes, not the prompt's %llu", tp.name,
                      (unsigned long long) moved, (unsigned long long) pb * g->unit_bytes);
        if (file && b.file_hit_tokens == a.file_hit_tokens)
            bench_die("tiers: the LOOKUP of pool %s reloaded nothing from the file tier", tp.name);
        on->bytes = moved;
        on->client_gbps = best(on->client_gbps, rate(moved, t1 - t0));
        on->daemon_gbps = best(on->daemon_gbps, rate(moved, b.reload_ns - a.reload_ns));
    }
    tb_pool_destroy(&t->cl, &tp);
}

/* Runs one request of a tier path for prompt k into slot i of tt (outs: keep the outputs,
 * untimed); drops the unit files from the page cache first when file is set. Returns nothing. */
static void tier_request(struct tb *t, struct tb_pool *tp, unsigned k, int file, struct tb_ttft *tt, int i,
                         uint16_t *outs)
{
    if (file) {
        double kept = tb_drop_cache(t->units_dir);
        tt->kept = kept > tt->kept ? kept : tt->kept;
    }
    struct pcore_pool_item a = item(t, tp);
    uint64_t t0 = pcore_now_ns();
    lookup(t, tp, k);
    uint64_t tl = pcore_now_ns();
    tb_suffix(&t->cl, tp, outs);
    uint64_t t1 = pcore_now_ns();
    struct pcore_pool_item b = item(t, tp);
    tb_release(&t->cl, tp, t->g.prompt_blocks + t->g.suffix_blocks);
    if (b.reloads == a.reloads)
        bench_die("tiers: the LOOKUP of prompt %u in pool %s found it in the pool: the workload should have "
                  "pushed it out", k, tp->name);
    if (i < 0)
        return;
    tt->lat[i] = (int64_t) (t1 - t0);
    tt->mean_ns += (double) (t1 - t0) / tt->n;
    tt->lookup_ns += (double) (tl - t0) / tt->n;
    tt->reloaded_bytes += b.reloaded_bytes - a.reloaded_bytes;
    tt->reload_ns += b.reload_ns - a.reload_ns;
    tt->file_bytes += token_bytes(&t->g, b.file_hit_tokens - a.file_hit_tokens);
}

/* Returns the number of timed requests of each TTFT path. */
static unsigned request_count(const struct tb *t)
{
    return t->o->quick ? t->g.prompts : 2 * t->g.prompts;
}

/* The TTFT of the tier paths: a pool that holds two prompts and a request's suffix, with a
 * host tier of every prompt (file 0) or of one prompt and a few units in front of the file
 * tier (file 1: a reload round that takes every host slot would drop what its allocation
 * evicts; with 5 prompts or more the one asked for is all in files);
 * the prompts published, then requests round robin over them, each one's prompt pushed out
 * by the two before it. The host path first checks once that the suffix's PREFILL over
 * prompt 0 reloaded equals, bit for bit, the same over prompt 0 as published. Returns
 * nothing. */
static void tier_path(struct tb *t, int file, struct tb_ttft *tt)
{
    const struct tb_geom *g = &t->g;
    const uint32_t pb = g->prompt_blocks, sb = g->suffix_blocks;
    struct tb_pool tp;
    tb_pool_create(&t->cl, &tp, file ? "tiers-ttft-file" : "tiers-ttft-host", 2 * pb + sb,
                   file ? pb + TB_FEW_UNITS : g->prompts * pb);
    const size_t nout = (size_t) g->layers * g->suffix * TB_HQ * TB_D;
    uint16_t *ref = NULL, *chk = NULL;
    tb_publish_prompt(&t->cl, &tp, 0);
    if (!file) {
        ref = bench_alloc(nout * TB_ELEM, "the reference outputs");
        chk = bench_alloc(nout * TB_ELEM, "the reloaded outputs");
        lookup(t, &tp, 0);
        tb_suffix(&t->cl, &tp, ref);
        tb_release(&t->cl, &tp, pb + sb);
    }
    for (unsigned k = 1; k < g->prompts; k++)
        tb_publish_prompt(&t->cl, &tp, k);
    tier_request(t, &tp, 0, file, tt, -1, chk);
    if (!file) {
        size_t bad = 0;
        for (size_t i = 0; i < nout && bad == 0; i++)
            if (ref[i] != chk[i])
                bad = i + 1;
        if (bad != 0) {
            size_t i = bad - 1, per_layer = (size_t) g->suffix * TB_HQ * TB_D;
            bench_die("tiers: the suffix's PREFILL over prompt 0 reloaded from the host tier differs from the "
                      "same over it as published: layer %zu, token %zu, element %zu (0x%04x, not 0x%04x)",
                      i / per_layer, i % per_layer / (TB_HQ * TB_D), i % (TB_HQ * TB_D), chk[i], ref[i]);
        }
        free(ref);
        free(chk);
    }
    for (unsigned i = 0; i < tt->n; i++)
        tier_request(t, &tp, (1 + i) % g->prompts, file, tt, (int) i, NULL);
    if (file && tt->file_bytes == 0)
        bench_die("tiers: the requests of pool %s reloaded nothing from the file tier", tp.name);
    bench_sort_i64(tt->lat, tt->n);
    tb_pool_destroy(&t->cl, &tp);
}

/* The TTFT of recomputing: a pool of one request's blocks and no tier; each request APPENDs
 * and PREFILLs prompt and suffix at every layer (one untimed first). Returns nothing. */
static void recompute_path(struct tb *t, struct tb_ttft *tt)
{
    const uint32_t blocks = t->g.prompt_blocks + t->g.suffix_blocks;
    struct tb_pool tp;
    tb_pool_create(&t->cl, &tp, "tiers-ttft-recompute", blocks, 0);
    for (int i = -1; i < (int) tt->n; i++) {
        uint64_t t0 = pcore_now_ns();
        tb_recompute(&t->cl, &tp);
        uint64_t t1 = pcore_now_ns();
        tb_release(&t->cl, &tp, blocks);
        if (i >= 0) {
            tt->lat[i] = (int64_t) (t1 - t0);
            tt->mean_ns += (double) (t1 - t0) / tt->n;
        }
    }
    bench_sort_i64(tt->lat, tt->n);
    tb_pool_destroy(&t->cl, &tp);
}

/* Returns a percentage of x over limit, NAN when either is n/a. */
static double pct(double x, double limit)
{
    return isnan(x) || isnan(limit) || limit <= 0.0 ? NAN : 100.0 * x / limit;
}

/* Returns the label of a page cache state: "dropped" or how much of the files stayed. */
static const char *cache_text(double kept, char *buf, size_t size)
{
    if (kept < 0.0)
        snprintf(buf, size, "not dropped (no walk)");
    else if (kept <= TB_CACHE_KEPT)
        snprintf(buf, size, "dropped");
    else
        snprintf(buf, size, "not dropped (%.0f%% stayed)", 100.0 * kept);
    return buf;
}

/* Adds and prints the table of the limits. Returns nothing. */
static void limits_table(const struct tb *t, struct br_report *r)
{
    const struct tb_limits *l = &t->lim;
    struct br_table *tab = br_table(r, "tiers_limits",
                                    l->cuda ? "tiers: limits measured in this run (cudaMemcpyAsync between pinned "
                                              "host and device memory, best of 5; the disk's sequential read of "
                                              "a file written, fsync'ed and dropped from the page cache)"
                                            : "tiers: limits measured in this run (memcpy, best of 5; the disk's "
                                              "sequential read of a file written, fsync'ed and dropped from the "
                                              "page cache)");
    br_col(tab, "path", "path", 0, 0);
    br_col(tab, "bytes", "bytes", 0, 0);
    br_col(tab, "page_cache", "page cache", 0, 0);
    br_col(tab, "gbps", "GB/s", 2, 1);
    int row = br_row(tab);
    br_set_str(tab, row, "path", l->cuda ? "h2d" : "memcpy");
    br_set_int(tab, row, "bytes", (long long) l->copy_bytes);
    br_set_num(tab, row, "gbps", l->h2d_gbps);
    if (l->cuda) {
        row = br_row(tab);
        br_set_str(tab, row, "path", "d2h");
        br_set_int(tab, row, "bytes", (long long) l->copy_bytes);
        br_set_num(tab, row, "gbps", l->d2h_gbps);
    }
    row = br_row(tab);
    br_set_str(tab, row, "path", "disk_read");
    br_set_int(tab, row, "bytes", (long long) l->disk_bytes);
    br_set_str(tab, row, "page_cache", l->disk_cache_dropped ? "dropped" : "not dropped (rate is the cache's)");
    br_set_num(tab, row, "gbps", l->disk_read_gbps);
    br_print_table(tab, stdout);
}

/* Adds one transfer row. Returns nothing. */
static void xfer_row(struct br_table *tab, const char *tier, const char *dir, const struct tb_xfer *x,
                     double limit, int cache)
{
    char buf[64];
    int row = br_row(tab);
    br_set_str(tab, row, "tier", tier);
    br_set_str(tab, row, "direction", dir);
    br_set_int(tab, row, "bytes", (long long) x->bytes);
    if (cache)
        br_set_str(tab, row, "page_cache", cache_text(x->kept, buf, sizeof buf));
    br_set_num(tab, row, "client_gbps", x->client_gbps);
    br_set_num(tab, row, "daemon_gbps", x->daemon_gbps);
    br_set_num(tab, row, "limit_gbps", limit);
    br_set_num(tab, row, "client_pct", pct(x->client_gbps, limit));
    br_set_num(tab, row, "daemon_pct", pct(x->daemon_gbps, limit));
}

/* Measures and adds the transfer table. Returns nothing. */
static void transfer_table(struct tb *t, struct br_report *r)
{
    struct tb_xfer host_off, host_on, file_off, file_on;
    transfer(t, 0, &host_off, &host_on);
    transfer(t, 1, &file_off, &file_on);
    char title[640];
    snprintf(title, sizeof title,
             "tiers: offload (an ALLOC of the whole pool pushes a published %u-token prompt out) and reload (its "
             "LOOKUP); %u layers, units of %llu bytes; client: the request's wall time; daemon: offload_ns or "
             "reload_ns of LIST; best of %d; limit: D2H, H2D, the disk's read; file: a host tier of a few units "
             "in front of the file tier, the offload writing the files, the reload reading them after they were "
             "dropped from the page cache",
             t->g.tokens, t->g.layers, (unsigned long long) t->g.unit_bytes, t->o->quick ? 2 : 3);
    struct br_table *tab = br_table(r, "tiers_transfer", title);
    br_col(tab, "tier", "tier", 0, 0);
    br_col(tab, "direction", "direction", 0, 0);
    br_col(tab, "bytes", "bytes", 0, 0);
    br_col(tab, "page_cache", "page cache", 0, 0);
    br_col(tab, "client_gbps", "client GB/s", 2, 1);
    br_col(tab, "daemon_gbps", "daemon GB/s", 2, 1);
    br_col(tab, "limit_gbps", "limit GB/s", 2, 1);
    br_col(tab, "client_pct", "client %", 1, 1);
    br_col(tab, "daemon_pct", "daemon %", 1, 1);
    xfer_row(tab, "host", "offload", &host_off, t->lim.d2h_gbps, 0);
    xfer_row(tab, "host", "reload", &host_on, t->lim.h2d_gbps, 0);
    xfer_row(tab, "file", "offload", &file_off, NAN, 0);
    xfer_row(tab, "file", "reload", &file_on, t->lim.disk_read_gbps, 1);
    br_print_table(tab, stdout);
    br_summary(r, "tiers_offload_pct", "tiers: host offload, daemon's rate over D2H", pct(host_off.daemon_gbps,
               t->lim.d2h_gbps), "%", 1);
    br_summary(r, "tiers_reload_pct", "tiers: host reload, daemon's rate over H2D", pct(host_on.daemon_gbps,
               t->lim.h2d_gbps), "%", 1);
}

/* Adds one TTFT row; recompute_mean is the recompute path's mean (NAN for its own row).
 * Returns nothing. */
static void ttft_row(const struct tb *t, struct br_table *tab, const char *path, const struct tb_ttft *tt,
                     double recompute_mean, double limit, int cache)
{
    char buf[64];
    int row = br_row(tab);
    br_set_str(tab, row, "path", path);
    br_set_int(tab, row, "requests", tt->n);
    br_set_int(tab, row, "tokens", (long long) t->g.tokens + t->g.suffix);
    if (cache)
        br_set_str(tab, row, "page_cache", cache_text(tt->kept, buf, sizeof buf));
    br_set_num(tab, row, "mean_ms", tt->mean_ns / 1e6);
    br_set_num(tab, row, "p50_ms", (double) bench_quantile(tt->lat, tt->n, 0.50) / 1e6);
    br_set_num(tab, row, "p99_ms", (double) bench_quantile(tt->lat, tt->n, 0.99) / 1e6);
    br_set_num(tab, row, "lookup_ms", isnan(recompute_mean) ? NAN : tt->lookup_ns / 1e6);
    br_set_num(tab, row, "client_gbps", isnan(recompute_mean) ? NAN : tt->reloaded_bytes / (tt->lookup_ns * tt->n));
    br_set_num(tab, row, "daemon_gbps", rate(tt->reloaded_bytes, tt->reload_ns));
    br_set_num(tab, row, "limit_gbps", limit);
    br_set_num(tab, row, "daemon_pct", pct(rate(tt->reloaded_bytes, tt->reload_ns), limit));
    br_set_num(tab, row, "speedup", recompute_mean / tt->mean_ns);
}

/* Measures and adds the TTFT table and its summary. Returns nothing. */
static void ttft_table(struct tb *t, struct br_report *r)
{
    struct tb_ttft host = { 0 }, rec = { 0 }, file = { 0 };
    host.n = rec.n = file.n = request_count(t);
    host.lat = bench_alloc(host.n * sizeof *host.lat, "latencies");
    rec.lat = bench_alloc(rec.n * sizeof *rec.lat, "latencies");
    file.lat = bench_alloc(file.n * sizeof *file.lat, "latencies");
    tier_path(t, 0, &host);
    recompute_path(t, &rec);
    tier_path(t, 1, &file);
    char title[640];
    snprintf(title, sizeof title,
             "tiers: TTFT (start to the last token's attention output at every layer) of requests over %u system "
             "prompts of %u tokens, round robin, each + %u tokens of its own, in a pool of two prompts; %u layers, "
             "%d/%d heads, D %d, bf16. host: LOOKUP reloads the prompt, then per layer APPEND + PREFILL of the "
             "suffix; recompute: per layer APPEND + causal PREFILL of all %u tokens (paged's share only: no "
             "projections, no MLP); file: as host, behind a host tier of %u units, page cache dropped. GB/s: "
             "reloaded bytes per LOOKUP time (client), per reload_ns (daemon)",
             t->g.prompts, t->g.tokens, t->g.suffix, t->g.layers, TB_HQ, TB_HKV, TB_D, t->g.tokens + t->g.suffix,
             t->g.prompt_blocks + TB_FEW_UNITS);
    struct br_table *tab = br_table(r, "tiers_ttft", title);
    br_col(tab, "path", "path", 0, 0);
    br_col(tab, "requests", "requests", 0, 0);
    br_col(tab, "tokens", "tokens", 0, 0);
    br_col(tab, "page_cache", "page cache", 0, 0);
    br_col(tab, "mean_ms", "mean ms", 3, 1);
    br_col(tab, "p50_ms", "p50 ms", 3, 1);
    br_col(tab, "p99_ms", "p99 ms", 3, 1);
    br_col(tab, "lookup_ms", "LOOKUP ms", 3, 1);
    br_col(tab, "client_gbps", "client GB/s", 2, 1);
    br_col(tab, "daemon_gbps", "daemon GB/s", 2, 1);
    br_col(tab, "limit_gbps", "limit GB/s", 2, 1);
    br_col(tab, "daemon_pct", "daemon %", 1, 1);
    br_col(tab, "speedup", "recompute/this", 2, 1);
    ttft_row(t, tab, "host", &host, rec.mean_ns, t->lim.h2d_gbps, 0);
    ttft_row(t, tab, "recompute", &rec, NAN, NAN, 0);
    ttft_row(t, tab, "file", &file, rec.mean_ns, t->lim.disk_read_gbps, 1);
    br_print_table(tab, stdout);
    br_summary(r, "tiers_host_ttft_speedup", "tiers: recompute's mean TTFT over the host tier's", rec.mean_ns /
               host.mean_ns, "x", 2);
    br_summary(r, "tiers_file_ttft_speedup", "tiers: recompute's mean TTFT over the file tier's", rec.mean_ns /
               file.mean_ns, "x", 2);
    br_summary(r, "tiers_file_reload_pct", "tiers: file reload (TTFT), daemon's rate over the disk's read",
               pct(rate(file.reloaded_bytes, file.reload_ns), t->lim.disk_read_gbps), "%", 1);
    free(host.lat);
    free(rec.lat);
    free(file.lat);
}

/* Makes the work directory under --file-tier (or the temporary directory) with the file
 * tier's directory in it. Returns nothing; dies on failure. */
static void make_dirs(struct tb *t)
{
    char err[512];
    if (spawn_mkdtemp(work_dir, sizeof work_dir, t->o->file_tier, "paged-bench-tiers", err, sizeof err) != 0)
        bench_die("tiers: %s", err);
    atexit(remove_work_dir);
    snprintf(t->units_dir, sizeof t->units_dir, "%s/units", work_dir);
    if (mkdir(t->units_dir, 0700) != 0)
        bench_die("tiers: mkdir %s: %s", t->units_dir, strerror(errno));
}

/* Runs the tiers benchmark. */
void bench_tiers(const struct bench_opts *o, struct br_report *r)
{
    static struct tb t;
    memset(&t, 0, sizeof t);
    t.o = o;
    geometry(o, &t.g);
    if (t.g.prompts < 3)
        bench_die("tiers: --tier-prompts must be at least 3 (the pool holds two)");
    make_dirs(&t);

    char self[1024], built[1100];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0 || (size_t) len >= sizeof self - 1)
        bench_die("cannot find this program's path (/proc/self/exe)");
    self[len] = '\0';
    const uint64_t mib = 1u << 20;
    const uint64_t host_max = ((uint64_t) t.g.prompts * t.g.prompt_blocks * t.g.unit_bytes + mib - 1) / mib + 1;
    char host_arg[64], file_arg[1300];
    snprintf(host_arg, sizeof host_arg, "--host-tier-max-mb=%llu", (unsigned long long) host_max);
    snprintf(file_arg, sizeof file_arg, "--file-tier=%s", t.units_dir);
    const char *extra[] = { host_arg, file_arg, NULL };
    bd_start_args(&t.d, bd_pagedd_path(o, self, built, sizeof built), bd_backend(o), o->threads, o->waits, extra);
    tb_client_open(&t.cl, t.d.socket, &t.g, o->seed);

    const size_t big = o->quick ? (64u << 20) : (1u << 30);
    tb_copy_limits(t.cl.cuda, big, &t.lim);
    tb_disk_limit(work_dir, big, &t.lim);
    limits_table(&t, r);
    transfer_table(&t, r);
    ttft_table(&t, r);

    tb_client_close(&t.cl);
    bd_stop(&t.d);
    remove_work_dir();
}
