"""NVTX ranges become traintime regions (DESIGN §3), through NVTX_INJECTION64_PATH.

Runs the test program (tt_nvtx_ranges) under LD_PRELOAD (the preload points NVTX_INJECTION64_PATH at itself) and
checks the rank file: three steps (one "step" range each), and a region for every NVTX flavour
(registered string, domain ASCII, wide, start/end), each entered three times, with the category
its name implies.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from testlib import Checks, clean_env, load_json


def test_capture_nvtx_ranges_become_regions(build_dir: Path, tmp_path: Path) -> None:
    binary, lib = build_dir / "bin" / "tt_nvtx_ranges", build_dir / "lib" / "libtraintime.so"
    env = clean_env({"LD_PRELOAD": str(lib), "TRAINTIME_OUTPUT": str(tmp_path)})
    run = subprocess.run([str(binary)], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"{binary} exited {run.returncode}: {run.stderr}"
    rf = load_json(tmp_path / "rank-00000.json")
    c = Checks()
    c.check(rf["steps"]["count"] == 3, f"steps.count {rf['steps']['count']}, want 3 (one per \"step\" range)")
    counts, categories = {}, {}
    for row in rf["regions"]:
        leaf = row["path"].split("/")[-1]
        counts[leaf] = counts.get(leaf, 0) + row["count"]
        categories[leaf] = row["category"]
    want = {"registered_forward": "forward", "domain_backward": "backward",
            "wide_optimizer": "optimizer", "async_io": "io"}
    for name, category in want.items():
        if c.check(counts.get(name) == 3, f"region {name}: entered {counts.get(name)} times, want 3"):
            c.check(categories.get(name) == category,
                    f"region {name}: category {categories.get(name)}, want {category}")
    if c.failures:
        c.failures.append("regions: " + json.dumps(rf["regions"], indent=1))
    c.done()
