# tests/local.mk: the TAP library every C test links.
# SPDX-License-Identifier: MIT
check_LTLIBRARIES += tests/tap/libtap.la
tests_tap_libtap_la_SOURCES = tests/tap/basic.c tests/tap/basic.h
TAP_LIBS = tests/tap/libtap.la -lm
