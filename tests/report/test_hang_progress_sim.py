"""Inside a hung collective (docs/report.md "Hang forensics"): SIMULATED 2-rank jobs of sim_train
under mpirun and LD_PRELOAD, with traintime as simgpu's NCCL's profiler plugin. simgpu's network
transport (SIMGPU_NCCL_TRANSPORT=net, tests/sim/src/nccl_net.h) emits ProxyOp/ProxyStep events as
NCCL's net.cc does; SIMGPU_NET_STALL=7:0:3:2 stops rank 0's transfers on channel 3 after 2 of their
8 steps in the 7th collective (step 3's first AllReduce), so do rank 1's with rank 0 there, and
every other channel finishes (everyone stops together); 7:0:3:2:5 lets the transfers into rank 0
reach step 5, so rank 0's send is the one behind. Each rank's watchdog (TRAINTIME_HANG_SEC=2) writes its
suspected-hang file; the report must name the channel and peer that stopped and the bytes moved,
from the steps when ProxyStep was on, from the ops alone when it was off, and from the kernel
channels alone on an intra-node transport (no proxy events there).
"""
from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from reportlib import run, summary
from testlib import check, clean_env, kill_job, load_json, sim_cmd

STALL = "7:0:3:2"          # 7th collective, rank 0, channel 3, after 2 steps: every transfer there
BEHIND = "7:0:3:2:5"       # the same, the transfers into rank 0 after 5: rank 0's send is behind
STEPS, STEP_BYTES = 8, 64 << 10  # an 8 MiB AllReduce over 16 channels: 8 steps of 64 KiB each


def hung_files(build_dir: Path, tmp_path: Path, env: dict[str, str]) -> Path:
    """Runs the job until both ranks wrote their suspected-hang file; returns their copies."""
    out = tmp_path / "job"
    out.mkdir()
    # Steps of a second (real time), so the watchdog's once-a-second refresh flushes the records of
    # the steps before the hang: simgpu, like a normal CUPTI flush, never delivers a buffer that
    # also holds work that has not completed.
    cmd = sim_cmd(build_dir, out, 2, {"TRAINTIME_HANG_SEC": "2", **env},
                  [str(build_dir / "bin" / "sim_train"), "--steps", "8", "--step-sleep-us", "1000000"])
    p = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    saved = tmp_path / "hang-files"
    saved.mkdir()
    try:
        deadline = time.monotonic() + 90
        hung: set[int] = set()
        while time.monotonic() < deadline and len(hung) < 2:
            time.sleep(0.2)
            check(p.poll() is None, "the hung job ended by itself")
            for r in range(2):
                f = out / f"rank-{r:05d}.json"
                try:
                    doc = load_json(f)
                except (OSError, ValueError):
                    continue
                if doc.get("exit_reason") == "suspected hang" and r not in hung:
                    hung.add(r)
                    shutil.copy(f, saved / f.name)
        check(len(hung) == 2, f"suspected-hang files from ranks {sorted(hung)} only")
    finally:
        kill_job(p)
    return saved


def the_hang(build_dir: Path, files: Path) -> dict:
    s, proc = summary(build_dir, files)
    assert proc.returncode == 0, proc.stderr
    assert len(s["hangs"]) == 1, s["hangs"]
    h = s["hangs"][0]
    assert h["op"] == "AllReduce" and h["seq"] == 7, (h["op"], h["seq"], h["waiting_ranks"])
    return h


def network_rows(h: dict) -> list[dict]:
    return [r for r in h["progress"] if r["direction"] != "kernel"]


def test_a_transfer_stopped_part_way_is_named_with_its_channel_peer_and_bytes(build_dir: Path,
                                                                              tmp_path: Path) -> None:
    """ProxyStep on from the start: every rank entered, nobody is missing, and the report names
    channel 3 between ranks 0 and 1: rank 0's send to rank 1 (and rank 1's receive of it) 2 of 8
    steps done (128 KiB), the other direction 5 (320 KiB), 8 posted, waiting in send_wait /
    recv_wait; the one that stopped moving is rank 0's send, the one behind; the kernel channel 3
    never finished on either rank; the other 15 channels finished and are not listed. A PXN op of
    another process (SIMGPU_NCCL_PXN) is progressed on every collective and never read as ours."""
    files = hung_files(build_dir, tmp_path, {"SIMGPU_NCCL_TRANSPORT": "net", "SIMGPU_NET_STALL": BEHIND,
                                             "TRAINTIME_NCCL_PROXY_STEPS": "on", "SIMGPU_NCCL_PXN": "1"})
    for r in range(2):
        doc = load_json(files / f"rank-{r:05d}.json")
        assert doc["proxy_steps"] == "on", doc.get("proxy_steps")
        counters = doc["modules"]["nccl"]["counters"]
        assert counters["profiler_plugin_proxy_steps"] > 0 and counters["profiler_plugin_pxn_proxy_ops"] >= 7, counters
    h = the_hang(build_dir, files)
    assert h["all_entered"] is True and h["missing_ranks"] == [] and h["waiting_ranks"] == [0, 1], h
    assert h["progress_detail"] == "kernel_channel+proxy_step", h["progress_detail"]
    net = network_rows(h)
    assert sorted((r["rank"], r["direction"], r["peer"]) for r in net) == \
        [(0, "recv", 1), (0, "send", 1), (1, "recv", 0), (1, "send", 0)], net
    for r in net:
        out_of_rank0 = (r["rank"], r["direction"]) in ((0, "send"), (1, "recv"))
        done = 2 if out_of_rank0 else 5
        assert r["channel"] == 3 and r["source"] == "proxy_step", r
        assert (r["steps_done"], r["steps_posted"], r["steps_total"]) == (done, STEPS, STEPS), r
        assert r["bytes_done"] == done * STEP_BYTES and r["stopped_short"] is True, r
        assert r["state"] == ("send_wait" if r["direction"] == "send" else "recv_wait"), r
        assert r["idle_ns"] > 0 and r["since_ns"] > 0, r
    kernel = [r for r in h["progress"] if r["direction"] == "kernel"]
    assert sorted((r["rank"], r["channel"]) for r in kernel) == [(0, 3), (1, 3)], kernel
    assert all(r["peer"] is None and r["steps_done"] is None and r["bytes_done"] is None for r in kernel), kernel
    assert h["stopped_together"] is False, h
    assert h["stopped"].startswith("stopped moving: rank 0 channel 3 send to rank 1: 2 of 8 steps done (128.0 KiB)"), \
        h["stopped"]
    text = run(build_dir, files).stdout
    assert "every rank entered AllReduce seq 7" in text, text
    assert "inside it (kernel_channel+proxy_step): stopped moving: rank 0 channel 3 send to rank 1" in text, text
    flat = " ".join(text.split())
    assert "rank 0 channel 3 send to rank 1: 2 of 8 steps done (128.0 KiB), 8 posted; in send_wait" in flat, text
    assert "rank 1 channel 3: kernel channel never finished" in flat, text
    screen = " ".join(run(build_dir, files, "--watch", "--once").stdout.split())
    assert "every rank entered it" in screen and "stopped moving: rank 0 channel 3 send to rank 1" in screen, screen


def test_when_every_transfer_stopped_at_the_same_step_none_is_named_as_the_one_that_stopped(
        build_dir: Path, tmp_path: Path) -> None:
    """SIMGPU_NET_STALL=7:0:3:2: both ranks' transfers on channel 3, both directions, stopped after 2
    of 8 steps. Nobody is behind, so the report says they stopped together and where (channel 3 of
    ranks 0 and 1, 2 of 8 steps) and names no single rank, channel and peer as the one that stopped
    (before, the row idle longest was named: the order in which the ranks wrote their files)."""
    files = hung_files(build_dir, tmp_path, {"SIMGPU_NCCL_TRANSPORT": "net", "SIMGPU_NET_STALL": STALL,
                                             "TRAINTIME_NCCL_PROXY_STEPS": "on"})
    h = the_hang(build_dir, files)
    net = network_rows(h)
    assert len(net) == 4 and all(r["steps_done"] == 2 for r in net), net
    assert h["stopped_together"] is True, h
    assert h["stopped"] == ("stopped together: every transfer in flight (channel 3 of ranks 0, 1) stopped at 2 of 8 "
                            "steps done; none is behind the others"), h["stopped"]
    text = " ".join(run(build_dir, files).stdout.split())
    assert "inside it (kernel_channel+proxy_step): stopped together: every transfer in flight" in text, text
    assert "stopped moving" not in text, text
    screen = " ".join(run(build_dir, files, "--watch", "--once").stdout.split())
    assert "stopped together" in screen and "stopped moving" not in screen, screen


def test_with_proxy_steps_off_the_stopped_transfers_are_named_without_bytes(build_dir: Path,
                                                                             tmp_path: Path) -> None:
    """TRAINTIME_NCCL_PROXY_STEPS=auto (the default): the watchdog suspects the rank at half of
    TRAINTIME_HANG_SEC, too late for the collective already in flight, so its rows come from the
    ProxyOp events alone: the same channel and peers, their total steps, steps and bytes n/a
    (null, never 0)."""
    files = hung_files(build_dir, tmp_path, {"SIMGPU_NCCL_TRANSPORT": "net", "SIMGPU_NET_STALL": STALL})
    for r in range(2):
        doc = load_json(files / f"rank-{r:05d}.json")
        assert doc["proxy_steps"] == "auto", doc.get("proxy_steps")
        counters = doc["modules"]["nccl"]["counters"]
        assert counters["profiler_plugin_proxy_steps"] == 0, counters
        assert counters["profiler_plugin_suspected"] == 1, counters
        assert counters["profiler_plugin_suspected_straggler"] == 0, counters  # no collective ran long
    h = the_hang(build_dir, files)
    assert h["progress_detail"] == "kernel_channel+proxy_op", h["progress_detail"]
    net = network_rows(h)
    assert sorted((r["rank"], r["channel"], r["direction"]) for r in net) == \
        [(0, 3, "recv"), (0, 3, "send"), (1, 3, "recv"), (1, 3, "send")], net
    for r in net:
        assert r["source"] == "proxy_op" and r["state"] == "in_progress" and r["steps_total"] == STEPS, r
        assert r["steps_done"] is None and r["steps_posted"] is None and r["bytes_done"] is None, r
    text = " ".join(run(build_dir, files).stdout.split())
    assert "steps done n/a (ProxyStep was off)" in text, text


def test_an_intra_node_transport_names_the_channels_that_never_finished(build_dir: Path, tmp_path: Path) -> None:
    """The default transport (intra-node: no proxy): no ProxyOp at all; the report names the
    kernel channel that never finished on each rank (channel 3) and nothing else."""
    files = hung_files(build_dir, tmp_path, {"SIMGPU_NET_STALL": STALL})
    for r in range(2):
        counters = load_json(files / f"rank-{r:05d}.json")["modules"]["nccl"]["counters"]
        assert counters["profiler_plugin_proxy_ops"] == 0, counters
    h = the_hang(build_dir, files)
    assert h["progress_detail"] == "kernel_channel", h["progress_detail"]
    assert sorted((r["rank"], r["channel"], r["direction"]) for r in h["progress"]) == \
        [(0, 3, "kernel"), (1, 3, "kernel")], h["progress"]


def test_watch_shows_the_stalled_transfer_live_from_the_running_ranks_records(build_dir: Path, tmp_path: Path) -> None:
    """--watch on a job hung inside a collective, long before its watchdog would fire
    (TRAINTIME_HANG_SEC=600): no rank file exists, only the ranks' always-current records
    (rank-*.live), whose proxy_progress is refreshed every period. Once rank 0's send on channel 3
    has stood still for 5 s, the one-shot screen names the hang and the transfer that stopped
    (rank 0 channel 3 send to rank 1, 2 of 8 steps); the JSON summary says stalled_inside. Before,
    a collective every rank entered was a hang only once a watchdog wrote its suspected-hang file."""
    out = tmp_path / "job"
    out.mkdir()
    env = {"TRAINTIME_HANG_SEC": "600", "SIMGPU_NCCL_TRANSPORT": "net", "SIMGPU_NET_STALL": BEHIND,
           "TRAINTIME_NCCL_PROXY_STEPS": "on"}
    cmd = sim_cmd(build_dir, out, 2, env,
                  [str(build_dir / "bin" / "sim_train"), "--steps", "8", "--step-sleep-us", "1000000"])
    p = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    screen = ""
    try:
        # Each rank's record is refreshed once a second, each on its own clock: a screen read just
        # after rank 1 entered seq 7 can hold rank 0's record from before it entered, and names
        # rank 0 as never having entered (true of that record; --watch without --once calls such a
        # hang "possible" until the next read). Wait for the screen both refreshed records give.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            time.sleep(1)
            check(p.poll() is None, "the hung job ended by itself")
            screen = " ".join(run(build_dir, out, "--watch", "--once").stdout.split())
            if "HANG: AllReduce seq 7" in screen and "every rank entered it" in screen and "5.0 s or more" in screen:
                break
        assert sorted(f.name for f in out.glob("rank-*")) == ["rank-00000.live", "rank-00001.live"], \
            sorted(f.name for f in out.iterdir())
        assert "HANG: AllReduce seq 7" in screen and "every rank entered it" in screen, screen
        assert "a transfer inside it moved part way, then not for 5.0 s or more" in screen, screen
        assert "stopped moving: rank 0 channel 3 send to rank 1: 2 of 8 steps done (128.0 KiB)" in screen, screen
        s, proc = summary(build_dir, out)
        assert proc.returncode == 0, proc.stderr
        assert len(s["hangs"]) == 1 and s["hangs"][0]["stalled_inside"] is True, s["hangs"]
        assert s["hangs"][0]["all_entered"] is True and s["hangs"][0]["from_snapshots"] is True, s["hangs"]
    finally:
        kill_job(p)


def test_a_straggler_appearing_mid_run_turns_proxy_steps_on_for_the_ranks_that_wait(build_dir: Path,
                                                                                     tmp_path: Path) -> None:
    """TRAINTIME_NCCL_PROXY_STEPS=auto and no hang: rank 1's compute runs 20 times longer from the
    12th collective on (SIMGPU_SLOWDOWN_FROM), so rank 0 waits in every AllReduce after it for ms
    where the same 8 MiB AllReduce took 91 us before. Rank 0's watchdog sees a collective more than
    4 times its op's recent median (core/straggler_sign.h) and asks NCCL for ProxyStep: its file
    counts the suspicion and ProxyStep events; rank 1, the straggler, never waits and asks for
    none. Before, only a collective in flight past half of TRAINTIME_HANG_SEC turned them on.
    The watchdog looks once a period, at least 1 s but longer on a loaded machine (1000 times a
    refresh's cost): the run goes on for about 12 s after the straggler appears, so collectives are
    still enqueued after the look that raised the suspicion (with 10 steps, a loaded machine's
    look came after the last one)."""
    out = tmp_path / "job"
    out.mkdir()
    env = {"SIMGPU_NCCL_TRANSPORT": "net", "SIMGPU_SLOWDOWN": "1:20", "SIMGPU_SLOWDOWN_FROM": "12"}
    cmd = sim_cmd(build_dir, out, 2, env,
                  [str(build_dir / "bin" / "sim_train"), "--steps", "16", "--step-sleep-us", "1000000"])
    p = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    waiting = load_json(out / "rank-00000.json")["modules"]["nccl"]["counters"]
    straggler = load_json(out / "rank-00001.json")["modules"]["nccl"]["counters"]
    assert waiting["profiler_plugin_suspected_straggler"] >= 1 and waiting["profiler_plugin_suspected"] == 0, waiting
    assert waiting["profiler_plugin_proxy_steps"] > 0, waiting
    assert straggler["profiler_plugin_suspected_straggler"] == 0, straggler
    assert straggler["profiler_plugin_proxy_steps"] == 0, straggler
