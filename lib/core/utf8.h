/* utf8.h: UTF-8 for names: which bytes are well-formed, a name made well-formed, a name escaped for text. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_CORE_UTF8_H
#define PAGED_CORE_UTF8_H

#include <stddef.h>

/*
 * Returns the length of the well-formed UTF-8 sequence at s (n bytes available, n >= 1), or
 * 0 when the bytes there are not one (overlong forms, surrogates and code points past
 * U+10FFFF included), following the table of well-formed byte sequences in the Unicode
 * standard.
 */
size_t pcore_utf8_seq_len(const unsigned char *s, size_t n);

/*
 * Returns how many bytes at s (n available, n >= 1) one U+FFFD stands for where
 * pcore_utf8_seq_len says 0: the maximal subpart of a well-formed sequence there, or 1 byte
 * (Unicode's "substitution of maximal subparts", which Python's and the WHATWG's decoders
 * follow too).
 */
size_t pcore_utf8_bad_len(const unsigned char *s, size_t n);

/*
 * Copies at most n bytes of src (stopping at a NUL) into dst of size bytes (size >= 1) as
 * well-formed UTF-8: well-formed sequences byte for byte, each ill-formed subpart as U+FFFD;
 * what does not fit in size - 1 bytes is left off at a character boundary, never inside a
 * sequence. dst is NUL-terminated. Returns the length written.
 */
size_t pcore_utf8_clean(char *dst, size_t size, const char *src, size_t n);

/*
 * Escapes at most n bytes of src (stopping at a NUL) into dst of size bytes (size >= 1) for
 * a line of text: well-formed UTF-8 as it is, except control characters (C0, DEL and C1,
 * U+0080 to U+009F), which become \xHH per byte of their encoding, as does each byte that is
 * not UTF-8; a backslash becomes \\, and where quoted is set a double quote becomes \". So
 * the result has no control character, and a backslash in it always starts an escape. What
 * does not fit in size - 1 bytes is left off at a character or escape boundary. dst is
 * NUL-terminated. Returns the length written. Four bytes of output per byte of input always
 * suffice.
 */
size_t pcore_utf8_escape(char *dst, size_t size, const char *src, size_t n, int quoted);

#endif
