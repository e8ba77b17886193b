# tests/daemon/local.mk: what tests/daemon/ builds.
# SPDX-License-Identifier: MIT

DAEMON_TEST_LIBS = daemon/libpageddaemon.la lib/core/libpagedcore.la $(TAP_LIBS)

check_PROGRAMS += tests/daemon/alloc-t tests/daemon/alloc-model-t tests/daemon/prefix-hash-t \
	tests/daemon/batch-t tests/daemon/fuse-t tests/daemon/knobs-t
TESTS += tests/daemon/alloc-t tests/daemon/alloc-model-t tests/daemon/prefix-hash-t \
	tests/daemon/batch-t tests/daemon/fuse-t tests/daemon/knobs-t tests/daemon/knobs-refuse-t.sh
EXTRA_DIST += tests/daemon/knobs-refuse-t.sh
tests_daemon_alloc_t_SOURCES = tests/daemon/alloc-t.c
tests_daemon_alloc_t_LDADD = $(DAEMON_TEST_LIBS)
tests_daemon_alloc_model_t_SOURCES = tests/daemon/alloc-model-t.c
tests_daemon_alloc_model_t_LDADD = $(DAEMON_TEST_LIBS)
tests_daemon_prefix_hash_t_SOURCES = tests/daemon/prefix-hash-t.c
tests_daemon_prefix_hash_t_LDADD = lib/core/libpagedcore.la $(TAP_LIBS)
tests_daemon_batch_t_SOURCES = tests/daemon/batch-t.c
tests_daemon_batch_t_LDADD = $(DAEMON_TEST_LIBS)
tests_daemon_fuse_t_SOURCES = tests/daemon/fuse-t.c
tests_daemon_fuse_t_LDADD = $(DAEMON_TEST_LIBS)
tests_daemon_knobs_t_SOURCES = tests/daemon/knobs-t.c
tests_daemon_knobs_t_LDADD = $(DAEMON_TEST_LIBS)
