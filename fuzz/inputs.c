/* inputs.c: finding and reading fuzz inputs for the TAP drivers that replay them (no libFuzzer). */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz/inputs.h"
#include "tests/tap/basic.h"

/* Appends a copy of path; returns nothing (bails out of memory). */
static void add(struct fuzz_inputs *in, const char *path)
{
    if (in->n == in->cap) {
        in->cap = in->cap != 0 ? in->cap * 2 : 64;
        in->paths = brealloc(in->paths, in->cap * sizeof *in->paths);
    }
    in->paths[in->n++] = bstrdup(path);
}

/* Orders paths by name. */
static int cmp_path(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Collects inputs; see inputs.h. */
void fuzz_inputs_collect(struct fuzz_inputs *in, const char *path, const char *prefix)
{
    struct stat st;
    if (stat(path, &st) < 0)
        bail("cannot stat %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        add(in, path);
    } else {
        DIR *d = opendir(path);
        if (d == NULL)
            bail("cannot open %s: %s", path, strerror(errno));
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.' || (prefix != NULL && strncmp(e->d_name, prefix, strlen(prefix)) != 0))
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
    if (in->n > 1)
        qsort(in->paths, in->n, sizeof *in->paths, cmp_path);
}

/* Frees the paths; see inputs.h. */
void fuzz_inputs_free(struct fuzz_inputs *in)
{
    for (size_t i = 0; i < in->n; i++)
        free(in->paths[i]);
    free(in->paths);
    in->paths = NULL;
    in->n = in->cap = 0;
}

/* Reads a file; see inputs.h. */
unsigned char *fuzz_slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL || fseek(f, 0, SEEK_END) != 0)
        bail("cannot read %s: %s", path, strerror(errno));
    long len = ftell(f);
    rewind(f);
    unsigned char *buf = bmalloc(len > 0 ? (size_t) len : 1);
    if (len < 0 || fread(buf, 1, (size_t) len, f) != (size_t) len)
        bail("cannot read %s", path);
    fclose(f);
    *size = (size_t) len;
    return buf;
}
