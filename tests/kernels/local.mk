# tests/kernels/local.mk: the CPU kernel tests (the CUDA ones are in tests/kernels/cuda.mk).
# SPDX-License-Identifier: MIT

# libnaive: what the kernel tests share: stored values decoded from their fields, random
# pools and block tables, and the naive double-precision attention they compare against.
check_LTLIBRARIES += tests/kernels/libnaive.la
tests_kernels_libnaive_la_SOURCES = tests/kernels/naive.c tests/kernels/naive.h

KERNEL_TEST_LIBS = tests/kernels/libnaive.la kernels/libpagedcpu.la lib/core/libpagedcore.la $(TAP_LIBS)

check_PROGRAMS += \
	tests/kernels/dtype-t \
	tests/kernels/cpu-decode-t \
	tests/kernels/cpu-prefill-t \
	tests/kernels/cpu-append-t \
	tests/kernels/sum-t
TESTS += \
	tests/kernels/dtype-t \
	tests/kernels/cpu-decode-t \
	tests/kernels/cpu-prefill-t \
	tests/kernels/cpu-append-t \
	tests/kernels/sum-t

tests_kernels_dtype_t_SOURCES = tests/kernels/dtype-t.c
tests_kernels_dtype_t_LDADD = $(KERNEL_TEST_LIBS)
tests_kernels_cpu_decode_t_SOURCES = tests/kernels/cpu-decode-t.c
tests_kernels_cpu_decode_t_LDADD = $(KERNEL_TEST_LIBS)
tests_kernels_cpu_prefill_t_SOURCES = tests/kernels/cpu-prefill-t.c
tests_kernels_cpu_prefill_t_LDADD = $(KERNEL_TEST_LIBS)
tests_kernels_cpu_append_t_SOURCES = tests/kernels/cpu-append-t.c
tests_kernels_cpu_append_t_LDADD = $(KERNEL_TEST_LIBS)
tests_kernels_sum_t_SOURCES = tests/kernels/sum-t.c
tests_kernels_sum_t_LDADD = $(KERNEL_TEST_LIBS)
