"""What traintime-report says when it cannot see something, and which rank died (pytest; CTest
label report): an empty folder names what to check, a dead rank is the diagnosis' first line and
a running one is never called killed, --fail-if on a figure that was not measured cannot be
judged, --trace on a job without a GPU timeline says exactly that, --version is the project's."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from reportlib import GOLDEN, copy_golden, cpu_only, edit, run, summary
from testlib import SOURCE_DIR

S = 1_000_000_000


def problems_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("traintime-report: ")]


def test_an_empty_or_missing_folder_says_what_to_check(build_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for folder in (tmp_path / "empty", tmp_path / "never-written"):
        proc = run(build_dir, folder)
        lines = problems_of(proc.stderr)
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        for what in ("still running", "LD_PRELOAD=", "nothing was recorded", "TRAINTIME_OUTPUT"):
            assert what in lines[0], f"{what!r} not in: {lines[0]}"


def test_stragglers_on_a_job_without_gpu_time_cannot_be_judged(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "cpu")
    cpu_only(d)
    for cond in ("stragglers>0", "straggler_cost_ms>1", "exposed_comm_pct>20"):
        proc = run(build_dir, d, "--fail-if", cond)
        assert proc.returncode == 1, (cond, proc.returncode, proc.stderr)
        assert f"--fail-if: {cond}: cannot be judged" in proc.stderr, proc.stderr
    s, _ = summary(build_dir, d)
    assert s["metrics"]["stragglers"] is None and s["metrics"]["straggler_cost_ms"] is None, s["metrics"]
    # With GPU time they are measured: no straggler beyond 5 on the golden job, a gate that passes.
    ok = run(build_dir, GOLDEN, "--fail-if", "stragglers>5")
    assert ok.returncode == 0, ok.stderr
    s, _ = summary(build_dir, GOLDEN)
    assert s["metrics"]["stragglers"] == 1, s["metrics"]


def test_trace_of_a_job_without_gpu_work_says_there_is_no_gpu_timeline(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "cpu")
    cpu_only(d)
    proc = run(build_dir, d, "--trace", tmp_path / "trace.json")
    assert proc.returncode == 0, proc.stderr
    assert "no rank ran GPU work" in proc.stderr and "keeps no timeline of CPU regions" in proc.stderr, proc.stderr
    assert "run with TRAINTIME_TRACE=1" not in proc.stderr, proc.stderr
    assert not (tmp_path / "trace.json").exists()
    # A GPU job without dumps: the hint is the right one there.
    gpu = run(build_dir, GOLDEN, "--trace", tmp_path / "gpu-trace.json")
    assert "run with TRAINTIME_TRACE=1" in gpu.stderr, gpu.stderr


def test_version_is_the_projects_one_version(build_dir: Path) -> None:
    cmake = re.search(r"^project\(traintime\s+VERSION\s+([0-9.]+)", (SOURCE_DIR / "CMakeLists.txt").read_text(),
                      re.MULTILINE)
    assert cmake, "no project(traintime VERSION ...) in CMakeLists.txt"
    proc = run(build_dir, "--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"traintime-report {cmake.group(1)}", (proc.stdout,
                                                                                                  proc.stderr)


# ---- which rank died, and which still runs --------------------------------------------------

def set_fields(path: Path, **fields: Any) -> None:
    def change(doc: dict) -> None:
        steps = fields.pop("steps", None)
        doc.update(fields)
        if steps is not None:
            doc["steps"]["count"] = steps
    edit(path, change)


def dead(s: dict) -> dict[int, dict]:
    return {r["rank"]: r for r in s["stopped_ranks"]}


def test_a_rank_ended_by_a_signal_is_the_headline_whether_or_not_another_finished(build_dir: Path,
                                                                                  tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "job")
    set_fields(d / "rank-00001.json", exit_reason="signal SIGTERM", steps=3)
    s, _ = summary(build_dir, d)
    assert dead(s)[1]["how"] == "stopped by SIGTERM (launcher teardown)" and dead(s)[1]["steps"] == 3, s["stopped_ranks"]
    text = " ".join(run(build_dir, d).stdout.split())
    assert ("DIAGNOSIS Ranks that died: - rank 1 (host node-1) stopped by SIGTERM (launcher teardown) at step 3 "
            "(the other ranks reached up to step 4): it wrote its file on the signal Run:") in text, text
    # No rank finished: every one of them was torn down, each still named (one line for more than three).
    for k in range(3):
        set_fields(d / f"rank-0000{k}.json", exit_reason="signal SIGINT")
    s, _ = summary(build_dir, d)
    assert sorted(dead(s)) == [0, 1, 2] and {r["how"] for r in s["stopped_ranks"]} == {"stopped by SIGINT (Ctrl-C)"}


def test_many_ranks_torn_down_the_same_way_are_one_line_after_the_one_killed(build_dir: Path, tmp_path: Path) -> None:
    d = tmp_path / "big"
    d.mkdir()
    base = json.loads((GOLDEN / "rank-00000.json").read_text())
    for rank in range(6):
        doc = json.loads(json.dumps(base))
        doc.update(rank=rank, world_size=6, host=f"node-{rank}", communicators=[],
                   exit_reason="signal SIGTERM" if rank else "killed", snapshot=rank == 0)
        doc["steps"]["count"] = 40 + rank % 2
        (d / f"rank-{rank:05d}.json").write_text(json.dumps(doc))
    text = run(build_dir, d).stdout
    section = text[text.index("Ranks that died:"):text.index("Run:")]
    lines = [line for line in section.splitlines() if line.startswith("  - ")]
    assert len(lines) == 2, section
    assert lines[0].startswith("  - rank 0 (host node-0) killed at step 40"), section
    assert lines[1] == "  - 5 ranks (1, 2, 3, 4, 5) stopped by SIGTERM (launcher teardown) at steps 40..41", section


def running_job(d: Path, ages_s: list[float], end_ns: int) -> None:
    """Golden ranks as a running job's snapshots on other hosts: each refreshed at end_ns, its last
    step ended ages_s[rank] before."""
    for rank, age in enumerate(ages_s):
        def change(doc: dict, age: float = age) -> None:
            doc.update(snapshot=True, exit_reason="snapshot", end_unix_ns=end_ns)
            doc["steps"]["last_end_unix_ns"] = end_ns - int(age * S)
        edit(d / f"rank-{rank:05d}.json", change)


def test_snapshots_of_a_running_job_are_running_and_a_stale_one_is_killed(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "job")
    now = 1_800_000_000 * S
    running_job(d, [0.5, 2.25, 0.75], now)
    s, _ = summary(build_dir, d)
    assert s["stopped_ranks"] == [], s["stopped_ranks"]
    assert [(r["rank"], r["last_step_age_s"]) for r in s["running_ranks"]] == [(0, 0.5), (1, 2.25), (2, 0.75)]
    assert {r["state"] for r in s["per_rank"]} == {"running"}
    text = " ".join(run(build_dir, d).stdout.split())
    assert "Ranks that died" not in text and "killed" not in text, text
    assert "rank 1 (host node-1) running at step 4, its last step ended 2.2 s before its newest record" in text, text
    # Rank 2's record stopped being refreshed a minute before the others': its process is gone.
    edit(d / "rank-00002.json", lambda doc: doc.update(end_unix_ns=now - 60 * S))
    s, _ = summary(build_dir, d)
    assert dead(s)[2]["state"] == "killed", s["stopped_ranks"]
    assert dead(s)[2]["evidence"] == ("its newest file is a periodic snapshot and its record stopped 60 s before "
                                      "the job's newest file"), dead(s)[2]
    assert [r["rank"] for r in s["running_ranks"]] == [0, 1]
    watch = run(build_dir, d, "--watch", "--once").stdout
    assert "(2 running, 1 died, 0 finished)" in watch and "DIED: rank 2 (host node-2) killed at step 4" in watch, watch


def test_a_suspected_hang_of_a_live_process_says_it_hung(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "job")
    now = 1_800_000_000 * S
    running_job(d, [0.5, 0.5, 0.5], now)
    edit(d / "rank-00001.json", lambda doc: doc.update(exit_reason="suspected hang"))
    s, _ = summary(build_dir, d)
    assert dead(s)[1]["state"] == "suspected hang" and dead(s)[1]["how"].startswith("hung"), s["stopped_ranks"]


def test_a_rank_on_this_host_is_killed_only_when_its_process_is_gone(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "job")
    host = socket.gethostname()
    gone = subprocess.Popen(["/bin/true"])
    gone.wait()
    now = time.time_ns()
    running_job(d, [0.5, 0.5, 0.5], now)
    # Rank 0 is this very test (alive, started before its file's start); rank 1 a process that ended.
    edit(d / "rank-00000.json", lambda doc: doc.update(host=host, pid=os.getpid(), start_unix_ns=now))
    edit(d / "rank-00001.json", lambda doc: doc.update(host=host, pid=gone.pid, start_unix_ns=now))
    s, _ = summary(build_dir, d)
    assert list(dead(s)) == [1], s["stopped_ranks"]
    assert dead(s)[1]["evidence"] == (f"its newest file is a periodic snapshot and its process (pid {gone.pid}) no "
                                      "longer runs on this host"), dead(s)[1]
    assert [r["rank"] for r in s["running_ranks"]] == [0, 2]
    # Every other rank ended: rank 0 still runs here, so it is still running, not killed.
    for k in (1, 2):
        edit(d / f"rank-0000{k}.json", lambda doc: doc.update(snapshot=False, exit_reason="exit"))
    s, _ = summary(build_dir, d)
    assert s["stopped_ranks"] == [] and [r["rank"] for r in s["running_ranks"]] == [0], s
