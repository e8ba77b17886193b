# tests/daemon/local.mk: what tests/daemon/ builds.
# SPDX-License-Identifier: MIT

DAEMON_TEST_LIBS = daemon/libpagedengine.la lib/core/libpagedcore.la $(TAP_LIBS)

check_PROGRAMS += tests/daemon/alloc-t tests/daemon/alloc-pin-t tests/daemon/alloc-model-t tests/daemon/prefix-hash-t \
	tests/daemon/batch-t tests/daemon/fuse-t tests/daemon/knobs-t
TESTS += tests/daemon/alloc-t tests/daemon/alloc-pin-t tests/daemon/alloc-model-t tests/daemon/prefix-hash-t \
	tests/daemon/batch-t tests/daemon/fuse-t tests/daemon/knobs-t tests/daemon/knobs-refuse-t.sh
EXTRA_DIST += tests/daemon/knobs-refuse-t.sh
tests_daemon_alloc_t_SOURCES = tests/daemon/alloc-t.c
tests_daemon_alloc_t_LDADD = $(DAEMON_TEST_LIBS)
tests_daemon_alloc_pin_t_SOURCES = tests/daemon/alloc-pin-t.c
tests_daemon_alloc_pin_t_LDADD = $(DAEMON_TEST_LIBS)
tests_daemon_alloc_model_t_SOURCES = tests/daemon/alloc-model-t.c
tests_daemon_alloc_model_t_LDADD = $(DAEMON_TEST_LIBS)
tests_daemon_prefix_hash_t_SOURCES = tests/daemon/prefix-hash-t.c
tests_daemon_prefix_hash_t_LDADD = lib/core/libpagedcore.la $(TAP_LIBS)
tests_daemon_batch_t_SOURCES = tests/daemon/batch-t.c
tests_daemon_batch_t_LDADD = $(DAEMON_TEST_LIBS)
tests_daemon_fuse_t_SOURCES = tests/daemon/fuse-t.c
tests_daemon_fuse_t_LDADD = $(DAEMON_TEST_LIBS)
# A tensor-parallel pool's groups and publish rule (daemon/shard.c), against a model.
check_PROGRAMS += tests/daemon/shard-t
TESTS += tests/daemon/shard-t
tests_daemon_shard_t_SOURCES = tests/daemon/shard-t.c
tests_daemon_shard_t_LDADD = $(DAEMON_TEST_LIBS)

# The engine driven through its environment: it links the engine's library and not the
# front's (daemon/libpageddaemon.la), which proves the engine needs no server.
check_PROGRAMS += tests/daemon/engine-t
TESTS += tests/daemon/engine-t
tests_daemon_engine_t_SOURCES = tests/daemon/engine-t.c
tests_daemon_engine_t_LDADD = daemon/libpagedengine.la lib/core/libpagedcore.la kernels/libpagedcpu.la \
	$(TAP_LIBS)
if HAVE_CUDA
tests_daemon_engine_t_LDADD += kernels/libpagedcuda.la $(CUDA_LIBS)
endif

# The layers of daemon/: its include graph from the sources, its call graph from the
# objects of its two libraries (whose libtool objects make check names for it).
TESTS += tests/daemon/layers-t.sh
EXTRA_DIST += tests/daemon/layers-t.sh
AM_TESTS_ENVIRONMENT += \
	PD_LAYER_OBJECTS='$(daemon_libpagedengine_la_OBJECTS) $(daemon_libpageddaemon_la_OBJECTS)'; \
	export PD_LAYER_OBJECTS;
tests_daemon_knobs_t_SOURCES = tests/daemon/knobs-t.c
tests_daemon_knobs_t_LDADD = $(DAEMON_TEST_LIBS)

# The tiers below a pool, driven directly: the host tier's index and the file tier.
check_PROGRAMS += tests/daemon/tier-host-t tests/daemon/tier-file-t
TESTS += tests/daemon/tier-host-t tests/daemon/tier-file-t
tests_daemon_tier_host_t_SOURCES = tests/daemon/tier-host-t.c
tests_daemon_tier_host_t_LDADD = $(DAEMON_TEST_LIBS)
tests_daemon_tier_file_t_SOURCES = tests/daemon/tier-file-t.c
tests_daemon_tier_file_t_LDADD = $(DAEMON_TEST_LIBS)

# Timed-out dependency waits per uid, driven directly.
check_PROGRAMS += tests/daemon/strikes-t
TESTS += tests/daemon/strikes-t
tests_daemon_strikes_t_SOURCES = tests/daemon/strikes-t.c
tests_daemon_strikes_t_LDADD = $(DAEMON_TEST_LIBS)

# A pool's allocator and tiers (host, file) against a reference model, driven directly.
check_PROGRAMS += tests/daemon/tiers-model-t
TESTS += tests/daemon/tiers-model-t
tests_daemon_tiers_model_t_SOURCES = tests/daemon/tiers-model-t.c
tests_daemon_tiers_model_t_LDADD = $(DAEMON_TEST_LIBS)

# The per-uid tally of connections, driven directly.
check_PROGRAMS += tests/daemon/tally-t
TESTS += tests/daemon/tally-t
tests_daemon_tally_t_SOURCES = tests/daemon/tally-t.c
tests_daemon_tally_t_LDADD = daemon/libpageddaemon.la $(DAEMON_TEST_LIBS)

# paged.conf.example against pagedd --check-config: it parses uncommented, changes no
# default, and names every key.
TESTS += tests/daemon/conf-example-t.sh
EXTRA_DIST += tests/daemon/conf-example-t.sh
