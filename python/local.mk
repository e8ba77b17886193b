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
	python/src/cuda.c \
	python/src/run.c \
	python/src/request.c \
	python/src/pool.c \
	python/src/attn.c \
	python/src/blocks.c \
	python/src/counts.c \
	python/src/events.c \
	python/src/seq.c
# The package's Python files, staged beside the module (one rule for all of them).
PYTHON_PACKAGE_FILES = \
	python/paged/__init__.py \
	python/paged/daemon.py \
	python/paged/llama/__init__.py \
	python/paged/llama/attention.py \
	python/paged/llama/demo.py \
	python/paged/llama/generate.py \
	python/paged/llama/model.py \
	python/paged/llama/ops.py \
	python/paged/llama/prompts.py \
	python/paged/llama/tokenizer.py \
	python/paged/llama/weights.py \
	python/paged/llama/worker.py \
	python/paged/transformers.py
EXTRA_DIST += $(PYTHON_MODULE_SOURCES) $(PYTHON_PACKAGE_FILES) python/paged/_paged.pyi python/paged/py.typed \
	python/pyproject.toml python/setup.py python/README.md
# The model benchmark (GPU, or tiny on the cpu backend), run with the staged package.
EXTRA_DIST += tools/bench-model.py
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

# `make demo-model`: SmolLM2-135M-Instruct answering four questions through the build tree's
# pagedd (python/paged/llama/demo.py); DEMO_MODEL_FLAGS adds its options (--backend=cuda, ...).
# The caller's PYTHONPATH and LD_LIBRARY_PATH follow the build tree's (a model file elsewhere).
# One BLAS thread per worker: the four workers share the cores.
demo-model: $(noinst_DATA) daemon/pagedd$(EXEEXT) tools/pactl$(EXEEXT)
	$(AM_V_at)PYTHONPATH='$(abs_top_builddir)/python/staged'$${PYTHONPATH:+:$$PYTHONPATH} LD_LIBRARY_PATH='$(abs_top_builddir)/lib/.libs'$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH} \
	  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1 $(PYTHON) -m paged.llama.demo \
	  --pagedd '$(abs_top_builddir)/daemon/pagedd' --pactl '$(abs_top_builddir)/tools/pactl' $(DEMO_MODEL_FLAGS)

# `make bench-model`: tools/bench-model.py with the build tree's pagedd; BENCH_MODEL_FLAGS adds
# its options (--device cuda on a GPU machine).
bench-model: $(noinst_DATA) daemon/pagedd$(EXEEXT)
	$(AM_V_at)PYTHONPATH='$(abs_top_builddir)/python/staged'$${PYTHONPATH:+:$$PYTHONPATH} LD_LIBRARY_PATH='$(abs_top_builddir)/lib/.libs'$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH} \
	  PYTHONDONTWRITEBYTECODE=1 $(PYTHON) $(srcdir)/tools/bench-model.py \
	  --pagedd '$(abs_top_builddir)/daemon/pagedd' $(BENCH_MODEL_FLAGS)
else
demo-model bench-model:
	@echo "make $@ needs the Python module (configure found no Python 3.11+ with its headers)" >&2; exit 1
endif
.PHONY: demo-model bench-model
# The tests run the module with the interpreter it was built for (empty: not built).
AM_TESTS_ENVIRONMENT += PAGED_PYTHON='$(PYTHON)'; export PAGED_PYTHON;
