/* pactl_json.c: a small streaming JSON writer for pactl's machine-readable output. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/pactl_json.h"

#include <inttypes.h>
#include <string.h>

#include "lib/core/utf8.h"

/* Starts a document on fp with no container open. */
void json_init(struct json *j, FILE *fp)
{
    memset(j, 0, sizeof *j);
    j->fp = fp;
}

/* Writes s, at most max bytes and stopping at a NUL, as a JSON string literal (RFC 8259):
 * well-formed UTF-8 as it is, control characters (C0, DEL, C1) as \uXXXX or their short
 * escapes, each ill-formed subpart as \ufffd. */
void json_write_string(FILE *fp, const char *s, size_t max)
{
    const unsigned char *p = (const unsigned char *) (s != NULL ? s : "");
    size_t n = strnlen((const char *) p, max);
    fputc('"', fp);
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c == '"' || c == '\\') {
            fputc('\\', fp);
            fputc(c, fp);
            i++;
        } else if (c == '\n') {
            fputs("\\n", fp);
            i++;
        } else if (c == '\t') {
            fputs("\\t", fp);
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(fp, "\\u%04x", (unsigned) c);
            i++;
        } else {
            size_t len = pcore_utf8_seq_len(p + i, n - i);
            if (len == 0) {
                fputs("\\ufffd", fp);
                i += pcore_utf8_bad_len(p + i, n - i);
            } else if (len == 2 && c == 0xc2 && p[i + 1] <= 0x9f) {
                /* C1 controls too, which some terminals obey, though JSON allows them raw. */
                fprintf(fp, "\\u%04x", (unsigned) p[i + 1]);
                i += 2;
            } else {
                fwrite(p + i, 1, len, fp);
                i += len;
            }
        }
    }
    fputc('"', fp);
}

/* Writes the separator and key that precede a value in the innermost container. */
static void json_member(struct json *j, const char *key)
{
    if (j->depth > 0) {
        if (j->has_member[j->depth - 1])
            fputc(',', j->fp);
        j->has_member[j->depth - 1] = 1;
        if (j->is_object[j->depth - 1]) {
            json_write_string(j->fp, key != NULL ? key : "", SIZE_MAX);
            fputc(':', j->fp);
        }
    }
}

/* Opens a container of the given kind as a member named key. */
static void json_open(struct json *j, const char *key, int object)
{
    json_member(j, key);
    fputc(object ? '{' : '[', j->fp);
    if (j->depth < JSON_MAX_DEPTH) {
        j->has_member[j->depth] = 0;
        j->is_object[j->depth] = (unsigned char) object;
    }
    j->depth++;
}

/* Opens an object member. */
void json_object_begin(struct json *j, const char *key)
{
    json_open(j, key, 1);
}

/* Opens an array member. */
void json_array_begin(struct json *j, const char *key)
{
    json_open(j, key, 0);
}

/* Closes the innermost container; a closed document gets its newline and is flushed. */
void json_end(struct json *j)
{
    if (j->depth == 0)
        return;
    j->depth--;
    fputc(j->depth < JSON_MAX_DEPTH && !j->is_object[j->depth] ? ']' : '}', j->fp);
    if (j->depth == 0) {
        fputc('\n', j->fp);
        fflush(j->fp);
    }
}

/* Writes a string member of at most max bytes. */
void json_strn(struct json *j, const char *key, const char *s, size_t max)
{
    json_member(j, key);
    json_write_string(j->fp, s, max);
}

/* Writes a NUL-terminated string member. */
void json_str(struct json *j, const char *key, const char *s)
{
    json_strn(j, key, s, SIZE_MAX);
}

/* Writes an unsigned integer member. */
void json_u64(struct json *j, const char *key, uint64_t v)
{
    json_member(j, key);
    fprintf(j->fp, "%" PRIu64, v);
}

/* Writes a signed integer member. */
void json_i64(struct json *j, const char *key, int64_t v)
{
    json_member(j, key);
    fprintf(j->fp, "%" PRId64, v);
}

/* Writes a boolean member. */
void json_bool(struct json *j, const char *key, int v)
{
    json_member(j, key);
    fputs(v ? "true" : "false", j->fp);
}

/* Writes a null member. */
void json_null(struct json *j, const char *key)
{
    json_member(j, key);
    fputs("null", j->fp);
}
