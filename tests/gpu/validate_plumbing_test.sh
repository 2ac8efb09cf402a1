#!/bin/bash
# Plumbing test of scripts/gpu-validate.sh without a GPU: fake nvidia-smi, fake programs
# (fake_program.sh) and a do-nothing preload library stand in for the real ones. Checks the exit
# status for agreeing, disagreeing and missing output, and what lands in $OUT.
# usage: validate_plumbing_test.sh GPU_VALIDATE_SH FAKE_PRELOAD_SO
set -u
script=$1 preload=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tree/lib" "$tmp/tree/bin"
cp "$preload" "$tmp/tree/lib/libtraintime.so"
cp "$here/fake_program.sh" "$tmp/tree/bin/cuda_mlp"
cp "$here/fake_program.sh" "$tmp/tree/bin/nccl_sweep"
chmod +x "$tmp/tree/bin/"*
# The fake nvidia-smi answers the GPU list, the health sampling (a header and samples of the GPU
# that data/agree-rank.json's gpu_health names) and plain calls.
cat >"$tmp/smi" <<'SMI'
#!/bin/sh
case "$*" in
  *--query-gpu=index*) echo "0, FAKE GPU, 0.0, 1 MiB" ;;
  *--query-gpu=timestamp*)
    echo "timestamp, pci.bus_id, clocks.current.sm [MHz], clocks.current.memory [MHz], power.draw [W], power.limit [W], temperature.gpu, pcie.link.gen.current, pcie.link.width.current, memory.used [MiB], memory.total [MiB]"
    echo "2026/11/28 00:00:00.000, 00000000:19:00.0, 1755, 3201, 120.5, 700.00, 35, 5, 16, 500, 143771"
    echo "2026/11/28 00:00:00.100, 00000000:19:00.0, 1980, 3201, 650.0, 700.00, 41, 5, 16, 9100, 143771"
    exec sleep 60 ;;
  *) echo "fake nvidia-smi" ;;
esac
SMI
chmod +x "$tmp/smi"
export TT_NVIDIA_SMI=$tmp/smi FAKE_DATA=$here/data
fail=0

run() {  # run KIND WANTED_STATUS
  rm -rf "$tmp/out"
  FAKE_KIND=$1 OUT=$tmp/out "$script" --tree "$tmp/tree" --launcher direct --skip-torch \
    >"$tmp/log" 2>&1
  local got=$?
  if [ "$got" -ne "$2" ]; then
    echo "FAIL: $1: exit $got, wanted $2"; cat "$tmp/log"; fail=1
  else
    echo "ok: $1 exits $2"
  fi
}

run agree 0
for f in gpu-validate.log summary.txt results.tar.gz; do
  [ -s "$tmp/out/$f" ] || { echo "FAIL: \$OUT/$f missing after a passing run"; fail=1; }
done
fx=$(ls "$tmp/out"/fixtures-gpu-*.tar.gz 2>/dev/null)
if [ -z "$fx" ] || ! tar tzf "$fx" | grep -q '^tests/fixtures/gpu-[0-9]*/cuda_mlp/activity-0.bin$'; then
  echo "FAIL: recorded fixtures are not collected as tests/fixtures/gpu-<date>/cuda_mlp/"; fail=1
fi
# The run's CUDA events go beside its fixture (CI judges the replay against them); runs that
# record no fixture (the sweep) leave no folder.
if [ -n "$fx" ]; then
  tar tzf "$fx" | grep -q '^tests/fixtures/gpu-[0-9]*/cuda_mlp/events.json$' ||
    { echo "FAIL: cuda_mlp's events.json is not beside its fixture"; fail=1; }
  if tar tzf "$fx" | grep -q 'nccl_sweep'; then
    echo "FAIL: a fixture was collected for nccl_sweep, which records none"; fail=1
  fi
fi
grep -q 'RESULT: all 4 judged rows agree' "$tmp/out/summary.txt" ||
  { echo "FAIL: summary.txt lacks the region verdict"; fail=1; }
grep -q 'RESULT: GPU health (NVML) against nvidia-smi: PASS' "$tmp/out/summary.txt" ||
  { echo "FAIL: summary.txt lacks the NVML health verdict"; fail=1; }
grep -q 'RESULT: abort() with work in flight: PASS' "$tmp/out/summary.txt" ||
  { echo "FAIL: summary.txt lacks the abort verdict (status 134 and the final file)"; fail=1; }
# --only runs the named runs alone.
rm -rf "$tmp/out"
FAKE_KIND=agree OUT=$tmp/out "$script" --tree "$tmp/tree" --launcher direct --skip-torch \
  --only abort >"$tmp/log" 2>&1
if [ $? -ne 0 ] || ! grep -q '^=== abort: abort' "$tmp/out/summary.txt" ||
   grep -q '^=== cuda_mlp' "$tmp/out/summary.txt" || grep -q '^=== nccl_sweep' "$tmp/out/summary.txt"; then
  echo "FAIL: --only abort did not run the abort run alone"; cat "$tmp/log"; fail=1
fi
# A budget too small for anything runs nothing, says so, and does not claim the runs passed.
rm -rf "$tmp/out"
FAKE_KIND=agree OUT=$tmp/out "$script" --tree "$tmp/tree" --launcher direct --skip-torch \
  --budget 1 >"$tmp/log" 2>&1
[ $? -eq 2 ] || { echo "FAIL: a validation that ran nothing did not exit 2"; fail=1; }
grep -q 'not run for the --budget: cuda_mlp abort nccl_sweep' "$tmp/log" ||
  { echo "FAIL: a run skipped for the budget is not named"; cat "$tmp/log"; fail=1; }
grep -q 'world size 1' "$tmp/out/gpu-validate.log" ||
  { echo "FAIL: the log does not say NCCL ran at world size 1"; fail=1; }
run disagree 1
run norank 2
exit $fail
