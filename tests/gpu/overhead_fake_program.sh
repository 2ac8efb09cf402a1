#!/bin/sh
# FAKE gpu_launch_loop / cuda_mlp (by the name it is called under) for the test of
# scripts/gpu_overhead.py, no GPU involved. It tells the tool attached from the environment
# (CUDA_INJECTION64_PATH: the bare tracer; LD_PRELOAD naming libtraintime: traintime) and prints
# the real program's line with a figure FAKE_<LOOP|MLP>_<TRACER|TT>_PCT percent above its base
# (2 us/launch, 50 ms/step), +-0.05 % of jitter from the pid. Under traintime it writes a rank
# file with "gpu_capture": FAKE_CAPTURE (default cupti) unless FAKE_NORANK=1; FAKE_GARBAGE=1
# prints nothing parseable.
set -eu
tool=none
[ -n "${CUDA_INJECTION64_PATH:-}" ] && tool=TRACER
case "${LD_PRELOAD:-}" in *libtraintime*) tool=TT ;; esac
launches=500000
while [ $# -gt 0 ]; do
  [ "$1" = --launches ] && launches=$2
  shift
done
case $(basename "$0") in
  gpu_launch_loop) wl=LOOP base=2.0 ;;
  *) wl=MLP base=50.0 ;;
esac
pct=0
[ "$tool" = none ] || eval "pct=\${FAKE_${wl}_${tool}_PCT:-0}"
if [ "$tool" = TT ] && [ "${FAKE_NORANK:-0}" != 1 ]; then
  mkdir -p "$TRAINTIME_OUTPUT"
  printf '{"gpu_capture": "%s", "gpu_capture_reason": "fake"}\n' "${FAKE_CAPTURE:-cupti}" \
    >"$TRAINTIME_OUTPUT/rank-00000.json"
fi
[ "${FAKE_GARBAGE:-0}" = 1 ] && { echo "fake: nothing to see"; exit 0; }
v=$(awk -v b="$base" -v p="$pct" -v j=$(($$ % 11 - 5)) 'BEGIN { printf "%.6f", b * (1 + p / 100) * (1 + j / 10000) }')
if [ "$wl" = LOOP ]; then
  awk -v v="$v" -v n="$launches" 'BEGIN { printf "launch_loop: %d launches, %.4f us/launch, total_s %.6f, device FAKE GPU\n", n, v, v * n / 1e6 }'
else
  printf 'cuda_mlp: FAKE GPU, world size 1 (single), 30 timed steps after 3 warm-up, %.2f ms/step (CUDA events), final loss 6.9\n' "$v"
fi
