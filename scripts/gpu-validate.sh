#!/usr/bin/env bash
# gpu-validate.sh — check traintime against CUDA events on a real GPU (DESIGN §8, docs/validation.md).
#
# Two halves, because the GPU machine may have no network, compilers or cmake:
#
#   scripts/gpu-validate.sh --build [--build-dir DIR]
#       HERE (a machine with the CUDA toolkit, no GPU needed): configure and build the Release
#       tree with the CUDA examples into build/ (or DIR): lib/libtraintime.so, bin/cuda_mlp,
#       bin/nccl_sweep (and bin/*_mpi when MPI is installed), and for scripts/gpu_overhead.py
#       bin/gpu_launch_loop and lib/libgpu_bare_cupti_tracer.so. Carry DIR/lib and DIR/bin.
#
#   scripts/gpu-validate.sh [--tree DIR] [--steps N] [--mlp-steps N] [--launcher auto|mpirun|direct]
#                           [--budget SECONDS] [--overhead-repeats R] [--overhead-limit SECONDS]
#                           [--cupti-releases DIR] [--only RUN,...] [--skip-sweep] [--skip-torch]
#       THERE (the GPU machine), from the repository root with the carried tree (DIR defaults to
#       build/, else build-gpu/). Runs, each under LD_PRELOAD=DIR/lib/libtraintime.so, in order of
#       value (a device lease is short; docs/validation.md, "Plan"):
#         1. cuda_mlp (cuBLAS MLP, one stream; --mlp-steps, default 60) with mpirun -np 1 when
#            mpirun exists, else directly. World size 1: with one GPU NCCL runs at world size 1
#            and launches no collective kernel, so no bandwidth is claimed anywhere in this
#            validation. scripts/compare_events.py then compares every region's
#            regions[].gpu_span_ns in the rank file with the CUDA-event total of the same region
#            in the same run: within 1 % on regions of >= 1 ms per entry. Disagreement fails the
#            validation. nvidia-smi samples the GPU beside it: `health` (gpu_health vs nvidia-smi).
#         2. When python3 has torch with CUDA, examples/torch_loop.py --api region: judged like
#            cuda_mlp; `context` (nothing unattributed, no launch context lost, correlation ids
#            per launch callback, the CUPTI used) and `live` (traintime.metrics() published GPU
#            steps mid-run, no late record).
#         3. With --overhead-repeats R (>= 3): scripts/gpu_overhead.py, traintime's overhead three
#            ways (no tool, a bare CUPTI tracer, traintime) on the training step and a launch-bound
#            loop, R repeats within --overhead-limit seconds (default 240).
#         4. torch_loop --profile-steps: a torch.profiler session mid-run, scheduled as users do
#            (ProfilerStep#N per step); judged like cuda_mlp, and `profiler` (its trace has
#            kernels; traintime says it shared CUPTI). Its gzipped trace is kept with the rank file.
#         5. cuda_mlp --abort-after 40: `abort` (died by SIGABRT, its final file written, with the
#            GPU work CUPTI had delivered).
#         6. torch_loop --cuda-graphs: io/optimizer judged like cuda_mlp; `graphs` (the replayed
#            kernels in the regions open at capture, their span vs the replays' events).
#         7. torch_loop under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: judged like
#            cuda_mlp, and `memory` (CUDA virtual memory counted once: memory.peak_bytes vs
#            torch.cuda.max_memory_reserved(); whether CUPTI makes records for VMM calls).
#         8. examples/torch_exit_in_region.py: `exit` (a region opened before CUDA init is open at
#            exit, with work in flight: every kernel is in the exit file).
#         9. With --cupti-releases DIR (DIR/<version>/libcupti.so.*): cuda_mlp --no-nccl with each
#            as TRAINTIME_CUPTI_LIB, judged like cuda_mlp (other CUPTI releases on the real driver).
#        10. nccl_sweep: AllReduce, AllGather, Broadcast, ReduceScatter from 1 KiB to 256 MiB, each
#            call timed with CUDA events; calls and bytes must match (times are shown, not judged:
#            world size 1).
#            `plugin`: NCCL found and initialised traintime's profiler plugin with no user step,
#            its API events arrived, none was counted twice (check_gpu_run.py plugin).
#        11. torch_loop --api instrument (traintime.torch.instrument): printed, not judged.
#       --only runs the named runs alone (cuda_mlp, torch_regions, overhead, torch_profiler,
#       abort, torch_graphs, torch_vmm, torch_exit, cupti, nccl_sweep, torch_instrument).
#       With --budget, a run starts only while its estimated cost fits and is stopped at what is
#       left; the runs not started are named at the end, and results are collected after every
#       run. Prints a table per run (region, traintime ms, events ms, diff %, verdict) and each
#       check's lines. Fixtures are recorded for cuda_mlp, torch_regions and torch_graphs only,
#       with their events.json beside them (CI judges the replays against those events), gzipped.
#
# Environment:
#   TRAINTIME_RECORD_FIXTURE  set by this script to a fresh folder per run; implemented by the
#                             CUPTI adapter, which records the raw CUPTI callbacks and activity
#                             buffers there. Whatever appears is collected as
#                             tests/fixtures/gpu-<date>/<run>/ (for CI to replay).
#   OUT                       when set (the device tool), results go there as at most 4 files:
#                             gpu-validate.log, summary.txt, results.tar.gz (rank files, events
#                             JSON, machine facts) and fixtures-gpu-<date>.tar.gz (extract at
#                             the repository root). Without OUT, fixtures are copied into
#                             tests/fixtures/gpu-<date>/ and results stay in the work folder.
#   TT_NVIDIA_SMI             nvidia-smi to ask (default: the one on PATH).
#   CUDA_ARCHS, JOBS          --build only: CMAKE_CUDA_ARCHITECTURES (default 90), make -j (2).
#
# Exit status: 0 every judged comparison agrees; 1 a disagreement; 2 missing or unusable build,
# tools or output; 3 no usable GPU.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODE=run
BUILD_DIR=$ROOT/build
TREE=
STEPS=20
MLP_STEPS=60
BUDGET=0
OVERHEAD_REPEATS=0
OVERHEAD_LIMIT=240
CUPTI_RELEASES=
ONLY=
SKIP_SWEEP=0
SKIP_TORCH=0
LAUNCHER=auto

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case $1 in
    --build) MODE=build ;;
    --build-dir) BUILD_DIR=$(realpath -m "${2:?--build-dir needs a folder}"); shift ;;
    --tree) TREE=$(realpath -m "${2:?--tree needs a folder}"); shift ;;
    --steps) STEPS=${2:?--steps needs a number}; shift
             [[ $STEPS =~ ^[0-9]+$ ]] && [ "$STEPS" -ge 4 ] ||
               { echo "gpu-validate: --steps wants a whole number >= 4, not '$STEPS'" >&2; exit 2; } ;;
    --mlp-steps) MLP_STEPS=${2:?--mlp-steps needs a number}; shift
             [[ $MLP_STEPS =~ ^[0-9]+$ ]] && [ "$MLP_STEPS" -ge 4 ] ||
               { echo "gpu-validate: --mlp-steps wants a whole number >= 4, not '$MLP_STEPS'" >&2; exit 2; } ;;
    --budget) BUDGET=${2:?--budget needs seconds}; shift
              [[ $BUDGET =~ ^[0-9]+$ ]] ||
                { echo "gpu-validate: --budget wants whole seconds, not '$BUDGET'" >&2; exit 2; } ;;
    --overhead-repeats) OVERHEAD_REPEATS=${2:?--overhead-repeats needs a number}; shift
              [[ $OVERHEAD_REPEATS =~ ^[0-9]+$ ]] && { [ "$OVERHEAD_REPEATS" -eq 0 ] || [ "$OVERHEAD_REPEATS" -ge 3 ]; } ||
                { echo "gpu-validate: --overhead-repeats wants 0 (none) or a whole number >= 3, not '$OVERHEAD_REPEATS'" >&2; exit 2; } ;;
    --overhead-limit) OVERHEAD_LIMIT=${2:?--overhead-limit needs seconds}; shift
              [[ $OVERHEAD_LIMIT =~ ^[0-9]+$ ]] ||
                { echo "gpu-validate: --overhead-limit wants whole seconds, not '$OVERHEAD_LIMIT'" >&2; exit 2; } ;;
    --cupti-releases) CUPTI_RELEASES=$(realpath -m "${2:?--cupti-releases needs a folder}"); shift
              [ -d "$CUPTI_RELEASES" ] ||
                { echo "gpu-validate: --cupti-releases: no folder $CUPTI_RELEASES" >&2; exit 2; } ;;
    --only) ONLY=,${2:?--only needs run names, e.g. cuda_mlp,abort},; shift ;;
    --launcher) LAUNCHER=${2:?--launcher needs auto, mpirun or direct}; shift ;;
    --skip-sweep) SKIP_SWEEP=1 ;;
    --skip-torch) SKIP_TORCH=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-validate: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

die() { local code=$1; shift; echo "gpu-validate: $*" >&2; exit "$code"; }
missing_libs() { ldd "$1" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' '; }

# ------------------------------------------------------------------------------------ --build
if [ "$MODE" = build ]; then
  command -v cmake >/dev/null || die 2 "cmake not found"
  command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] ||
    die 2 "nvcc not found (CUDA toolkit needed to build the CUDA examples)"
  [ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
        -DTRAINTIME_BUILD_CUDA_EXAMPLES=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" ||
    die 2 "configure failed"
  cmake --build "$BUILD_DIR" -j "${JOBS:-2}" || die 2 "build failed"
  # Named again so that a configuration without the CUDA examples fails here, not on the GPU.
  cmake --build "$BUILD_DIR" --target traintime cuda_mlp nccl_sweep gpu_launch_loop gpu_bare_cupti_tracer ||
    die 2 "the CUDA examples were not configured (no CUDA compiler or NCCL found?)"
  for f in lib/libtraintime.so bin/cuda_mlp bin/nccl_sweep bin/gpu_launch_loop lib/libgpu_bare_cupti_tracer.so; do
    [ -f "$BUILD_DIR/$f" ] || die 2 "the build did not produce $BUILD_DIR/$f"
  done
  echo "gpu-validate: built $BUILD_DIR ($(du -sh "$BUILD_DIR/lib" "$BUILD_DIR/bin" | awk '{print $1}' | paste -sd+) in lib+bin)."
  echo "Carry $(realpath --relative-to="$ROOT" "$BUILD_DIR")/lib and $(realpath --relative-to="$ROOT" "$BUILD_DIR")/bin to the GPU machine and run scripts/gpu-validate.sh there."
  exit 0
fi

# ---------------------------------------------------------------------------------- GPU check
SMI=${TT_NVIDIA_SMI:-nvidia-smi}
if ! GPU_LIST=$("$SMI" --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1) ||
   [ -z "$GPU_LIST" ]; then
  die 3 "no usable GPU: '$SMI' failed or found none (${GPU_LIST:-no output}). This script runs on a GPU machine; build with --build first."
fi

if [ -z "$TREE" ]; then
  TREE=$ROOT/build
  [ -f "$TREE/bin/cuda_mlp" ] || TREE=$ROOT/build-gpu
fi
LIB=$TREE/lib/libtraintime.so
for f in "$LIB" "$TREE/bin/cuda_mlp" "$TREE/bin/nccl_sweep"; do
  [ -f "$f" ] || die 2 "$f is missing: build with 'scripts/gpu-validate.sh --build' and carry the tree"
done
command -v python3 >/dev/null || die 2 "python3 is needed for scripts/compare_events.py"

DATE=$(date -u +%Y%m%d)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-validate.XXXXXX")
RESULTS=$WORK/results
FIXTURES=$WORK/fixtures/tests/fixtures/gpu-$DATE
mkdir -p "$RESULTS" "$FIXTURES"
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; LOG=$OUT/gpu-validate.log; SUMMARY=$OUT/summary.txt
else LOG=$WORK/gpu-validate.log; SUMMARY=$WORK/summary.txt; fi
: >"$SUMMARY"
exec > >(tee -a "$LOG") 2>&1
TEE_PID=$!

echo "gpu-validate: $(date -u +%FT%TZ) on $(hostname), tree $TREE, work folder $WORK"
echo "GPU(s): $GPU_LIST"
{
  echo "date: $(date -u +%FT%TZ)"; echo "host: $(hostname)"; echo "uname: $(uname -a)"
  echo "gpus: $GPU_LIST"; "$SMI" 2>&1 || true
} >"$RESULTS/machine.txt"

# Toolkit libraries the examples need (libcublas.so.13, libnccl.so.2): the GPU machine may keep
# them in the CUDA toolkit or only in PyTorch's nvidia-* wheels (scripts/gpu_libs.py finds each
# one ldd misses; gpu_overhead.py uses the same lookup).
libpath=$(python3 "$ROOT/scripts/gpu_libs.py" "$TREE/bin/cuda_mlp" "$TREE/bin/nccl_sweep") ||
  die 2 "the examples cannot load their libraries (the line above names the one missing)"
[ -z "$libpath" ] || export LD_LIBRARY_PATH=$libpath
ldd "$TREE/bin/cuda_mlp" >"$RESULTS/ldd-cuda_mlp.txt" 2>&1

# mpirun -np 1 when there is one; the MPI build only when its libmpi loads here.
LAUNCH=()
MLP=$TREE/bin/cuda_mlp
SWEEP=$TREE/bin/nccl_sweep
case $LAUNCHER in
  auto) command -v mpirun >/dev/null && LAUNCHER=mpirun || LAUNCHER=direct ;;
  mpirun) command -v mpirun >/dev/null || die 2 "--launcher mpirun: mpirun not found" ;;
  direct) ;;
  *) die 2 "--launcher wants auto, mpirun or direct" ;;
esac
if [ "$LAUNCHER" = mpirun ]; then
  LAUNCH=(mpirun -np 1 --oversubscribe -x LD_PRELOAD -x TRAINTIME_OUTPUT -x TRAINTIME_RECORD_FIXTURE)
  [ -n "${LD_LIBRARY_PATH:-}" ] && LAUNCH+=(-x LD_LIBRARY_PATH)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  if [ -f "$TREE/bin/cuda_mlp_mpi" ] && [ -z "$(missing_libs "$TREE/bin/cuda_mlp_mpi")" ]; then
    MLP=$TREE/bin/cuda_mlp_mpi
    [ -f "$TREE/bin/nccl_sweep_mpi" ] && SWEEP=$TREE/bin/nccl_sweep_mpi
  fi
  echo "launcher: mpirun -np 1 ($(basename "$MLP"))"
else
  echo "launcher: none: the programs run directly as rank 0 of 1"
fi
ulimit -c 0  # the abort run must not spend the budget writing a core file
echo "NOTE: one GPU, so NCCL runs at world size 1 and launches no collective kernel;"
echo "      no NCCL bandwidth is measured or claimed by this validation."

STATUS=0
note_status() {  # keeps the worst: 2 (unusable) > 1 (disagreement) > 0
  local s=$1
  [ "$s" -gt 2 ] && s=2
  [ "$s" -gt "$STATUS" ] && STATUS=$s
  return 0
}

# run_profiled NAME CMD...: runs CMD under the profiler with its own output folder, and records
# a fixture when RECORD=1 (the runs whose CUDA events can judge a replay; kept few and small).
RECORD=1
RUNS=0
run_profiled() {
  local name=$1; shift
  mkdir -p "$RESULTS/$name"
  local fixture=
  if [ "$RECORD" = 1 ]; then fixture=$FIXTURES/$name; mkdir -p "$fixture"; fi
  echo
  echo "=== $name: $*"
  local t0; t0=$(date +%s)
  RUNS=$((RUNS + 1))
  LD_PRELOAD=$LIB TRAINTIME_OUTPUT=$RESULTS/$name/traintime-out \
    TRAINTIME_RECORD_FIXTURE=$fixture timeout -k 10 "${RUN_TIMEOUT:-300}" "$@" 2>&1 |
    tee "$RESULTS/$name/stdout.txt"
  local rc=${PIPESTATUS[0]}
  echo "$name: $(($(date +%s) - t0)) s"
  [ "$rc" -eq 0 ] || echo "$name: exited with status $rc$([ "$rc" -eq 124 ] && echo " (stopped after ${RUN_TIMEOUT:-300} s)")"
  return "$rc"
}

# check NAME KIND [options]: scripts/check_gpu_run.py KIND on rank 0's file of run NAME.
check() {
  local name=$1 kind=$2; shift 2
  local rank=$RESULTS/$name/traintime-out/rank-00000.json
  echo "=== $name: $kind" >>"$SUMMARY"
  python3 "$ROOT/scripts/check_gpu_run.py" "$kind" --rank-file "$rank" "$@" 2>&1 | tee -a "$SUMMARY"
  note_status "${PIPESTATUS[0]}"
}

# compare NAME [extra compare_events.py options]: rank 0's file against rank 0's events.
compare() {
  local name=$1; shift
  local rank=$RESULTS/$name/traintime-out/rank-00000.json events=$RESULTS/$name/events-0.json
  { echo "=== $name"; } >>"$SUMMARY"
  if [ ! -f "$rank" ]; then
    echo "$name: no rank file at $rank (was libtraintime.so loaded?)" | tee -a "$SUMMARY"
    note_status 2; return
  fi
  python3 "$ROOT/scripts/compare_events.py" --rank-file "$rank" --events "$events" \
    --table-out "$SUMMARY" "$@"
  note_status $?
}

# ------------------------------------------------------------------------------- time budget
# The runs go in order of value (docs/validation.md, "Plan"): accuracy and the training-step
# overhead first. With --budget, a run starts only when its estimated cost still fits, each run
# is stopped at what is left, and the results are collected into $OUT after every run, so a
# device call cut short still brings back everything finished before.
T0=$(date +%s)
left() { if [ "$BUDGET" -gt 0 ]; then echo $((BUDGET - ($(date +%s) - T0))); else echo 100000; fi; }
# fits NAME EST: true when a run estimated at EST seconds still fits; says so in the summary when not.
fits() {
  # --only NAMES: the other runs are left out (cupti_<version> runs answer to "cupti").
  if [ -n "$ONLY" ] && [[ $ONLY != *",$1,"* ]] && { [[ $1 != cupti_* ]] || [[ $ONLY != *",cupti,"* ]]; }; then
    return 1
  fi
  local l; l=$(left)
  if [ "$l" -ge "$2" ]; then return 0; fi
  echo "=== $1: skipped: ${l} s of the --budget left, the run needs about $2 s" | tee -a "$SUMMARY"
  SKIPPED+=("$1")
  return 1
}
# cap SECONDS: what one run may take: SECONDS, or less when the budget has less left.
cap() { local l; l=$(left); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
SKIPPED=()

collect() {  # results (and fixtures so far) into $OUT; cheap, so after every run
  [ -n "${OUT:-}" ] || return 0
  tar -C "$WORK" -czf "$OUT/results.tar.gz.tmp" results && mv "$OUT/results.tar.gz.tmp" "$OUT/results.tar.gz"
  if [ -n "$(find "$FIXTURES" -type f 2>/dev/null | head -1)" ]; then
    tar -C "$WORK/fixtures" -czf "$OUT/fixtures-gpu-$DATE.tar.gz.tmp" "tests/fixtures/gpu-$DATE" &&
      mv "$OUT/fixtures-gpu-$DATE.tar.gz.tmp" "$OUT/fixtures-gpu-$DATE.tar.gz"
  fi
}

# events_beside_fixture NAME: the run's CUDA events go beside its fixture: CI judges the replay
# against them (tests/cupti/check_replay.py), not only against the rank file traintime wrote.
events_beside_fixture() {
  local dir=$FIXTURES/$1
  [ -d "$dir" ] || return 0
  if [ -z "$(find "$dir" -type f)" ]; then rmdir "$dir" 2>/dev/null; return 0; fi
  [ -f "$RESULTS/$1/events-0.json" ] && cp "$RESULTS/$1/events-0.json" "$dir/events.json"
  # Committed gzipped (megabytes of callbacks as JSON); tests/cupti/check_replay.py unpacks them.
  find "$dir" -type f \( -name fixture.json -o -name 'buffer-*.bin' \) -exec gzip -9n {} +
  return 0
}

# 1. cuda_mlp, with nvidia-smi sampling the GPU beside it for the NVML health check.
if fits cuda_mlp 40; then
  SMI_FIELDS=$(python3 "$ROOT/scripts/check_gpu_run.py" health --print-query)
  mkdir -p "$RESULTS/cuda_mlp"
  "$SMI" --query-gpu="$SMI_FIELDS" --format=csv,nounits -lms 100 >"$RESULTS/cuda_mlp/nvidia-smi.csv" 2>&1 &
  SMI_PID=$!
  RUN_TIMEOUT=$(cap 120)
  if run_profiled cuda_mlp "${LAUNCH[@]}" "$MLP" --steps "$MLP_STEPS" \
       --events-out "$RESULTS/cuda_mlp/events-%r.json"; then
    kill "$SMI_PID" 2>/dev/null; wait "$SMI_PID" 2>/dev/null
    compare cuda_mlp
    check cuda_mlp health --smi-log "$RESULTS/cuda_mlp/nvidia-smi.csv"
  else
    kill "$SMI_PID" 2>/dev/null; wait "$SMI_PID" 2>/dev/null
    note_status 2
  fi
  events_beside_fixture cuda_mlp
  collect
fi

HAVE_TORCH=0
if [ "$SKIP_TORCH" = 0 ]; then
  if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    HAVE_TORCH=1
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())), "device", torch.cuda.get_device_name())' \
      >>"$RESULTS/machine.txt" 2>&1
    python3 -m pip list 2>/dev/null | grep -Ei '^(nvidia-|torch )' >>"$RESULTS/machine.txt"
    export PYTHONPATH=$ROOT/annotate/python${PYTHONPATH:+:$PYTHONPATH}
  else
    echo; echo "=== torch: skipped (python3 has no torch with CUDA)" | tee -a "$SUMMARY"
  fi
fi
LOOP=$ROOT/examples/torch_loop.py

# 2. PyTorch, the plain region API, judged against events; it runs every GPU operation inside a
#    region, so nothing may be unattributed; traintime.metrics() is read every step.
if [ "$HAVE_TORCH" = 1 ] && fits torch_regions 60; then
  RECORD=1 RUN_TIMEOUT=$(cap 180)
  if run_profiled torch_regions python3 "$LOOP" --api region --steps "$STEPS" \
       --events-out "$RESULTS/torch_regions/events-%r.json" \
       --metrics-log "$RESULTS/torch_regions/metrics.jsonl"; then
    compare torch_regions
    check torch_regions context
    check torch_regions live --metrics-log "$RESULTS/torch_regions/metrics.jsonl"
  else
    note_status 2
  fi
  events_beside_fixture torch_regions
  collect
fi
RECORD=0

# 3. Overhead three ways in one run (scripts/gpu_overhead.py): no tool, a bare CUPTI tracer,
#    traintime; the training step and a launch-bound loop.
if [ "$OVERHEAD_REPEATS" -gt 0 ] && fits overhead 120; then
  l=$(left); limit=$((l < OVERHEAD_LIMIT ? l - 30 : OVERHEAD_LIMIT))
  RUNS=$((RUNS + 1))
  echo; echo "=== overhead: scripts/gpu_overhead.py --repeats $OVERHEAD_REPEATS --time-limit $limit"
  { echo "=== overhead"; } >>"$SUMMARY"
  ov_json=${OUT:-$RESULTS}/overhead.json
  python3 "$ROOT/scripts/gpu_overhead.py" --tree "$TREE" --repeats "$OVERHEAD_REPEATS" \
    --time-limit "$limit" --run-timeout 90 --json-out "$ov_json" 2>&1 | tee "$RESULTS/overhead.txt"
  ov=${PIPESTATUS[0]}
  sed -n '/^gpu_overhead: .*repeats, rotating/,$p' "$RESULTS/overhead.txt" >>"$SUMMARY"
  [ "$ov" -eq 0 ] || echo "overhead: scripts/gpu_overhead.py exited with status $ov" | tee -a "$SUMMARY"
  note_status "$ov"
  [ -z "${OUT:-}" ] || cp "$ov_json" "$RESULTS/overhead.json" 2>/dev/null
  collect
fi

# 4. A torch.profiler session in the middle of the run (the way users profile: a schedule, one
#    warm-up step, ProfilerStep#N per step): the profiler sees kernels and traintime's figures stay
#    exact. Its gzipped trace and the rank file of the same run are kept: replayed through simgpu
#    (tests/sim), the trace must give the rank file's per-step figures (docs/validation.md).
PROFILE_LO=$((STEPS / 4 > 1 ? STEPS / 4 : 1))
PROFILE_HI=$((PROFILE_LO + 5 <= STEPS ? PROFILE_LO + 5 : STEPS))
if [ "$HAVE_TORCH" = 1 ] && fits torch_profiler 60; then
  RUN_TIMEOUT=$(cap 180)
  if run_profiled torch_profiler python3 "$LOOP" --api region --steps "$STEPS" \
       --profile-steps "$PROFILE_LO:$PROFILE_HI" \
       --profile-trace "$RESULTS/torch_profiler/profiler-trace.json.gz" \
       --events-out "$RESULTS/torch_profiler/events-%r.json"; then
    compare torch_profiler
    check torch_profiler profiler --trace "$RESULTS/torch_profiler/profiler-trace.json.gz"
  else
    note_status 2
  fi
  collect
fi

# 5. abort() with work in flight: the final file is written and the process still dies by SIGABRT.
if fits abort 30; then
  RUN_TIMEOUT=$(cap 90)
  # Directly, never under mpirun: it would turn the rank's death into a status of its own.
  # About 3 s of steps: CUPTI hands buffers over every second, so the steps of the first two
  # seconds must be in the file written at the abort (check_gpu_run.py abort).
  run_profiled abort "$TREE/bin/cuda_mlp" --steps 60 --abort-after 40
  rc=$?
  check abort abort --status "$rc" --steps $((40 + 3))
  collect
fi

# 6. CUDA graphs: forward+backward captured in regions, replayed in another.
if [ "$HAVE_TORCH" = 1 ] && fits torch_graphs 60; then
  RECORD=1 RUN_TIMEOUT=$(cap 180)
  if run_profiled torch_graphs python3 "$LOOP" --api region --cuda-graphs --steps "$STEPS" \
       --events-out "$RESULTS/torch_graphs/events-%r.json"; then
    compare torch_graphs
    check torch_graphs graphs --events "$RESULTS/torch_graphs/events-0.json"
  else
    note_status 2
  fi
  events_beside_fixture torch_graphs
  RECORD=0
  collect
fi

# 7. The caching allocator on CUDA virtual memory (expandable segments).
if [ "$HAVE_TORCH" = 1 ] && fits torch_vmm 60; then
  RUN_TIMEOUT=$(cap 180)
  if PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
       run_profiled torch_vmm python3 "$LOOP" --api region --steps "$STEPS" \
       --events-out "$RESULTS/torch_vmm/events-%r.json"; then
    compare torch_vmm
    check torch_vmm memory --events "$RESULTS/torch_vmm/events-0.json"
  else
    note_status 2
  fi
  collect
fi

# 8. Exit with a region open since before CUDA initialised, work still in flight.
if [ "$HAVE_TORCH" = 1 ] && fits torch_exit 45; then
  RUN_TIMEOUT=$(cap 120)
  if run_profiled torch_exit python3 "$ROOT/examples/torch_exit_in_region.py" \
       --expect-out "$RESULTS/torch_exit/expect.json"; then
    check torch_exit exit --expect "$RESULTS/torch_exit/expect.json"
  else
    note_status 2
  fi
  collect
fi

# 9. Other CUPTI releases on the real driver (--cupti-releases DIR: DIR/<version>/libcupti.so.*,
#    e.g. PyPI's, as scripts/fetch-cupti-releases.py lays them out): cuda_mlp judged as in 1.
if [ -n "$CUPTI_RELEASES" ]; then
  for lib in "$CUPTI_RELEASES"/*/libcupti.so.*; do
    [ -f "$lib" ] || continue
    ver=$(basename "$(dirname "$lib")")
    name=cupti_$ver
    fits "$name" 30 || continue
    RUN_TIMEOUT=$(cap 90)
    if TRAINTIME_CUPTI_LIB=$lib run_profiled "$name" "${LAUNCH[@]}" "$MLP" --steps "$STEPS" --no-nccl \
         --events-out "$RESULTS/$name/events-%r.json"; then
      compare "$name"
      grep -o '"gpu_capture_reason": *"[^"]*"' "$RESULTS/$name/traintime-out/rank-00000.json" \
        2>/dev/null | tee -a "$SUMMARY"
    else
      note_status 2
    fi
    collect
  done
fi

# 10. NCCL sweep (no fixture: at world size 1 its replay has nothing the events could judge).
if [ "$SKIP_SWEEP" = 0 ] && fits nccl_sweep 60; then
  RUN_TIMEOUT=$(cap 180)
  if run_profiled nccl_sweep "${LAUNCH[@]}" "$SWEEP" \
       --events-out "$RESULTS/nccl_sweep/events-%r.json"; then
    compare nccl_sweep
    check nccl_sweep plugin
  else
    note_status 2
  fi
  collect
fi

# 11. traintime.torch.instrument: printed, not judged.
if [ "$HAVE_TORCH" = 1 ] && fits torch_instrument 45; then
  RUN_TIMEOUT=$(cap 120)
  if run_profiled torch_instrument python3 "$LOOP" --api instrument \
       --steps "$STEPS" --events-out "$RESULTS/torch_instrument/events-%r.json"; then
    compare torch_instrument --informational
  else
    note_status 2
  fi
  collect
fi

# Collect.
echo
echo "=== summary (tables above and in summary.txt), $(($(date +%s) - T0)) s"
grep -E '^(=== |RESULT|.*: no rank file|.*skipped|check_gpu_run)' "$SUMMARY"
fixture_files=$(find "$FIXTURES" -type f | wc -l)
echo "fixtures recorded (TRAINTIME_RECORD_FIXTURE): $fixture_files file(s)"
if [ -n "${OUT:-}" ]; then
  collect
  if [ "$fixture_files" -gt 0 ]; then
    size=$(stat -c %s "$OUT/fixtures-gpu-$DATE.tar.gz")
    [ "$size" -le $((16 * 1024 * 1024)) ] ||
      echo "WARNING: fixtures-gpu-$DATE.tar.gz is $size bytes, over the 16 MiB a returned file may have"
  fi
  echo "results in \$OUT: $(find "$OUT" -maxdepth 1 -type f -printf '%f ')"
else
  if [ "$fixture_files" -gt 0 ]; then
    mkdir -p "$ROOT/tests/fixtures"
    cp -r "$FIXTURES" "$ROOT/tests/fixtures/"
    echo "fixtures copied to $ROOT/tests/fixtures/gpu-$DATE"
  fi
  echo "results in $WORK"
fi
[ ${#SKIPPED[@]} -eq 0 ] || echo "gpu-validate: not run for the --budget: ${SKIPPED[*]}"
if [ "$RUNS" -eq 0 ]; then echo "gpu-validate: nothing ran"; note_status 2; fi
case $STATUS in
  0) echo "gpu-validate: PASS (every judged comparison agrees)" ;;
  1) echo "gpu-validate: FAIL (traintime and CUDA events disagree; see the tables above)" ;;
  *) echo "gpu-validate: FAIL (a run or its output was unusable; see the log above)" ;;
esac
# Let tee finish writing the log before the caller collects it.
exec >&- 2>&-
wait "$TEE_PID" 2>/dev/null
exit "$STATUS"
