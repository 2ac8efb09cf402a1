"""scripts/bench_rounds.py on made-up rounds: the best round of each row judged, the spread over
the rounds and the reference rows' drift printed, and a miss judged as noise only for a row the
change did not touch, with the references slowed against the baseline at least as much as the row."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testlib import SOURCE_DIR

from test_bench_summary import raw_results, row  # the same made-up raw results, per round

ROUNDS = SOURCE_DIR / "scripts" / "bench_rounds.py"
MIB = 2**20


def round_results(out: Path, spawn_extra_ns: float, rdtsc_ns: float) -> None:
    """One round as bench.sh leaves it: the memory and inert-process outputs, and the reference rows
    (an rdtsc pair, a clock_gettime pair four times as long) of the annotation benchmark."""
    out.parent.mkdir(parents=True, exist_ok=True)
    raw_results(out, spawn_extra_ns, 3 * MIB + 65536 * 100)
    bench = [{"name": f"{n}_median", "run_name": n, "run_type": "aggregate", "aggregate_name": "median",
              "cpu_time": t, "time_unit": "ns"} for n, t in (("BM_RdtscPair", rdtsc_ns), ("BM_ClockGettimePair", 4 * rdtsc_ns))]
    (out / "annotation_preloaded.json").write_text(json.dumps({"benchmarks": bench}))


def combine(out: Path, rounds: int, *extra: str) -> str:
    """bench_rounds.py over OUT's rounds; the benchmarks left out of the made-up results are problems."""
    r = subprocess.run([sys.executable, str(ROUNDS), str(out), str(rounds), "/nonexistent", "2", "0.1 0.1 0.1",
                        "test cpu", "0", *extra], capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    return r.stdout


def test_the_best_round_is_judged_with_the_spread_and_the_reference_drift(tmp_path: Path) -> None:
    # The inert process misses in two rounds and meets in one: one quiet round is the verdict.
    for n, (extra, rdtsc) in enumerate(((600_000, 10.0), (400_000, 12.0), (700_000, 15.0)), 1):
        round_results(tmp_path / f"round-{n}", extra, rdtsc)
    text = combine(tmp_path, 3)
    inert = row(text, "inert process")
    assert inert.endswith("met"), inert
    assert "0.4 ms" in inert and "0.4..0.7 ms (n=3, best: round 2)" in inert, inert
    assert "round 1 +0.0 %, round 2 +20.0 %, round 3 +50.0 %" in text, text
    assert (tmp_path / "round-1" / "summary.txt").exists()
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["rows"]["inert_process_ms"]["rounds"] == [0.6, 0.4, 0.7]
    assert doc["rows"]["inert_process_ms"]["value"] == 0.4


def test_a_miss_is_noise_only_untouched_and_with_the_references_slowed_as_much(tmp_path: Path) -> None:
    base = tmp_path / "base"
    round_results(base / "round-1", 450_000, 10.0)
    combine(base, 1)
    baseline = tmp_path / "baseline.json"
    baseline.write_text((base / "results.json").read_text())
    # This run: the references 40 % slower, the inert process 0.6 ms (33 % slower: a miss).
    run = tmp_path / "run"
    for n in (1, 2):
        round_results(run / f"round-{n}", 600_000, 14.0)
    text = combine(run, 2, "--baseline", str(baseline), "--touched", "none")
    assert "against the baseline: +40.0 %" in text, text
    inert = row(text, "inert process")
    assert "noise: missed with the references +40 % vs the baseline, the row +33 %; not touched" in inert, inert
    # Touched by the change: a miss is a miss, whatever the machine did.
    assert row(combine(run, 2, "--baseline", str(baseline), "--touched", "inert_process_ms"),
               "inert process").endswith("MISSED")
    # No --touched: every row counts as touched, and the table says how to judge noise.
    text = combine(run, 2, "--baseline", str(baseline))
    assert row(text, "inert process").endswith("MISSED") and "name the touched rows with --touched" in text
    # The row slowed more than the references: not noise.
    for n in (1, 2):
        (run / f"round-{n}").rename(run / f"old-{n}")
        round_results(run / f"round-{n}", 900_000, 14.0)
    assert row(combine(run, 2, "--baseline", str(baseline), "--touched", "none"), "inert process").endswith("MISSED")


def test_touched_must_name_rows_of_the_table(tmp_path: Path) -> None:
    round_results(tmp_path / "round-1", 400_000, 10.0)
    r = subprocess.run([sys.executable, str(ROUNDS), str(tmp_path), "1", "/nonexistent", "2", "0.1 0.1 0.1",
                        "test cpu", "0", "--touched", "no_such_row"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "--touched names no row: no_such_row" in r.stderr
