"""tools/reference_breakdown.py against a breakdown computed by hand (so the second computation
of the breakdown arithmetic is itself checked), and its comparison must flag a rank file that differs by 1 ns.
"""
from __future__ import annotations

from testlib import SOURCE_DIR, Checks, load_module


def test_capture_reference_breakdown_hand_computed() -> None:
    ref = load_module(SOURCE_DIR / "tools" / "reference_breakdown.py", "reference_breakdown")
    cats = ["forward", "backward", "optimizer", "comm", "io", "other", "unattributed"]
    F, B, C, IO = 0, 1, 3, 4
    cols = ["start_ns", "end_ns", "device", "stream", "category", "path", "step", "kind", "name",
            "bytes", "correlation_id", "copy_kind", "comm_op"]

    def ev(start: int, end: int, device: int, cat: int, step: int) -> list[int]:
        return [start, end, device, 0, cat, 0, step, 0, 0, 0, 0, 0, 0]

    trace = {"format": "traintime-trace/1", "truncated": False, "late_records": 0,
             "categories": cats, "columns": cols, "events": [
                 # step 0, device 0: forward [0,100) and [50,150) overlap; comm [120,300)
                 # overlaps forward on [120,150); io [400,450); idle gap [300,400)
                 ev(0, 100, 0, F, 0), ev(50, 150, 0, F, 0), ev(120, 300, 0, C, 0),
                 ev(400, 450, 0, IO, 0),
                 # step 0, device 1: backward [1000,1010) alone
                 ev(1000, 1010, 1, B, 0),
                 # step 1, device 0: comm [2000,2100) and backward [2050,2060) inside it; a
                 # zero-length forward that counts once but adds no time
                 ev(2000, 2100, 0, C, 1), ev(2050, 2060, 0, B, 1), ev(2070, 2070, 0, F, 1),
             ]}
    got = ref.breakdown(trace)
    want_totals = {
        # step0/dev0: busy = [0,300) + [400,450) = 350; compute = [0,150) = 150; comm = 180;
        # overlapped = [120,150) = 30; exposed = 150; io = 50; span 450 -> idle 100
        # step0/dev1: busy 10, compute 10, span 10, idle 0
        # step1/dev0: busy 100, compute 10, comm 100, overlapped 10, exposed 90, idle 0
        "gpu_busy_ns": 350 + 10 + 100, "compute_ns": 150 + 10 + 10, "comm_ns": 180 + 100,
        "comm_overlapped_ns": 30 + 10, "exposed_comm_ns": 150 + 90, "io_ns": 50,
        "idle_ns": 100, "gpu_sum_ns": 100 + 100 + 180 + 50 + 10 + 100 + 10 + 0,
        "compute_sum_ns": 100 + 100 + 10 + 10 + 0, "comm_sum_ns": 280, "io_sum_ns": 50}
    want_cats = {"forward": (150, 200, 3), "backward": (20, 20, 2), "comm": (280, 280, 2),
                 "io": (50, 50, 1), "optimizer": (0, 0, 0), "other": (0, 0, 0),
                 "unattributed": (0, 0, 0)}
    checks = Checks()
    failures = checks.failures
    for k, v in want_totals.items():
        if got["steps"]["totals"].get(k) != v:
            failures.append(f"totals.{k}: {got['steps']['totals'].get(k)} != hand-computed {v}")
    for c, (busy, total, count) in want_cats.items():
        g = got["categories"][c]
        if (g["gpu_busy_ns"], g["gpu_sum_ns"], g["count"]) != (busy, total, count):
            failures.append(f"categories.{c}: {g} != hand-computed {(busy, total, count)}")
    rank = {"categories": {c: {"gpu_busy_ns": b, "gpu_sum_ns": s, "count": n}
                           for c, (b, s, n) in want_cats.items()},
            "steps": {"totals": dict(want_totals)}}
    if ref.compare(got, rank):
        failures.append(f"a matching rank file was flagged: {ref.compare(got, rank)}")
    rank["steps"]["totals"]["idle_ns"] += 1
    if not ref.compare(got, rank):
        failures.append("a rank file 1 ns off in idle_ns was not flagged")
    checks.done()
