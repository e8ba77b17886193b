# tests/service/local.mk: tests that start a real pagedd and drive it with client processes.
# SPDX-License-Identifier: MIT

# A raw client (lib/proto.h spoken directly, without libpaged) and the daemon spawner.
check_LTLIBRARIES += tests/service/libsvctest.la
tests_service_libsvctest_la_SOURCES = \
	tests/service/rawclient.h \
	tests/service/rawclient.c \
	tests/service/spawn.h \
	tests/service/spawn.c
SVC_TEST_LIBS = tests/service/libsvctest.la lib/libpagedcore.la kernels/libpagedcpu.la $(TAP_LIBS)

check_PROGRAMS += tests/service/badinput-t tests/service/reclaim-t tests/service/daemon-t \
	tests/service/control-t tests/service/spinhint-t
tests_service_badinput_t_LDADD = $(SVC_TEST_LIBS)
tests_service_spinhint_t_LDADD = tests/service/libsvctest.la lib/libpaged.la kernels/libpagedcpu.la \
	lib/libpagedcore.la $(TAP_LIBS)
tests_service_reclaim_t_LDADD = $(SVC_TEST_LIBS)
tests_service_daemon_t_LDADD = $(SVC_TEST_LIBS)
tests_service_control_t_LDADD = $(SVC_TEST_LIBS)
TESTS += tests/service/badinput-t tests/service/reclaim-t tests/service/daemon-t \
	tests/service/control-t tests/service/spinhint-t

# The tests exec the daemon: make sure it is built first.
tests/service/badinput-t.log tests/service/reclaim-t.log tests/service/daemon-t.log \
	tests/service/control-t.log tests/service/spinhint-t.log: daemon/pagedd

# Clients decoding layer by layer: on the cuda backend each layer's APPEND rides in its
# DECODE's launch (daemon/fuse.h).
check_PROGRAMS += tests/service/fused-t
TESTS += tests/service/fused-t
tests_service_fused_t_SOURCES = tests/service/fused-t.c tests/service/arena-io.c tests/service/arena-io.h \
	tests/service/childrec.c tests/service/childrec.h
tests_service_fused_t_LDADD = tests/service/libsvctest.la lib/libpaged.la kernels/libpagedcpu.la \
	lib/libpagedcore.la $(TAP_LIBS)
EXTRA_tests_service_fused_t_DEPENDENCIES = daemon/pagedd
tests_service_fused_t_CPPFLAGS = $(AM_CPPFLAGS)
if HAVE_CUDA
tests_service_fused_t_CPPFLAGS += $(CUDA_CPPFLAGS)
tests_service_fused_t_LDADD += $(CUDA_LIBS)
endif

# DECODEs of several client processes merged into one launch (libpaged clients; with
# PAGED_TEST_BACKEND=cuda the clients fill their device arenas through the CUDA runtime).
check_PROGRAMS += tests/service/merge-t
TESTS += tests/service/merge-t
tests_service_merge_t_SOURCES = tests/service/merge-t.c tests/service/arena-io.c tests/service/arena-io.h \
	tests/service/childrec.c tests/service/childrec.h
tests_service_merge_t_LDADD = tests/service/libsvctest.la lib/libpaged.la kernels/libpagedcpu.la \
	lib/libpagedcore.la $(TAP_LIBS)
EXTRA_tests_service_merge_t_DEPENDENCIES = daemon/pagedd
tests_service_merge_t_CPPFLAGS = $(AM_CPPFLAGS)
if HAVE_CUDA
tests_service_merge_t_CPPFLAGS += $(CUDA_CPPFLAGS)
tests_service_merge_t_LDADD += $(CUDA_LIBS)
endif

# Device-side dependencies (dep.wait_off, dep.signal_off): held work, pipelined layers, the
# watchdog, refusals; libpaged clients, on the GPU too with PAGED_TEST_BACKEND=cuda.
check_PROGRAMS += tests/service/dep-t
TESTS += tests/service/dep-t
tests_service_dep_t_SOURCES = tests/service/dep-t.c tests/service/arena-io.c tests/service/arena-io.h
tests_service_dep_t_LDADD = tests/service/libsvctest.la lib/libpaged.la kernels/libpagedcpu.la \
	lib/libpagedcore.la $(TAP_LIBS)
EXTRA_tests_service_dep_t_DEPENDENCIES = daemon/pagedd
tests_service_dep_t_CPPFLAGS = $(AM_CPPFLAGS)
if HAVE_CUDA
tests_service_dep_t_CPPFLAGS += $(CUDA_CPPFLAGS)
tests_service_dep_t_LDADD += $(CUDA_LIBS)
endif

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
	lib/libpaged.la kernels/libpagedcpu.la lib/libpagedcore.la $(TAP_LIBS) $(CUDA_LIBS)
# The test execs the daemon: build it first. (A .log rule here, conditional, would replace
# automake's own rule for that log.)
EXTRA_tests_service_cuda_service_t_DEPENDENCIES = daemon/pagedd
endif
