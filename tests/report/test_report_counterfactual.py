"""What a straggler costs, checked against the job re-run without it (simgpu, tests/sim/README.md).

4 ranks of sim_train under mpirun and LD_PRELOAD, one rank's compute kernels stretched by
SIMGPU_SLOWDOWN. The report's stragglers[].step_ms_without (the job's step time had the straggler
run at the median of its peers) must be within 5 % of the step time the same job measures when
run without the slowdown; a clean job must report no straggler costing over 2 % of its step.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from reportlib import run, summary
from test_report_sim import sim_job


@pytest.fixture(scope="module")
def clean(build_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("clean") / "job"
    sim_job(build_dir, out, "")
    s, proc = summary(build_dir, out)
    assert proc.returncode == 0 and s["ranks"] == 4, proc.stderr
    return s


def test_clean_job_reports_no_straggler_cost(clean: dict) -> None:
    assert clean["step_time_ms"]["p50"] > 0
    assert all(st["cost_pct_of_step"] <= 2.0 for st in clean["stragglers"]), clean["stragglers"]


@pytest.mark.parametrize("rank,factor", [(3, 1.5), (1, 1.3), (2, 2.0)])
def test_step_without_the_straggler_matches_the_clean_rerun(build_dir: Path, tmp_path: Path, clean: dict,
                                                            rank: int, factor: float) -> None:
    out = tmp_path / "job"
    sim_job(build_dir, out, f"{rank}:{factor}")
    s, proc = summary(build_dir, out)
    assert proc.returncode == 0, proc.stderr
    assert [x["rank"] for x in s["stragglers"]] == [rank], s["stragglers"]
    st = s["stragglers"][0]
    assert st["kind"] == "rank" and s["straggler_group"] is None
    measured = clean["step_time_ms"]["p50"]
    assert st["step_ms"] == s["reference_step_ms"] and st["step_ms"] > 1.05 * measured, "the slowdown slowed nothing"
    assert st["step_ms_without"] == pytest.approx(measured, rel=0.05), (st, measured)
    assert st["cost_ms_per_step"] == pytest.approx(st["step_ms"] - st["step_ms_without"], rel=1e-9)
    text = " ".join(run(build_dir, out).stdout.split())
    assert f"the job's step would go {st['step_ms']:.2f} -> {st['step_ms_without']:.2f} ms/step" in text


def test_a_slow_group_is_told_apart_from_a_slow_rank(build_dir: Path, tmp_path: Path, clean: dict) -> None:
    """Ranks 2 and 3 both at 1.5x, as an imbalanced pipeline stage: speeding up either alone gains
    nothing (the other still holds the job back); both together give the clean job's step."""
    out = tmp_path / "job"
    sim_job(build_dir, out, "2:1.5,3:1.5")
    s, proc = summary(build_dir, out)
    assert proc.returncode == 0, proc.stderr
    assert sorted(x["rank"] for x in s["stragglers"]) == [2, 3], s["stragglers"]
    assert all(x["kind"] == "group" and x["cost_pct_of_step"] <= 2.0 for x in s["stragglers"]), s["stragglers"]
    g = s["straggler_group"]
    assert g["ranks"] == [2, 3] and g["step_ms"] > 1.05 * clean["step_time_ms"]["p50"]
    assert g["step_ms_without"] == pytest.approx(clean["step_time_ms"]["p50"], rel=0.05), (g, clean["step_time_ms"])
    text = " ".join(run(build_dir, out).stdout.split())
    assert f"without ranks 2, 3 together" in text and f"{g['step_ms']:.2f} -> {g['step_ms_without']:.2f} ms/step" in text
