# lib/core/local.mk: libpagedcore, what libpaged and pagedd share.
# SPDX-License-Identifier: MIT

# libpagedcore: the internals libpaged and pagedd share (wire protocol, ring, wake-ups,
# shared memory, the control socket, error strings, op and field names, hashing, UTF-8 names).
noinst_LTLIBRARIES += lib/core/libpagedcore.la
lib_core_libpagedcore_la_SOURCES = \
	lib/core/proto.h \
	lib/core/clock.h \
	lib/core/clock.c \
	lib/core/strerror.c \
	lib/core/dtype.c \
	lib/core/names.h \
	lib/core/names.c \
	lib/core/prefix_hash.c \
	lib/core/ring.h \
	lib/core/ring.c \
	lib/core/wake.h \
	lib/core/wake.c \
	lib/core/shm.h \
	lib/core/shm.c \
	lib/core/sock.h \
	lib/core/sock.c \
	lib/core/utf8.h \
	lib/core/utf8.c
