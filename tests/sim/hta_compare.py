#!/usr/bin/env python3
"""traintime beside HolisticTraceAnalysis (HTA) on the same real torch.profiler traces.

Each trace is replayed on the SIMULATED GPU by sim_replay (annotated mode: its ProfilerSteps end
traintime's steps) with traintime preloaded, and read by HTA (tests/sim/hta_figures.py, in HTA's
own environment: scripts/pyenv.py --set hta). Both speak of the same GPU work: HTA's default
window, the work launched before the last ProfilerStep began, is traintime's steps 0 to N-2 (step
0 holds what was launched before the first ProfilerStep, as HTA's window does).

For each figure (LABELS) both tools' answers are set side by side, and their difference is
explained from the trace alone (tests/sim/trace_truth.py's replayed activities, sharing no code
with either tool): HTA's figure must equal HTA's rules applied to the trace's work (within
tolerance_ns: exact where the trace is in whole microseconds, which HTA reads as integers) and
traintime's must equal traintime's rules applied to it (exactly). The difference then splits into
what summing step by step instead of over the whole window makes ("steps vs window") and what
the two tools' rules make ("rules"). Exit 1 and one DRIFT line per failed check; --markdown
prints the table of docs/validation.md ("Real traces").
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import trace_truth  # noqa: E402  (the trace's own truth: shares no code with traintime or HTA)

COMP, COMM = "COMPUTATION", "COMMUNICATION"


def replay(build: Path, trace: Path, out: Path) -> dict[str, Any]:
    """traintime's rank file of the trace's annotated replay on simgpu."""
    sim = build / "sim"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINTIME_", "SIMGPU_"))}
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    env.update({"LD_LIBRARY_PATH": str(sim), "LD_PRELOAD": str(build / "lib" / "libtraintime.so"),
                "TRAINTIME_CUPTI_LIB": str(sim / "libcupti.so.13"), "TRAINTIME_OUTPUT": str(out),
                "TRAINTIME_STEP_DETAIL": "1024"})
    p = subprocess.run([str(build / "bin" / "sim_replay"), str(trace), "--mode", "annotated", "--speed", "max"],
                       env=env, capture_output=True, text=True, timeout=120)
    files = sorted(out.glob("rank-*.json"))
    if p.returncode != 0 or len(files) != 1:
        raise RuntimeError(f"replay of {trace.name} failed (exit {p.returncode}, {len(files)} rank files): "
                           f"{p.stderr.strip()[-400:]}")
    return json.loads(files[0].read_text())


def window_steps(steps_count: int) -> int:
    """HTA's window in traintime's steps: 0..N-2, N = the steps tt_step ended (ProfilerSteps)."""
    return steps_count - 1


def traintime_window(doc: dict[str, Any]) -> dict[str, int]:
    """traintime's figures summed over the steps of HTA's window."""
    steps = doc["steps"]
    last = window_steps(steps["count"])
    rows = [r for r in steps["detail"] if r["index"] < last and not r.get("partial")]
    if len(rows) != last:
        raise RuntimeError(f"rank {doc.get('rank')}: steps.detail holds {len(rows)} of the {last} steps needed")
    out = {"steps": len(rows), "span": sum(r["span_ns"] for r in rows)}
    for key in ("gpu_busy_ns", "compute_ns", "comm_ns", "comm_overlapped_ns", "exposed_comm_ns", "io_ns", "idle_ns"):
        out[key] = sum(r["totals"][key] for r in rows)
    return out


def hta_side(hta_python: Path, traces: list[Path], work: Path) -> dict[str, Any]:
    dirs = []
    for trace in traces:
        d = work / "hta" / trace.name.split(".")[0]
        d.mkdir(parents=True, exist_ok=True)
        (d / trace.name).symlink_to(trace.resolve())
        dirs.append(d)
    p = subprocess.run([str(hta_python), str(HERE / "hta_figures.py"), *map(str, dirs)],
                       capture_output=True, text=True, timeout=180)
    if p.returncode != 0:
        raise RuntimeError(f"HTA failed on {', '.join(t.name for t in traces)}: {p.stderr.strip()[-600:]}")
    return json.loads(p.stdout)


# HTA's kernel types (hta/utils/utils.py, 0.5.0), applied to every GPU event's name: NCCL kernels are
# communication; computation is every name that matches none of NCCL_COMPUTE, so copies, memsets
# and a kernel whose name holds "Memcpy" or "Sync" anywhere are not computation.
HTA_COMM = re.compile(r"^nccl.*Kernel")
HTA_NCCL_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


def union_of(acts: list[dict]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for a in sorted(acts, key=lambda a: a["start"]):
        if merged and a["start"] <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], a["end"])
        else:
            merged.append([a["start"], a["end"]])
    return [(s, e) for s, e in merged]


def measure(intervals: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in intervals)


def intersection(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    total, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def figures_of(acts: list[dict], rule: str) -> dict[str, int]:
    """The compared figures of `acts` (one stretch of GPU work) by one tool's rules: "hta" sorts work
    by name (HTA's kernel types), "traintime" by category (DESIGN §4: comm, io, the rest compute)."""
    if rule == "hta":
        comp = [a for a in acts if not HTA_NCCL_COMPUTE.match(a["name"])]
        comm = [a for a in acts if HTA_COMM.match(a["name"])]
    else:
        comp = [a for a in acts if a["cat"] not in ("comm", "io")]
        comm = [a for a in acts if a["cat"] == "comm"]
    every, comp_u, comm_u = union_of(acts), union_of(comp), union_of(comm)
    span = max(a["end"] for a in acts) - min(a["start"] for a in acts)
    overlapped = intersection(comm_u, comp_u)
    return {"span": span, "busy": measure(every), "idle": span - measure(every), "compute": measure(comp_u),
            "non_compute": measure(every) - measure(comp_u), "comm": measure(comm_u),
            "comm_overlapped": overlapped, "exposed_comm": measure(comm_u) - overlapped}


def from_trace(trace: Path) -> dict[str, dict[str, int]]:
    """From the trace alone, over HTA's window: HTA's rules over the whole window ("hta"), the same
    rules step by step and summed ("hta_by_step"), and traintime's rules step by step ("traintime")."""
    truth = trace_truth.compute(trace_truth.load_trace(trace), "annotated", trace, with_activities=True)
    last = window_steps(truth["steps"]["count"])
    acts = [a for a in truth["activities"] if a["step"] < last]
    out: dict[str, dict[str, int]] = {"hta": figures_of(acts, "hta"), "window": {"activities": len(acts),
                                                                  "last_end_ns": max(a["end"] for a in acts)}}
    for name, rule in (("hta_by_step", "hta"), ("traintime", "traintime")):
        per = [figures_of(step, rule) for step in ([a for a in acts if a["step"] == k] for k in range(last)) if step]
        out[name] = {f: sum(p[f] for p in per) for f in per[0]}
    return out


def us(value: float) -> int:
    return round(value * 1000)


def parts_with(types: dict[str, float], wanted: str, without: str = "") -> int:
    """ns of HTA's kernel-type segments ("A overlapping B") that involve `wanted` and not `without`."""
    kinds = {name: set(name.split(" overlapping ")) for name in types}
    return us(sum(t for name, t in types.items() if wanted in kinds[name] and without not in kinds[name]))


# HTA's figure (ns) for each compared one: its temporal breakdown, its overlap percentage of its
# communication time, and its kernel-type breakdown (with memory kernels).
HTA_FIGURES: dict[str, Callable[[dict], int]] = {
    "span": lambda h: us(h["kernel_time_us"]),
    "busy": lambda h: us(h["kernel_time_us"] - h["idle_us"]),
    "idle": lambda h: us(h["idle_us"]),
    "compute": lambda h: us(h["compute_us"]),
    "non_compute": lambda h: us(h["non_compute_us"]),
    "comm": lambda h: parts_with(h["kernel_types_us"], COMM),
    "comm_overlapped": lambda h: round(parts_with(h["kernel_types_us"], COMM) * (h["comm_comp_overlap_pctg"] or 0) / 100),
    "exposed_comm": lambda h: parts_with(h["kernel_types_us"], COMM, without=COMP),
}
TRAINTIME_FIGURES: dict[str, Callable[[dict], int]] = {
    "span": lambda w: w["span"], "busy": lambda w: w["gpu_busy_ns"], "idle": lambda w: w["idle_ns"],
    "compute": lambda w: w["compute_ns"], "non_compute": lambda w: w["gpu_busy_ns"] - w["compute_ns"],
    "comm": lambda w: w["comm_ns"], "comm_overlapped": lambda w: w["comm_overlapped_ns"],
    "exposed_comm": lambda w: w["exposed_comm_ns"],
}
LABELS = {"span": "span", "busy": "GPU busy", "idle": "idle", "compute": "compute", "non_compute": "non-compute",
          "comm": "communication", "comm_overlapped": "comm. overlapped by compute",
          "exposed_comm": "exposed communication"}


KERNEL_TYPE_FIGURES = ("comm", "comm_overlapped", "exposed_comm")


def tolerance_ns(figure: str, window: dict[str, int], exact: bool, comm_ns: int) -> int:
    """How far HTA's figure may be from its rules applied to the trace. 0 where the trace is in whole
    microseconds. With fractional ones HTA holds float64 microseconds: each end of each interval may
    move by one unit in the last place at the trace's timestamps (0.25 us at today's Unix time,
    0.001 us on a trace that counts from boot), and its kernel-type breakdown truncates each segment
    to a whole microsecond besides (a microsecond per activity). Its overlap comes as a percentage to
    0.01: half of that of the communication time besides."""
    tol = 0
    if exact:
        tol = math.ceil(2 * window["activities"] * math.ulp(window["last_end_ns"] / 1000) * 1000)
        if figure in KERNEL_TYPE_FIGURES:
            tol += 1000 * window["activities"]
    if figure == "comm_overlapped":
        tol += comm_ns // 20000 + 1
    return tol


def compare(hta: dict[str, Any], windows: dict[str, dict[str, int]], traced: dict[str, dict[str, dict[str, int]]]
            ) -> tuple[list[str], list[str]]:
    """(markdown table lines, failures) from HTA's figures, traintime's windows (traintime_window) and
    the figures from the trace (from_trace)."""
    lines = ["| trace | figure | HTA | HTA, exact ts | traintime | difference | steps vs window | rules "
             "| HTA off its rules (tolerance) |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    failures: list[str] = []
    for name, entry in hta.items():
        window, trace = windows[name], traced[name]
        exact = entry["exact"] is not None
        h = entry["exact"] or entry["default"]
        short = name.split(".")[0]
        for figure, label in LABELS.items():
            got_hta, got_tt = HTA_FIGURES[figure](h), TRAINTIME_FIGURES[figure](window)
            want_hta, want_tt = trace["hta"][figure], trace["traintime"][figure]
            by_steps = trace["hta_by_step"][figure] - want_hta
            rules = want_tt - trace["hta_by_step"][figure]
            tol = tolerance_ns(figure, trace["window"], exact, window["comm_ns"])
            default = HTA_FIGURES[figure](entry["default"])
            lines.append(f"| {short} | {label} | {default / 1e3:,.0f} | {f'{got_hta / 1e3:,.1f}' if exact else ''} | "
                         f"{got_tt / 1e3:,.1f} | {(got_tt - got_hta) / 1e3:,.1f} | {by_steps / 1e3:,.1f} | "
                         f"{rules / 1e3:,.1f} | {(got_hta - want_hta) / 1e3:,.1f} ({tol / 1e3:,.0f}) |")
            if abs(got_hta - want_hta) > tol:
                failures.append(f"{short}: {label}: HTA says {got_hta} ns, its rules on the trace give {want_hta} ns "
                                f"(off by {got_hta - want_hta} ns, tolerance {tol} ns)")
            if got_tt != want_tt:
                failures.append(f"{short}: {label}: traintime says {got_tt} ns, its rules on the trace give "
                                f"{want_tt} ns")
    return lines, failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", type=Path, required=True, help="traintime's build tree (sim_replay, simgpu)")
    ap.add_argument("--hta-python", type=Path, required=True, help="python of HTA's environment (scripts/pyenv.py --set hta)")
    ap.add_argument("traces", type=Path, nargs="+", help="single-rank torch.profiler traces")
    ap.add_argument("--markdown", action="store_true", help="print the comparison table")
    ap.add_argument("--json", type=Path, help="write both tools' figures there")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hta-compare-") as tmp:
        work = Path(tmp)
        hta = hta_side(args.hta_python, args.traces, work)
        docs = {}
        for trace in args.traces:
            out = work / "tt" / trace.name.split(".")[0]
            out.mkdir(parents=True)
            docs[trace.name] = replay(args.build_dir.resolve(), trace, out)
    windows = {t.name: traintime_window(docs[t.name]) for t in args.traces}
    traced = {t.name: from_trace(t) for t in args.traces}
    if args.json:
        args.json.write_text(json.dumps({"hta": hta, "traintime": windows, "from_trace": traced}, indent=1))
    lines, failures = compare(hta, windows, traced)
    if args.markdown:
        print("\n".join(lines))
    for failure in failures:
        print(f"DRIFT: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
