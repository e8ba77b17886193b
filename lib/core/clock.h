/* clock.h: the one monotonic clock of libpaged, pagedd and the tools. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_CORE_CLOCK_H
#define PAGED_CORE_CLOCK_H

#include <stdint.h>

/* Returns CLOCK_MONOTONIC in nanoseconds: deadlines, timeouts and the daemon's timings all
 * read it, so that their values compare. */
uint64_t pcore_now_ns(void);

#endif
