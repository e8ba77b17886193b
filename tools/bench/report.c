/* report.c: paged-bench's figures: header items, tables and summary lines, printed and written as JSON. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/bench/report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/bench/bench.h"

/* Copies src into dst of size bytes, always terminated; returns nothing. */
static void copy_str(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src != NULL ? src : "");
}

/* Starts a report; returns nothing. */
void br_init(struct br_report *r, int argc, char **argv, int quick, unsigned long long seed)
{
    memset(r, 0, sizeof *r);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(r->date, sizeof r->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    size_t n = 0;
    for (int i = 0; i < argc && n + 2 < sizeof r->command; i++) {
        const char *a = i == 0 ? "paged-bench" : argv[i];
        int w = snprintf(r->command + n, sizeof r->command - n, "%s%s", i ? " " : "", a);
        if (w < 0)
            break;
        n += (size_t) w;
    }
    r->quick = quick;
    r->seed = seed;
}

/* Frees the tables' cells; returns nothing. */
void br_free(struct br_report *r)
{
    for (int i = 0; i < r->ntables; i++)
        free(r->tables[i].cells);
    r->ntables = 0;
}

/* Returns a new item in a fixed list, dying when the list is full. */
static struct br_item *add_item(struct br_item *list, int *n, const char *key, const char *label)
{
    if (*n == BR_MAX_ITEMS)
        bench_die("report: too many items (adding '%s')", key);
    struct br_item *it = &list[(*n)++];
    memset(it, 0, sizeof *it);
    copy_str(it->key, sizeof it->key, key);
    copy_str(it->label, sizeof it->label, label);
    return it;
}

/* Stores a number, NAN meaning n/a; returns nothing. */
static void set_number(struct br_value *v, double d)
{
    v->kind = isnan(d) ? BR_NA : BR_NUM;
    v->d = d;
}

/* Adds a string device item; returns nothing. */
void br_device_str(struct br_report *r, const char *key, const char *label, const char *s)
{
    struct br_item *it = add_item(r->device, &r->ndevice, key, label);
    it->v.kind = BR_STR;
    copy_str(it->v.s, sizeof it->v.s, s);
}

/* Adds an integer device item; returns nothing. */
void br_device_int(struct br_report *r, const char *key, const char *label, long long i)
{
    struct br_item *it = add_item(r->device, &r->ndevice, key, label);
    it->v.kind = BR_INT;
    it->v.i = i;
}

/* Adds a device figure; returns nothing. */
void br_device_fig(struct br_report *r, const char *key, const char *label, double d,
                   const char *unit, int prec)
{
    struct br_item *it = add_item(r->device, &r->ndevice, key, label);
    it->figure = 1;
    it->prec = prec;
    copy_str(it->unit, sizeof it->unit, unit);
    set_number(&it->v, d);
}

/* Adds a summary figure; returns nothing. */
void br_summary(struct br_report *r, const char *key, const char *label, double d,
                const char *unit, int prec)
{
    struct br_item *it = add_item(r->summary, &r->nsummary, key, label);
    it->figure = 1;
    it->prec = prec;
    copy_str(it->unit, sizeof it->unit, unit);
    set_number(&it->v, d);
}

/* Adds a table; returns it. */
struct br_table *br_table(struct br_report *r, const char *key, const char *title)
{
    if (r->ntables == BR_MAX_TABLES)
        bench_die("report: too many tables (adding '%s')", key);
    struct br_table *t = &r->tables[r->ntables++];
    memset(t, 0, sizeof *t);
    copy_str(t->key, sizeof t->key, key);
    copy_str(t->title, sizeof t->title, title);
    return t;
}

/* Adds a column; returns its index. */
int br_col(struct br_table *t, const char *key, const char *head, int prec, int figure)
{
    if (t->ncols == BR_MAX_COLS || t->nrows > 0)
        bench_die("report: cannot add column '%s' to table '%s'", key, t->key);
    struct br_col *c = &t->cols[t->ncols];
    copy_str(c->key, sizeof c->key, key);
    copy_str(c->head, sizeof c->head, head);
    c->prec = prec;
    c->figure = figure;
    return t->ncols++;
}

/* Adds an empty row; returns its index. */
int br_row(struct br_table *t)
{
    if (t->nrows == t->cap) {
        int cap = t->cap ? t->cap * 2 : 16;
        struct br_value *cells = realloc(t->cells, (size_t) cap * BR_MAX_COLS * sizeof *cells);
        if (cells == NULL)
            bench_die("report: out of memory");
        t->cells = cells;
        t->cap = cap;
    }
    memset(&t->cells[(size_t) t->nrows * BR_MAX_COLS], 0, BR_MAX_COLS * sizeof *t->cells);
    return t->nrows++;
}

/* Returns the cell of row under column key, dying for an unknown key. */
static struct br_value *cell(const struct br_table *t, int row, const char *key)
{
    for (int c = 0; c < t->ncols; c++)
        if (strcmp(t->cols[c].key, key) == 0)
            return &t->cells[(size_t) row * BR_MAX_COLS + (size_t) c];
    bench_die("report: table '%s' has no column '%s'", t->key, key);
}

/* Sets a string cell; returns nothing. */
void br_set_str(struct br_table *t, int row, const char *key, const char *s)
{
    struct br_value *v = cell(t, row, key);
    v->kind = BR_STR;
    copy_str(v->s, sizeof v->s, s);
}

/* Sets an integer cell; returns nothing. */
void br_set_int(struct br_table *t, int row, const char *key, long long i)
{
    struct br_value *v = cell(t, row, key);
    v->kind = BR_INT;
    v->i = i;
}

/* Sets a number cell (NAN: n/a); returns nothing. */
void br_set_num(struct br_table *t, int row, const char *key, double d)
{
    set_number(cell(t, row, key), d);
}

/* Returns a number cell's value or NAN. */
double br_get_num(const struct br_table *t, int row, const char *key)
{
    const struct br_value *v = cell(t, row, key);
    return v->kind == BR_NUM ? v->d : NAN;
}

/* Formats a value for the text output into buf; returns buf. */
static const char *format_value(const struct br_value *v, int prec, char *buf, size_t size)
{
    switch (v->kind) {
    case BR_STR: snprintf(buf, size, "%s", v->s); break;
    case BR_INT: snprintf(buf, size, "%lld", v->i); break;
    case BR_NUM: snprintf(buf, size, "%.*f", prec, v->d); break;
    default: snprintf(buf, size, "n/a"); break;
    }
    return buf;
}

/* Prints the header; returns nothing. */
void br_print_header(const struct br_report *r, FILE *f)
{
    fprintf(f, "paged-bench %s  %s%s\n", PACKAGE_VERSION, r->date,
            r->quick ? "  (--quick: small shapes, few runs)" : "");
    fprintf(f, "command: %s\n", r->command);
    for (int i = 0; i < r->ndevice; i++) {
        const struct br_item *it = &r->device[i];
        char buf[BR_TEXT + 32];
        format_value(&it->v, it->prec, buf, sizeof buf);
        fprintf(f, "%-24s %s%s%s\n", it->label, buf, it->v.kind == BR_NUM && it->unit[0] ? " " : "",
                it->v.kind == BR_NUM ? it->unit : "");
    }
}

/* Prints a table with aligned columns: labels left, figures right. Returns nothing. */
void br_print_table(const struct br_table *t, FILE *f)
{
    int width[BR_MAX_COLS];
    char buf[BR_TEXT + 32];
    for (int c = 0; c < t->ncols; c++) {
        width[c] = (int) strlen(t->cols[c].head);
        for (int row = 0; row < t->nrows; row++) {
            int w = (int) strlen(format_value(&t->cells[(size_t) row * BR_MAX_COLS + (size_t) c],
                                              t->cols[c].prec, buf, sizeof buf));
            if (w > width[c])
                width[c] = w;
        }
    }
    /* Numbers right, text left: a column is numeric when it is a figure or its first cell
     * is an integer. */
    int right[BR_MAX_COLS];
    for (int c = 0; c < t->ncols; c++)
        right[c] = t->cols[c].figure || (t->nrows > 0 && t->cells[c].kind == BR_INT);
    fprintf(f, "\n%s\n", t->title);
    for (int c = 0; c < t->ncols; c++)
        fprintf(f, "%s%*s", c ? "  " : "", right[c] ? width[c] : -width[c], t->cols[c].head);
    fputc('\n', f);
    for (int row = 0; row < t->nrows; row++) {
        for (int c = 0; c < t->ncols; c++) {
            format_value(&t->cells[(size_t) row * BR_MAX_COLS + (size_t) c], t->cols[c].prec, buf, sizeof buf);
            fprintf(f, "%s%*s", c ? "  " : "", right[c] ? width[c] : -width[c], buf);
        }
        fputc('\n', f);
    }
    fflush(f);
}

/* Prints the summary lines; returns nothing. */
void br_print_summary(const struct br_report *r, FILE *f)
{
    if (r->nsummary == 0)
        return;
    fprintf(f, "\nsummary\n");
    for (int i = 0; i < r->nsummary; i++) {
        const struct br_item *it = &r->summary[i];
        char buf[64];
        format_value(&it->v, it->prec, buf, sizeof buf);
        fprintf(f, "  %s: %s%s%s\n", it->label, buf, it->v.kind == BR_NUM && it->unit[0] ? " " : "",
                it->v.kind == BR_NUM ? it->unit : "");
    }
    fflush(f);
}

/* Returns whether a figure value is acceptable: n/a, or a finite positive number. */
static int figure_ok(const struct br_value *v)
{
    return v->kind == BR_NA || (v->kind == BR_NUM && isfinite(v->d) && v->d > 0.0);
}

/* Checks every figure; returns 0 or -1 after naming the first bad one. */
int br_check(const struct br_report *r)
{
    for (int i = 0; i < r->ndevice; i++)
        if (r->device[i].figure && !figure_ok(&r->device[i].v)) {
            fprintf(stderr, "paged-bench: device figure %s is %g: not a finite positive number\n",
                    r->device[i].key, r->device[i].v.d);
            return -1;
        }
    for (int i = 0; i < r->nsummary; i++)
        if (!figure_ok(&r->summary[i].v)) {
            fprintf(stderr, "paged-bench: summary figure %s is %g: not a finite positive number\n",
                    r->summary[i].key, r->summary[i].v.d);
            return -1;
        }
    for (int i = 0; i < r->ntables; i++) {
        const struct br_table *t = &r->tables[i];
        for (int row = 0; row < t->nrows; row++)
            for (int c = 0; c < t->ncols; c++) {
                const struct br_value *v = &t->cells[(size_t) row * BR_MAX_COLS + (size_t) c];
                if (t->cols[c].figure && !figure_ok(v)) {
                    fprintf(stderr, "paged-bench: table %s row %d: %s is %g: not a finite positive number\n",
                            t->key, row + 1, t->cols[c].key, v->d);
                    return -1;
                }
            }
    }
    return 0;
}

/* Writes s as a JSON string (quotes, escapes; bytes >= 0x80 passed through, our strings
 * are ASCII or the UTF-8 of a device name). Returns nothing. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* Writes a value: strings quoted, n/a as null; numbers with enough digits to read back. */
static void json_value(FILE *f, const struct br_value *v)
{
    switch (v->kind) {
    case BR_STR: json_str(f, v->s); break;
    case BR_INT: fprintf(f, "%lld", v->i); break;
    case BR_NUM:
        if (isfinite(v->d))
            fprintf(f, "%.6g", v->d);
        else
            fputs("null", f);
        break;
    default: fputs("null", f); break;
    }
}

/* Writes a list of items as members of an open object: labels first, then a "figures"
 * object when any item is a figure. Returns nothing. */
static void json_items(FILE *f, const struct br_item *items, int n, const char *indent)
{
    int first = 1, figures = 0;
    for (int i = 0; i < n; i++) {
        if (items[i].figure) {
            figures = 1;
            continue;
        }
        fprintf(f, "%s\n%s", first ? "" : ",", indent);
        json_str(f, items[i].key);
        fputs(": ", f);
        json_value(f, &items[i].v);
        first = 0;
    }
    if (!figures)
        return;
    fprintf(f, "%s\n%s\"figures\": {", first ? "" : ",", indent);
    int fi = 0;
    for (int i = 0; i < n; i++) {
        if (!items[i].figure)
            continue;
        fprintf(f, "%s\n%s  ", fi++ ? "," : "", indent);
        json_str(f, items[i].key);
        fputs(": ", f);
        json_value(f, &items[i].v);
    }
    fprintf(f, "\n%s}", indent);
}

/* Writes one table as a JSON object. Returns nothing. */
static void json_table(FILE *f, const struct br_table *t)
{
    fputs("    {\n      \"name\": ", f);
    json_str(f, t->key);
    fputs(",\n      \"title\": ", f);
    json_str(f, t->title);
    fputs(",\n      \"rows\": [", f);
    for (int row = 0; row < t->nrows; row++) {
        fprintf(f, "%s\n        {", row ? "," : "");
        int first = 1;
        for (int c = 0; c < t->ncols; c++) {
            if (t->cols[c].figure)
                continue;
            fprintf(f, "%s", first ? "" : ", ");
            json_str(f, t->cols[c].key);
            fputs(": ", f);
            json_value(f, &t->cells[(size_t) row * BR_MAX_COLS + (size_t) c]);
            first = 0;
        }
        fprintf(f, "%s\"figures\": {", first ? "" : ", ");
        int fi = 0;
        for (int c = 0; c < t->ncols; c++) {
            if (!t->cols[c].figure)
                continue;
            fprintf(f, "%s", fi++ ? ", " : "");
            json_str(f, t->cols[c].key);
            fputs(": ", f);
            json_value(f, &t->cells[(size_t) row * BR_MAX_COLS + (size_t) c]);
        }
        fputs("}}", f);
    }
    fputs("\n      ]\n    }", f);
}

/* Writes the report as JSON; returns 0 or -1. */
int br_write_json(const struct br_report *r, const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fputs("{\n  \"tool\": \"paged-bench\",\n  \"version\": ", f);
    json_str(f, PACKAGE_VERSION);
    fputs(",\n  \"date\": ", f);
    json_str(f, r->date);
    fputs(",\n  \"command\": ", f);
    json_str(f, r->command);
    fprintf(f, ",\n  \"quick\": %s,\n  \"seed\": %llu,\n  \"device\": {", r->quick ? "true" : "false", r->seed);
    json_items(f, r->device, r->ndevice, "    ");
    fputs("\n  },\n  \"tables\": [", f);
    for (int i = 0; i < r->ntables; i++) {
        fputs(i ? ",\n" : "\n", f);
        json_table(f, &r->tables[i]);
    }
    fputs("\n  ],\n  \"summary\": {", f);
    json_items(f, r->summary, r->nsummary, "    ");
    fputs("\n  }\n}\n", f);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return -1;
    return 0;
}
