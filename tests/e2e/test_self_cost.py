"""traintime's own cost in the rank file (docs/schema.md "self_cost"), checked against what the
kernel and the simulated CUPTI say from outside. SIMULATED GPU (simgpu, tests/sim/README.md).

- Each thread of ours is in self_cost.threads, and its cpu_ns agrees with the kernel's
  /proc/PID/task/TID/schedstat (nanoseconds of CPU time) read while the process runs, right
  after a periodic snapshot: within 5 % or 20 ms.
- A thread of ours the process runs that self_cost does not list fails the test.
- A sim_train run's file has every module's rows: the launch callbacks estimated from samples,
  the buffer callbacks and flushes timed in full, CUPTI's own overhead records exactly as simgpu
  wrote them, the annotations, its memory, what it wrote, and pct over the measured steps.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from testlib import Checks, check, load_json, sim_env

OWN_THREADS = {"tt-cupti", "tt-writer", "tt-snapshot", "tt-hang", "tt-nvml"}
SNAPSHOTS = 3            # compare after the third periodic snapshot (a second apart)
TOLERANCE_PCT = 5.0
TOLERANCE_NS = 20_000_000
COMMAND_BUFFER_FULL_NS = 20_000  # tests/sim/src/sim_costs.h
BUFFER_FLUSH_NS = 3_000


def own_threads(pid: int) -> dict[str, list[int]]:
    """name -> tids of the threads of ours in process pid."""
    out: dict[str, list[int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
        except OSError:
            continue
        if name.startswith("tt-"):
            out.setdefault(name, []).append(int(task.name))
    return out


def schedstat_ns(pid: int, tid: int) -> int:
    """The thread's CPU time so far, in ns (schedstat's first field; stat counts 10 ms ticks)."""
    return int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])


def file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


def test_thread_cpu_time_agrees_with_schedstat_and_no_thread_of_ours_is_missing(build_dir: Path,
                                                                                tmp_path: Path) -> None:
    out = tmp_path / "out"
    rank_file = out / "rank-00000.json"
    # A launch-bound loop with a short sleep per step: tt-cupti works all the time, the others now
    # and then; snapshots every second start tt-snapshot, the others start with capture.
    env = sim_env(build_dir, out, {"TRAINTIME_SNAPSHOT_SEC": "1"})
    p = subprocess.Popen([str(build_dir / "bin" / "sim_train"), "--steps", "100000000", "--step-sleep-us", "200"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        seen: set[tuple[int, int]] = set()
        snapshot = None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            check(p.poll() is None, f"sim_train ended (exit status {p.returncode})")
            fid = file_id(rank_file)
            if fid is not None and fid not in seen:
                # Read the kernel's figures first, then the file the snapshot thread just renamed.
                kernel = {name: [schedstat_ns(p.pid, t) for t in tids] for name, tids in own_threads(p.pid).items()}
                seen.add(fid)
                if len(seen) >= SNAPSHOTS:
                    snapshot = load_json(rank_file)
                    break
            time.sleep(0.001)
        check(snapshot is not None, f"no {SNAPSHOTS} snapshots in 90 s")
        c = Checks()
        c.check(snapshot["snapshot"], "the file compared is not a snapshot")
        rows = {t["name"]: t["cpu_ns"] for t in snapshot["self_cost"]["threads"]}
        running = set(kernel)
        c.check(OWN_THREADS <= running, f"threads of ours not running: {sorted(OWN_THREADS - running)}")
        missing = running - set(rows)
        c.check(not missing, f"threads of ours missing from self_cost.threads: {sorted(missing)} (rows {rows})")
        c.check(set(rows) <= OWN_THREADS, f"self_cost.threads names no thread of ours: {sorted(set(rows) - OWN_THREADS)}")
        for name in sorted(running & set(rows)):
            outside = sum(kernel[name])
            inside = rows[name]
            tolerance = max(TOLERANCE_NS, outside * TOLERANCE_PCT / 100)
            c.check(abs(outside - inside) <= tolerance,
                    f"{name}: self_cost {inside / 1e6:.1f} ms, schedstat {outside / 1e6:.1f} ms "
                    f"(more than {tolerance / 1e6:.1f} ms apart)")
        c.check(rows.get("tt-cupti", 0) > 0, "tt-cupti used no CPU time in a launch-bound loop")
        c.done()
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=60)


def test_a_sim_run_file_has_every_modules_rows(build_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = sim_env(build_dir, out, {"SIMGPU_COMMAND_BUFFER_FULL_EVERY": "100", "TRAINTIME_SNAPSHOT_SEC": "1",
                                   "TRAINTIME_WARMUP_STEPS": "2"})
    r = subprocess.run([str(build_dir / "bin" / "sim_train"), "--steps", "400", "--step-sleep-us", "5000",
                        "--truth", str(tmp_path / "truth.json")],
                       env=env, capture_output=True, text=True, timeout=240)
    check(r.returncode == 0, f"sim_train failed ({r.returncode}): {r.stderr}")
    doc = load_json(out / "rank-00000.json")
    truth = load_json(tmp_path / "truth.json")
    s = doc["self_cost"]
    rows = {(x["module"], x["what"]): x for x in s["callbacks"]}
    c = Checks()

    launches = doc["capture_stats"]["launch_callbacks"]
    launch = rows.get(("cupti", "launch callbacks"))
    if c.check(launch is not None, f"no launch callbacks row in {sorted(rows)}"):
        c.check(launch["calls"] == launches, f"launch callbacks: {launch['calls']} calls, {launches} launches")
        c.check(launch["sampled_every"] == 1024 and launch["estimated"], f"launch callbacks not sampled: {launch}")
        c.check(launch["samples"] + launch["interrupted"] >= launches // 1024 - 1,
                f"launch callbacks: {launch['samples']} timed of {launches} launches")
        c.check(0 < launch.get("estimated_ns", 0) < launches * 10_000,
                f"launch callbacks: {launch.get('estimated_ns')} ns for {launches} launches")
    buffers = rows.get(("cupti", "buffer callbacks"))
    if c.check(buffers is not None, "no buffer callbacks row"):
        c.check(buffers["sampled_every"] == 1 and not buffers["estimated"] and buffers["samples"] == buffers["calls"],
                f"buffer callbacks not timed in full: {buffers}")
        c.check(buffers["calls"] >= 2, f"buffer callbacks: {buffers['calls']} calls")  # a request and a completion
    flushes = rows.get(("cupti", "flushes"))
    c.check(flushes is not None and flushes["calls"] >= 1, f"no flush timed (the forced one at exit): {flushes}")

    # CUPTI's overhead records, as simgpu wrote them: every 100th kernel found the command buffer
    # full (the regions' kernels are some of the kernels; every kernel was a launch).
    region_kernels = sum(r["kernels"] for r in truth.get("regions", []))
    full = rows.get(("cupti", "CUPTI overhead: command buffer full"))
    if c.check(full is not None, f"no row of CUPTI's command buffer full records in {sorted(rows)}"):
        c.check(region_kernels // 100 <= full["calls"] <= launches // 100 + 1,
                f"command buffer full: {full['calls']} records, {region_kernels} kernels in regions, {launches} launches")
        c.check(full["estimated_ns"] == full["calls"] * COMMAND_BUFFER_FULL_NS and not full["estimated"],
                f"command buffer full: {full}")
    flush = rows.get(("cupti", "CUPTI overhead: buffer flush"))
    if c.check(flush is not None, "no row of CUPTI's buffer flush records"):
        c.check(flush["calls"] >= 1 and flush["estimated_ns"] == flush["calls"] * BUFFER_FLUSH_NS,
                f"buffer flush: {flush}")

    ann = rows.get(("annotations", "annotations"))
    if c.check(ann is not None, "no annotations row"):
        c.check(ann["calls"] >= 2 * 400, f"annotations: {ann['calls']} calls for 400 steps")
        c.check(ann.get("estimated_ns", 0) > 0, f"annotations not measured: {ann}")
    # tt_step: every call counted, about one in 16 timed at random (gaps of 1 to 31 steps).
    steps = rows.get(("annotations", "steps"))
    if c.check(steps is not None, "no steps row"):
        c.check(steps["calls"] == doc["steps"]["count"] and steps["sampled_every"] == 16 and steps["estimated"],
                f"steps: {steps}, {doc['steps']['count']} steps")
        c.check(steps["samples"] + steps["interrupted"] >= steps["calls"] // 31 - 1,
                f"steps: {steps['samples']} timed of {steps['calls']}")
        c.check(steps.get("estimated_ns", 0) > 0, f"steps not measured: {steps}")

    memory = {(m["module"], m["what"]): m["peak_bytes"] for m in s["memory"]}
    for key in (("cupti", "activity buffers"), ("cupti", "correlation table"), ("cupti", "GPU aggregator"),
                ("annotations", "thread states"), ("annotations", "names and paths"), ("preload", "always-current record")):
        c.check(memory.get(key, 0) > 0, f"self_cost.memory has no {key}: {memory}")
    c.check(s["peak_bytes"] == sum(memory.values()), f"peak_bytes {s['peak_bytes']} is not the rows' sum")
    c.check(s["written_bytes"] > 0, "written_bytes 0 with snapshots every second")
    c.check(s["callbacks_ns"] == sum(x.get("estimated_ns", 0) for x in s["callbacks"]), "callbacks_ns is not the rows' sum")
    c.check(s["estimated"] is True, "estimated false with sampled rows")
    wall = doc["steps"]["wall_ns"]["total_ns"]
    c.check("pct" in s and s["steps_wall_ns"] == wall, f"pct over {s.get('steps_wall_ns')} ns, steps' wall {wall}")
    if "pct" in s:
        c.check(abs(s["pct"] - 100 * s["steps_callbacks_ns"] / wall) < 1e-6, f"pct {s['pct']} is not the share")
        c.check(0 < s["steps_callbacks_ns"] <= s["callbacks_ns"], f"steps_callbacks_ns {s['steps_callbacks_ns']}")
    c.check({t["name"] for t in s["threads"]} >= {"tt-cupti", "tt-snapshot", "tt-hang"}, f"threads: {s['threads']}")
    c.done()
