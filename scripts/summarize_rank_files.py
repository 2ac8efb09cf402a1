#!/usr/bin/env python3
"""Print a short per-rank summary of the traintime rank files in a directory (used by demo.sh).

usage: summarize_rank_files.py DIR [--label TEXT] [--top N]

For every rank-*.json in DIR (trace dumps skipped): steps and mean step wall time, GPU busy time
per category with its share of the GPU step time, the step breakdown of steps.totals, the NCCL
comm rows and the regions with the most GPU busy time. Then one line per rank side by side, so
a straggler stands out. --label is printed with every rank (demo.sh passes the word SIMULATED
when the GPU is simgpu). Standard library only. Exit 0, or 1 when DIR holds no readable rank file.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from pathlib import Path
from typing import Any

CATEGORIES = ("forward", "backward", "optimizer", "comm", "io", "other", "recompute", "unattributed")
TOTALS = (("compute", "compute_ns"), ("comm", "comm_ns"),
          ("comm overlapped", "comm_overlapped_ns"), ("exposed comm", "exposed_comm_ns"),
          ("io", "io_ns"), ("idle", "idle_ns"))


def ms(ns: float) -> float:
    return ns / 1e6


def pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole else 0.0


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0
    return f"{n} B"


def load_rank_files(directory: Path) -> list[tuple[str, dict[str, Any]]]:
    paths = sorted(p for p in glob.glob(os.path.join(directory, "rank-*.json"))
                   if not p.endswith(".trace.json"))
    files = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                files.append((path, json.load(f)))
        except (OSError, ValueError) as e:
            print(f"{os.path.basename(path)}: unreadable ({e})")
    return files


def step_span_ns(totals: dict[str, int]) -> int:
    # Every step's GPU span is its busy time plus its idle time (docs/attribution.md).
    return totals.get("gpu_busy_ns", 0) + totals.get("idle_ns", 0)


def print_rank(path: str, d: dict[str, Any], label: str, top: int) -> None:
    steps = d.get("steps", {})
    totals = steps.get("totals", {})
    span = step_span_ns(totals)
    wall = steps.get("wall_ns", {})
    tag = f" [{label}]" if label else ""
    print(f"{os.path.basename(path)}: rank {d.get('rank')} of {d.get('world_size')} "
          f"({d.get('role')}), host {d.get('host')}, pid {d.get('pid')}{tag}")
    reason = d.get("gpu_capture_reason") or ""
    print(f"  gpu_capture: {d.get('gpu_capture')}" + (f" ({reason})" if reason else ""))
    print(f"  steps: {steps.get('count', 0)} (first {steps.get('warmup', 0)} are warm-up), "
          f"mean step wall {ms(wall.get('mean_ns', 0)):.3f} ms over {wall.get('count', 0)} steps "
          f"(CPU clock); GPU step time {ms(span):.3f} ms in all (sum of step spans)")

    cats = d.get("categories", {})
    print("  GPU busy by category (union of intervals; % of GPU step time):")
    for c in CATEGORIES:
        v = cats.get(c, {})
        if v.get("count", 0) == 0 and c in ("other", "recompute", "unattributed"):
            continue
        print(f"    {c:<14} {ms(v.get('gpu_busy_ns', 0)):10.3f} ms {pct(v.get('gpu_busy_ns', 0), span):6.1f} %"
              f"   {v.get('count', 0):7d} activities")

    print("  step totals (steps.totals, all steps):")
    for name, key in TOTALS:
        v = totals.get(key, 0)
        print(f"    {name:<16} {ms(v):10.3f} ms {pct(v, span):6.1f} %")

    comm = d.get("comm", [])
    if comm:
        print("  NCCL (per-rank GPU time includes waiting for the slowest peer: bandwidths are lower bounds):")
        print(f"    {'op':<14} {'comm_size':>9} {'calls':>7} {'bytes':>12} {'gpu ms':>10} "
              f"{'algbw GB/s':>11} {'busbw GB/s':>11}")
        for r in comm:
            known = r.get("bytes_known", True)
            size = human_bytes(r.get("bytes", 0)) if known else "unknown"
            print(f"    {r.get('op', '?'):<14} {r.get('comm_size', 0):>9} {r.get('calls', 0):>7} "
                  f"{size:>12} {ms(r.get('gpu_ns', 0)):>10.3f} "
                  f"{r.get('algbw_gbps', 0):>11.2f} {r.get('busbw_gbps', 0):>11.2f}")
    else:
        print("  NCCL: no comm rows")

    regions = sorted((r for r in d.get("regions", []) if r.get("gpu_busy_ns", 0) > 0),
                     key=lambda r: r.get("gpu_busy_ns", 0), reverse=True)[:top]
    if regions:
        print("  top regions by GPU busy (exclusive: work launched directly in the region):")
        print(f"    {'path':<28} {'category':<10} {'entries':>7} {'kernels':>7} {'gpu busy ms':>11}")
        for r in regions:
            print(f"    {r.get('path', ''):<28} {r.get('category', ''):<10} {r.get('count', 0):>7} "
                  f"{r.get('kernels', 0):>7} {ms(r.get('gpu_busy_ns', 0)):>11.3f}")
    dropped = d.get("dropped_records", 0)
    warnings = d.get("warnings", [])
    if dropped or warnings:
        print(f"  dropped_records: {dropped}; warnings: {len(warnings)}")
        for w in warnings[:5]:
            print(f"    - {w}")
    print()


def print_side_by_side(files: list[tuple[str, dict[str, Any]]]) -> None:
    print("ranks side by side (ms; a straggler has the most compute, its peers the most comm):")
    print(f"  {'rank':>4} {'mean step wall':>14} {'compute':>10} {'comm':>10} {'exposed comm':>12} "
          f"{'idle':>10}")
    for _, d in files:
        s = d.get("steps", {})
        t = s.get("totals", {})
        print(f"  {d.get('rank', '?'):>4} {ms(s.get('wall_ns', {}).get('mean_ns', 0)):>14.3f} "
              f"{ms(t.get('compute_ns', 0)):>10.3f} {ms(t.get('comm_ns', 0)):>10.3f} "
              f"{ms(t.get('exposed_comm_ns', 0)):>12.3f} {ms(t.get('idle_ns', 0)):>10.3f}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description="Summarize traintime rank files (rank-*.json).")
    ap.add_argument("dir", type=Path, help="the folder holding the rank files")
    ap.add_argument("--label", default="", help="printed with every rank, e.g. SIMULATED")
    ap.add_argument("--top", type=int, default=5, help="regions listed per rank (default 5)")
    args = ap.parse_args(argv[1:])
    files = load_rank_files(args.dir)
    if not files:
        print(f"no readable rank-*.json in {args.dir}")
        return 1
    for path, d in files:
        print_rank(path, d, args.label, args.top)
    if len(files) > 1:
        print_side_by_side(files)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
