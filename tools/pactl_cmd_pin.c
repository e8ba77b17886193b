/* pactl_cmd_pin.c: pactl pin and unpin: keep a cached prefix from eviction, or let it go again. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/pactl_prefix.h"
#include "tools/pactl.h"

/* Runs "pin POOL HASH..."; returns the exit status. */
static int pin_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    return pactl_prefix_run(ctx, "pin", PCORE_PREFIX_PIN, "pinned", argv[0], argc - 1, argv + 1);
}

/* Runs "unpin POOL [HASH...]"; returns the exit status. */
static int unpin_exec(struct pactl_ctx *ctx, int argc, char **argv)
{
    return pactl_prefix_run(ctx, "unpin", PCORE_PREFIX_UNPIN, "unpinned", argv[0], argc - 1, argv + 1);
}

const struct pactl_cmd pactl_cmd_pin = {
    .name = "pin",
    .options = "",
    .args = "pool hash...",
    .needs = "a pool name and the prefix's block hashes",
    .summary = "keep a cached prefix (its block hashes, in order) from eviction",
    .min_args = 2,
    .max_args = 1 + (int) PCORE_PREFIX_MAX_HASHES,
    .exec = pin_exec,
};

const struct pactl_cmd pactl_cmd_unpin = {
    .name = "unpin",
    .options = "",
    .args = "pool [hash...]",
    .needs = "a pool name",
    .summary = "let a pinned prefix (or, without hashes, every pin you may drop) be evicted again",
    .min_args = 1,
    .max_args = 1 + (int) PCORE_PREFIX_MAX_HASHES,
    .exec = unpin_exec,
};
