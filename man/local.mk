# man/local.mk: what man/ builds.
# SPDX-License-Identifier: MIT
