# lib/local.mk: what lib/ builds.
# SPDX-License-Identifier: MIT

# libpagedcore: the internals libpaged and pagedd share (wire protocol, ring, wake-ups,
# shared memory, the control socket, error strings, hashing).
noinst_LTLIBRARIES += lib/libpagedcore.la
lib_libpagedcore_la_SOURCES = \
	lib/proto.h \
	lib/strerror.c \
	lib/dtype.c \
	lib/prefix_hash.c \
	lib/ring.h \
	lib/ring.c \
	lib/wake.h \
	lib/wake.c \
	lib/shm.h \
	lib/shm.c \
	lib/sock.h \
	lib/sock.c
