"""A small PyTorch loop (CPU) that logs traintime.metrics() every step to the tools ML engineers
use, with the one-liners the README shows: W&B (offline), MLflow (a local file store) and
TensorBoard (SummaryWriter). Run by test_metrics_loggers.py with the PyPI virtual environment's
Python under LD_PRELOAD; it writes what metrics() returned at every step to OUT/returned.json so
the test can read each tool's own storage back and compare, and to OUT/step-marks.json the
monotonic clock just before and after each step marker."""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Dict, List

import torch

import traintime


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor,
               marks: List[List[int]]) -> None:
    with traintime.region("forward"):
        loss = model(x).pow(2).mean()
    with traintime.region("backward"):
        opt.zero_grad()
        loss.backward()
    with traintime.region("optimizer"):
        opt.step()
    # The loop's own clock on both sides of the step marker: bounds for the step time that
    # owe nothing to traintime's bookkeeping.
    before = time.monotonic_ns()
    traintime.step(samples=x.shape[0], tokens=x.shape[0] * x.shape[1])
    marks.append([before, time.monotonic_ns()])


def main(out: Path, steps: int, tools: List[str]) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    traintime.set_flops(per_token=6 * sum(p.numel() for p in model.parameters()))
    returned: List[Dict[str, float]] = []
    marks: List[List[int]] = []

    run = writer = None
    if "wandb" in tools:
        import wandb
        run = wandb.init(project="traintime-test", mode="offline", dir=str(out))
    if "mlflow" in tools:
        import mlflow
        mlflow.set_tracking_uri((out / "mlruns").as_uri())
        mlflow.start_run()
    if "tensorboard" in tools:
        from torch.utils.tensorboard import SummaryWriter
        writer = SummaryWriter(log_dir=str(out / "tb"))

    for step in range(steps):
        train_step(model, opt, torch.randn(16, 64), marks)
        metrics = traintime.metrics()
        returned.append(metrics)
        if run is not None:
            wandb.log(metrics, step=step)
        if "mlflow" in tools:
            mlflow.log_metrics(metrics, step=step)
        if writer is not None:
            traintime.log_to_tensorboard(writer, step, values=metrics)

    if run is not None:
        run.finish()
        (out / "wandb-run-dir.txt").write_text(run.dir)
    if "mlflow" in tools:
        (out / "mlflow-run-id.txt").write_text(mlflow.active_run().info.run_id)
        mlflow.end_run()
    if writer is not None:
        writer.close()
    (out / "returned.json").write_text(json.dumps(returned))
    (out / "step-marks.json").write_text(json.dumps(marks))
    print("enabled" if traintime.enabled() else "disabled", os.getpid())


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--tools", default="wandb,mlflow,tensorboard")
    a = ap.parse_args()
    main(a.out, a.steps, a.tools.split(","))
