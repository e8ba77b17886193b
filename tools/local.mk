# tools/local.mk: what tools/ builds.
# SPDX-License-Identifier: MIT
