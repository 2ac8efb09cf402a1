#!/usr/bin/env python3
"""Prints the table of where a CI run's time went (docs/ci.md says how to read it).

.ci/run sets TT_CI_PHASES to a file; scripts/phase.sh's tt_phase appends one line to it per
phase of test.sh, sanitize.sh and fuzz.sh (name, wall seconds, exit status, for a CTest run its
build folder and how many of its slowest tests to list, CPU seconds, ccache's hits and misses).
This script turns that file into the table .ci/run prints at its end, whether the run passed or
not: every phase's wall time, share of the total, how many cores it kept busy on average and, for a
build, how many of its compiles came from the cache; for each CTest run its test time summed by
label (from CTest's JUnit file and its test list) and its slowest tests. --json keeps the table's figures for a later --compare.

    scripts/ci_times.py build/ci-phases.tsv --total 2412.5 --json build/ci-times.json
    scripts/ci_times.py build/ci-phases.tsv --compare old/ci-times.json
    scripts/ci_times.py --ctest build          # one CTest run's labels and slowest tests
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# What CI is allowed in all (the runner stops it there) and the line it should stay under.
CI_LIMIT_S = 90 * 60
CI_TARGET_S = 35 * 60
JUNIT = "ctest-results.xml"


@dataclass
class TestTime:
    name: str
    seconds: float
    status: str  # run, fail, notrun (CTest's JUnit statuses)
    labels: list[str]


@dataclass
class Phase:
    name: str
    seconds: float
    status: int
    ctest_dir: Path | None = None
    slowest: int = 0
    cpu: float | None = None  # CPU seconds of the phase's processes (user + system)
    cache_hits: int = 0  # compiles ccache answered from its cache
    cache_misses: int = 0  # compiles it had to run
    tests: list[TestTime] = field(default_factory=list)


def ctest_tests(build: Path, ctest: str | None = None) -> list[dict[str, Any]]:
    """CTest's own list of the tests a build folder registers (`ctest --show-only=json-v1`): name,
    labels, timeout (None when unset) and where it was added (file:line). scripts/ci_times.py and
    the label guard (tests/architecture/test_ctest_labels.py) read the tests through this one
    function. `ctest`: the program (default: TT_CTEST, else ctest on PATH)."""
    ctest = ctest or os.environ.get("TT_CTEST") or "ctest"
    p = subprocess.run([ctest, "--test-dir", str(build), "--show-only=json-v1"], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"ctest --show-only=json-v1 in {build} failed: "
                           f"{(p.stderr.strip().splitlines() or ['no output'])[-1]}")
    info = json.loads(p.stdout)
    nodes, files = info["backtraceGraph"]["nodes"], info["backtraceGraph"]["files"]
    tests = []
    for test in info["tests"]:
        props = {prop["name"]: prop["value"] for prop in test.get("properties", [])}
        node = nodes[test["backtrace"]] if "backtrace" in test else None
        # Catch2 test cases are registered at build time (catch_discover_tests): no line to name.
        where = f"{files[node['file']]}:{node.get('line', '?')}" if node else "discovered at build time"
        tests.append({"name": test["name"], "labels": list(props.get("LABELS", [])),
                      "timeout": props.get("TIMEOUT"), "where": where})
    return tests


def read_junit(build: Path) -> list[TestTime]:
    """Each test's time and outcome from build/ctest-results.xml (ctest --output-junit), with its
    labels from ctest_tests(); [] when the run wrote no file (it did not get that far)."""
    path = build / JUNIT
    if not path.is_file():
        return []
    try:
        cases = ET.parse(path).getroot().iter("testcase")
    except ET.ParseError:
        return []
    try:
        labels = {t["name"]: t["labels"] for t in ctest_tests(build)}
    except (RuntimeError, OSError, ValueError, KeyError):
        labels = {}
    return [TestTime(c.get("name", "?"), float(c.get("time") or 0), c.get("status", "?"),
                     labels.get(c.get("name", "?"), [])) for c in cases]


def read_phases(path: Path) -> list[Phase]:
    phases = []
    for line in path.read_text(errors="replace").splitlines():
        cols = line.split("\t")
        if len(cols) < 3:
            continue
        try:
            phase = Phase(cols[0], float(cols[1]), int(cols[2]))
        except ValueError:
            continue
        if len(cols) >= 5 and cols[3]:
            phase.ctest_dir = Path(cols[3])
            phase.slowest = int(cols[4] or 0)
            phase.tests = read_junit(phase.ctest_dir)
        if len(cols) >= 6 and cols[5]:
            phase.cpu = float(cols[5])
        if len(cols) >= 8:
            phase.cache_hits, phase.cache_misses = int(cols[6] or 0), int(cols[7] or 0)
        phases.append(phase)
    return phases


def by_label(tests: list[TestTime]) -> list[tuple[str, int, float]]:
    """(label, tests, summed seconds), largest first; a test with several labels counts in each,
    one with none under "(no label)"."""
    sums: dict[str, list[float]] = {}
    for t in tests:
        for label in t.labels or ["(no label)"]:
            sums.setdefault(label, []).append(t.seconds)
    return sorted(((k, len(v), sum(v)) for k, v in sums.items()), key=lambda r: -r[2])


def fmt_s(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.1f}"


def table(phases: list[Phase], total: float | None, before: dict[str, float] | None) -> list[str]:
    """The table's lines. `total`: the run's own wall time (phases plus what ran between them);
    `before`: seconds by row name from an earlier run's --json, shown beside each row."""
    total_s = total if total is not None else sum(p.seconds for p in phases)
    width = max([len(p.name) for p in phases] + [38])
    compare = before is not None

    def row(name: str, seconds: float, extra: str = "", cpu: float | None = None) -> str:
        share = f"{100 * seconds / total_s:5.1f}%" if total_s > 0 else "  n/a"
        busy = f"{cpu / seconds:5.2f}" if cpu is not None and seconds > 0 else "  n/a"
        line = f"{name:<{width}} {seconds:9.1f} {share} {busy}"
        if compare:
            old = before.get(name) if before else None
            line += f" {fmt_s(old):>9} {'' if old is None else f'{seconds - old:+9.1f}'}"
        return (line + ("  " + extra if extra else "")).rstrip()

    head = f"{'phase':<{width}} {'seconds':>9} {'share':>6} {'cores':>5}"
    if compare:
        head += f" {'before':>9} {'change':>9}"
    out = ["== CI phases: where the time went (wall seconds; cores: CPU seconds / wall seconds; docs/ci.md)",
           head]
    for p in phases:
        notes = [] if p.status == 0 else [f"FAILED (exit {p.status})"]
        compiles = p.cache_hits + p.cache_misses
        if compiles:
            notes.append(f"ccache: {p.cache_hits} of {compiles} compiles from the cache")
        out.append(row(p.name, p.seconds, "; ".join(notes), p.cpu))
        if not p.tests:
            if p.ctest_dir is not None:
                out.append(f"    (no {p.ctest_dir / JUNIT}: no test times)")
            continue
        ran = [t for t in p.tests if t.status != "notrun"]
        out.append(f"    {len(p.tests)} tests, {sum(t.seconds for t in p.tests):.1f} test-seconds "
                   f"({len(p.tests) - len(ran)} not run); by label (a test with several labels counts in each):")
        for label, count, seconds in by_label(p.tests):
            out.append(f"      {label:<22} {count:4d} tests {seconds:9.1f} s")
        out.append(f"    its {min(p.slowest, len(p.tests))} slowest tests:")
        for t in sorted(p.tests, key=lambda t: -t.seconds)[:p.slowest]:
            mark = {"fail": "  FAILED", "notrun": "  not run"}.get(t.status, "")
            out.append(f"      {t.seconds:7.1f} s  {t.name} [{';'.join(t.labels) or 'no label'}]{mark}")
        failed_tests = [t.name for t in p.tests if t.status == "fail"]
        if failed_tests:
            out.append(f"    {len(failed_tests)} failed: {', '.join(failed_tests)}")
    accounted = sum(p.seconds for p in phases)
    if total is not None and total - accounted > 0.5:
        out.append(row("(between phases)", total - accounted))
    # The verdict names each failed test too: a CI log shown only in part keeps its last lines.
    failed = [p.name + "".join(f" [{t.name}]" for t in p.tests if t.status == "fail")
              for p in phases if p.status != 0]
    verdict = f"FAILED: {', '.join(failed)}" if failed else "every phase passed"
    cpus = [p.cpu for p in phases if p.cpu is not None]
    out.append(row("total", total_s, f"= {total_s / 60:.1f} min of {CI_LIMIT_S // 60} "
                   f"(keep under {CI_TARGET_S // 60}); {verdict}", sum(cpus) if cpus else None))
    return out


def as_json(phases: list[Phase], total: float | None) -> dict[str, Any]:
    rows = {p.name: p.seconds for p in phases}
    rows["total"] = total if total is not None else sum(p.seconds for p in phases)
    return {"phases": rows, "cpu": {p.name: p.cpu for p in phases if p.cpu is not None},
            "ccache": {p.name: {"hits": p.cache_hits, "misses": p.cache_misses}
                       for p in phases if p.cache_hits + p.cache_misses},
            "failed": [p.name for p in phases if p.status != 0],
            "ctest": {p.name: [{"name": t.name, "seconds": t.seconds, "status": t.status, "labels": t.labels}
                               for t in p.tests] for p in phases if p.tests}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("phases", type=Path, nargs="?", help="the file TT_CI_PHASES named (tt_phase lines)")
    ap.add_argument("--total", type=float, help="the whole run's wall seconds (default: the phases' sum)")
    ap.add_argument("--json", type=Path, help="also write the figures here (for a later --compare)")
    ap.add_argument("--compare", type=Path, help="an earlier run's --json: show its seconds beside each row")
    ap.add_argument("--ctest", type=Path, metavar="BUILD",
                    help="instead: the labels and ten slowest tests of the last CTest run in BUILD")
    args = ap.parse_args()
    if args.ctest is not None:
        tests = read_junit(args.ctest.resolve())
        # CTest's own exit status when a test failed (8), so the verdict says so as in .ci/run.
        status = 8 if any(t.status == "fail" for t in tests) else 0
        phases = [Phase(f"ctest in {args.ctest}", sum(t.seconds for t in tests), status, args.ctest,
                        slowest=10, tests=tests)]
    elif args.phases is None:
        ap.error("give the phases file, or --ctest BUILD")
    elif not args.phases.is_file():
        print(f"ci_times: no phase file {args.phases}: nothing was timed (was TT_CI_PHASES set?)",
              file=sys.stderr)
        return 1
    else:
        phases = read_phases(args.phases)
    before = None
    if args.compare is not None:
        try:
            before = json.loads(args.compare.read_text())["phases"]
        except (OSError, ValueError, KeyError) as e:
            print(f"ci_times: cannot read {args.compare} ({e}); printed without the comparison", file=sys.stderr)
    print("\n".join(table(phases, args.total, before)))
    if args.json is not None:
        args.json.write_text(json.dumps(as_json(phases, args.total), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
