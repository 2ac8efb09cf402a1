#!/bin/bash
# Test of scripts/gpu_overhead.py without a GPU: fake programs (overhead_fake_program.sh) and a
# do-nothing library standing in for libtraintime.so and the bare tracer. Checks the exact exit
# status within budget (0), over budget (1) and for unusable runs (2), and the report's contents.
# usage: overhead_test.sh PYTHON GPU_OVERHEAD_PY FAKE_PRELOAD_SO
set -u
py=$1 script=$2 preload=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tree/lib" "$tmp/tree/bin"
cp "$preload" "$tmp/tree/lib/libtraintime.so"
cp "$preload" "$tmp/tree/lib/libgpu_bare_cupti_tracer.so"
cp "$here/overhead_fake_program.sh" "$tmp/tree/bin/gpu_launch_loop"
cp "$here/overhead_fake_program.sh" "$tmp/tree/bin/cuda_mlp"
chmod +x "$tmp/tree/bin/"*
fail=0

# run NAME WANTED_STATUS [ENV=VALUE...]: within-budget figures unless the ENV overrides them;
# $extra holds more options for the script. Every fake figure carries up to +-0.05 % of jitter
# (from the pid), so a ratio of two figures moves by up to +-0.1 percentage points: the figures
# are chosen so that no expected digit sits that close to a boundary.
run() {
  local name=$1 want=$2; shift 2
  env FAKE_LOOP_TRACER_PCT=10 FAKE_LOOP_TT_PCT=10.5 FAKE_MLP_TRACER_PCT=0.2 FAKE_MLP_TT_PCT=0.6 "$@" \
    "$py" "$script" --tree "$tmp/tree" --repeats 3 --json-out "$tmp/$name.json" ${extra:-} >"$tmp/$name.log" 2>&1
  local got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $name: exit $got, wanted $want"; cat "$tmp/$name.log"; fail=1
  else
    echo "ok: $name exits $want"
  fi
}
expect() {  # expect NAME PATTERN: the log of run NAME has a line matching PATTERN
  grep -Eq -- "$2" "$tmp/$1.log" || { echo "FAIL: $1: no line matching '$2'"; cat "$tmp/$1.log"; fail=1; }
}

run within 0
expect within '^workload +traintime over bare tracer +budget +verdict +bare tracer over no tool +traintime over no tool'
# 1.105 / 1.10: +0.45 % over the tracer; the tracer +10 % and traintime +10.5 % over no tool.
expect within '^launch_loop +\+0\.[3-5][0-9]* % \[.*\] +<= 3 % +PASS +\+(9\.[89]|10\.[01])[0-9]* % .* \+10\.[3-6][0-9]* %'
expect within '^training_step +\+0\.[0-9]+ % \[.*\] +<= 1 % +PASS'
expect within '^RESULT: every budget met'
"$py" - "$tmp/within.json" <<'PY' || { echo "FAIL: within.json lacks the raw figures"; fail=1; }
import json, sys
r = json.load(open(sys.argv[1]))
assert r["exit_status"] == 0 and r["repeats_done"] == 3, r
for w in ("launch_loop", "training_step"):
    runs = r["workloads"][w]["runs"]
    assert len(runs) == 12 and {x["way"] for x in runs} == {"none", "tracer", "traintime"}, runs
    assert r["workloads"][w]["summary"]["verdict"] == "PASS"
PY

# traintime 5.5 % over the bare tracer on the launch loop (1.10 * 1.055 = 1.1605), and 1.5 % on
# the step (1.017 / 1.002).
run loop_over 1 FAKE_LOOP_TT_PCT=16.05
expect loop_over '^launch_loop +\+5\.[3-6][0-9]* % .* MISS'
expect loop_over '^RESULT: budget missed: launch_loop \(traintime \+5\.[3-6][0-9]* % over bare tracer, budget 3 %\)$'
run step_over 1 FAKE_MLP_TT_PCT=1.7
expect step_over '^training_step .* MISS'

run no_rank_file 2 FAKE_NORANK=1
expect no_rank_file '^gpu_overhead: launch_loop/traintime \(warm-up\): traintime left no rank file'
run no_capture 2 FAKE_CAPTURE=unavailable
expect no_capture "gpu_capture 'unavailable'"
run unparseable 2 FAKE_GARBAGE=1
expect unparseable "^gpu_overhead: launch_loop/no tool \(warm-up\): printed no line like"
extra="--mlp $tmp/tree/bin/no_such_program" run missing_program 2
expect missing_program 'no_such_program is missing: build it with'
exit $fail
