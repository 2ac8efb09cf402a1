#!/usr/bin/env python3
"""Creates the virtual environment of PyPI packages the tests run against (no GPU needed).

A current PyTorch (torch.compile, full backward pre-hooks: what Debian's 1.13 lacks), the
tools users log live metrics to (Weights & Biases in offline mode, MLflow with a local store,
TensorBoard's own event reader) and the frameworks users train with (Hugging Face transformers
and Accelerate, PyTorch Lightning, Megatron-core with the `nvtx` package, DeepSpeed:
tests/e2e/test_frameworks.py runs them on the CPU). The top-level versions are PINS and
SOURCE_PINS below; every package they pull in is pinned by scripts/pyenv-constraints.txt, so a new
release of a dependency cannot change what CI tests.

DeepSpeed publishes no wheel on PyPI, only its source, whose setup.py imports torch: it is built
after the rest, without build isolation (SOURCE_PINS, SOURCE_BUILD_ENV). Its ops are left to its
just-in-time compiler as usual, except the CPU accelerator's shared-memory collectives, which
every DeepSpeed process on the CPU loads when it starts: built here once (about 3 minutes on 2
cores) instead of in the first test that runs DeepSpeed.

Why PyPI's CUDA build of torch (5.0 GB installed: nvidia-* 2.7 GB, torch 1.2 GB, triton 0.6 GB)
and not PyTorch's CPU wheel: a test runs the real wheel's Kineto against a stand-in libcupti, and
only the CUDA build has that path (its libtorch_cpu.so has DT_NEEDED libcupti.so.13 and imports
20 cupti* symbols; the CPU build is made without CUDA, so its Kineto has no CUPTI). The CPU
wheels' index (download.pytorch.org) is also not reachable from every CI machine, PyPI is. The
nvidia-* libraries are DT_NEEDED by libtorch_cuda.so, so they cannot be left out either.

The environment is made once per set of pins: it lives in CACHE/pyenv-<key> (key: a hash of the
pins and constraints; CACHE: --cache-dir, TRAINTIME_PYENV_CACHE or ~/.cache/traintime) and OUT
(scripts/test.sh: <build>/pyenv) is a symbolic link to it, so every build folder and checkout of
the same pins shares one copy. pip gets a timeout and retries, and installs wheels only. Without
network the environment is not made: one warning line, and the tests that need it show as
"Not Run" (failed under TRAINTIME_CI), naming this script. Uses Debian's /usr/bin/python3
(python3-venv).

`--set hta` makes another environment the same way: HolisticTraceAnalysis (HTA_PINS, every
dependency pinned by scripts/pyenv-hta-constraints.txt), the analysis users run on torch.profiler
traces, which tests/sim/hta_compare.py sets beside traintime. HTA hard-requires jupyterlab,
pandas, plotly and pytest (about 500 MB, a minute to install), so it has an environment of its
own, CACHE/htaenv-<key>, made by the test that needs it rather than by scripts/test.sh.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from user_cache import traintime_cache  # noqa: E402  (the scripts' one cache folder)

# PyTorch 2.11 is the release the GPU machines run (cu130 wheel; it runs on the CPU too).
PINS: list[str] = [
    "torch==2.11.0",
    "numpy==2.4.6",
    "wandb==0.23.1",
    "mlflow-skinny==3.6.0",
    "tensorboard==2.20.0",
    "transformers==5.23.0",
    "accelerate==1.15.0",
    "lightning==2.6.6",
    # Megatron-core without extras (torch, numpy, packaging) and the NVTX package its
    # nvtx_decorator() uses; Transformer Engine and Apex need CUDA to build and are left out.
    "megatron-core==0.16.1",
    "nvtx==0.2.17",
]
# Built from source after PINS are installed (see above).
SOURCE_PINS: list[str] = ["deepspeed==0.19.8"]
SOURCE_BUILD_ENV: dict[str, str] = {"DS_ACCELERATOR": "cpu", "DS_BUILD_OPS": "0", "DS_BUILD_SHM_COMM": "1"}
ALL_PINS = PINS + SOURCE_PINS
CONSTRAINTS = Path(__file__).resolve().parent / "pyenv-constraints.txt"
# HolisticTraceAnalysis 0.5.0: the last release under this name (later ones are `traceinsight`,
# the same `import hta`), the one users have installed with `pip install HolisticTraceAnalysis`.
HTA_PINS: list[str] = ["holistictraceanalysis==0.5.0"]
HTA_CONSTRAINTS = Path(__file__).resolve().parent / "pyenv-hta-constraints.txt"
# auditwheel, which tests/wheel asks for the wheel's platform tag (a few MB).
WHEEL_TOOL_PINS: list[str] = ["auditwheel==6.8.2"]
WHEEL_TOOL_CONSTRAINTS = Path(__file__).resolve().parent / "wheel-tools-constraints.txt"


@dataclass(frozen=True)
class EnvSet:
    """One environment: what it installs, how it is pinned, and what lacks it when it cannot be made."""
    pins: list[str]
    constraints: Path
    prefix: str  # CACHE/<prefix>-<key>
    needed_by: str
    source_pins: list[str] = field(default_factory=list)
    source_env: dict[str, str] = field(default_factory=dict)


SETS: dict[str, EnvSet] = {
    "test": EnvSet(PINS, CONSTRAINTS, "pyenv", "the tests that need PyPI's PyTorch, W&B, MLflow, TensorBoard, "
                   "transformers, Lightning, Megatron-core or DeepSpeed", SOURCE_PINS, SOURCE_BUILD_ENV),
    "hta": EnvSet(HTA_PINS, HTA_CONSTRAINTS, "htaenv", "the comparison with HolisticTraceAnalysis "
                  "(tests/sim/hta_compare.py)"),
    "wheel-tools": EnvSet(WHEEL_TOOL_PINS, WHEEL_TOOL_CONSTRAINTS, "wheeltools", "the wheel's platform-tag tests "
                          "(tests/wheel: auditwheel)"),
}
STAMP = "traintime-pins.txt"
# A stalled download fails after PIP_TIMEOUT_S without data and is retried PIP_RETRIES times.
PIP_TIMEOUT_S = 60
PIP_RETRIES = 5


def env_key(pins: list[str], constraints: str) -> str:
    """The name of the environment for these pins: equal pins and constraints, equal key."""
    return hashlib.sha256(("\n".join(pins) + "\n--\n" + constraints).encode()).hexdigest()[:16]


def default_cache() -> Path:
    if os.environ.get("TRAINTIME_PYENV_CACHE"):
        return Path(os.environ["TRAINTIME_PYENV_CACHE"])
    return traintime_cache()


def is_ready(env: Path, wanted: str) -> bool:
    stamp = env / STAMP
    return stamp.is_file() and stamp.read_text() == wanted and (env / "bin" / "python").exists()


def point(out: Path, env: Path) -> None:
    """Makes OUT a link to env, replacing what was there (an older environment, a stale link)."""
    if out.is_symlink() or out.is_file():
        out.unlink()
    elif out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.symlink_to(env, target_is_directory=True)


def warn(text: str, needed_by: str) -> int:
    print(f"pyenv: warning: {text}; {needed_by} do not run (they fail under TRAINTIME_CI)", file=sys.stderr)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="where the environment is linked (e.g. build/pyenv)")
    ap.add_argument("--python", default="/usr/bin/python3", help="interpreter to base it on")
    ap.add_argument("--cache-dir", type=Path, default=None,
                    help="folder of the shared environments (default: TRAINTIME_PYENV_CACHE or ~/.cache/traintime)")
    ap.add_argument("--set", choices=sorted(SETS), default="test",
                    help="which environment: the tests' (default), HolisticTraceAnalysis's or the wheel tools (auditwheel)")
    args = ap.parse_args()
    out: Path = args.out
    chosen = SETS[args.set]
    constraints = chosen.constraints.read_text()
    pins = chosen.pins + chosen.source_pins
    key = env_key(pins, constraints)
    wanted = "\n".join(pins) + f"\nconstraints {key}\n"
    # Absolute: OUT links to it from another folder.
    env = (args.cache_dir or default_cache()).resolve() / f"{chosen.prefix}-{key}"
    if is_ready(env, wanted):
        if not (out.is_symlink() and out.resolve() == env.resolve()):
            point(out, env)
        return 0
    if env.exists():
        shutil.rmtree(env)  # a half-made environment of these pins
    env.parent.mkdir(parents=True, exist_ok=True)
    made = subprocess.run([args.python, "-m", "venv", str(env)], capture_output=True, text=True)
    if made.returncode != 0:
        return warn(f"no virtual environment at {env}: {args.python} -m venv failed "
                    f"({(made.stderr.strip().splitlines() or ['no output'])[-1]})", chosen.needed_by)
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "--only-binary=:all:", "--timeout", str(PIP_TIMEOUT_S), "--retries", str(PIP_RETRIES),
           "-c", str(chosen.constraints)]
    source = ["--no-build-isolation", "--no-binary=" + ",".join(pin.split("==")[0] for pin in chosen.source_pins)]
    steps = [(chosen.pins, pip + chosen.pins, {})]
    if chosen.source_pins:
        steps.append((chosen.source_pins, pip + source + chosen.source_pins, chosen.source_env))
    for what, command, extra_env in steps:
        p = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **extra_env})
        if p.returncode != 0:
            shutil.rmtree(env, ignore_errors=True)
            last = (p.stderr.strip().splitlines() or ["no output"])[-1]
            return warn(f"pip could not install {' '.join(what)} under {chosen.constraints.name} ({last})",
                        chosen.needed_by)
    (env / STAMP).write_text(wanted)
    point(out, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
