#!/bin/sh
# fused-split-t.sh: fused-t with every pass that finds the device idle with two decoding clients
# or more split in two batches queued back to back (PAGEDD_SPLIT=2,1), and the cpu backend
# reporting each deferred batch done 2 ms after it ran (PAGEDD_CPU_DONE_US) so that its batches
# finish behind the engine's back as a GPU's do: each half's completions, ring order and
# outputs then go through the split path without a GPU.
# SPDX-License-Identifier: MIT
PAGEDD_CPU_DONE_US=2000
PAGEDD_SPLIT=2,1
export PAGEDD_CPU_DONE_US PAGEDD_SPLIT
exec "${top_builddir:-.}/tests/service/fused-t"
