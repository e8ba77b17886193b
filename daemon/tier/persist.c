/* persist.c: at an orderly shutdown, a pool's blocks and host tier's units written to its file tier. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/tier/persist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/util/heap.h"
#include "lib/core/clock.h"

#define STAGE_MAX_BYTES (64ull << 20) /* the pool's blocks go through a staging buffer this large at most */
#define FAILURE_RUN 8                 /* failures in a row after which a pool's writing stops */

/* One unit to write: a block of the pool or a slot of the host tier, and its key. */
struct candidate {
    int32_t where;
    int in_pool;
    uint32_t tenant;
    paged_hash hash;
};

/* The writing of one pool in progress. */
struct writer {
    struct pd_tiers *t;
    struct pd_tiers_persisted *out;
    struct timespec start;      /* the wall clock when it began: the newest file's date */
    uint32_t rank;              /* units tried so far: the next file is dated rank ns before start */
    uint32_t failure_run;       /* failures since the last success */
    unsigned char *stage;       /* staging units for the pool's blocks (NULL: none yet) */
    uint32_t stage_units;
    uint32_t staged_from, staged_to; /* the candidates the staging buffer holds, in order */
};

/* Lists what the file tier lacks, most recently used first: the pool's published blocks, then
 * the host tier's units (skipping those whose copy failed), into c (room for the pool's blocks
 * and the host tier's slots). Returns how many, or -1 when out of memory. */
static int64_t list_candidates(struct pd_tiers *t, struct candidate *c)
{
    const uint32_t nblocks = pa_num_blocks(t->alloc);
    int32_t *ids = pd_malloc((size_t) (nblocks > t->host_units ? nblocks : t->host_units) * sizeof *ids + 1);
    if (ids == NULL)
        return -1;
    int64_t n = 0;
    const uint32_t published = pa_published_recent_first(t->alloc, ids);
    for (uint32_t i = 0; i < published; i++) {
        pa_block_info bi;
        if (pa_block_info_get(t->alloc, ids[i], &bi) == 0 && !pt_file_has(t->file, bi.tenant, &bi.hash))
            c[n++] = (struct candidate) { .where = ids[i], .in_pool = 1, .tenant = bi.tenant, .hash = bi.hash };
    }
    const uint32_t stored = pt_host_recent_first(t->host, ids);
    for (uint32_t i = 0; i < stored; i++) {
        struct candidate h = { .where = ids[i], .in_pool = 0 };
        if (!t->slot_bad[ids[i]] && pt_host_slot_key(t->host, ids[i], &h.tenant, &h.hash) == 0
            && !pt_file_has(t->file, h.tenant, &h.hash))
            c[n++] = h;
    }
    free(ids);
    return n;
}

/* Returns how many units the file tier's bound holds (UINT32_MAX: no bound). */
static uint32_t bound_units(const struct pd_tiers *t)
{
    pt_file_counts fc;
    pt_file_get_counts(t->file, &fc);
    if (fc.capacity_bytes == 0)
        return UINT32_MAX;
    const uint64_t units = fc.capacity_bytes / (pt_file_header_bytes() + t->unit_bytes);
    return units > UINT32_MAX ? UINT32_MAX : (uint32_t) units;
}

/* Returns the date rank ns before start. */
static struct timespec date_of(struct timespec start, uint32_t rank)
{
    const uint64_t ns = (uint64_t) start.tv_sec * 1000000000u + (uint64_t) start.tv_nsec - rank;
    return (struct timespec) { .tv_sec = (time_t) (ns / 1000000000u), .tv_nsec = (long) (ns % 1000000000u) };
}

/* Counts n units failed for why, keeping the first reason; returns nothing. */
static void failed(struct writer *w, uint32_t n, const char *why)
{
    if (w->out->failed == 0)
        snprintf(w->out->first_failure, sizeof w->out->first_failure, "%s", why);
    w->out->failed += n;
    w->failure_run++;
}

/* Copies the run of pool candidates from c[i] on (up to the staging buffer's size, within the
 * first k) into the staging buffer, allocating it first. Returns PAGED_OK or an error (the
 * failure counted for the run). */
static int stage_from(struct writer *w, const struct candidate *c, uint32_t i, uint32_t k)
{
    struct pd_tiers *t = w->t;
    if (w->stage == NULL) {
        uint64_t fit = STAGE_MAX_BYTES / t->unit_bytes;
        w->stage_units = fit == 0 ? 1 : fit > k ? k : (uint32_t) fit;
        char *cause = NULL;
        int rc = pd_tiers_host_alloc(t->b, (uint64_t) w->stage_units * t->unit_bytes, &w->stage, &cause);
        if (rc < 0) {
            failed(w, 0, cause != NULL ? cause : "no memory for the staging buffer");
            free(cause);
            w->stage = NULL;
            return rc;
        }
    }
    int32_t blocks[64];
    unsigned char *units[64];
    uint32_t m = 0;
    /* Copies of at most 64 blocks at a time, as long as the run of pool blocks lasts. */
    while (i + m < k && c[i + m].in_pool && m < w->stage_units) {
        uint32_t part = 0;
        while (i + m + part < k && c[i + m + part].in_pool && m + part < w->stage_units && part < 64) {
            blocks[part] = c[i + m + part].where;
            units[part] = w->stage + (uint64_t) (m + part) * t->unit_bytes;
            part++;
        }
        int rc = pd_tiers_copy_units(t, 1, part, blocks, units);
        if (rc < 0) {
            failed(w, 0, "copying the pool's blocks to host memory failed");
            w->staged_from = w->staged_to = i;
            return rc;
        }
        m += part;
    }
    w->staged_from = i;
    w->staged_to = i + m;
    return PAGED_OK;
}

/* Writes candidate c[i], whose unit is at unit, dated by its rank; returns nothing. */
static void write_unit(struct writer *w, const struct candidate *c, const void *unit)
{
    struct pd_tiers *t = w->t;
    const struct timespec when = date_of(w->start, w->rank++);
    char why[256];
    int rc = pt_file_put_dated(t->file, c->tenant, &c->hash, unit, &when, NULL, NULL, why, sizeof why);
    if (rc < 0) {
        t->counts.failures++;
        failed(w, 1, why);
        return;
    }
    t->counts.written++;
    w->failure_run = 0;
    if (c->in_pool)
        w->out->from_pool++;
    else
        w->out->from_host++;
}

/* Writes the first k candidates in order, until the deadline (0: none) or a run of failures;
 * returns nothing. */
static void write_all(struct writer *w, const struct candidate *c, uint32_t k, uint64_t deadline_ns)
{
    uint32_t i = 0;
    while (i < k) {
        if (deadline_ns != 0 && pcore_now_ns() >= deadline_ns) {
            w->out->left_at_deadline = k - i;
            return;
        }
        if (w->failure_run >= FAILURE_RUN) {
            w->out->failed += k - i;
            return;
        }
        if (!c[i].in_pool) {
            write_unit(w, &c[i], pd_tiers_slot_mem(w->t, c[i].where));
            i++;
            continue;
        }
        if ((i < w->staged_from || i >= w->staged_to) && stage_from(w, c, i, k) < 0) {
            /* The run that could not be staged is skipped, counted failed. */
            uint32_t j = i;
            while (j < k && c[j].in_pool && (w->stage == NULL || j - i < w->stage_units))
                j++;
            w->out->failed += j - i;
            i = j;
            continue;
        }
        write_unit(w, &c[i], w->stage + (uint64_t) (i - w->staged_from) * w->t->unit_bytes);
        i++;
    }
}

/* Writes what the file tier lacks of the pool and the host tier; see persist.h. */
uint32_t pd_tiers_persist(struct pd_tiers *t, uint64_t deadline_ns, struct pd_tiers_persisted *out)
{
    memset(out, 0, sizeof *out);
    if (t == NULL || t->file == NULL)
        return 0;
    const uint64_t t0 = pcore_now_ns();
    pd_tiers_flush(t);
    struct writer w = { .t = t, .out = out };
    clock_gettime(CLOCK_REALTIME, &w.start);
    const uint64_t room = (uint64_t) pa_num_blocks(t->alloc) + t->host_units;
    struct candidate *c = pd_malloc((size_t) room * sizeof *c + 1);
    const int64_t n = c != NULL ? list_candidates(t, c) : -1;
    if (n < 0)
        snprintf(out->first_failure, sizeof out->first_failure, "out of memory listing the units to write");
    else {
        const uint32_t bound = bound_units(t);
        const uint32_t k = (uint64_t) n > bound ? bound : (uint32_t) n;
        out->beyond_bound = (uint32_t) n - k;
        write_all(&w, c, k, deadline_ns);
    }
    pd_tiers_host_free(t->b, w.stage, (uint64_t) w.stage_units * t->unit_bytes);
    free(c);
    out->ns = pcore_now_ns() - t0;
    return out->from_pool + out->from_host;
}
