#!/usr/bin/env python3
"""Instructions per activity of the record path, counted by callgrind (deterministic, unlike
timings on a shared VM): GpuAggregator::ingest alone and the whole processing path (decode with
the toolkit's cuptiActivityGetNextRecord, join, ingest), from bench_ingest's BM_InstructionCount.

    scripts/count_instructions.py [--build build] [--keep DIR]

Needs valgrind (apt-get install valgrind) and a build of bench_ingest made with valgrind's
headers present. Prints one line per path: instructions and L1 data read misses per activity.
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def count(binary: Path, arg: int, out: Path) -> tuple[float, float]:
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--instr-atstart=no",
         f"--callgrind-out-file={out}", str(binary),
         f"--benchmark_filter=BM_InstructionCount/ingest:{arg}/", "--benchmark_format=json"],
        capture_output=True, text=True, check=True)
    bench = json.loads(run.stdout)["benchmarks"][0]
    if bench.get("error_occurred"):
        raise SystemExit(f"count_instructions: {bench.get('error_message')}")
    activities = float(bench["counted_activities"])
    events = summary = None
    for line in out.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:") or line.startswith("totals:"):
            summary = [int(v) for v in line.split()[1:]]
    if not events or not summary:
        raise SystemExit(f"count_instructions: {out} has no event totals")
    totals = dict(zip(events, summary))
    if totals.get("Ir", 0) == 0:
        raise SystemExit("count_instructions: nothing was counted: bench_ingest was built "
                         "without valgrind's headers (install valgrind and rebuild it)")
    return totals["Ir"] / activities, totals.get("D1mr", 0) / activities


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, default=Path(__file__).resolve().parent.parent / "build",
                        help="build folder holding bench/bench_ingest (default: build/)")
    parser.add_argument("--keep", type=Path,
                        help="keep the callgrind output files here (for callgrind_annotate)")
    args = parser.parse_args()
    binary = args.build / "bench" / "bench_ingest"
    if shutil.which("valgrind") is None:
        print("count_instructions: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 1
    if not binary.is_file():
        print(f"count_instructions: {binary} is not built (scripts/build.sh)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        for arg, what in ((1, "GpuAggregator::ingest, per activity"),
                          (0, "decode + join + ingest (API records), per activity")):
            ir, d1 = count(binary, arg, out / f"callgrind.ingest-{arg}")
            print(f"{what}: {ir:.1f} instructions, {d1:.2f} L1 data read misses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
