#!/usr/bin/env bash
# Runs the main job under traintime and reports on it with traintime-report (the text report,
# then an HTML report written beside the rank files). Works from any directory.
#
#   scripts/demo.sh            build if needed, then run the demo (below)
#   scripts/demo.sh --plan     only say which demo would run here and why (builds and runs nothing)
#
# With a GPU (`nvidia-smi -L` lists one or more) and build/bin/cuda_mlp built (needs nvcc and
# NCCL at build time): examples/cuda_mlp on REAL hardware, one rank per GPU under mpirun.
# Otherwise: the SIMULATED demo. build/bin/sim_train runs as 4 ranks under mpirun on simgpu, the
# simulated CUDA driver, runtime, CUPTI and NCCL of tests/sim. Every rank file is then compared
# with the exact answer that sim_train writes (tests/sim/compare_truth.py).
#
# Environment: TRAINTIME_BUILD_DIR (build folder, default build/; see build.sh), TRAINTIME_OUTPUT
# (where the rank files go, default traintime-out/demo/), SIMGPU_SLOWDOWN (simulated demo: the
# default 3:1.5 makes rank 3 a straggler; set it empty for none), TT_NVIDIA_SMI (the nvidia-smi
# to ask, as in gpu-validate.sh). Exit status: 0 ok; 1 the run failed or, in the simulated demo,
# a rank file disagrees with the simulated truth; 2 bad usage.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${TRAINTIME_BUILD_DIR:-$ROOT/build}"
LIB="$BUILD/lib/libtraintime.so"
SIM_TRAIN="$BUILD/bin/sim_train"
CUDA_MLP="$BUILD/bin/cuda_mlp"
REPORT="$BUILD/bin/traintime-report"
SIM_LIBS=(libcuda.so.1 libcudart.so.13 libcupti.so.13 libnccl.so.2)
STEPS=20

PLAN_ONLY=0
case "${1:-}" in
  "") ;;
  --plan) PLAN_ONLY=1 ;;
  -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "demo.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

# Number of GPUs `nvidia-smi -L` lists ("GPU 0: NVIDIA H100 ... (UUID: ...)"); 0 when it is
# missing, fails (no driver, "No devices were found") or hangs.
count_gpus() {
  local smi="${TT_NVIDIA_SMI:-nvidia-smi}" listing
  command -v "$smi" >/dev/null 2>&1 || { echo 0; return; }
  if listing=$(timeout 30 "$smi" -L 2>/dev/null); then
    grep -c '^GPU [0-9]' <<<"$listing" || true
  else
    echo 0
  fi
}

# Libraries the loader cannot find for a program (cuda_mlp needs libcublas and libnccl).
missing_libs() { ldd "$1" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' '; }

# Decides MODE (gpu or sim), RANKS and WHY from the GPUs present and what is built.
decide() {
  local gpus
  gpus=$(count_gpus)
  if [ "$gpus" -eq 0 ]; then
    MODE=sim RANKS=4 WHY="no GPU found ('${TT_NVIDIA_SMI:-nvidia-smi} -L' is missing, failed or lists none)"
  elif [ ! -x "$CUDA_MLP" ]; then
    MODE=sim RANKS=4 WHY="$gpus GPU(s) found, but $CUDA_MLP is not built (it needs nvcc and NCCL at build time; see docs/validation.md)"
  elif [ -n "$(missing_libs "$CUDA_MLP")" ]; then
    MODE=sim RANKS=4 WHY="$gpus GPU(s) found, but $CUDA_MLP cannot load $(missing_libs "$CUDA_MLP")(scripts/gpu-validate.sh finds them in PyTorch's wheels)"
  else
    MODE=gpu RANKS=$gpus WHY="$gpus GPU(s) found by nvidia-smi -L and $CUDA_MLP is built"
  fi
}

if [ "$PLAN_ONLY" -eq 1 ]; then
  decide
  echo "demo plan: mode=$MODE ranks=$RANKS"
  echo "demo plan: because $WHY"
  exit 0
fi

# What the chosen demo runs; empty when all of it is there.
missing_files() {
  local f files=("$LIB" "$REPORT")
  if [ "$MODE" = gpu ]; then files+=("$CUDA_MLP"); else files+=("$SIM_TRAIN" "${SIM_LIBS[@]/#/$BUILD/sim/}"); fi
  for f in "${files[@]}"; do [ -e "$f" ] || echo "$f"; done
}

# Runs "$@" with its output in $LOG; on failure shows the log's end and names the log.
logged() {
  if ! "$@" >>"$LOG" 2>&1; then
    echo "demo.sh: '$*' failed; the last lines of $LOG:" >&2
    tail -n 15 "$LOG" >&2
    exit 1
  fi
}

# Build (and install build dependencies) only when something the demo runs is missing, so a
# build carried to a machine without network or compilers (a GPU machine: docs/validation.md)
# runs as it is. Only the demo's packages and targets: the tests' (PyTorch, Chromium, the
# benchmarks) come with scripts/test.sh. Their output goes to a log; a few lines say progress.
# (cuda_mlp is not among the targets: the real-GPU demo runs a build made by scripts/build.sh.)
DEMO_TARGETS=(traintime traintime-report sim_train simgpu_cuda simgpu_cudart simgpu_cupti simgpu_nccl)
decide
if [ -n "$(missing_files)" ] || { [ "$MODE" = sim ] && ! command -v mpirun >/dev/null; }; then
  mkdir -p "$BUILD"
  LOG="$BUILD/demo-build.log"
  : >"$LOG"
  echo "demo.sh: checking the demo's packages (scripts/install-deps.sh --demo; log: $LOG)"
  logged "$ROOT/scripts/install-deps.sh" --demo
  if [ -n "$(missing_files)" ]; then
    echo "demo.sh: building libtraintime.so, traintime-report, sim_train and simgpu (a few minutes on 2 cores; log: $LOG)"
    logged cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTRAINTIME_DEMO_CONFIGURE=ON
    logged cmake --build "$BUILD" -j "${TRAINTIME_JOBS:-$(nproc 2>/dev/null || echo 2)}" --target "${DEMO_TARGETS[@]}"
    echo "demo.sh: built; running the demo"
    echo
  fi
  decide
  if [ -n "$(missing_files)" ]; then
    echo "demo.sh: the build did not produce: $(missing_files | tr '\n' ' ')(see $LOG)" >&2
    exit 1
  fi
fi
# shellcheck source=mpi-env.sh
. "$ROOT/scripts/mpi-env.sh"
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=python3

OUT="${TRAINTIME_OUTPUT:-$ROOT/traintime-out/demo}"
TRUTH_DIR="$OUT/simgpu-truth"
mkdir -p "$OUT"
# Only this demo's own files go: TRAINTIME_OUTPUT may point at a folder that holds other things.
rm -f "$OUT"/rank-*.json "$TRUTH_DIR"/truth-*.json

banner() {  # $1: where the numbers are, "below" or "above"
  echo "=================================================================================="
  if [ "$MODE" = sim ]; then
    echo " SIMULATED GPU: the GPU, CUDA, CUPTI and NCCL in this demo are simgpu, a simulation"
    echo " (tests/sim/README.md). Every GPU number $1 is simulated, not measured hardware."
  else
    echo " REAL HARDWARE: $RANKS GPU(s) of this machine, the real CUDA driver, CUPTI and NCCL."
    echo " The GPU numbers $1 are measured by traintime on this hardware (see each rank's gpu_capture)."
  fi
  echo " Why: $WHY."
  echo "=================================================================================="
}

banner below
echo
status=0
if [ "$MODE" = sim ]; then
  SLOWDOWN="${SIMGPU_SLOWDOWN-3:1.5}"
  slow_args=()
  if [ -n "$SLOWDOWN" ]; then
    slow_args=(-x "SIMGPU_SLOWDOWN=$SLOWDOWN")
    echo "Simulated straggler: SIMGPU_SLOWDOWN=$SLOWDOWN (rank:factor) stretches that rank's compute"
    echo "kernels; the other ranks wait for it inside every AllReduce."
  fi
  echo "The step time is the GPU step span on simgpu's virtual clock; sim_train's CPU only enqueues the work."
  mkdir -p "$TRUTH_DIR"
  echo "== mpirun -np $RANKS sim_train --steps $STEPS (SIMULATED GPU) under LD_PRELOAD=$LIB"
  TRAINTIME_OUTPUT="$OUT" mpirun --oversubscribe -np "$RANKS" \
    -x "LD_LIBRARY_PATH=$BUILD/sim" -x "LD_PRELOAD=$LIB" \
    -x "TRAINTIME_CUPTI_LIB=$BUILD/sim/libcupti.so.13" -x TRAINTIME_OUTPUT "${slow_args[@]}" \
    "$SIM_TRAIN" --steps "$STEPS" --truth "$TRUTH_DIR/truth-%r.json" || status=1
else
  launch=()
  if command -v mpirun >/dev/null; then
    launch=(mpirun --oversubscribe -np "$RANKS" -x "LD_PRELOAD=$LIB" -x TRAINTIME_OUTPUT)
    [ -n "${LD_LIBRARY_PATH:-}" ] && launch+=(-x LD_LIBRARY_PATH)
    echo "== mpirun -np $RANKS cuda_mlp --steps $STEPS (REAL GPU) under LD_PRELOAD=$LIB"
    TRAINTIME_OUTPUT="$OUT" "${launch[@]}" "$CUDA_MLP" --steps "$STEPS" || status=1
  else
    RANKS=1
    echo "== mpirun not found: cuda_mlp --steps $STEPS runs as rank 0 of 1 (REAL GPU) under LD_PRELOAD=$LIB"
    TRAINTIME_OUTPUT="$OUT" LD_PRELOAD="$LIB" "$CUDA_MLP" --steps "$STEPS" || status=1
  fi
fi

echo
echo "== rank files in $OUT"
ls -l "$OUT"/rank-*.json 2>/dev/null || echo "(none)"
echo
label="REAL GPU"
[ "$MODE" = sim ] && label="SIMULATED GPU"
# The HTML report first, so that the text report, last, ends with the answer and says where it is.
HTML="$OUT/report.html"
# Its input problems are the text report's too, said there once; kept here for a failure only.
if html_err=$("$REPORT" "$OUT" --format html -o "$HTML" 2>&1); then
  echo "HTML report ($label): $HTML (one self-contained file: open it in any browser)"
else
  printf '%s\n' "$html_err" >&2
  echo "demo.sh: the HTML report could not be written to $HTML" >&2
  status=1
fi

if [ "$MODE" = sim ]; then
  echo
  echo "== each rank file against the simulated ground truth sim_train wrote (exact, to the ns)"
  for ((r = 0; r < RANKS; r++)); do
    "$PYTHON" "$ROOT/tests/sim/compare_truth.py" "$(printf '%s/rank-%05d.json' "$OUT" "$r")" \
      "$TRUTH_DIR/truth-$r.json" || status=1
  done
fi

# Last: the text report, which ends with its three-line SUMMARY (with a simulated GPU, its title
# says so: the bottom of the output as the banner says it at the top).
echo
echo "== traintime-report $OUT ($label: the job's rank files merged; docs/report.md says what each line means)"
"$REPORT" "$OUT" || status=1
[ "$status" -eq 0 ] || echo "demo.sh: something above failed (exit status 1)" >&2
exit "$status"
