#!/bin/sh
# tools/install-deps.sh: install the packages paged's build and tests need, on Debian or Ubuntu.
# SPDX-License-Identifier: MIT
#
# The one list of build packages: README's quick start and .ci/run both run this script.
# As root it runs apt-get itself; otherwise through sudo, and says what to do when there is none.
set -eu

PACKAGES="build-essential autoconf automake libtool pkg-config libxxhash-dev libsystemd-dev mandoc
    python3-dev python3-numpy"

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps.sh: apt-get not found: install these packages (or your system's names for them)" \
         "by hand: $PACKAGES" >&2
    exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=
elif command -v sudo >/dev/null 2>&1; then
    SUDO=sudo
else
    echo "install-deps.sh: not root and no sudo: run this script as root (su -c tools/install-deps.sh)," \
         "or install by hand: $PACKAGES" >&2
    exit 1
fi

# env, not export: sudo drops the caller's environment. $SUDO and $PACKAGES split into words.
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $PACKAGES
