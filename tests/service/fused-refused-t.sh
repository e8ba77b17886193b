#!/bin/sh
# fused-refused-t.sh: fused-t with the backend refusing every launch of several requests, as the
# kernels may refuse one (PAGEDD_REFUSE_MERGED): phase 3's merged DECODE launch, which on cuda
# carries its metadata in its parameters and its APPENDs with it, then runs request by request.
# SPDX-License-Identifier: MIT
PAGEDD_REFUSE_MERGED=1
export PAGEDD_REFUSE_MERGED
exec "${top_builddir:-.}/tests/service/fused-t"
