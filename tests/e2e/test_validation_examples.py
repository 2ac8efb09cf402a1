"""The GPU validation's PyTorch programs (examples/torch_loop.py, examples/torch_exit_in_region.py)
run on the CPU under the preload with PyPI's current PyTorch, so a session lent a GPU does not
spend its device time on a broken script. Without CUDA they take their CPU paths: no events, no
graphs. Checked: every region the validation relies on is there (setup and final included, so
an annotated run can have nothing unattributed), the torch.profiler window exports a trace,
traintime.metrics() is logged once per step, and the options that need CUDA refuse clearly."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from testlib import SOURCE_DIR, Checks, clean_env, load_json, pyenv_python

LOOP = SOURCE_DIR / "examples" / "torch_loop.py"
EXIT = SOURCE_DIR / "examples" / "torch_exit_in_region.py"


def run(python: Path, build_dir: Path, out: Path, script: Path, *args: str) -> subprocess.CompletedProcess:
    env = clean_env({"TRAINTIME_OUTPUT": str(out), "LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"),
                     "PYTHONPATH": str(SOURCE_DIR / "annotate" / "python")})
    return subprocess.run([str(python), str(script), *args], env=env, capture_output=True, text=True,
                          timeout=240)


def test_torch_loop_cpu_path_with_profiler_window_and_metrics_log(build_dir: Path, tmp_path: Path) -> None:
    python = pyenv_python(build_dir)
    trace, log = tmp_path / "trace.json", tmp_path / "metrics.jsonl"
    p = run(python, build_dir, tmp_path / "out", LOOP, "--steps", "4", "--warmup", "2",
            "--profile-steps", "1:3", "--profile-trace", str(trace), "--metrics-log", str(log))
    assert p.returncode == 0, f"torch_loop.py exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    c = Checks()
    rows = {r["path"]: r["count"] for r in load_json(tmp_path / "out" / "rank-00000.json")["regions"]}
    want = {"setup": 1, "warmup": 2, "io": 4, "forward": 4, "backward": 4, "optimizer": 4, "final": 1}
    for path, count in want.items():
        c.check(rows.get(path) == count, f"region {path}: {rows.get(path)} entries, want {count}")
    events = json.loads(trace.read_text()).get("traceEvents", []) if trace.exists() else []
    c.check(any(e.get("cat") == "cpu_op" for e in events), f"profiler trace {trace} has no CPU op")
    lines = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    c.check(len(lines) == 2 + 4 + 1, f"{len(lines)} metrics lines, want one per step and one at the end")
    c.check(all("traintime/step" in m for m in lines), "a metrics line lacks traintime/step")
    c.check(bool(lines) and lines[-1].get("traintime/step") == 5, f"last metrics line: {lines[-1] if lines else None}")
    c.done()


def test_options_that_need_cuda_refuse_on_cpu(build_dir: Path, tmp_path: Path) -> None:
    python = pyenv_python(build_dir)
    p = run(python, build_dir, tmp_path / "g", LOOP, "--cuda-graphs", "--steps", "2")
    assert p.returncode != 0 and "--cuda-graphs needs a CUDA device" in p.stderr, p.stderr
    p = run(python, build_dir, tmp_path / "w", LOOP, "--profile-steps", "3:2", "--steps", "4")
    assert p.returncode == 2 and "--profile-steps 3:2" in p.stderr, p.stderr
    p = run(python, build_dir, tmp_path / "e", EXIT, "--launches", "3")
    assert p.returncode == 3 and "no CUDA device" in p.stderr, p.stderr
    # The region opened before torch was imported is still in the exit file.
    rows = {r["path"] for r in load_json(tmp_path / "e" / "rank-00000.json")["regions"]}
    assert "startup" in rows, rows
