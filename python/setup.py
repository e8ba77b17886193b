# setup.py: the extension module of the paged package, compiled against libpaged found by pkg-config.
# SPDX-License-Identifier: MIT
"""Builds paged._paged for the limited API of Python 3.11 (abi3) from src/, with the flags
``pkg-config paged`` gives for an installed libpaged (PKG_CONFIG_PATH finds another
prefix). The package's metadata is in pyproject.toml."""

import os
import shlex
import subprocess

from setuptools import Extension, setup


def pkg_config(*args):
    """Returns pkg-config's words for paged with args; raises SystemExit naming the fix."""
    try:
        out = subprocess.run(["pkg-config", *args, "paged"], check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("paged: pkg-config cannot find libpaged (install it, or set PKG_CONFIG_PATH "
                         "to the directory of its paged.pc): %s" % e)
    return shlex.split(out.stdout)


here = os.path.dirname(os.path.abspath(__file__))
cflags = pkg_config("--cflags")
libs = pkg_config("--libs")
libdirs = [w[2:] for w in libs if w.startswith("-L")]
sources = sorted(os.path.join("src", f) for f in os.listdir(os.path.join(here, "src")) if f.endswith(".c"))

setup(
    ext_modules=[Extension(
        "paged._paged",
        sources=sources,
        include_dirs=[w[2:] for w in cflags if w.startswith("-I")],
        define_macros=[("Py_LIMITED_API", "0x030B0000")],
        extra_compile_args=["-std=gnu17"] + [w for w in cflags if not w.startswith("-I")],
        libraries=[w[2:] for w in libs if w.startswith("-l")] + ["dl"],
        library_dirs=libdirs,
        runtime_library_dirs=libdirs,
        py_limited_api=True,
    )],
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
