"""NVTX ranges become traintime regions (DESIGN §3), through NVTX_INJECTION64_PATH.

The domain tests run tt_nvtx_domains (nvtx_domains.cpp): NCCL's own domain, two interleaving
domains and PyTorch emit_nvtx names, under the default TRAINTIME_NVTX_DOMAINS and under "*".

Runs the test program (tt_nvtx_ranges) under LD_PRELOAD (the preload points NVTX_INJECTION64_PATH at itself) and
checks the rank file: three steps (one "step" range each), and a region for every NVTX flavour
(registered string, domain ASCII, wide, start/end), each entered three times, with the category
its name implies.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

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


def run_domains(build: Path, tmp: Path, extra: dict[str, str]) -> tuple[dict, dict[str, dict]]:
    binary, lib = build / "bin" / "tt_nvtx_domains", build / "lib" / "libtraintime.so"
    env = clean_env({"LD_PRELOAD": str(lib), "TRAINTIME_OUTPUT": str(tmp), **extra})
    run = subprocess.run([str(binary)], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"{binary} exited {run.returncode}: {run.stdout}{run.stderr}"
    rf = load_json(tmp / "rank-00000.json")
    return rf, {row["path"]: row for row in rf["regions"]}


def test_nccl_nvtx_ranges_are_not_regions_by_default(build_dir: Path, tmp_path: Path) -> None:
    rf, rows = run_domains(build_dir, tmp_path, {})
    c = Checks()
    c.check(not any("ncclAllReduce" in p for p in rows),
            f"NCCL's own NVTX range became a region: {sorted(rows)}")
    c.check(rf["steps"]["count"] == 3, f"steps.count {rf['steps']['count']}, want 3")
    c.done()


def test_nvtx_domains_star_records_nccl_ranges_too(build_dir: Path, tmp_path: Path) -> None:
    _, rows = run_domains(build_dir, tmp_path, {"TRAINTIME_NVTX_DOMAINS": "*"})
    row = rows.get("step/ncclAllReduce")
    assert row is not None and row["count"] == 3, f"step/ncclAllReduce expected 3 times: {sorted(rows)}"


def test_interleaved_domains_nest_in_open_order_and_pop_their_own_range(build_dir: Path, tmp_path: Path) -> None:
    rf, rows = run_domains(build_dir, tmp_path, {})
    c = Checks()
    outer, inner = rows.get("step/outer"), rows.get("step/outer/inner")
    c.check(outer is not None and outer["count"] == 3, f"step/outer expected 3 times: {sorted(rows)}")
    c.check(inner is not None and inner["count"] == 3, f"step/outer/inner expected 3 times: {sorted(rows)}")
    # "step" was closed by its own pop each time, not by the app domain's early pop.
    c.check(rows.get("step", {}).get("count") == 3, f"step entered {rows.get('step')}")
    c.check(not any("unbalanced" in w or "pop" in w for w in rf.get("warnings", [])),
            f"pops reported unbalanced: {rf.get('warnings')}")
    c.done()


def test_emit_nvtx_names_fold_to_one_region_per_operator(build_dir: Path, tmp_path: Path) -> None:
    _, rows = run_domains(build_dir, tmp_path, {})
    c = Checks()
    row = rows.get("step/aten::add")
    c.check(row is not None and row["count"] == 30, f"step/aten::add expected 30 times: {row}")
    c.check(not any("seq =" in p for p in rows), f"a per-call name became a region: {sorted(rows)}")
    c.done()


def test_bad_nvtx_domains_value_warns_once_and_keeps_the_default(build_dir: Path, tmp_path: Path) -> None:
    binary, lib = build_dir / "bin" / "tt_nvtx_domains", build_dir / "lib" / "libtraintime.so"
    env = clean_env({"LD_PRELOAD": str(lib), "TRAINTIME_OUTPUT": str(tmp_path),
                     "TRAINTIME_NVTX_DOMAINS": "*,,NCCL"})
    run = subprocess.run([str(binary)], env=env, capture_output=True, text=True, timeout=60)
    c = Checks()
    c.check(run.returncode == 0, f"exit {run.returncode}: {run.stdout}")
    lines = [line for line in run.stderr.splitlines() if "TRAINTIME_NVTX_DOMAINS" in line]
    c.check(len(lines) == 1 and "empty entry" in lines[0], f"one warning naming the variable: {run.stderr!r}")
    rows = {row["path"] for row in load_json(tmp_path / "rank-00000.json")["regions"]}
    c.check(not any("ncclAllReduce" in p for p in rows), f"the default was not kept: {sorted(rows)}")
    c.done()


def test_nvtx_ranges_nested_beyond_the_limit_are_counted_not_lost_silently(build_dir: Path, tmp_path: Path) -> None:
    binary, lib = build_dir / "bin" / "tt_nvtx_domains", build_dir / "lib" / "libtraintime.so"
    env = clean_env({"LD_PRELOAD": str(lib), "TRAINTIME_OUTPUT": str(tmp_path)})
    run = subprocess.run([str(binary), "--deep"], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    rf = load_json(tmp_path / "rank-00000.json")
    c = Checks()
    c.check(any(w.startswith("44 NVTX range(s) opened beyond 256") for w in rf["warnings"]),
            f"no warning counting the 44 untracked ranges: {rf['warnings']}")
    # The same number as NVTX's typed counter, which the report can sum across ranks.
    nvtx = rf.get("modules", {}).get("nvtx", {}).get("counters", {})
    c.check(nvtx == {"untracked_ranges": 44}, f"NVTX's section: {rf.get('modules')}")
    rows = {row["path"]: row for row in rf["regions"]}
    c.check(rows.get("after", {}).get("count") == 1, f"the pops did not balance: {sorted(rows)[:5]}")
    c.done()


def test_nvtx_starts_clean_in_a_fork_child_with_ranges_open(build_dir: Path, tmp_path: Path) -> None:
    """Fork with NVTX state open (tt_nvtx_domains --fork): the parent counted 44 untracked
    ranges and forks inside a push range and a start range. A child that only ends those (its
    parent's) writes no file; a child that records a range of its own writes an aux file with
    that range alone, no untracked ranges of its parent's and no unbalanced pop or unknown range
    end. The parent's file keeps its own counts and both its ranges."""
    binary, lib = build_dir / "bin" / "tt_nvtx_domains", build_dir / "lib" / "libtraintime.so"
    env = clean_env({"LD_PRELOAD": str(lib), "TRAINTIME_OUTPUT": str(tmp_path)})
    if "ASAN_OPTIONS" in env:
        # As test_sim_capture.py's forked workers: GCC 12's ASan allocator takes no lock around
        # fork(), so the recording child can hang in the runtime on a size class a parent thread
        # (the watchdog building its summary) held at fork(), and LeakSanitizer counts the
        # parent threads' stacks, gone in the child, as leaks.
        pytest.skip("ASan's allocator is not fork-safe (GCC 12): covered by the TSan and unsanitized runs")
    run = subprocess.run([str(binary), "--fork"], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"{binary} --fork exited {run.returncode}: {run.stdout}{run.stderr}"
    children = [int(line.split()[1]) for line in run.stdout.splitlines() if line.startswith("child ")]
    assert len(children) == 2, run.stdout
    c = Checks()
    files = sorted(p.name for p in tmp_path.glob("rank-*.json"))
    c.check(files == sorted(["rank-00000.json", f"rank-00000.pid{children[1]}.json"]),
            f"files {files}: the first child (pid {children[0]}) must write none, the second one aux file")
    parent = load_json(tmp_path / "rank-00000.json")
    c.check(parent["modules"].get("nvtx", {}).get("counters") == {"untracked_ranges": 44},
            f"the parent's NVTX section: {parent['modules'].get('nvtx')}")
    rows = {r["path"]: r["count"] for r in parent["regions"]}
    c.check(rows.get("parent_open") == 1 and rows.get("parent_range") == 1,
            f"the parent's own ranges: {sorted(rows.items())[-4:]}")
    child_file = tmp_path / f"rank-00000.pid{children[1]}.json"
    if child_file.exists():
        child = load_json(child_file)
        c.check(child["role"] == "aux", f"the child's role {child['role']!r}")
        c.check(child["modules"].get("nvtx", {}).get("counters") == {"untracked_ranges": 0},
                f"the child's NVTX section: {child['modules'].get('nvtx')}")
        c.check([(r["path"], r["count"]) for r in child["regions"]] == [("child_work", 1)],
                f"the child's regions: {child['regions']}")
        ann = child["modules"].get("annotations", {}).get("counters", {})
        c.check(ann.get("unbalanced_pops") == 0 and ann.get("unknown_range_ends") == 0,
                f"the child's annotation counters: {ann}")
        c.check(child["warnings"] == [], f"the child's warnings: {child['warnings']}")
    c.done()
