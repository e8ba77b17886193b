# tests/local.mk: the TAP library every C test links, the pagedd spawner, tests/README.
# SPDX-License-Identifier: MIT
check_LTLIBRARIES += tests/tap/libtap.la
tests_tap_libtap_la_SOURCES = tests/tap/basic.c tests/tap/basic.h
TAP_LIBS = tests/tap/libtap.la -lm
# The shell tests' TAP results (sourced).
EXTRA_DIST += tests/tap/tap.sh

# The pagedd spawner (tests/tap/pagedd.h) over the tools' one (tools/common/spawn.h): a test
# that starts a daemon links these ahead of lib/core/libpagedcore.la and $(TAP_LIBS).
check_LTLIBRARIES += tests/tap/libtappagedd.la
tests_tap_libtappagedd_la_SOURCES = tests/tap/pagedd.c tests/tap/pagedd.h
TAP_PAGEDD_LIBS = tests/tap/libtappagedd.la tools/common/libspawn.la

# Which folder tests what, and how to write a test.
EXTRA_DIST += tests/README
