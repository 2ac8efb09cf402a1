#!/usr/bin/env bash
# Measures the DESIGN §9 budgets and prints one table: what, measured, budget, verdict.
# Performance claims about traintime come from this script only, never from timed tests.
#
#   scripts/bench.sh [--smoke] [--no-build] [--baseline FILE] [--merge-ranks N] [--lib FILE]
#                    [--rounds N] [--touched ROWS|none]
#
# Every budget that can be a ratio is measured as one, in one run on this machine: annotation
# cost against two raw counter reads (rdtsc) timed in the same process (repetitions
# interleaved; a clock_gettime pair is printed for reference), wrapper and callback cost as the
# difference between runs of the same binary with and without the preload (or a bare CUPTI
# tracer), started in alternating order and paired run by run so drift in the machine's speed
# cancels; the median pair is judged and the spread printed. Rows measured against simgpu say
# SIMULATED; rows this machine cannot measure say so.
# Every row is measured in ROUNDS rounds (--rounds, default 3) within the one invocation, each
# round a complete pass over the rows, and the best round of each row is judged
# (scripts/bench_rounds.py): the table shows the figures' spread over the rounds and how far the
# reference rows (two counter reads, a clock_gettime pair) drifted, per round and against
# --baseline; a row that misses only because the references slowed as much (against the
# baseline) and that the change did not touch (--touched ROW,ROW: the results.json keys of the
# rows it did; none: no row) is marked noise, not MISSED. A full run takes about 15 minutes.
# --smoke runs every benchmark very briefly (CTest uses it to prove that all of them run and
# that their output parses); its figures are not judged. --no-build uses the build as it is.
# --baseline FILE compares the run with an earlier one's results.json (bench/baseline.json is
# the committed one; bench/baseline-xeon.json for the Xeon VMs): per row the change and whether it
# is beyond the spread both runs measured.
# --merge-ranks N merges N rank files instead of 16384 (a quick check; the row is then not
# judged). --lib FILE preloads another build of libtraintime.so in every preloaded row (the wheel's:
# build/wheel/libtraintime.so, from zig and libc++; docs/wheel.md); the benchmark programs stay the
# build's. TRAINTIME_BUILD_DIR picks the build folder (default: build/). Raw results are kept in
# $BUILD/bench-results/, this run's figures in $BUILD/bench-results/results.json (copy it to
# bench/baseline.json to make it the baseline). Exit status: 0 when every measurable row was
# measured (missed budgets are reported in the table, not in the status), 1 when a benchmark
# failed or printed nothing usable, 2 on bad arguments.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${TRAINTIME_BUILD_DIR:-$ROOT/build}"
SMOKE=0
DO_BUILD=1
BASELINE=()
MERGE_RANKS=
LIB_ARG=
ROUNDS=3
TOUCHED=()
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) SMOKE=1 ;;
    --no-build) DO_BUILD=0 ;;
    --baseline)
      [ $# -ge 2 ] && [ -r "$2" ] || { echo "bench.sh: --baseline needs a readable results file (e.g. bench/baseline.json)" >&2; exit 2; }
      BASELINE=(--baseline "$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"); shift ;;
    --merge-ranks)
      [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --merge-ranks needs a positive number of ranks" >&2; exit 2; }
      MERGE_RANKS=$2; shift ;;
    --lib)
      [ $# -ge 2 ] && [ -r "$2" ] || { echo "bench.sh: --lib needs a readable libtraintime.so (e.g. build/wheel/libtraintime.so)" >&2; exit 2; }
      LIB_ARG="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift ;;
    --rounds)
      [[ "${2:-}" =~ ^[1-9]$ ]] || { echo "bench.sh: --rounds needs a number of rounds from 1 to 9" >&2; exit 2; }
      ROUNDS=$2; shift ;;
    --touched)
      [[ "${2:-}" =~ ^[a-z0-9_,]+$ ]] || { echo "bench.sh: --touched needs row keys of results.json, comma-separated, or none" >&2; exit 2; }
      TOUCHED=(--touched "$2"); shift ;;
    -h|--help) sed -n '2,35p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ "$DO_BUILD" = 1 ]; then
  "$ROOT/scripts/build.sh" >/dev/null
fi

BIN="$BUILD/bench"
LIB="${LIB_ARG:-$BUILD/lib/libtraintime.so}"
SIM="$BUILD/sim"
OUT_ROOT="$BUILD/bench-results"
OUT="$OUT_ROOT"  # each round's folder while it runs (run, gbench)
rm -rf "$OUT_ROOT"
mkdir -p "$OUT_ROOT"

if [ "$SMOKE" = 1 ]; then
  ROUNDS=1
  GB=(--benchmark_min_time=0.01)
  PAIRED_GB=(--benchmark_min_time=0.01)
  PAIRS=1
  KERNELS=100000
  SPAWN_RUNS=5
else
  # Per round: the best of the rounds is judged, so each round is shorter than a single run was.
  GB=(--benchmark_min_time=0.5 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
      --benchmark_enable_random_interleaving=true)
  PAIRED_GB=(--benchmark_min_time=0.5)
  PAIRS=5
  KERNELS=10000000
  SPAWN_RUNS=100
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

# 3-4. Differences between processes, started in rotating order and paired run by run.
# 3: NCCL wrappers against the SIMULATED libnccl (world size 1, in place: nothing launched).
# 4: launch callback on the SIMULATED GPU: no tool, a bare CUPTI tracer, traintime.
# 4b: a real job's launch rate: the densest real trace (TRAINTIME_REAL_TRACES, else
#     ../shared/data/real-traces beside the repository) replayed by sim_replay as fast as it goes,
#     without and with traintime, both on the SIMULATED GPU and its CUPTI; the whole process's CPU
#     time after set-up (its rusage less what sim_replay --stats says parsing and set-up took).
SIMENV=("LD_LIBRARY_PATH=$SIM" "TRAINTIME_CUPTI_LIB=$SIM/libcupti.so.13")
REPLAY="$BUILD/bin/sim_replay"
TRACES="${TRAINTIME_REAL_TRACES:-$ROOT/../shared/data/real-traces}"
REPLAY_TRACE=
if [ -x "$REPLAY" ] && [ -d "$TRACES" ]; then
  # The densest trace: the most launch calls per recorded second.
  best=0
  for t in "$TRACES"/*.json "$TRACES"/*.json.gz; do
    [ -f "$t" ] || continue
    if env "${SIMENV[@]}" RANK=0 WORLD_SIZE=1 "$REPLAY" "$t" --speed max --stats "$OUT_ROOT/replay_probe.json" \
         >/dev/null 2>>"$OUT_ROOT/replay_probe.err"; then
      rate=$(/usr/bin/python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["launches_per_s"]))' \
               "$OUT_ROOT/replay_probe.json")
      if [ "$rate" -gt "$best" ]; then best=$rate; REPLAY_TRACE=$t; fi
    fi
  done
  rm -f "$OUT_ROOT/replay_probe.json"
fi
if [ -z "$REPLAY_TRACE" ]; then
  echo "bench.sh: no real trace replayed (sim_replay built? traces in $TRACES?): the replay row is left out" >&2
fi
# replay_run NAME [ENV=VALUE...]: one replay, its CPU time and --stats into $OUT/NAME.json.
replay_run() {
  local name=$1; shift
  run "$name" "$@" "TRAINTIME_OUTPUT=$OUT/rank-$name" RANK=0 WORLD_SIZE=1 -- /usr/bin/python3 -c '
import json, resource, subprocess, sys
out, stats = sys.argv[1], sys.argv[2]
rc = subprocess.run(sys.argv[3:], stdout=subprocess.DEVNULL).returncode
u = resource.getrusage(resource.RUSAGE_CHILDREN)
doc = json.load(open(stats))
doc["cpu_ns_total"] = int((u.ru_utime + u.ru_stime) * 1e9)
doc["rc"] = rc
json.dump(doc, open(out, "w"))
sys.exit(rc)' "$OUT/$name.json" "$OUT/$name.stats" "$REPLAY" "$REPLAY_TRACE" --speed max --stats "$OUT/$name.stats"
}
variant() {
  case "$1" in
    # The wrapper rows measure the wrappers alone: NCCL's profiler plugin (libtraintime.so's own,
    # nccl/src/profiler_plugin.h) is kept out, as its callbacks are not the wrapper's cost.
    nccl_bare) gbench "nccl_bare_$2" bench_sim_nccl "${SIMENV[@]}" NCCL_PROFILER_PLUGIN=none ;;
    nccl_preloaded) gbench "nccl_preloaded_$2" bench_sim_nccl "${SIMENV[@]}" NCCL_PROFILER_PLUGIN=none "LD_PRELOAD=$LIB" ;;
    launch_bare) gbench "launch_bare_$2" bench_sim_launch "${SIMENV[@]}" ;;
    launch_tracer) gbench "launch_tracer_$2" bench_sim_launch "${SIMENV[@]}" \
                     "CUDA_INJECTION64_PATH=$BIN/libbench_bare_cupti_tracer.so" ;;
    launch_traintime) gbench "launch_traintime_$2" bench_sim_launch "${SIMENV[@]}" "LD_PRELOAD=$LIB" ;;
    replay_bare) [ -z "$REPLAY_TRACE" ] || replay_run "replay_bare_$2" "${SIMENV[@]}" ;;
    replay_traintime) [ -z "$REPLAY_TRACE" ] || replay_run "replay_traintime_$2" "${SIMENV[@]}" "LD_PRELOAD=$LIB" ;;
  esac
}

# 8. Report merge: traintime-report over the rank files of one 16384-rank, 50-step job (64 ranks
# in a smoke run; --merge-ranks N), copies of the rank file that sim_train --steps 50 writes as
# rank 0 of 4 on the SIMULATED GPU, with its collectives (tools/make_rank_files.py; about 900 MB
# at 16384 ranks), made once for every round. Wall time and the report's peak RSS into
# $OUT/report_merge.out as JSON, each round.
REPORT="$BUILD/bin/traintime-report"
MERGE_STEPS=50
if [ -z "$MERGE_RANKS" ]; then
  MERGE_RANKS=16384
  [ "$SMOKE" = 1 ] && MERGE_RANKS=64
fi
merge_dir="$OUT_ROOT/report-merge"
have_merge=0
if [ -x "$REPORT" ] && [ -x "$BUILD/bin/sim_train" ]; then
  have_merge=1
  run report_template "LD_LIBRARY_PATH=$SIM" "LD_PRELOAD=$LIB" "TRAINTIME_CUPTI_LIB=$SIM/libcupti.so.13" \
    "TRAINTIME_OUTPUT=$merge_dir/template" RANK=0 WORLD_SIZE=4 -- "$BUILD/bin/sim_train" --steps "$MERGE_STEPS"
  run report_files -- /usr/bin/python3 "$ROOT/tools/make_rank_files.py" "$merge_dir/template/rank-00000.json" \
    "$merge_dir/ranks" --ranks "$MERGE_RANKS"
  sync
fi

# One round: every row once, into $OUT.
measure_round() {
echo "bench.sh: measuring (results in $OUT) ..." >&2

# 1-2. Annotation: the same binary with and without the preload.
gbench annotation_preloaded bench_annotation "LD_PRELOAD=$LIB"
gbench annotation_bare bench_annotation

# 2b. NCCL's profiler plugin: libtraintime.so's callbacks for one collective as NCCL calls them,
# on the calling thread and (its own row) on NCCL's proxy thread.
gbench nccl_plugin bench_nccl_plugin "LD_PRELOAD=$LIB"

# 3-4. The paired process runs (variant above).
GB_PAIRED=1
for i in $(seq 1 "$PAIRS"); do
  if [ $((i % 2)) = 1 ]; then nccl=(nccl_bare nccl_preloaded); else nccl=(nccl_preloaded nccl_bare); fi
  case $((i % 3)) in
    1) launch=(launch_bare launch_tracer launch_traintime) ;;
    2) launch=(launch_traintime launch_bare launch_tracer) ;;
    0) launch=(launch_tracer launch_traintime launch_bare) ;;
  esac
  if [ $((i % 2)) = 1 ]; then replay=(replay_bare replay_traintime); else replay=(replay_traintime replay_bare); fi
  for v in "${nccl[@]}" "${launch[@]}" "${replay[@]}"; do variant "$v" "$i"; done
done
GB_PAIRED=

# 5. Ingest on one core.
gbench ingest bench_ingest

# 5b. NCCL's proxy thread calling traintime's profiler plugin, against a plugin doing nothing.
gbench proxy_progress bench_proxy_progress

# 6. Memory growth after N kernels.
run memory -- "$BIN/bench_memory_growth" "$KERNELS"
run memory_names -- "$BIN/bench_memory_growth" "$KERNELS" 100000

# 7. Inert process.
run spawn -- "$BIN/bench_spawn" --runs "$SPAWN_RUNS" --preload "$LIB" -- /bin/true

# 7b. The GPU health sampler's own thread CPU time against wall time in its steady state, from
# 1 s after it started, with a thread that only wakes as often beside it (SIMULATED NVML).
if [ -x "$BIN/bench_nvml_sampler" ]; then
  if [ "$SMOKE" = 1 ]; then nvml_s=(1 100 0.2); else nvml_s=(20 100 1); fi
  run nvml_sampler -- "$BIN/bench_nvml_sampler" "${nvml_s[@]}"
fi

# 8. Report merge (the files made above).
if [ "$have_merge" = 1 ]; then
  # The report's own wall time and peak RSS (the child's ru_maxrss, in KiB).
  run report_merge_run -- /usr/bin/python3 -c '
import json, resource, subprocess, sys, time
t0 = time.monotonic()
rc = subprocess.run(sys.argv[2:]).returncode
wall = time.monotonic() - t0
json.dump({"wall_s": wall, "max_rss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "rc": rc},
          open(sys.argv[1], "w"))
sys.exit(rc)' "$merge_dir/measured.json" "$REPORT" "$merge_dir/ranks" --format json -o "$merge_dir/summary.json"
  merged=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ranks"])' \
             "$merge_dir/summary.json" 2>/dev/null || echo 0)
  bytes=$(du -sb "$merge_dir/ranks" | cut -f1)
  /usr/bin/python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
print(json.dumps({"ranks": int(sys.argv[2]), "steps": int(sys.argv[3]), "merged": int(sys.argv[4]),
                  "bytes": int(sys.argv[5]), "wall_s": round(m["wall_s"], 3), "max_rss_kb": m["max_rss_kb"],
                  "cores": int(sys.argv[6])}))' "$merge_dir/measured.json" "$MERGE_RANKS" "$MERGE_STEPS" \
    "$merged" "$bytes" "$(nproc)" >"$OUT/report_merge.out" 2>"$OUT/report_merge.err" || failed=1
  echo "bench.sh: report merge: $(cat "$OUT/report_merge.out")" >&2
  [ "$merged" = "$MERGE_RANKS" ] || { echo "bench.sh: report merge merged $merged of $MERGE_RANKS" >&2; failed=1; }
  # 8b. traintime-report --watch refreshing the same job, 1 % of its files replaced each time
  # (bench_watch_refresh): through its parse cache, and once parsing every file again.
  if [ -x "$BIN/bench_watch_refresh" ]; then
    run watch_refresh -- "$BIN/bench_watch_refresh" "$merge_dir/ranks" 1 3
  fi
fi
}

if [ "$ROUNDS" = 1 ]; then
  measure_round
else
  for round in $(seq 1 "$ROUNDS"); do
    OUT="$OUT_ROOT/round-$round"
    mkdir -p "$OUT"
    measure_round
  done
  OUT="$OUT_ROOT"
fi
rm -rf "$merge_dir/ranks"

loadavg=$(cut -d' ' -f1-3 /proc/loadavg)
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$ROOT" diff --quiet HEAD 2>/dev/null || commit="$commit+changes"
if [ "$ROUNDS" = 1 ]; then
  "$ROOT/scripts/bench_summary.py" "$OUT" "$SMOKE" "$REPORT" "$(nproc)" "$loadavg" "$cpu" "$failed" \
    --commit "$commit" "${BASELINE[@]}"
else
  "$ROOT/scripts/bench_rounds.py" "$OUT_ROOT" "$ROUNDS" "$REPORT" "$(nproc)" "$loadavg" "$cpu" "$failed" \
    --commit "$commit" "${BASELINE[@]}" "${TOUCHED[@]}"
fi
