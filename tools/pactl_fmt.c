/* pactl_fmt.c: pactl's formatting helpers: sizes, durations, safe strings and the names of enums. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/pactl_fmt.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/core/proto.h"

/* Copies src into dst with control characters replaced; returns dst. */
char *fmt_safe(char *dst, size_t size, const char *src, size_t max)
{
    size_t n = 0;
    if (size == 0)
        return dst;
    for (; src != NULL && n < max && n + 1 < size && src[n] != '\0'; n++) {
        unsigned char c = (unsigned char) src[n];
        dst[n] = c < 0x20 || c == 0x7f ? '?' : (char) c;
    }
    dst[n] = '\0';
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
    default: return "unknown";
    }
}
