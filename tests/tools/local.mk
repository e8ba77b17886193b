# tests/tools/local.mk: tests of pactl, paged-demo and the man pages.
# SPDX-License-Identifier: MIT

# pactl's JSON writer against a strict parser; needs no daemon.
check_PROGRAMS += tests/tools/json-t
TESTS += tests/tools/json-t
tests_tools_json_t_SOURCES = \
	tests/tools/json-t.c \
	tests/tools/tjson.h \
	tests/tools/tjson.c \
	tools/pactl_json.h \
	tools/pactl_json.c
tests_tools_json_t_LDADD = lib/core/libpagedcore.la $(TAP_LIBS)

# pactl against a real pagedd, with pactl-holder as the clients that hold blocks.
check_PROGRAMS += tests/tools/pactl-t tests/tools/pactl-holder
TESTS += tests/tools/pactl-t
# What the pactl tests share: runs of pactl and of holders, their output, subscriber lines.
PACTL_TEST_SOURCES = \
	tests/tools/tpactl.h \
	tests/tools/tpactl.c \
	tests/tools/tjson.h \
	tests/tools/tjson.c
PACTL_TEST_LIBS = $(TAP_PAGEDD_LIBS) lib/core/libpagedcore.la $(TAP_LIBS)
tests_tools_pactl_t_SOURCES = tests/tools/pactl-t.c $(PACTL_TEST_SOURCES)
tests_tools_pactl_t_LDADD = $(PACTL_TEST_LIBS)

# Client names as given, from libpaged and raw HELLOs: pactl's JSON, table and subscribe
# lines, and the daemon's log.
check_PROGRAMS += tests/tools/pactl-names-t
TESTS += tests/tools/pactl-names-t
tests_tools_pactl_names_t_SOURCES = tests/tools/pactl-names-t.c $(PACTL_TEST_SOURCES)
tests_tools_pactl_names_t_LDADD = tests/service/libsvctest.la $(PACTL_TEST_LIBS)

# pactl's usage messages; pactl destroy and who may use it; subscribe's lines, the
# inspection connections it hides, and names escaped (from a fake daemon).
check_PROGRAMS += tests/tools/pactl-usage-t tests/tools/pactl-destroy-t tests/tools/pactl-events-t
TESTS += tests/tools/pactl-usage-t tests/tools/pactl-destroy-t tests/tools/pactl-events-t
tests_tools_pactl_usage_t_SOURCES = tests/tools/pactl-usage-t.c $(PACTL_TEST_SOURCES)
tests_tools_pactl_usage_t_LDADD = $(PACTL_TEST_LIBS)
tests_tools_pactl_destroy_t_SOURCES = tests/tools/pactl-destroy-t.c $(PACTL_TEST_SOURCES)
tests_tools_pactl_destroy_t_LDADD = $(PACTL_TEST_LIBS)
tests_tools_pactl_events_t_SOURCES = tests/tools/pactl-events-t.c $(PACTL_TEST_SOURCES)
tests_tools_pactl_events_t_LDADD = $(PACTL_TEST_LIBS)
# pactl devices, status's device count and the pools' devices, against a daemon of two cpu
# devices (PAGEDD_CPU_DEVICES).
check_PROGRAMS += tests/tools/pactl-devices-t
TESTS += tests/tools/pactl-devices-t
tests_tools_pactl_devices_t_SOURCES = tests/tools/pactl-devices-t.c $(PACTL_TEST_SOURCES)
tests_tools_pactl_devices_t_LDADD = $(PACTL_TEST_LIBS)
# pactl pin, unpin, evict of a prefix and ttl, on a prompt a libpaged client published.
check_PROGRAMS += tests/tools/pactl-prefix-t
TESTS += tests/tools/pactl-prefix-t
tests_tools_pactl_prefix_t_SOURCES = tests/tools/pactl-prefix-t.c $(PACTL_TEST_SOURCES)
tests_tools_pactl_prefix_t_LDADD = lib/libpaged.la $(PACTL_TEST_LIBS)
tests/tools/pactl-t.log tests/tools/pactl-usage-t.log tests/tools/pactl-destroy-t.log \
	tests/tools/pactl-events-t.log tests/tools/pactl-names-t.log \
	tests/tools/pactl-prefix-t.log tests/tools/pactl-devices-t.log: daemon/pagedd$(EXEEXT) tools/pactl$(EXEEXT)
tests_tools_pactl_holder_SOURCES = tests/tools/pactl-holder.c
tests_tools_pactl_holder_LDADD = lib/libpaged.la

# paged-demo, small, with the build tree's daemon and pactl; and every man page linted.
TESTS += tests/tools/demo-t.sh tests/tools/man-t.sh
EXTRA_DIST += tests/tools/demo-t.sh tests/tools/man-t.sh

# The documents and the sources' comments: no path outside the repository, no missing file,
# no narrative of the development (docs-check.sh is the checker, docs-t.sh its TAP test).
TESTS += tests/tools/docs-t.sh
EXTRA_DIST += tests/tools/docs-t.sh tests/tools/docs-check.sh

# Every error code paged.h documents is used, or reserved in paged.h, paged_strerror and its page.
TESTS += tests/tools/errors-t.sh
EXTRA_DIST += tests/tools/errors-t.sh

# The C and CUDA sources follow the written formatting rule (HACKING.md, Conventions):
# style-check.awk is the checker, style-t.sh its TAP test.
TESTS += tests/tools/style-t.sh
EXTRA_DIST += tests/tools/style-t.sh tests/tools/style-check.awk

# The harness's driver (build-aux/tap-per-test.sh): one terminal line per test, every assertion
# kept in the .log and .trs.
TESTS += tests/tools/tap-per-test-t.sh
EXTRA_DIST += tests/tools/tap-per-test-t.sh

# A packager's install, from a private build of the distribution with --program-prefix;
# layout-t checks the configured tree's paths.h and systemd directories.
TESTS += tests/tools/install-t.sh tests/tools/layout-t.sh
EXTRA_DIST += tests/tools/install-t.sh tests/tools/layout-t.sh
