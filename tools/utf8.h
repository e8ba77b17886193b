/* utf8.h: which bytes are well-formed UTF-8, for pactl's JSON writer and the tests' JSON reader. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_UTF8_H
#define PAGED_TOOLS_UTF8_H

#include <stddef.h>

/*
 * Returns the length of the well-formed UTF-8 sequence at s (n bytes available, n >= 1), or
 * 0 when the bytes there are not one (overlong forms, surrogates and code points past
 * U+10FFFF included), following the table of well-formed byte sequences in the Unicode
 * standard.
 */
size_t utf8_seq_len(const unsigned char *s, size_t n);

#endif
