#!/usr/bin/env bash
# CI entry point: installs missing dependencies, builds build/ with -Werror, runs every test.
# Exits non-zero on any failure. Works from any directory (TRAINTIME_BUILD_DIR: see build.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/install-deps.sh"
# The released libcupti of every CUPTI 12.x the adapter decodes (PyPI wheels, cached in the build
# folder): tests/cupti checks each one without a GPU.
BUILD="${TRAINTIME_BUILD_DIR:-$ROOT/build}"
/usr/bin/python3 "$ROOT/scripts/fetch-cupti-releases.py" "$BUILD/cupti-releases"
"$ROOT/scripts/build.sh" -DTRAINTIME_WERROR=ON
# shellcheck source=mpi-env.sh
. "$ROOT/scripts/mpi-env.sh"
cd "$BUILD"
ctest --output-on-failure -j "${TRAINTIME_TEST_JOBS:-2}"
