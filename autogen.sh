#!/bin/sh
# autogen.sh: prepare a fresh checkout for ./configure.
# SPDX-License-Identifier: MIT
set -e
cd "$(dirname "$0")"
mkdir -p build-aux m4
autoreconf --force --install --warnings=all
# The TAP driver ships with automake but is not installed by --add-missing.
cp -f "$(automake --print-libdir)/tap-driver.sh" build-aux/tap-driver.sh
chmod +x build-aux/tap-driver.sh
echo "Now run ./configure && make && make check"
