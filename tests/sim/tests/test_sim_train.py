#!/usr/bin/env python3
"""SIMULATION tests of sim_train's truth: deterministic (two runs give identical files), the
same answer whether the forward pass is replayed from a CUDA graph or annotated with NVTX, the
activity counts its schedule implies, internally consistent step totals, and stragglers.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from testlib import Checks

SIM_TRAIN = ""
_checks = Checks()
check = _checks.check
FAILURES = _checks.failures


def run(args: list[str], env_extra: dict[str, str] | None = None, tag: str = "t") -> tuple[str | None, Any]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                        "SIMGPU_SLOWDOWN", "LD_PRELOAD", "CUDA_INJECTION64_PATH")}
    env.update(env_extra or {})
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"{tag}-%r.json")
        p = subprocess.run([SIM_TRAIN, *args, "--truth", path], env=env, capture_output=True, text=True)
        if p.returncode != 0:
            FAILURES.append(f"sim_train {args} exited {p.returncode}: {p.stderr}")
            return None, None
        rank = env_extra.get("RANK", "0") if env_extra else "0"
        with open(path.replace("%r", rank), encoding="utf-8") as f:
            text = f.read()
        return text, json.loads(text)


def test_sim_train_truth_deterministic_and_consistent(build_dir: Path) -> None:
    global SIM_TRAIN
    SIM_TRAIN = str(build_dir / "bin" / "sim_train")
    check_truths()
    _checks.done()


def check_truths() -> None:
    steps, layers, bucket = 5, 4, 2
    base = ["--steps", str(steps), "--layers", str(layers), "--bucket-layers", str(bucket)]
    world4 = {"RANK": "1", "WORLD_SIZE": "4", "SIMGPU_SLOWDOWN": "2:1.5"}
    configs = {"plain": (base, None), "graphs": (base + ["--graphs"], None), "nvtx": (base + ["--nvtx"], None),
               "world4": (base, world4), "world4-graphs": (base + ["--graphs"], world4)}
    truths = {}
    for name, (args, env) in configs.items():
        a, doc = run(args, env, name)
        b, _ = run(args, env, name)
        check(a is not None and a == b, f"{name}: two runs gave different truth files")
        truths[name] = doc
    if any(t is None for t in truths.values()):
        return

    # The same kernels and timeline whatever the annotation mechanism or graph replay.
    for other in ("graphs", "nvtx"):
        check(truths[other]["categories"] == truths["plain"]["categories"], f"{other}: categories differ from plain")
        check(truths[other]["steps"] == truths["plain"]["steps"], f"{other}: steps differ from plain")
    check(truths["world4-graphs"]["categories"] == truths["world4"]["categories"], "world4-graphs: categories differ")
    check({r["path"] for r in truths["nvtx"]["regions"]} == {"step/" + r["path"] for r in truths["plain"]["regions"]},
          "nvtx: region paths are not the plain ones under step/")

    # Counts implied by the schedule: io 2 copies in + 1 out; forward embed + 2 per layer + loss;
    # backward 3 per layer; optimizer grad-norm copy, 2 adam kernels, 1 memset; one AllReduce per bucket.
    buckets = -(-layers // bucket)
    expected = {"io": 3, "forward": 2 * layers + 2, "backward": 3 * layers, "optimizer": 4}
    for name, t in truths.items():
        cats = t["categories"]
        for cat, per_step in expected.items():
            check(cats[cat]["count"] == steps * per_step, f"{name}: {cat} count {cats[cat]['count']} != {steps * per_step}")
        want_comm = steps * buckets if t["world_size"] > 1 else 0
        check(cats["comm"]["count"] == want_comm, f"{name}: comm count {cats['comm']['count']} != {want_comm}")
        check(cats["unattributed"]["count"] == 0 and cats["other"]["count"] == 0, f"{name}: unexpected categories")
        tot = t["steps"]["totals"]
        check(t["steps"]["count"] == steps, f"{name}: steps.count")
        check(tot["comm_overlapped_ns"] + tot["exposed_comm_ns"] == tot["comm_ns"], f"{name}: overlapped + exposed != comm")
        check(tot["compute_ns"] + tot["exposed_comm_ns"] <= tot["gpu_busy_ns"], f"{name}: compute + exposed > busy")
        check(tot["idle_ns"] > 0, f"{name}: no idle time (the grad-norm sync should create some)")
        for cat, v in cats.items():
            check(v["gpu_busy_ns"] <= v["gpu_sum_ns"], f"{name}: {cat} busy > sum")
        row = t["comm"][0]
        check(row["op"] == "AllReduce" and row["calls"] == steps * buckets, f"{name}: comm row {row}")
        check(row["bytes"] == steps * layers * (4 << 20), f"{name}: AllReduce bytes {row['bytes']}")
        check(row["gpu_ns"] == cats["comm"]["gpu_sum_ns"], f"{name}: comm row gpu_ns != comm gpu_sum_ns")
        check(t["memcpy"]["HtoD"]["count"] == 2 * steps and t["memcpy"]["DtoH"]["count"] == 2 * steps,
              f"{name}: memcpy counts {t['memcpy']}")
    check(truths["plain"]["comm"][0]["gpu_ns"] == 0, "world 1: in-place AllReduce must launch nothing")

    # Stragglers: rank 2 (factor 1.5) computes longer; the others wait for it inside AllReduce.
    _, fast = run(base, {"RANK": "0", "WORLD_SIZE": "4", "SIMGPU_SLOWDOWN": "2:1.5"}, "fast")
    _, slow = run(base, {"RANK": "2", "WORLD_SIZE": "4", "SIMGPU_SLOWDOWN": "2:1.5"}, "slow")
    if fast and slow:
        check(slow["steps"]["totals"]["compute_ns"] > fast["steps"]["totals"]["compute_ns"], "straggler computes longer")
        check(fast["categories"]["comm"]["gpu_sum_ns"] > slow["categories"]["comm"]["gpu_sum_ns"],
              "fast rank waits longer in AllReduce than the straggler")

    # --stray-work: one kernel with no region open per step, and after the last step marker one
    # more plus one in "forward" (a partial final step); everything else unchanged.
    _, stray = run(base + ["--stray-work"], None, "stray")
    if stray:
        plain = truths["plain"]
        cats = stray["categories"]
        check(cats["unattributed"]["count"] == steps + 1, f"stray: unattributed count {cats['unattributed']['count']}")
        check(cats["unattributed"]["gpu_sum_ns"] > 0, "stray: unattributed work has no GPU time")
        check(cats["forward"]["count"] == plain["categories"]["forward"]["count"] + 1,
              f"stray: forward count {cats['forward']['count']}")
        check(stray["steps"]["partial_final_step"] is True, "stray: no partial final step")
        check(plain["steps"]["partial_final_step"] is False, "plain: a partial final step")
        check(stray["steps"]["count"] == steps, f"stray: steps.count {stray['steps']['count']}")
        check(all(r["path"] for r in stray["regions"]), "stray: a region row without a path")
        check(stray["steps"]["totals"]["gpu_busy_ns"] > plain["steps"]["totals"]["gpu_busy_ns"],
              "stray: no more GPU busy time than plain")

