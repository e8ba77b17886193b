# python/local.mk: the paged Python package's extension module, built into python/staged/paged.
# SPDX-License-Identifier: MIT

# The C module paged._paged over libpaged, for the limited API of Python 3.11 (abi3), and the
# package staged beside it in python/staged/paged, which the tests put on PYTHONPATH. pip
# builds the same sources with python/setup.py against an installed libpaged.
PYTHON_MODULE_SOURCES = \
	python/src/pypaged.h \
	python/src/dlpack.h \
	python/src/module.c \
	python/src/heap.c \
	python/src/client.c \
	python/src/array.c \
	python/src/view.c \
	python/src/run.c \
	python/src/request.c \
	python/src/pool.c \
	python/src/attn.c \
	python/src/blocks.c \
	python/src/seq.c
# The package's Python files, staged beside the module (one rule for all of them).
PYTHON_PACKAGE_FILES = \
	python/paged/__init__.py \
	python/paged/llama/__init__.py \
	python/paged/llama/attention.py \
	python/paged/llama/generate.py \
	python/paged/llama/model.py \
	python/paged/llama/ops.py \
	python/paged/llama/tokenizer.py \
	python/paged/llama/weights.py
EXTRA_DIST += $(PYTHON_MODULE_SOURCES) $(PYTHON_PACKAGE_FILES) python/paged/_paged.pyi python/paged/py.typed \
	python/pyproject.toml python/setup.py python/README.md
if ENABLE_PYTHON
# A shared module that is never installed by make: -rpath makes libtool build it shared.
noinst_LTLIBRARIES += python/_paged.la
python__paged_la_SOURCES = $(PYTHON_MODULE_SOURCES)
python__paged_la_CPPFLAGS = $(AM_CPPFLAGS) $(PYTHON_CPPFLAGS) -DPy_LIMITED_API=0x030B0000
python__paged_la_LDFLAGS = -module -avoid-version -shared -rpath $(abs_builddir)/python
python__paged_la_LIBADD = lib/libpaged.la
noinst_DATA = $(PYTHON_PACKAGE_FILES:python/paged/%=python/staged/paged/%) python/staged/paged/_paged.abi3.so
python/staged/paged/%.py: $(srcdir)/python/paged/%.py
	$(AM_V_GEN)$(MKDIR_P) $(@D) && cp $< $@
python/staged/paged/_paged.abi3.so: python/_paged.la
	$(AM_V_GEN)$(MKDIR_P) python/staged/paged && cp python/.libs/_paged.so $@
CLEANFILES += $(noinst_DATA)
endif
# The tests run the module with the interpreter it was built for (empty: not built).
AM_TESTS_ENVIRONMENT += PAGED_PYTHON='$(PYTHON)'; export PAGED_PYTHON;
