/* live.c: paged-demo's live view: pactl's tables while the workers hold the pool, trimmed to the telling rows. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/demo/live.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/common/spawn.h"

/* How long one pactl may take, in milliseconds. */
#define DEMO_PACTL_MS 10000

/* The most lines of pactl's output read. */
#define DEMO_LIVE_LINES 100000

/* Which rows of a table to show. */
struct table_view {
    const char *column;         /* the column rows are picked by; NULL: every row */
    unsigned long min;          /* the least value of that column a shown row has */
    const char *left_out;       /* what a left-out row is, for the closing note */
};

/* Returns the position (0, 1, ...) of word in the space-separated line, or -1. */
static int word_index(const char *line, const char *word)
{
    size_t len = strlen(word);
    int i = 0;
    for (const char *p = line; *p != '\0' && i < 64; i++) {
        p += strspn(p, " \t\n");
        size_t n = strcspn(p, " \t\n");
        if (n == 0)
            break;
        if (n == len && strncmp(p, word, n) == 0)
            return i;
        p += n;
    }
    return -1;
}

/* Returns the value of the k-th space-separated word of line as a number (0 when it is
 * missing or not one). */
static unsigned long word_value(const char *line, int k)
{
    const char *p = line;
    for (int i = 0; i < k && *p != '\0'; i++) {
        p += strspn(p, " \t\n");
        p += strcspn(p, " \t\n");
    }
    p += strspn(p, " \t\n");
    return strtoul(p, NULL, 10);
}

/* Prints the table in file f: its heading, the rows v picks up to DEMO_LIVE_ROWS, and a note
 * of the rows left out. A table whose heading lacks v's column is shown whole (cut). */
static void print_table(FILE *f, const struct table_view *v)
{
    char *line = NULL;
    size_t cap = 0;
    int column = -1;
    unsigned long shown = 0, skipped = 0, cut = 0;
    for (unsigned long n = 0; n < DEMO_LIVE_LINES && getline(&line, &cap, f) > 0; n++) {
        if (n == 0) {
            column = v->column != NULL ? word_index(line, v->column) : -1;
            fputs(line, stdout);
        } else if (column >= 0 && word_value(line, column) < v->min)
            skipped++;
        else if (shown >= DEMO_LIVE_ROWS)
            cut++;
        else {
            fputs(line, stdout);
            shown++;
        }
    }
    free(line);
    if (skipped > 0)
        printf("  (%lu %s not shown)\n", skipped, v->left_out);
    if (cut > 0)
        printf("  (%lu more rows not shown)\n", cut);
}

/* Runs pactl -s socket with the words in args (NULL-terminated, at most 4), prints the
 * command and its table as v says. Returns 0 or -1. */
static int show(const struct demo_live *l, const char *const *args, const struct table_view *v)
{
    const char *argv[8] = { l->pactl, "-s", l->socket };
    char err[256], why[64];
    int n = 3;
    printf("$ pactl");
    for (; n < 7 && args[n - 3] != NULL; n++) {
        argv[n] = args[n - 3];
        printf(" %s", argv[n]);
    }
    printf("\n");
    argv[n] = NULL;
    unlink(l->out);
    const struct spawn_cmd cmd = { .argv = argv, .out = l->out };
    int status = spawn_run(&cmd, DEMO_PACTL_MS, err, sizeof err);
    FILE *f = fopen(l->out, "r");
    if (f != NULL) {
        print_table(f, v);
        fclose(f);
    }
    unlink(l->out);
    if (status == 0)
        return 0;
    fprintf(stderr, "paged-demo: pactl %s failed (%s)\n", args[0],
            status == -1 ? err : spawn_describe(why, sizeof why, status));
    return -1;
}

/* Shows the three tables; returns 0 or -1. */
int demo_live_show(const struct demo_live *l, const char *pool)
{
    static const struct table_view every = { .left_out = "rows" };
    static const struct table_view shared = {
        .column = "REFS", .min = 2, .left_out = "blocks with one reference, each sequence's own,",
    };
    const char *const pools[] = { "list", "pools", NULL };
    const char *const clients[] = { "list", "clients", NULL };
    const char *const blocks[] = { "list", "blocks", pool, NULL };
    int rc = show(l, pools, &every);
    rc |= show(l, clients, &every);
    rc |= show(l, blocks, &shared);
    return rc;
}
