# daemon/local.mk: what daemon/ builds.
# SPDX-License-Identifier: MIT

# The daemon's modules as two convenience libraries, so that pagedd and the tests link the
# same objects. libpagedengine: the request engine and what it stands on (log and heap, the
# block allocator, connections, pools, counters, the backend factory and backends); it
# knows nothing of the server, so the engine's tests link it alone. libpageddaemon: the
# front (settings, the event loop, control messages, replies, events, systemd reports).
# Neither is added to the other (a convenience library added to another is copied in, and
# a program linking both would link its objects twice): programs link both, the daemon's
# first, then lib/core/libpagedcore.la and kernels/libpagedcpu.la.
noinst_LTLIBRARIES += daemon/libpagedengine.la daemon/libpageddaemon.la
daemon_libpagedengine_la_SOURCES = \
	daemon/util/heap.h \
	daemon/util/heap.c \
	daemon/util/log.h \
	daemon/util/log.c \
	daemon/util/knobs.h \
	daemon/util/knobs.c \
	daemon/alloc/alloc.h \
	daemon/alloc/alloc.c \
	daemon/alloc/internal.h \
	daemon/alloc/pins.c \
	daemon/alloc/check.c \
	daemon/alloc/u64map.h \
	daemon/alloc/u64map.c \
	daemon/tier/keymap.h \
	daemon/tier/keymap.c \
	daemon/tier/host.h \
	daemon/tier/host.c \
	daemon/tier/file.h \
	daemon/tier/file.c \
	daemon/stats.h \
	daemon/stats.c \
	daemon/pool.h \
	daemon/pool.c \
	daemon/shard.h \
	daemon/shard.c \
	daemon/blocklog.h \
	daemon/blocklog.c \
	daemon/tier/tiers.h \
	daemon/tier/tiers.c \
	daemon/tier/persist.h \
	daemon/tier/persist.c \
	daemon/conn.h \
	daemon/conn.c \
	daemon/backend.h \
	daemon/backend.c \
	daemon/devices/devices.h \
	daemon/devices/devices.c \
	daemon/engine/validate.h \
	daemon/engine/validate.c \
	daemon/engine/batch.h \
	daemon/engine/batch.c \
	daemon/engine/merged.h \
	daemon/engine/merged.c \
	daemon/engine/fuse.h \
	daemon/engine/fuse.c \
	daemon/engine/engine.h \
	daemon/engine/internal.h \
	daemon/engine/engine.c \
	daemon/engine/defer.c \
	daemon/engine/report.c \
	daemon/engine/strikes.h \
	daemon/engine/strikes.c \
	daemon/cpu/cpu.h \
	daemon/cpu/workers.h \
	daemon/cpu/workers.c \
	daemon/cpu/backend.c
daemon_libpagedengine_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
daemon_libpageddaemon_la_SOURCES = \
	daemon/settings.h \
	daemon/settings.c \
	daemon/server.h \
	daemon/server.c \
	daemon/tally.h \
	daemon/tally.c \
	daemon/control.h \
	daemon/control.c \
	daemon/prefixctl.h \
	daemon/prefixctl.c \
	daemon/list.h \
	daemon/list.c \
	daemon/events.h \
	daemon/events.c \
	daemon/notify.h \
	daemon/notify.c
daemon_libpageddaemon_la_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS)
# The peers (daemon/peer/peer.h): only with --with-ucx.
PD_PEER_SOURCES = \
	daemon/peer/peer.h \
	daemon/peer/internal.h \
	daemon/peer/wire.h \
	daemon/peer/key.c \
	daemon/peer/link.c \
	daemon/peer/auth.c \
	daemon/peer/serve.c \
	daemon/peer/fetch.c \
	daemon/peer/buffers.c \
	daemon/peer/lanes.c
if HAVE_UCX
daemon_libpageddaemon_la_SOURCES += $(PD_PEER_SOURCES)
daemon_libpageddaemon_la_CFLAGS += $(UCX_CFLAGS) $(SODIUM_CFLAGS)
daemon_libpageddaemon_la_LIBADD = $(UCX_LIBS) $(SODIUM_LIBS)
else
EXTRA_DIST += $(PD_PEER_SOURCES)
endif
# The cuda backend: C17 against the runtime's C headers and <cuda.h>; the driver API only
# through cudaGetDriverEntryPoint, so nothing links libcuda.
PD_CUDA_BACKEND_SOURCES = \
	daemon/cuda/cuda.h \
	daemon/cuda/internal.h \
	daemon/cuda/batch.c \
	daemon/cuda/flight.h \
	daemon/cuda/flight.c \
	daemon/cuda/probe.h \
	daemon/cuda/probe.c \
	daemon/cuda/mem.h \
	daemon/cuda/mem.c \
	daemon/cuda/reaper.h \
	daemon/cuda/reaper.c \
	daemon/cuda/stage.h \
	daemon/cuda/stage.c \
	daemon/cuda/units.h \
	daemon/cuda/units.c \
	daemon/cuda/staging.h \
	daemon/cuda/staging.c \
	daemon/cuda/backend.c
if HAVE_CUDA
daemon_libpagedengine_la_SOURCES += $(PD_CUDA_BACKEND_SOURCES)
else
EXTRA_DIST += $(PD_CUDA_BACKEND_SOURCES)
endif
# The libraries need nothing of libpagedcore at this level; programs link
# lib/core/libpagedcore.la and kernels/libpagedcpu.la after them (a convenience library
# added here would be copied in, and its objects linked twice).
PD_DAEMON_LIBS = daemon/libpageddaemon.la daemon/libpagedengine.la

# pagedd: the daemon.
sbin_PROGRAMS += daemon/pagedd
daemon_pagedd_SOURCES = daemon/main.c
daemon_pagedd_LDADD = $(PD_DAEMON_LIBS) lib/core/libpagedcore.la kernels/libpagedcpu.la $(SYSTEMD_LIBS)
if HAVE_CUDA
# The kernels, and the static runtime (a pagedd built with CUDA starts without a driver).
daemon_pagedd_LDADD += kernels/libpagedcuda.la $(CUDA_LIBS)
endif

# The systemd unit, with the installed pagedd's path (from paths.h, so that the unit follows
# the prefix and the program's transformed name), and the group paged it runs in and the
# entries that make that group and /run/paged (HACKING.md, Install layout).
if INSTALL_UNIT
systemdsystemunit_DATA = daemon/pagedd.service
endif
if INSTALL_SYSUSERS
dist_sysusers_DATA = daemon/sysusers.d/paged.conf
endif
if INSTALL_TMPFILES
dist_tmpfiles_DATA = daemon/tmpfiles.d/paged.conf
endif
CLEANFILES += daemon/pagedd.service
EXTRA_DIST += daemon/pagedd.service.in daemon/sysusers.d/paged.conf daemon/tmpfiles.d/paged.conf

# paged.conf.example, every key commented out with its default, among the documentation's
# examples, where packagers look for it (a paged.conf in $(sysconfdir) would be a packager's
# or an administrator's file; the daemon runs without one).
examplesdir = $(docdir)/examples
dist_examples_DATA = daemon/paged.conf.example
if HAVE_SYSTEMD
PAGEDD_SERVICE_TYPE = notify
PAGEDD_SERVICE_ARGS = --foreground
PAGEDD_SERVICE_PIDFILE = \# readiness through sd_notify: no pid file
else
PAGEDD_SERVICE_TYPE = forking
PAGEDD_SERVICE_ARGS = --pid-file /run/paged/pagedd.pid
PAGEDD_SERVICE_PIDFILE = PIDFile=/run/paged/pagedd.pid
endif
daemon/pagedd.service: $(srcdir)/daemon/pagedd.service.in paths.h Makefile
	$(AM_V_GEN)$(MKDIR_P) daemon && \
	pagedd=`sed -n 's/^#define PAGED_PAGEDD_PATH "\(.*\)"$$/\1/p' paths.h` && test -n "$$pagedd" && sed \
	  -e "s|@PAGEDD_PATH[@]|$$pagedd|g" \
	  -e "s|@PAGEDD_NAME[@]|$${pagedd##*/}|g" \
	  -e 's|@PAGEDD_SERVICE_TYPE[@]|$(PAGEDD_SERVICE_TYPE)|g' \
	  -e 's|@PAGEDD_SERVICE_ARGS[@]|$(PAGEDD_SERVICE_ARGS)|g' \
	  -e 's|@PAGEDD_SERVICE_PIDFILE[@]|$(PAGEDD_SERVICE_PIDFILE)|g' \
	  $(srcdir)/daemon/pagedd.service.in > $@.tmp && mv $@.tmp $@
