#!/usr/bin/env bash
# Builds traintime if needed, runs an annotated training loop as 2 MPI ranks under LD_PRELOAD,
# and shows where the rank files are with a short summary. Works from any directory
# (TRAINTIME_BUILD_DIR: see build.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/install-deps.sh"
BUILD="${TRAINTIME_BUILD_DIR:-$ROOT/build}"
LIB="$BUILD/lib/libtraintime.so"
EXAMPLE="$BUILD/bin/annotated_loop"
if [ ! -f "$LIB" ] || [ ! -x "$EXAMPLE" ]; then
  "$ROOT/scripts/build.sh"
fi
# shellcheck source=mpi-env.sh
. "$ROOT/scripts/mpi-env.sh"

OUT="${TRAINTIME_OUTPUT:-$ROOT/traintime-out/demo}"
rm -rf "$OUT"
mkdir -p "$OUT"
echo "== running 2 ranks of examples/annotated_loop.cpp under LD_PRELOAD=$LIB"
TRAINTIME_OUTPUT="$OUT" LD_PRELOAD="$LIB" \
  mpirun -np 2 --oversubscribe -x LD_PRELOAD -x TRAINTIME_OUTPUT \
  "$EXAMPLE" --steps 20 --work-us 300

echo
echo "== rank files in $OUT"
ls -l "$OUT"
echo
/usr/bin/python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
for path in sorted(glob.glob(os.path.join(out, "rank-*.json"))):
    d = json.load(open(path))
    s = d["steps"]
    print("%s: rank %d of %d (%s), job %s, %d steps, step wall mean %.2f ms, %.0f samples/s"
          % (os.path.basename(path), d["rank"], d["world_size"], d["role"], d["job_id"],
             s["count"], s["wall_ns"]["mean_ns"] / 1e6, s["samples_per_s"]))
    print("  %-24s %-10s %6s %12s" % ("region", "category", "count", "cpu ms"))
    for r in d["regions"]:
        print("  %-24s %-10s %6d %12.2f" % (r["path"], r["category"], r["count"], r["cpu_ns"] / 1e6))
    print("  gpu_capture: %s" % d["gpu_capture"])
PY
if [ -x "$BUILD/bin/traintime-report" ]; then
  echo
  echo "== traintime-report $OUT"
  "$BUILD/bin/traintime-report" "$OUT" || echo "traintime-report exited with status $?"
fi
