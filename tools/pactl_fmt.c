/* pactl_fmt.c: pactl's formatting helpers: sizes, durations, safe strings and the names of enums. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/pactl_fmt.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/core/proto.h"
#include "lib/core/utf8.h"

/* Copies src into dst escaped for text; returns dst. */
char *fmt_safe(char *dst, size_t size, const char *src, size_t max)
{
    if (size > 0)
        pcore_utf8_escape(dst, size, src != NULL ? src : "", max, 0);
    return dst;
}

/* Returns the terminal columns of the well-formed code point cp: 2 for the East Asian wide
 * and fullwidth blocks and the emoji pictographs, 1 for the rest (combining marks included,
 * which is an approximation: names seldom carry them). */
static unsigned fmt_cp_width(uint32_t cp)
{
    static const uint32_t wide[][2] = {
        { 0x1100, 0x115f },   { 0x2e80, 0x303e },   { 0x3041, 0x33ff },   { 0x3400, 0x4dbf },
        { 0x4e00, 0x9fff },   { 0xa000, 0xa4cf },   { 0xac00, 0xd7a3 },   { 0xf900, 0xfaff },
        { 0xfe30, 0xfe4f },   { 0xff00, 0xff60 },   { 0xffe0, 0xffe6 },   { 0x1f300, 0x1f64f },
        { 0x1f900, 0x1f9ff }, { 0x20000, 0x2fffd }, { 0x30000, 0x3fffd },
    };
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
        if (cp >= wide[i][0] && cp <= wide[i][1])
            return 2;
    return 1;
}

/* Returns the terminal columns of s, well-formed UTF-8 (as fmt_safe writes it). */
static size_t fmt_width(const char *s)
{
    const unsigned char *p = (const unsigned char *) s;
    size_t n = strlen(s), cols = 0;
    for (size_t i = 0; i < n;) {
        size_t len = pcore_utf8_seq_len(p + i, n - i);
        if (len == 0)
            len = 1;
        uint32_t cp = len == 1 ? p[i] : p[i] & (0xffu >> (len + 1));
        for (size_t k = 1; k < len; k++)
            cp = cp << 6 | (p[i + k] & 0x3fu);
        cols += fmt_cp_width(cp);
        i += len;
    }
    return cols;
}

/* Escapes src as fmt_safe does and pads it with spaces to width columns; returns dst. */
char *fmt_column(char *dst, size_t size, const char *src, size_t max, unsigned width)
{
    fmt_safe(dst, size, src, max);
    size_t len = strlen(dst);
    for (size_t cols = fmt_width(dst); cols < width && len + 1 < size; cols++)
        dst[len++] = ' ';
    dst[len] = '\0';
    return dst;
}

/* Formats bytes with the largest binary unit that keeps the number at least 1; returns buf. */
char *fmt_bytes(char *buf, size_t size, uint64_t bytes)
{
    static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    if (bytes < 1024) {
        snprintf(buf, size, "%" PRIu64 " B", bytes);
        return buf;
    }
    double v = (double) bytes / 1024.0;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, size, "%.1f %s", v, units[u]);
    return buf;
}

/* Formats a duration in its two largest units; returns buf. */
char *fmt_uptime(char *buf, size_t size, uint64_t ns)
{
    uint64_t s = ns / 1000000000u;
    uint64_t d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60;
    if (d > 0)
        snprintf(buf, size, "%" PRIu64 "d %" PRIu64 "h", d, h);
    else if (h > 0)
        snprintf(buf, size, "%" PRIu64 "h %" PRIu64 "m", h, m);
    else if (m > 0)
        snprintf(buf, size, "%" PRIu64 "m %" PRIu64 "s", m, s % 60);
    else
        snprintf(buf, size, "%" PRIu64 "s", s);
    return buf;
}

/* Formats a latency with three significant digits where the unit allows; returns buf. */
char *fmt_latency(char *buf, size_t size, uint64_t ns)
{
    if (ns < 1000)
        snprintf(buf, size, "%" PRIu64 "ns", ns);
    else if (ns < 1000000)
        snprintf(buf, size, "%.1fus", (double) ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, size, "%.2fms", (double) ns / 1e6);
    else
        snprintf(buf, size, "%.2fs", (double) ns / 1e9);
    return buf;
}

/* Formats a wall-clock time in local time with milliseconds; returns buf. */
char *fmt_time(char *buf, size_t size, uint64_t ns)
{
    time_t t = (time_t) (ns / 1000000000u);
    struct tm tm;
    char day[32];
    if (localtime_r(&t, &tm) == NULL || strftime(day, sizeof day, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(day, sizeof day, "%" PRIu64, ns / 1000000000u);
    snprintf(buf, size, "%s.%03u", day, (unsigned) (ns / 1000000u % 1000u));
    return buf;
}

/* Formats a hash as 32 hex digits; returns buf. */
char *fmt_hash(char *buf, size_t size, const paged_hash *h)
{
    snprintf(buf, size, "%016" PRIx64 "%016" PRIx64, h->hi, h->lo);
    return buf;
}

/* Formats a UUID in nvidia-smi's form; returns buf. */
char *fmt_uuid(char *buf, size_t size, const uint8_t uuid[16])
{
    const uint8_t *u = uuid;
    snprintf(buf, size, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
             u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    return buf;
}

/* Returns a backend's name. */
const char *fmt_backend(uint32_t backend)
{
    switch (backend) {
    case PAGED_BACKEND_CPU: return "cpu";
    case PAGED_BACKEND_CUDA: return "cuda";
    default: return "unknown";
    }
}

/* Returns a dtype's name. */
const char *fmt_dtype(uint32_t dtype)
{
    const char *name = paged_dtype_name((paged_dtype) dtype);
    return name != NULL ? name : "unknown";
}

/* Returns an event type's name. */
const char *fmt_event(uint32_t event)
{
    switch (event) {
    case PCORE_EVENT_CONNECT: return "connect";
    case PCORE_EVENT_DISCONNECT: return "disconnect";
    case PCORE_EVENT_POOL_CREATE: return "pool-create";
    case PCORE_EVENT_POOL_DESTROY: return "pool-destroy";
    case PCORE_EVENT_EVICT: return "evict";
    case PCORE_EVENT_ATTACH: return "attach";
    case PCORE_EVENT_DETACH: return "detach";
    case PCORE_EVENT_LOST: return "lost";
    case PCORE_EVENT_EXPIRE: return "expire";
    case PCORE_EVENT_BLOCKS: return "blocks";
    default: return "unknown";
    }
}
