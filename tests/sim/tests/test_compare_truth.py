"""compare_truth.py on hand-made files: an agreeing pair passes, a disagreeing one fails naming
every differing field (the harness the end-to-end simulated-GPU comparisons rely on)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testlib import Checks

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parent / "compare_truth.py"
FIX = HERE.parent / "fixtures" / "compare_truth"


def run(rank: str) -> tuple[int, str]:
    p = subprocess.run([sys.executable, str(SCRIPT), str(FIX / rank), str(FIX / "truth.json")],
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def test_sim_compare_truth_harness() -> None:
    c = Checks()
    code, out = run("rank-agree.json")
    c.check(code == 0 and "MATCH" in out, f"agreeing pair: exit {code}, output:\n{out}")
    code, out = run("rank-disagree.json")
    expected = ["categories.forward.gpu_busy_ns: rank file 999 != truth 1000",
                "steps.totals.idle_ns: rank file 41 != truth 40",
                "steps.partial_final_step: rank file True != truth False",
                "comm[AllReduce, size 4].calls: rank file 3 != truth 2",
                "comm[Broadcast, size 4]: in the rank file but not in the truth",
                "memcpy.HtoD.bytes: rank file 4000 != truth 4096",
                "regions[forward].gpu_sum_ns: rank file 1100 != truth 1200",
                "regions[stray]: GPU work",
                "regions[forward].gpu_busy_ns: rank file 990 != truth 1000",
                "steps.detail[index 1].wall_ns: rank file 0, a step ended by a marker has host time",
                "steps.detail[index 1].span_ns: rank file 671 != truth 670",
                "communicators[00000000000000ab].ops_completed: 2 of 3 enqueued",
                "communicators of size 4: ops_enqueued: rank file 3 != truth 2"]
    c.check(code == 1, f"disagreeing pair: exit {code}, expected 1")
    for line in expected:
        c.check(line in out, f"disagreeing pair: missing diff line {line!r} in:\n{out}")
    for agreeing in ("categories.comm", "gpu_sum_ns: rank file 1200", "memcpy.HtoD.count",
                     "regions[forward].kernels", "regions[forward].category",
                     "steps.detail[index 1].totals", "busy_ns_by_category", "steps.detail: no row"):
        c.check(agreeing not in out, f"disagreeing pair: reported {agreeing!r}, which agrees:\n{out}")
    c.check(len([l for l in out.splitlines() if l.startswith("  ")]) == len(expected),
            f"disagreeing pair: {len(expected)} differences expected:\n{out}")
    code, out = run("does-not-exist.json")
    c.check(code == 2, f"unreadable file: exit {code}, expected 2")
    c.done()
