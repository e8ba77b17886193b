# tests/python/local.mk: the paged Python package's tests, run by one TAP wrapper.
# SPDX-License-Identifier: MIT
TESTS += tests/python/python-t.sh
EXTRA_DIST += tests/python/python-t.sh tests/python/tap.py tests/python/daemon.py tests/python/reference.py \
	tests/python/test_client.py tests/python/test_arrays.py tests/python/test_attention.py \
	tests/python/test_errors.py tests/python/test_async.py tests/python/test_cuda.py tests/python/test_model.py \
	tests/python/test_transformers.py tests/python/test_shards.py tests/python/test_devices.py tests/python/hf_model.py \
	tests/python/hf_gpu.py
