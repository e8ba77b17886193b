# tests/tools/local.mk: tests of pactl, paged-demo and the man pages.
# SPDX-License-Identifier: MIT

# pactl's JSON writer against a strict parser; needs no daemon.
check_PROGRAMS += tests/tools/json-t
TESTS += tests/tools/json-t
tests_tools_json_t_SOURCES = \
	tests/tools/json-t.c \
	tests/tools/tjson.h \
	tests/tools/tjson.c \
	tools/utf8.h \
	tools/utf8.c \
	tools/pactl_json.h \
	tools/pactl_json.c
tests_tools_json_t_LDADD = $(TAP_LIBS)

# pactl against a real pagedd, with pactl-holder as the clients that hold blocks.
check_PROGRAMS += tests/tools/pactl-t tests/tools/pactl-holder
TESTS += tests/tools/pactl-t
tests_tools_pactl_t_SOURCES = \
	tests/tools/pactl-t.c \
	tests/tools/tjson.h \
	tests/tools/tjson.c \
	tools/utf8.h \
	tools/utf8.c
tests_tools_pactl_t_LDADD = $(TAP_PAGEDD_LIBS) lib/core/libpagedcore.la $(TAP_LIBS)
tests_tools_pactl_holder_SOURCES = tests/tools/pactl-holder.c
tests_tools_pactl_holder_LDADD = lib/libpaged.la

# paged-demo, small, with the build tree's daemon and pactl; and every man page linted.
TESTS += tests/tools/demo-t.sh tests/tools/man-t.sh
EXTRA_DIST += tests/tools/demo-t.sh tests/tools/man-t.sh

# The documents and the sources' comments: no path outside the repository, no missing file,
# no narrative of the development (docs-check.sh is the checker, docs-t.sh its TAP test).
TESTS += tests/tools/docs-t.sh
EXTRA_DIST += tests/tools/docs-t.sh tests/tools/docs-check.sh

# The C and CUDA sources follow the written formatting rule (HACKING.md, Conventions):
# style-check.awk is the checker, style-t.sh its TAP test.
TESTS += tests/tools/style-t.sh
EXTRA_DIST += tests/tools/style-t.sh tests/tools/style-check.awk

# A packager's install, from a private build of the distribution with --program-prefix;
# layout-t checks the configured tree's paths.h and systemd directories.
TESTS += tests/tools/install-t.sh tests/tools/layout-t.sh
EXTRA_DIST += tests/tools/install-t.sh tests/tools/layout-t.sh
