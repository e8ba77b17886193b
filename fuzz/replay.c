/* replay.c: a TAP driver that feeds a harness the committed seed corpus, without libFuzzer. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz/fuzz.h"
#include "tests/tap/basic.h"

/*
 * Built once per harness with FUZZ_NAME (the corpus directory's name) defined. With no
 * arguments it replays $top_srcdir/fuzz/corpus/FUZZ_NAME (or ./fuzz/corpus/FUZZ_NAME);
 * arguments name files or directories to replay instead, such as a crash libFuzzer wrote.
 * Each input runs twice, the second time catching state one input left for the next. A
 * broken invariant or a sanitizer report aborts the run, which the TAP driver reports.
 */

#ifndef FUZZ_NAME
#error "FUZZ_NAME must name the harness's corpus"
#endif

/* The inputs found so far. */
struct inputs {
    char **paths;
    size_t n, cap;
};

/* Appends a copy of path; returns nothing (bails out of memory). */
static void add(struct inputs *in, const char *path)
{
    if (in->n == in->cap) {
        in->cap = in->cap != 0 ? in->cap * 2 : 64;
        in->paths = brealloc(in->paths, in->cap * sizeof *in->paths);
    }
    in->paths[in->n++] = bstrdup(path);
}

/* Orders paths by name, so every run replays in the same order. */
static int cmp_path(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Adds path, or every regular file directly in it when it is a directory (dot files
 * skipped); returns nothing. */
static void collect(struct inputs *in, const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        bail("cannot stat %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        add(in, path);
        return;
    }
    DIR *d = opendir(path);
    if (d == NULL)
        bail("cannot open %s: %s", path, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        char *full = bmalloc(len);
        snprintf(full, len, "%s/%s", path, e->d_name);
        if (stat(full, &st) == 0 && S_ISREG(st.st_mode))
            add(in, full);
        free(full);
    }
    closedir(d);
}

/* Reads a whole file; returns its bytes (malloc'd, bails on error) and sets *size. */
static unsigned char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        bail("cannot open %s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    unsigned char *buf = bmalloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = brealloc(buf, cap);
        }
    }
    if (ferror(f))
        bail("cannot read %s", path);
    fclose(f);
    *size = n;
    return buf;
}

/* Replays the corpus or the arguments; returns 0 (TAP says how it went). */
int main(int argc, char **argv)
{
    struct inputs in = { NULL, 0, 0 };
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            collect(&in, argv[i]);
    } else {
        const char *top = getenv("top_srcdir");
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/fuzz/corpus/%s", top != NULL ? top : ".", FUZZ_NAME);
        collect(&in, dir);
    }
    if (in.n == 0)
        skip_all("no inputs for the %s harness", FUZZ_NAME);
    qsort(in.paths, in.n, sizeof *in.paths, cmp_path);
    plan(in.n);
    LLVMFuzzerInitialize(&argc, &argv);
    for (size_t i = 0; i < in.n; i++) {
        size_t size;
        unsigned char *data = slurp(in.paths[i], &size);
        const char *name = strrchr(in.paths[i], '/');
        name = name != NULL ? name + 1 : in.paths[i];
        /* An exact copy per run: libFuzzer hands the harness a buffer of the input's size. */
        for (int run = 0; run < 2; run++) {
            unsigned char *copy = bmalloc(size != 0 ? size : 1);
            memcpy(copy, data, size);
            LLVMFuzzerTestOneInput(copy, size);
            free(copy);
        }
        ok(1, "%s: %s (%zu bytes) replayed twice, invariants held", FUZZ_NAME, name, size);
        free(data);
        free(in.paths[i]);
    }
    free(in.paths);
    return 0;
}
