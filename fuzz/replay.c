/* replay.c: a TAP driver that feeds a harness the committed seed corpus, without libFuzzer. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"
#include "fuzz/inputs.h"
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

/* Replays the corpus or the arguments; returns 0 (TAP says how it went). */
int main(int argc, char **argv)
{
    struct fuzz_inputs in = { NULL, 0, 0 };
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            fuzz_inputs_collect(&in, argv[i], NULL);
    } else {
        const char *top = getenv("top_srcdir");
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/fuzz/corpus/%s", top != NULL ? top : ".", FUZZ_NAME);
        fuzz_inputs_collect(&in, dir, NULL);
    }
    if (in.n == 0)
        skip_all("no inputs for the %s harness", FUZZ_NAME);
    plan(in.n);
    LLVMFuzzerInitialize(&argc, &argv);
    for (size_t i = 0; i < in.n; i++) {
        size_t size;
        unsigned char *data = fuzz_slurp(in.paths[i], &size);
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
    }
    fuzz_inputs_free(&in);
    return 0;
}
