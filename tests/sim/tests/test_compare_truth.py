#!/usr/bin/env python3
"""Tests compare_truth.py on hand-made files: an agreeing pair passes, a disagreeing one fails
naming every differing field (the harness the end-to-end simulated-GPU comparison relies on)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "compare_truth.py")
FIX = os.path.join(HERE, "..", "fixtures", "compare_truth")


def run(rank):
    p = subprocess.run([sys.executable, SCRIPT, os.path.join(FIX, rank), os.path.join(FIX, "truth.json")],
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    failures = []
    code, out = run("rank-agree.json")
    if code != 0 or "MATCH" not in out:
        failures.append(f"agreeing pair: exit {code}, output:\n{out}")
    code, out = run("rank-disagree.json")
    expected = ["categories.forward.gpu_busy_ns: rank file 999 != truth 1000",
                "steps.totals.idle_ns: rank file 41 != truth 40",
                "comm[AllReduce, size 4].calls: rank file 3 != truth 2",
                "comm[Broadcast, size 4]: in the rank file but not in the truth"]
    if code != 1:
        failures.append(f"disagreeing pair: exit {code}, expected 1")
    for line in expected:
        if line not in out:
            failures.append(f"disagreeing pair: missing diff line {line!r} in:\n{out}")
    if "categories.comm" in out or "gpu_sum_ns" in out:
        failures.append(f"disagreeing pair: reported a field that agrees:\n{out}")
    code, out = run("does-not-exist.json")
    if code != 2:
        failures.append(f"unreadable file: exit {code}, expected 2")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
