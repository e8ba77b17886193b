# tests/client/local.mk: tests of libpaged against a real pagedd.
# SPDX-License-Identifier: MIT

# The harness every client test shares: a real pagedd (tests/tap/pagedd.h) and what the
# tests ask of it.
check_LTLIBRARIES += tests/client/libharness.la
tests_client_libharness_la_SOURCES = tests/client/daemon_harness.c tests/client/daemon_harness.h
# Its arguments in device memory for a cuda daemon (harness_arg_in) through the CUDA runtime.
tests_client_libharness_la_CPPFLAGS = $(AM_CPPFLAGS)
if HAVE_CUDA
tests_client_libharness_la_CPPFLAGS += $(CUDA_CPPFLAGS)
endif

# The tests link the installed-to-be libpaged (so they see only its exported symbols); the
# spawner's clock comes from libpagedcore, after it.
CLIENT_TEST_LIBS = tests/client/libharness.la $(TAP_PAGEDD_LIBS) lib/libpaged.la \
	lib/core/libpagedcore.la $(TAP_LIBS)
if HAVE_CUDA
CLIENT_TEST_LIBS += $(CUDA_LIBS)
endif

check_PROGRAMS += tests/client/api-t tests/client/seq-t tests/client/workers-t tests/client/baddaemon-t
TESTS += tests/client/api-t tests/client/seq-t tests/client/workers-t tests/client/baddaemon-t \
	tests/client/symbols-t.sh
EXTRA_DIST += tests/client/symbols-t.sh

tests_client_api_t_SOURCES = tests/client/api-t.c
tests_client_api_t_LDADD = $(CLIENT_TEST_LIBS)
tests_client_seq_t_SOURCES = tests/client/seq-t.c
tests_client_seq_t_LDADD = $(CLIENT_TEST_LIBS)
# Against a fake daemon built from libpaged's own ring, memfd and socket helpers.
tests_client_baddaemon_t_SOURCES = tests/client/baddaemon-t.c
tests_client_baddaemon_t_LDADD = lib/libpaged.la lib/core/libpagedcore.la $(TAP_LIBS)
# The fp8 dtype helpers (kernels/cpu/dtype.h) turn its fp8 bytes into f32.
check_PROGRAMS += tests/client/fp8-t
TESTS += tests/client/fp8-t
tests_client_fp8_t_SOURCES = tests/client/fp8-t.c
tests_client_fp8_t_LDADD = $(CLIENT_TEST_LIBS)
tests_client_workers_t_SOURCES = tests/client/workers-t.c
# A tensor-parallel pool's two ranks in two processes, against an unsharded pool.
check_PROGRAMS += tests/client/shards-t
TESTS += tests/client/shards-t
tests_client_shards_t_SOURCES = tests/client/shards-t.c
tests_client_shards_t_LDADD = $(CLIENT_TEST_LIBS) lib/core/libpagedcore.la
# One pagedd serving two devices (two cpu devices, or two GPUs): clients, pools and
# requests on each, the refusals across them, a COPY between them.
check_PROGRAMS += tests/client/devices-t
TESTS += tests/client/devices-t
tests_client_devices_t_SOURCES = tests/client/devices-t.c
tests_client_devices_t_LDADD = $(CLIENT_TEST_LIBS) lib/core/libpagedcore.la
# The tensor-parallel ranks on two cpu devices (PAGEDD_CPU_DEVICES), each on its own.
TESTS += tests/client/shards-devices-t.sh
EXTRA_DIST += tests/client/shards-devices-t.sh
# COPY from one pool into another, and its refusals.
check_PROGRAMS += tests/client/copyto-t
TESTS += tests/client/copyto-t
tests_client_copyto_t_SOURCES = tests/client/copyto-t.c
tests_client_copyto_t_LDADD = $(CLIENT_TEST_LIBS) lib/core/libpagedcore.la
# The CPU reference kernels are the oracle (and need libpagedcore's dtype helpers).
tests_client_workers_t_LDADD = $(CLIENT_TEST_LIBS) kernels/libpagedcpu.la lib/core/libpagedcore.la

# libpaged(3)'s EXAMPLES program as a reader copies it from the page (man-example.sh), built
# against libpaged and run by example-t against a real pagedd.
check_PROGRAMS += tests/client/libpaged-example tests/client/example-t
TESTS += tests/client/example-t
EXTRA_DIST += tests/client/man-example.sh
CLEANFILES += tests/client/libpaged-example.c
nodist_tests_client_libpaged_example_SOURCES = tests/client/libpaged-example.c
tests_client_libpaged_example_LDADD = lib/libpaged.la
tests/client/libpaged-example.c: $(top_srcdir)/man/libpaged.3 $(top_srcdir)/tests/client/man-example.sh
	@$(MKDIR_P) tests/client
	$(AM_V_GEN)$(SHELL) $(top_srcdir)/tests/client/man-example.sh $(top_srcdir)/man/libpaged.3 >$@.tmp && mv $@.tmp $@
tests_client_example_t_SOURCES = tests/client/example-t.c
tests_client_example_t_LDADD = $(CLIENT_TEST_LIBS)
EXTRA_tests_client_example_t_DEPENDENCIES = daemon/pagedd tests/client/libpaged-example

# The lazily loaded CUDA driver, on its own: compiled into the test (its symbols are not
# exported), with the CUDA headers for the test's own export of device memory. Without a
# driver it checks that loading says PAGED_E_NOTSUP.
if HAVE_CUDA
check_PROGRAMS += tests/client/cuda-driver-t
TESTS += tests/client/cuda-driver-t
tests_client_cuda_driver_t_SOURCES = tests/client/cuda-driver-t.c lib/cuda_driver.c lib/cuda_driver.h
tests_client_cuda_driver_t_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_client_cuda_driver_t_LDADD = lib/core/libpagedcore.la $(TAP_LIBS)
endif

# The PTX of libpaged's dependency-word kernels, compiled by the toolkit's ptxas for every
# architecture it serves (and, as a control, refused where it uses what the target lacks).
if HAVE_CUDA
check_PROGRAMS += tests/client/words-ptx-t
TESTS += tests/client/words-ptx-t
tests_client_words_ptx_t_SOURCES = tests/client/words-ptx-t.c lib/cuda_words.c lib/cuda_driver.c \
	lib/cuda_driver.h lib/cuda_api.h
tests_client_words_ptx_t_CPPFLAGS = $(AM_CPPFLAGS) -DPAGED_PTXAS='"$(CUDA_HOME)/bin/ptxas"'
tests_client_words_ptx_t_LDADD = lib/core/libpagedcore.la $(TAP_LIBS)
endif

# The same two variants run on the device (each loaded as libpaged loads it): a wait holds its
# stream until a signal from another stream releases it; skips where there is no device.
if HAVE_CUDA
check_PROGRAMS += tests/client/cuda-words-t
TESTS += tests/client/cuda-words-t
tests_client_cuda_words_t_SOURCES = tests/client/cuda-words-t.c lib/cuda_words.c lib/cuda_driver.c \
	lib/cuda_driver.h lib/cuda_api.h
tests_client_cuda_words_t_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_client_cuda_words_t_LDADD = lib/core/libpagedcore.la $(TAP_LIBS)
endif
