"""traintime's own threads (support/threads.h, DESIGN §2): each is named tt-<what> and blocks the
application's asynchronous signals but not the synchronous ones. A SIGABRT on CUPTI's processing
thread in the middle of ingest, while it holds the aggregator's lock (an abort() there, made by
simgpu's SIMGPU_STOP_IN_INGEST hook, or a SIGABRT sent to that thread with tgkill while the hook
keeps it there), still leaves the final rank file within 2 s, with the GPU figures last
published and the counter summary_from_last_publish, and the process dies by SIGABRT: 20 of 20
runs of a launch-bound loop. SIMULATED GPU (simgpu, tests/sim/README.md).
"""
from __future__ import annotations

import ctypes
import os
import platform
import random
import signal
import subprocess
import time
from pathlib import Path

from testlib import Checks, check, load_json, sim_env

OWN_THREADS = {"tt-cupti", "tt-writer", "tt-snapshot", "tt-hang", "tt-nvml"}
# Blocked on every thread of ours: the application's asynchronous signals.
ASYNCHRONOUS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                signal.SIGUSR2, signal.SIGALRM, signal.SIGCHLD, signal.SIGPIPE]
# Never blocked: raised on the thread that aborts or faults (and pending for ever if blocked).
SYNCHRONOUS = [signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL]
RUNS = 20
FILE_WITHIN_S = 2.0
SYS_TGKILL = {"x86_64": 234, "aarch64": 131}


def launch_loop(build_dir: Path, env: dict[str, str]) -> subprocess.Popen:
    """sim_train for far longer than any test waits: a launch-bound loop (no sleep in a step)."""
    sim = build_dir / "bin" / "sim_train"
    return subprocess.Popen(["sh", "-c", f'ulimit -c 0; exec "{sim}" --steps 100000000'], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def threads_of(pid: int) -> dict[int, tuple[str, int]]:
    """tid -> (name, mask of blocked signals) of every thread of process pid still there."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            status = (task / "status").read_text()
        except OSError:
            continue
        blocked = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigBlk:"))
        out[int(task.name)] = (name, blocked)
    return out


def blocks(mask: int, sig: int) -> bool:
    return bool(mask & (1 << (sig - 1)))


def tgkill(pid: int, tid: int, sig: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(SYS_TGKILL[platform.machine()], pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill({pid}, {tid}, {sig})")


def kill_group(p: subprocess.Popen) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=60)


def test_own_threads_are_named_and_block_only_asynchronous_signals(build_dir: Path, tmp_path: Path) -> None:
    """With snapshots on, all five threads run: each is named, blocks the asynchronous signals
    and leaves the synchronous ones deliverable; the main thread, which started them, keeps its
    own mask (sim_train blocks nothing). A SIGTERM to the process then still ends it the way it
    would have without traintime, with the file written."""
    out = tmp_path / "out"
    p = launch_loop(build_dir, sim_env(build_dir, out, {"TRAINTIME_SNAPSHOT_SEC": "1"}))
    try:
        deadline = time.monotonic() + 60
        seen: dict[int, tuple[str, int]] = {}
        while time.monotonic() < deadline and not OWN_THREADS <= {n for n, _ in seen.values()}:
            check(p.poll() is None, f"sim_train ended (exit status {p.returncode})")
            seen = threads_of(p.pid)
            time.sleep(0.05)
        c = Checks()
        names = {n for n, _ in seen.values()}
        c.check(OWN_THREADS <= names, f"threads of ours missing: {sorted(OWN_THREADS - names)} (seen {sorted(names)})")
        for tid, (name, mask) in sorted(seen.items()):
            if name in OWN_THREADS:
                c.check(all(blocks(mask, s) for s in ASYNCHRONOUS),
                        f"{name} ({tid}) leaves some of {[s.name for s in ASYNCHRONOUS]} unblocked: {mask:#x}")
                c.check(not any(blocks(mask, s) for s in SYNCHRONOUS),
                        f"{name} ({tid}) blocks some of {[s.name for s in SYNCHRONOUS]}: {mask:#x}")
            elif tid == p.pid:  # it started them: its own mask is as it was (sim_train blocks nothing)
                c.check(mask == 0, f"the application's main thread was left a mask of {mask:#x}")
        os.kill(p.pid, signal.SIGTERM)
        p.wait(timeout=60)
        c.check(p.returncode == -signal.SIGTERM, f"exit status {p.returncode}, expected death by SIGTERM")
        doc = load_json(out / "rank-00000.json")
        c.check(doc["exit_reason"] == "signal SIGTERM", f"exit_reason {doc['exit_reason']!r}")
        c.done()
    finally:
        kill_group(p)


def abort_on_processing_thread(build_dir: Path, tmp_path: Path, how: str) -> None:
    """RUNS runs: simgpu stops tt-cupti in the middle of ingest (SIMGPU_STOP_IN_INGEST) 1.1 to
    1.6 s after CUDA starts (the watchdog has refreshed the record, so figures were published);
    `how` is "abort" (abort() there) or "stall" (it sleeps there, and the test sends it SIGABRT
    with tgkill). Every run: the thread is tt-cupti, the final file appears within 2 s of the
    abort, its GPU figures are the last published ones and say so, and the process dies by
    SIGABRT."""
    rng = random.Random(43 if how == "abort" else 4343)
    failures = []
    for i in range(RUNS):
        out = tmp_path / f"run{i:02d}"
        marker = tmp_path / f"marker{i:02d}"
        delay = rng.uniform(1.1, 1.6)
        env = sim_env(build_dir, out, {"SIMGPU_STOP_IN_INGEST": f"{delay:.3f}:{how}:{marker}"})
        p = launch_loop(build_dir, env)
        rank_file = out / "rank-00000.json"
        try:
            deadline = time.monotonic() + 60
            while not marker.exists() and p.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
            if not marker.exists():
                failures.append(f"run {i}: the processing thread never ingested after {delay:.2f} s "
                                f"(exit status {p.poll()})")
                continue
            stopped_at = time.monotonic()
            tid_text, _, name = marker.read_text().strip().partition(" ")
            tid = int(tid_text)
            if name != "tt-cupti":
                failures.append(f"run {i}: ingest ran on a thread named {name!r}, not tt-cupti")
            if how == "stall":
                tgkill(p.pid, tid, signal.SIGABRT)
            while not rank_file.exists() and time.monotonic() - stopped_at < 30:
                time.sleep(0.002)
            written_after = time.monotonic() - stopped_at
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                failures.append(f"run {i}: still running 30 s after the SIGABRT")
                continue
        finally:
            kill_group(p)
        if p.returncode != -signal.SIGABRT:
            failures.append(f"run {i}: exit status {p.returncode}, expected death by SIGABRT; "
                            f"stderr: {p.stderr.read() if p.stderr else ''}")
        if not rank_file.exists():
            failures.append(f"run {i}: no rank file")
            continue
        if written_after > FILE_WITHIN_S:
            failures.append(f"run {i}: the rank file came {written_after:.2f} s after the SIGABRT")
        doc = load_json(rank_file)
        cupti = doc.get("modules", {}).get("cupti", {}).get("counters", {})
        if (doc["exit_reason"], doc["gpu_capture"], doc.get("gpu_records_complete")) != \
                ("signal SIGABRT", "cupti", False) or cupti.get("summary_from_last_publish") != 1:
            failures.append(f"run {i}: exit_reason {doc['exit_reason']!r}, gpu_capture {doc['gpu_capture']!r}, "
                            f"gpu_records_complete {doc.get('gpu_records_complete')!r}, cupti counters {cupti}")
        elif not any(w.startswith("the GPU figures are those last published") for w in doc["warnings"]):
            failures.append(f"run {i}: no warning says where the GPU figures come from: {doc['warnings']}")
        if doc["steps"]["count"] == 0:
            failures.append(f"run {i}: no step recorded")
    check(not failures, f"{len(failures)} failure(s) in {RUNS} runs:\n" + "\n".join(failures))


def test_abort_on_the_processing_thread_mid_ingest_writes_the_file_and_dies_by_sigabrt(
        build_dir: Path, tmp_path: Path) -> None:
    abort_on_processing_thread(build_dir, tmp_path, "abort")


def test_sigabrt_sent_to_the_processing_thread_mid_ingest_writes_the_file_and_dies_by_sigabrt(
        build_dir: Path, tmp_path: Path) -> None:
    abort_on_processing_thread(build_dir, tmp_path, "stall")
