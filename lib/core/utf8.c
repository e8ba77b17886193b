/* utf8.c: UTF-8 for names: which bytes are well-formed, a name made well-formed, a name escaped for text. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "lib/core/utf8.h"

#include <stdio.h>
#include <string.h>

/* U+FFFD REPLACEMENT CHARACTER, encoded. */
static const char replacement[] = "\xef\xbf\xbd";

/*
 * Matches the bytes at s (n available, n >= 1) against the table of well-formed sequences:
 * stores in *len the length the first byte announces (0 for a byte that starts none).
 * Returns how many bytes, from the first, fit a well-formed sequence's prefix (0 when the
 * first does not).
 */
static size_t utf8_prefix(const unsigned char *s, size_t n, size_t *len)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xbf; /* the bounds of the second byte */
    *len = 0;
    if (c < 0x80) {
        *len = 1;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf)
        *len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        *len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        *len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (n < 2 || s[1] < lo || s[1] > hi)
        return 1;
    size_t i = 2;
    while (i < *len && i < n && s[i] >= 0x80 && s[i] <= 0xbf)
        i++;
    return i;
}

/* Measures the well-formed UTF-8 sequence at s; see utf8.h. */
size_t pcore_utf8_seq_len(const unsigned char *s, size_t n)
{
    size_t len;
    size_t fit = utf8_prefix(s, n, &len);
    return fit == len ? len : 0;
}

/* Measures the ill-formed subpart at s; see utf8.h. */
size_t pcore_utf8_bad_len(const unsigned char *s, size_t n)
{
    size_t len;
    size_t fit = utf8_prefix(s, n, &len);
    return fit > 0 ? fit : 1;
}

/* Copies src as well-formed UTF-8; see utf8.h. */
size_t pcore_utf8_clean(char *dst, size_t size, const char *src, size_t n)
{
    const unsigned char *p = (const unsigned char *) src;
    size_t len = strnlen(src, n), out = 0;
    for (size_t i = 0; i < len;) {
        size_t seq = pcore_utf8_seq_len(p + i, len - i);
        const char *piece = seq > 0 ? src + i : replacement;
        size_t piece_len = seq > 0 ? seq : sizeof replacement - 1;
        if (out + piece_len > size - 1)
            break;
        memcpy(dst + out, piece, piece_len);
        out += piece_len;
        i += seq > 0 ? seq : pcore_utf8_bad_len(p + i, len - i);
    }
    dst[out] = '\0';
    return out;
}

/* Says whether the well-formed sequence at s (len bytes) is a control character: C0, DEL or
 * C1 (U+0080 to U+009F, encoded 0xc2 0x80 to 0xc2 0x9f). Returns 1 or 0. */
static int utf8_is_control(const unsigned char *s, size_t len)
{
    if (len == 1)
        return s[0] < 0x20 || s[0] == 0x7f;
    return len == 2 && s[0] == 0xc2 && s[1] <= 0x9f;
}

/* Escapes src for a line of text; see utf8.h. */
size_t pcore_utf8_escape(char *dst, size_t size, const char *src, size_t n, int quoted)
{
    const unsigned char *p = (const unsigned char *) src;
    size_t len = strnlen(src, n), out = 0;
    for (size_t i = 0; i < len;) {
        char piece[16];
        size_t seq = pcore_utf8_seq_len(p + i, len - i), piece_len = 0;
        size_t take = seq > 0 ? seq : pcore_utf8_bad_len(p + i, len - i);
        if (seq > 0 && !utf8_is_control(p + i, seq)) {
            int esc = p[i] == '\\' || (quoted && p[i] == '"');
            if (esc)
                piece[piece_len++] = '\\';
            memcpy(piece + piece_len, src + i, seq);
            piece_len += seq;
        } else {
            for (size_t k = 0; k < take; k++)
                piece_len += (size_t) snprintf(piece + piece_len, sizeof piece - piece_len, "\\x%02x",
                                               (unsigned) p[i + k]);
        }
        if (out + piece_len > size - 1)
            break;
        memcpy(dst + out, piece, piece_len);
        out += piece_len;
        i += take;
    }
    dst[out] = '\0';
    return out;
}
