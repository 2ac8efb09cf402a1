"""traintime beside HolisticTraceAnalysis on the real traces (tests/sim/hta_compare.py): every
figure HTA gives of a trace and traintime's of the same trace replayed on the SIMULATED GPU stay in
the relation docs/validation.md ("Real traces") states, within its tolerances.

HTA has an environment of its own (scripts/pyenv.py --set hta), made here on first use and cached
in ~/.cache/traintime like the tests' (a minute with PyPI; without it the test is skipped, and
fails under TRAINTIME_CI). The traces come from TRAINTIME_REAL_TRACES, else ../shared/data/real-traces.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from testlib import SOURCE_DIR, load_module, missing_dependency

hta_compare = load_module(SOURCE_DIR / "tests" / "sim" / "hta_compare.py", "hta_compare")
TRACES = Path(os.environ.get("TRAINTIME_REAL_TRACES") or SOURCE_DIR.parent / "shared" / "data" / "real-traces")


def hta_python(build_dir: Path) -> Path:
    env = build_dir / "htaenv"
    p = subprocess.run(["/usr/bin/python3", str(SOURCE_DIR / "scripts" / "pyenv.py"), str(env), "--set", "hta"],
                       capture_output=True, text=True, timeout=360)
    python = env / "bin" / "python"
    if p.returncode != 0 or not python.exists():
        missing_dependency(f"{python} is missing: scripts/pyenv.py {env} --set hta could not make it "
                           f"(needs PyPI): {p.stderr.strip()[-300:]}")
    return python


def test_traintime_and_hta_agree_on_every_real_trace(build_dir: Path, tmp_path: Path) -> None:
    traces = sorted(p for p in TRACES.glob("*.json*") if p.name.endswith((".json", ".json.gz")))
    if not traces:
        missing_dependency(f"no real traces in {TRACES}: set TRAINTIME_REAL_TRACES (tests/sim/README.md)")
    figures = tmp_path / "figures.json"
    p = subprocess.run(["/usr/bin/python3", str(SOURCE_DIR / "tests" / "sim" / "hta_compare.py"),
                        "--build-dir", str(build_dir), "--hta-python", str(hta_python(build_dir)),
                        "--json", str(figures), *map(str, traces)],
                       capture_output=True, text=True, timeout=200)
    assert p.returncode == 0, f"traintime and HTA drifted apart (docs/validation.md, 'Real traces'):\n{p.stderr}"
    # Every trace was compared, each on a window of at least one step, with HTA seeing GPU work.
    got = json.loads(figures.read_text())
    assert sorted(got["hta"]) == sorted(t.name for t in traces)
    for name, window in got["traintime"].items():
        assert window["steps"] >= 1 and window["gpu_busy_ns"] > 0, f"{name}: {window}"


def test_hta_comparison_rules_by_hand_and_fails_on_drift() -> None:
    """Both tools' rules on a hand-worked stretch of work, and a figure moved by a microsecond caught."""
    acts = [{"name": "gemm", "cat": "forward", "start": 0, "end": 40_000, "step": 0},
            {"name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "cat": "comm", "start": 30_000,
             "end": 50_000, "step": 0},
            {"name": "Memcpy HtoD (Pinned -> Device)", "cat": "forward", "start": 60_000, "end": 70_000, "step": 0}]
    hta_rules = hta_compare.figures_of(acts, "hta")
    tt_rules = hta_compare.figures_of(acts, "traintime")
    # HTA: the copy is not computation; traintime: it is forward work, so compute.
    assert hta_rules == {"span": 70_000, "busy": 60_000, "idle": 10_000, "compute": 40_000, "non_compute": 20_000,
                         "comm": 20_000, "comm_overlapped": 10_000, "exposed_comm": 10_000}
    assert tt_rules == {**hta_rules, "compute": 50_000, "non_compute": 10_000}
    hta = {"kernel_time_us": 70.0, "idle_us": 10.0, "compute_us": 40.0, "non_compute_us": 20.0,
           "comm_comp_overlap_pctg": 50.0,
           "kernel_types_us": {"COMPUTATION": 30.0, "COMPUTATION overlapping COMMUNICATION": 10.0,
                               "COMMUNICATION": 10.0, "MEMORY": 10.0}}
    window = {"steps": 1, "span": 70_000, "gpu_busy_ns": 60_000, "idle_ns": 10_000, "compute_ns": 50_000,
              "comm_ns": 20_000, "comm_overlapped_ns": 10_000, "exposed_comm_ns": 10_000, "io_ns": 0}
    traced = {"hta": hta_rules, "hta_by_step": hta_rules, "traintime": tt_rules,
              "window": {"activities": 3, "last_end_ns": 70_000}}

    def failures(h: dict, w: dict) -> list[str]:
        lines, found = hta_compare.compare({"t.json": {"default": h, "exact": None}}, {"t.json": w}, {"t.json": traced})
        assert len(lines) == 2 + len(hta_compare.LABELS)
        return found

    assert failures(hta, window) == []
    for key in ("span", "gpu_busy_ns", "idle_ns", "compute_ns", "comm_ns", "comm_overlapped_ns", "exposed_comm_ns"):
        assert failures(hta, {**window, key: window[key] + 1000}), f"traintime's {key} moved by 1 us, no failure"
    for key in ("kernel_time_us", "idle_us", "compute_us", "non_compute_us"):
        assert failures({**hta, key: hta[key] + 1}, window), f"HTA's {key} moved by 1 us, no failure"
    moved = {**hta, "kernel_types_us": {**hta["kernel_types_us"], "COMMUNICATION": 11.0}}
    assert failures(moved, window), "HTA's communication moved by 1 us, no failure"
    # The window is steps 0..N-2: the last step, which HTA leaves out, is not summed.
    detail = {"index": 0, "span_ns": 5, "totals": dict.fromkeys(
        ("gpu_busy_ns", "compute_ns", "comm_ns", "comm_overlapped_ns", "exposed_comm_ns", "io_ns", "idle_ns"), 1)}
    doc = {"rank": 0, "steps": {"count": 3, "detail": [detail, {**detail, "index": 1}, {**detail, "index": 2}]}}
    assert hta_compare.traintime_window(doc)["span"] == 10
