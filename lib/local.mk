# lib/local.mk: libpaged, the installed client library.
# SPDX-License-Identifier: MIT

# The client library: its own modules over libpagedcore (protocol, rings, wake-ups, shared
# memory, sockets, error strings, hashing), whose symbols stay hidden behind the version
# script: only the paged_* functions of include/paged.h are exported, in node PAGED_0.1.
lib_LTLIBRARIES += lib/libpaged.la
lib_libpaged_la_SOURCES = \
	lib/client.h \
	lib/client.c \
	lib/control.c \
	lib/pool.c \
	lib/prefix.c \
	lib/arena.c \
	lib/submit.c \
	lib/encode.c \
	lib/sync.c \
	lib/seq.c \
	lib/names.c \
	lib/version.c \
	lib/stats.c \
	lib/stream.c \
	lib/events.c \
	lib/cuda_api.h \
	lib/cuda_driver.h \
	lib/cuda_driver.c \
	lib/cuda_words.c
lib_libpaged_la_LIBADD = lib/core/libpagedcore.la
# current:revision:age of the libtool interface; -ldl comes from configure's LIBS where needed.
lib_libpaged_la_LDFLAGS = -version-info 0:0:0 -no-undefined \
	-Wl,--version-script=$(srcdir)/lib/libpaged.map
EXTRA_lib_libpaged_la_DEPENDENCIES = lib/libpaged.map
EXTRA_DIST += lib/libpaged.map
