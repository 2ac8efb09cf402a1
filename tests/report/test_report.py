"""traintime-report on hand-written rank files (tests/report/data/golden): every number checked
here is worked out by hand below from those files, never captured from the tool.

The golden job ("golden-1", world size 3, 4 steps, no warm-up), per rank and per step (ms):

    rank  busy  compute  comm  overlapped  exposed  io  idle   walls (4 steps)
    0     14    10       4     1           3        1   1      15 16 17 20
    1     14    10       4     1           3        1   1      16 16 16 16
    2     15.5  14       1     0.5         0.5      1   1      16 16 17 18

Communicator 00000000000000aa (3 ranks), AllReduce of 1 MiB, seqs 1..8 in every ring (8
enqueued = 2 per step); durations (ms) on each rank's own clock:
    odd seqs:  rank 0 3.5, rank 1 3.0, rank 2 1.0   -> rank 2 arrives last
    even seqs: rank 0 0.5, rank 1 0.6, rank 2 0.5   -> a tie: nobody arrives last
"""
from __future__ import annotations

import csv
import html
import io
import json
import os
import re
from pathlib import Path

import pytest

from reportlib import GOLDEN, copy_golden, cpu_only, edit, run, summary, text_table

MS = 1_000_000
MiB = 1 << 20

# ---- hand-worked expectations --------------------------------------------------------------
# GPU capture worked, so the job's step time is the GPU step span (busy + idle) of the 12
# (rank, step) rows: ranks 0 and 1 15 ms in each of their 4 steps, rank 2 16.5 ms: 15 x8, 16.5 x4.
STEP_MEAN = (15 * 8 + 16.5 * 4) / 12  # 15.5
STEP_P50 = 15.0  # nearest rank: the ceil(0.5*12) = 6th value
STEP_P90 = 16.5  # the ceil(0.9*12) = 11th value
STEP_MAX = 16.5
# The CPU wall of the same rows (only in the JSON summary): 15 16 16 16 16 16 16 16 17 17 18 20.
WALL_MEAN = (15 + 16 * 7 + 17 * 2 + 18 + 20) / 12  # 16.583
WALL_P50, WALL_P90, WALL_MAX = 16.0, 18.0, 20.0
# Waits: odd seqs rank 0 waits 3.5-1.0 = 2.5, rank 1 3.0-1.0 = 2.0; even seqs rank 1 waits 0.1.
# Per matched collective x (8 enqueued / 4 steps) collectives per step / 8 matched = x 0.25.
WAIT_R0 = (4 * 2.5) * 0.25  # 2.5 ms/step
WAIT_R1 = (4 * 2.0 + 4 * 0.1) * 0.25  # 2.1 ms/step
# Rank 2 alone delays each odd seq by (second shortest - shortest) = 3.0 - 1.0 = 2.0 ms.
CAUSED_R2 = (4 * 2.0) * 0.25  # 2.0 ms/step
# Without rank 2: its span 16.5 less its exposed comm 0.5 is 16 ms outside comm, against the
# peers' median 15 - 3 = 12: 4 ms too many, so 16.5 - 4 = 12.5; the peers' steps less their
# waits are 15 - 2.5 = 12.5 and 15 - 2.1 = 12.9 (median, nearest rank: 12.5). The job's step
# would be max(12.5, 12.5) = 12.5 ms instead of its median GPU span of 15 ms.
STEP_WITHOUT_R2 = 12.5
COST_R2 = 15.0 - STEP_WITHOUT_R2  # 2.5 ms/step
COST_PCT = COST_R2 / 15.0 * 100  # 16.7% of a step
# GPU step span summed over ranks and steps: (14+1)*4 + (14+1)*4 + (15.5+1)*4 = 186 ms.
SPAN = 186.0
EXPOSED_PCT = (3 * 4 + 3 * 4 + 0.5 * 4) / SPAN * 100  # 13.978
IDLE_PCT = (1 * 4 * 3) / SPAN * 100  # 6.452
COMM_PCT = (4 * 4 + 4 * 4 + 1 * 4) / SPAN * 100  # 19.355
COMPUTE_PCT = (10 * 4 + 10 * 4 + 14 * 4) / SPAN * 100  # 73.118
UNATTRIBUTED_PCT = 2.0 / (14 * 4 + 14 * 4 + 15.5 * 4) * 100  # rank 0's 2 ms of 174 ms busy
# Wait-free busbw of the 1 MiB AllReduce: 8 collectives, 8 MiB over the shortest durations
# 4 x 1.0 + 4 x 0.5 = 6 ms, times the AllReduce factor 2(n-1)/n = 4/3 for n = 3.
WAITFREE_BUSBW = 8 * MiB / 6e6 * 4 / 3  # 1.864 GB/s
# Recorded: all 24 durations (4x(3.5+3.0+1.0) + 4x(0.5+0.6+0.5) = 36.4 ms) for 24 MiB.
RECORDED_BUSBW = 24 * MiB / 36.4e6 * 4 / 3  # 0.922 GB/s
# forward busy per step: ranks 0 and 1 16/4 = 4, rank 2 22/4 = 5.5.
FWD_MEAN, FWD_MIN, FWD_MAX, FWD_SPREAD = (4 + 4 + 5.5) / 3, 4.0, 5.5, (5.5 - 4) / ((4 + 4 + 5.5) / 3) * 100


def approx(x: float, rel: float = 1e-6) -> object:
    return pytest.approx(x, rel=rel, abs=1e-9)


def f3(x: float) -> str:
    return f"{x:.3f}"


# ---- the formats ---------------------------------------------------------------------------

def test_json_summary_golden(build_dir: Path) -> None:
    s, proc = summary(build_dir, GOLDEN)
    assert proc.returncode == 0, proc.stderr
    assert s["ranks"] == 3 and s["world_size"] == 3 and s["job_id"] == "golden-1"
    assert s["missing_ranks"] == [] and s["problems"] == []
    st = s["step_time_ms"]
    assert (st["n"], st["mean"], st["p50"], st["p90"], st["max"]) == (12, approx(STEP_MEAN), STEP_P50, STEP_P90, STEP_MAX)
    assert s["step_time_source"] == "gpu_span" and s["gpu_data"] is True
    w = s["cpu_wall_ms"]
    assert (w["n"], w["mean"], w["p50"], w["p90"], w["max"]) == (12, approx(WALL_MEAN), WALL_P50, WALL_P90, WALL_MAX)
    # compute per (rank, step): eight 10s and four 14s.
    c = s["breakdown_ms"]["compute"]
    assert (c["mean"], c["p50"], c["p90"], c["max"]) == (approx((80 + 56) / 12), 10.0, 14.0, 14.0)
    sh = s["shares_pct"]
    assert sh["exposed_comm"] == approx(EXPOSED_PCT) and sh["idle"] == approx(IDLE_PCT)
    assert sh["comm"] == approx(COMM_PCT) and sh["compute"] == approx(COMPUTE_PCT)
    assert sh["unattributed"] == approx(UNATTRIBUTED_PCT)
    assert s["throughput"]["samples_per_s"] == approx(1000 + 1000 + 900)
    assert s["throughput"]["tokens_per_s"] == approx(512000 + 512000 + 460800)

    assert [x["rank"] for x in s["stragglers"]] == [2]
    (st2,) = s["stragglers"]
    assert st2["cost_ms_per_step"] == approx(COST_R2) and st2["cost_pct_of_step"] == approx(COST_PCT)
    assert st2["step_ms"] == approx(15.0) and st2["step_ms_without"] == approx(STEP_WITHOUT_R2)
    assert (st2["last_arrivals"], st2["collectives_matched"]) == (4, 8)
    assert len(st2["reasons"]) == 2  # the waits and the compute (14 = 1.4x the median 10)

    ranks = {r["rank"]: r for r in s["per_rank"]}
    assert ranks[0]["per_step_ms"]["wait"] == approx(WAIT_R0)
    assert ranks[1]["per_step_ms"]["wait"] == approx(WAIT_R1)
    assert ranks[2]["per_step_ms"]["wait"] == 0 and ranks[2]["per_step_ms"]["caused_wait"] == approx(CAUSED_R2)
    assert ranks[0]["per_step_ms"]["caused_wait"] == 0 and ranks[1]["per_step_ms"]["caused_wait"] == 0
    # The even seqs are a tie between ranks 0 and 2 (0.5 ms each): nobody arrived last there.
    assert [ranks[r]["last_arrivals"] for r in range(3)] == [0, 0, 4]
    assert [ranks[r]["collectives_matched"] for r in range(3)] == [8, 8, 8]
    assert ranks[2]["per_step_ms"]["compute"] == approx(14) and ranks[0]["per_step_ms"]["exposed_comm"] == approx(3)
    # Each rank's median step from the job's source (GPU span), its own CPU wall p50 beside it.
    assert [ranks[r]["step_time_p50_ms"] for r in range(3)] == [15.0, 15.0, 16.5]

    (bw,) = s["bandwidth"]
    assert (bw["op"], bw["comm_size"], bw["lo_bytes"], bw["collectives"]) == ("AllReduce", 3, MiB, 8)
    assert bw["waitfree_busbw_gbps"] == approx(WAITFREE_BUSBW)
    assert bw["recorded_busbw_gbps"] == approx(RECORDED_BUSBW)

    cats = {c["category"]: c["gpu_busy_ms_per_step"] for c in s["categories"]}
    fwd = cats["forward"]
    assert (fwd["mean"], fwd["min"], fwd["max"], fwd["max_rank"]) == (approx(FWD_MEAN), FWD_MIN, FWD_MAX, 2)
    assert fwd["spread_pct"] == approx(FWD_SPREAD)
    regions = {r["path"]: r for r in s["regions"]}
    bwd = regions["step/backward"]["gpu_busy_ms_per_step"]  # 20, 22, 30 ms over 4 steps
    assert (bwd["min"], bwd["max"], bwd["max_rank"], bwd["ranks"]) == (5.0, 7.5, 2, 3)
    assert regions["step/<script>alert(1)</script>"]["cpu_ms_per_step"]["mean"] == approx(1.0)  # 4 ms / 4
    (comm,) = s["comm"]
    assert (comm["op"], comm["comm_size"], comm["calls"]) == ("AllReduce", 3, 24)
    assert comm["gpu_ms_per_step"]["max"] == approx(4.0) and comm["gpu_ms_per_step"]["max_rank"] == 0  # 16/4

    assert s["hang_data"] is False and s["hangs"] == []
    m = s["metrics"]
    assert m["step_time_p50"] == STEP_P50 and m["stragglers"] == 1 and m["straggler_cost_ms"] == approx(COST_R2)
    assert m["hangs"] == 0 and m["missing_ranks"] == 0 and m["bad_files"] == 0


def test_text_report_golden(build_dir: Path) -> None:
    proc = run(build_dir, GOLDEN)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = proc.stdout
    assert max(len(line) for line in out.splitlines()) <= 100, "a line is wider than 100 columns"
    # The diagnosis comes first, before any table.
    assert out.index("DIAGNOSIS") < out.index("Step time (GPU step span)")
    flat = " ".join(out.split())
    assert (f"rank 2 (host node-2) costs the job {f3(COST_R2)} ms/step ({COST_PCT:.1f}% of the 15.000 ms median step)"
            in flat)
    # One step time, said once with its source; the CPU wall is not a second "median step".
    assert ("step time p50 15.000 ms (p90 16.500 ms) over 12 (rank, step) values after warm-up, measured as the "
            "GPU step span" in flat)
    assert "step time (CPU wall)" not in out and "CPU wall" not in out[:out.index("Step time (")]
    assert "arrived last at 4 of 8 collectives" in flat
    assert f"exposed comm {EXPOSED_PCT:.1f}% of the GPU step span" in flat
    assert f"idle {IDLE_PCT:.1f}% of the GPU step span" in flat
    assert f"unattributed {UNATTRIBUTED_PCT:.1f}% of GPU busy time" in flat
    assert "no hang data" in flat
    assert "3 of 3 ranks merged" in flat

    steps = text_table(out, "Step time (GPU step span)")
    assert steps["step time (GPU step span)"][1:] == ["12", f3(STEP_MEAN), f3(STEP_P50), f3(STEP_P90), f3(STEP_MAX)]
    # The rank column says what it holds: the rank with the highest value ("max rank" read as a rank
    # number, e.g. the straggler "max rank 3", was ambiguous).
    assert "rank of max" in out and re.search(r"max rank(?! of)", out) is None
    cats = text_table(out, "GPU busy per category")
    assert cats["forward"][1:] == [f3(FWD_MEAN), f3(FWD_MIN), f3(FWD_MAX), "2", f"{FWD_SPREAD:.1f}"]
    ranks = text_table(out, "Per rank")
    assert ranks["0"][8] == f3(WAIT_R0) and ranks["1"][8] == f3(WAIT_R1)
    assert ranks["2"][9] == f3(CAUSED_R2) and ranks["2"][4] == f3(14) and ranks["2"][3] == f3(16.5)
    bw = text_table(out, "Wait-free bus bandwidth")
    assert bw["AllReduce"][4:6] == [f"{WAITFREE_BUSBW:.2f}", f"{RECORDED_BUSBW:.2f}"]
    warnings = out[out.index("Warnings written in the rank files"):]
    assert "rank(s) 1: TRAINTIME_WARMUP_STEPS" in warnings


def test_markdown_report_golden(build_dir: Path) -> None:
    proc = run(build_dir, GOLDEN, "--format", "md")
    assert proc.returncode == 0, proc.stderr
    md = proc.stdout
    assert md.startswith("# traintime-report: job golden-1")
    assert md.index("## Diagnosis") < md.index("## Step time")
    rows = {}
    for line in md.splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            rows.setdefault(cells[0], cells)
    assert rows["step time (GPU step span)"][1:] == ["12", f3(STEP_MEAN), f3(STEP_P50), f3(STEP_P90), f3(STEP_MAX)]
    assert rows["forward"][1:4] == [f3(FWD_MEAN), f3(FWD_MIN), f3(FWD_MAX)]
    # Region names are data: escaped, never markup.
    assert "<script>" not in md
    assert "step/&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert f"costs the job {f3(COST_R2)} ms/step" in md


def test_csv_views_golden(build_dir: Path, tmp_path: Path) -> None:
    proc = run(build_dir, GOLDEN, "--format", "csv", "-o", tmp_path)
    assert proc.returncode == 0, proc.stderr
    files = {p.stem for p in tmp_path.glob("*.csv")}
    assert {"steps", "categories", "regions", "comm", "bandwidth", "ranks", "problems"} <= files
    with open(tmp_path / "ranks.csv", newline="") as f:
        ranks = {row["rank"]: row for row in csv.DictReader(f)}
    assert float(ranks["0"]["wait"]) == approx(WAIT_R0, 1e-3)
    assert float(ranks["2"]["caused"]) == approx(CAUSED_R2, 1e-3)
    with open(tmp_path / "categories.csv", newline="") as f:
        cats = {row["category"]: row for row in csv.DictReader(f)}
    assert set(cats["forward"]) == {"category", "mean", "min", "max", "rank_of_max", "spread_pct"}
    assert float(cats["forward"]["max"]) == FWD_MAX and cats["forward"]["rank_of_max"] == "2"
    with open(tmp_path / "regions.csv", newline="") as f:
        paths = [row["region"] for row in csv.DictReader(f)]
    assert "step/<script>alert(1)</script>" in paths  # data kept as is in csv
    # Without a folder: every view on stdout, each after a "# view: NAME" line.
    proc = run(build_dir, GOLDEN, "--format", "csv")
    blocks = [b for b in proc.stdout.split("# view: ") if b]
    views = {b.split("\n", 1)[0]: list(csv.DictReader(io.StringIO(b.split("\n", 1)[1]))) for b in blocks}
    assert float({r["component"]: r for r in views["steps"]}["step time (GPU step span)"]["p90"]) == STEP_P90


# ---- bad input -----------------------------------------------------------------------------

def problems_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("traintime-report: ")]


def test_step_time_from_detail_rows_as_written_and_from_wall_stats_for_older_files(build_dir: Path,
                                                                                   tmp_path: Path) -> None:
    """The golden files carry per-step wall times, as the writer does (steps.detail[].wall_ns);
    files of older writers, whose rows carry 0, fall back to each rank's steps.wall_ns. (The
    job's one step time is the GPU span here; the CPU wall is reported beside it.)"""
    s, proc = summary(build_dir, GOLDEN)
    assert proc.returncode == 0 and s["cpu_wall_source"] == "steps.detail"
    d = copy_golden(tmp_path / "job")

    def older_writer(doc: dict) -> None:
        for row in doc["steps"]["detail"]:
            row["wall_ns"] = 0

    for f in sorted(d.glob("rank-*.json")):
        edit(f, older_writer)
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0 and s["cpu_wall_source"] == "wall_ns"
    # Mean over the 12 steps from the ranks' totals (68 + 64 + 67 ms); p50 the median of their p50s.
    st = s["cpu_wall_ms"]
    assert (st["n"], st["mean"], st["p50"]) == (12, approx((68 + 64 + 67) / 12), 16.0)


def test_a_counted_warning_is_one_row_with_its_total(build_dir: Path, tmp_path: Path) -> None:
    """Each rank's own count of one module counter: one group (rank_warnings[], the warnings
    table) found from the counters, its counts summed and the largest named, its text the one the
    writer makes for the largest; a text nothing counted (a configuration warning) stays as
    written. Grouping by exact text gave one row per rank."""
    d = copy_golden(tmp_path / "job")
    counts = {0: 123, 1: 124, 2: 99}
    text = "{} NCCL call(s) beyond the communicator table's capacity were not counted"
    for f in sorted(d.glob("rank-*.json")):
        edit(f, lambda doc: doc.update(
            warnings=[text.format(counts[doc["rank"]])] + doc["warnings"],
            modules={"nccl": {"counters": {"calls_without_communicator": counts[doc["rank"]]}}}))
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    by_key = {w["key"] or w["warning"]: w for w in s["rank_warnings"]}
    assert by_key["nccl.calls_without_communicator"] == {
        "warning": text.format(124), "key": "nccl.calls_without_communicator", "ranks": [0, 1, 2], "total": 346,
        "worst": [{"rank": 1, "value": 124}, {"rank": 0, "value": 123}, {"rank": 2, "value": 99}]}
    cfg = by_key["TRAINTIME_WARMUP_STEPS: 'x' is not a number; using 0"]
    assert cfg["ranks"] == [1] and cfg["total"] is None
    assert len(s["rank_warnings"]) == 2

    proc = run(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    warnings = proc.stdout[proc.stdout.index("Warnings written in the rank files"):]
    assert (f"rank(s) 0, 1, 2: {text.format(124)}; total 346 over 3 rank(s); worst: rank 1: 124, rank 0: 123, "
            "rank 2: 99") in " ".join(warnings.split())
    assert text.format(123) not in warnings


def test_bandwidth_of_an_op_with_no_known_factor_claims_no_busbw(build_dir: Path, tmp_path: Path) -> None:
    """The report's bus factor is core's (one source with the rank-file writer): an op it does not
    know gets 0, no busbw claimed, where a second copy in the report used to claim algbw x 1."""
    d = copy_golden(tmp_path / "job")

    def rename(doc: dict) -> None:
        for c in doc["communicators"]:
            for r in c["recent"]:
                r["op"] = "Barrier"  # a spelling the writer never writes: read as "unknown"

    for f in sorted(d.glob("rank-*.json")):
        edit(f, rename)
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    (bw,) = s["bandwidth"]
    assert (bw["op"], bw["comm_size"], bw["collectives"]) == ("unknown", 3, 8)
    assert bw["waitfree_busbw_gbps"] == 0 and bw["recorded_busbw_gbps"] == 0


def test_missing_directory_is_unusable(build_dir: Path, tmp_path: Path) -> None:
    proc = run(build_dir, tmp_path / "nope")
    assert proc.returncode == 2
    assert f"{tmp_path / 'nope'}: no such directory" in proc.stderr
    assert proc.stdout == ""


def test_empty_directory_is_unusable(build_dir: Path, tmp_path: Path) -> None:
    proc = run(build_dir, tmp_path)
    assert proc.returncode == 2
    assert f"{tmp_path}: no rank files (rank-*.json) in this directory" in proc.stderr


def test_only_bad_files_is_unusable(build_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "rank-00000.json").write_text('{"schema": "traintime/1", "job_id"')
    proc = run(build_dir, tmp_path)
    assert proc.returncode == 2
    lines = problems_of(proc.stderr)
    assert any(str(tmp_path / "rank-00000.json") in line and "not valid JSON" in line for line in lines), lines
    assert "nothing usable" in proc.stderr


def test_truncated_invalid_wrong_schema_files_are_named_and_the_rest_reported(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "job")
    good = (d / "rank-00001.json").read_text()
    (d / "rank-00001.json").write_text(good[: len(good) // 2])  # truncated
    edit(d / "rank-00002.json", lambda j: j.update(schema="traintime/2"))  # unknown major schema
    (d / "rank-00003.json").write_text("not json at all")  # invalid
    (d / "rank-00004.json").write_text("")  # empty
    bad = json.loads((GOLDEN / "rank-00000.json").read_text())
    del bad["regions"][0]["cpu_ns"]  # wrong schema: a contract field missing
    bad["rank"] = 5
    (d / "rank-00005.json").write_text(json.dumps(bad))
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    lines = problems_of(proc.stderr)
    by_file = {Path(line.split(": ")[1]).name: line for line in lines}
    assert "not valid JSON (truncated or corrupt?): unreadable from byte" in by_file["rank-00001.json"]
    assert not any("json.exception" in line for line in lines), lines  # no parser internals
    assert 'unsupported schema "traintime/2"' in by_file["rank-00002.json"]
    assert "not valid JSON" in by_file["rank-00003.json"]
    assert "empty file" in by_file["rank-00004.json"]
    assert 'missing field "regions[0].cpu_ns"' in by_file["rank-00005.json"]
    assert len(lines) == 5, lines  # one line per problem
    assert s["ranks"] == 1 and s["missing_ranks"] == [1, 2]
    assert {Path(p["file"]).name for p in s["problems"]} == {f"rank-0000{i}.json" for i in range(1, 6)}
    text = run(build_dir, d).stdout
    assert "1 of 3 ranks merged; missing: rank(s) 1, 2" in " ".join(text.split())


def test_duplicate_ranks_mixed_jobs_and_aux_files(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "job")
    # A second file claiming rank 0 of the same job (e.g. copied in by hand).
    (d / "rank-00000.copy.json").write_text((GOLDEN / "rank-00000.json").read_text())
    # A file of another job.
    other = json.loads((GOLDEN / "rank-00001.json").read_text())
    other["job_id"] = "other-9"
    (d / "rank-00009.json").write_text(json.dumps(other))
    # An aux process (a DataLoader worker that inherited RANK=1).
    aux = json.loads((GOLDEN / "rank-00001.json").read_text())
    aux.update(role="aux", pid=4321)
    (d / "rank-00001.pid4321.json").write_text(json.dumps(aux))
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0
    assert s["ranks"] == 3 and s["job_id"] == "golden-1"
    msgs = {Path(p["file"]).name: p["problem"] for p in s["problems"]}
    assert "duplicate: rank 0 was already read from" in msgs["rank-00000.json"] or \
           "duplicate: rank 0 was already read from" in msgs["rank-00000.copy.json"]
    assert 'job "other-9", not the job reported ("golden-1"' in msgs["rank-00009.json"]
    assert "--job other-9" in msgs["rank-00009.json"]
    assert s["other_jobs"] == {"other-9": 1}
    assert len(s["aux_files"]) == 1 and "rank-00001.pid4321.json (role aux, rank 1, pid 4321" in s["aux_files"][0]
    # --job picks the other one; the golden files are then named as left out.
    s2, proc2 = summary(build_dir, d, "--job", "other-9")
    assert proc2.returncode == 0 and s2["ranks"] == 1 and s2["job_id"] == "other-9"
    assert s2["other_jobs"]["golden-1"] >= 3
    assert 'job "golden-1", not the job asked for (--job other-9)' in proc2.stderr
    # A job that is not there is nothing usable.
    assert run(build_dir, d, "--job", "nope").returncode == 2


def test_unknown_newer_fields_are_ignored(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "job")
    edit(d / "rank-00000.json", lambda j: j.update(future_field={"a": [1, 2]}, steps={**j["steps"], "new": 1}))
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0 and s["ranks"] == 3 and s["problems"] == [], proc.stderr


def test_files_with_and_without_module_counters_are_one_job(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "job")
    # Rank 0 from a writer with module sections, rank 1 from an older one (the goldens have none),
    # rank 2 with a counter that is not a count: refused, naming the field.
    edit(d / "rank-00000.json", lambda j: j.update(modules={
        "nvtx": {"counters": {"untracked_ranges": 44}}, "nccl": {"counters": {"missing_real": 0}},
        "nvml": {}}))
    edit(d / "rank-00002.json", lambda j: j.update(modules={"nvtx": {"counters": {"untracked_ranges": "44"}}}))
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    assert s["ranks"] == 2, s["problems"]
    (p,) = s["problems"]
    assert p["file"].endswith("rank-00002.json") and "modules.nvtx.counters.untracked_ranges" in p["problem"], p


def test_ten_thousand_files_one_huge(build_dir: Path, tmp_path: Path) -> None:
    d = tmp_path / "big"
    d.mkdir()
    # 9999 small valid rank files of one job (world size 10000) and one file of 300 MiB (sparse).
    base = json.loads((GOLDEN / "rank-00000.json").read_text())
    base.update(world_size=10000, regions=base["regions"][:1])
    base["steps"]["detail"] = []
    base["communicators"] = []
    for r in range(9999):
        base["rank"] = r
        (d / f"rank-{r:05d}.json").write_text(json.dumps(base))
    huge = d / "rank-09999.json"
    with open(huge, "wb") as f:
        f.truncate(300 << 20)
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    assert s["ranks"] == 9999 and s["missing_ranks"] == [9999]
    (p,) = s["problems"]
    assert p["file"] == str(huge) and "300.0 MiB, larger than a rank file can be" in p["problem"]


# ---- hangs ---------------------------------------------------------------------------------

def make_hang(d: Path) -> None:
    """Ranks 0 and 1 entered AllReduce seq 9 and wait in it; rank 2 stopped at seq 8, inside
    step/data_loader in step 4 (the snapshot files of a hung job)."""
    def waiting(j: dict) -> None:
        c = j["communicators"][0]
        c.update(ops_enqueued=9, ops_completed=8, in_flight=[{"seq": 9, "op": "AllReduce", "bytes": MiB}])
        j.update(snapshot=True, exit_reason="snapshot",
                 threads=[{"tid": 1000 + j["rank"], "step": 4, "open_regions": ["step", "step/backward"]}])
    edit(d / "rank-00000.json", waiting)
    edit(d / "rank-00001.json", waiting)
    edit(d / "rank-00002.json", lambda j: j.update(
        snapshot=True, exit_reason="snapshot",
        threads=[{"tid": 4242, "step": 4, "open_regions": ["step", "step/data_loader"]},
                 {"tid": 4243, "step": 4, "open_regions": []}]))


def test_hang_names_the_missing_rank_op_seq_and_what_it_was_doing(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "hung")
    make_hang(d)
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0
    assert s["hang_data"] is True
    (h,) = s["hangs"]
    assert (h["communicator"], h["op"], h["seq"], h["bytes"]) == ("00000000000000aa", "AllReduce", 9, MiB)
    assert h["missing_ranks"] == [2] and h["waiting_ranks"] == [0, 1] and h["from_snapshots"] is True
    (mm,) = h["missing"]
    assert (mm["rank"], mm["last_seq"], mm["last_op"]) == (2, 8, "AllReduce")
    assert "thread 4242 in step 4 inside step/data_loader" in mm["doing"]
    assert "thread 4243 in step 4, no region open" in mm["doing"]
    text = " ".join(run(build_dir, d).stdout.split())
    assert "rank(s) 2 never entered AllReduce seq 9 (1.0 MiB), which rank(s) 0, 1 wait in" in text
    assert run(build_dir, d, "--fail-if", "hangs>0").returncode == 1


def test_hang_with_a_rank_file_missing(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "hung")
    make_hang(d)
    (d / "rank-00002.json").unlink()
    s, _ = summary(build_dir, d)
    (h,) = s["hangs"]
    # The communicator spans the world and every file's communicator rank is its rank, so the
    # member without a file is rank 2.
    assert h["missing_ranks"] == [2] and h["missing"][0]["has_file"] is False
    assert "no rank file" in h["missing"][0]["doing"]


def test_a_wait_in_send_names_no_missing_rank(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "p2p")
    make_hang(d)
    for r in (0, 1):
        edit(d / f"rank-0000{r}.json", lambda j: j["communicators"][0]["in_flight"][0].update(op="Send"))
    s, _ = summary(build_dir, d)
    assert s["hangs"] == []
    assert s["p2p_waits"] == ["rank(s) 0, 1 wait in Send seq 9 on communicator 00000000000000aa; "
                              "its peer is not recorded in the rank files"]


def test_no_hang_when_every_rank_entered(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "busy")
    for r in range(3):
        edit(d / f"rank-0000{r}.json", lambda j: j["communicators"][0].update(
            ops_enqueued=9, ops_completed=8, in_flight=[{"seq": 9, "op": "AllReduce", "bytes": MiB}]))
    s, _ = summary(build_dir, d)
    assert s["hang_data"] is True and s["hangs"] == []
    assert "none found" in run(build_dir, d).stdout


# ---- gate and compare ----------------------------------------------------------------------

@pytest.mark.parametrize("expr, code", [
    ("exposed_comm_pct>13.9", 1), ("exposed_comm_pct>14", 0),  # 13.978%
    ("step_time_p50>=15", 1), ("step_time_p50>15ms", 0), ("step_time_p50<0.016s", 1),  # 15 ms
    ("stragglers>0", 1), ("stragglers==0", 0), ("hangs>0", 0),
    ("idle_pct>50, stragglers>0", 1), ("idle_pct>50 || hangs>0", 0),
])
def test_fail_if_exit_codes(build_dir: Path, expr: str, code: int) -> None:
    proc = run(build_dir, GOLDEN, "--fail-if", expr)
    assert proc.returncode == code, proc.stderr
    if code == 1:
        assert "--fail-if: " in proc.stderr


@pytest.mark.parametrize("expr, message", [
    ("exposed_comm>20", 'unknown metric "exposed_comm"'),
    ("exposed_comm_pct 20", "expected one of > >= < <= == !="),
    ("exposed_comm_pct>", "expected a value"),
    ("exposed_comm_pct>abc", '"abc" is not a number'),
    ("stragglers>2ms", "a time unit on stragglers"),
    ("step_time_p50>5%", "needs a sign"),
    ("step_time_p50>5 parsecs", 'unknown unit "parsecs"'),
    ("step_time_p50>+5%", "give --compare DIR"),
    ("", "empty condition"),
])
def test_malformed_fail_if_is_a_usage_error(build_dir: Path, expr: str, message: str) -> None:
    proc = run(build_dir, GOLDEN, "--fail-if", expr)
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stdout == ""
    assert len(problems_of(proc.stderr)) == 1


def test_compare_and_relative_gate(build_dir: Path, tmp_path: Path) -> None:
    # The new run: rank 2's forward region takes 8 ms more over the 4 steps (2 ms/step), and every
    # step of every rank has 1.5 ms more GPU idle: GPU step spans 16.5 x8 and 18 x4, so the step
    # time p50 goes 15 -> 16.5 ms (+10%). The CPU wall grows by 5 ms and must not count.
    d = copy_golden(tmp_path / "new")
    for r in range(3):
        def slower(j: dict) -> None:
            for row in j["steps"]["detail"]:
                row["totals"]["idle_ns"] += 1500_000
                row["wall_ns"] += 5 * MS
            j["steps"]["totals"]["idle_ns"] += 4 * 1500_000
            if j["rank"] == 2:
                j["regions"][0]["gpu_busy_ns"] += 8 * MS
        edit(d / f"rank-0000{r}.json", slower)
    s, proc = summary(build_dir, d, "--compare", GOLDEN)
    assert proc.returncode == 0
    m = {x["metric"]: x for x in s["compare"]["metrics"]}
    assert m["step_time_p50"]["value"] == 16.5 and m["step_time_p50"]["baseline"] == 15.0
    assert m["step_time_p50"]["change_pct"] == approx(10.0)
    # The step time's own spread, (p90 - p50) / p50: (16.5-15)/15 = 10% (baseline), (18-16.5)/16.5
    # (new); the larger is 10%, and a 10% change is not larger than that.
    assert m["step_time_p50"]["spread_pct"] == approx(10.0)
    assert m["step_time_p50"]["beyond_spread"] is False
    # Exposed comm has its own spread: per step 20% on ranks 0 and 1 (3 of 15 ms), 3.0% on rank 2,
    # so p50 = p90 = 20% and the spread is 0 in the baseline (18.2% both in the new run): its
    # change, 13.978% -> 26/204 = 12.745% of the span, is beyond it. Judged by the step time's 10%
    # spread it would not be.
    assert m["exposed_comm_pct"]["baseline"] == approx(EXPOSED_PCT)
    assert m["exposed_comm_pct"]["value"] == approx(26 / 204 * 100)
    assert m["exposed_comm_pct"]["spread_pct"] == approx(0.0) and m["exposed_comm_pct"]["beyond_spread"] is True
    assert m["stragglers"]["beyond_spread"] is None and m["stragglers"]["spread_pct"] is None
    moved = s["compare"]["moved_most_region"]
    assert moved["name"] == "step/forward"
    # Mean over ranks of step/forward: baseline (4+4+5.5)/3, new (4+4+7.5)/3.
    assert moved["ms_per_step"] == approx(15.5 / 3) and moved["baseline_ms_per_step"] == approx(13.5 / 3)
    out = run(build_dir, d, "--compare", GOLDEN).stdout
    text = " ".join(out.split())
    assert "region that moved most: step/forward" in text
    assert "changed beyond their own step-to-step spread: exposed_comm_pct" in text
    cmp = text_table(out[out.index("Step time ("):], "Compared with")  # the table, not the diagnosis section
    # Values as people read them: a count as an integer, a percentage with one decimal, a time in ms.
    assert cmp["ranks"][1:4] == ["3", "3", "0"], cmp["ranks"]
    assert cmp["exposed_comm_pct"][1:3] == [f"{26 / 204 * 100:.1f}%", f"{EXPOSED_PCT:.1f}%"]
    assert cmp["step_time_p50"][1:4] == ["16.500 ms", "15.000 ms", "+1.500 ms"]
    assert run(build_dir, d, "--compare", GOLDEN, "--fail-if", "step_time_p50>+5%").returncode == 1
    assert run(build_dir, d, "--compare", GOLDEN, "--fail-if", "step_time_p50>+15%").returncode == 0
    assert run(build_dir, d, "--compare", GOLDEN, "--fail-if", "step_time_p50>+1ms").returncode == 1
    assert run(build_dir, d, "--compare", GOLDEN, "--fail-if", "samples_per_s<-1%").returncode == 0
    gate = run(build_dir, d, "--compare", GOLDEN, "--fail-if", "step_time_p50>+5%").stderr
    assert "step_time_p50 changed by +10.0% (15.000 ms -> 16.500 ms) > +5%" in gate, gate
    assert run(build_dir, d, "--compare", tmp_path / "missing").returncode == 2


# ---- trace export --------------------------------------------------------------------------

def test_trace_export(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "traced")
    columns = ["start_ns", "end_ns", "device", "stream", "category", "path", "step", "kind", "name", "bytes",
               "correlation_id", "copy_kind", "comm_op"]
    t0 = 1_700_000_000_000_000_000
    dump = {
        "format": "traintime-trace/1", "events_kept": 4, "events_dropped": 0, "truncated": False, "late_records": 0,
        "categories": ["forward", "backward", "optimizer", "comm", "io", "other", "unattributed"],
        "kinds": ["kernel", "memcpy", "memset"], "copy_kinds": ["none", "HtoD", "DtoH", "DtoD", "PtoP", "Other"],
        "comm_ops": ["none", "AllReduce"], "names": ["", "(other kernels)", "gemm<\"x\">", "_Z15gelu_bwd_kernelPKfS0_Pfi"],
        "paths": {"1": "step/forward", "2": "step/backward"}, "columns": columns,
        "events": [[t0 + 1000, t0 + 3000, 0, 7, 0, 1, 0, 0, 2, 0, 11, 0, 0],
                   [t0 + 4000, t0 + 9000, 0, 7, 1, 2, 0, 0, 2, 0, 12, 0, 0],
                   [t0 + 9000, t0 + 9500, 0, 7, 1, 2, 0, 0, 3, 0, 14, 0, 0],
                   [t0 + 5000, t0 + 6000, 0, 13, 4, 1, 1, 1, 0, 4096, 13, 1, 0]],
    }
    (d / "rank-00001.trace.json").write_text(json.dumps(dump))
    out = tmp_path / "trace.json"
    proc = run(build_dir, d, "--trace", out)
    assert proc.returncode == 0, proc.stderr
    assert "trace of 1 rank(s) written to" in proc.stderr
    trace = json.loads(out.read_text())
    assert "NOT aligned" in trace["metadata"]["clock"] and trace["metadata"]["origin_ns"] == t0 + 1000
    ev = trace["traceEvents"]
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] in ("process_name", "thread_name")}
    assert {"rank 1 (node-1)", "GPU 0 stream 7", "GPU 0 stream 13", "region step/forward",
            "region step/backward", "steps (GPU span)"} <= names
    x = [e for e in ev if e["ph"] == "X"]
    assert all(e["pid"] == 1 for e in x)
    kernels = [e for e in x if e["name"] == 'gemm<"x">']
    assert [(e["ts"], e["dur"], e["cat"]) for e in kernels] == [(0.0, 2.0, "forward"), (3.0, 5.0, "backward")]
    (copy,) = [e for e in x if e["name"] == "memcpy HtoD"]
    assert (copy["ts"], copy["dur"], copy["args"]["bytes"], copy["args"]["step"]) == (4.0, 1.0, 4096, 1)
    # Mangled kernel names are shown demangled.
    (gelu,) = [e for e in x if e["name"] == "gelu_bwd_kernel(float const*, float const*, float*, int)"]
    assert (gelu["ts"], gelu["dur"]) == (8.0, 0.5)
    # Step 0 spans the events of step 0: [t0+1000, t0+9500] -> ts 0, dur 8.5 us.
    (step0,) = [e for e in x if e["name"] == "step 0"]
    assert (step0["ts"], step0["dur"]) == (0.0, 8.5)
    # Without any trace dump: one clear line, and the report itself still succeeds.
    proc = run(build_dir, GOLDEN, "--trace", tmp_path / "none.json")
    assert proc.returncode == 0 and "no merged rank has a timeline" in proc.stderr


def test_docs_list_every_fail_if_metric_and_summary_field(build_dir: Path) -> None:
    """docs/report.md is the contract: every metric the tool accepts and every top-level field
    of the JSON summary is documented there."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "report.md").read_text()
    proc = run(build_dir, GOLDEN, "--fail-if", "no_such_metric>1")
    known = re.search(r"\(known: ([^)]*)\)", proc.stderr)
    assert known, proc.stderr
    metrics = known.group(1).split(", ")
    assert len(metrics) >= 15
    for m in metrics:
        assert f"| `{m}` |" in doc, f"metric {m} is not in the --fail-if table of docs/report.md"
    s, _ = summary(build_dir, GOLDEN, "--fail-if", "ranks<1")
    for key in s:
        assert f"`{key}`" in doc or f"`{key}[]`" in doc, f"summary field {key} is not in docs/report.md"
    assert set(s["metrics"]) == set(metrics)


def test_module_figures_only_for_a_module_whose_data_a_file_holds(build_dir: Path, tmp_path: Path) -> None:
    """A module's report-half figures (the template module null's here) are in the JSON metrics,
    modules.<module>.figures, the module table and --compare only when a rank file holds the
    module's data section; without it the gate still takes their names, as n/a."""
    s, proc = summary(build_dir, GOLDEN)
    assert proc.returncode == 0, proc.stderr
    assert not [m for m in s["metrics"] if m.startswith("null_")]
    assert "null" not in s.get("modules", {})
    assert "Module null" not in run(build_dir, GOLDEN).stdout
    proc = run(build_dir, GOLDEN, "--fail-if", "null_largest_call_bytes>1")
    assert proc.returncode == 1 and "cannot be judged, no rank file holds its module's part" in proc.stderr
    d = copy_golden(tmp_path / "null")
    edit(d / "rank-00001.json", lambda doc: doc.update(null={"largest_call_bytes": 4096}))
    s, proc = summary(build_dir, d, "--compare", GOLDEN)
    assert proc.returncode == 0, proc.stderr
    assert (s["metrics"]["null_largest_call_bytes"], s["metrics"]["null_largest_call_rank"]) == (4096, 1)
    assert s["modules"]["null"]["figures"] == {"largest_call_bytes": 4096, "largest_call_rank": 1}
    (row,) = [m for m in s["compare"]["metrics"] if m["metric"] == "null_largest_call_bytes"]
    assert (row["value"], row["baseline"]) == (4096, None)
    assert "Module null" in run(build_dir, d).stdout
    assert run(build_dir, d, "--fail-if", "null_largest_call_bytes>1000").returncode == 1
    assert run(build_dir, d, "--fail-if", "null_largest_call_bytes>5000").returncode == 0


def test_tflops_and_mfu_per_rank_and_for_the_job(build_dir: Path, tmp_path: Path) -> None:
    """Ranks 0 and 1 know their FLOPs and peak (an H100 SXM, 989.5 TFLOP/s bf16), rank 2 its
    FLOPs only: the job's MFU counts the ranks with a peak, TFLOP/s every rank with FLOPs."""
    d = copy_golden(tmp_path / "run")
    known = {0: (400.0, 989.5), 1: (300.0, 989.5), 2: (200.0, 0.0)}
    for rank, (tflops, peak) in known.items():
        def change(doc: dict, tflops: float = tflops, peak: float = peak) -> None:
            doc["steps"].update({"flops_per_step": tflops * 1e12 * 0.008, "tflops": tflops})
            if peak:
                doc["steps"]["mfu"] = tflops / peak
                doc["device"] = {"name": "NVIDIA H100 80GB HBM3", "peak_tflops": peak,
                                 "peak_source": "table: H100 SXM, bf16"}
        edit(d / f"rank-{rank:05d}.json", change)
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    tp = s["throughput"]
    assert tp["tflops"] == approx(900.0) and tp["ranks_with_flops"] == 3
    assert tp["mfu"] == approx(700.0 / (2 * 989.5)) and tp["ranks_with_mfu"] == 2
    assert tp["peak_sources"] == "table: H100 SXM, bf16"
    ranks = {r["rank"]: r for r in s["per_rank"]}
    assert ranks[0]["tflops"] == 400.0 and ranks[0]["mfu"] == approx(400.0 / 989.5)
    assert ranks[2]["mfu"] == 0 and ranks[0]["device"] == "NVIDIA H100 80GB HBM3"
    assert s["metrics"]["mfu_pct"] == approx(100 * 700.0 / (2 * 989.5))
    assert s["metrics"]["tflops"] == approx(900.0)

    text = run(build_dir, d).stdout
    tput = text_table(text, "Throughput")
    assert tput["TFLOP/s"][1:3] == ["900.0", "3"], tput
    assert tput["MFU %"][1:3] == [f"{100 * 700.0 / (2 * 989.5):.1f}", "2"], tput
    per_rank = text_table(text, "Per rank")
    assert per_rank["0"][-3:-1] == ["400.0", f"{100 * 400.0 / 989.5:.1f}"], per_rank
    assert per_rank["2"][-3:-1] == ["200.0", "-"], per_rank
    # The gate reads them too.
    assert run(build_dir, d, "--fail-if", "mfu_pct<40").returncode == 1
    assert run(build_dir, d, "--fail-if", "mfu_pct<30").returncode == 0
    # Rank 2 has FLOPs but no peak: its MFU is '-', and the table says why.
    assert "MFU '-': 1 rank(s) on an unrecorded device: the GPU's peak TFLOP/s is not known" in " ".join(text.split())
    assert "set TRAINTIME_PEAK_TFLOPS" in text


# ---- what a person reads first -------------------------------------------------------------

def test_cpu_only_run_leads_with_cpu_time_and_hides_what_it_cannot_know(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "cpu")
    cpu_only(d)
    proc = run(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    flat = " ".join(out.split())
    # One step time: the CPU wall (15 16 16 16 16 16 16 16 17 17 18 20 ms), said with its source.
    assert ("step time p50 16.000 ms (p90 18.000 ms) over 12 (rank, step) values after warm-up, measured as the "
            "CPU wall time" in flat)
    steps = text_table(out, "Step time (CPU wall)")
    assert list(steps) == ["step time (CPU wall)"], steps  # no GPU rows of zeros
    assert steps["step time (CPU wall)"][1:] == ["12", f3(WALL_MEAN), f3(WALL_P50), f3(WALL_P90), f3(WALL_MAX)]
    # One line says why the GPU figures are missing; no zero GPU tables, no dangling reference.
    assert ("no GPU time on any rank (gpu_capture none (TRAINTIME_CUPTI=0): 3 rank(s)): the report shows CPU time "
            "per region and step; GPU tables, shares and charts are left out") in flat
    for gone in ("GPU busy per category", "self GPU busy", "Wait-free bus bandwidth", "Top kernels", '"Input"',
                 "exposed comm 0.0%"):
        assert gone not in out, gone
    assert ("not measured: stragglers are found from the durations of collectives lined up across ranks and from "
            "GPU compute, and no rank has GPU time or a collective traintime.torch timed on the CPU") in flat
    assert "no GPU activity record dropped" not in flat
    # step/backward's CPU time: 24, 24 and 32 ms over 4 steps on ranks 0, 1, 2 = 6, 6, 8 ms/step.
    regions = text_table(out, "Regions: CPU wall time")
    assert regions["step/backward"][2:8] == ["3", f3(20 / 3), f3(6), f3(8), "2", f"{2 / (20 / 3) * 100:.1f}"]
    assert list(regions)[0] == "step/backward"  # the most CPU time first
    assert (f"step/backward: {f3(20 / 3)} ms/step CPU wall, inclusive ({20 / 3 / 16 * 100:.1f}% of the median step); "
            f"highest on rank 2: 8.000 ms") in flat
    assert out.index("Where the step time goes (CPU)") < out.index("Regions: CPU wall time")
    ranks = text_table(out, "Per rank")
    assert ranks["0"][1:] == ["node-0", "4", f3(16.0), "exit"], ranks["0"]  # walls 15 16 17 20: the 2nd of 4
    html = run(build_dir, d, "--format", "html").stdout
    assert "the charts of GPU time (bus bandwidth, GPU breakdown) are left out" in html
    # The per-rank chart is of CPU time by region; no bandwidth or GPU breakdown chart.
    assert "CPU time per step by rank: its top-level regions" in html and 'id="chart-steps"' in html
    assert 'id="chart-bandwidth"' not in html and "GPU time per step by rank" not in html


def test_report_finds_the_job_folder_below_and_takes_a_rank_file(build_dir: Path, tmp_path: Path) -> None:
    top = tmp_path / "traintime-out"
    copy_golden(top / "demo")
    proc = run(build_dir, top)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert f"from {top / 'demo'}" in " ".join(proc.stdout.split()[:20])
    proc = run(build_dir, top / "demo" / "rank-00001.json")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "3 of 3 ranks merged" in " ".join(proc.stdout.split())
    # Two job folders: both listed, and how to pick one, on one line.
    copy_golden(top / "other")
    proc = run(build_dir, top)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = problems_of(proc.stderr)
    assert len(lines) == 1, lines
    assert (f"no rank files here, but 2 folders below it have some: {top / 'demo'}, {top / 'other'}; give one of "
            f"them, e.g. traintime-report {top / 'demo'}") in lines[0]
    # Nothing anywhere: one line, not two.
    empty = tmp_path / "empty"
    empty.mkdir()
    lines = problems_of(run(build_dir, empty).stderr)
    assert len(lines) == 1 and lines[0].startswith(
        f"traintime-report: {empty}: no rank files (rank-*.json) in this directory or below it: "), lines


def test_a_rank_that_stopped_early_is_named_with_the_step_it_reached(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "killed")
    # Rank 1's newest file is a periodic snapshot from step 2 (it was SIGKILLed after it); ranks 0
    # and 2 finished their 4 steps.
    edit(d / "rank-00001.json", lambda j: j.update(snapshot=True, exit_reason="snapshot",
                                                   steps={**j["steps"], "count": 2}))
    s, _ = summary(build_dir, d)
    assert s["stopped_ranks"] == [{"rank": 1, "host": "node-1", "state": "killed", "how": "killed", "steps": 2,
                                   "evidence": "its newest file is a periodic snapshot and every other rank has ended",
                                   "finished_ranks_steps": 4}], s["stopped_ranks"]
    assert s["running_ranks"] == []
    flat = " ".join(run(build_dir, d).stdout.split())
    assert ("rank 1 (host node-1) killed at step 2 (the other ranks reached up to step 4): its newest file is "
            "a periodic snapshot and every other rank has ended") in flat
    # The headline: before anything else in the diagnosis.
    assert flat.index("DIAGNOSIS Ranks that died:") < flat.index("Run:") < flat.index("Hangs:")


def test_device_simulated_top_kernels_and_no_empty_rates(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "sim")
    kernels = {0: [{"name": "gemm", "count": 8, "gpu_sum_ns": 12 * MS}],
               1: [{"name": "gemm", "count": 8, "gpu_sum_ns": 8 * MS}, {"name": "gelu", "count": 4, "gpu_sum_ns": 2 * MS}],
               2: []}
    for r in range(3):
        def change(j: dict, r: int = r) -> None:
            j["device"] = {"name": "simgpu (SIMULATED GPU)", "peak_tflops": 0, "peak_source": ""}
            j["regions"][0]["top_kernels"] = kernels[r]
            j["steps"].update(tokens=0, tokens_per_s=0)
        edit(d / f"rank-0000{r}.json", change)
    out = run(build_dir, d).stdout
    flat = " ".join(out.split())
    assert "-- SIMULATED GPU (simgpu)" in flat.split("DIAGNOSIS")[0]  # in the heading
    assert ("device simgpu (SIMULATED GPU): 3 rank(s) -- SIMULATED: every GPU number here comes from simgpu, not from "
            "hardware") in flat
    # gemm: 20 ms over both ranks, 3 + 2 ms/step, mean 2.5; gelu: 2 ms on rank 1, 0.5 ms/step.
    top = {row[-1]: row[:-1] for row in text_table(out, "Top kernels").values()}  # keyed by the kernel column
    assert top["gemm"] == [f3(20), f3(2.5), "16", "2"] and top["gelu"] == [f3(2), f3(0.5), "4", "1"], top
    assert list(top) == ["gemm", "gelu"]
    tput = text_table(out, "Throughput")
    assert "tokens/s" not in tput and "samples/s" in tput  # no "tokens/s 0.0" without tokens
    html = run(build_dir, d, "--format", "html").stdout
    assert 'id="simulated"' in html and "Every GPU number on this page is simulated" in html


def test_watch_exits_when_every_rank_wrote_its_final_file(build_dir: Path) -> None:
    """`--watch SECONDS` on a finished job: one screen, then it says the job ended and exits 0."""
    p = run(build_dir, GOLDEN, "--watch", "0.2")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("traintime-report --watch") == 1, p.stdout
    assert "every rank wrote its final file: the job ended" in p.stdout
    assert "job golden-1: 3 of 3 ranks (0 running, 0 died, 3 finished)" in p.stdout
    assert "step reached: 4 on every rank" in p.stdout
    assert "Stragglers" in p.stdout and "rank 2" in p.stdout


def test_watch_once_prints_one_screen_and_refuses_other_outputs(build_dir: Path) -> None:
    p = run(build_dir, GOLDEN, "--watch", "--once")
    assert p.returncode == 0 and p.stdout.count("traintime-report --watch") == 1, p.stderr
    assert "ended" not in p.stdout and "q or Ctrl-C" not in p.stdout
    assert "exposed comm p50: " in p.stdout and "slowest: rank 2 16.500 ms" in p.stdout
    bad = run(build_dir, GOLDEN, "--watch", "--once", "--format", "json")
    assert bad.returncode == 2 and "--watch draws one text screen" in bad.stderr
    assert run(build_dir, GOLDEN, "--once").returncode == 2


# ---- activation checkpointing: recompute and HFU -------------------------------------------

def add_recompute(d: Path) -> None:
    """Rank 0 checkpoints: 2 ms/step of its 10 ms compute is recompute (8 ms over its 4 steps,
    against 16 ms of forward), its file has MFU 0.4 and HFU 0.4 x (1 + 8/16) = 0.6. Rank 1 knows
    its MFU (0.3) but recomputes nothing, so it has no HFU; rank 2 has no FLOPs."""
    def rank0(doc: dict) -> None:
        doc["categories"]["recompute"] = {"count": 4, "gpu_busy_ns": 8 * MS, "gpu_sum_ns": 8 * MS}
        for row in doc["steps"]["detail"]:
            row["busy_ns_by_category"]["recompute"] = 2 * MS  # what the step table reads, per (rank, step)
        doc["steps"].update({"flops_per_step": 1e12, "tflops": 0.4 * 989.5, "mfu": 0.4, "hfu": 0.6})
        doc["device"] = {"name": "NVIDIA H100 80GB HBM3", "peak_tflops": 989.5, "peak_source": "table: H100 SXM, bf16"}

    def rank1(doc: dict) -> None:
        doc["steps"].update({"flops_per_step": 1e12, "tflops": 0.3 * 989.5, "mfu": 0.3})
        doc["device"] = {"name": "NVIDIA H100 80GB HBM3", "peak_tflops": 989.5, "peak_source": "table: H100 SXM, bf16"}
    edit(d / "rank-00000.json", rank0)
    edit(d / "rank-00001.json", rank1)


def test_recompute_is_its_own_column_and_series_and_hfu_stands_beside_mfu(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "ckpt")
    add_recompute(d)
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    tp = s["throughput"]
    # MFU is the model's FLOPs only, whatever the recompute: (0.4 + 0.3) peaks over 2 peaks.
    assert tp["mfu"] == approx(0.35) and tp["ranks_with_mfu"] == 2
    # HFU over the ranks that have one: rank 0 alone.
    assert tp["hfu"] == approx(0.6) and tp["ranks_with_hfu"] == 1
    ranks = {r["rank"]: r for r in s["per_rank"]}
    assert ranks[0]["mfu"] == approx(0.4) and ranks[0]["hfu"] == approx(0.6)
    assert ranks[1]["mfu"] == approx(0.3) and ranks[1]["hfu"] is None  # no recompute: not MFU's copy
    assert ranks[2]["hfu"] is None
    assert ranks[0]["per_step_ms"]["recompute"] == approx(2.0)
    assert ranks[0]["per_step_ms"]["compute"] == approx(10.0)  # recompute is part of compute
    assert ranks[1]["per_step_ms"]["recompute"] == 0
    cats = {c["category"]: c for c in s["categories"]}
    assert cats["recompute"]["gpu_busy_ms_per_step"]["max"] == approx(2.0)
    assert cats["forward"]["gpu_busy_ms_per_step"]["mean"] == approx(FWD_MEAN)  # not folded into forward

    text = run(build_dir, d).stdout
    per_rank = text_table(text, "Per rank")
    # rank host steps p50 compute recomp ...: rank 0 2 ms of its 10 ms compute.
    assert per_rank["0"][4:6] == [f3(10.0), f3(2.0)], per_rank
    assert per_rank["1"][5] == f3(0.0), per_rank
    assert per_rank["0"][-3:-1] == [f"{0.4 * 989.5:.1f}", "40.0"], per_rank
    assert per_rank["1"][-3:-1] == [f"{0.3 * 989.5:.1f}", "30.0"], per_rank
    # Every column at once (recompute, TFLOP/s, MFU) still fits the text format's 100 columns.
    assert max(len(line) for line in text.splitlines()) <= 100
    tput = text_table(text, "Throughput")
    assert tput["MFU %"][1:3] == ["35.0", "2"], tput
    assert tput["HFU %"][1:3] == ["60.0", "1"], tput
    assert "recompute / forward GPU busy time" in " ".join(text.split())
    assert s["metrics"]["hfu_pct"] == approx(60.0) and s["metrics"]["mfu_pct"] == approx(35.0)
    assert run(build_dir, d, "--fail-if", "hfu_pct<61").returncode == 1
    assert run(build_dir, d, "--fail-if", "hfu_pct<59").returncode == 0
    assert text_table(text, "GPU busy per category")["recompute"][1] == f3(2.0 / 3)
    # The step table: one recompute row over every (rank, step) row, 2 ms on rank 0's, none on the
    # others': mean 2/3 ms, p50 0, max 2 ms; its n is compute's.
    steps = text_table(text, "Step time")
    assert steps["recompute"][1:] == [steps["compute"][1], f3(2.0 / 3), f3(0.0), f3(2.0), f3(2.0)], steps
    assert s["breakdown_ms"]["recompute"]["max"] == approx(2.0)
    assert s["breakdown_ms"]["recompute"]["mean"] == approx(2.0 / 3)
    assert "Recompute (activation checkpointing) is part of compute." in " ".join(text.split())

    page = tmp_path / "report.html"
    assert run(build_dir, d, "--format", "html", "-o", page).returncode == 0
    chart = re.search(r'<figure id="chart-breakdown">.*?</figure>', page.read_text(), re.S)
    assert chart, "no breakdown chart"
    # Its own stacked series, taken out of compute: rank 0 8 ms compute without recompute + 2 ms.
    assert "<title>0 recompute: 2 ms per step</title>" in chart.group(0)
    assert "<title>0 compute without recompute: 8 ms per step</title>" in chart.group(0)
    assert "<title>1 recompute: 0 ms per step</title>" in chart.group(0)


def test_without_recompute_hfu_is_absent_and_no_recompute_column(build_dir: Path, tmp_path: Path) -> None:
    """The golden files predate recompute and HFU (no categories.recompute, no steps.hfu): they
    load, and the report claims no HFU and adds no recompute row, column or series."""
    d = copy_golden(tmp_path / "old")
    for rank in (0, 1):
        edit(d / f"rank-0000{rank}.json", lambda doc: (doc["steps"].update(
            {"flops_per_step": 1e12, "tflops": 0.3 * 989.5, "mfu": 0.3}), doc.update(
            device={"name": "NVIDIA H100 80GB HBM3", "peak_tflops": 989.5, "peak_source": "table: H100 SXM, bf16"})))
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    assert s["throughput"]["mfu"] == approx(0.3)
    assert s["throughput"]["hfu"] is None and s["throughput"]["ranks_with_hfu"] == 0
    assert all(r["hfu"] is None for r in s["per_rank"])
    assert all(r["per_step_ms"]["recompute"] == 0 for r in s["per_rank"])
    assert s["metrics"]["hfu_pct"] is None and s["metrics"]["mfu_pct"] == approx(30.0)
    text = run(build_dir, d).stdout
    assert "HFU" not in text
    lines = text.splitlines()
    header = lines[next(i for i, line in enumerate(lines) if line.startswith("Per rank")) + 1]
    assert "compute" in header and "recomp" not in header, header
    assert "recompute" not in text_table(text, "Step time")
    assert s["breakdown_ms"]["recompute"]["max"] == 0
    page = tmp_path / "report.html"
    assert run(build_dir, d, "--format", "html", "-o", page).returncode == 0
    chart = re.search(r'<figure id="chart-breakdown">.*?</figure>', page.read_text(), re.S)
    assert chart and "recompute" not in chart.group(0)


# ---- a straggler's GPU throttled in some steps (steps.detail[].gpu_health) -----------------
# The golden job with NVML's figures added: every rank's run median SM clock 1410 MHz (1.41 GHz;
# rank 2's 1200 MHz in the slower-clock case, below 0.97 x 1410), and a sample in each of the
# 4 steps of every rank. A step is throttled when a device reported a clock-event reason other
# than gpu_idle in it: rank 2's steps 1 (gpu_idle + hw_thermal_slowdown) and 3 (sw_power_cap);
# steps 0 and 2 report only gpu_idle, ranks 0 and 1 nothing. Rank 2 stays the straggler: its
# collective durations (the waits it causes) are untouched.
# Its throttled steps keep the golden 16.5 ms GPU span (15.5 busy + 1 idle, 0.5 exposed comm);
# in "intermittent" its unthrottled steps 0 and 2 are made rank 0's (15 ms span, 3 ms exposed
# comm: 12 ms outside it), in "slow throughout" they keep the golden 16.5 ms (0.5 exposed: 16).
# The others' time outside exposed comm: step p50 15 - exposed comm 3 = 12 ms (ranks 0 and 1).
THROTTLED = {1: ["gpu_idle", "hw_thermal_slowdown"], 3: ["sw_power_cap"]}
THROTTLE_REASONS = ["sw_power_cap", "hw_thermal_slowdown"]  # NVML's bit order: 0x4, 0x40
THROTTLE_LINE = ("rank 2's GPU reported clock-event reasons sw_power_cap, hw_thermal_slowdown in 2 of 4 sampled "
                 "steps; those steps took 16.50 ms on average against {other} ms for its other steps")


def health_figures(clock: float, reasons: list[str], step: bool) -> dict:
    f = {"samples": 3, "sm_clock_mhz": {"median": clock, "min": int(clock)}, "power_w": {"median": 400.0},
         "temperature_c": {"max": 70}, "clock_event_reasons": reasons}
    if not step:
        f.update(mem_clock_mhz={"median": 2619.0}, power_w={"median": 400.0, "limit": 700.0},
                 pcie={"gen": 5, "width": 16}, memory={"used_bytes_max": 1 << 30, "total_bytes": 80 << 30})
    return f


def add_health(d: Path, rank: int, clock: float, step_reasons: dict[int, list[str]], per_step: bool = True) -> None:
    names = ["gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
             "sw_thermal_slowdown", "hw_thermal_slowdown"]
    seen = {r for rs in step_reasons.values() for r in rs}
    run_reasons = [n for n in names if n in seen]

    def change(j: dict) -> None:
        j["gpu_health"] = {"status": "sampled", "interval_ms": 10, "devices": [
            {"cuda_device": 0, "pci_bus_id": f"0000:{rank:02X}:00.0", "mig": False,
             "run": health_figures(clock, run_reasons, False), "steps": []}]}
        if per_step:
            for row in j["steps"]["detail"]:
                row["gpu_health"] = [dict(health_figures(clock, step_reasons.get(row["index"], []), True),
                                          cuda_device=0)]
    edit(d / f"rank-0000{rank}.json", change)


def throttled_job(tmp_path: Path, name: str, rank2_clock: float, throttled: dict[int, list[str]],
                  unthrottled_like_rank0: bool, per_step: bool = True) -> Path:
    d = copy_golden(tmp_path / name)
    for rank in (0, 1):
        add_health(d, rank, 1410.0, {}, per_step)
    add_health(d, 2, rank2_clock, {i: throttled.get(i, ["gpu_idle"]) for i in range(4)}, per_step)
    if unthrottled_like_rank0:
        rank0 = json.loads((d / "rank-00000.json").read_text())["steps"]["detail"]

        def like_rank0(j: dict) -> None:
            for row in j["steps"]["detail"]:
                if row["index"] not in throttled:
                    row["totals"] = dict(rank0[row["index"]]["totals"])
        edit(d / "rank-00002.json", like_rank0)
    return d


def straggler_2(build_dir: Path, d: Path) -> dict:
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    assert [x["rank"] for x in s["stragglers"]] == [2], s["stragglers"]
    return s["stragglers"][0]


def shown(build_dir: Path, d: Path, fmt: str) -> str:
    p = run(build_dir, d, "--format", fmt)
    assert p.returncode == 0, p.stderr
    out = html.unescape(p.stdout) if fmt == "html" else p.stdout.replace("\\_", "_")
    return " ".join(out.split())


def test_intermittent_throttling_is_named_and_not_called_slower_at_equal_clocks(build_dir: Path,
                                                                              tmp_path: Path) -> None:
    d = throttled_job(tmp_path, "intermittent", 1410.0, THROTTLED, unthrottled_like_rank0=True)
    st = straggler_2(build_dir, d)
    # Throttled steps 1 and 3: 16.5 ms each; the other sampled steps 0 and 2: 15 ms each.
    assert st["clock"] == {"sm_clock_mhz": 1410.0, "others_sm_clock_mhz": 1410.0, "slower": False,
                           "clock_event_reasons": THROTTLE_REASONS, "sampled_steps": 4, "throttled_steps": 2,
                           "throttle_reasons": THROTTLE_REASONS, "throttled_step_ms": approx(16.5),
                           "other_step_ms": approx(15.0)}, st["clock"]
    line = THROTTLE_LINE.format(other="15.00")
    verdict = ("its SM clock 1.41 GHz median matches the others' 1.41 GHz; its 2 unthrottled step(s) took 12.00 ms "
               "outside exposed comm (median) against 12.00 ms for the others: the throttled steps, not slower "
               "compute, explain its delay")
    assert line in st["reasons"] and verdict in st["reasons"], st["reasons"]
    assert not any("slower at equal clocks" in r for r in st["reasons"]), st["reasons"]
    for fmt in ("text", "md", "html"):
        out = shown(build_dir, d, fmt)
        assert line in out and verdict in out, fmt
        assert "slower at equal clocks" not in out, fmt


def test_each_rank_counts_its_throttled_steps_in_json_and_the_gpu_health_view(build_dir: Path,
                                                                                tmp_path: Path) -> None:
    d = throttled_job(tmp_path, "per-rank", 1410.0, THROTTLED, unthrottled_like_rank0=True)
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    health = {r["rank"]: r["gpu_health"] for r in s["per_rank"]}
    # Ranks 0 and 1: 4 sampled steps, gpu_idle only; rank 2: steps 1 and 3 throttled.
    assert [(health[r]["sampled_steps"], health[r]["throttled_steps"], health[r]["throttle_reasons"])
            for r in (0, 1, 2)] == [(4, 0, []), (4, 0, []), (4, 2, THROTTLE_REASONS)], health
    proc = run(build_dir, d, "--format", "csv", "-o", tmp_path)
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "gpu_health.csv", newline="") as f:
        rows = {row["rank"]: row for row in csv.DictReader(f)}
    assert [(rows[r]["sampled_steps"], rows[r]["throttled_steps"]) for r in ("0", "1", "2")] == \
        [("4", "0"), ("4", "0"), ("4", "2")], rows
    # A file without per-step figures (older writers): no count, and the view says so.
    d = throttled_job(tmp_path, "per-rank-no-steps", 1410.0, THROTTLED, unthrottled_like_rank0=False,
                      per_step=False)
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    assert {r["gpu_health"]["sampled_steps"] for r in s["per_rank"]} == {0}, s["per_rank"]
    out = tmp_path / "no-steps-csv"
    out.mkdir()
    proc = run(build_dir, d, "--format", "csv", "-o", out)
    with open(out / "gpu_health.csv", newline="") as f:
        assert {(row["sampled_steps"], row["throttled_steps"]) for row in csv.DictReader(f)} == {("-", "-")}


def test_a_clock_event_reason_this_reader_does_not_know_is_kept_as_written(build_dir: Path, tmp_path: Path) -> None:
    """A newer writer's reason name (steps.detail[].gpu_health and gpu_health.devices[].run) is
    neither dropped nor renamed: it shows as written and, like every reason but gpu_idle, makes
    its step a throttled one."""
    d = throttled_job(tmp_path, "newer", 1410.0, {1: ["gpu_idle", "a_newer_reason"]}, unthrottled_like_rank0=True)

    def run_too(j: dict) -> None:
        j["gpu_health"]["devices"][0]["run"]["clock_event_reasons"] = ["gpu_idle", "a_newer_reason"]
    edit(d / "rank-00002.json", run_too)
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    (h,) = [r["gpu_health"] for r in s["per_rank"] if r["rank"] == 2]
    assert (h["clock_event_reasons"], h["sampled_steps"], h["throttled_steps"], h["throttle_reasons"]) == \
        (["a_newer_reason"], 4, 1, ["a_newer_reason"]), h
    out = tmp_path / "csv"
    out.mkdir()
    assert run(build_dir, d, "--format", "csv", "-o", out).returncode == 0
    with open(out / "gpu_health.csv", newline="") as f:
        rows = {row["rank"]: row for row in csv.DictReader(f)}
    assert (rows["2"]["clock_event_reasons"], rows["2"]["throttled_steps"]) == ("a_newer_reason", "1"), rows


def test_throttled_steps_with_slow_unthrottled_steps_still_claim_equal_clocks(build_dir: Path,
                                                                           tmp_path: Path) -> None:
    d = throttled_job(tmp_path, "slow", 1410.0, THROTTLED, unthrottled_like_rank0=False)
    st = straggler_2(build_dir, d)
    assert (st["clock"]["throttled_step_ms"], st["clock"]["other_step_ms"]) == (approx(16.5), approx(16.5))
    # Its unthrottled steps 0 and 2: 16.5 - 0.5 = 16 ms outside exposed comm, above 1.03 x 12.
    assert THROTTLE_LINE.format(other="16.50") in st["reasons"], st["reasons"]
    assert ("its SM clock 1.41 GHz median matches the others' 1.41 GHz and its 2 unthrottled step(s) took 16.00 ms "
            "outside exposed comm (median) against 12.00 ms for the others: its compute is slower at equal clocks "
            "too") in st["reasons"], st["reasons"]


def test_no_throttling_keeps_the_equal_clocks_diagnosis(build_dir: Path, tmp_path: Path) -> None:
    d = throttled_job(tmp_path, "steady", 1410.0, {}, unthrottled_like_rank0=False)
    st = straggler_2(build_dir, d)
    equal = "its SM clock 1.41 GHz median matches the others' 1.41 GHz: its compute is slower at equal clocks"
    assert equal in st["reasons"], st["reasons"]
    assert not any("clock-event reasons" in r for r in st["reasons"]), st["reasons"]
    assert st["clock"] == {"sm_clock_mhz": 1410.0, "others_sm_clock_mhz": 1410.0, "slower": False,
                           "clock_event_reasons": [], "sampled_steps": 4, "throttled_steps": 0,
                           "throttle_reasons": [], "throttled_step_ms": None, "other_step_ms": approx(16.5)}
    assert equal in shown(build_dir, d, "text")
    # Files without per-step health (older writers): the run's figures only, no step counts.
    d = throttled_job(tmp_path, "no-steps", 1410.0, {}, unthrottled_like_rank0=False, per_step=False)
    st = straggler_2(build_dir, d)
    assert equal in st["reasons"], st["reasons"]
    assert "sampled_steps" not in st["clock"] and "throttled_steps" not in st["clock"], st["clock"]


def test_a_lower_clock_keeps_its_line_with_the_throttled_step_count(build_dir: Path, tmp_path: Path) -> None:
    d = throttled_job(tmp_path, "slow-clock", 1200.0, THROTTLED, unthrottled_like_rank0=True)
    st = straggler_2(build_dir, d)
    assert st["clock"]["slower"] is True and st["clock"]["throttled_steps"] == 2
    assert ("rank 2's SM clock 1.20 GHz median vs 1.41 GHz for the others; clock-event reasons sw_power_cap, "
            "hw_thermal_slowdown; a clock-event reason in 2 of 4 sampled steps") in st["reasons"], st["reasons"]
    assert not any("equal clocks" in r or "unthrottled" in r for r in st["reasons"]), st["reasons"]


def test_every_sampled_step_throttled_names_them_and_keeps_equal_clocks(build_dir: Path, tmp_path: Path) -> None:
    # sw_power_cap in all 4 steps at the others' clock: no unthrottled step to set apart.
    d = throttled_job(tmp_path, "always", 1410.0, {i: ["sw_power_cap"] for i in range(4)}, unthrottled_like_rank0=False)
    st = straggler_2(build_dir, d)
    assert (st["clock"]["throttled_steps"], st["clock"]["sampled_steps"]) == (4, 4)
    assert (st["clock"]["throttled_step_ms"], st["clock"]["other_step_ms"]) == (approx(16.5), None)
    assert "rank 2's GPU reported clock-event reasons sw_power_cap in 4 of 4 sampled steps" in st["reasons"]
    assert ("its SM clock 1.41 GHz median matches the others' 1.41 GHz: its compute is slower at equal clocks"
            in st["reasons"]), st["reasons"]


# ---- the memory view: CUPTI's peak allocated beside NVML's headroom ----------------------------
# NVML on ranks 0 and 1 (add_health: 1 of 80 GiB used, so 79 GiB = 98.75 % left on both), CUPTI's
# memory records on ranks 0 (two devices: 3 GiB on device 0, NVML's, and 5 GiB on device 1; 7 GiB
# together at the peak) and 2 (no NVML: 2.5 GiB). Rank 1 has no memory records.
GIB = 1 << 30


def add_cupti_memory(d: Path, rank: int, peak: int, devices: list[tuple[int, int]]) -> None:
    def change(j: dict) -> None:
        j["memory"] = {"peak_bytes": peak, "in_use_bytes": 0,
                       "devices": [{"cuda_device": c, "peak_bytes": p, "in_use_bytes": 0} for c, p in devices]}
    edit(d / f"rank-0000{rank}.json", change)


def test_memory_view_puts_cuptis_peak_allocated_beside_nvmls_headroom(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "memory")
    add_health(d, 0, 1410.0, {}, per_step=False)
    add_health(d, 1, 1410.0, {}, per_step=False)
    add_cupti_memory(d, 0, 7 * GIB, [(0, 3 * GIB), (1, 5 * GIB)])
    add_cupti_memory(d, 2, 5 * GIB // 2, [(0, 5 * GIB // 2)])
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    left = 79 * GIB
    assert s["memory"] == [
        {"rank": 0, "host": "node-0", "nvml": True, "used_bytes_max": GIB, "total_bytes": 80 * GIB,
         "headroom_bytes": left, "headroom_pct": approx(98.75), "near_capacity": False,
         "allocated_peak_bytes": 3 * GIB},  # device 0's, the GPU NVML's figures are of
        {"rank": 1, "host": "node-1", "nvml": True, "used_bytes_max": GIB, "total_bytes": 80 * GIB,
         "headroom_bytes": left, "headroom_pct": approx(98.75), "near_capacity": False,
         "allocated_peak_bytes": None},
        {"rank": 2, "host": "node-2", "nvml": False, "used_bytes_max": None, "total_bytes": None,
         "headroom_bytes": None, "headroom_pct": None, "near_capacity": False,
         "allocated_peak_bytes": 5 * GIB // 2}], s["memory"]
    assert s["metrics"]["memory_headroom_pct"] == approx(98.75)
    text = run(build_dir, d).stdout
    rows = text_table(text, "GPU memory headroom per rank")
    assert rows["0"] == ["0", "node-0", "1.0", "80.0", "79.0", "98.8", "3.0"], rows
    assert rows["1"] == ["1", "node-1", "1.0", "80.0", "79.0", "98.8", "-"], rows
    assert rows["2"] == ["2", "node-2", "-", "-", "-", "-", "2.5"], rows
    assert list(rows) == ["0", "1", "2"]
    out = run(build_dir, d, "--format", "csv").stdout
    lines = out.split("# view: memory\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert lines[0].endswith(",gib_allocated_peak"), lines[0]
    assert lines[1:] == ["0,node-0,1.0,80.0,79.0,98.8,3.0", "1,node-1,1.0,80.0,79.0,98.8,-",
                         "2,node-2,-,-,-,-,2.5"], lines
    assert "GiB allocated (peak)" in shown(build_dir, d, "md")
    page = shown(build_dir, d, "html")
    chart = re.search(r'<figure id="chart-memory">.*?</figure>', page, re.S)
    assert chart and "peak allocated (CUPTI)" in chart.group(0)


def test_memory_view_with_cupti_figures_alone_names_no_headroom(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "cupti-only")
    add_cupti_memory(d, 1, 6 * GIB, [(0, 6 * GIB)])
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    assert [(m["rank"], m["nvml"], m["allocated_peak_bytes"]) for m in s["memory"]] == [(1, False, 6 * GIB)]
    assert s["metrics"]["memory_headroom_pct"] is None  # no NVML figure: nothing to gate on
    text = run(build_dir, d).stdout
    assert text_table(text, "GPU memory headroom per rank")["1"] == ["1", "node-1", "-", "-", "-", "-", "6.0"]
    assert "GPU memory:" not in text and "of their GPU's memory left" not in text
    chart = re.search(r'<figure id="chart-memory">.*?</figure>', shown(build_dir, d, "html"), re.S)
    assert chart and "peak allocated (CUPTI)" in chart.group(0) and "NVML" not in chart.group(0)


def self_cost_of(pct: float | None, wall_ns: int, cost_ns: int, launch_ns: int, cpu_ns: int) -> dict:
    """A rank file's self_cost (docs/schema.md) with the given share and figures."""
    doc = {"threads": [{"name": "tt-cupti", "cpu_ns": cpu_ns}, {"name": "tt-hang", "cpu_ns": 1_000_000}],
           "callbacks": [
               {"module": "cupti", "what": "launch callbacks", "calls": 100_000, "sampled_every": 1024,
                "samples": 97, "interrupted": 1, "estimated": True, "estimated_ns": launch_ns, "spread_ns": 40_000},
               {"module": "annotations", "what": "annotations", "calls": 2_000, "sampled_every": 1024,
                "samples": 1, "interrupted": 0, "estimated": True, "estimated_ns": 30_000, "spread_ns": 30_000},
               {"module": "nvtx", "what": "NVTX ranges", "calls": 10, "sampled_every": 1024, "samples": 0,
                "interrupted": 0, "estimated": True}],
           "memory": [{"module": "cupti", "what": "activity buffers", "peak_bytes": 8 << 20},
                      {"module": "annotations", "what": "names and paths", "peak_bytes": 1 << 20}],
           "peak_bytes": 9 << 20, "written_bytes": 3 << 20, "callbacks_ns": launch_ns + 30_000, "estimated": True}
    if pct is not None:
        doc.update(pct=pct, steps_wall_ns=wall_ns, steps_callbacks_ns=cost_ns)
    return doc


def test_self_cost_per_rank_job_wide_diagnosis_and_gate(build_dir: Path, tmp_path: Path) -> None:
    # Rank 0: 0.5 % (5 ms of 1 s); rank 1: 2.5 % (50 ms of 2 s); rank 2: no step after warm-up.
    # Job-wide: 55 ms of 3 s = 1.833 %; the highest rank's: 2.5 % (rank 1).
    d = copy_golden(tmp_path / "run")
    edit(d / "rank-00000.json", lambda doc: doc.update(self_cost=self_cost_of(0.5, 10**9, 5 * 10**6, 4 * 10**6, 7 * 10**6)))
    edit(d / "rank-00001.json", lambda doc: doc.update(self_cost=self_cost_of(2.5, 2 * 10**9, 50 * 10**6, 6 * 10**6, 9 * 10**6)))
    edit(d / "rank-00002.json", lambda doc: doc.update(self_cost=self_cost_of(None, 0, 0, 1 * 10**6, 2 * 10**6)))
    proc = run(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    # The diagnosis line, its wrapped lines joined.
    flat = " ".join(proc.stdout.split())
    at = flat.find("traintime's own code took")
    assert at >= 0, proc.stdout
    line = flat[at:flat.find(" - ", at)]
    assert "2.50 % of the steps' wall time on rank 1" in line and "launch callbacks (cupti)" in line, line
    assert "job-wide 1.83 %" in line and "ranks above" not in line, line  # only rank 1 is above 1 %
    t = text_table(proc.stdout, "traintime's own cost")
    # code ms: 4 + 6 + 1 launch + 3 x 0.03; threads: 18 (tt-cupti) + 3 (tt-hang); the highest rank's
    # 9 MiB peak; 3 x 3 MiB written; one n/a path (NVTX) per rank.
    assert t["job"][1:8] == ["1.833", "11.1", "21.0", "9.0", "9.0", "3", "launch callbacks (cupti)"], t
    assert t["1"][1:3] == ["2.500", "6.0"] and t["0"][1:3] == ["0.500", "4.0"] and t["2"][1] == "n/a", t
    assert t["1"][6:8] == ["1", "launch callbacks (cupti)"], t
    paths = text_table(proc.stdout, "traintime's own cost by hot path")
    assert paths["launch callbacks"][1:7] == ["cupti", "3", "300000", "11.000", "0.069", "291"], paths  # sqrt(3) x 0.04 ms
    assert paths["NVTX ranges"][4] == "n/a", paths

    doc, _ = summary(build_dir, d)
    s = doc["self_cost"]
    assert s["ranks"] == 3 and s["max_rank"] == 1 and abs(s["max_pct"] - 2.5) < 1e-9
    assert abs(s["pct"] - 100 * 55e6 / 3e9) < 1e-9
    assert [r["rank"] for r in s["per_rank"]] == [1, 0, 2] and s["per_rank"][2]["pct"] is None
    assert {t["name"]: t["cpu_ms"] for t in s["threads"]} == {"tt-cupti": 18.0, "tt-hang": 3.0}

    assert run(build_dir, d, "--fail-if", "self_cost_pct>1").returncode == 1
    assert run(build_dir, d, "--fail-if", "self_cost_pct>2.5").returncode == 0
    # Below 1 % on every rank: no diagnosis line, the table stays.
    edit(d / "rank-00001.json", lambda doc: doc["self_cost"].update(pct=0.9))
    quiet = run(build_dir, d).stdout
    assert "traintime's own code took" not in quiet and "traintime's own cost" in quiet


def test_self_cost_table_left_out_without_self_cost_and_the_gate_cannot_judge(build_dir: Path) -> None:
    proc = run(build_dir, GOLDEN)
    # Left out with the other empty tables, in their one line, saying why.
    assert "self_cost (no rank file has self_cost: older files lack it)" in " ".join(proc.stdout.split()), proc.stdout
    assert "traintime's own cost" not in proc.stdout, proc.stdout
    gate = run(build_dir, GOLDEN, "--fail-if", "self_cost_pct>1")
    assert gate.returncode == 1 and "self_cost_pct" in gate.stderr, gate.stderr


def test_module_counters_merged_typed(build_dir: Path, tmp_path: Path) -> None:
    """modules.<module>.counters.<key> of the JSON: each counter the ranks wrote, merged as numbers
    (sum, the largest and its lowest rank, the ranks with it non-zero); a counter every rank wrote
    0 has no max_rank. The golden files, written before modules existed, add nothing."""
    s, proc = summary(build_dir, GOLDEN)
    assert proc.returncode == 0, proc.stderr
    assert s["modules"] == {}

    d = copy_golden(tmp_path / "job")
    dropped = {0: 7, 1: 0, 2: 9}
    for f in sorted(d.glob("rank-*.json")):
        edit(f, lambda doc: doc.update(modules={
            "cupti": {"counters": {"dropped_records": dropped[doc["rank"]], "no_timestamps": 0}},
            **({"nvtx": {"counters": {"untracked_ranges": 9}}} if doc["rank"] == 1 else {})}))
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    assert s["modules"] == {
        "cupti": {"counters": {
            "dropped_records": {"sum": 16, "max": 9, "max_rank": 2, "ranks_nonzero": 2},
            "no_timestamps": {"sum": 0, "max": 0, "max_rank": None, "ranks_nonzero": 0}}},
        "nvtx": {"counters": {"untracked_ranges": {"sum": 9, "max": 9, "max_rank": 1, "ranks_nonzero": 1}}}}


def test_a_module_section_newer_than_the_report_is_one_line_and_the_rest_is_read(build_dir: Path, tmp_path: Path) -> None:
    """A rank file whose modules.<module>.version is newer than this report knows: the module's
    counters are merged, its data section left out, the rest of the file read, and one problem line
    names the first such file, the module, the version and what to do, with the count of the others."""
    d = copy_golden(tmp_path / "job")
    for f in sorted(d.glob("rank-*.json")):
        edit(f, lambda doc: doc.update(modules={"nvml": {"version": 99, "counters": {"samples": 5}}},
                                       gpu_health={"shape": "of a later release"}))
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    assert s["ranks"] == 3
    assert s["modules"]["nvml"]["counters"]["samples"]["sum"] == 15
    notes = [p for p in s["problems"] if "version 99" in p["problem"]]
    assert len(notes) == 1, s["problems"]
    assert notes[0]["file"].endswith("rank-00000.json")
    text = notes[0]["problem"]
    assert 'module "nvml"' in text and "gpu_health" in text and "traintime-report" in text
    assert text.endswith("(and 2 more files)")
    assert all(r["gpu_health"] is None for r in s["per_rank"])
