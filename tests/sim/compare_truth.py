#!/usr/bin/env python3
"""Compare a traintime rank file with a simgpu truth file (SIMULATED GPU), exactly, to the ns.

The truth is sim_train's (--truth) or, for a real trace replayed by sim_replay, trace_truth.py's.

Compared, every field the truth has:
  categories          gpu_busy_ns, gpu_sum_ns, count per category (a category missing on one side
                      counts as all zeros)
  steps               count, partial_final_step (absent in the rank file = false), every field
                      of steps.totals
  steps.detail        each rank-file row against the truth's steps.by_step row of the same index
                      (a step with no GPU work has none: all zeros): span_ns, the totals the
                      truth has, busy_ns_by_category; wall_ns non-zero on every step ended by a
                      step marker (its value is host time, which the truth does not know), 0 on
                      the partial final step; and every truth step from the first kept index on
                      has a row
  comm                rows keyed by (op, comm_size): calls, bytes, gpu_ns
  memcpy              per direction: count, bytes, gpu_ns (a direction missing on one side counts
                      as all zeros)
  regions             per path: category, and the region's own non-comm work (the truth leaves
                      comm kernels out): kernels, activities (count of every by_category entry)
                      and gpu_sum_ns, gpu_busy_ns (the rank file's busy of the truth's category);
                      a rank-file region the truth does not list must have no non-comm GPU work
  communicators       per communicator size: Σ ops_enqueued = the truth's NCCL calls of that
                      size that take a sequence number (not the one-sided PutSignal, Signal,
                      WaitSignal, which launch no NCCL kernel), every call completed (ops_completed = ops_enqueued) when the truth's
                      calls launched GPU work, no communicator of a size the truth has no call of
  top_kernels         (a trace truth: tests/sim/trace_truth.py) the rank's own list and each
                      region's against the truth's kernels by name: every listed kernel's count
                      and gpu_sum_ns, and no kernel left out with more time than the least listed
  comm_calls          (a trace truth, instead of comm) rows keyed by (op, comm_size): calls, and
                      bytes where the trace says them (NCCL kernels sized by name: unknown); the
                      rows' gpu_ns together = comm_gpu_ns
  memory              (when the truth has it: sim_train --alloc-per-step) the run's peak_bytes and
                      in_use_bytes, and each rank-file step row's memory (peak_bytes, in_use_bytes,
                      and its devices[] entry of the truth's device) against the truth's
                      memory.by_step row of the same index; every truth step from the first kept
                      index on must have a row with memory
Exit 0 when everything matches, 1 with one line per difference otherwise, 2 when a file cannot
be read.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

CATEGORY_FIELDS = ("gpu_busy_ns", "gpu_sum_ns", "count")
TOTAL_FIELDS = ("gpu_busy_ns", "compute_ns", "comm_ns", "comm_overlapped_ns", "exposed_comm_ns",
                "io_ns", "idle_ns")
COMM_FIELDS = ("calls", "bytes", "gpu_ns")
MEMCPY_FIELDS = ("count", "bytes", "gpu_ns")
REGION_FIELDS = ("kernels", "activities", "gpu_sum_ns", "gpu_busy_ns")
DETAIL_FIELDS = ("gpu_busy_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "io_ns", "idle_ns")


def load(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"compare_truth: cannot read {path}: {e}", file=sys.stderr)
        sys.exit(2)


def diff_value(where: str, got: Any, want: Any, out: list[str]) -> None:
    if got != want:
        delta = ""
        if isinstance(got, int) and isinstance(want, int) and not isinstance(got, bool):
            delta = f" (rank file {'+' if got > want else ''}{got - want})"
        out.append(f"{where}: rank file {got} != truth {want}{delta}")


def region_own_work(row: dict) -> dict[str, int]:
    """A rank-file region row's GPU work without its comm kernels, in the truth's terms."""
    comm = row.get("by_category", {}).get("comm", {})
    activities = sum(c.get("count", 0) for cat, c in row.get("by_category", {}).items() if cat != "comm")
    busy = sum(c.get("gpu_busy_ns", 0) for cat, c in row.get("by_category", {}).items() if cat != "comm")
    return {"kernels": row.get("kernels", 0) - comm.get("count", 0),
            "activities": activities,
            "gpu_sum_ns": row.get("gpu_sum_ns", 0) - comm.get("gpu_sum_ns", 0),
            "gpu_busy_ns": busy}


def compare_step_detail(rank_steps: dict, truth_steps: dict, out: list[str]) -> None:
    detail = rank_steps.get("detail", [])
    by_step = {s.get("index"): s for s in truth_steps.get("by_step", [])}
    markers = truth_steps.get("count", 0)
    # Steps found without a marker have no host time: no tt_step was called.
    detected = rank_steps.get("source") == "detected"
    for row in detail:
        index = row.get("index")
        name = f"steps.detail[index {index}]"
        want = by_step.get(index, {})
        partial = index == markers
        diff_value(f"{name}.partial", row.get("partial", False), partial, out)
        wall = row.get("wall_ns", 0)
        if detected and wall != 0:
            out.append(f"{name}.wall_ns: rank file {wall} on a detected step, which no marker timed")
        elif partial and wall != 0:
            out.append(f"{name}.wall_ns: rank file {wall} on the partial final step, which no marker ended")
        elif not partial and not detected and not wall > 0:
            out.append(f"{name}.wall_ns: rank file {wall}, a step ended by a marker has host time")
        diff_value(f"{name}.span_ns", row.get("span_ns", 0), want.get("span_ns", 0), out)
        for field in DETAIL_FIELDS:
            diff_value(f"{name}.totals.{field}", row.get("totals", {}).get(field, 0), want.get(field, 0), out)
        rc, tc = row.get("busy_ns_by_category", {}), want.get("busy_ns_by_category", {})
        for cat in sorted(set(rc) | set(tc)):
            diff_value(f"{name}.busy_ns_by_category.{cat}", rc.get(cat, 0), tc.get(cat, 0), out)
    if detail:
        kept = {row.get("index") for row in detail}
        first = min(kept)
        for index in sorted(i for i in by_step if i >= first and i not in kept):
            out.append(f"steps.detail: no row for step {index}, which the truth has")


# NCCL 2.32's one-sided calls: counted in comm rows, but enqueued as no sequenced operation.
UNSEQUENCED_OPS = {"PutSignal", "Signal", "WaitSignal"}


def compare_communicators(rank: dict, truth_rows: list[dict], out: list[str]) -> None:
    calls: dict[int, int] = {}
    launched: dict[int, bool] = {}
    for row in truth_rows:
        size = row.get("comm_size")
        sequenced = 0 if row.get("op") in UNSEQUENCED_OPS else row.get("calls", 0)
        calls[size] = calls.get(size, 0) + sequenced
        launched[size] = launched.get(size, False) or row.get("gpu_ns", 1) > 0
    enqueued: dict[int, int] = {}
    for c in rank.get("communicators", []):
        size = c.get("size")
        enqueued[size] = enqueued.get(size, 0) + c.get("ops_enqueued", 0)
        done, issued = c.get("ops_completed", 0), c.get("ops_enqueued", 0)
        if size in calls and launched[size] and done != issued:
            out.append(f"communicators[{c.get('id')}].ops_completed: {done} of {issued} enqueued, "
                       "all of the truth's calls completed")
    for size in sorted(set(calls) | set(enqueued)):
        if size not in calls:
            out.append(f"communicators of size {size}: in the rank file but the truth made no call on one")
            continue
        diff_value(f"communicators of size {size}: ops_enqueued", enqueued.get(size, 0), calls[size], out)


def compare(rank: dict, truth: dict) -> list[str]:
    out: list[str] = []
    rc, tc = rank.get("categories", {}), truth.get("categories", {})
    for cat in sorted(set(rc) | set(tc)):
        for field in CATEGORY_FIELDS:
            diff_value(f"categories.{cat}.{field}", rc.get(cat, {}).get(field, 0),
                       tc.get(cat, {}).get(field, 0), out)
    rs, ts = rank.get("steps", {}), truth.get("steps", {})
    diff_value("steps.count", rs.get("count"), ts.get("count"), out)
    if "source" in ts:  # sim_train's truth says whether a marker was called
        diff_value("steps.source", rs.get("source"), ts["source"], out)
    diff_value("steps.partial_final_step", rs.get("partial_final_step", False),
               ts.get("partial_final_step"), out)
    for field in TOTAL_FIELDS:
        diff_value(f"steps.totals.{field}", rs.get("totals", {}).get(field),
                   ts.get("totals", {}).get(field), out)
    compare_step_detail(rs, ts, out)
    trace_truth = "comm_calls" in truth  # tests/sim/trace_truth.py: a real trace's replay
    compare_communicators(rank, truth["comm_calls"] if trace_truth else truth.get("comm", []), out)

    def rows(rows: list[dict]) -> dict[tuple, dict]:
        return {(r.get("op"), r.get("comm_size")): r for r in rows}

    rr, tr = rows(rank.get("comm", [])), rows(truth["comm_calls"] if trace_truth else truth.get("comm", []))
    for key in sorted(set(rr) | set(tr), key=str):
        name = f"comm[{key[0]}, size {key[1]}]"
        if key not in rr:
            out.append(f"{name}: missing from the rank file")
            continue
        if key not in tr:
            out.append(f"{name}: in the rank file but not in the truth")
            continue
        for field in COMM_FIELDS:
            want = tr[key].get(field)
            # A trace truth has no per-row GPU time (the replay's group kernels are split between
            # their calls), and no bytes for calls sized by kernel name (count 1: bytes unknown).
            if trace_truth and (field == "gpu_ns" or want is None):
                continue
            diff_value(f"{name}.{field}", rr[key].get(field), want, out)
    if trace_truth:
        diff_value("comm: Σ gpu_ns", sum(r.get("gpu_ns", 0) for r in rank.get("comm", [])), truth["comm_gpu_ns"], out)
        compare_kernel_lists("top_kernels", rank.get("top_kernels"), truth.get("kernels", {}), out)

    rm, tm = rank.get("memcpy", {}), truth.get("memcpy", {})
    for kind in sorted(set(rm) | set(tm)):
        for field in MEMCPY_FIELDS:
            diff_value(f"memcpy.{kind}.{field}", rm.get(kind, {}).get(field, 0),
                       tm.get(kind, {}).get(field, 0), out)

    rg = {r.get("path"): r for r in rank.get("regions", [])}
    tg = {r.get("path"): r for r in truth.get("regions", [])}
    for path in sorted(set(rg) | set(tg)):
        name = f"regions[{path}]"
        if path not in rg:
            out.append(f"{name}: missing from the rank file")
            continue
        own = region_own_work(rg[path])
        if path not in tg:
            if any(own.values()):
                out.append(f"{name}: GPU work {own} in the rank file, none in the truth")
            continue
        diff_value(f"{name}.category", rg[path].get("category"), tg[path].get("category"), out)
        for field in REGION_FIELDS:
            diff_value(f"{name}.{field}", own[field], tg[path].get(field), out)
        if "kernels_by_name" in tg[path]:
            compare_kernel_lists(f"{name}.top_kernels", rg[path].get("top_kernels"), tg[path]["kernels_by_name"], out)
    if "memory" in truth:
        compare_memory(rank, truth["memory"], out)
    return out


def compare_kernel_lists(name: str, listed: list[dict] | None, truth: dict[str, dict], out: list[str]) -> None:
    """A rank file's top-kernel list against the truth's kernels by name: every listed kernel's
    count and GPU time are the truth's, and it lists the truth's kernels with the most GPU time
    (all of them when they fit: none left out has more time than the least listed)."""
    if listed is None:
        out.append(f"{name}: missing from the rank file, the truth has {len(truth)} kernel name(s)")
        return
    seen = set()
    for row in listed:
        kname = row.get("name")
        seen.add(kname)
        want = truth.get(kname)
        if want is None:
            out.append(f"{name}[{kname}]: in the rank file but not in the truth")
            continue
        diff_value(f"{name}[{kname}].count", row.get("count"), want["count"], out)
        diff_value(f"{name}[{kname}].gpu_sum_ns", row.get("gpu_sum_ns"), want["gpu_sum_ns"], out)
    floor = min((r.get("gpu_sum_ns", 0) for r in listed), default=None)
    missing = sorted(k for k, v in truth.items() if k not in seen and (floor is None or v["gpu_sum_ns"] > floor))
    for kname in missing[:10]:
        out.append(f"{name}: {kname} ({truth[kname]['gpu_sum_ns']} ns) not listed, the truth has it among the top")
    if len(missing) > 10:
        out.append(f"{name}: and {len(missing) - 10} more kernels not listed")


def compare_memory(rank: dict, truth_memory: dict, out: list[str]) -> None:
    run = rank.get("memory")
    if run is None:
        out.append("memory: missing from the rank file, the truth has it")
        return
    device = truth_memory.get("device", 0)

    def compare_figures(name: str, got: dict, want: dict) -> None:
        for field in ("peak_bytes", "in_use_bytes"):
            diff_value(f"{name}.{field}", got.get(field), want.get(field), out)
        devices = {d.get("cuda_device"): d for d in got.get("devices", [])}
        if set(devices) != {device}:
            out.append(f"{name}.devices: rank file has devices {sorted(devices)}, the truth device {device} only")
            return
        for field in ("peak_bytes", "in_use_bytes"):
            diff_value(f"{name}.devices[{device}].{field}", devices[device].get(field), want.get(field), out)

    compare_figures("memory", run, truth_memory)
    by_step = {s.get("index"): s for s in truth_memory.get("by_step", [])}
    detail = [row for row in rank.get("steps", {}).get("detail", []) if row.get("index") in by_step]
    for row in detail:
        name = f"steps.detail[index {row.get('index')}].memory"
        if "memory" not in row:
            out.append(f"{name}: missing from the rank file, the truth has it")
            continue
        compare_figures(name, row["memory"], by_step[row.get("index")])
    if not detail:
        out.append("steps.detail: no row with memory, the truth has memory.by_step")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rank_file", type=Path)
    ap.add_argument("truth_file", type=Path)
    args = ap.parse_args()
    diffs = compare(load(args.rank_file), load(args.truth_file))
    if diffs:
        print(f"MISMATCH between {args.rank_file} and the simulated-GPU truth {args.truth_file}:")
        for line in diffs:
            print("  " + line)
        return 1
    print(f"MATCH: {args.rank_file} equals the simulated-GPU truth {args.truth_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
