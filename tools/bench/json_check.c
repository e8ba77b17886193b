/* json_check.c: checks a paged-bench JSON file: strict JSON, the expected parts, every figure finite and positive. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tools/tjson.h"

/*
 * Used by tests/tools/bench-t.sh: "bench-json-check FILE TABLE..." exits 0 when FILE parses
 * as strict JSON, names paged-bench, has a device with the ceilings, has every TABLE named
 * with at least one row, and every member of every "figures" object is a finite positive
 * number or null (n/a); otherwise it prints why and exits 1.
 */

/* Checks every "figures" object under v (recursively); returns the number of bad members
 * after printing each, and counts the numbers seen in *numbers. */
static int check_figures(const struct tj *v, const char *path, int in_figures, int *numbers)
{
    int bad = 0;
    if (v->type == TJ_OBJECT) {
        for (size_t i = 0; i < v->count; i++) {
            char sub[512];
            snprintf(sub, sizeof sub, "%s.%s", path, v->keys[i]);
            bad += check_figures(v->items[i], sub, strcmp(v->keys[i], "figures") == 0, numbers);
        }
    } else if (v->type == TJ_ARRAY) {
        for (size_t i = 0; i < v->count; i++) {
            char sub[512];
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            bad += check_figures(v->items[i], sub, 0, numbers);
        }
    }
    if (!in_figures)
        return bad;
    if (v->type != TJ_OBJECT) {
        printf("%s: figures is not an object\n", path);
        return bad + 1;
    }
    for (size_t i = 0; i < v->count; i++) {
        const struct tj *f = v->items[i];
        if (f->type == TJ_NULL)
            continue;
        if (f->type != TJ_NUMBER || !isfinite(f->number) || f->number <= 0.0) {
            printf("%s.%s: not a finite positive number\n", path, v->keys[i]);
            bad++;
        } else
            (*numbers)++;
    }
    return bad;
}

/* Returns the table named name in the document, or NULL. */
static const struct tj *find_table(const struct tj *doc, const char *name)
{
    const struct tj *tables = tj_get(doc, "tables");
    for (size_t i = 0; tables != NULL && i < tables->count; i++) {
        const char *n = tj_str(tj_at(tables, i), "name");
        if (n != NULL && strcmp(n, name) == 0)
            return tj_at(tables, i);
    }
    return NULL;
}

/* Reads a whole file into a malloc'd buffer; returns it (length in *len) or NULL. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        char *grown = realloc(buf, cap * 2);
        if (grown == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    fclose(f);
    *len = n;
    return buf;
}

/* Checks the file named by argv[1] for the tables named by the rest; returns the exit status. */
int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench-json-check FILE [TABLE]...\n");
        return 2;
    }
    size_t len = 0;
    char *text = slurp(argv[1], &len);
    if (text == NULL) {
        printf("%s: cannot read it\n", argv[1]);
        return 1;
    }
    char err[256] = "";
    struct tj *doc = tj_parse(text, len, err, sizeof err);
    free(text);
    if (doc == NULL) {
        printf("%s: not valid JSON: %s\n", argv[1], err);
        return 1;
    }
    int bad = 0, numbers = 0;
    const char *tool = tj_str(doc, "tool");
    if (tool == NULL || strcmp(tool, "paged-bench") != 0) {
        printf("%s: \"tool\" is not \"paged-bench\"\n", argv[1]);
        bad++;
    }
    const struct tj *device = tj_get(doc, "device");
    const struct tj *ceil = tj_get(device, "figures");
    if (tj_num(ceil, "read_gbps") <= 0.0 || tj_num(ceil, "copy_gbps") <= 0.0) {
        printf("%s: the device has no read and copy ceilings\n", argv[1]);
        bad++;
    }
    for (int i = 2; i < argc; i++) {
        const struct tj *t = find_table(doc, argv[i]);
        const struct tj *rows = tj_get(t, "rows");
        if (rows == NULL || rows->type != TJ_ARRAY || rows->count == 0) {
            printf("%s: no rows in table \"%s\"\n", argv[1], argv[i]);
            bad++;
        }
    }
    bad += check_figures(doc, "$", 0, &numbers);
    tj_free(doc);
    if (bad == 0)
        printf("%s: valid, %d figures, all finite and positive\n", argv[1], numbers);
    return bad == 0 ? 0 : 1;
}
