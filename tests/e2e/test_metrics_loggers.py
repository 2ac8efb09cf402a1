"""traintime.metrics() into the tools users log to, with the README's one-liners, against the
real libraries from PyPI (scripts/pyenv.py) and no network: W&B in offline mode, MLflow with a
local file store, TensorBoard through torch's SummaryWriter. Each tool's own reader reads back
exactly what metrics() returned at every step, and the figures agree with the rank file."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from testlib import SOURCE_DIR, Checks, clean_env, load_json, pyenv_python

HERE = Path(__file__).resolve().parent
STEPS = 8


def test_metrics_logged_to_wandb_mlflow_and_tensorboard_read_back_equal(build_dir: Path, tmp_path: Path) -> None:
    python = pyenv_python(build_dir)
    env = clean_env({"LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"),
                     "TRAINTIME_OUTPUT": str(tmp_path / "out"),
                     "PYTHONPATH": str(SOURCE_DIR / "annotate" / "python"),
                     "WANDB_MODE": "offline", "WANDB_SILENT": "true",
                     "WANDB_DIR": str(tmp_path), "WANDB_CACHE_DIR": str(tmp_path / "wandb-cache"),
                     "WANDB_CONFIG_DIR": str(tmp_path / "wandb-config"),
                     "MLFLOW_TRACKING_URI": (tmp_path / "mlruns").as_uri()})
    p = subprocess.run([str(python), str(HERE / "metrics_loggers.py"), str(tmp_path), "--steps", str(STEPS)],
                       env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0 and p.stdout.startswith("enabled"), f"stdout {p.stdout!r}\nstderr {p.stderr}"
    returned = json.loads((tmp_path / "returned.json").read_text())
    r = subprocess.run([str(python), str(HERE / "read_logged_metrics.py"), str(tmp_path)],
                       env=clean_env(), capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    logged = json.loads(r.stdout)

    c = Checks()
    c.check(len(returned) == STEPS, f"{len(returned)} metrics dicts")
    for step, m in enumerate(returned):
        c.check(m.get("traintime/step") == step, f"step {step}: traintime/step {m.get('traintime/step')}")
        c.check({"traintime/step_ms", "traintime/samples_per_s", "traintime/tokens_per_s", "traintime/tflops"} <= set(m),
                f"step {step}: names {sorted(m)}")
    for tool, rows in logged.items():
        c.check(len(rows) == STEPS, f"{tool}: {len(rows)} steps read back")
        for step, (want, got) in enumerate(zip(returned, rows)):
            c.check(set(got) == set(want), f"{tool} step {step}: names {sorted(got)} != {sorted(want)}")
            for name, value in want.items():
                # TensorBoard keeps scalars as 32-bit floats; W&B and MLflow keep doubles.
                tol = 1e-6 * max(abs(value), 1e-30) if tool == "tensorboard" else 0.0
                c.check(name in got and abs(got[name] - value) <= tol,
                        f"{tool} step {step}: {name} = {got.get(name)}, metrics() said {value}")

    # Independent expectations: each step time lies within the loop's own clock readings around
    # the step markers, and the rates follow from what the loop put in (16 samples of 64 tokens,
    # 6 FLOPs per parameter per token, 33 088 parameters).
    marks = json.loads((tmp_path / "step-marks.json").read_text())
    c.check(len(marks) == STEPS, f"{len(marks)} step marks")
    check_step_times(c, [m["traintime/step_ms"] for m in returned], marks)
    flops_per_step = 6 * (64 * 256 + 256 + 256 * 64 + 64) * 16 * 64
    for step, m in enumerate(returned):
        secs = m["traintime/step_ms"] / 1e3
        c.check(abs(m["traintime/samples_per_s"] - 16 / secs) <= 1e-6 * m["traintime/samples_per_s"],
                f"step {step}: samples_per_s {m['traintime/samples_per_s']}, 16 samples in {secs} s")
        c.check(abs(m["traintime/tokens_per_s"] - 1024 / secs) <= 1e-6 * m["traintime/tokens_per_s"],
                f"step {step}: tokens_per_s {m['traintime/tokens_per_s']}")
        c.check(abs(m["traintime/tflops"] - flops_per_step / secs / 1e12) <= 1e-6 * m["traintime/tflops"],
                f"step {step}: tflops {m['traintime/tflops']}, {flops_per_step} FLOPs in {secs} s")

    # The rank file: the same steps (each detail row's wall time is the step's), the loop's
    # totals, and the wrapped loop's children (W&B's service) wrote nothing.
    doc = load_json(tmp_path / "out" / "rank-00000.json")
    steps = doc["steps"]
    c.check(steps["count"] == STEPS, f"rank file steps.count {steps['count']}")
    c.check(steps["samples"] == 16 * STEPS and steps["tokens"] == 1024 * STEPS,
            f"rank file samples {steps['samples']}, tokens {steps['tokens']}")
    walls = {row["index"]: row["wall_ns"] / 1e6 for row in steps["detail"]}
    c.check(sorted(walls) == list(range(STEPS)), f"detail rows for steps {sorted(walls)}")
    check_step_times(c, [walls.get(i, 0.0) for i in range(STEPS)], marks)
    files = sorted(x.name for x in (tmp_path / "out").glob("rank-*.json"))
    c.check(files == ["rank-00000.json"], f"rank files {files}")
    c.done()


def check_step_times(c: Checks, step_ms: list[float], marks: list[list[int]]) -> None:
    """Step k (k >= 1) ended inside the marker call k and began inside call k-1, so its time lies
    between (before_k - after_k-1) and (after_k - before_k-1) on the caller's monotonic clock
    (the clock traintime reads too; the slack covers rounding to ns and ms)."""
    for k in range(1, min(len(step_ms), len(marks))):
        lo = (marks[k][0] - marks[k - 1][1]) / 1e6
        hi = (marks[k][1] - marks[k - 1][0]) / 1e6
        slack = 1e-3 * hi + 1e-3
        c.check(lo - slack <= step_ms[k] <= hi + slack,
                f"step {k}: {step_ms[k]} ms, the caller's clock puts it in [{lo}, {hi}] ms")


SCRIPT = """
import json, sys, time
import traintime
out, marks = [], []
for s in range(6):
    with traintime.region("forward"):
        time.sleep(0.002)
    before = time.monotonic_ns()
    traintime.step(samples=4, tokens=64)
    marks.append([before, time.monotonic_ns()])
    out.append(traintime.metrics())
print(json.dumps({"enabled": traintime.enabled(), "metrics": out, "marks": marks}))
"""


def test_metrics_in_debian_python_agree_with_the_rank_file_and_are_empty_without_preload(
        build_dir: Path, tmp_path: Path) -> None:
    """No PyPI needed: the Python API itself, with Debian's interpreter."""
    env = clean_env({"TRAINTIME_OUTPUT": str(tmp_path / "out"), "TRAINTIME_WARMUP_STEPS": "1",
                     "PYTHONPATH": str(SOURCE_DIR / "annotate" / "python")})
    plain = subprocess.run(["/usr/bin/python3", "-W", "error", "-c", SCRIPT], env=env, capture_output=True,
                           text=True, timeout=60)
    assert plain.returncode == 0, plain.stderr
    got = json.loads(plain.stdout)
    assert got["enabled"] is False and got["metrics"] == [{}] * 6, got
    env["LD_PRELOAD"] = str(build_dir / "lib" / "libtraintime.so")
    p = subprocess.run(["/usr/bin/python3", "-W", "error", "-c", SCRIPT], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    run = json.loads(p.stdout)
    metrics, marks = run["metrics"], run["marks"]
    c = Checks()
    check_step_times(c, [m.get("traintime/step_ms", 0.0) for m in metrics], marks)
    for s, m in enumerate(metrics):
        c.check(m.get("traintime/step") == s and m.get("traintime/step_ms", 0) >= 2.0,
                f"step {s}: {m}")
        c.check(abs(m["traintime/samples_per_s"] - 4 / (m["traintime/step_ms"] / 1e3)) < 1e-6 * m["traintime/samples_per_s"],
                f"step {s}: samples_per_s {m['traintime/samples_per_s']}")
        c.check(not any(k.startswith("traintime/gpu_") or k in ("traintime/tflops", "traintime/mfu") for k in m),
                f"step {s}: figures nobody could know: {sorted(m)}")
    steps = load_json(tmp_path / "out" / "rank-00000.json")["steps"]
    walls = {row["index"]: row["wall_ns"] / 1e6 for row in steps["detail"]}
    c.check(sorted(walls) == list(range(6)), f"detail rows for steps {sorted(walls)}")
    check_step_times(c, [walls.get(i, 0.0) for i in range(6)], marks)
    c.check(steps["wall_ns"]["count"] == 5, f"wall statistics over {steps['wall_ns']['count']} steps, warm-up 1 of 6")
    c.check(steps["samples"] == 24 and steps["tokens"] == 384, f"samples {steps['samples']}, tokens {steps['tokens']}")
    c.done()
