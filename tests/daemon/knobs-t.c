/* knobs-t.c: pagedd's environment knobs: what each takes and refuses, the startup log, pagedd(8) matching the table. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/util/knobs.h"
#include "tests/tap/basic.h"

/* One value set in the environment and what pd_knobs_load makes of it: refused, or taken
 * with these parts. */
struct knob_case {
    enum pd_knob id;
    const char *text;
    int taken;
    uint64_t part0, part1;
};

static const struct knob_case cases[] = {
    { PD_KNOB_GATHER, "4,50", 1, 4, 50 },
    { PD_KNOB_GATHER, "1,0", 1, 1, 0 },
    { PD_KNOB_GATHER, "0,20", 0, 0, 0 },
    { PD_KNOB_GATHER, "8,1001", 0, 0, 0 },
    { PD_KNOB_GATHER, "8", 0, 0, 0 },
    { PD_KNOB_GATHER, "8,20,1", 0, 0, 0 },
    { PD_KNOB_GATHER, "8, 20", 0, 0, 0 },
    { PD_KNOB_SPLIT, "3", 1, 3, PD_SPLIT_AFTER },
    { PD_KNOB_SPLIT, "2,1", 1, 2, 1 },
    { PD_KNOB_SPLIT, "3,0", 1, 3, 1 },
    { PD_KNOB_SPLIT, "0", 1, 0, PD_SPLIT_AFTER },
    { PD_KNOB_SPLIT, "3,x", 0, 0, 0 },
    { PD_KNOB_SPLIT, "3,", 0, 0, 0 },
    { PD_KNOB_SPLIT, "-1", 0, 0, 0 },
    { PD_KNOB_DEFER, "0", 1, 0, 0 },
    { PD_KNOB_DEFER, "1", 1, 1, 0 },
    { PD_KNOB_DEFER, "yes", 0, 0, 0 },
    { PD_KNOB_SPINNERS, "0", 1, 0, 0 },
    { PD_KNOB_SPINNERS, "4294967295", 1, 4294967295u, 0 },
    { PD_KNOB_SPINNERS, "4294967296", 0, 0, 0 },
    { PD_KNOB_INFLIGHT, "1", 1, 1, 0 },
    { PD_KNOB_INFLIGHT, "8", 1, 8, 0 },
    { PD_KNOB_INFLIGHT, "0", 0, 0, 0 },
    { PD_KNOB_INFLIGHT, "9", 0, 0, 0 },
    { PD_KNOB_INFLIGHT, " 4", 0, 0, 0 },
    { PD_KNOB_INFLIGHT, "4 ", 0, 0, 0 },
    { PD_KNOB_POLL_GAP_US, "0", 1, 0, 0 },
    { PD_KNOB_POLL_GAP_US, "1000", 1, 1000, 0 },
    { PD_KNOB_POLL_GAP_US, "1001", 0, 0, 0 },
    { PD_KNOB_DEP_KERNELS, "2", 1, 2, 0 },
    { PD_KNOB_DEP_KERNELS, "3", 0, 0, 0 },
    { PD_KNOB_FUSE, "0", 1, 0, 0 },
    { PD_KNOB_META_INLINE, "0", 1, 0, 0 },
    { PD_KNOB_DEVICE_TIMING, "1", 1, 1, 0 },
    { PD_KNOB_DEVICE_TIMING, "10", 0, 0, 0 },
    { PD_KNOB_ACTIVITY_LOG, "1", 1, 1, 0 },
    { PD_KNOB_ACTIVITY_LOG, "on", 0, 0, 0 },
    { PD_KNOB_CPU_DONE_US, "2000", 1, 2000, 0 },
    { PD_KNOB_CPU_DONE_US, "1000000", 1, 1000000, 0 },
    { PD_KNOB_CPU_DONE_US, "1000001", 0, 0, 0 },
    { PD_KNOB_REFUSE_MERGED, "1", 1, 1, 0 },
    { PD_KNOB_REFUSE_MERGED, "2", 0, 0, 0 },
    { PD_KNOB_FAULT_AFTER, "3", 1, 3, 0 },
    { PD_KNOB_FAULT_AFTER, "18446744073709551615", 1, UINT64_MAX, 0 },
    { PD_KNOB_FAULT_AFTER, "18446744073709551616", 0, 0, 0 },
    { PD_KNOB_FAULT_AFTER, "+1", 0, 0, 0 },
    { PD_KNOB_FAIL_UPLOAD_AT, "0x10", 0, 0, 0 },
    { PD_KNOB_FAIL_EVENT_AT, "7", 1, 7, 0 },
    { PD_KNOB_FAIL_ALLOC_AT, "12", 1, 12, 0 },
    { PD_KNOB_REAP_DELAY_MS, "60000", 1, 60000, 0 },
    { PD_KNOB_REAP_DELAY_MS, "60001", 0, 0, 0 },
    { PD_KNOB_CUDA_EXPORT, "ipc", 1, PD_KNOB_EXPORT_IPC, 0 },
    { PD_KNOB_CUDA_EXPORT, "auto", 1, PD_KNOB_EXPORT_AUTO, 0 },
    { PD_KNOB_CUDA_EXPORT, "IPC", 0, 0, 0 },
};

/* The defaults of the knobs whose default is a value (not worked out at run time). */
static const struct knob_case defaults[] = {
    { PD_KNOB_GATHER, NULL, 0, PD_GATHER_SHARE, PD_GATHER_MAX_NS / 1000 },
    { PD_KNOB_SPLIT, NULL, 0, PD_SPLIT_CLIENTS, PD_SPLIT_AFTER },
    { PD_KNOB_DEFER, NULL, 0, 1, 0 },
    { PD_KNOB_INFLIGHT, NULL, 0, PD_CU_DEPTH, 0 },
    { PD_KNOB_POLL_GAP_US, NULL, 0, PD_CU_POLL_GAP_NS / 1000, 0 },
    { PD_KNOB_FUSE, NULL, 0, 1, 0 },
    { PD_KNOB_META_INLINE, NULL, 0, 1, 0 },
    { PD_KNOB_DEVICE_TIMING, NULL, 0, 0, 0 },
    { PD_KNOB_ACTIVITY_LOG, NULL, 0, 0, 0 },
    { PD_KNOB_CPU_DONE_US, NULL, 0, 0, 0 },
    { PD_KNOB_REFUSE_MERGED, NULL, 0, 0, 0 },
    { PD_KNOB_FAULT_AFTER, NULL, 0, 0, 0 },
    { PD_KNOB_FAIL_UPLOAD_AT, NULL, 0, 0, 0 },
    { PD_KNOB_FAIL_EVENT_AT, NULL, 0, 0, 0 },
    { PD_KNOB_FAIL_ALLOC_AT, NULL, 0, 0, 0 },
    { PD_KNOB_REAP_DELAY_MS, NULL, 0, 0, 0 },
    { PD_KNOB_CUDA_EXPORT, NULL, 0, PD_KNOB_EXPORT_AUTO, 0 },
};

#define NCASES (sizeof cases / sizeof cases[0])
#define NDEFAULTS (sizeof defaults / sizeof defaults[0])
/* Man pages read at most. */
#define MAX_PAGES 128

/* Unsets every knob; returns nothing. */
static void unset_all(void)
{
    for (int id = 0; id < PD_KNOB_COUNT_; id++)
        unsetenv(pd_knob_name((enum pd_knob) id));
}

/* Loads the knobs; returns pd_knobs_load's result, with the refusal in *cause (to free). */
static int load(char **cause)
{
    *cause = NULL;
    return pd_knobs_load(cause);
}

/* Checks the defaults with nothing set; returns nothing. */
static void check_defaults(void)
{
    char *cause;
    unset_all();
    int rc = load(&cause);
    is_int(0, rc, "nothing set: the knobs load");
    free(cause);
    int none_set = 1;
    for (int id = 0; id < PD_KNOB_COUNT_; id++)
        none_set &= !pd_knob_is_set((enum pd_knob) id);
    ok(none_set, "nothing set: no knob says it is set");
    for (size_t i = 0; i < NDEFAULTS; i++) {
        const struct knob_case *d = &defaults[i];
        ok(pd_knob_part(d->id, 0) == d->part0 && pd_knob_part(d->id, 1) == d->part1,
           "%s unset: its default %llu,%llu (read %llu,%llu)", pd_knob_name(d->id),
           (unsigned long long) d->part0, (unsigned long long) d->part1,
           (unsigned long long) pd_knob_part(d->id, 0), (unsigned long long) pd_knob_part(d->id, 1));
    }
    setenv("PAGEDD_INFLIGHT", "", 1);
    rc = load(&cause);
    ok(rc == 0 && !pd_knob_is_set(PD_KNOB_INFLIGHT) && pd_knob(PD_KNOB_INFLIGHT) == PD_CU_DEPTH,
       "PAGEDD_INFLIGHT set empty: unset, its default");
    free(cause);
    unsetenv("PAGEDD_INFLIGHT");
}

/* Checks one case: the value taken with its parts, or refused with a message naming the
 * knob, the value and what it takes while the knob keeps its default; returns nothing. */
static void check_case(const struct knob_case *c)
{
    const char *name = pd_knob_name(c->id);
    char *cause;
    unset_all();
    setenv(name, c->text, 1);
    int rc = load(&cause);
    if (c->taken) {
        ok(rc == 0 && pd_knob_is_set(c->id) && pd_knob_part(c->id, 0) == c->part0
           && pd_knob_part(c->id, 1) == c->part1,
           "%s=%s: taken as %llu,%llu (load %d, read %llu,%llu)", name, c->text,
           (unsigned long long) c->part0, (unsigned long long) c->part1, rc,
           (unsigned long long) pd_knob_part(c->id, 0), (unsigned long long) pd_knob_part(c->id, 1));
    } else {
        struct pd_knob_text t;
        pd_knob_describe(c->id, &t);
        char want[256];
        snprintf(want, sizeof want, "%s=%s is refused: it takes %s", name, c->text, t.takes);
        int named = cause != NULL && strcmp(cause, want) == 0;
        ok(rc == -1 && named && !pd_knob_is_set(c->id),
           "%s=%s: refused, the message naming it and what it takes (\"%s\")", name, c->text,
           cause != NULL ? cause : "(none)");
    }
    free(cause);
    unsetenv(name);
}

/* Checks that every refusal is named at once and the knobs taken meanwhile keep their values;
 * returns nothing. */
static void check_several(void)
{
    char *cause;
    unset_all();
    setenv("PAGEDD_INFLIGHT", "9", 1);
    setenv("PAGEDD_CUDA_EXPORT", "fd", 1);
    setenv("PAGEDD_SPLIT", "4,1", 1);
    int rc = load(&cause);
    ok(rc == -1 && cause != NULL && strstr(cause, "PAGEDD_INFLIGHT=9 is refused") != NULL
       && strstr(cause, "PAGEDD_CUDA_EXPORT=fd is refused: it takes auto or ipc") != NULL,
       "two refused knobs: the message names both (\"%s\")", cause != NULL ? cause : "(none)");
    ok(pd_knob(PD_KNOB_INFLIGHT) == PD_CU_DEPTH && pd_knob_is_set(PD_KNOB_SPLIT)
       && pd_knob_part(PD_KNOB_SPLIT, 0) == 4,
       "two refused knobs: they keep their defaults, the knob taken beside them its value");
    free(cause);
    unset_all();
}

/* Checks pd_knobs_log: one INFO line for each knob set (name, value, kind), none for the
 * others; returns nothing. */
static void check_log(void)
{
    char *cause;
    unset_all();
    setenv("PAGEDD_INFLIGHT", "4", 1);
    setenv("PAGEDD_FAULT_AFTER", "3", 1);
    if (load(&cause) != 0)
        diag("load: %s", cause != NULL ? cause : "?");
    free(cause);
    FILE *f = tmpfile();
    if (f == NULL)
        sysbail("tmpfile");
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    if (saved < 0 || dup2(fileno(f), STDERR_FILENO) < 0)
        sysbail("redirecting stderr");
    pd_knobs_log();
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char text[2048];
    rewind(f);
    size_t got = fread(text, 1, sizeof text - 1, f);
    text[got] = '\0';
    fclose(f);
    ok(strstr(text, "environment: PAGEDD_INFLIGHT=4 (tuning)") != NULL
       && strstr(text, "environment: PAGEDD_FAULT_AFTER=3 (test aid)") != NULL,
       "the startup log names each knob set, its value and kind");
    int lines = 0;
    for (const char *p = text; *p != '\0'; p++)
        lines += *p == '\n';
    is_int(2, lines, "the startup log has one line per knob set, none for the others");
    unset_all();
}

/* Reads path whole into a NUL-terminated buffer (to free); returns it, or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = bmalloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap)
            buf = brealloc(buf, cap *= 2);
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

/* Reads the man page dir/name whole, or bails; returns it (to free). */
static char *read_page(const char *dir, const char *name)
{
    char path[4352];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = slurp(path);
    if (text == NULL)
        sysbail("reading %s", path);
    return text;
}

/* Returns the line after *p (advancing *p past it) as a string in line (size bytes), or NULL
 * at the end of text. */
static const char *next_line(const char **p, char *line, size_t size)
{
    if (**p == '\0')
        return NULL;
    const char *end = strchr(*p, '\n');
    size_t len = end != NULL ? (size_t) (end - *p) : strlen(*p);
    snprintf(line, size, "%.*s", (int) len, *p);
    *p += len + (end != NULL);
    return line;
}

/* Returns the knob named by the first len bytes of name, or PD_KNOB_COUNT_ for none. */
static enum pd_knob knob_named(const char *name, size_t len)
{
    for (int id = 0; id < PD_KNOB_COUNT_; id++) {
        const char *k = pd_knob_name((enum pd_knob) id);
        if (strlen(k) == len && strncmp(k, name, len) == 0)
            return (enum pd_knob) id;
    }
    return PD_KNOB_COUNT_;
}

/*
 * Checks pagedd(8)'s ENVIRONMENT (pagedd.8 in the folder man) against the table: its PAGEDD_
 * entries are the knobs, in the table's order, each followed by the line "Kind; what it
 * takes; default D." and the doc line. Returns nothing.
 */
static void check_page(const char *man)
{
    char *page = read_page(man, "pagedd.8");
    const char *p = strstr(page, "\n.Sh ENVIRONMENT\n");
    if (p == NULL)
        bail("pagedd.8 has no ENVIRONMENT section");
    p += strlen("\n.Sh ENVIRONMENT\n");
    char line[1024], first[1024], second[1024];
    int seen = 0, in_order = 1;
    while (next_line(&p, line, sizeof line) != NULL && strncmp(line, ".Sh ", 4) != 0) {
        if (strncmp(line, ".It Ev PAGEDD_", 14) != 0)
            continue;
        const char *name = line + 7;
        enum pd_knob id = knob_named(name, strlen(name));
        if (id == PD_KNOB_COUNT_) {
            ok(0, "pagedd(8) ENVIRONMENT lists %s, which is no knob of the table", name);
            continue;
        }
        if ((int) id != seen)
            in_order = 0;
        seen++;
        const char *l1 = next_line(&p, first, sizeof first);
        const char *l2 = next_line(&p, second, sizeof second);
        struct pd_knob_text t;
        pd_knob_describe(id, &t);
        char want[512];
        snprintf(want, sizeof want, "%c%s; %s; default %s.", toupper((unsigned char) t.kind[0]), t.kind + 1,
                 t.takes, t.def);
        is_string(want, l1, "pagedd(8) %s: kind, what it takes and default as the table says", t.name);
        is_string(t.doc, l2, "pagedd(8) %s: the table's doc line", t.name);
    }
    ok(seen == PD_KNOB_COUNT_ && in_order, "pagedd(8) ENVIRONMENT lists the table's %d knobs in its order "
       "(%d PAGEDD_ entries%s)", PD_KNOB_COUNT_, seen, in_order ? "" : ", out of order");
    free(page);
}

/* Checks that every PAGEDD_ name a man page in dir mentions is a knob; returns nothing. */
static void check_mentions(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        sysbail("opendir %s", dir);
    struct dirent *de;
    int pages = 0, stale = 0;
    while ((de = readdir(d)) != NULL && pages < MAX_PAGES) {
        const char *dot = strrchr(de->d_name, '.');
        if (dot == NULL || dot[1] < '1' || dot[1] > '8' || dot[2] != '\0')
            continue;
        char *text = read_page(dir, de->d_name);
        pages++;
        for (const char *m = strstr(text, "PAGEDD_"); m != NULL; m = strstr(m + 1, "PAGEDD_")) {
            size_t len = 0;
            while (isupper((unsigned char) m[len]) || isdigit((unsigned char) m[len]) || m[len] == '_')
                len++;
            /* The bare prefix names the family, not a knob. */
            if (len > strlen("PAGEDD_") && knob_named(m, len) == PD_KNOB_COUNT_) {
                diag("%s names %.*s, which is no knob", de->d_name, (int) len, m);
                stale++;
            }
        }
        free(text);
    }
    closedir(d);
    ok(pages > 0 && stale == 0, "every PAGEDD_ name in the %d man pages is a knob of the table (%d are not)",
       pages, stale);
}

/* Runs the checks; returns 0 (TAP says how it went). */
int main(void)
{
    const char *top = getenv("top_srcdir");
    char man[4096];
    snprintf(man, sizeof man, "%s/man", top != NULL ? top : ".");
    plan(2 + NDEFAULTS + 1 + NCASES + 2 + 2 + 2 * PD_KNOB_COUNT_ + 1 + 1);
    check_defaults();
    for (size_t i = 0; i < NCASES; i++)
        check_case(&cases[i]);
    check_several();
    check_log();
    check_page(man);
    check_mentions(man);
    return 0;
}
