#!/usr/bin/env python3
"""Exit with a region still open that was opened before CUDA initialised (docs/validation.md).

    LD_PRELOAD=build/lib/libtraintime.so python3 examples/torch_exit_in_region.py \
        --launches 2000 --expect-out expect.json

Opens `traintime.region("startup")` before torch initialises CUDA, never closes it, launches
--launches elementwise kernels (one `add_` each on a 64 MiB tensor, so the last ones are still
running when the interpreter exits) and returns from main without synchronising. traintime's exit
path must then still flush CUPTI before CUDA's own teardown: the rank file must say
`exit_reason: "exit"`, `gpu_records_complete: true`, and hold every launched kernel in the
`startup` region. scripts/check_gpu_run.py exit judges it against --expect-out, which records
how many kernels the program launched (counted here, not by traintime).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent / "annotate" / "python"))

import traintime  # noqa: E402  (the region opens before torch is even imported)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--expect-out", type=Path, help="JSON with the kernels this program launched")
    a = ap.parse_args()
    if a.launches < 1:
        ap.error("--launches must be >= 1")

    traintime.region("startup").__enter__()  # deliberately never closed
    import torch

    if not torch.cuda.is_available():
        print("torch_exit_in_region.py: no CUDA device: nothing to check", file=sys.stderr)
        return 3
    x = torch.empty(16 << 20, device="cuda")  # 64 MiB of fp32; empty() launches no kernel
    for _ in range(a.launches):
        x.add_(1.0)
    if a.expect_out:
        a.expect_out.write_text(json.dumps({
            "schema": "traintime-exit-in-region/1", "region": "startup",
            "kernels_launched": a.launches, "pid": os.getpid(),
            "note": "one vectorized add kernel per add_ on a contiguous fp32 tensor"}))
    print(f"torch_exit_in_region: {a.launches} kernels launched, exiting without synchronising")
    return 0


if __name__ == "__main__":
    sys.exit(main())
