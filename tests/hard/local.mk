# tests/hard/local.mk: the hardening tests: crash torture, load, daemon restart, access control,
# prefix scopes of tenants, and the check-long and check-valgrind targets.
# SPDX-License-Identifier: MIT

# What the hardening tests share. They link the service tests' raw client, the daemon
# spawner, libpaged for real clients, and the CPU reference kernels as the oracle.
check_LTLIBRARIES += tests/hard/libhardtest.la
tests_hard_libhardtest_la_SOURCES = tests/hard/hard.h tests/hard/hard.c
HARD_CLIENT_LIBS = tests/hard/libhardtest.la tests/service/libsvctest.la $(TAP_PAGEDD_LIBS) \
	lib/libpaged.la kernels/libpagedcpu.la lib/core/libpagedcore.la $(TAP_LIBS)

HARD_TESTS = tests/hard/torture-t tests/hard/load-t tests/hard/restart-t tests/hard/access-t tests/hard/fair-t \
	tests/hard/tenants-t tests/hard/sealed-t tests/hard/stall-t
check_PROGRAMS += $(HARD_TESTS)
TESTS += $(HARD_TESTS)
tests_hard_torture_t_LDADD = $(HARD_CLIENT_LIBS)
tests_hard_load_t_LDADD = $(HARD_CLIENT_LIBS)
tests_hard_restart_t_LDADD = $(HARD_CLIENT_LIBS)
tests_hard_access_t_LDADD = $(HARD_CLIENT_LIBS)
# fair-t: per-uid shares of connections, with pactl run as a second uid (the pactl tests' helpers).
tests_hard_fair_t_SOURCES = tests/hard/fair-t.c $(PACTL_TEST_SOURCES)
tests_hard_fair_t_LDADD = $(HARD_CLIENT_LIBS)
tests_hard_tenants_t_LDADD = $(HARD_CLIENT_LIBS)
# sealed-t: a sealed pool against a second uid; with PAGED_TEST_BACKEND=cuda on the GPU, its
# clients filling device arenas as the service tests' do.
tests_hard_sealed_t_SOURCES = tests/hard/sealed-t.c $(SVC_CLIENT_SOURCES)
tests_hard_sealed_t_LDADD = $(HARD_CLIENT_LIBS)
tests_hard_sealed_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
if HAVE_CUDA
tests_hard_sealed_t_LDADD += $(CUDA_LIBS)
endif
# stall-t: a request held on a word never written against a bystander, pactl and SIGTERM, and
# the strikes that refuse a user's waits; with PAGED_TEST_BACKEND=cuda on the GPU.
tests_hard_stall_t_SOURCES = tests/hard/stall-t.c $(SVC_CLIENT_SOURCES) tests/service/childrec.c \
	tests/service/childrec.h $(PACTL_TEST_SOURCES)
tests_hard_stall_t_LDADD = $(HARD_CLIENT_LIBS)
tests_hard_stall_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
if HAVE_CUDA
tests_hard_stall_t_LDADD += $(CUDA_LIBS)
endif

# The tests exec the daemon (and fair-t pactl): make sure they are built first.
tests/hard/torture-t.log tests/hard/load-t.log tests/hard/restart-t.log tests/hard/access-t.log \
	tests/hard/fair-t.log tests/hard/tenants-t.log tests/hard/sealed-t.log tests/hard/stall-t.log: daemon/pagedd \
	tools/pactl

# make check-long: the full-length runs (1000 kills, 64 clients x 10 000 requests).
check-long: all
	PAGED_TEST_LONG=1 $(MAKE) $(AM_MAKEFLAGS) check TESTS="$(HARD_TESTS)"

# make check-valgrind: the service tests and the hardening tests that stop their daemon with
# SIGTERM (restart, access, load, tenants), with pagedd under valgrind memcheck (tests/tap/pagedd.c
# prefixes $PAGED_DAEMON_WRAPPER). Every daemon's report lands in tests/hard/valgrind/; an
# error or a definite or indirect leak in any of them fails the target.
HARD_VALGRIND_TESTS = tests/service/badinput-t tests/service/reclaim-t tests/service/daemon-t \
	tests/service/control-t tests/service/dep-t tests/service/merge-t tests/service/fused-t \
	tests/service/merge-late-t.sh tests/service/merge-refused-t.sh tests/service/shutdown-late-t.sh tests/hard/restart-t tests/hard/access-t tests/hard/load-t
HARD_VALGRIND_TESTS += tests/hard/tenants-t tests/hard/sealed-t
HARD_VALGRIND = valgrind --tool=memcheck --error-exitcode=99 --leak-check=full \
	--errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
	--log-file=$(abs_top_builddir)/tests/hard/valgrind/pagedd.%p.log
check-valgrind: all
	@command -v valgrind >/dev/null || { echo "check-valgrind: valgrind is not installed"; exit 1; }
	rm -rf tests/hard/valgrind && $(MKDIR_P) tests/hard/valgrind
	PAGED_DAEMON_WRAPPER="$(HARD_VALGRIND)" $(MAKE) $(AM_MAKEFLAGS) check TESTS="$(HARD_VALGRIND_TESTS)"
	$(SHELL) $(srcdir)/tests/hard/valgrind-summary.sh tests/hard/valgrind
EXTRA_DIST += tests/hard/valgrind-summary.sh
.PHONY: check-long check-valgrind
clean-local: clean-hard-valgrind
clean-hard-valgrind:
	-rm -rf tests/hard/valgrind
.PHONY: clean-hard-valgrind
