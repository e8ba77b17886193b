# fuzz/local.mk: the libFuzzer harnesses (make fuzz) and the replay of their seed corpus (make check).
# SPDX-License-Identifier: MIT

# ---- make check: each harness linked with fuzz/replay.c, a TAP driver that feeds it every
# input of fuzz/corpus/NAME (twice), built with the configured compiler like any test.
FUZZ_SHARED = fuzz/fuzz.h fuzz/common.c
# What the replaying TAP drivers share (not the clang build: it needs the TAP library).
FUZZ_INPUTS = fuzz/inputs.h fuzz/inputs.c
# fuzz-validate drives the engine alone: it links the engine's library and not the front.
FUZZ_ENGINE_LIBS = daemon/libpagedengine.la lib/core/libpagedcore.la kernels/libpagedcpu.la \
	$(TAP_LIBS)
if HAVE_CUDA
FUZZ_ENGINE_LIBS += kernels/libpagedcuda.la $(CUDA_LIBS)
endif
FUZZ_REPLAY_LIBS = daemon/libpageddaemon.la $(FUZZ_ENGINE_LIBS) $(SYSTEMD_LIBS)
check_PROGRAMS += fuzz/replay-control-t fuzz/replay-validate-t
TESTS += fuzz/replay-control-t fuzz/replay-validate-t
fuzz_replay_control_t_SOURCES = fuzz/fuzz-control.c fuzz/replay.c $(FUZZ_SHARED) $(FUZZ_INPUTS)
fuzz_replay_control_t_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_NAME='"control"'
fuzz_replay_control_t_LDADD = $(FUZZ_REPLAY_LIBS)
fuzz_replay_validate_t_SOURCES = fuzz/fuzz-validate.c fuzz/validate-setup.h fuzz/validate-setup.c \
	fuzz/replay.c $(FUZZ_SHARED) $(FUZZ_INPUTS)
fuzz_replay_validate_t_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_NAME='"validate"'
fuzz_replay_validate_t_LDADD = $(FUZZ_ENGINE_LIBS)
EXTRA_DIST += fuzz/corpus fuzz/cuda-stub.c fuzz/README

# What fuzzing found, as a test of its own: the rule it broke, and its inputs
# (fuzz/corpus/*/regress-*) replayed through the harness.
check_PROGRAMS += tests/daemon/fuzz-regress-t
TESTS += tests/daemon/fuzz-regress-t
tests_daemon_fuzz_regress_t_SOURCES = tests/daemon/fuzz-regress-t.c fuzz/fuzz-validate.c \
	fuzz/validate-setup.h fuzz/validate-setup.c $(FUZZ_SHARED) $(FUZZ_INPUTS)
tests_daemon_fuzz_regress_t_LDADD = $(FUZZ_ENGINE_LIBS)

# ---- make fuzz-seeds: writes the seed corpus into the source tree again (mkseeds.c says
# when that is needed). Built on demand only.
EXTRA_PROGRAMS = fuzz/mkseeds
fuzz_mkseeds_SOURCES = fuzz/mkseeds.c fuzz/validate-setup.h fuzz/validate-setup.c
fuzz_mkseeds_LDADD = daemon/libpagedengine.la lib/core/libpagedcore.la
CLEANFILES += fuzz/mkseeds$(EXEEXT)
fuzz-seeds: fuzz/mkseeds$(EXEEXT)
	fuzz/mkseeds$(EXEEXT) $(srcdir)/fuzz/corpus

# ---- make fuzz: the harnesses built with clang's libFuzzer, ASan and UBSan, straight from
# the sources (whatever compiler configure chose; no CUDA: fuzz/cuda-stub.c stands in for
# the cuda backend), each run for FUZZ_SECONDS on its seed corpus plus a working corpus in
# the build tree, both at once. Crashes land in fuzz/crash-NAME-*; the logs in
# fuzz/fuzz-NAME.log. FUZZ_ARGS adds libFuzzer options (-runs=N, -jobs=N, ...).
FUZZ_CC = clang
FUZZ_SECONDS = 60
FUZZ_ARGS =
FUZZ_SANITIZE = -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS = -g -O2 -std=gnu17 -pthread -fno-omit-frame-pointer -Wall -Wextra
FUZZ_ALL_CPPFLAGS = $(DEFS) -I$(top_builddir) -I$(top_srcdir)/include -I$(top_srcdir) \
	$(SYSTEMD_CFLAGS)
FUZZ_LIB_SRC = \
	$(filter-out $(PD_CUDA_BACKEND_SOURCES),$(filter %.c,$(daemon_libpagedengine_la_SOURCES))) \
	$(filter %.c,$(daemon_libpageddaemon_la_SOURCES)) \
	$(filter %.c,$(lib_core_libpagedcore_la_SOURCES)) \
	$(filter %.c,$(kernels_libpagedcpu_la_SOURCES)) \
	fuzz/common.c fuzz/cuda-stub.c
FUZZ_OBJDIR = fuzz/clang-obj
FUZZ_LIB_OBJECTS = $(patsubst %.c,$(FUZZ_OBJDIR)/%.o,$(FUZZ_LIB_SRC))
FUZZ_HARNESSES = fuzz/fuzz-control fuzz/fuzz-validate

# The kernels' inner loops are no decision of the validator's, and tracing their compares
# would cost most of the time: ASan and UBSan only, without libFuzzer's coverage.
$(FUZZ_OBJDIR)/kernels/%.o: FUZZ_SANITIZE = -fsanitize=address,undefined -fno-sanitize-recover=all
$(FUZZ_OBJDIR)/%.o: $(srcdir)/%.c
	@$(MKDIR_P) $(@D)
	$(AM_V_CC)$(FUZZ_CC) $(FUZZ_ALL_CPPFLAGS) $(FUZZ_CFLAGS) $(FUZZ_SANITIZE) -MMD -MP -c -o $@ $<
-include $(wildcard $(FUZZ_OBJDIR)/*/*.d $(FUZZ_OBJDIR)/*/*/*.d)

fuzz/fuzz-control: $(FUZZ_OBJDIR)/fuzz/fuzz-control.o $(FUZZ_LIB_OBJECTS)
	$(AM_V_CCLD)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SANITIZE) -o $@ $^ $(SYSTEMD_LIBS) $(LIBS) -lm
fuzz/fuzz-validate: $(FUZZ_OBJDIR)/fuzz/fuzz-validate.o $(FUZZ_OBJDIR)/fuzz/validate-setup.o \
	$(FUZZ_LIB_OBJECTS)
	$(AM_V_CCLD)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SANITIZE) -o $@ $^ $(SYSTEMD_LIBS) $(LIBS) -lm

# Runs both harnesses at once; fails if either found something.
fuzz: $(FUZZ_HARNESSES)
	@pids=; for h in control validate; do \
	  $(MKDIR_P) fuzz/work/$$h; \
	  ./fuzz/fuzz-$$h -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -timeout=30 \
	    -print_final_stats=1 -artifact_prefix=fuzz/crash-$$h- $(FUZZ_ARGS) \
	    fuzz/work/$$h $(srcdir)/fuzz/corpus/$$h > fuzz/fuzz-$$h.log 2>&1 & \
	  pids="$$pids $$!"; \
	done; \
	fail=0; \
	for p in $$pids; do wait $$p || fail=1; done; \
	for h in control validate; do \
	  echo "fuzz-$$h: `grep -E '^(Done|==[0-9]+==ERROR|SUMMARY)' fuzz/fuzz-$$h.log | tail -1`"; \
	  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' \
	    fuzz/fuzz-$$h.log | sed "s/^/  /"; \
	  ls fuzz/crash-$$h-* 2>/dev/null | sed "s/^/  found: /"; \
	done; \
	exit $$fail
.PHONY: fuzz fuzz-seeds
CLEANFILES += $(FUZZ_HARNESSES) fuzz/fuzz-control.log fuzz/fuzz-validate.log
clean-local: clean-fuzz
clean-fuzz:
	-rm -rf $(FUZZ_OBJDIR) fuzz/work
.PHONY: clean-fuzz
