"""Run by test_kineto_shares_cupti.py with the PyPI environment's interpreter: torch.profiler over
CPU and CUDA on a machine without a GPU. PyTorch itself calls libkineto_init with cpuOnly when it
sees no GPU, so the probe calls it first, as PyTorch does on a GPU machine (after CUDA initialised:
with --traintime, libtraintime.so's InitializeInjection stands for the driver's cuInit, so
traintime holds CUPTI's subscription before Kineto subscribes, and the profiled work is one
traintime step, so that the process leaves a rank file). Prints a JSON line."""
from __future__ import annotations

import argparse
import ctypes
import json
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traintime", type=Path, help="libtraintime.so (preloaded): start its GPU capture first")
    args = ap.parse_args()
    if args.traintime:
        ctypes.CDLL(str(args.traintime)).InitializeInjection()
    torch_cpu = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"))
    torch_cpu.libkineto_init(ctypes.c_bool(False), ctypes.c_bool(True))
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        torch.ones(64).sum()
    if args.traintime:
        import traintime  # annotate/python

        with traintime.region("profiled"):
            pass
        traintime.step()
    print(json.dumps({"torch": torch.__version__, "events": len(prof.events())}))


if __name__ == "__main__":
    main()
