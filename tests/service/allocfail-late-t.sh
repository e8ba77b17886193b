#!/bin/sh
# allocfail-late-t.sh: allocfail-t with the cpu backend reporting each deferred batch done 2 ms
# after it ran (PAGEDD_CPU_DONE_US), as on a GPU: the allocations of withheld completions and
# deferred batches fail in turn too.
# SPDX-License-Identifier: MIT
PAGEDD_CPU_DONE_US=2000
export PAGEDD_CPU_DONE_US
exec "${top_builddir:-.}/tests/service/allocfail-t"
