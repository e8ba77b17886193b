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
	tests/service/control-t
tests_service_badinput_t_LDADD = $(SVC_TEST_LIBS)
tests_service_reclaim_t_LDADD = $(SVC_TEST_LIBS)
tests_service_daemon_t_LDADD = $(SVC_TEST_LIBS)
tests_service_control_t_LDADD = $(SVC_TEST_LIBS)
TESTS += tests/service/badinput-t tests/service/reclaim-t tests/service/daemon-t \
	tests/service/control-t

# The tests exec the daemon: make sure it is built first.
tests/service/badinput-t.log tests/service/reclaim-t.log tests/service/daemon-t.log \
	tests/service/control-t.log: daemon/pagedd
