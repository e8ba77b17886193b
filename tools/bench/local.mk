# tools/bench/local.mk: paged-bench, the kernel and service benchmarks.
# SPDX-License-Identifier: MIT

# paged-bench: the kernels on every benchmark shape against the device's measured ceilings,
# the service (its own pagedd, client processes through libpaged) against the same kernels
# called in-process, and the host and file tiers (tiers*.c; LIST through pactl's
# connection and fetch code) against the copy and disk rates measured in the same run. It links the daemon's engine library for its thread pool
# (daemon/cpu/workers.h), so CPU runs split work exactly as the cpu backend does.
pkglibexec_PROGRAMS = tools/paged-bench
tools_paged_bench_SOURCES = \
	tools/bench/bench.h \
	tools/bench/main.c \
	tools/bench/util.c \
	tools/bench/report.h \
	tools/bench/report.c \
	tools/bench/shapes.h \
	tools/bench/shapes.c \
	tools/bench/kcase.h \
	tools/bench/kcase.c \
	tools/bench/cpuwork.h \
	tools/bench/cpuwork.c \
	tools/bench/kernels.c \
	tools/bench/service.h \
	tools/bench/service.c \
	tools/bench/client.c \
	tools/bench/inproc.c \
	tools/bench/daemon.h \
	tools/bench/daemon.c \
	tools/bench/tiers.h \
	tools/bench/tiers.c \
	tools/bench/tierclient.c \
	tools/bench/tierlimits.c \
	tools/bench/tiercache.c \
	tools/bench/tierlist.c \
	tools/bench/remote.h \
	tools/bench/remote.c \
	tools/bench/peers.h \
	tools/bench/peers.c \
	tools/pactl_conn.h \
	tools/pactl_conn.c \
	tools/pactl_fetch.h \
	tools/pactl_fetch.c \
	tools/pactl_fmt.h \
	tools/pactl_fmt.c
tools_paged_bench_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tools_paged_bench_LDADD = lib/libpaged.la daemon/libpagedengine.la kernels/libpagedcpu.la \
	tools/common/libspawn.la lib/core/libpagedcore.la
noinst_HEADERS += tools/bench/probe.h
# paged-bench peers runs this script (FlashInfer beside paged's kernels, outputs compared):
# installed beside paged-bench, under the name paths.h gives paged-bench (PAGED_BENCH_PEERS_NAME).
dist_pkglibexec_SCRIPTS = tools/bench/peers.py

if HAVE_CUDA
# libbenchcuda: paged-bench's own device code (random fill, the read probe, the copy
# kernel, the spin). No per-target flags: the .cu.lo suffix rule would not see renamed objects.
noinst_LTLIBRARIES += tools/bench/libbenchcuda.la
tools_bench_libbenchcuda_la_SOURCES = tools/bench/probe.cu
tools_paged_bench_SOURCES += \
	tools/bench/gpu.h \
	tools/bench/gpu.c \
	tools/bench/nvml.c \
	tools/bench/kcuda.c \
	tools/bench/dispatch.c \
	tools/bench/cublas.c
tools_paged_bench_LDADD += tools/bench/libbenchcuda.la kernels/libpagedcuda.la $(CUDA_LIBS)
else
EXTRA_DIST += tools/bench/probe.cu
endif
-include $(wildcard tools/bench/$(DEPDIR)/*.Plo)

# The check: paged-bench --quick all must run, exit 0, and print and write finite positive
# figures (no timing assertion). bench-json-check reads its JSON back with the tests' strict
# parser; its own CPPFLAGS keep the parser's object apart from any other target's.
check_PROGRAMS += tools/bench/bench-json-check
tools_bench_bench_json_check_SOURCES = tools/bench/json_check.c tests/tools/tjson.c tests/tools/tjson.h \
	lib/core/utf8.c lib/core/utf8.h
tools_bench_bench_json_check_CPPFLAGS = $(AM_CPPFLAGS)
tools_bench_bench_json_check_LDADD = -lm
TESTS += tests/tools/bench-t.sh
EXTRA_DIST += tests/tools/bench-t.sh
tests/tools/bench-t.log: tools/paged-bench$(EXEEXT) daemon/pagedd$(EXEEXT) \
	tools/bench/bench-json-check$(EXEEXT)

# paged-bench --quick peers on the cpu backend (no FlashInfer): the script's paged-against-
# reference check on every shape, its failure with a wrong reference, and the absences.
TESTS += tests/tools/bench-peers-t.sh
EXTRA_DIST += tests/tools/bench-peers-t.sh
tests/tools/bench-peers-t.log: tools/paged-bench$(EXEEXT) daemon/pagedd$(EXEEXT) \
	tools/bench/bench-json-check$(EXEEXT) $(noinst_DATA)
