#!/usr/bin/env bash
# Configures and builds the Release build into build/ (DESIGN §0). Extra arguments go to the
# CMake configure step (e.g. -DTRAINTIME_WERROR=ON). Works from any directory.
# TRAINTIME_BUILD_DIR picks another build folder (default: build/ in the repository). The
# repository is where this script really is (cd -P): a link to scripts/ builds the same tree.
set -euo pipefail
ROOT="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${TRAINTIME_JOBS:-$(nproc 2>/dev/null || echo 2)}"
BUILD="${TRAINTIME_BUILD_DIR:-$ROOT/build}"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$BUILD" -j "$JOBS"
