#!/usr/bin/env python3
"""Reference step breakdown, recomputed by brute force from a TRAINTIME_TRACE=1 dump.

usage: reference_breakdown.py TRACE_JSON                 print the breakdown as JSON
       reference_breakdown.py TRACE_JSON RANK_FILE       compare with the rank file, exactly

What it checks, and what it does not: every event's step and category come from the product's
own trace, i.e. from traintime's attribution. So this is a check of the union/breakdown
arithmetic (the per-step, per-device interval sums of DESIGN §4) done a second way, with no code
shared with the engine and only the Python standard library; it cannot catch an event given the
wrong step or category. Attribution is checked against sim_train's own labels by
tests/sim/compare_truth.py. For every (step, device) it sweeps the sorted start/end points of
that group's activities and, between two consecutive points, looks at which categories are
running; each elementary segment then adds its length to the measures of DESIGN §4:
  busy per category   covered by that category
  compute             covered by forward, backward, optimizer, other or unattributed
  comm                covered by comm;  comm_overlapped: comm and compute;  exposed_comm: comm
                      and not compute
  io                  covered by io
  gpu_busy            covered by anything
  idle                step span on the device ([first start, last end]) minus gpu_busy
Every figure is summed over all (step, device) groups, warm-up steps included; raw sums add
durations. Compared: every category's {gpu_busy_ns, gpu_sum_ns, count} and every steps.totals
field present in both. Exit 0 on an exact match, 1 with one line per difference, 2 when the
files cannot be read or the trace is incomplete (truncated, or late records folded away).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator

COMPUTE = {"forward", "backward", "optimizer", "other", "recompute", "unattributed"}


def load(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"reference_breakdown: cannot read {path}: {e}", file=sys.stderr)
        sys.exit(2)


def events_of(trace: dict) -> Iterator[dict]:
    if trace.get("format") != "traintime-trace/1":
        print("reference_breakdown: not a traintime-trace/1 dump", file=sys.stderr)
        sys.exit(2)
    if trace.get("truncated") or trace.get("late_records", 0):
        print("reference_breakdown: the trace is truncated or has late records; no exact "
              "reference is possible", file=sys.stderr)
        sys.exit(2)
    col = {name: i for i, name in enumerate(trace["columns"])}
    cats = trace["categories"]
    for e in trace["events"]:
        yield {
            "start": e[col["start_ns"]],
            "end": max(e[col["end_ns"]], e[col["start_ns"]]),
            "device": e[col["device"]],
            "step": e[col["step"]],
            "category": cats[e[col["category"]]],
        }


def group_measures(events: list[dict]) -> dict[str, int]:
    """Union-based measures of one (step, device) group, by sweeping elementary segments."""
    points = sorted({e["start"] for e in events} | {e["end"] for e in events})
    m: dict[str, int] = defaultdict(int)
    for lo, hi in zip(points, points[1:]):
        running = {e["category"] for e in events if e["start"] <= lo and e["end"] >= hi}
        if not running:
            continue
        length = hi - lo
        m["gpu_busy_ns"] += length
        for c in running:
            m["busy:" + c] += length
        compute = bool(running & COMPUTE)
        if compute:
            m["compute_ns"] += length
        if "comm" in running:
            m["comm_ns"] += length
            m["comm_overlapped_ns" if compute else "exposed_comm_ns"] += length
        if "io" in running:
            m["io_ns"] += length
    span = max(e["end"] for e in events) - min(e["start"] for e in events)
    m["idle_ns"] += span - m["gpu_busy_ns"]
    return m


def breakdown(trace: dict) -> dict:
    groups: dict[tuple[int, int], list[dict]] = defaultdict(list)
    categories = {c: {"gpu_busy_ns": 0, "gpu_sum_ns": 0, "count": 0} for c in trace["categories"]}
    totals: dict[str, int] = defaultdict(int)
    for e in events_of(trace):
        groups[(e["step"], e["device"])].append(e)
        d = e["end"] - e["start"]
        c = categories[e["category"]]
        c["gpu_sum_ns"] += d
        c["count"] += 1
        totals["gpu_sum_ns"] += d
        if e["category"] in COMPUTE:
            totals["compute_sum_ns"] += d
        elif e["category"] == "comm":
            totals["comm_sum_ns"] += d
        elif e["category"] == "io":
            totals["io_sum_ns"] += d
    for group in groups.values():
        for key, value in group_measures(group).items():
            if key.startswith("busy:"):
                categories[key[5:]]["gpu_busy_ns"] += value
            else:
                totals[key] += value
    for key in ("gpu_busy_ns", "compute_ns", "comm_ns", "comm_overlapped_ns", "exposed_comm_ns",
                "io_ns", "idle_ns", "gpu_sum_ns", "compute_sum_ns", "comm_sum_ns", "io_sum_ns"):
        totals.setdefault(key, 0)
    return {"categories": categories, "steps": {"totals": dict(totals)}}


def compare(ref: dict, rank: dict) -> list[str]:
    out: list[str] = []
    rank_cats = rank.get("categories", {})
    for cat, want in ref["categories"].items():
        got = rank_cats.get(cat, {})
        for field, value in want.items():
            if got.get(field, 0) != value:
                out.append(f"categories.{cat}.{field}: rank file {got.get(field, 0)} != reference {value}")
    rank_totals = rank.get("steps", {}).get("totals", {})
    for field, value in ref["steps"]["totals"].items():
        if field in rank_totals and rank_totals[field] != value:
            out.append(f"steps.totals.{field}: rank file {rank_totals[field]} != reference {value}")
    missing = [f for f in ("gpu_busy_ns", "compute_ns", "comm_ns", "comm_overlapped_ns",
                           "exposed_comm_ns", "io_ns", "idle_ns") if f not in rank_totals]
    if missing:
        out.append("steps.totals lacks " + ", ".join(missing))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description="Recompute the step breakdown of a TRAINTIME_TRACE=1 dump "
                                             "and print it, or compare it with a rank file exactly.")
    ap.add_argument("trace", type=Path, help="rank-NNNNN.trace.json")
    ap.add_argument("rank_file", type=Path, nargs="?", help="rank-NNNNN.json to compare with")
    args = ap.parse_args()
    ref = breakdown(load(args.trace))
    if args.rank_file is None:
        print(json.dumps(ref, indent=1, sort_keys=True))
        return 0
    diffs = compare(ref, load(args.rank_file))
    if diffs:
        print(f"MISMATCH between {args.rank_file} and the reference breakdown of {args.trace}:")
        for d in diffs:
            print("  " + d)
        return 1
    print(f"MATCH: {args.rank_file} equals the brute-force breakdown of {args.trace}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
