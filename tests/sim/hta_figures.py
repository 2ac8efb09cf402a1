"""Runs HolisticTraceAnalysis (HTA) on torch.profiler traces, one directory per trace (HTA reads a
directory as one job), and prints its figures as JSON: what tests/sim/hta_compare.py sets beside
traintime's. Runs in HTA's own environment (scripts/pyenv.py --set hta), never in the tests'.

For each trace, HTA as users call it (`TraceAnalysis(trace_dir=...)`, its default window: the
GPU work launched before the last ProfilerStep began):
- `get_temporal_breakdown()`: idle, compute, non-compute and kernel time (the window's span);
- `get_comm_comp_overlap()`: the fraction of communication time overlapped by computation;
- `get_gpu_kernel_breakdown(include_memory_kernels=True)`: the time of each kernel type and of
  each overlap of types (an exclusive partition of the busy time), and every kernel's sum.
HTA rounds ns-resolution timestamps inward to the microsecond (start up, end down) unless
HTA_DISABLE_NS_ROUNDING=1: where a trace has fractional microseconds, both are given ("default"
and "exact"); elsewhere the rounding changes nothing and only "default" is made.
"""
from __future__ import annotations

import argparse
import gzip
import json
import logging
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

FRACTIONAL_TS = re.compile(rb'"ts"\s*:\s*\d+\.\d')


def figures(trace_dir: Path) -> dict[str, Any]:
    from hta.trace_analysis import TraceAnalysis  # HTA's environment only

    analysis = TraceAnalysis(trace_dir=str(trace_dir))
    temporal = analysis.get_temporal_breakdown(visualize=False).iloc[0]
    overlap = analysis.get_comm_comp_overlap(visualize=False).iloc[0]
    types, kernels = analysis.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True,
                                                       duration_ratio=1.0, num_kernels=1 << 20)
    pctg = float(overlap["comp_comm_overlap_pctg"])  # what HTA returns: a percentage to 0.01
    return {
        "rank": int(temporal["rank"]),
        "kernel_time_us": float(temporal["kernel_time(us)"]),
        "idle_us": float(temporal["idle_time(us)"]),
        "compute_us": float(temporal["compute_time(us)"]),
        "non_compute_us": float(temporal["non_compute_time(us)"]),
        "comm_comp_overlap_pctg": None if math.isnan(pctg) else pctg,
        "kernel_types_us": {str(r["kernel_type"]): float(r["sum"]) for _, r in types.iterrows()},
        "kernels": [{"name": str(r["name"]), "type": str(r["kernel_type"]), "sum_us": float(r["sum (us)"])}
                    for _, r in kernels.iterrows()],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace_dirs", type=Path, nargs="+", help="one directory per single-rank trace")
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # HTA logs every parse step at WARNING
    out: dict[str, Any] = {}
    for trace_dir in args.trace_dirs:
        files = sorted(trace_dir.glob("*.json*"))
        if len(files) != 1:
            print(f"hta_figures: {trace_dir} must hold exactly one trace, it holds {len(files)}", file=sys.stderr)
            return 2
        with open(files[0], "rb") as f:
            head = gzip.GzipFile(fileobj=f).read() if files[0].name.endswith(".gz") else f.read()
        os.environ.pop("HTA_DISABLE_NS_ROUNDING", None)
        entry: dict[str, Any] = {"default": figures(trace_dir), "exact": None}
        if FRACTIONAL_TS.search(head):
            os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
            entry["exact"] = figures(trace_dir)
        out[files[0].name] = entry
    json.dump(out, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
