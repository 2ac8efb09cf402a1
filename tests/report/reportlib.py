"""Helpers for the traintime-report tests: run the tool, read its text tables back."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
GOLDEN = DATA / "golden"


def report_bin(build_dir: Path) -> Path:
    path = build_dir / "bin" / "traintime-report"
    assert path.exists(), f"{path} is not built (cmake --build build -t traintime-report)"
    return path


def run(build_dir: Path, *args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(report_bin(build_dir)), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def summary(build_dir: Path, *args: str | Path) -> tuple[Any, subprocess.CompletedProcess[str]]:
    proc = run(build_dir, *args, "--format", "json")
    assert proc.stdout, f"no JSON on stdout (exit {proc.returncode}): {proc.stderr}"
    return json.loads(proc.stdout), proc


def copy_golden(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for f in GOLDEN.glob("rank-*.json"):
        shutil.copy(f, dest / f.name)
    return dest


def edit(path: Path, change: Any) -> None:
    """Applies change(doc) to the JSON file at path."""
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def text_table(text: str, title_start: str) -> dict[str, list[str]]:
    """The rows of the text table whose title line starts with title_start, keyed by the first
    cell; columns are cut where the dashed rule under the header shows them."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(title_start)), None)
    assert start is not None, f"no table titled {title_start!r} in:\n{text}"
    rule = lines[start + 2]
    spans = []
    i = 0
    while i < len(rule):
        if rule[i] == "-":
            j = i
            while j < len(rule) and rule[j] == "-":
                j += 1
            spans.append((i, j))
            i = j
        else:
            i += 1
    assert spans, f"no rule under {title_start!r}: {rule!r}"
    rows: dict[str, list[str]] = {}
    for line in lines[start + 3:]:
        if not line.strip() or not line.startswith("  ") or line.startswith(("  Note: ", "  ... ")):
            break
        rows[line[spans[0][0]:spans[0][1]].strip()] = [line[a:b].strip() for a, b in spans[:-1]] + \
            [line[spans[-1][0]:].strip()]
    return rows


def cpu_only(d: Path) -> None:
    """The golden job as TRAINTIME_CUPTI=0 writes it: every GPU figure 0, CPU times kept."""
    def strip(j: dict) -> None:
        j.update(gpu_capture="none", gpu_capture_reason="TRAINTIME_CUPTI=0", communicators=[])
        for c in j["categories"].values():
            c.update(count=0, gpu_busy_ns=0, gpu_sum_ns=0)
        zero = {k: 0 for k in j["steps"]["totals"]}
        j["steps"]["totals"] = dict(zero)
        for row in j["steps"]["detail"]:
            row["totals"] = dict(zero)
        for r in j["regions"]:
            r.update(gpu_busy_ns=0, gpu_sum_ns=0, gpu_span_ns=0, kernels=0, by_category={}, top_kernels=[])
        for c in j["comm"]:
            c.update(gpu_ns=0, algbw_gbps=0, busbw_gbps=0)
    for r in range(3):
        edit(d / f"rank-0000{r}.json", strip)
