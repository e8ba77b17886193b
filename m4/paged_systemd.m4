# paged_systemd.m4: where the systemd unit and the sysusers.d and tmpfiles.d entries go.
# SPDX-License-Identifier: MIT
#
# PAGED_SYSTEMD_DIR(VARIABLE, PKG-CONFIG VARIABLE, DIRECTORY UNDER PREFIX, CONDITIONAL, WHAT)
# adds --with-VARIABLE=DIR|no and substitutes VARIABLE. The default is systemd's own directory
# (pkg-config's VARIABLE of systemd) when the prefix is systemd's (/usr): a distribution's
# build. Any other prefix keeps its files under itself, in PREFIX/DIRECTORY (systemd reads
# /usr/local/lib/systemd/system, /usr/local/lib/sysusers.d and /usr/local/lib/tmpfiles.d, and
# a private prefix, such as make distcheck's, stays private). "no" installs nothing; the
# automake conditional CONDITIONAL says whether to install.
AC_DEFUN([PAGED_SYSTEMD_DIR], [
AC_REQUIRE([PKG_PROG_PKG_CONFIG])
AC_ARG_WITH([$1],
  [AS_HELP_STRING([--with-$1=DIR|no],
    [where to install $5 @<:@default: systemd's (pkg-config systemd) when the prefix is
     systemd's, else PREFIX/$3@:>@])],
  [], [with_$1=default])
AC_MSG_CHECKING([where to install $5])
AS_CASE([$with_$1],
  [default|yes], [
    paged_sd_prefix=$prefix
    test "x$paged_sd_prefix" = xNONE && paged_sd_prefix=$ac_default_prefix
    paged_sd_pc_prefix=
    paged_sd_pc_dir=
    AS_IF([test -n "$PKG_CONFIG"], [
      paged_sd_pc_prefix=`$PKG_CONFIG --variable=prefix systemd 2>/dev/null`
      paged_sd_pc_dir=`$PKG_CONFIG --variable=$2 systemd 2>/dev/null`])
    AS_IF([test -n "$paged_sd_pc_dir" && test "x$paged_sd_prefix" = "x$paged_sd_pc_prefix"],
      [with_$1=$paged_sd_pc_dir],
      [with_$1='${prefix}/$3'])],
  [no|/*], [],
  [AC_MSG_ERROR([--with-$1 wants an absolute directory or no, not '$with_$1'])])
AC_MSG_RESULT([$with_$1])
AC_SUBST([$1], [$with_$1])
AM_CONDITIONAL([$4], [test "x$with_$1" != xno])
])
