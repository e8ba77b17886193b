/* inputs.h: finding and reading fuzz inputs for the TAP drivers that replay them (no libFuzzer). */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_FUZZ_INPUTS_H
#define PAGED_FUZZ_INPUTS_H

#include <stddef.h>

/* Input paths found so far. */
struct fuzz_inputs {
    char **paths;
    size_t n, cap;
};

/*
 * Adds path, or, when it is a directory, every regular file directly in it whose name starts
 * with prefix (NULL: any name but dot files); then keeps all paths sorted by name, so every
 * run replays in the same order. Bails on errors. Returns nothing.
 */
void fuzz_inputs_collect(struct fuzz_inputs *in, const char *path, const char *prefix);

/* Frees the paths; returns nothing. */
void fuzz_inputs_free(struct fuzz_inputs *in);

/* Reads a whole file into a heap block of exactly its size (one byte for an empty file), as
 * libFuzzer hands inputs to a harness; returns it and sets *size. Bails on errors. */
unsigned char *fuzz_slurp(const char *path, size_t *size);

#endif
