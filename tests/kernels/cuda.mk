# tests/kernels/cuda.mk: the CUDA kernel tests.
# SPDX-License-Identifier: MIT

# Listed outside the conditional so that a tarball made without CUDA still carries them.
EXTRA_DIST += \
	tests/kernels/gpu_util.h \
	tests/kernels/gpu_util.c \
	tests/kernels/cuda-decode-t.c \
	tests/kernels/cuda-prefill-t.c \
	tests/kernels/cuda-append-t.c \
	tests/kernels/cuda-dep-t.c \
	tests/kernels/cuda-sum-t.c \
	tests/kernels/cuda-units-t.c

if HAVE_CUDA
# libgpuutil: device checks, device memory and comparisons the CUDA tests share.
check_LTLIBRARIES += tests/kernels/libgpuutil.la
tests_kernels_libgpuutil_la_SOURCES = tests/kernels/gpu_util.c tests/kernels/gpu_util.h
tests_kernels_libgpuutil_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)

CUDA_KERNEL_TESTS = \
	tests/kernels/cuda-decode-t \
	tests/kernels/cuda-prefill-t \
	tests/kernels/cuda-append-t \
	tests/kernels/cuda-dep-t \
	tests/kernels/cuda-sum-t \
	tests/kernels/cuda-units-t
check_PROGRAMS += $(CUDA_KERNEL_TESTS)
TESTS += $(CUDA_KERNEL_TESTS)

CUDA_TEST_LIBS = tests/kernels/libgpuutil.la tests/kernels/libnaive.la kernels/libpagedcuda.la kernels/libpagedcpu.la \
	lib/core/libpagedcore.la $(TAP_LIBS) $(CUDA_LIBS)
tests_kernels_cuda_decode_t_SOURCES = tests/kernels/cuda-decode-t.c
tests_kernels_cuda_decode_t_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_kernels_cuda_decode_t_LDADD = $(CUDA_TEST_LIBS)
tests_kernels_cuda_prefill_t_SOURCES = tests/kernels/cuda-prefill-t.c
tests_kernels_cuda_prefill_t_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_kernels_cuda_prefill_t_LDADD = $(CUDA_TEST_LIBS)
tests_kernels_cuda_append_t_SOURCES = tests/kernels/cuda-append-t.c
tests_kernels_cuda_append_t_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_kernels_cuda_append_t_LDADD = $(CUDA_TEST_LIBS)
tests_kernels_cuda_dep_t_SOURCES = tests/kernels/cuda-dep-t.c
tests_kernels_cuda_dep_t_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_kernels_cuda_dep_t_LDADD = $(CUDA_TEST_LIBS)
tests_kernels_cuda_sum_t_SOURCES = tests/kernels/cuda-sum-t.c
tests_kernels_cuda_sum_t_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_kernels_cuda_sum_t_LDADD = $(CUDA_TEST_LIBS)
tests_kernels_cuda_units_t_SOURCES = tests/kernels/cuda-units-t.c
tests_kernels_cuda_units_t_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_kernels_cuda_units_t_LDADD = $(CUDA_TEST_LIBS)

# make check-cuda-sanitizer: every CUDA kernel test under compute-sanitizer's memcheck and
# racecheck, on the reduced case set (PAGED_TEST_QUICK=1); fails on any reported error.
# COMPUTE_SANITIZER names the tool if it is neither in the toolkit nor on PATH.
check-cuda-sanitizer: $(CUDA_KERNEL_TESTS)
	@cs="$${COMPUTE_SANITIZER:-$(CUDA_HOME)/bin/compute-sanitizer}"; \
	if test ! -x "$$cs"; then cs=`command -v compute-sanitizer || true`; fi; \
	if test -z "$$cs"; then echo "check-cuda-sanitizer: compute-sanitizer not found" >&2; exit 1; fi; \
	fail=0; \
	for tool in memcheck racecheck; do \
	  for t in $(CUDA_KERNEL_TESTS); do \
	    echo "  $$tool  $$t"; \
	    case $$tool in \
	      memcheck) extra="--leak-check full";; \
	      *) extra="";; \
	    esac; \
	    PAGED_TEST_QUICK=1 $(LIBTOOL) --mode=execute "$$cs" --tool $$tool $$extra --error-exitcode 99 \
	      ./$$t > $$t.$$tool.log 2>&1 || { fail=1; echo "FAIL: $$tool $$t (see $$t.$$tool.log)"; tail -20 $$t.$$tool.log; }; \
	  done; \
	done; \
	test $$fail = 0
else
check-cuda-sanitizer:
	@echo "check-cuda-sanitizer: configured without CUDA" >&2; exit 1
endif
.PHONY: check-cuda-sanitizer
CLEANFILES += tests/kernels/*.memcheck.log tests/kernels/*.racecheck.log
