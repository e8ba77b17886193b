/* pactl_json.h: a small streaming JSON writer for pactl's machine-readable output. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_PACTL_JSON_H
#define PAGED_TOOLS_PACTL_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * The writer keeps a stack of open containers and whether each has had a member yet, so
 * commas are placed between members and never after the last. Inside an object every
 * value takes a key; inside an array (or at the top) key must be NULL. A document is one
 * line: json_end writes the newline once the outermost container closes. Strings are
 * escaped for JSON and made valid UTF-8 (each byte that is not part of a valid sequence
 * becomes U+FFFD), since names arrive from the daemon as raw bytes.
 */

#define JSON_MAX_DEPTH 16

struct json {
    FILE *fp;
    int depth;                          /* open containers */
    unsigned char has_member[JSON_MAX_DEPTH];
    unsigned char is_object[JSON_MAX_DEPTH];
};

/* Starts a document written to fp. */
void json_init(struct json *j, FILE *fp);

/* Opens an object or array as a member named key (NULL in an array or at the top). */
void json_object_begin(struct json *j, const char *key);
void json_array_begin(struct json *j, const char *key);
/* Closes the innermost container; after the outermost, ends the line and flushes. */
void json_end(struct json *j);

/* Members: a string of at most max bytes (stopping early at a NUL), a string, numbers, a
 * boolean and null. */
void json_strn(struct json *j, const char *key, const char *s, size_t max);
void json_str(struct json *j, const char *key, const char *s);
void json_u64(struct json *j, const char *key, uint64_t v);
void json_i64(struct json *j, const char *key, int64_t v);
void json_bool(struct json *j, const char *key, int v);
void json_null(struct json *j, const char *key);

/* Writes s (at most max bytes, stopping at a NUL) as a quoted JSON string to fp. */
void json_write_string(FILE *fp, const char *s, size_t max);

#endif
