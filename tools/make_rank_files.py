#!/usr/bin/env python3
"""Writes N synthetic rank files of one job, for measuring traintime-report at scale
(scripts/bench.sh's report-merge row, DESIGN §9: 4096 ranks in <= 5 s on 2 cores).

Each file is TEMPLATE (a real rank file, e.g. one written by the simulated demo) with its rank,
world size and job id replaced, its region and step figures scaled per rank, and its
communicators' recent rings given per-rank durations, so the merge and the wait analysis do the
work they would do on a real job of that size. The data is synthetic: never report it as
measured.
"""
from __future__ import annotations

import argparse
import copy
import json
import random
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("template", type=Path, help="a rank file to copy (traintime/1)")
    ap.add_argument("out", type=Path, help="folder to write rank-%%05d.json into (created)")
    ap.add_argument("--ranks", type=int, default=4096, help="number of rank files (default 4096)")
    ap.add_argument("--job", default="synthetic-job", help="job_id of every file")
    ap.add_argument("--seed", type=int, default=1, help="random seed (the output is deterministic)")
    args = ap.parse_args()

    template = json.loads(args.template.read_text())
    rng = random.Random(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    for rank in range(args.ranks):
        doc = copy.deepcopy(template)
        scale = 1.0 + rng.random() * 0.1
        doc.update(rank=rank, world_size=args.ranks, job_id=args.job, pid=10000 + rank, host=f"node-{rank // 8:04d}")
        for region in doc["regions"]:
            for key in ("cpu_ns", "gpu_busy_ns", "gpu_sum_ns", "gpu_span_ns"):
                region[key] = int(region[key] * scale)
        for comm in doc["communicators"]:
            comm.update(size=args.ranks, rank=rank)
            for entry in comm["recent"]:
                duration = entry["gpu_end_ns"] - entry["gpu_start_ns"]
                entry["gpu_end_ns"] = entry["gpu_start_ns"] + int(duration * scale)
        for row in doc["comm"]:
            row["comm_size"] = args.ranks
        (args.out / f"rank-{rank:05d}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
