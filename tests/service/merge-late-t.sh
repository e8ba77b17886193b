#!/bin/sh
# merge-late-t.sh: merge-t with the cpu backend reporting each deferred batch done 2 ms after it ran
# (PAGEDD_CPU_DONE_US), as a GPU's batches finish only after they are queued: the engine's
# withheld completions, the room rule and the gathering of a retired batch's clients then run
# without a GPU.
# SPDX-License-Identifier: MIT
PAGEDD_CPU_DONE_US=2000
export PAGEDD_CPU_DONE_US
exec "${top_builddir:-.}/tests/service/merge-t"
