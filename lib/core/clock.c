/* clock.c: the one monotonic clock of libpaged, pagedd and the tools. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "lib/core/clock.h"

#include <time.h>

/* Reads CLOCK_MONOTONIC; returns it in nanoseconds. */
uint64_t pcore_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}
