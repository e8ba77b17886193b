# paged_python.m4: the Python interpreter and headers the paged extension module is built for.
# SPDX-License-Identifier: MIT
#
# PAGED_PYTHON adds --enable-python=yes|no|auto (default auto) and the precious variable PYTHON.
# The candidates are $PYTHON when set, else python3 on the PATH, then /usr/bin/python3; each
# must be Python 3.11 or later (the limited API the module is built for has the buffer protocol
# from 3.11) with Python.h. Among those, the first that imports numpy wins, since the tests need
# it and the system's numpy package serves the system's interpreter; else the first with
# headers (the tests then skip, saying why). Substitutes PYTHON (empty when the extension is
# not built) and PYTHON_CPPFLAGS; the conditional ENABLE_PYTHON says whether it is built.
AC_DEFUN([PAGED_PYTHON], [
AC_ARG_ENABLE([python],
  [AS_HELP_STRING([--enable-python],
    [build the Python extension module (python/) @<:@default=auto: when Python 3.11+ and its
     headers are found@:>@])],
  [], [enable_python=auto])
AC_ARG_VAR([PYTHON], [the Python 3 interpreter the extension module is built for and tested with])
have_python=no
python_why="disabled (--disable-python)"
PYTHON_CPPFLAGS=
AS_IF([test "x$enable_python" != xno], [
  AS_IF([test -n "$PYTHON"], [paged_py_candidates=$PYTHON],
    [paged_py_candidates="`command -v python3 2>/dev/null` /usr/bin/python3"])
  paged_py_first=
  paged_py_first_inc=
  paged_py_found=
  paged_py_inc=
  python_why="no Python 3.11+ with its headers (Python.h) found"
  for paged_py in $paged_py_candidates; do
    AS_IF([test -x "$paged_py"], [], [continue])
    paged_py_prog='import sys, sysconfig; print(sysconfig.get_path("include") if sys.version_info >= (3, 11) else "")'
    paged_py_i=`$paged_py -c "$paged_py_prog" 2>/dev/null`
    AS_IF([test -n "$paged_py_i" && test -f "$paged_py_i/Python.h"], [], [continue])
    AS_IF([test -z "$paged_py_first"], [paged_py_first=$paged_py paged_py_first_inc=$paged_py_i])
    AS_IF([$paged_py -c 'import numpy' >/dev/null 2>&1],
      [paged_py_found=$paged_py paged_py_inc=$paged_py_i; break])
  done
  AS_IF([test -z "$paged_py_found" && test -n "$paged_py_first"],
    [paged_py_found=$paged_py_first paged_py_inc=$paged_py_first_inc])
  AC_MSG_CHECKING([for the Python the extension module is built for])
  AS_IF([test -n "$paged_py_found"], [
    have_python=yes
    PYTHON=$paged_py_found
    PYTHON_CPPFLAGS="-isystem $paged_py_inc"
    AS_IF([$PYTHON -c 'import numpy' >/dev/null 2>&1],
      [python_why="$PYTHON"], [python_why="$PYTHON (no numpy: the Python tests skip)"])
    AC_MSG_RESULT([$PYTHON])],
    [AC_MSG_RESULT([none])
     AS_IF([test "x$enable_python" = xyes], [AC_MSG_ERROR([--enable-python: $python_why])])])
])
AS_IF([test "x$have_python" = xyes], [], [PYTHON=])
AC_SUBST([PYTHON_CPPFLAGS])
AM_CONDITIONAL([ENABLE_PYTHON], [test "x$have_python" = xyes])
])
