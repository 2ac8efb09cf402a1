"""traintime-report names a SIMULATED straggler (simgpu, tests/sim/README.md): 4 ranks of
sim_train under mpirun and LD_PRELOAD, rank 3's compute kernels stretched by SIMGPU_SLOWDOWN.

The expected cost comes from simgpu's own ground truth, not from the report: ranks 0-2 are
identical, so at every collective the second-shortest duration is theirs and rank 3's is the
shortest; the job's wait caused by rank 3 over the run is therefore rank 0's collective GPU time
minus rank 3's (the truth files' comm gpu_ns), spread over the steps.
"""
from __future__ import annotations

import html
import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from reportlib import edit, run, summary
from testlib import check, clean_env, load_json, reason_names

STEPS = 20


def sim_job(build_dir: Path, out: Path, slowdown: str, env: dict[str, str] | None = None) -> None:
    mpirun = shutil.which("mpirun")
    check(mpirun, "mpirun not found (install openmpi-bin)")
    for f in (build_dir / "lib" / "libtraintime.so", build_dir / "bin" / "sim_train",
              build_dir / "sim" / "libcupti.so.13"):
        check(f.exists(), f"{f} is not built")
    out.mkdir(parents=True)
    cmd = [mpirun, "--oversubscribe", "-np", "4", "-x", f"LD_LIBRARY_PATH={build_dir / 'sim'}",
           "-x", f"LD_PRELOAD={build_dir / 'lib' / 'libtraintime.so'}",
           "-x", f"TRAINTIME_CUPTI_LIB={build_dir / 'sim' / 'libcupti.so.13'}", "-x", f"TRAINTIME_OUTPUT={out}"]
    if slowdown:
        cmd += ["-x", f"SIMGPU_SLOWDOWN={slowdown}"]
    for k, v in (env or {}).items():
        cmd += ["-x", f"{k}={v}"]
    cmd += [str(build_dir / "bin" / "sim_train"), "--steps", str(STEPS), "--truth", str(out / "truth-%r.json")]
    p = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, f"sim job failed:\n{p.stdout}\n{p.stderr}"


def start_hung_job(build_dir: Path, out: Path) -> subprocess.Popen:
    """Two simulated ranks under the preload, snapshots every second, rank 1 hung before step 3's
    first collective (SIMGPU_HANG=1:3); the caller ends it."""
    mpirun = shutil.which("mpirun")
    check(mpirun, "mpirun not found (install openmpi-bin)")
    out.mkdir()
    cmd = [mpirun, "--oversubscribe", "-np", "2", "-x", f"LD_LIBRARY_PATH={build_dir / 'sim'}",
           "-x", f"LD_PRELOAD={build_dir / 'lib' / 'libtraintime.so'}",
           "-x", f"TRAINTIME_CUPTI_LIB={build_dir / 'sim' / 'libcupti.so.13'}",
           "-x", f"TRAINTIME_OUTPUT={out}", "-x", "TRAINTIME_SNAPSHOT_SEC=1", "-x", "SIMGPU_HANG=1:3",
           str(build_dir / "bin" / "sim_train"), "--steps", "8"]
    return subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def comm_gpu_ns(truth: dict) -> int:
    return sum(row["gpu_ns"] for row in truth["comm"])


def test_sim_straggler_is_named_with_its_cost(build_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "job"
    sim_job(build_dir, out, "3:1.5")
    s, proc = summary(build_dir, out)
    assert proc.returncode == 0, proc.stderr
    assert s["ranks"] == 4 and s["problems"] == []
    assert [x["rank"] for x in s["stragglers"]] == [3], s["stragglers"]
    truth = [load_json(out / f"truth-{r}.json") for r in range(4)]
    assert comm_gpu_ns(truth[0]) == comm_gpu_ns(truth[1]) == comm_gpu_ns(truth[2])  # ranks 0-2 identical
    expected_ms = (comm_gpu_ns(truth[0]) - comm_gpu_ns(truth[3])) / STEPS / 1e6
    assert expected_ms > 0.1, "the simulated slowdown made nobody wait"
    assert s["per_rank"][3]["per_step_ms"]["caused_wait"] == pytest.approx(expected_ms, rel=1e-6)
    # Rank 3 computes 1.5x as long as the median rank, at the clock of the others (simgpu's
    # nominal SM clock on every rank: SIMGPU_SLOWDOWN leaves the clocks alone).
    assert any("1.50x the median" in r for r in s["stragglers"][0]["reasons"])
    nominal = load_json(out / "truth-0.json")["gpu_health"]["sm_clock_mhz"]
    ghz = f"{nominal / 1000:.2f} GHz"
    assert f"its SM clock {ghz} median matches the others' {ghz}: its compute is slower at equal clocks" \
        in s["stragglers"][0]["reasons"], s["stragglers"][0]["reasons"]
    assert s["stragglers"][0]["clock"]["slower"] is False
    text = " ".join(run(build_dir, out).stdout.split())
    assert f"rank 3 (host " in text and "arrived last at" in text
    cost = s["stragglers"][0]["cost_ms_per_step"]
    # One cost figure, said with what it is: the job's step had rank 3 run at its peers' median.
    assert (f"had it run at the median of its peers, the job's step would go {s['stragglers'][0]['step_ms']:.2f} -> "
            f"{s['stragglers'][0]['step_ms_without']:.2f} ms/step") in text
    assert run(build_dir, out, "--fail-if", f"straggler_cost_ms>{cost / 2:.4f}").returncode == 1


def test_sim_without_slowdown_has_no_straggler(build_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "job"
    sim_job(build_dir, out, "")
    s, proc = summary(build_dir, out)
    assert proc.returncode == 0 and s["ranks"] == 4
    assert s["stragglers"] == [], s["stragglers"]
    assert s["collectives_matched"] > 0
    assert all(r["per_step_ms"]["wait"] == 0 for r in s["per_rank"])
    # Real files carry each step's wall time, so the step-time figures come from the rows, not
    # from the fallback for files without them.
    assert s["cpu_wall_source"] == "steps.detail", s["cpu_wall_source"]


def test_sim_hang_names_the_missing_rank_the_collective_and_what_it_was_doing(build_dir: Path,
                                                                            tmp_path: Path) -> None:
    """SIMGPU_HANG=1:3: rank 1 of 2 stops before step 3's first collective; rank 0 enters it and
    blocks. sim_train makes two bucketed AllReduces per step (4 layers, 2 per bucket), so step 3's
    first collective is the 7th on the world communicator. The job is cancelled once the
    periodic snapshots show both ranks in step 3; the files written on the signal must let the
    report name rank 1, AllReduce seq 7 and that rank 1 was in step 3, inside "backward"."""
    out = tmp_path / "job"
    p = start_hung_job(build_dir, out)
    try:
        deadline = time.monotonic() + 60
        in_step_3 = False
        while time.monotonic() < deadline and not in_step_3:
            time.sleep(0.5)
            check(p.poll() is None, "the hung job ended by itself")
            steps = []
            for r in range(2):
                f = out / f"rank-{r:05d}.json"
                try:
                    steps.append(json.loads(f.read_text())["steps"]["count"])
                except (OSError, ValueError, KeyError):
                    steps.append(-1)
            in_step_3 = all(s == 3 for s in steps)
        check(in_step_3, "the snapshots never showed both ranks in step 3")
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    s, proc = summary(build_dir, out)
    assert proc.returncode == 0, proc.stderr
    assert len(s["hangs"]) == 1, s["hangs"]
    h = s["hangs"][0]
    assert h["missing_ranks"] == [1] and h["waiting_ranks"] == [0], h
    assert h["op"] == "AllReduce" and h["seq"] == 7, h
    world = [c["id"] for c in load_json(out / "rank-00000.json")["communicators"] if c["size"] == 2]
    assert h["communicator"] in world, (h["communicator"], world)
    doing = h["missing"][0]["doing"]
    assert "step 3" in doing and "backward" in doing, doing


def test_sim_watch_once_names_the_hang_while_the_job_still_runs(build_dir: Path, tmp_path: Path) -> None:
    """SIMGPU_HANG=1:3 as above, but read while the job runs: `--watch --once` on the periodic
    snapshots names the collective rank 0 waits in (AllReduce seq 7), the rank that never entered
    it and what that rank was doing, and the job is still running when the screen is printed."""
    out = tmp_path / "job"
    p = start_hung_job(build_dir, out)
    try:
        deadline = time.monotonic() + 60
        screen = ""
        while time.monotonic() < deadline:
            time.sleep(0.5)
            check(p.poll() is None, "the hung job ended by itself")
            w = run(build_dir, out, "--watch", "--once")
            assert w.returncode == 0, w.stderr
            screen = w.stdout
            # Snapshots taken mid-step may show a collective some rank has not reached yet; the
            # hang is the one that stays.
            if "never entered AllReduce seq 7" in screen:
                break
        assert p.poll() is None, "the job ended before the screen named the hang"
        # The live screen: a hang first seen is a possible one; at the next read, an interval
        # later, still there, it is named as a hang. Ctrl-C ends the watch with status 0.
        w = subprocess.Popen([str(build_dir / "bin" / "traintime-report"), str(out), "--watch", "0.5"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2.5)
        w.send_signal(signal.SIGINT)
        live, live_err = w.communicate(timeout=30)
        assert w.returncode == 0, live_err
        assert p.poll() is None, "the job ended while it was watched"
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
    assert "2 of 2 ranks (2 running" in screen, screen
    assert "rank(s) 1 never entered AllReduce seq 7" in screen and "which rank(s) 0 wait in" in screen, screen
    assert "step 3 inside backward" in screen, screen
    assert "step reached: 3 on every rank" in screen, screen
    assert "HANG: AllReduce seq 7 on communicator " in screen and "never entered: rank(s) 1" in screen, screen
    screens = live.split("traintime-report --watch ")[1:]
    assert len(screens) >= 2, live
    assert "possible hang (first seen now" in screens[0] and "HANG:" not in screens[0], screens[0]
    assert "HANG: AllReduce seq 7" in screens[-1] and "for more than 0.5 s" in screens[-1], screens[-1]


def test_sim_throttled_gpu_is_sampled_and_named_as_the_stragglers_cause(build_dir: Path, tmp_path: Path) -> None:
    """SIMGPU_THROTTLE=3:0.7: rank 3's simulated GPU reports 0.7 of the nominal SM clock with
    thermal clock-event reasons, and its kernels run 1/0.7 slower. Every rank file's gpu_health
    must hold exactly what simgpu's NVML reported (the truth files' gpu_health), matched by the
    rank's PCI bus id; the report names rank 3 and its clock as the cause in every format, with
    its throttled steps (no warm-up, so the step the sampler's first reading falls in counts)."""
    out = tmp_path / "job"
    sim_job(build_dir, out, "", {"SIMGPU_THROTTLE": "3:0.7", "TRAINTIME_NVML_INTERVAL_MS": "10",
                                 "TRAINTIME_WARMUP_STEPS": "0"})
    truth = [load_json(out / f"truth-{r}.json")["gpu_health"] for r in range(4)]
    assert truth[3]["sm_clock_mhz"] < truth[0]["sm_clock_mhz"], "the throttle knob did not reach simgpu"
    for r in range(4):
        f = load_json(out / f"rank-{r:05d}.json")
        h = f["gpu_health"]
        assert h["status"] == "sampled" and h["interval_ms"] == 10, h
        assert len(h["devices"]) == 1, h
        d = h["devices"][0]
        assert d["pci_bus_id"] == f"0000:{r:02X}:00.0" and d["cuda_device"] == 0 and d["mig"] is False, d
        t = truth[r]
        for figures in [d["run"]] + d["steps"]:
            assert figures["samples"] >= 1
            assert figures["sm_clock_mhz"] == {"median": t["sm_clock_mhz"], "min": t["sm_clock_mhz"]}
            assert figures["mem_clock_mhz"]["median"] == t["mem_clock_mhz"]
            assert figures["power_w"] == {"median": pytest.approx(t["power_w"]), "limit": pytest.approx(t["power_limit_w"])}
            assert figures["temperature_c"]["max"] == t["temperature_c"]
            assert figures["clock_event_reasons"] == reason_names(t["clock_event_reasons"])
            assert figures["pcie"] == {"gen": t["pcie_gen"], "width": t["pcie_width"]}
            assert figures["memory"] == {"used_bytes_max": t["memory_used_bytes"], "total_bytes": t["memory_total_bytes"]}
        assert sum(st["samples"] for st in d["steps"]) <= d["run"]["samples"]
        assert f["modules"]["nvml"]["counters"] == {"samples": d["run"]["samples"], "failed_reads": 0}

    s, proc = summary(build_dir, out)
    assert proc.returncode == 0, proc.stderr
    assert [x["rank"] for x in s["stragglers"]] == [3], s["stragglers"]
    clock = s["stragglers"][0]["clock"]
    # Rank 3's steps after warm-up with an NVML sample (steps.detail[].gpu_health; a short step
    # may have none): simgpu reports the thermal reasons in every sample, so each of them is
    # throttled; their mean GPU span. Without such a step the clock carries no step counts.
    steps3 = load_json(out / "rank-00003.json")["steps"]
    sampled = [row for row in steps3["detail"]
               if not row.get("partial", False) and row["index"] >= steps3["warmup"] and row.get("gpu_health")]
    reasons3 = reason_names(truth[3]["clock_event_reasons"])
    assert all(set(h["clock_event_reasons"]) - {"gpu_idle"} for row in sampled for h in row["gpu_health"])
    expected = {"sm_clock_mhz": truth[3]["sm_clock_mhz"], "others_sm_clock_mhz": truth[0]["sm_clock_mhz"],
                "slower": True, "clock_event_reasons": reasons3}
    counted = ""
    if sampled:
        span_ms = sum(row["totals"]["gpu_busy_ns"] + row["totals"]["idle_ns"] for row in sampled) / len(sampled) / 1e6
        expected.update(sampled_steps=len(sampled), throttled_steps=len(sampled), throttle_reasons=reasons3,
                        throttled_step_ms=pytest.approx(span_ms, rel=1e-9), other_step_ms=None)
        counted = f"; a clock-event reason in {len(sampled)} of {len(sampled)} sampled steps"
    assert clock == expected, clock
    sentence = (f"rank 3's SM clock {truth[3]['sm_clock_mhz'] / 1000:.2f} GHz median vs "
                f"{truth[0]['sm_clock_mhz'] / 1000:.2f} GHz for the others; clock-event reasons "
                + ", ".join(reasons3) + counted)
    assert sentence in s["stragglers"][0]["reasons"], s["stragglers"][0]["reasons"]
    assert s["per_rank"][3]["gpu_health"]["sm_clock_mhz"] == truth[3]["sm_clock_mhz"]
    assert s["per_rank"][0]["gpu_health"]["temperature_max_c"] == truth[0]["temperature_c"]
    for fmt in ("text", "md", "html"):
        p = run(build_dir, out, "--format", fmt)
        assert p.returncode == 0, p.stderr
        shown = html.unescape(p.stdout) if fmt == "html" else p.stdout
        if fmt == "md":  # markdown escapes _ in text
            shown = shown.replace("\\_", "_")
        assert " ".join(sentence.split()) in " ".join(shown.split()), fmt
        if fmt == "html":  # the clocks and memory charts, rank 3's clock bar with its value
            assert 'id="chart-clocks"' in shown and 'id="chart-memory"' in shown
            assert f"3 SM clock median: {truth[3]['sm_clock_mhz']} MHz" in shown
    csv = run(build_dir, out, "--format", "csv")
    assert csv.returncode == 0, csv.stderr
    health = csv.stdout.split("# view: gpu_health\n", 1)[1].split("\n\n", 1)[0].splitlines()
    rows = {line.split(",")[0]: line.split(",") for line in health[1:]}
    assert rows["3"][1] == f"{truth[3]['sm_clock_mhz']:.1f}" and rows["0"][1] == f"{truth[0]['sm_clock_mhz']:.1f}", health
    assert rows["3"][-1] == " ".join(reason_names(truth[3]["clock_event_reasons"])) and rows["0"][-1] == "-", health
    assert s["per_rank"][2]["gpu_health"]["mig"] is False

    # A rank on a MIG instance: the table's note says its clocks are the whole GPU's.
    edit(out / "rank-00002.json", lambda j: j["gpu_health"]["devices"][0].update(mig=True))
    s, proc = summary(build_dir, out)
    assert proc.returncode == 0, proc.stderr
    assert s["per_rank"][2]["gpu_health"]["mig"] is True
    text = " ".join(run(build_dir, out).stdout.split())
    assert "Rank(s) 2 run on MIG instances: their clocks, power and temperature are the whole GPU's" in text


def test_sim_ranks_closest_to_memory_capacity_are_named(build_dir: Path, tmp_path: Path) -> None:
    """SIMGPU_MEMORY_USED=2:76,1:70: simgpu's NVML reports 76 and 70 of 80 GiB used on ranks 2 and
    1 (the nominal 3 GiB on the others). The report's memory view lists every rank least headroom
    first with simgpu's figures, and its diagnosis names rank 2 alone as under 10 % left."""
    out = tmp_path / "job"
    sim_job(build_dir, out, "", {"SIMGPU_MEMORY_USED": "2:76,1:70", "TRAINTIME_NVML_INTERVAL_MS": "10"})
    truth = [load_json(out / f"truth-{r}.json")["gpu_health"] for r in range(4)]
    assert truth[2]["memory_used_bytes"] == 76 << 30 and truth[1]["memory_used_bytes"] == 70 << 30, truth
    s, proc = summary(build_dir, out)
    assert proc.returncode == 0, proc.stderr
    left = {r: truth[r]["memory_total_bytes"] - truth[r]["memory_used_bytes"] for r in range(4)}
    order = sorted(range(4), key=lambda r: (left[r] / truth[r]["memory_total_bytes"], r))
    assert [m["rank"] for m in s["memory"]] == order == [2, 1, 0, 3], s["memory"]
    for m in s["memory"]:
        t = truth[m["rank"]]
        assert m["used_bytes_max"] == t["memory_used_bytes"] and m["total_bytes"] == t["memory_total_bytes"], m
        assert m["headroom_bytes"] == left[m["rank"]], m
        assert m["headroom_pct"] == pytest.approx(100 * left[m["rank"]] / t["memory_total_bytes"]), m
        assert m["near_capacity"] is (m["rank"] == 2), m
    host = s["per_rank"][2]["host"]
    line = (f"rank 2 (host {host}) 76.0 of 80.0 GiB used at its highest, 4.0 GiB "
            f"({100 * left[2] / truth[2]['memory_total_bytes']:.1f} %) left")
    for fmt in ("text", "md", "html"):
        p = run(build_dir, out, "--format", fmt)
        assert p.returncode == 0, p.stderr
        shown = " ".join((html.unescape(p.stdout) if fmt == "html" else p.stdout).replace("\\_", "_").split())
        assert "1 rank(s) with less than 10.0 % of their GPU's memory left" in shown, fmt
        assert line in shown, fmt
        assert "rank 1 (host" not in shown.split("GPU memory", 1)[1].split("(NVML's used memory", 1)[0], fmt
    csv = run(build_dir, out, "--format", "csv")
    assert csv.returncode == 0, csv.stderr
    rows = csv.stdout.split("# view: memory\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["2", "1", "0", "3"], rows
    assert rows[1].split(",")[2:6] == ["76.0", "80.0", "4.0", "5.0"], rows
    # Beside NVML's figures, CUPTI's peak of the rank's own allocations (sim_train's setup buffers).
    for m in s["memory"]:
        own = load_json(out / f"rank-{m['rank']:05d}.json")["memory"]
        assert m["allocated_peak_bytes"] == own["devices"][0]["peak_bytes"] > 0, (m, own)
    # The CI gate on the least headroom: 4 of 80 GiB left on rank 2 is 5 %.
    least = 100 * left[2] / truth[2]["memory_total_bytes"]
    assert s["metrics"]["memory_headroom_pct"] == pytest.approx(least), s["metrics"]
    held = run(build_dir, out, "--fail-if", f"memory_headroom_pct<{least + 1:.1f}")
    assert held.returncode == 1 and "memory_headroom_pct" in held.stderr, (held.returncode, held.stderr)
    passed = run(build_dir, out, "--fail-if", f"memory_headroom_pct<{least - 1:.1f}")
    assert passed.returncode == 0, (passed.returncode, passed.stderr)
