# tests/tools/local.mk: tests of pactl, paged-demo and the man pages.
# SPDX-License-Identifier: MIT
