#!/usr/bin/env bash
# Sanitizer builds and runs (DESIGN §8); .ci/run runs `all` after the tests.
#
#   scripts/sanitize.sh asan|tsan|all
#
# asan: build-asan/ with ASan+UBSan (-DTRAINTIME_SANITIZE=asan); tsan: build-tsan/ with TSan.
# In each folder it runs:
#   1. the CTest tests that build registers, without the ones that start mpirun. DESIGN §8 runs
#      mpirun end-to-end tests on the Release build only: an instrumented library preloaded into
#      mpirun, orted and every rank needs the sanitizer runtime preloaded everywhere. The e2e,
#      demo and simulated-NCCL folders already register nothing in a sanitizer build; here the
#      multi-rank capture tests and the bench smoke test (timing, not correctness) are left out.
#   2. single-process simgpu runs (SIMULATED GPU): sim_train plain, --graphs and --nvtx under
#      LD_PRELOAD of the instrumented libtraintime.so (sanitizer runtime preloaded first), each
#      rank file compared with sim_train's truth by tests/sim/compare_truth.py.
# Any sanitizer report fails the run (halt_on_error, leaks included). The CUDA examples are not
# built (nvcc takes no -fsanitize, and they need a GPU), nor are the benchmarks (timing, not
# correctness). Works from any directory. Exit status:
# 0 clean, 1 a build, test, report or comparison failed, 2 bad usage.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

case "${1:-}" in
  asan|tsan) KINDS=("$1") ;;
  all) KINDS=(asan tsan) ;;
  -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: scripts/sanitize.sh asan|tsan|all" >&2; exit 2 ;;
esac

# Tests that start mpirun (several ranks) or only time things.
EXCLUDE='mpirun|_np[0-9]|trace_matches_reference_breakdown|^bench_'
STEPS=20

# shellcheck source=phase.sh
. "$ROOT/scripts/phase.sh"
tt_phase "sanitize.sh: Debian packages" -- "$ROOT/scripts/install-deps.sh"
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=python3

export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0:verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# die_after_fork=0: a forked child that records starts a writer thread, which TSan refuses by
# default after a multi-threaded fork (a TSan limitation, not a race).
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:die_after_fork=0${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

failed=()
for kind in "${KINDS[@]}"; do
  BUILD="$ROOT/build-$kind"
  echo "== $kind: building $BUILD"
  # Variables for the command go through env: set before tt_phase, they would reach its own helpers.
  if ! tt_phase "$kind: build" -- env TRAINTIME_BUILD_DIR="$BUILD" TRAINTIME_JOBS="${TRAINTIME_JOBS:-2}" \
      "$ROOT/scripts/build.sh" -DTRAINTIME_SANITIZE="$kind" -DTRAINTIME_WERROR=ON \
      -DTRAINTIME_BUILD_CUDA_EXAMPLES=OFF -DTRAINTIME_BUILD_BENCH=OFF; then
    failed+=("$kind: build")
    continue
  fi

  echo "== $kind: CTest without mpirun and bench tests (-E '$EXCLUDE')"
  tt_phase "$kind: ctest" --ctest "$BUILD" 5 -- ctest --test-dir "$BUILD" --output-on-failure \
    -j "${TRAINTIME_TEST_JOBS:-2}" -E "$EXCLUDE" --output-junit "$BUILD/ctest-results.xml" ||
    failed+=("$kind: ctest")

  # The runtime first in LD_PRELOAD: the sanitizer must see the process before the profiler does.
  runtime="$(g++ -print-file-name="lib$kind.so")"
  [ -e "$runtime" ] || { failed+=("$kind: g++ has no lib$kind.so"); continue; }
  work="$BUILD/sanitize-runs"
  for mode in plain --graphs --nvtx; do
    out="$work/${mode#--}"
    rm -rf "$out" && mkdir -p "$out"
    args=(--steps "$STEPS" --truth "$out/truth.json")
    [ "$mode" = plain ] || args+=("$mode")
    echo "== $kind: sim_train ${args[*]} (SIMULATED GPU) under LD_PRELOAD of the $kind libtraintime.so"
    if tt_phase "$kind: sim_train ${mode#--}" -- env LD_LIBRARY_PATH="$BUILD/sim" \
        LD_PRELOAD="$runtime $BUILD/lib/libtraintime.so" TRAINTIME_CUPTI_LIB="$BUILD/sim/libcupti.so.13" \
        TRAINTIME_OUTPUT="$out" "$BUILD/bin/sim_train" "${args[@]}"; then
      "$PYTHON" "$ROOT/tests/sim/compare_truth.py" "$out/rank-00000.json" "$out/truth.json" ||
        failed+=("$kind: sim_train $mode differs from its truth")
    else
      failed+=("$kind: sim_train $mode exited with status $? (sanitizer report above?)")
    fi
  done
done

echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "sanitize.sh: ${KINDS[*]} clean"
  exit 0
fi
echo "sanitize.sh: FAILED:"
printf '  %s\n' "${failed[@]}"
exit 1
