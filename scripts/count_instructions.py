#!/usr/bin/env python3
"""Instructions per activity of the record path and per launch of the launch callback, counted
by callgrind (deterministic, unlike timings on a shared VM): GpuAggregator::ingest alone and the
whole processing path (decode with the toolkit's cuptiActivityGetNextRecord, join, ingest), from
bench_ingest's BM_InstructionCount; and the launching thread's instructions per kernel launch on
the SIMULATED GPU with traintime preloaded and with the bare CUPTI tracer injected (the bench row
"launch callback, own work" is their difference), from bench_sim_launch's BM_InstructionCount;
and the calling thread's instructions per collective in NCCL's profiler plugin callbacks,
traintime's against a plugin doing nothing (the bench row "NCCL profiler plugin, one collective's
callbacks" is their difference), from bench_nccl_plugin's BM_InstructionCount.

    scripts/count_instructions.py [--build build] [--lib LIB] [--only ingest|launch|plugin] [--keep DIR]

Needs valgrind (apt-get install valgrind) and a build of the benchmarks made with valgrind's
headers present. Prints one line per path: instructions (and, for the record path, L1 data read
misses) per activity or launch. --lib measures another libtraintime.so (an older build, for an
A/B) with the same benchmark binaries.
"""
import argparse
import json
import os
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


def count_launch(build: Path, env: dict[str, str], out: Path) -> float:
    """The launching thread's instructions per counted launch (callgrind, one file per thread)."""
    binary = build / "bench" / "bench_sim_launch"
    sim = build / "sim"
    full_env = dict(os.environ, LD_LIBRARY_PATH=str(sim),
                    TRAINTIME_CUPTI_LIB=str(sim / "libcupti.so.13"),
                    TRAINTIME_OUTPUT=str(out.parent / f"{out.name}.rank"), **env)
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
         f"--callgrind-out-file={out}", str(binary),
         "--benchmark_filter=BM_InstructionCount", "--benchmark_format=json"],
        capture_output=True, text=True, check=True, env=full_env)
    bench = json.loads(run.stdout)["benchmarks"][0]
    if bench.get("injections") != 1:
        raise SystemExit(f"count_instructions: {env} did not inject one CUPTI client")
    launches = float(bench["counted_launches"])
    # Thread 1 is the benchmark's (the launching) thread; CUPTI's and traintime's threads are not
    # the callback's cost.
    return main_thread_ir(out, "bench_sim_launch") / launches


def main_thread_ir(out: Path, what: str) -> int:
    """Instructions counted on thread 1 (the benchmark's) of a --separate-threads=yes run."""
    for line in Path(f"{out}-01").read_text().splitlines():
        if line.startswith("summary:") or line.startswith("totals:"):
            ir = int(line.split()[1])
            if ir != 0:
                return ir
    raise SystemExit(f"count_instructions: nothing was counted: {what} was built "
                     "without valgrind's headers (install valgrind and rebuild it)")


def count_plugin(build: Path, lib: Path, arg: int, out: Path) -> float:
    """The calling thread's instructions per collective in the plugin callbacks: arg 1 traintime's
    plugin, 0 the plugin doing nothing (NCCL's share: descriptors, calls through the table)."""
    binary = build / "bench" / "bench_nccl_plugin"
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
         f"--callgrind-out-file={out}", str(binary),
         f"--benchmark_filter=BM_InstructionCount/{arg}/", "--benchmark_format=json"],
        capture_output=True, text=True, check=True,
        env=dict(os.environ, LD_PRELOAD=str(lib), TRAINTIME_OUTPUT=str(out.parent / f"{out.name}.rank")))
    bench = json.loads(run.stdout)["benchmarks"][0]
    return main_thread_ir(out, "bench_nccl_plugin") / float(bench["counted_collectives"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, default=Path(__file__).resolve().parent.parent / "build",
                        help="build folder holding bench/bench_ingest (default: build/)")
    parser.add_argument("--keep", type=Path,
                        help="keep the callgrind output files here (for callgrind_annotate)")
    parser.add_argument("--lib", type=Path,
                        help="libtraintime.so to measure the launch callback of "
                             "(default: the build's lib/libtraintime.so)")
    parser.add_argument("--only", choices=("ingest", "launch", "plugin"),
                        help="measure the record path, the launch callback or the NCCL plugin alone")
    args = parser.parse_args()
    binary = args.build / "bench" / "bench_ingest"
    lib = (args.lib or args.build / "lib" / "libtraintime.so").resolve()
    tracer = (args.build / "bench" / "libbench_bare_cupti_tracer.so").resolve()
    if shutil.which("valgrind") is None:
        print("count_instructions: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 1
    needed = []
    if args.only in (None, "ingest"):
        needed.append(binary)
    if args.only in (None, "launch"):
        needed += [args.build / "bench" / "bench_sim_launch", tracer, lib]
    if args.only in (None, "plugin"):
        needed += [args.build / "bench" / "bench_nccl_plugin", lib]
    for path in needed:
        if not path.is_file():
            print(f"count_instructions: {path} is not built (scripts/build.sh)", file=sys.stderr)
            return 1
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        if args.only in (None, "ingest"):
            for arg, what in ((1, "GpuAggregator::ingest, per activity"),
                              (0, "decode + join + ingest (API records), per activity")):
                ir, d1 = count(binary, arg, out / f"callgrind.ingest-{arg}")
                print(f"{what}: {ir:.1f} instructions, {d1:.2f} L1 data read misses")
        if args.only in (None, "launch"):
            own = count_launch(args.build, {"LD_PRELOAD": str(lib)}, out / "callgrind.launch-traintime")
            bare = count_launch(args.build, {"CUDA_INJECTION64_PATH": str(tracer)},
                                out / "callgrind.launch-tracer")
            print(f"launch callback, own work (SIMULATED GPU), per launch: {own - bare:.1f} "
                  f"instructions (traintime {own:.1f} - bare tracer {bare:.1f}; {lib})")
        if args.only in (None, "plugin"):
            own = count_plugin(args.build, lib, 1, out / "callgrind.plugin-traintime")
            noop = count_plugin(args.build, lib, 0, out / "callgrind.plugin-noop")
            print(f"NCCL profiler plugin, calling thread, per collective: {own - noop:.1f} instructions "
                  f"(traintime {own:.1f} - a plugin doing nothing {noop:.1f}; {lib})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
