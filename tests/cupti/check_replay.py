#!/usr/bin/env python3
"""Replays one recorded CUPTI fixture (tests/fixtures/<name>/) and checks the result.

The fixture's buffers go through the adapter's own decode and join (traintime_replay_fixture),
walked with CUPTI_LIB (simgpu's for simgpu fixtures; "" = the toolkit's, for real ones).
Expected, when the fixture has:
  truth.json   (simgpu: sim_train's --truth, independent of traintime) categories, steps.count
               and steps.totals equal it exactly;
  rank.json    (real GPU: the rank file of the recording run) categories and steps.totals equal
               it exactly, i.e. the replay reproduces what the live capture computed.
  events.json  (real GPU, in the fixture folder or the run folder above it: the CUDA-event
               timings scripts/gpu-validate.sh measured in the recording run, independent of
               traintime) every region of >= 1 ms per entry agrees within 1 %
               (scripts/compare_events.py), and a CUDA-graph run's replays agree with the
               captured regions (scripts/check_gpu_run.py graphs).
Always: every activity found its launch context, and the replay saw as many activities as the
live capture did. Exit 0 pass, 1 fail.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import check_gpu_run  # noqa: E402
import compare_events  # noqa: E402

TOTALS = ("gpu_busy_ns", "compute_ns", "comm_ns", "comm_overlapped_ns", "exposed_comm_ns", "io_ns",
          "idle_ns")


def check_events(fixture: Path, got: dict) -> list[str]:
    """The replay against the CUDA events of the recording run, when they were kept beside it."""
    path = next((p for p in (fixture / "events.json", fixture.parent / "events.json") if p.exists()),
                None)
    if path is None:
        return []
    with open(path, encoding="utf-8") as f:
        events = json.load(f)
    failures: list[str] = []
    text, judged, bad = compare_events.compare_regions(got, events, 1.0, 1.0)
    print(f"replay against {path}:\n{text}")
    if bad:
        failures.append(f"{bad} region(s) disagree with the CUDA events of {path}")
    if "graph_replay" in events:
        code, lines = check_gpu_run.check_graphs(got, events, 1.0)
        print("\n".join(lines))
        if code != 0:
            failures.append(f"the graph replays disagree with {path}")
    elif judged == 0:
        failures.append(f"{path}: no region of >= 1 ms per entry to judge the replay against")
    return failures


def unpacked(fixture: Path, tmp: Path) -> Path:
    """The fixture folder itself, or a copy with every NAME.gz in it unpacked as NAME."""
    if not (fixture / "fixture.json.gz").exists():
        return fixture
    tmp.mkdir(parents=True)
    for path in fixture.iterdir():
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as src:
                (tmp / path.stem).write_bytes(src.read())
        elif path.is_file():
            shutil.copy(path, tmp / path.name)
    return tmp


def main() -> int:
    ap = argparse.ArgumentParser(description="Replay one recorded CUPTI fixture and check the result.")
    ap.add_argument("tool", type=Path, help="traintime_replay_fixture")
    ap.add_argument("fixture", type=Path, help="tests/fixtures/<name>/")
    ap.add_argument("cupti_lib", help='the libcupti to walk the buffers with; "" = the toolkit\'s')
    args = ap.parse_args()
    tool, fixture, lib = str(args.tool), str(args.fixture), args.cupti_lib
    with tempfile.TemporaryDirectory() as tmp:
        # Real-GPU fixtures are committed gzipped (their callbacks are megabytes of JSON): the
        # replay reads the plain files, unpacked here.
        recording = unpacked(Path(fixture), Path(tmp) / "fixture")
        with open(recording / "fixture.json") as f:
            meta = json.load(f)
        out = os.path.join(tmp, "replay.json")
        cmd = [tool, str(recording), out] + ([lib] if lib else [])
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=100)
        if run.returncode != 0:
            print(f"FAIL: {' '.join(cmd)} exited {run.returncode}\n{run.stdout}{run.stderr}")
            return 1
        with open(out) as f:
            got = json.load(f)
    failures: list[str] = []
    replay = got["replay"]
    if replay["missing_context"] != 0:
        failures.append(f"{replay['missing_context']} activities found no launch context")
    if replay["activities"] != meta["live"]["activities"]:
        failures.append(f"replay decoded {replay['activities']} activities, the live capture "
                        f"{meta['live']['activities']}")
    expected_path = os.path.join(fixture, "truth.json")
    if not os.path.exists(expected_path):
        expected_path = os.path.join(fixture, "rank.json")
    with open(expected_path) as f:
        want = json.load(f)
    for cat, w in want["categories"].items():
        g = got["categories"].get(cat, {})
        for field in ("gpu_busy_ns", "gpu_sum_ns", "count"):
            if g.get(field, 0) != w.get(field, 0):
                failures.append(f"categories.{cat}.{field}: replay {g.get(field, 0)} != "
                                f"{os.path.basename(expected_path)} {w.get(field, 0)}")
    if expected_path.endswith("truth.json") and got["steps"]["count"] != want["steps"]["count"]:
        failures.append(f"steps.count: replay {got['steps']['count']} != {want['steps']['count']}")
    for field in TOTALS:
        g, w = got["steps"]["totals"].get(field), want["steps"]["totals"].get(field)
        if g != w:
            failures.append(f"steps.totals.{field}: replay {g} != {os.path.basename(expected_path)} {w}")
    failures += check_events(Path(fixture), got)
    if failures:
        print(f"FAIL replaying {fixture}:")
        for line in failures:
            print("  " + line)
        return 1
    print(f"PASS: {fixture} ({replay['activities']} activities, {replay['buffers']} buffers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
