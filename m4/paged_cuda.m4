# paged_cuda.m4: find the CUDA toolkit for the cuda backend and its kernels.
# SPDX-License-Identifier: MIT
#
# PAGED_CUDA sets have_cuda (yes/no), NVCC, CUDA_HOME, CUDA_CPPFLAGS, CUDA_LIBS
# (the static runtime: binaries must start on machines with no driver), CUDA_ARCHS
# and NVCC_GENCODE (with -DPK_SM90A_CUBIN=1 where sm_90a code is built),
# NVCC_SPILL_CHECK (ptxas's spill warning, an error, when building for sm_90a alone), defines
# HAVE_CUDA and the automake conditional HAVE_CUDA. For configure's summary it sets cuda_why
# (where nvcc was found, or why CUDA is off) and cuda_gpu (whether this machine shows an NVIDIA
# driver: informational, the build does not depend on it).
AC_DEFUN([PAGED_CUDA], [
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
    [build the CUDA backend with the toolkit in DIR @<:@default=check for nvcc@:>@])],
  [], [with_cuda=check])
AC_ARG_WITH([cuda-arch],
  [AS_HELP_STRING([--with-cuda-arch=LIST],
    [GPU architectures to build for, comma or space separated (sm_90a, sm_80, ...; sm_90a, not sm_90, for Hopper: its wgmma prefill needs the arch-specific code) @<:@default=sm_90a@:>@])],
  [], [with_cuda_arch=sm_90a])

have_cuda=no
CUDA_HOME=
cuda_why="off: --without-cuda"
AS_IF([test "x$with_cuda" != xno], [
  cuda_why="off: no nvcc in PATH or /usr/local/cuda/bin (--with-cuda=DIR names a toolkit)"
  AS_CASE([$with_cuda],
    [yes|check], [AC_PATH_PROG([NVCC], [nvcc], [], [$PATH$PATH_SEPARATOR/usr/local/cuda/bin])],
    [AC_PATH_PROG([NVCC], [nvcc], [], [$with_cuda/bin])])
  AS_IF([test -n "$NVCC"], [
    CUDA_HOME=`dirname "$NVCC"`
    CUDA_HOME=`dirname "$CUDA_HOME"`
    AC_MSG_CHECKING([for the static CUDA runtime])
    cuda_libdir=
    for d in "$CUDA_HOME/lib64" "$CUDA_HOME/lib" "$CUDA_HOME/targets/x86_64-linux/lib" "$CUDA_HOME/targets/sbsa-linux/lib"; do
      AS_IF([test -f "$d/libcudart_static.a"], [cuda_libdir=$d; break])
    done
    AC_MSG_RESULT([${cuda_libdir:-no}])
    cuda_why="off: nvcc at $NVCC, but no libcudart_static.a and cuda_runtime_api.h under $CUDA_HOME"
    AS_IF([test -n "$cuda_libdir" && test -f "$CUDA_HOME/include/cuda_runtime_api.h"],
      [have_cuda=yes; cuda_why="nvcc at $NVCC"])
  ])
  AS_IF([test "x$have_cuda" = xno && test "x$with_cuda" != xcheck],
    [AC_MSG_ERROR([--with-cuda was given but no usable CUDA toolkit (nvcc, cuda_runtime_api.h, libcudart_static.a) was found])])
])

CUDA_ARCHS=
NVCC_GENCODE=
NVCC_SPILL_CHECK=
cuda_sm90=no
cuda_sm90a=no
AS_IF([test "x$have_cuda" = xyes], [
  CUDA_CPPFLAGS="-I$CUDA_HOME/include"
  CUDA_LIBS="$cuda_libdir/libcudart_static.a -ldl -lrt -lpthread -lstdc++"
  CUDA_ARCHS=`echo "$with_cuda_arch" | tr ',' ' '`
  for arch in $CUDA_ARCHS; do
    num=`echo "$arch" | sed -n 's/^sm_\([[0-9]][[0-9]]*[[af]]*\)$/\1/p'`
    AS_IF([test -z "$num"], [AC_MSG_ERROR([bad CUDA architecture '$arch': expected sm_NN, sm_NNa or sm_NNf])])
    NVCC_GENCODE="$NVCC_GENCODE -gencode=arch=compute_$num,code=sm_$num"
    AS_CASE([$num], [90], [cuda_sm90=yes], [90a], [cuda_sm90a=yes])
  done
  dnl Both would hold code for the same devices, and which of the two the driver loads is not
  dnl ours to choose; the kernels must know whether the wgmma prefill exists.
  AS_IF([test "x$cuda_sm90" = xyes && test "x$cuda_sm90a" = xyes],
    [AC_MSG_ERROR([--with-cuda-arch lists both sm_90 and sm_90a: give sm_90a alone])])
  AS_IF([test "x$cuda_sm90a" = xyes], [NVCC_GENCODE="$NVCC_GENCODE -DPK_SM90A_CUBIN=1"])
  dnl The kernels are tuned for sm_90a, where a register spill fails the build; for other
  dnl targets ptxas may spill a few bytes (the prefill kernel at D 128 on sm_80 does).
  AS_IF([test "x$CUDA_ARCHS" = xsm_90a], [NVCC_SPILL_CHECK=-Xptxas=-warn-spills])
  AC_DEFINE([HAVE_CUDA], [1], [Define if the CUDA backend is built.])
])
dnl Whether a GPU can be used here says nothing about the build (binaries start without a
dnl driver); the summary shows it because kernels built for no device here cost most of the
dnl build time and their tests skip.
AS_IF([test -e /dev/nvidiactl], [cuda_gpu="yes (/dev/nvidiactl)"],
  [test -d /proc/driver/nvidia], [cuda_gpu="yes (/proc/driver/nvidia)"],
  [cuda_gpu="none seen (no /dev/nvidiactl, no /proc/driver/nvidia): GPU tests will skip"])
AC_SUBST([CUDA_HOME])
AC_SUBST([CUDA_CPPFLAGS])
AC_SUBST([CUDA_LIBS])
AC_SUBST([CUDA_ARCHS])
AC_SUBST([NVCC_GENCODE])
AC_SUBST([NVCC_SPILL_CHECK])
AC_ARG_VAR([NVCC], [the CUDA compiler driver])
AC_ARG_VAR([NVCCFLAGS], [extra flags for nvcc])
AM_CONDITIONAL([HAVE_CUDA], [test "x$have_cuda" = xyes])
])
