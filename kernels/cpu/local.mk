# kernels/cpu/local.mk: the CPU reference kernels and the CPU backend kernels.
# SPDX-License-Identifier: MIT

# libpagedcpu: pure C. pk_ref_* is the plain single-threaded oracle; pk_cpu_* splits the
# same ops into independent work items for the CPU backend's thread pool.
noinst_LTLIBRARIES += kernels/libpagedcpu.la
kernels_libpagedcpu_la_SOURCES = \
	kernels/cpu/dtype.h \
	kernels/cpu/check.h \
	kernels/cpu/check.c \
	kernels/cpu/ref_attn.h \
	kernels/cpu/ref_attn.c \
	kernels/cpu/ref_decode.c \
	kernels/cpu/ref_prefill.c \
	kernels/cpu/ref_cache.c \
	kernels/cpu/cpu_rows.h \
	kernels/cpu/cpu_rows.c \
	kernels/cpu/cpu_attn.h \
	kernels/cpu/cpu_attn.c \
	kernels/cpu/cpu_decode.c \
	kernels/cpu/cpu_prefill.c \
	kernels/cpu/cpu_cache.c \
	kernels/cpu/sum.c
