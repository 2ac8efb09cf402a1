#!/usr/bin/env python3
"""NVTX ranges become traintime regions (DESIGN §3), through NVTX_INJECTION64_PATH.

usage: check_nvtx_ranges.py NVTX_RANGES_BINARY LIBTRAINTIME

Runs the test program under LD_PRELOAD (the preload points NVTX_INJECTION64_PATH at itself) and
checks the rank file: three steps (one "step" range each), and a region for every NVTX flavour
(registered string, domain ASCII, wide, start/end), each entered three times, with the category
its name implies. Exit 0 pass, 1 fail.
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    binary, lib = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as out:
        env = {k: v for k, v in os.environ.items()
               if k not in ("NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH", "RANK", "WORLD_SIZE")}
        env.update({"LD_PRELOAD": lib, "TRAINTIME_OUTPUT": out})
        run = subprocess.run([binary], env=env, capture_output=True, text=True, timeout=60)
        if run.returncode != 0:
            print(f"FAIL: {binary} exited {run.returncode}: {run.stderr}")
            return 1
        with open(os.path.join(out, "rank-00000.json")) as f:
            rf = json.load(f)
    failures = []
    if rf["steps"]["count"] != 3:
        failures.append(f"steps.count {rf['steps']['count']}, want 3 (one per \"step\" range)")
    counts, categories = {}, {}
    for row in rf["regions"]:
        leaf = row["path"].split("/")[-1]
        counts[leaf] = counts.get(leaf, 0) + row["count"]
        categories[leaf] = row["category"]
    want = {"registered_forward": "forward", "domain_backward": "backward",
            "wide_optimizer": "optimizer", "async_io": "io"}
    for name, category in want.items():
        if counts.get(name) != 3:
            failures.append(f"region {name}: entered {counts.get(name)} times, want 3")
        elif categories.get(name) != category:
            failures.append(f"region {name}: category {categories.get(name)}, want {category}")
    if failures:
        print("FAIL: " + "; ".join(failures))
        print(json.dumps(rf["regions"], indent=1))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
