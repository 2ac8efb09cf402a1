#!/usr/bin/env bash
# Measures the DESIGN §9 budgets and prints one table: what, measured, budget, verdict.
# Performance claims about traintime come from this script only, never from timed tests.
#
#   scripts/bench.sh [--smoke] [--no-build]
#
# Every budget that can be a ratio is measured as one, in one run on this machine: annotation
# cost against two clock_gettime calls timed in the same process (repetitions interleaved), wrapper
# and callback cost as the difference between runs of the same binary with and without the
# preload (or a bare CUPTI tracer), started in alternating order and paired run by run so drift
# in the machine's speed cancels; the median pair is judged and the spread printed. Rows measured
# against simgpu say SIMULATED; rows this machine cannot measure say so.
# --smoke runs every benchmark very briefly (CTest uses it to prove that all of them run and
# that their output parses); its figures are not judged. --no-build uses the build as it is.
# TRAINTIME_BUILD_DIR picks the build folder (default: build/). Raw results are kept in
# $BUILD/bench-results/. Exit status: 0 when every measurable row was measured (missed budgets
# are reported in the table, not in the status), 1 when a benchmark failed or printed nothing
# usable, 2 on bad arguments.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${TRAINTIME_BUILD_DIR:-$ROOT/build}"
SMOKE=0
DO_BUILD=1
for arg in "$@"; do
  case "$arg" in
    --smoke) SMOKE=1 ;;
    --no-build) DO_BUILD=0 ;;
    -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

if [ "$DO_BUILD" = 1 ]; then
  "$ROOT/scripts/build.sh" >/dev/null
fi

BIN="$BUILD/bench"
LIB="$BUILD/lib/libtraintime.so"
SIM="$BUILD/sim"
OUT="$BUILD/bench-results"
rm -rf "$OUT"
mkdir -p "$OUT"

if [ "$SMOKE" = 1 ]; then
  GB=(--benchmark_min_time=0.01)
  PAIRED_GB=(--benchmark_min_time=0.01)
  PAIRS=1
  KERNELS=100000
  SPAWN_RUNS=5
else
  GB=(--benchmark_min_time=1 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
      --benchmark_enable_random_interleaving=true)
  PAIRED_GB=(--benchmark_min_time=1)
  PAIRS=7
  KERNELS=10000000
  SPAWN_RUNS=200
fi

failed=0
# run NAME [ENV=VALUE...] -- COMMAND...: stdout to $OUT/NAME.out, stderr to $OUT/NAME.err.
run() {
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  if ! env "${envs[@]}" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"; then
    echo "bench.sh: $name failed; see $OUT/$name.err" >&2
    failed=1
  fi
}
# gbench NAME BINARY [ENV=VALUE...]: a Google Benchmark binary, JSON into $OUT/NAME.json.
# GB_FLAGS (default GB) are the Google Benchmark flags.
gbench() {
  local name=$1 bin=$2; shift 2
  local flags=("${GB[@]}")
  if [ -n "${GB_PAIRED:-}" ]; then flags=("${PAIRED_GB[@]}"); fi
  if [ ! -x "$BIN/$bin" ]; then
    # Built only with Google Benchmark (libbenchmark-dev), the bench_sim_* ones also only with
    # the tests (simgpu). The table then lacks the row and the status says so.
    echo "bench.sh: $BIN/$bin is not built: install libbenchmark-dev (scripts/install-deps.sh)" \
         "and configure with TRAINTIME_BUILD_TESTS=ON" >&2
    failed=1
    return
  fi
  run "$name" "TRAINTIME_OUTPUT=$OUT/rank-$name" "$@" -- "$BIN/$bin" "${flags[@]}" \
    --benchmark_out="$OUT/$name.json" --benchmark_out_format=json
}

echo "bench.sh: measuring (results in $OUT) ..." >&2

# 1-2. Annotation: the same binary with and without the preload.
gbench annotation_preloaded bench_annotation "LD_PRELOAD=$LIB"
gbench annotation_bare bench_annotation

# 3-4. Differences between processes, started in rotating order and paired run by run.
# 3: NCCL wrappers against the SIMULATED libnccl (world size 1, in place: nothing launched).
# 4: launch callback on the SIMULATED GPU: no tool, a bare CUPTI tracer, traintime.
SIMENV=("LD_LIBRARY_PATH=$SIM" "TRAINTIME_CUPTI_LIB=$SIM/libcupti.so.13")
variant() {
  case "$1" in
    nccl_bare) gbench "nccl_bare_$2" bench_sim_nccl "${SIMENV[@]}" ;;
    nccl_preloaded) gbench "nccl_preloaded_$2" bench_sim_nccl "${SIMENV[@]}" "LD_PRELOAD=$LIB" ;;
    launch_bare) gbench "launch_bare_$2" bench_sim_launch "${SIMENV[@]}" ;;
    launch_tracer) gbench "launch_tracer_$2" bench_sim_launch "${SIMENV[@]}" \
                     "CUDA_INJECTION64_PATH=$BIN/libbench_bare_cupti_tracer.so" ;;
    launch_traintime) gbench "launch_traintime_$2" bench_sim_launch "${SIMENV[@]}" "LD_PRELOAD=$LIB" ;;
  esac
}
GB_PAIRED=1
for i in $(seq 1 "$PAIRS"); do
  if [ $((i % 2)) = 1 ]; then nccl=(nccl_bare nccl_preloaded); else nccl=(nccl_preloaded nccl_bare); fi
  case $((i % 3)) in
    1) launch=(launch_bare launch_tracer launch_traintime) ;;
    2) launch=(launch_traintime launch_bare launch_tracer) ;;
    0) launch=(launch_tracer launch_traintime launch_bare) ;;
  esac
  for v in "${nccl[@]}" "${launch[@]}"; do variant "$v" "$i"; done
done
GB_PAIRED=

# 5. Ingest on one core.
gbench ingest bench_ingest

# 6. Memory growth after N kernels.
run memory -- "$BIN/bench_memory_growth" "$KERNELS"
run memory_names -- "$BIN/bench_memory_growth" "$KERNELS" 100000

# 7. Inert process.
run spawn -- "$BIN/bench_spawn" --runs "$SPAWN_RUNS" --preload "$LIB" -- /bin/true

# 8. Report merge: traintime-report over synthetic rank files of one job (4096; 64 in a smoke run),
# copies of one rank file that sim_train writes as rank 0 of 4 on the SIMULATED GPU, with its
# collectives (tools/make_rank_files.py).
# Wall time into $OUT/report_merge.out as JSON.
REPORT="$BUILD/bin/traintime-report"
MERGE_RANKS=4096
[ "$SMOKE" = 1 ] && MERGE_RANKS=64
if [ -x "$REPORT" ] && [ -x "$BUILD/bin/sim_train" ]; then
  merge_dir="$OUT/report-merge"
  run report_template "LD_LIBRARY_PATH=$SIM" "LD_PRELOAD=$LIB" "TRAINTIME_CUPTI_LIB=$SIM/libcupti.so.13" \
    "TRAINTIME_OUTPUT=$merge_dir/template" RANK=0 WORLD_SIZE=4 -- "$BUILD/bin/sim_train" --steps 20
  run report_files -- /usr/bin/python3 "$ROOT/tools/make_rank_files.py" "$merge_dir/template/rank-00000.json" \
    "$merge_dir/ranks" --ranks "$MERGE_RANKS"
  sync
  t0=$(date +%s%N)
  run report_merge_run -- "$REPORT" "$merge_dir/ranks" --format json -o "$merge_dir/summary.json"
  t1=$(date +%s%N)
  merged=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ranks"])' \
             "$merge_dir/summary.json" 2>/dev/null || echo 0)
  bytes=$(du -sb "$merge_dir/ranks" | cut -f1)
  printf '{"ranks": %s, "merged": %s, "bytes": %s, "wall_s": %s, "cores": %s}\n' "$MERGE_RANKS" "$merged" \
    "$bytes" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')" "$(nproc)" \
    >"$OUT/report_merge.out"
  echo "bench.sh: report merge: $(cat "$OUT/report_merge.out")" >&2
  [ "$merged" = "$MERGE_RANKS" ] || { echo "bench.sh: report merge merged $merged of $MERGE_RANKS" >&2; failed=1; }
  rm -rf "$merge_dir/ranks"
fi

loadavg=$(cut -d' ' -f1-3 /proc/loadavg)
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
"$ROOT/scripts/bench_summary.py" "$OUT" "$SMOKE" "$REPORT" "$(nproc)" "$loadavg" "$cpu" "$failed"
