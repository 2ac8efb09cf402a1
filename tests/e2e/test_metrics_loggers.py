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

    # The same steps in the rank file: the step times after warm-up add up to its wall total,
    # samples and tokens to its totals, and the wrapped loop's children (W&B's service) wrote nothing.
    doc = load_json(tmp_path / "out" / "rank-00000.json")
    steps = doc["steps"]
    c.check(steps["count"] == STEPS, f"rank file steps.count {steps['count']}")
    measured = [m["traintime/step_ms"] for m in returned[steps["warmup"]:]]
    c.check(abs(sum(measured) - steps["wall_ns"]["total_ns"] / 1e6) < 1e-6 * STEPS,
            f"metrics' step_ms after warm-up sum to {sum(measured)} ms, the rank file says "
            f"{steps['wall_ns']['total_ns'] / 1e6}")
    c.check(abs(max(measured) - steps["wall_ns"]["max_ns"] / 1e6) < 1e-6, "max step time differs")
    files = sorted(x.name for x in (tmp_path / "out").glob("rank-*.json"))
    c.check(files == ["rank-00000.json"], f"rank files {files}")
    c.check(abs(steps["tflops"] - sum(m["traintime/tflops"] * m["traintime/step_ms"] for m in returned[steps["warmup"]:])
                / sum(measured)) < 1e-6 * steps["tflops"], f"rank-file tflops {steps['tflops']}")
    c.done()


SCRIPT = """
import json, sys, time
import traintime
out = []
for s in range(6):
    with traintime.region("forward"):
        time.sleep(0.002)
    traintime.step(samples=4, tokens=64)
    out.append(traintime.metrics())
print(json.dumps({"enabled": traintime.enabled(), "metrics": out}))
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
    assert got == {"enabled": False, "metrics": [{}] * 6}, got
    env["LD_PRELOAD"] = str(build_dir / "lib" / "libtraintime.so")
    p = subprocess.run(["/usr/bin/python3", "-W", "error", "-c", SCRIPT], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    metrics = json.loads(p.stdout)["metrics"]
    c = Checks()
    for s, m in enumerate(metrics):
        c.check(m.get("traintime/step") == s and m.get("traintime/step_ms", 0) >= 2.0,
                f"step {s}: {m}")
        c.check(abs(m["traintime/samples_per_s"] - 4 / (m["traintime/step_ms"] / 1e3)) < 1e-6 * m["traintime/samples_per_s"],
                f"step {s}: samples_per_s {m['traintime/samples_per_s']}")
        c.check(not any(k.startswith("traintime/gpu_") or k in ("traintime/tflops", "traintime/mfu") for k in m),
                f"step {s}: figures nobody could know: {sorted(m)}")
    steps = load_json(tmp_path / "out" / "rank-00000.json")["steps"]
    measured = [m["traintime/step_ms"] for m in metrics[1:]]
    c.check(abs(sum(measured) - steps["wall_ns"]["total_ns"] / 1e6) < 1e-5,
            f"{sum(measured)} ms vs the rank file's {steps['wall_ns']['total_ns'] / 1e6}")
    c.check(abs(min(measured) - steps["wall_ns"]["min_ns"] / 1e6) < 1e-6, "min step time differs")
    c.done()
