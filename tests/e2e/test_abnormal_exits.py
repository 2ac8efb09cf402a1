"""The ways training jobs really die (DESIGN §2): SIGABRT from PyTorch's NCCL watchdog (abort()
from another thread while the ranks wait in a hung collective, or inside malloc), SIGKILL (the
OOM killer, a scheduler's hard kill) and hangs nobody signals. SIMULATED GPU and NCCL (simgpu,
tests/sim/README.md) under mpirun; expectations come from what sim_train does, never from the
library's output.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from testlib import SOURCE_DIR, check, clean_env, kill_job, load_json, mpirun, sim_cmd

sys.path.insert(0, str(SOURCE_DIR / "tests" / "report"))
from reportlib import summary  # noqa: E402

# sim_train makes two bucketed AllReduces per step (4 layers, 2 per bucket): step 3's first
# collective is the 7th on the world communicator.
HUNG_STEP, HUNG_SEQ = 3, 7


def hidden_leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.endswith((".claim", ".live")))


def in_flight(doc: dict[str, Any]) -> list[tuple[str, int]]:
    return [(op["op"], op["seq"]) for c in doc.get("communicators", []) for op in c.get("in_flight", [])]


def test_abort_in_a_hung_collective_writes_every_rank_and_dies_by_sigabrt(build_dir: Path,
                                                                         tmp_path: Path) -> None:
    """As PyTorch's watchdog ends a job whose collective timed out: both ranks enter step 3's
    first AllReduce, which never completes (SIMGPU_HANG=2:3: rank 2 of 2 does not exist, so no
    rank stays out), and 6 s after CUDA started a thread calls abort(). Each rank runs under a
    shell that records its exit status: 134 (128 + SIGABRT), and its file, written on the
    abort, names the collective it waited in and the region it was blocked in."""
    out = tmp_path / "job"
    out.mkdir()
    sim = build_dir / "bin" / "sim_train"
    script = f'ulimit -c 0; "{sim}" --steps 8; echo $? > "{out}/status-$OMPI_COMM_WORLD_RANK"'
    cmd = sim_cmd(build_dir, out, 2, {"SIMGPU_HANG": "2:3", "SIMGPU_ABORT_AFTER": "6",
                                      "TRAINTIME_HANG_SEC": "0"}, ["sh", "-c", script])
    p = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=120)
    for r in range(2):
        status = out / f"status-{r}"
        check(status.exists(), f"rank {r} recorded no exit status:\n{p.stdout}\n{p.stderr}")
        check(status.read_text().strip() == "134", f"rank {r} exit status {status.read_text()!r}, expected 134")
        doc = load_json(out / f"rank-{r:05d}.json")
        check(doc["exit_reason"] == "signal SIGABRT" and doc["snapshot"] is False,
              f"rank {r}: exit_reason {doc['exit_reason']!r}, snapshot {doc['snapshot']!r}")
        check(("AllReduce", HUNG_SEQ) in in_flight(doc), f"rank {r}: in flight {in_flight(doc)}")
        check(doc["steps"]["count"] == HUNG_STEP, f"rank {r}: steps {doc['steps']['count']}")
        # The step's optimizer waits for the gradients' AllReduce and synchronises: it blocks there.
        check(any(t["open_regions"] == ["optimizer"] for t in doc["threads"]),
              f"rank {r}: open regions {doc['threads']}")
    check(hidden_leftovers(out) == [], f"left behind: {hidden_leftovers(out)}")


@pytest.mark.parametrize("how", ["abort", "signal"])
def test_abort_while_the_main_thread_allocates_never_hangs(build_dir: Path, tmp_path: Path, how: str) -> None:
    """abort() from another thread ("abort"), or SIGABRT delivered to the main thread inside
    malloc ("signal"), at 25 different moments: the process always dies by SIGABRT within the
    timeout, and the rank's data is there: the file written on the abort, or (a writer that
    could not finish) the always-current record, which the report reads."""
    prog = build_dir / "bin" / "abort_in_malloc"
    check(prog.exists(), f"{prog} is not built")
    rng = random.Random(23)
    failures = []
    for i in range(25):
        out = tmp_path / f"{how}{i:02d}"
        env = clean_env({"LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"),
                         "TRAINTIME_OUTPUT": str(out), "TRAINTIME_CUPTI": "0"})
        try:
            p = subprocess.run(["sh", "-c", f'ulimit -c 0; exec "{prog}" {how} {rng.randrange(0, 20000)}'],
                               env=env, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            failures.append(f"run {i}: still running after 60 s (deadlock)")
            continue
        if p.returncode != -signal.SIGABRT:
            failures.append(f"run {i}: exit status {p.returncode}, expected death by SIGABRT: {p.stderr}")
            continue
        rank_file = out / "rank-00000.json"
        if rank_file.exists():
            doc = load_json(rank_file)
            if doc["exit_reason"] != "signal SIGABRT" or doc["steps"]["count"] != 1:
                failures.append(f"run {i}: exit_reason {doc['exit_reason']!r}, steps {doc['steps']['count']}")
            continue
        s, proc = summary(build_dir, out)
        if s.get("ranks") != 1:
            failures.append(f"run {i}: no rank file and the record is unreadable: {proc.stderr}")
    check(not failures, "\n".join(failures))


def test_abort_on_a_thread_while_main_returns_still_ends_the_process_by_sigabrt(build_dir: Path,
                                                                             tmp_path: Path) -> None:
    """abort() on a library's thread while the main thread returns from main (a gloo thread at a
    Python interpreter's shutdown does it): without traintime the process dies by SIGABRT. The
    handler writes the rank file and, as rank 0 of 2 on this host, waits a second for its peer's;
    the main thread's exit 50 ms in must not end the process with status 0 meanwhile (it did)."""
    prog = build_dir / "bin" / "abort_beside_exit"
    check(prog.exists(), f"{prog} is not built")
    out = tmp_path / "out"
    env = clean_env({"LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"), "TRAINTIME_OUTPUT": str(out),
                     "TRAINTIME_CUPTI": "0", "RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"})
    p = subprocess.run(["sh", "-c", f'ulimit -c 0; exec "{prog}"'], env=env, capture_output=True, text=True,
                       timeout=60)
    check(p.returncode == -signal.SIGABRT, f"exit status {p.returncode}, expected death by SIGABRT: {p.stderr}")
    doc = load_json(out / "rank-00000.json")
    check(doc["exit_reason"] == "signal SIGABRT" and doc["steps"]["count"] == 1,
          f"exit_reason {doc['exit_reason']!r}, steps {doc['steps']['count']}")


def test_sigkill_at_random_moments_leaves_a_record_the_report_reads(build_dir: Path, tmp_path: Path) -> None:
    """SIGKILL to every process of a 2-rank job at random moments, 10 times: the report reads
    both ranks from the records they left, each holding at least every step the rank had
    finished (sim_train rewrites --steps-file after each tt_step returns; what it wrote
    survives the kill like the record)."""
    rng = random.Random(2300)
    failures = []
    for i in range(10):
        out = tmp_path / f"job{i:02d}"
        out.mkdir()
        cmd = sim_cmd(build_dir, out, 2, {"TRAINTIME_HANG_SEC": "0"},
                      [str(build_dir / "bin" / "sim_train"), "--steps", "100000", "--step-sleep-us", "3000",
                       "--steps-file", str(out / "done-%r")])
        p = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not all((out / f"rank-{r:05d}.live").exists() for r in range(2)):
                time.sleep(0.05)
            check(p.poll() is None, f"job {i} ended by itself (exit status {p.returncode})")
            time.sleep(rng.uniform(0, 2.5))
        finally:
            kill_job(p)
        s, proc = summary(build_dir, out)
        if s.get("ranks") != 2:
            failures.append(f"job {i}: report read {s.get('ranks')} rank(s): {proc.stderr}")
            continue
        steps = {x["rank"]: x["steps"] for x in s["per_rank"]}
        for r in range(2):
            done_file = out / f"done-{r}"
            done = int(done_file.read_text() or 0) if done_file.exists() else 0
            if steps.get(r, -1) < done:
                failures.append(f"job {i} rank {r}: the report read {steps.get(r)} steps, {done} were finished")
    check(not failures, "\n".join(failures))


def test_suspected_hang_is_written_once_and_names_what_each_rank_waits_in(build_dir: Path,
                                                                         tmp_path: Path) -> None:
    """SIMGPU_HANG=1:3 with no snapshots configured: rank 1 stops before step 3's first
    collective, rank 0 waits in it. With TRAINTIME_HANG_SEC=2 each rank writes its file once,
    marked as a suspected hang, and prints one line: rank 0 names AllReduce seq 7 and the
    communicator, rank 1 where it is (step 3, inside backward). The job is left running; the
    report reads the hang files as it reads snapshots and names rank 1 as missing."""
    out = tmp_path / "job"
    out.mkdir()
    # Steps of a second (real time), so the watchdog's once-a-second refresh flushes the records
    # of the steps before the hang: simgpu, like a normal CUPTI flush, never delivers a buffer
    # that also holds work that has not completed.
    cmd = sim_cmd(build_dir, out, 2, {"SIMGPU_HANG": "1:3", "TRAINTIME_HANG_SEC": "2"},
                  [str(build_dir / "bin" / "sim_train"), "--steps", "8", "--step-sleep-us", "1000000"])
    p = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    saved = tmp_path / "hang-files"
    saved.mkdir()
    try:
        deadline = time.monotonic() + 90
        hung = set()
        while time.monotonic() < deadline and len(hung) < 2:
            time.sleep(0.2)
            check(p.poll() is None, "the hung job ended by itself")
            for r in range(2):
                f = out / f"rank-{r:05d}.json"
                try:
                    doc = json.loads(f.read_text())
                except (OSError, ValueError):
                    continue
                if doc.get("exit_reason") == "suspected hang" and r not in hung:
                    hung.add(r)
                    shutil.copy(f, saved / f.name)
        check(len(hung) == 2, f"suspected-hang files from ranks {sorted(hung)} only")
        time.sleep(3)  # once: no second hang file, and the job still runs
        check(p.poll() is None, "the watchdog touched the job")
    finally:
        kill_job(p)
    stderr = p.stderr.read() if p.stderr else ""
    lines = [line for line in stderr.splitlines() if "suspected hang" in line]
    check(len(lines) == 2, f"expected one line per rank, got {lines}")
    rank0 = next(line for line in lines if "rank 0:" in line)
    rank1 = next(line for line in lines if "rank 1:" in line)
    world = [c["id"] for c in load_json(saved / "rank-00000.json")["communicators"] if c["size"] == 2]
    check(f"waiting in AllReduce seq {HUNG_SEQ} on communicator {world[0]}" in rank0, rank0)
    check(f"in step {HUNG_STEP}" in rank1 and "backward" in rank1, rank1)
    for r in range(2):
        doc = load_json(saved / f"rank-{r:05d}.json")
        check(doc["snapshot"] is True, f"rank {r}: a suspected-hang file is a snapshot")
    s, proc = summary(build_dir, saved)
    assert proc.returncode == 0, proc.stderr
    assert len(s["hangs"]) == 1, s["hangs"]
    h = s["hangs"][0]
    assert h["missing_ranks"] == [1] and h["op"] == "AllReduce" and h["seq"] == HUNG_SEQ, h
    assert h["communicator"] in world, (h["communicator"], world)
    doing = h["missing"][0]["doing"]
    assert f"step {HUNG_STEP}" in doing and "backward" in doing, doing


def test_clean_run_leaves_no_claim_or_record_and_a_later_process_never_clobbers(build_dir: Path,
                                                                               tmp_path: Path) -> None:
    """A clean run leaves rank-00000.json only (no .rank-00000.claim, no record). A second
    process of the same job claiming rank 0 afterwards writes an aux file and leaves the first
    one's file as it was."""
    out = tmp_path / "out"
    example = build_dir / "bin" / "annotated_loop"
    env = clean_env({"LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"), "TRAINTIME_OUTPUT": str(out),
                     "SLURM_JOB_ID": "4242", "RANK": "0", "WORLD_SIZE": "1"})
    first = subprocess.run([str(example), "--steps", "2", "--work-us", "10"], env=env, capture_output=True,
                           text=True, timeout=60)
    check(first.returncode == 0, first.stderr)
    names = sorted(p.name for p in out.iterdir())
    check(names == ["rank-00000.json"], f"after a clean run: {names}")
    before = (out / "rank-00000.json").read_bytes()
    second = subprocess.run([str(example), "--steps", "3", "--work-us", "10"], env=env, capture_output=True,
                            text=True, timeout=60)
    check(second.returncode == 0, second.stderr)
    check((out / "rank-00000.json").read_bytes() == before, "the second process replaced the first's file")
    names = sorted(p.name for p in out.iterdir())
    check(len(names) == 2 and names[1].startswith("rank-00000.pid"), f"after the second process: {names}")
    check(load_json(out / names[1])["role"] == "aux", "the second process's file is not aux")
