#!/bin/sh
# shutdown-late-t.sh: shutdown-t with the cpu backend reporting each deferred batch done 2 ms after it
# ran (PAGEDD_CPU_DONE_US), so that SIGTERM meets completions the engine still withholds, as on a GPU.
# SPDX-License-Identifier: MIT
PAGEDD_CPU_DONE_US=2000
export PAGEDD_CPU_DONE_US
exec "${top_builddir:-.}/tests/service/shutdown-t"
