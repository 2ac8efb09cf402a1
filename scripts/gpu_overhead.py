#!/usr/bin/env python3
"""Overhead of traintime on a real GPU, measured in one run three ways (docs/validation.md).

    python3 scripts/gpu_overhead.py --tree build-gpu [--repeats R] [--json-out FILE]

Runs on the GPU machine, from a tree built elsewhere with
    cmake --build DIR --target traintime cuda_mlp gpu_launch_loop gpu_bare_cupti_tracer
(DIR/lib/libtraintime.so, DIR/lib/libgpu_bare_cupti_tracer.so, DIR/bin/gpu_launch_loop,
DIR/bin/cuda_mlp). Each workload runs three ways, as separate processes:
    none       no tool
    tracer     a bare CUPTI kernel tracer (bench/bare_cupti_tracer.cpp, linked to the real
               libcupti), CUDA_INJECTION64_PATH=lib/libgpu_bare_cupti_tracer.so: what any
               CUPTI-based tool must pay for the same callbacks and activity records
    traintime  LD_PRELOAD=lib/libtraintime.so; each run must leave a rank file with
               "gpu_capture": "cupti", else the figures would be meaningless (exit 2)
Workloads and their figure:
    launch_loop    bin/gpu_launch_loop: tiny kernels back to back; its own host steady-clock
                   time of the loop plus one final cudaDeviceSynchronize, in us/launch.
    training_step  bin/cuda_mlp (cuBLAS fp32 MLP, world size 1): its own "ms/step (CUDA
                   events)", a CUDA-event pair around the timed steps on the training stream.
                   Not process wall time: that adds context creation, cuBLAS and NCCL set-up,
                   filling the host batches and traintime's rank-file write at exit, one-time
                   costs of seconds whose run-to-run noise exceeds the 1 % budget and which are
                   no per-step cost. The event pair does include any host-side slowdown that
                   starves the GPU (the end event is enqueued after the last launch), which is
                   what a step pays. Process wall time is kept in the JSON, not judged.
The order of the three ways rotates each repeat (as scripts/bench.sh does) so drift in the
machine's speed cancels, and the figures are compared as per-repeat pairs. One warm-up round
(every way once, not counted) runs first. Per workload the report gives each way's median and
min-max, traintime's increment over the bare tracer (median of the per-repeat ratios, with
their min-max), the tracer's and traintime's total over no tool, and the verdict: the median
increment must be <= 3 % on launch_loop and <= 1 % on training_step.

Time (an ESTIMATE, nothing here has run on a GPU yet): a launch_loop run ~1-3 s (500k launches
at a few us each, more under a tool, plus start-up); a training_step run ~4-5 s (CUDA, cuBLAS and
NCCL start-up ~1-2 s, 33 steps of ~3.3 TFLOP fp32 GEMM work at roughly 50 TFLOP/s, ~65 ms each).
So ~21 s per repeat of 6 runs, and the default 10 repeats plus the warm-up round ~4 min: inside
8 minutes even at twice the estimate. --time-limit (default 450 s) stops starting repeats that
would not finish in time; fewer than 3 finished repeats is a failure.

Libraries that the programs miss (libcublas.so.13, libnccl.so.2, libcupti.so.13) are looked for
in the CUDA toolkit and python's nvidia-* packages (scripts/gpu_libs.py, gpu-validate.sh's lookup
too) and added to LD_LIBRARY_PATH of all three ways; traintime gets TRAINTIME_CUPTI_LIB = the
libcupti the tracer loads, so both use the same one. Program paths can be overridden
(--launch-loop, --mlp, --tracer-lib, --traintime-lib).

Exit status: 0 every budget met, 1 a budget missed, 2 a run failed, printed nothing parseable,
or traintime did not capture (one line on stderr names the run and what to do).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from compare_events import Unusable, load_json  # noqa: E402  (the scripts' one rank-file reader)
from gpu_libs import MissingLibrary, ldd, library_env  # noqa: E402  (gpu-validate.sh's lookup too)
WAYS = ("none", "tracer", "traintime")
WAY_LABEL = {"none": "no tool", "tracer": "bare tracer", "traintime": "traintime"}
STRIPPED_ENV = ("LD_PRELOAD", "CUDA_INJECTION64_PATH", "TRAINTIME_OUTPUT", "TRAINTIME_RECORD_FIXTURE")
MIN_REPEATS = 3


class Failure(Exception):
    """A run failed or printed nothing usable: the message is the one line shown (exit 2)."""


@dataclass
class Workload:
    name: str
    unit: str
    budget_pct: float
    argv: List[str]
    parse: Callable[[str], Optional[Tuple[float, str]]]  # stdout -> (figure, device) or None
    expect: str  # what the line looks like, for the failure message
    runs: List[dict] = field(default_factory=list)


LOOP_RE = re.compile(r"^launch_loop: (\d+) launches, [0-9.]+ us/launch, total_s ([0-9.]+), device (.*)$", re.M)
MLP_RE = re.compile(r"^cuda_mlp: (.*?), world size .*?, (\d+) timed steps .*?, ([0-9.]+) ms/step", re.M)


def parse_loop(out: str) -> Optional[Tuple[float, str]]:
    m = LOOP_RE.search(out)
    if not m or int(m.group(1)) == 0:
        return None
    return float(m.group(2)) * 1e6 / int(m.group(1)), m.group(3).strip()


def parse_mlp(out: str) -> Optional[Tuple[float, str]]:
    m = MLP_RE.search(out)
    return (float(m.group(3)), m.group(1)) if m else None


def check_capture(out_dir: Path, run: str) -> None:
    files = sorted(out_dir.glob("rank-*.json"))
    if not files:
        raise Failure(f"{run}: traintime left no rank file in its TRAINTIME_OUTPUT, so it did not load or "
                      f"did not finish; a traintime that did not capture would make the overhead meaningless: check "
                      f"that LD_PRELOAD of libtraintime.so works here (scripts/gpu-validate.sh)")
    try:
        rank = load_json(str(files[0]), "rank file")
    except Unusable as e:
        raise Failure(f"{run}: {e}; run scripts/gpu-validate.sh first")
    capture = rank.get("gpu_capture") if isinstance(rank, dict) else None
    if capture != "cupti":
        why = rank.get("gpu_capture_reason", "") if isinstance(rank, dict) else ""
        raise Failure(f"{run}: traintime's rank file says gpu_capture {capture!r} ({why or 'no reason'}); a "
                      f"traintime that did not capture would make the overhead meaningless: fix capture "
                      f"first (TRAINTIME_CUPTI_LIB, scripts/gpu-validate.sh)")


def run_once(w: Workload, way: str, repeat: int, env: Dict[str, str], tools: Dict[str, Path],
             work: Path, timeout: float) -> dict:
    name = f"{w.name}/{WAY_LABEL[way]} (repeat {repeat})" if repeat else f"{w.name}/{WAY_LABEL[way]} (warm-up)"
    env = dict(env)
    out_dir = work / f"{w.name}-{way}-{repeat}"
    if way == "tracer":
        env["CUDA_INJECTION64_PATH"] = str(tools["tracer"])
    elif way == "traintime":
        env["LD_PRELOAD"] = str(tools["traintime"])
        env["TRAINTIME_OUTPUT"] = str(out_dir)
    t0 = time.monotonic()
    try:
        p = subprocess.run(w.argv, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure(f"{name}: still running after {timeout:.0f} s; raise --run-timeout or shorten the "
                      f"workload (--launches, --mlp-steps)")
    except OSError as e:
        raise Failure(f"{name}: cannot start {w.argv[0]} ({e}); check the --tree build")
    wall = time.monotonic() - t0
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["no stderr"])[-1]
        tool = " ".join(f"{k}={env[k]}" for k in STRIPPED_ENV[:3] if k in env)
        raise Failure(f"{name}: exited with status {p.returncode} ({last}); rerun it by hand to see why: "
                      f"{tool + ' ' if tool else ''}{shlex.join(w.argv)}")
    parsed = w.parse(p.stdout)
    if parsed is None:
        raise Failure(f"{name}: printed no line like '{w.expect}'; is {w.argv[0]} the right program?")
    if way == "traintime":
        check_capture(out_dir, name)
    return {"repeat": repeat, "way": way, "value": parsed[0], "device": parsed[1], "wall_s": round(wall, 3)}


def pct(a: float, b: float) -> float:
    return 100.0 * (a / b - 1.0)


def spread(xs: List[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def summarise(w: Workload) -> dict:
    by: Dict[int, Dict[str, float]] = {}
    for r in w.runs:
        if r["repeat"] > 0:
            by.setdefault(r["repeat"], {})[r["way"]] = r["value"]
    reps = [v for _, v in sorted(by.items()) if len(v) == 3]
    s = {
        "ways": {way: spread([v[way] for v in reps]) for way in WAYS},
        "traintime_over_tracer_pct": spread([pct(v["traintime"], v["tracer"]) for v in reps]),
        "tracer_over_none_pct": spread([pct(v["tracer"], v["none"]) for v in reps]),
        "traintime_over_none_pct": spread([pct(v["traintime"], v["none"]) for v in reps]),
        "budget_pct": w.budget_pct,
    }
    inc = s["traintime_over_tracer_pct"]
    s["verdict"] = "PASS" if inc["median"] <= w.budget_pct else "MISS"
    s["spread_crosses_budget"] = inc["min"] <= w.budget_pct < inc["max"]
    return s


def fmt_pct(d: dict) -> str:
    return f"{d['median']:+.2f} % [{d['min']:+.2f}, {d['max']:+.2f}]"


def table(workloads: List[Workload], sums: Dict[str, dict]) -> str:
    lines = [f"{'workload':<14} {'figure':<10} " + " ".join(f"{WAY_LABEL[w] + ' median [min-max]':<32}" for w in WAYS)]
    for w in workloads:
        ways = sums[w.name]["ways"]
        lines.append(f"{w.name:<14} {w.unit:<10} " + " ".join(
            f"{ways[x]['median']:.4f} [{ways[x]['min']:.4f}-{ways[x]['max']:.4f}]".ljust(32) for x in WAYS))
    lines.append("")
    lines.append(f"{'workload':<14} {'traintime over bare tracer':<30} {'budget':<8} {'verdict':<8} "
                 f"{'bare tracer over no tool':<30} {'traintime over no tool':<30}")
    for w in workloads:
        s = sums[w.name]
        note = " (spread crosses the budget)" if s["spread_crosses_budget"] else ""
        lines.append(f"{w.name:<14} {fmt_pct(s['traintime_over_tracer_pct']):<30} "
                     f"{'<= ' + format(w.budget_pct, 'g') + ' %':<8} {s['verdict']:<8} "
                     f"{fmt_pct(s['tracer_over_none_pct']):<30} {fmt_pct(s['traintime_over_none_pct'])}{note}")
    return "\n".join(line.rstrip() for line in lines)


def positive_int(v: str) -> int:
    n = int(v)
    if n < 1:
        raise argparse.ArgumentTypeError("wants a positive integer")
    return n


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, default=ROOT / "build-gpu", help="build tree (default build-gpu/)")
    ap.add_argument("--repeats", type=positive_int, default=10, help="counted repeats (default 10, at least 3)")
    ap.add_argument("--launches", type=positive_int, default=500000, help="gpu_launch_loop --launches (default 500000)")
    ap.add_argument("--mlp-steps", type=positive_int, default=30, help="cuda_mlp --steps (default 30)")
    ap.add_argument("--mlp-args", default="", help="more cuda_mlp options, e.g. '--no-nccl'")
    ap.add_argument("--run-timeout", type=float, default=120.0, help="seconds one run may take (default 120)")
    ap.add_argument("--time-limit", type=float, default=450.0,
                    help="start no repeat that would likely end after this many seconds (default 450)")
    ap.add_argument("--json-out", type=Path, help="write every raw figure and the summary here")
    ap.add_argument("--launch-loop", type=Path, help="default TREE/bin/gpu_launch_loop")
    ap.add_argument("--mlp", type=Path, help="default TREE/bin/cuda_mlp")
    ap.add_argument("--tracer-lib", type=Path, help="default TREE/lib/libgpu_bare_cupti_tracer.so")
    ap.add_argument("--traintime-lib", type=Path, help="default TREE/lib/libtraintime.so")
    a = ap.parse_args(argv)
    if a.repeats < MIN_REPEATS:
        ap.error(f"--repeats must be at least {MIN_REPEATS}")
    tree = a.tree.resolve()
    paths = {
        "launch_loop": (a.launch_loop or tree / "bin/gpu_launch_loop").resolve(),
        "mlp": (a.mlp or tree / "bin/cuda_mlp").resolve(),
        "tracer": (a.tracer_lib or tree / "lib/libgpu_bare_cupti_tracer.so").resolve(),
        "traintime": (a.traintime_lib or tree / "lib/libtraintime.so").resolve(),
    }
    workloads = [
        Workload("launch_loop", "us/launch", 3.0, [str(paths["launch_loop"]), "--launches", str(a.launches)],
                 parse_loop, "launch_loop: N launches, X us/launch, total_s Y, device NAME"),
        Workload("training_step", "ms/step", 1.0,
                 [str(paths["mlp"]), "--steps", str(a.mlp_steps)] + shlex.split(a.mlp_args),
                 parse_mlp, "cuda_mlp: DEVICE, world size 1 (...), N timed steps after W warm-up, X ms/step"),
    ]
    report: dict = {"tree": str(tree), "programs": {k: str(v) for k, v in paths.items()},
                    "repeats_planned": a.repeats, "repeats_done": 0, "warmup_rounds": 1,
                    "budgets_pct": {w.name: w.budget_pct for w in workloads}, "workloads": {}}
    status = 2
    work = Path(tempfile.mkdtemp(prefix="gpu-overhead."))
    try:
        for p in paths.values():
            if not p.is_file():
                raise Failure(f"{p} is missing: build it with 'cmake --build DIR --target traintime cuda_mlp "
                              f"gpu_launch_loop gpu_bare_cupti_tracer' and carry DIR/lib and DIR/bin")
        try:
            env, added = library_env(list(paths.values()),
                                     {k: v for k, v in os.environ.items() if k not in STRIPPED_ENV})
        except MissingLibrary as e:
            raise Failure(str(e)) from e
        cupti = ldd(paths["tracer"], env).get("libcupti.so.13")
        if cupti and "TRAINTIME_CUPTI_LIB" not in env:
            env["TRAINTIME_CUPTI_LIB"] = cupti
        report["env"] = {"added_library_dirs": added, "TRAINTIME_CUPTI_LIB": env.get("TRAINTIME_CUPTI_LIB")}
        tools = {"tracer": paths["tracer"], "traintime": paths["traintime"]}
        print(f"gpu_overhead: {a.repeats} repeats of {len(workloads)} workloads x 3 ways, rotating order; "
              f"work folder {work}", file=sys.stderr, flush=True)
        start = time.monotonic()
        for repeat in range(0, a.repeats + 1):  # 0: the warm-up round, not counted
            elapsed = time.monotonic() - start
            if repeat >= 2 and elapsed + elapsed / repeat > a.time_limit:
                print(f"gpu_overhead: stopping after {repeat - 1} repeats (--time-limit {a.time_limit:g} s)",
                      file=sys.stderr)
                break
            order = WAYS[repeat % 3:] + WAYS[:repeat % 3]
            for w in workloads:
                for way in order:
                    w.runs.append(run_once(w, way, repeat, env, tools, work, a.run_timeout))
            report["repeats_done"] = repeat
            done = f"repeat {repeat}" if repeat else "warm-up round"
            print(f"gpu_overhead: {done} done after {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
        if report["repeats_done"] < MIN_REPEATS:
            raise Failure(f"only {report['repeats_done']} repeats fitted in --time-limit {a.time_limit:g} s; "
                          f"at least {MIN_REPEATS} are needed: shorten --launches / --mlp-steps")
        sums = {w.name: summarise(w) for w in workloads}
        devices = sorted({r["device"] for w in workloads for r in w.runs})
        report["devices"] = devices
        print(f"gpu_overhead: {', '.join(devices)}; {report['repeats_done']} repeats, rotating order, "
              f"paired per repeat (figures: median [min-max]; increments: median of per-repeat ratios)")
        print(table(workloads, sums))
        missed = [w.name for w in workloads if sums[w.name]["verdict"] != "PASS"]
        if missed:
            print("RESULT: budget missed: " + ", ".join(
                f"{m} (traintime {sums[m]['traintime_over_tracer_pct']['median']:+.2f} % over bare tracer, "
                f"budget {sums[m]['budget_pct']:g} %)" for m in missed))
            status = 1
        else:
            print("RESULT: every budget met (traintime over bare tracer)")
            status = 0
        for w in workloads:
            report["workloads"][w.name] = {"unit": w.unit, "argv": w.argv, "runs": w.runs, "summary": sums[w.name]}
    except Failure as e:
        print(f"gpu_overhead: {e}", file=sys.stderr)
        report["error"] = str(e)
        for w in workloads:
            report["workloads"].setdefault(w.name, {"unit": w.unit, "argv": w.argv, "runs": w.runs})
    finally:
        report["exit_status"] = status
        if a.json_out:
            a.json_out.parent.mkdir(parents=True, exist_ok=True)
            a.json_out.write_text(json.dumps(report, indent=2) + "\n")
        shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
