/* report.h: paged-bench's figures: header items, tables and summary lines, printed and written as JSON. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_BENCH_REPORT_H
#define PAGED_TOOLS_BENCH_REPORT_H

#include <stdio.h>

/*
 * Everything paged-bench measures goes through one report, so the text and the JSON say the
 * same thing. A table has label columns (what was measured: the shape) and figure columns
 * (what came out). Figures must be finite and positive, or explicitly "n/a" (null in JSON):
 * br_check refuses anything else, which catches a broken measurement before it is printed
 * as a result. JSON layout:
 *
 *   { "tool", "version", "date", "command", "quick", "seed",
 *     "device": { label items..., "figures": { ceilings } },
 *     "tables": [ { "name", "title", "rows": [ { labels..., "figures": { ... } } ] } ],
 *     "summary": { "figures": { ... } } }
 */

#define BR_MAX_ITEMS 24
#define BR_MAX_TABLES 16
#define BR_MAX_COLS 20
#define BR_KEY 32
#define BR_TEXT 160

enum br_kind { BR_NA = 0, BR_STR, BR_INT, BR_NUM };

/* One value: a string, an integer, a number, or n/a. */
struct br_value {
    enum br_kind kind;
    char s[BR_TEXT];
    long long i;
    double d;
};

/* A named value with its label for the text output; figure says it is a measured result. */
struct br_item {
    char key[BR_KEY];
    char label[BR_TEXT];
    char unit[16];
    int prec;
    int figure;
    struct br_value v;
};

struct br_col {
    char key[BR_KEY];
    char head[24];
    int prec;                 /* decimals of a number */
    int figure;
};

struct br_table {
    char key[BR_KEY];
    char title[1024];
    int ncols;
    struct br_col cols[BR_MAX_COLS];
    int nrows, cap;
    struct br_value *cells;   /* [nrows][ncols] */
};

struct br_report {
    char date[40];
    char command[512];
    int quick;
    unsigned long long seed;
    int ndevice;
    struct br_item device[BR_MAX_ITEMS];
    int ntables;
    struct br_table tables[BR_MAX_TABLES];
    int nsummary;
    struct br_item summary[BR_MAX_ITEMS];
};

/* Starts a report: the date (UTC, now) and the command line. */
void br_init(struct br_report *r, int argc, char **argv, int quick, unsigned long long seed);

/* Frees the tables' cells. */
void br_free(struct br_report *r);

/* Adds a device item: a string, an integer, or a figure (NAN for n/a). */
void br_device_str(struct br_report *r, const char *key, const char *label, const char *s);
void br_device_int(struct br_report *r, const char *key, const char *label, long long i);
void br_device_fig(struct br_report *r, const char *key, const char *label, double d,
                   const char *unit, int prec);

/* Adds a summary figure (NAN for n/a). */
void br_summary(struct br_report *r, const char *key, const char *label, double d,
                const char *unit, int prec);

/* Adds a table and returns it. */
struct br_table *br_table(struct br_report *r, const char *key, const char *title);

/* Adds a column: a label (figure 0) or a figure (1) with prec decimals. Returns its index. */
int br_col(struct br_table *t, const char *key, const char *head, int prec, int figure);

/* Adds an empty row (every cell n/a) and returns its index. */
int br_row(struct br_table *t);

/* Sets a cell of row by column key. A NAN number is n/a. */
void br_set_str(struct br_table *t, int row, const char *key, const char *s);
void br_set_int(struct br_table *t, int row, const char *key, long long i);
void br_set_num(struct br_table *t, int row, const char *key, double d);

/* Returns the number in a cell (NAN when it is not a number). */
double br_get_num(const struct br_table *t, int row, const char *key);

/* Prints the header (date, device items) to f. */
void br_print_header(const struct br_report *r, FILE *f);

/* Prints a table to f, columns aligned. */
void br_print_table(const struct br_table *t, FILE *f);

/* Prints the summary lines to f (nothing when there are none). */
void br_print_summary(const struct br_report *r, FILE *f);

/* Checks every figure: finite and positive, or n/a. Prints the first offender to stderr
 * and returns -1; returns 0 when all are good. */
int br_check(const struct br_report *r);

/* Writes the report as JSON to path. Returns 0, or -1 with errno set. */
int br_write_json(const struct br_report *r, const char *path);

#endif
