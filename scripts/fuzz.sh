#!/usr/bin/env bash
# libFuzzer runs of the parsers and the decoder (DESIGN §8): the rank-file reader (and its two
# parsers against each other: the report's simdjson, the library's nlohmann), the TRAINTIME_*
# config, the category and NVTX rules, and the CUPTI activity decoder (tests/fuzz).
#
#   scripts/fuzz.sh [SECONDS]
#
# Builds build-fuzz/ with clang-14 (-DTRAINTIME_SANITIZE=fuzz: coverage, ASan, UBSan) and runs
# each target for SECONDS (default 30; CI runs a short smoke) from its committed seed corpus,
# tests/fuzz/corpus/<target>/, into a scratch corpus under build-fuzz/ (the committed one is never
# changed; add a new crash reproducer there by hand once fixed). Exit status: 0 no finding, 1 a
# build failed or a target crashed (the reproducer's path is printed), 2 bad usage.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_PER_TARGET="${1:-30}"
case "$SECONDS_PER_TARGET" in
  ''|*[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS]" >&2; exit 2 ;;
esac

# shellcheck source=phase.sh
. "$ROOT/scripts/phase.sh"
tt_phase "fuzz.sh: Debian packages" -- "$ROOT/scripts/install-deps.sh" clang-14 libclang-rt-14-dev
BUILD="$ROOT/build-fuzz"
TARGETS=(fuzz_rank_file fuzz_rank_file_differential fuzz_config fuzz_category_rules fuzz_activity_decoder)
build() {
  CC=clang-14 CXX=clang++-14 cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTRAINTIME_SANITIZE=fuzz -DTRAINTIME_WERROR=ON >/dev/null
  cmake --build "$BUILD" -j "${TRAINTIME_JOBS:-2}" --target "${TARGETS[@]}"
}
tt_phase "fuzz: build" -- build

export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
failed=()
for target in "${TARGETS[@]}"; do
  work="$BUILD/fuzz-runs/$target"
  rm -rf "$work" && mkdir -p "$work/corpus"
  echo "== $target: ${SECONDS_PER_TARGET}s from tests/fuzz/corpus/$target"
  # -max_len 10 MB for the rank file (a huge one must be handled), 64 KiB elsewhere.
  max_len=65536
  [ "$target" = fuzz_rank_file ] && max_len=$((10 << 20))
  [ "$target" = fuzz_rank_file_differential ] && max_len=$((1 << 20))
  if ! (cd "$work" && tt_phase "fuzz: $target" -- "$BUILD/bin/$target" -max_total_time="$SECONDS_PER_TARGET" \
          -timeout=20 -rss_limit_mb=4096 -max_len="$max_len" -print_final_stats=1 \
          corpus "$ROOT/tests/fuzz/corpus/$target" > log.txt 2>&1); then
    tail -n 40 "$work/log.txt"
    failed+=("$target (log: $work/log.txt; reproducer: $(ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* 2>/dev/null | head -1))")
  else
    grep -E '^stat::number_of_executed_units' "$work/log.txt" || true
  fi
done

if [ ${#failed[@]} -eq 0 ]; then
  echo "fuzz.sh: no findings"
  exit 0
fi
echo "fuzz.sh: FAILED:"
printf '  %s\n' "${failed[@]}"
exit 1
