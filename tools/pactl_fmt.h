/* pactl_fmt.h: pactl's formatting helpers: sizes, durations, safe strings and the names of enums. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_PACTL_FMT_H
#define PAGED_TOOLS_PACTL_FMT_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/proto.h"
#include "paged.h"

/* Big enough for every formatted value below. */
#define FMT_BUF 64

/* Room for any name (PCORE_NAME_MAX bytes) escaped by fmt_safe, and a column's padding. */
#define FMT_NAME_BUF (4 * PCORE_NAME_MAX + 32)

/*
 * Copies at most max bytes of src (stopping at a NUL) into dst of size bytes, always
 * terminated, escaped for text as pcore_utf8_escape does unquoted: UTF-8 as it is, control
 * characters and bytes that are no UTF-8 as \xHH, a backslash as \\; so text the daemon or
 * a client chose cannot move the cursor of the terminal it is printed on or forge a line.
 * Returns dst.
 */
char *fmt_safe(char *dst, size_t size, const char *src, size_t max);

/* Writes src as fmt_safe does, padded with spaces to width terminal columns (counting
 * characters, two for East Asian wide ones, not bytes), for a table's left-aligned column.
 * Returns dst. */
char *fmt_column(char *dst, size_t size, const char *src, size_t max, unsigned width);

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

/* Formats a device's 16-byte UUID as nvidia-smi prints it, "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
 * (at least FMT_BUF bytes). Returns buf. */
char *fmt_uuid(char *buf, size_t size, const uint8_t uuid[16]);

/* Returns the name of a backend ("cpu", "cuda") or "unknown". */
const char *fmt_backend(uint32_t backend);

/* Returns the name of a dtype ("bf16") or "unknown". */
const char *fmt_dtype(uint32_t dtype);

/* Returns the name of an event type ("connect", "pool-create") or "unknown". */
const char *fmt_event(uint32_t event);

#endif
