# tests/service/local.mk: tests that start a real pagedd and drive it with client processes.
# SPDX-License-Identifier: MIT

# A raw client (lib/core/proto.h spoken directly, without libpaged) and what the tests do to
# a running daemon (tests/service/proc.h); the daemon itself starts through tests/tap/pagedd.h.
check_LTLIBRARIES += tests/service/libsvctest.la
tests_service_libsvctest_la_SOURCES = \
	tests/service/rawclient.h \
	tests/service/rawclient.c \
	tests/service/proc.h \
	tests/service/proc.c
SVC_TEST_LIBS = tests/service/libsvctest.la $(TAP_PAGEDD_LIBS) lib/core/libpagedcore.la \
	kernels/libpagedcpu.la $(TAP_LIBS)

check_PROGRAMS += tests/service/badinput-t tests/service/reclaim-t tests/service/daemon-t \
	tests/service/control-t tests/service/spinhint-t tests/service/fdlimit-t tests/service/memlimit-t \
	tests/service/replyfail-t tests/service/rewrite-t tests/service/stats-t
tests_service_badinput_t_LDADD = $(SVC_TEST_LIBS)
tests_service_replyfail_t_LDADD = $(SVC_TEST_LIBS)
tests_service_spinhint_t_LDADD = tests/service/libsvctest.la $(TAP_PAGEDD_LIBS) lib/libpaged.la \
	kernels/libpagedcpu.la lib/core/libpagedcore.la $(TAP_LIBS)
# A libpaged client that rewrites an entry it submitted, against a frozen daemon.
tests_service_rewrite_t_LDADD = tests/service/libsvctest.la $(TAP_PAGEDD_LIBS) lib/libpaged.la \
	lib/core/libpagedcore.la $(TAP_LIBS)
# paged_stats between requests of known ops.
tests_service_stats_t_LDADD = $(TAP_PAGEDD_LIBS) lib/libpaged.la lib/core/libpagedcore.la $(TAP_LIBS)
tests_service_reclaim_t_LDADD = $(SVC_TEST_LIBS)
tests_service_daemon_t_LDADD = $(SVC_TEST_LIBS)
tests_service_control_t_LDADD = $(SVC_TEST_LIBS)
tests_service_fdlimit_t_LDADD = $(SVC_TEST_LIBS)
tests_service_memlimit_t_LDADD = $(SVC_TEST_LIBS)
TESTS += tests/service/badinput-t tests/service/reclaim-t tests/service/daemon-t \
	tests/service/control-t tests/service/spinhint-t tests/service/fdlimit-t tests/service/memlimit-t \
	tests/service/replyfail-t tests/service/rewrite-t tests/service/stats-t

# The tests exec the daemon: make sure it is built first.
tests/service/badinput-t.log tests/service/reclaim-t.log tests/service/daemon-t.log \
	tests/service/control-t.log tests/service/spinhint-t.log tests/service/fdlimit-t.log \
	tests/service/memlimit-t.log tests/service/replyfail-t.log tests/service/rewrite-t.log \
	tests/service/stats-t.log: daemon/pagedd

# The libpaged client-process tests below share their helpers, libraries and flags; with
# PAGED_TEST_BACKEND=cuda their clients fill device arenas through the CUDA runtime.
SVC_CLIENT_SOURCES = tests/service/arena-io.c tests/service/arena-io.h
SVC_CLIENT_LIBS = tests/service/libsvctest.la $(TAP_PAGEDD_LIBS) lib/libpaged.la \
	kernels/libpagedcpu.la lib/core/libpagedcore.la $(TAP_LIBS)
SVC_CLIENT_CPPFLAGS = $(AM_CPPFLAGS)
if HAVE_CUDA
SVC_CLIENT_CPPFLAGS += $(CUDA_CPPFLAGS)
SVC_CLIENT_LIBS += $(CUDA_LIBS)
endif
check_PROGRAMS += tests/service/fused-t tests/service/merge-t tests/service/dep-t tests/service/shutdown-t \
	tests/service/allocfail-t tests/service/prefixctl-t tests/service/tiers-t tests/service/blockevents-t \
	tests/service/tiers-shutdown-t
TESTS += tests/service/fused-t tests/service/merge-t tests/service/dep-t tests/service/shutdown-t \
	tests/service/allocfail-t tests/service/prefixctl-t tests/service/tiers-t tests/service/blockevents-t \
	tests/service/tiers-shutdown-t

# The same two with the cpu backend's deferred batches done only 2 ms after they ran, as on a
# GPU (PAGEDD_CPU_DONE_US): burst E's ring order then depends on the engine withholding the
# completions of a client whose batch is still "running".
TESTS += tests/service/merge-late-t.sh tests/service/fused-late-t.sh tests/service/fused-split-t.sh tests/service/shutdown-late-t.sh \
	tests/service/allocfail-late-t.sh
EXTRA_DIST += tests/service/merge-late-t.sh tests/service/fused-late-t.sh tests/service/fused-split-t.sh tests/service/shutdown-late-t.sh \
	tests/service/allocfail-late-t.sh

# pagedd -b cuda where no driver is installed: says so and names -b cpu (skipped where one is).
TESTS += tests/service/cuda-nodriver-t.sh
EXTRA_DIST += tests/service/cuda-nodriver-t.sh
tests/service/cuda-nodriver-t.log: daemon/pagedd

# merge-t and fused-t with every launch of several requests refused (PAGEDD_REFUSE_MERGED): the
# backends' fallback that runs such a launch's requests one by one.
TESTS += tests/service/merge-refused-t.sh tests/service/fused-refused-t.sh
EXTRA_DIST += tests/service/merge-refused-t.sh tests/service/fused-refused-t.sh

# Clients decoding layer by layer: on the cuda backend each layer's APPEND rides in its
# DECODE's launch (daemon/engine/fuse.h).
tests_service_fused_t_SOURCES = tests/service/fused-t.c $(SVC_CLIENT_SOURCES) \
	tests/service/childrec.c tests/service/childrec.h tests/service/launchlog.c tests/service/launchlog.h
tests_service_fused_t_LDADD = $(SVC_CLIENT_LIBS)
tests_service_fused_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
EXTRA_tests_service_fused_t_DEPENDENCIES = daemon/pagedd

# SIGTERM with DECODEs queued and running: every request completes once, pagedd exits 0.
tests_service_shutdown_t_SOURCES = tests/service/shutdown-t.c $(SVC_CLIENT_SOURCES) \
	tests/service/childrec.c tests/service/childrec.h
tests_service_shutdown_t_LDADD = $(SVC_CLIENT_LIBS)
tests_service_shutdown_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
EXTRA_tests_service_shutdown_t_DEPENDENCIES = daemon/pagedd

# Each heap allocation pagedd makes for its clients fails in turn (PAGEDD_FAIL_ALLOC_AT).
tests_service_allocfail_t_SOURCES = tests/service/allocfail-t.c $(SVC_CLIENT_SOURCES)
tests_service_allocfail_t_LDADD = $(SVC_CLIENT_LIBS)
tests_service_allocfail_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
EXTRA_tests_service_allocfail_t_DEPENDENCIES = daemon/pagedd
tests_service_tiers_t_SOURCES = tests/service/tiers-t.c tests/service/kvprompt.h tests/service/kvprompt.c
tests_service_tiers_t_LDADD = tests/client/libharness.la $(SVC_CLIENT_LIBS)
tests_service_tiers_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
EXTRA_tests_service_tiers_t_DEPENDENCIES = daemon/pagedd
tests_service_tiers_shutdown_t_SOURCES = tests/service/tiers-shutdown-t.c tests/service/kvprompt.h \
	tests/service/kvprompt.c
tests_service_tiers_shutdown_t_LDADD = tests/client/libharness.la $(SVC_CLIENT_LIBS)
tests_service_tiers_shutdown_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
EXTRA_tests_service_tiers_shutdown_t_DEPENDENCIES = daemon/pagedd
tests_service_prefixctl_t_SOURCES = tests/service/prefixctl-t.c
tests_service_prefixctl_t_LDADD = $(SVC_CLIENT_LIBS)
tests_service_prefixctl_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
EXTRA_tests_service_prefixctl_t_DEPENDENCIES = daemon/pagedd
# Block events (paged_events, SUBSCRIBE's blocks flag): what subscribers of each scope see, and
# pactl subscribe --blocks.
tests_service_blockevents_t_SOURCES = tests/service/blockevents-t.c
tests_service_blockevents_t_LDADD = $(SVC_CLIENT_LIBS)
tests_service_blockevents_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
EXTRA_tests_service_blockevents_t_DEPENDENCIES = daemon/pagedd tools/pactl

# DECODEs of several client processes merged into one launch.
tests_service_merge_t_SOURCES = tests/service/merge-t.c $(SVC_CLIENT_SOURCES) \
	tests/service/childrec.c tests/service/childrec.h tests/service/launchlog.c tests/service/launchlog.h
tests_service_merge_t_LDADD = $(SVC_CLIENT_LIBS)
tests_service_merge_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
EXTRA_tests_service_merge_t_DEPENDENCIES = daemon/pagedd

# Device-side dependencies (dep.wait_off, dep.signal_off): held work, pipelined layers, the
# watchdog, refusals.
tests_service_dep_t_SOURCES = tests/service/dep-t.c $(SVC_CLIENT_SOURCES)
tests_service_dep_t_LDADD = $(SVC_CLIENT_LIBS)
tests_service_dep_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
EXTRA_tests_service_dep_t_DEPENDENCIES = daemon/pagedd

# The cuda backend with several client processes (libpaged, mapped pools, kernels checked
# against the CPU reference); skips where there is no CUDA device. It compiles libpaged's
# driver loader in for its read-only attacher, which speaks the raw protocol.
EXTRA_DIST += tests/service/cuda-service-t.c
if HAVE_CUDA
check_PROGRAMS += tests/service/cuda-service-t
TESTS += tests/service/cuda-service-t
tests_service_cuda_service_t_SOURCES = tests/service/cuda-service-t.c lib/cuda_driver.c \
	lib/cuda_driver.h
tests_service_cuda_service_t_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_service_cuda_service_t_LDADD = tests/kernels/libgpuutil.la tests/service/libsvctest.la \
	$(TAP_PAGEDD_LIBS) lib/libpaged.la kernels/libpagedcpu.la lib/core/libpagedcore.la $(TAP_LIBS) $(CUDA_LIBS)
# The test execs the daemon: build it first. (A .log rule here, conditional, would replace
# automake's own rule for that log.)
EXTRA_tests_service_cuda_service_t_DEPENDENCIES = daemon/pagedd

# A device fault planted in the daemon (PAGEDD_FAULT_AFTER): requests fail with
# PAGED_E_DEVICE, the daemon serves on and exits cleanly; skips where there is no device.
check_PROGRAMS += tests/service/cuda-fault-t
TESTS += tests/service/cuda-fault-t
tests_service_cuda_fault_t_SOURCES = tests/service/cuda-fault-t.c $(SVC_CLIENT_SOURCES) \
	tests/service/childrec.c tests/service/childrec.h
tests_service_cuda_fault_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
tests_service_cuda_fault_t_LDADD = $(SVC_CLIENT_LIBS)
EXTRA_tests_service_cuda_fault_t_DEPENDENCIES = daemon/pagedd

# A metadata upload and a batch's event record refused as CUDA refuses a call without losing
# the context (PAGEDD_FAIL_UPLOAD_AT, PAGEDD_FAIL_EVENT_AT): the daemon drains its stream, one
# request fails, the rest are right; skips where there is no device.
check_PROGRAMS += tests/service/cuda-drain-t
TESTS += tests/service/cuda-drain-t
tests_service_cuda_drain_t_SOURCES = tests/service/cuda-drain-t.c $(SVC_CLIENT_SOURCES) \
	tests/service/childrec.c tests/service/childrec.h
tests_service_cuda_drain_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
tests_service_cuda_drain_t_LDADD = $(SVC_CLIENT_LIBS)
EXTRA_tests_service_cuda_drain_t_DEPENDENCIES = daemon/pagedd

# Workers chaining their streams and the daemon's DECODEs with paged_stream_wait and
# paged_stream_signal, by kernels and by stream operations; skips where there is no device.
check_PROGRAMS += tests/service/cuda-stream-t
TESTS += tests/service/cuda-stream-t
tests_service_cuda_stream_t_SOURCES = tests/service/cuda-stream-t.c $(SVC_CLIENT_SOURCES) \
	tests/service/childrec.c tests/service/childrec.h
tests_service_cuda_stream_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
tests_service_cuda_stream_t_LDADD = $(SVC_CLIENT_LIBS)
EXTRA_tests_service_cuda_stream_t_DEPENDENCIES = daemon/pagedd

# A data arena asked for while a departed client's is still being freed (PAGEDD_REAP_DELAY_MS)
# waits for that memory; skips where there is no device. It fills the GPU's memory, so it is
# built here but not run by make check, whose other tests use the GPU at the same time:
# tools/gpu-run.sh runs it alone.
check_PROGRAMS += tests/service/cuda-reap-t
tests_service_cuda_reap_t_SOURCES = tests/service/cuda-reap-t.c $(SVC_CLIENT_SOURCES) \
	tests/service/childrec.c tests/service/childrec.h
tests_service_cuda_reap_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
tests_service_cuda_reap_t_LDADD = $(SVC_CLIENT_LIBS)
EXTRA_tests_service_cuda_reap_t_DEPENDENCIES = daemon/pagedd
endif
EXTRA_DIST += tests/service/cuda-fault-t.c tests/service/cuda-drain-t.c tests/service/cuda-reap-t.c
