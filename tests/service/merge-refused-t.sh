#!/bin/sh
# merge-refused-t.sh: merge-t with the backend refusing every launch of several requests, as the
# kernels may refuse one (PAGEDD_REFUSE_MERGED): the requests of each such launch then run one by
# one, and every output must still be right and every client's order kept.
# SPDX-License-Identifier: MIT
PAGEDD_REFUSE_MERGED=1
export PAGEDD_REFUSE_MERGED
exec "${top_builddir:-.}/tests/service/merge-t"
