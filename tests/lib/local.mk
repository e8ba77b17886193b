# tests/lib/local.mk: what tests/lib/ builds.
# SPDX-License-Identifier: MIT

# Rings, wake-ups, shared memory and the control socket (lib/core/ring.c, lib/core/wake.c, lib/core/shm.c,
# lib/core/sock.c).
check_PROGRAMS += tests/lib/ring-t tests/lib/ring-proc-t tests/lib/wake-t tests/lib/shm-t tests/lib/sock-t
TESTS += tests/lib/ring-t tests/lib/ring-proc-t tests/lib/wake-t tests/lib/shm-t tests/lib/sock-t
tests_lib_ring_t_SOURCES = tests/lib/ring-t.c
tests_lib_ring_t_LDADD = lib/core/libpagedcore.la $(TAP_LIBS)
tests_lib_ring_proc_t_SOURCES = tests/lib/ring-proc-t.c
tests_lib_ring_proc_t_LDADD = lib/core/libpagedcore.la $(TAP_LIBS)
tests_lib_wake_t_SOURCES = tests/lib/wake-t.c
tests_lib_wake_t_LDADD = lib/core/libpagedcore.la $(TAP_LIBS)
tests_lib_shm_t_SOURCES = tests/lib/shm-t.c
tests_lib_shm_t_LDADD = lib/core/libpagedcore.la $(TAP_LIBS)
tests_lib_sock_t_SOURCES = tests/lib/sock-t.c
tests_lib_sock_t_LDADD = lib/core/libpagedcore.la $(TAP_LIBS)
