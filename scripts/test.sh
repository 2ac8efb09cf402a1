#!/usr/bin/env bash
# CI entry point: installs missing dependencies, builds build/ with -Werror, runs every test.
# Exits non-zero on any failure. Works from any directory (TRAINTIME_BUILD_DIR: see build.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=phase.sh
. "$ROOT/scripts/phase.sh"
tt_phase "test.sh: Debian packages" -- "$ROOT/scripts/install-deps.sh"
# The released libcupti and headers of every CUPTI 12.x and 13.x the adapter decodes (PyPI wheels,
# cached in ~/.cache/traintime): tests/cupti checks each one without a GPU.
BUILD="${TRAINTIME_BUILD_DIR:-$ROOT/build}"
tt_phase "test.sh: CUPTI releases" -- /usr/bin/python3 "$ROOT/scripts/fetch-cupti-releases.py" "$BUILD/cupti-releases"
# The released libnccl.so.2 of the NCCL versions whose entry points tests/nccl checks (PyPI
# wheels, unpacked once into ~/.cache/traintime and listed in the build folder).
tt_phase "test.sh: NCCL releases" -- /usr/bin/python3 "$ROOT/scripts/fetch-nccl-releases.py" "$BUILD/nccl-releases"
# PyPI's current PyTorch, the metrics tools (W&B, MLflow, TensorBoard) and the training frameworks
# (transformers, Accelerate, Lightning), pinned, in a virtual environment kept in the build folder:
# the tests of traintime.torch, traintime.hf, traintime.lightning and traintime.metrics().
tt_phase "test.sh: PyPI environment" -- /usr/bin/python3 "$ROOT/scripts/pyenv.py" "$BUILD/pyenv"
# HolisticTraceAnalysis in an environment of its own (pyenv.py --set hta, cached by its pins the
# same way): tests/sim/tests/test_hta.py compares traintime's figures with HTA's.
tt_phase "test.sh: HTA environment" -- /usr/bin/python3 "$ROOT/scripts/pyenv.py" "$BUILD/htaenv" --set hta
tt_phase "test.sh: build (Release, -Werror)" -- "$ROOT/scripts/build.sh" -DTRAINTIME_WERROR=ON
# shellcheck source=mpi-env.sh
. "$ROOT/scripts/mpi-env.sh"
# ctest-results.xml: each test's time, which the phase table sums by label (scripts/ci_times.py).
tt_phase "test.sh: ctest" --ctest "$BUILD" 10 -- ctest --test-dir "$BUILD" --output-on-failure \
  -j "${TRAINTIME_TEST_JOBS:-2}" --output-junit "$BUILD/ctest-results.xml"
