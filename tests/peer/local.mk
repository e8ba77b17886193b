# tests/peer/local.mk: two real pagedd moving published prefixes over UCX TCP on loopback.
# SPDX-License-Identifier: MIT

# Built everywhere: without UCX it says 1..0 # SKIP built without UCX.
check_PROGRAMS += tests/peer/peers-t
TESTS += tests/peer/peers-t
tests_peer_peers_t_SOURCES = tests/peer/peers-t.c
tests_peer_peers_t_LDADD = tests/service/libsvctest.la $(TAP_PAGEDD_LIBS) lib/libpaged.la \
	kernels/libpagedcpu.la lib/core/libpagedcore.la $(TAP_LIBS)
EXTRA_tests_peer_peers_t_DEPENDENCIES = daemon/pagedd
