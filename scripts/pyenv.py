#!/usr/bin/env python3
"""Creates the virtual environment of PyPI packages the tests run against (no GPU needed).

A current PyTorch (torch.compile, full backward pre-hooks: what Debian's 1.13 lacks) and the
tools users log live metrics to (Weights & Biases in offline mode, MLflow with a local store,
TensorBoard's own event reader). Versions are pinned below. The environment goes to OUT
(scripts/test.sh: <build>/pyenv) and is reused while its stamp matches the pins; pip's download
cache makes a rebuild cheap. Without network the environment is not made: one warning line, and
the tests that need it skip, naming this script. Uses Debian's /usr/bin/python3 (python3-venv).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

# PyTorch 2.11 is the release the GPU machines run (cu130 wheel; it runs on the CPU too).
PINS: list[str] = [
    "torch==2.11.0",
    "numpy==2.4.6",
    "wandb==0.23.1",
    "mlflow-skinny==3.6.0",
    "tensorboard==2.20.0",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder of the virtual environment")
    ap.add_argument("--python", default="/usr/bin/python3", help="interpreter to base it on")
    args = ap.parse_args()
    out: Path = args.out
    stamp = out / "traintime-pins.txt"
    wanted = "\n".join(PINS) + "\n"
    if stamp.is_file() and stamp.read_text() == wanted and (out / "bin" / "python").exists():
        return 0
    if out.exists():
        shutil.rmtree(out)
    made = subprocess.run([args.python, "-m", "venv", str(out)], capture_output=True, text=True)
    if made.returncode != 0:
        print(f"pyenv: warning: no virtual environment at {out}: {args.python} -m venv failed "
              f"({(made.stderr.strip().splitlines() or ['no output'])[-1]}); the tests that need "
              "PyPI's PyTorch, W&B, MLflow or TensorBoard are skipped", file=sys.stderr)
        return 0
    pip = [str(out / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    p = subprocess.run(pip + PINS, capture_output=True, text=True)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"pyenv: warning: pip could not install {' '.join(PINS)} ({last}); the tests that need "
              "them are skipped", file=sys.stderr)
        shutil.rmtree(out, ignore_errors=True)
        return 0
    stamp.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
