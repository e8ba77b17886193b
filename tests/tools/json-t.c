/* json-t.c: pactl's JSON writer: escaping, UTF-8 repair and structure, read back by a strict parser. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tap/basic.h"
#include "tests/tools/tjson.h"
#include "tools/pactl_json.h"

/* A document being written into memory. */
struct doc {
    char *text;
    size_t len;
    FILE *fp;
    struct json j;
};

/* Starts writing a document into memory. */
static void doc_open(struct doc *d)
{
    d->text = NULL;
    d->len = 0;
    d->fp = open_memstream(&d->text, &d->len);
    if (d->fp == NULL)
        sysbail("open_memstream");
    json_init(&d->j, d->fp);
}

/* Finishes the document and parses it; returns the value or NULL (with a diagnostic). */
static struct tj *doc_parse(struct doc *d)
{
    char err[200];
    fclose(d->fp);
    struct tj *v = tj_parse(d->text, d->len, err, sizeof err);
    if (v == NULL)
        diag("parse failed: %s in: %s", err, d->text);
    return v;
}

/* Writes one string member through the writer and returns what the parser reads back
 * (malloc'd), or NULL if the document did not parse. */
static char *round_trip(const char *s, size_t max)
{
    struct doc d;
    doc_open(&d);
    json_object_begin(&d.j, NULL);
    json_strn(&d.j, "s", s, max);
    json_end(&d.j);
    struct tj *v = doc_parse(&d);
    char *out = v != NULL && tj_str(v, "s") != NULL ? bstrdup(tj_str(v, "s")) : NULL;
    tj_free(v);
    free(d.text);
    return out;
}

/* Checks the structure: nesting, commas, every kind of value. */
static void test_structure(void)
{
    struct doc d;
    doc_open(&d);
    json_object_begin(&d.j, NULL);
    json_u64(&d.j, "big", UINT64_MAX);
    json_i64(&d.j, "neg", -42);
    json_bool(&d.j, "yes", 1);
    json_bool(&d.j, "no", 0);
    json_null(&d.j, "nothing");
    json_array_begin(&d.j, "empty");
    json_end(&d.j);
    json_array_begin(&d.j, "list");
    for (int i = 0; i < 3; i++) {
        json_object_begin(&d.j, NULL);
        json_u64(&d.j, "i", (uint64_t) i);
        json_array_begin(&d.j, "inner");
        json_u64(&d.j, NULL, 7);
        json_str(&d.j, NULL, "x");
        json_end(&d.j);
        json_end(&d.j);
    }
    json_end(&d.j);
    json_object_begin(&d.j, "obj");
    json_end(&d.j);
    json_end(&d.j);
    ok(d.len > 0, "writer produced output");
    struct tj *v = doc_parse(&d);
    ok(v != NULL && v->type == TJ_OBJECT && v->count == 8, "nested document parses with 8 members");
    ok(d.text[d.len - 1] == '\n' && strchr(d.text, '\n') == d.text + d.len - 1,
       "document is exactly one line");
    is_double(18446744073709551615.0, tj_num(v, "big"), 1e4, "UINT64_MAX written in full");
    is_double(-42, tj_get(v, "neg") ? tj_get(v, "neg")->number : 0, 0, "negative number");
    ok(tj_get(v, "yes") && tj_get(v, "yes")->boolean == 1 && tj_get(v, "no")->boolean == 0,
       "booleans");
    ok(tj_get(v, "nothing") && tj_get(v, "nothing")->type == TJ_NULL, "null");
    ok(tj_get(v, "empty") && tj_get(v, "empty")->count == 0, "empty array");
    const struct tj *list = tj_get(v, "list");
    ok(list != NULL && list->count == 3 && tj_num(tj_at(list, 2), "i") == 2
           && tj_get(tj_at(list, 1), "inner")->count == 2,
       "array of objects with inner arrays");
    ok(tj_get(v, "obj") && tj_get(v, "obj")->type == TJ_OBJECT, "empty object");
    tj_free(v);
    free(d.text);
}

/* Checks that awkward names survive escaping exactly, and broken UTF-8 becomes U+FFFD. */
static void test_strings(void)
{
    static const struct {
        const char *in, *want, *what;
    } cases[] = {
        { "plain-name_1.0", "plain-name_1.0", "plain name" },
        { "quote\"back\\slash/", "quote\"back\\slash/", "quote and backslash" },
        { "nl\ntab\tcr\r", "nl\ntab\tcr\r", "newline, tab, carriage return" },
        { "ctl\x01\x1f\x7f", "ctl\x01\x1f\x7f", "control characters and DEL" },
        { "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
          "valid 2-, 3- and 4-byte UTF-8" },
        { "bad\xff", "bad\xef\xbf\xbd", "byte 0xff" },
        { "cut\xe2\x82", "cut\xef\xbf\xbd", "truncated 3-byte sequence: one U+FFFD for its maximal subpart" },
        { "cut\xe2\x82-\xf0\x9f\x98", "cut\xef\xbf\xbd-\xef\xbf\xbd", "two truncated sequences, one U+FFFD each" },
        { "c1\xc2\x85\xc2\x9b\xc2\xa0", "c1\xc2\x85\xc2\x9b\xc2\xa0", "C1 controls (escaped) and U+00A0" },
        { "over\xc0\xaf", "over\xef\xbf\xbd\xef\xbf\xbd", "overlong encoding" },
        { "sur\xed\xa0\x80", "sur\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", "encoded surrogate" },
        { "big\xf4\x90\x80\x80", "big\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
          "code point past U+10FFFF" },
        { "", "", "empty string" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = round_trip(cases[i].in, SIZE_MAX);
        is_string(cases[i].want, got, "string round trip: %s", cases[i].what);
        free(got);
    }
    /* A daemon's fixed-size name field need not hold a NUL: max bounds the read. */
    char field[8];
    memcpy(field, "ABCDEFGH", 8);
    char *got = round_trip(field, sizeof field);
    is_string("ABCDEFGH", got, "unterminated fixed-size field read only up to its size");
    free(got);
    /* A C1 CSI some terminals obey, and ESC: escaped in the text itself, not only valid JSON. */
    struct doc d;
    doc_open(&d);
    json_write_string(d.fp, "\xc2\x9b" "2J\x1b[0m", SIZE_MAX);
    fclose(d.fp);
    is_string("\"\\u009b2J\\u001b[0m\"", d.text, "C1 and C0 controls written as \\u escapes");
    free(d.text);
}

/* Checks that random bytes always give valid JSON, and valid text comes back unchanged. */
static void test_random(void)
{
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    int parsed = 0, same = 0;
    const int rounds = 500;
    for (int r = 0; r < rounds; r++) {
        char s[40];
        size_t n = 1 + tap_rng_below(&rng, sizeof s - 1);
        int printable = r % 2 == 0;
        for (size_t i = 0; i + 1 < n; i++)
            s[i] = printable ? (char) (0x20 + tap_rng_below(&rng, 0x5f))
                             : (char) (1 + tap_rng_below(&rng, 255));
        s[n - 1] = '\0';
        char *got = round_trip(s, SIZE_MAX);
        parsed += got != NULL;
        same += printable && got != NULL && strcmp(got, s) == 0;
        free(got);
    }
    is_int(rounds, parsed, "%d random byte strings all give valid JSON", rounds);
    is_int(rounds / 2, same, "printable ASCII strings round-trip unchanged");
}

/* Checks that the parser the other tests trust refuses what is not JSON. */
static void test_parser_strict(void)
{
    static const char *const bad[] = {
        "{\"a\":1,}", "[1,]", "[1 2]", "{\"a\" 1}", "{\"a\":1}{", "\"raw\ttab\"", "\"\\x\"",
        "01", "1.", "-", "tru", "{\"a\":1,\"a\":2}", "\"\\ud800\"", "[", "", "\"\xff\"", "'s'",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[120];
        struct tj *v = tj_parse(bad[i], strlen(bad[i]), err, sizeof err);
        ok(v == NULL, "parser refuses invalid JSON #%zu (%s)", i, v == NULL ? err : "accepted");
        tj_free(v);
    }
    char err[120];
    const char *good = " {\"a\":[1,-2.5e3,true,null,\"\\u00e9\\ud83d\\ude00\"]} ";
    struct tj *v = tj_parse(good, strlen(good), err, sizeof err);
    ok(v != NULL && tj_get(v, "a") && tj_get(v, "a")->count == 5
           && strcmp(tj_at(tj_get(v, "a"), 4)->string, "\xc3\xa9\xf0\x9f\x98\x80") == 0,
       "parser accepts valid JSON and decodes escapes and surrogate pairs");
    tj_free(v);
}

/* Runs the checks. */
int main(void)
{
    plan_lazy();
    test_structure();
    test_strings();
    test_random();
    test_parser_strict();
    return 0;
}
