# tests/peer/local.mk: two real pagedd moving published prefixes over UCX TCP on loopback.
# SPDX-License-Identifier: MIT

# Built everywhere: without UCX it says 1..0 # SKIP built without UCX.
check_PROGRAMS += tests/peer/peers-t
TESTS += tests/peer/peers-t
tests_peer_peers_t_SOURCES = tests/peer/peers-t.c tests/service/kvprompt.h tests/service/kvprompt.c \
	$(SVC_CLIENT_SOURCES)
tests_peer_peers_t_LDADD = tests/client/libharness.la $(SVC_CLIENT_LIBS)
tests_peer_peers_t_CPPFLAGS = $(SVC_CLIENT_CPPFLAGS)
EXTRA_tests_peer_peers_t_DEPENDENCIES = daemon/pagedd

# The reading of UCX's description of an endpoint's lanes (daemon/peer/lanes.c): with UCX only.
if HAVE_UCX
check_PROGRAMS += tests/peer/lanes-t
TESTS += tests/peer/lanes-t
tests_peer_lanes_t_SOURCES = tests/peer/lanes-t.c daemon/peer/lanes.c daemon/util/log.h daemon/util/log.c
tests_peer_lanes_t_CPPFLAGS = $(AM_CPPFLAGS) $(UCX_CFLAGS)
tests_peer_lanes_t_LDADD = lib/core/libpagedcore.la $(TAP_LIBS) $(UCX_LIBS)
else
EXTRA_DIST += tests/peer/lanes-t.c
endif
