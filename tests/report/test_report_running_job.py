"""The report of a job whose ranks still run under the preload (pytest; CTest label report):
read while both run, no rank is killed; after one is SIGKILLed, it is, with the step it reached.
Plain build only: the ranks are Python processes with the library preloaded, which a sanitizer
build's library cannot be without its runtime preloaded first."""
from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

from reportlib import run, summary
from test_report_honest import dead
from testlib import SOURCE_DIR, SYSTEM_PYTHON, clean_env


LOOP = """\
import sys, time, traintime
steps = int(sys.argv[1])
for _ in range(steps):
    with traintime.region("forward"):
        time.sleep(0.05)
    traintime.step(samples=1)
"""


def test_the_report_of_a_running_job_calls_no_rank_killed_until_one_is(build_dir: Path, tmp_path: Path) -> None:
    """Two real ranks under the preload: read while both run, no rank is killed; after rank 1 is
    SIGKILLed and rank 0 finished, rank 1 is killed, named with the step it reached."""
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    out = tmp_path / "out"
    procs = []
    for rank, steps in ((0, 60), (1, 400)):
        env = clean_env({"LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"), "TRAINTIME_OUTPUT": str(out),
                         "RANK": str(rank), "WORLD_SIZE": "2", "TRAINTIME_JOB_ID": "running-1",
                         "PYTHONPATH": str(SOURCE_DIR / "annotate" / "python")})
        procs.append(subprocess.Popen([str(SYSTEM_PYTHON), str(script), str(steps)], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    try:
        deadline = time.time() + 30
        while time.time() < deadline and len(list(out.glob("rank-*.live"))) < 2:
            time.sleep(0.1)
        time.sleep(1.5)  # a record refresh or two
        s, proc = summary(build_dir, out)
        assert proc.returncode == 0, proc.stderr
        assert s["stopped_ranks"] == [], f"a rank called dead while both run: {s['stopped_ranks']}"
        assert sorted(r["rank"] for r in s["running_ranks"]) == [0, 1], s["running_ranks"]
        text = run(build_dir, out).stdout
        assert "killed" not in text and "Ranks still running" in text, text
        procs[1].send_signal(signal.SIGKILL)
        procs[1].wait(timeout=30)
        assert procs[0].wait(timeout=60) == 0, procs[0].stderr.read() if procs[0].stderr else ""
        s, _ = summary(build_dir, out)
        assert list(dead(s)) == [1] and dead(s)[1]["state"] == "killed", s["stopped_ranks"]
        assert "no longer runs on this host" in dead(s)[1]["evidence"], dead(s)[1]
        assert dead(s)[1]["finished_ranks_steps"] == 60 and 0 < dead(s)[1]["steps"] < 400, dead(s)[1]
        text = " ".join(run(build_dir, out).stdout.split())
        assert f"Ranks that died: - rank 1 (host {socket.gethostname()}) killed at step" in text, text
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
