"""scripts/bench_summary.py on made-up raw results: the budgets it judges, the per-name memory
cost, results.json, and --baseline's per-row change judged against the rows' measured spread."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testlib import SOURCE_DIR

SUMMARY = SOURCE_DIR / "scripts" / "bench_summary.py"
MIB = 2**20


def raw_results(out: Path, spawn_extra_ns: float, names_growth: int) -> None:
    """The memory and inert-process programs' outputs (the others absent: listed as problems)."""
    out.mkdir()
    plain = {"kernels": 10_000_000, "distinct_names": 0, "activities": 10_690_000, "steps": 1000,
             "rss_peak_growth_bytes": 3 * MIB, "name_chars_mean": 0, "footprint": {"kernel_names": 46}}
    names = dict(plain, distinct_names=100_000, rss_peak_growth_bytes=names_growth, name_chars_mean=38.0,
                 footprint={"kernel_names": 46 + 65536})
    (out / "memory.out").write_text(json.dumps(plain))
    (out / "memory_names.out").write_text(json.dumps(names))
    (out / "spawn.out").write_text(json.dumps({
        "command": "/bin/true", "runs": 200, "extra_median_ns": spawn_extra_ns, "extra_p25_ns": spawn_extra_ns - 20_000,
        "extra_p75_ns": spawn_extra_ns + 20_000, "bare_median_ns": 500_000}))


def summarize(out: Path, *extra: str) -> str:
    r = subprocess.run([sys.executable, str(SUMMARY), str(out), "0", "/nonexistent", "2", "0.1 0.1 0.1",
                        "test cpu", "0", *extra], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr  # the missing benchmarks are problems
    return r.stdout


def row(text: str, starts: str) -> str:
    lines = [line for line in text.splitlines() if line.lstrip().startswith(starts)]
    assert lines, f"no row starting {starts!r} in:\n{text}"
    return lines[0]


def test_judges_memory_per_name_cost_and_inert_process_against_the_new_budgets(tmp_path: Path) -> None:
    # 65 536 more names kept for 65 536 x (38 characters + 100 bytes) more: exactly on the budget.
    raw_results(tmp_path / "a", 400_000, 3 * MIB + 65536 * 138)
    text = summarize(tmp_path / "a")
    assert "100 B beyond its 38 characters" in row(text, "per kept kernel name")
    assert row(text, "per kept kernel name").endswith("met")
    assert row(text, "memory after 10 M kernels").endswith("met")  # 3 MiB <= 8 MiB
    assert row(text, "inert process").endswith("met")  # +0.4 ms <= 0.5 ms
    raw_results(tmp_path / "b", 600_000, 3 * MIB + 65536 * 139)
    text = summarize(tmp_path / "b")
    assert row(text, "per kept kernel name").endswith("MISSED")
    assert row(text, "inert process").endswith("MISSED")


def test_baseline_prints_each_rows_change_and_whether_it_is_beyond_the_measured_spread(tmp_path: Path) -> None:
    raw_results(tmp_path / "base", 300_000, 3 * MIB + 65536 * 100)
    summarize(tmp_path / "base", "--commit", "abc1234")
    baseline = tmp_path / "baseline.json"
    baseline.write_text((tmp_path / "base" / "results.json").read_text())
    doc = json.loads(baseline.read_text())
    assert doc["commit"] == "abc1234" and doc["machine"] == "test cpu, 2 cores"
    assert doc["rows"]["inert_process_ms"]["value"] == 0.3
    assert doc["rows"]["inert_process_ms"]["spread"] == 0.02  # half the IQR

    # Inert process: +0.01 ms, inside the two runs' spreads (0.02 + 0.02 ms).
    raw_results(tmp_path / "near", 310_000, 3 * MIB + 65536 * 100)
    text = summarize(tmp_path / "near", "--baseline", str(baseline))
    assert "against " + str(baseline) in text
    near = row(text.split("\nagainst ")[1], "inert process")
    assert "+3.3 %" in near and near.endswith("no")
    assert row(text.split("\nagainst ")[1], "memory after").endswith("spread not measured")

    # +0.1 ms: beyond it.
    raw_results(tmp_path / "far", 400_000, 3 * MIB + 65536 * 100)
    text = summarize(tmp_path / "far", "--baseline", str(baseline))
    far = row(text.split("\nagainst ")[1], "inert process")
    assert "+33.3 %" in far and far.endswith("YES")
    assert "NOTE: the baseline ran on" not in text  # the same machine

    # A baseline from another machine class is named as such.
    doc["machine"] = "other cpu, 2 cores"
    baseline.write_text(json.dumps(doc))
    text = summarize(tmp_path / "far", "--baseline", str(baseline))
    assert "NOTE: the baseline ran on other cpu, 2 cores, this run on test cpu, 2 cores" in text


def test_an_unreadable_baseline_is_a_problem_named_by_its_path(tmp_path: Path) -> None:
    raw_results(tmp_path / "a", 300_000, 3 * MIB)
    bad = tmp_path / "not-results.json"
    bad.write_text("{}")
    assert f"{bad}: not a bench results file" in summarize(tmp_path / "a", "--baseline", str(bad))


def replay_results(out: Path, pairs: list[tuple[int, int]], seen: int = 1000) -> None:
    """sim_replay's paired runs as bench.sh leaves them: per pair (bare, traintime) the CPU time
    while playing, in µs for 1000 launch calls; the whole process after set-up takes twice that."""
    for i, (bare, traintime) in enumerate(pairs, 1):
        for variant, play_us in (("bare", bare), ("traintime", traintime)):
            doc = {"trace": "dense.json.gz", "launch_calls": 1000, "activities": 1000, "recorded_span_ns": 50_000_000,
                   "launches_per_s": 20000.0, "cpu_ns_before_play": 100_000_000,
                   "cpu_ns_after_play": 100_000_000 + play_us * 1000, "wall_ns_play": 1, "rc": 0,
                   "cpu_ns_total": 100_000_000 + 2 * play_us * 1000}
            (out / f"replay_{variant}_{i}.json").write_text(json.dumps(doc))
        rank = out / f"rank-replay_traintime_{i}"
        rank.mkdir()
        (rank / "rank-00000.json").write_text(json.dumps({"categories": {"unattributed": {"count": seen - 10},
                                                                          "comm": {"count": 10}}}))


def test_replay_row_reports_the_cpu_time_per_launch_call_paired_run_by_run(tmp_path: Path) -> None:
    raw_results(tmp_path / "r", 300_000, 3 * MIB + 65536 * 100)
    replay_results(tmp_path / "r", [(300, 800), (320, 900), (310, 700)])
    text = summarize(tmp_path / "r")
    play = row(text, "real trace replay, CPU per launch call")
    # Per launch call while playing: bare 300/320/310 ns, traintime 800/900/700: pairs +500, +580, +390.
    assert "dense.json.gz" in play and "+500.0 ns while playing" in play, play
    assert "traintime 800.0 ns vs no tool 310.0 ns = 2.58 x" in play and "pairs 390..580 ns, n=3" in play, play
    whole = row(text, "the same, the whole process after set-up")
    assert "+1000.0 ns" in whole and "pairs 780..1160 ns, n=3" in whole, whole
    # A rank file that missed the replay's work makes the row a problem, not a figure.
    raw_results(tmp_path / "lost", 300_000, 3 * MIB + 65536 * 100)
    replay_results(tmp_path / "lost", [(300, 800)], seen=999)
    text = summarize(tmp_path / "lost")
    assert "real trace replay" not in text
    assert "replay_traintime_1: the rank file counts 999 GPU activities, the replay made 1000" in text


def launch_results(out: Path, pairs: list[tuple[float, float]], estimates: list[float | None],
                   launches: int = 100_000) -> None:
    """bench_sim_launch's runs as bench.sh leaves them: per run the bare tracer's and traintime's
    CPU time per launch (no tool: 1000 ns), and traintime's rank file with its self_cost row
    "launch callbacks" (`estimates`: ns per launch; None: no such row)."""
    for i, ((tracer, traintime), estimate) in enumerate(zip(pairs, estimates), 1):
        for variant, cpu, injections in (("bare", 1000.0, 0), ("tracer", tracer, 1), ("traintime", traintime, 1)):
            doc = {"benchmarks": [{"name": "BM_LaunchKernel", "run_type": "iteration", "cpu_time": cpu,
                                   "time_unit": "ns", "injections": injections}]}
            (out / f"launch_{variant}_{i}.json").write_text(json.dumps(doc))
        rank = out / f"rank-launch_traintime_{i}"
        rank.mkdir()
        callbacks = [] if estimate is None else [
            {"module": "cupti", "what": "launch callbacks", "calls": launches, "sampled_every": 1024,
             "samples": launches // 1024, "estimated": True, "estimated_ns": int(estimate * launches),
             "spread_ns": 1000}]
        (rank / "rank-00000.json").write_text(json.dumps({
            "gpu_capture": "cupti", "categories": {"forward": {"count": launches}},
            "capture_stats": {"launch_callbacks": launches}, "self_cost": {"callbacks": callbacks}}))


def test_launch_callback_estimate_is_judged_against_the_row_measured_in_the_same_runs(tmp_path: Path) -> None:
    # Measured pairs traintime - tracer: 30, 40, 50 ns (median 40). Estimates inside the pairs: met.
    raw_results(tmp_path / "in", 300_000, 3 * MIB)
    launch_results(tmp_path / "in", [(1100, 1130), (1100, 1140), (1100, 1150)], [33.0, 36.0, 47.0])
    text = summarize(tmp_path / "in")
    assert "40.0 ns per launch" in row(text, "launch callback, own work")
    est = row(text, "its self_cost estimate")
    assert "36.0 ns per launch" in est and "runs 33..47 ns" in est and "pairs 30..50 ns" in est, est
    assert est.endswith("met"), est
    # Pairs 39..41 ns: an estimate outside them but within 10 ns of the measured 40 ns is met,
    # one 15 ns off is MISSED.
    tight = [(1100, 1139), (1100, 1140), (1100, 1141)]
    raw_results(tmp_path / "near", 300_000, 3 * MIB)
    launch_results(tmp_path / "near", tight, [48.0, 49.0, 50.0])
    assert row(summarize(tmp_path / "near"), "its self_cost estimate").endswith("met")
    raw_results(tmp_path / "far", 300_000, 3 * MIB)
    launch_results(tmp_path / "far", tight, [54.0, 55.0, 56.0])
    assert row(summarize(tmp_path / "far"), "its self_cost estimate").endswith("MISSED")
    # A rank file without the row is a problem named by its run, not a figure.
    raw_results(tmp_path / "none", 300_000, 3 * MIB)
    launch_results(tmp_path / "none", [(1100, 1130), (1100, 1140)], [33.0, None])
    text = summarize(tmp_path / "none")
    assert "its self_cost estimate" not in text
    assert 'launch_traintime_2: no estimated self_cost row "launch callbacks"' in text
