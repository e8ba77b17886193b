/* launchlog.c: what a debug-level daemon log says of merged, refused and fused launches. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tests/service/launchlog.h"

#include <stdio.h>
#include <string.h>

/* Calls line(text, ctx) for each line of log from byte from up to byte to (-1: its end).
 * Returns nothing. */
static void each_line(const char *log, long from, long to, void (*line)(const char *, void *), void *ctx)
{
    FILE *f = fopen(log, "r");
    if (f == NULL)
        return;
    if (fseek(f, from, SEEK_SET) == 0) {
        char buf[2048];
        while ((to < 0 || ftell(f) < to) && fgets(buf, sizeof buf, f) != NULL)
            line(buf, ctx);
    }
    fclose(f);
}

/* A scan's key and where its findings go. */
struct scan {
    char key[64];                 /* the merged launches' keys */
    const char *text;             /* what ll_count_in counts */
    void *out;
    unsigned long count;
};

/* Adds a merged launch's line to the ll_merged of s; returns nothing. */
static void merged_line(const char *text, void *ctx)
{
    struct scan *s = ctx;
    struct ll_merged *m = s->out;
    const char *at = strstr(text, s->key);
    unsigned long id;
    unsigned reqs, clients;
    if (at == NULL || sscanf(at + strlen(s->key), "%lu: %u requests of %u clients", &id, &reqs, &clients) != 3)
        return;
    m->launches++;
    m->requests += reqs;
    if (clients > m->most_clients) {
        const char *ly = strstr(at, " layers ");
        m->most_clients = clients;
        if (ly == NULL || sscanf(ly, " layers %d..%d", &m->lo, &m->hi) != 2)
            m->lo = m->hi = -1;
    }
}

/* Scans for merged launches; see launchlog.h. */
void ll_merged_in(const char *log, const char *op, long from, long to, struct ll_merged *m)
{
    struct scan s = { .out = m };
    snprintf(s.key, sizeof s.key, "merged %s launch ", op);
    memset(m, 0, sizeof *m);
    m->lo = m->hi = -1;
    each_line(log, from, to, merged_line, &s);
}

/* Adds a refused merged launch's line to the ll_unmerged of s; returns nothing. */
static void unmerged_line(const char *text, void *ctx)
{
    struct scan *s = ctx;
    struct ll_unmerged *u = s->out;
    const char *at = strstr(text, s->key);
    unsigned reqs;
    if (at == NULL || strstr(at, " refused (") == NULL || sscanf(at + strlen(s->key), "%u requests", &reqs) != 1)
        return;
    u->launches++;
    u->requests += reqs;
}

/* Scans for refused merged launches; see launchlog.h. */
void ll_unmerged_in(const char *log, const char *op, long from, long to, struct ll_unmerged *u)
{
    struct scan s = { .out = u };
    snprintf(s.key, sizeof s.key, "merged %s launch of ", op);
    memset(u, 0, sizeof *u);
    each_line(log, from, to, unmerged_line, &s);
}

/* Adds a batch's fused APPENDs to the count of s; returns nothing. */
static void fused_line(const char *text, void *ctx)
{
    struct scan *s = ctx;
    const char *at = strstr(text, "engine: ");
    unsigned k;
    int end = 0;
    /* The line of one batch; the activity summary says it with another count. */
    if (at != NULL && sscanf(at, "engine: %u APPENDs fused into their DECODEs' launch%n", &k, &end) == 1 && end > 0)
        s->count += k;
}

/* Counts fused APPENDs; see launchlog.h. */
unsigned long ll_fused_in(const char *log, long from, long to)
{
    struct scan s = { .out = NULL };
    each_line(log, from, to, fused_line, &s);
    return s.count;
}

/* Counts a line that holds the key of s; returns nothing. */
static void count_line(const char *text, void *ctx)
{
    struct scan *s = ctx;
    s->count += strstr(text, s->text) != NULL;
}

/* Counts lines holding text; see launchlog.h. */
unsigned long ll_count_in(const char *log, const char *text, long from, long to)
{
    struct scan s = { .text = text };
    each_line(log, from, to, count_line, &s);
    return s.count;
}
