/* tjson.c: a strict little JSON parser for the tests that check pactl's JSON output. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tests/tools/tjson.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/utf8.h"

#define TJ_MAX_DEPTH 64

struct parser {
    const unsigned char *s;
    size_t len, pos;
    char *err;
    size_t errsize;
    int failed;
};

/* Records the first failure with its offset; returns NULL for the caller to pass on. */
__attribute__((format(printf, 2, 3)))
static void *fail(struct parser *p, const char *fmt, ...)
{
    if (p->failed)
        return NULL;
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errsize, "%s at byte %zu", what, p->pos);
    p->failed = 1;
    return NULL;
}

/* Skips JSON white space. */
static void skip_ws(struct parser *p)
{
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t'
                               || p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

/* Returns a zeroed value of type t, or NULL (failure recorded) when out of memory. */
static struct tj *new_value(struct parser *p, enum tj_type t)
{
    struct tj *v = calloc(1, sizeof *v);
    if (v == NULL)
        return fail(p, "out of memory");
    v->type = t;
    return v;
}

/* Reads 4 hex digits; returns the value or -1. */
static long hex4(struct parser *p)
{
    long v = 0;
    if (p->len - p->pos < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p->s[p->pos++];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Appends code point cp as UTF-8 to out (room guaranteed by the caller). */
static size_t put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char) cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char) (0xc0 | cp >> 6);
        out[1] = (char) (0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char) (0xe0 | cp >> 12);
        out[1] = (char) (0x80 | (cp >> 6 & 0x3f));
        out[2] = (char) (0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char) (0xf0 | cp >> 18);
    out[1] = (char) (0x80 | (cp >> 12 & 0x3f));
    out[2] = (char) (0x80 | (cp >> 6 & 0x3f));
    out[3] = (char) (0x80 | (cp & 0x3f));
    return 4;
}

/* Parses a string literal at the opening quote; returns a malloc'd decoded copy or NULL. */
static char *parse_string(struct parser *p)
{
    /* Decoded text is never longer than its literal. */
    char *out = malloc(p->len - p->pos + 1);
    size_t n = 0;
    if (out == NULL)
        return fail(p, "out of memory");
    p->pos++;
    for (;;) {
        if (p->pos >= p->len) {
            free(out);
            return fail(p, "unterminated string");
        }
        unsigned char c = p->s[p->pos];
        if (c == '"') {
            p->pos++;
            out[n] = '\0';
            return out;
        }
        if (c < 0x20) {
            free(out);
            return fail(p, "raw control character 0x%02x in a string", c);
        }
        if (c != '\\') {
            size_t l = pcore_utf8_seq_len(p->s + p->pos, p->len - p->pos);
            if (l == 0) {
                free(out);
                return fail(p, "invalid UTF-8 in a string");
            }
            memcpy(out + n, p->s + p->pos, l);
            n += l;
            p->pos += l;
            continue;
        }
        p->pos++;
        if (p->pos >= p->len) {
            free(out);
            return fail(p, "unterminated escape");
        }
        c = p->s[p->pos++];
        const char *simple = strchr("\"\\/bfnrt", c);
        if (simple != NULL && c != '\0') {
            static const char map[] = "\"\\/\b\f\n\r\t";
            out[n++] = map[simple - "\"\\/bfnrt"];
            continue;
        }
        if (c != 'u') {
            free(out);
            return fail(p, "unknown escape \\%c", c);
        }
        long cp = hex4(p);
        if (cp >= 0xd800 && cp <= 0xdbff) {
            long lo = -1;
            if (p->len - p->pos >= 2 && p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u') {
                p->pos += 2;
                lo = hex4(p);
            }
            if (lo < 0xdc00 || lo > 0xdfff) {
                free(out);
                return fail(p, "unpaired surrogate");
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            free(out);
            return fail(p, "unpaired low surrogate");
        }
        if (cp <= 0) {
            free(out);
            return fail(p, cp == 0 ? "\\u0000 in a string" : "bad \\u escape");
        }
        n += put_utf8(out + n, (uint32_t) cp);
    }
}

/* Parses a number in JSON's grammar; returns the value or NULL. */
static struct tj *parse_number(struct parser *p)
{
    size_t start = p->pos;
    const unsigned char *s = p->s;
    if (p->pos < p->len && s[p->pos] == '-')
        p->pos++;
    if (p->pos < p->len && s[p->pos] == '0')
        p->pos++;
    else if (p->pos < p->len && s[p->pos] >= '1' && s[p->pos] <= '9')
        while (p->pos < p->len && s[p->pos] >= '0' && s[p->pos] <= '9')
            p->pos++;
    else
        return fail(p, "bad number");
    if (p->pos < p->len && s[p->pos] == '.') {
        p->pos++;
        if (p->pos >= p->len || s[p->pos] < '0' || s[p->pos] > '9')
            return fail(p, "bad fraction");
        while (p->pos < p->len && s[p->pos] >= '0' && s[p->pos] <= '9')
            p->pos++;
    }
    if (p->pos < p->len && (s[p->pos] == 'e' || s[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->len && (s[p->pos] == '+' || s[p->pos] == '-'))
            p->pos++;
        if (p->pos >= p->len || s[p->pos] < '0' || s[p->pos] > '9')
            return fail(p, "bad exponent");
        while (p->pos < p->len && s[p->pos] >= '0' && s[p->pos] <= '9')
            p->pos++;
    }
    char buf[64];
    size_t n = p->pos - start;
    if (n >= sizeof buf)
        return fail(p, "number too long for this parser");
    memcpy(buf, s + start, n);
    buf[n] = '\0';
    struct tj *v = new_value(p, TJ_NUMBER);
    if (v != NULL)
        v->number = strtod(buf, NULL);
    return v;
}

static struct tj *parse_value(struct parser *p, int depth);

/* Adds item (and key, for objects) to container v; returns 0 or -1. */
static int add_member(struct parser *p, struct tj *v, char *key, struct tj *item)
{
    struct tj **items = realloc(v->items, (v->count + 1) * sizeof *items);
    if (items == NULL)
        return fail(p, "out of memory"), -1;
    v->items = items;
    if (v->type == TJ_OBJECT) {
        char **keys = realloc(v->keys, (v->count + 1) * sizeof *keys);
        if (keys == NULL)
            return fail(p, "out of memory"), -1;
        v->keys = keys;
        v->keys[v->count] = key;
    }
    v->items[v->count++] = item;
    return 0;
}

/* Parses an array or object at its opening bracket; returns it or NULL. */
static struct tj *parse_container(struct parser *p, int depth, int object)
{
    struct tj *v = new_value(p, object ? TJ_OBJECT : TJ_ARRAY);
    if (v == NULL)
        return NULL;
    char close = object ? '}' : ']';
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return v;
    }
    for (;;) {
        char *key = NULL;
        skip_ws(p);
        if (object) {
            if (p->pos >= p->len || p->s[p->pos] != '"') {
                tj_free(v);
                return fail(p, "expected a key");
            }
            key = parse_string(p);
            if (key == NULL || tj_get(v, key) != NULL) {
                if (key != NULL)
                    fail(p, "duplicate key '%s'", key);
                free(key);
                tj_free(v);
                return NULL;
            }
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                free(key);
                tj_free(v);
                return fail(p, "expected ':'");
            }
            p->pos++;
        }
        struct tj *item = parse_value(p, depth + 1);
        if (item == NULL || add_member(p, v, key, item) < 0) {
            free(key);
            tj_free(item);
            tj_free(v);
            return NULL;
        }
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            return v;
        }
        tj_free(v);
        return fail(p, "expected ',' or '%c'", close);
    }
}

/* Matches a literal word; returns 1 if it is there (and consumes it). */
static int word(struct parser *p, const char *w)
{
    size_t n = strlen(w);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, w, n) != 0)
        return 0;
    p->pos += n;
    return 1;
}

/* Parses any value; returns it or NULL. */
static struct tj *parse_value(struct parser *p, int depth)
{
    struct tj *v;
    if (depth > TJ_MAX_DEPTH)
        return fail(p, "nested too deeply");
    skip_ws(p);
    if (p->pos >= p->len)
        return fail(p, "expected a value");
    switch (p->s[p->pos]) {
    case '{':
        return parse_container(p, depth, 1);
    case '[':
        return parse_container(p, depth, 0);
    case '"': {
        char *s = parse_string(p);
        if (s == NULL)
            return NULL;
        v = new_value(p, TJ_STRING);
        if (v == NULL)
            free(s);
        else
            v->string = s;
        return v;
    }
    default:
        if (word(p, "true") || word(p, "false")) {
            v = new_value(p, TJ_BOOL);
            if (v != NULL)
                v->boolean = p->s[p->pos - 4] == 't'; /* "true" is the 4-letter one */
            return v;
        }
        if (word(p, "null"))
            return new_value(p, TJ_NULL);
        return parse_number(p);
    }
}

/* Parses a whole document; returns it or NULL with err set. */
struct tj *tj_parse(const char *text, size_t len, char *err, size_t errsize)
{
    struct parser p = { .s = (const unsigned char *) text, .len = len, .err = err,
                        .errsize = errsize };
    if (errsize > 0)
        err[0] = '\0';
    struct tj *v = parse_value(&p, 0);
    if (v == NULL)
        return NULL;
    skip_ws(&p);
    if (p.pos != p.len) {
        tj_free(v);
        return fail(&p, "text after the value");
    }
    return v;
}

/* Frees a value and everything in it. */
void tj_free(struct tj *v)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < v->count; i++) {
        tj_free(v->items[i]);
        if (v->keys != NULL)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    free(v);
}

/* Looks a key up in an object. */
const struct tj *tj_get(const struct tj *v, const char *key)
{
    if (v == NULL || v->type != TJ_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->count; i++)
        if (strcmp(v->keys[i], key) == 0)
            return v->items[i];
    return NULL;
}

/* Returns an array element. */
const struct tj *tj_at(const struct tj *v, size_t i)
{
    if (v == NULL || v->type != TJ_ARRAY || i >= v->count)
        return NULL;
    return v->items[i];
}

/* Returns a number member or -1. */
double tj_num(const struct tj *v, const char *key)
{
    const struct tj *m = tj_get(v, key);
    return m != NULL && m->type == TJ_NUMBER ? m->number : -1;
}

/* Returns a string member or NULL. */
const char *tj_str(const struct tj *v, const char *key)
{
    const struct tj *m = tj_get(v, key);
    return m != NULL && m->type == TJ_STRING ? m->string : NULL;
}
