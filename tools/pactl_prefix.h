/* pactl_prefix.h: what pactl's pin, unpin and evict of a prefix share: its hashes and the PREFIX request. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_PACTL_PREFIX_H
#define PAGED_TOOLS_PACTL_PREFIX_H

#include <stdint.h>

#include "tools/pactl.h"

/*
 * For command cmd: checks the pool name and the hashes (argv[0..argc), each 32 hex digits as
 * `pactl list blocks` shows them, in the prefix's order; none only for unpin: every pin the
 * caller may drop), connects, sends PREFIX op and
 * prints the answer ("pinned a prefix of 4 blocks of pool 'p'", or its JSON with key
 * "blocks"). Returns the exit status.
 */
int pactl_prefix_run(struct pactl_ctx *ctx, const char *cmd, uint32_t op, const char *done, const char *pool,
                     int argc, char **argv);

#endif
