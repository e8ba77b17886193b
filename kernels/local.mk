# kernels/local.mk: the CUDA kernels (the CPU ones are in kernels/cpu/local.mk).
# SPDX-License-Identifier: MIT
noinst_HEADERS += kernels/kernels.h

# The CUDA kernels' own headers; listed outside the conditional so a tarball made without
# CUDA still carries them.
noinst_HEADERS += \
	kernels/common.cuh \
	kernels/sum.cuh \
	kernels/ptx.cuh \
	kernels/tma.cuh \
	kernels/wgmma.cuh \
	kernels/decode.cuh \
	kernels/decode_impl.cuh \
	kernels/prefill.cuh \
	kernels/prefill_impl.cuh \
	kernels/prefill_wgmma.cuh

# The .cu sources: one op per file, plus one file per head dim holding that dim's decode or
# prefill instantiations, so a parallel build compiles them side by side.
PK_CUDA_SOURCES = \
	kernels/append.cu \
	kernels/copy.cu \
	kernels/decode.cu \
	kernels/decode_d64.cu \
	kernels/decode_d80.cu \
	kernels/decode_d96.cu \
	kernels/decode_d128.cu \
	kernels/decode_d256.cu \
	kernels/dep.cu \
	kernels/fault.cu \
	kernels/prefill.cu \
	kernels/prefill_d64.cu \
	kernels/prefill_d80.cu \
	kernels/prefill_d96.cu \
	kernels/prefill_d128.cu \
	kernels/prefill_d256.cu \
	kernels/sum.cu

if HAVE_CUDA
# libpagedcuda: the pk_cuda_* entry points. Programs linking it add $(CUDA_LIBS). No
# per-target flags: the .cu.lo suffix rule would not see renamed objects.
noinst_LTLIBRARIES += kernels/libpagedcuda.la
kernels_libpagedcuda_la_SOURCES = $(PK_CUDA_SOURCES)
else
EXTRA_DIST += $(PK_CUDA_SOURCES)
endif
