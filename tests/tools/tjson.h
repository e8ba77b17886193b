/* tjson.h: a strict little JSON parser for the tests that check pactl's JSON output. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_TOOLS_TJSON_H
#define PAGED_TESTS_TOOLS_TJSON_H

#include <stddef.h>

/*
 * Parses exactly RFC 8259: one value with optional white space around it, strings of
 * valid UTF-8 with no raw control characters and only the defined escapes (surrogate
 * pairs checked), numbers in the grammar's form, no trailing commas, nothing after the
 * value. Duplicate keys are refused too, since pactl never writes them.
 */

enum tj_type { TJ_NULL, TJ_BOOL, TJ_NUMBER, TJ_STRING, TJ_ARRAY, TJ_OBJECT };

struct tj {
    enum tj_type type;
    int boolean;
    double number;
    char *string;          /* TJ_STRING: decoded, NUL-terminated (embedded NULs refused) */
    size_t count;          /* TJ_ARRAY and TJ_OBJECT: members */
    struct tj **items;
    char **keys;           /* TJ_OBJECT: each member's key */
};

/* Parses text (len bytes). Returns the value, or NULL with a reason and byte offset in err. */
struct tj *tj_parse(const char *text, size_t len, char *err, size_t errsize);

/* Frees a parsed value (NULL is ignored). */
void tj_free(struct tj *v);

/* Returns member key of an object, or NULL (also when v is NULL or not an object). */
const struct tj *tj_get(const struct tj *v, const char *key);

/* Returns element i of an array, or NULL. */
const struct tj *tj_at(const struct tj *v, size_t i);

/* Returns a number member's value, or -1 when it is missing or not a number. */
double tj_num(const struct tj *v, const char *key);

/* Returns a string member's value, or NULL. */
const char *tj_str(const struct tj *v, const char *key);

#endif
