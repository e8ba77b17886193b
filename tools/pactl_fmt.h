/* pactl_fmt.h: pactl's formatting helpers: sizes, durations, safe strings and the names of enums. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_PACTL_FMT_H
#define PAGED_TOOLS_PACTL_FMT_H

#include <stddef.h>
#include <stdint.h>

#include "paged.h"

/* Big enough for every formatted value below. */
#define FMT_BUF 64

/*
 * Copies at most max bytes of src (stopping at a NUL) into dst of size bytes, always
 * terminated, with every control character replaced by '?', so text the daemon or a
 * client chose cannot move the cursor of the terminal it is printed on. Returns dst.
 */
char *fmt_safe(char *dst, size_t size, const char *src, size_t max);

/* Formats a byte count with a binary unit ("512 B", "1.5 KiB", "64.0 MiB"). Returns buf. */
char *fmt_bytes(char *buf, size_t size, uint64_t bytes);

/* Formats a long duration from nanoseconds ("3d 4h", "2h 5m", "4m 10s", "12s"). Returns buf. */
char *fmt_uptime(char *buf, size_t size, uint64_t ns);

/* Formats a short duration from nanoseconds ("850ns", "35.2us", "1.25ms", "2.00s"). Returns buf. */
char *fmt_latency(char *buf, size_t size, uint64_t ns);

/* Formats a CLOCK_REALTIME time in nanoseconds as local "YYYY-MM-DD HH:MM:SS.mmm". Returns buf. */
char *fmt_time(char *buf, size_t size, uint64_t ns);

/* Formats a 128-bit hash as 32 hex digits, high half first. Returns buf. */
char *fmt_hash(char *buf, size_t size, const paged_hash *h);

/* Returns the name of a backend ("cpu", "cuda") or "unknown". */
const char *fmt_backend(uint32_t backend);

/* Returns the name of a dtype ("bf16") or "unknown". */
const char *fmt_dtype(uint32_t dtype);

/* Returns the name of an event type ("connect", "pool-create") or "unknown". */
const char *fmt_event(uint32_t event);

#endif
