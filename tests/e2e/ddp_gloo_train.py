"""A small DDP training loop over gloo on the CPU, one process per rank (RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT from the environment, as torchrun sets them), instrumented with
traintime.torch.instrument. Used by tests/e2e/test_torch_comm.py.

--slow-rank R --slow-ms M: rank R's DataLoader sleeps M ms per batch (the straggler the report
must name). --hook before|after: the user registers their own DDP communication hook (a plain
allreduce that counts its calls) before or after instrument. Prints one JSON line: the calls of
the user's hook, the steps run, the warnings traintime raised, and whether the model was freed once
the script dropped it after destroy_process_group (nothing of traintime's may keep it).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import time
import warnings
import weakref

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import traintime.torch


class SlowData(torch.utils.data.Dataset):
    def __init__(self, n: int, delay_s: float) -> None:
        self.n, self.delay_s = n, delay_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.delay_s:
            time.sleep(self.delay_s)
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, generator=g), torch.randn(8, generator=g)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--slow-ms", type=float, default=0.0)
    ap.add_argument("--hook", choices=["none", "before", "after"], default="none")
    a = ap.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    # Two buckets' worth of gradients (bucket_cap_mb small), so DDP runs several allreduces a step.
    model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8)),
                bucket_cap_mb=0.05)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    delay = a.slow_ms / 1000.0 if rank == a.slow_rank else 0.0
    loader = torch.utils.data.DataLoader(SlowData(a.steps, delay), batch_size=1)

    calls = {"n": 0}

    # Unannotated: DDP checks a hook's annotations, and this module's are strings.
    def counting_allreduce(state, bucket):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        tensor = bucket.buffer().div_(dist.get_world_size())
        return dist.all_reduce(tensor, async_op=True).get_future().then(lambda f: f.value()[0])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if a.hook == "before":
            model.register_comm_hook(None, counting_allreduce)
        traintime.torch.instrument(model, opt, dataloader=loader)
        if a.hook == "after":
            model.register_comm_hook(None, counting_allreduce)
        steps = 0
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
        # A direct collective too: the loss averaged over the ranks.
        dist.all_reduce(loss.detach())
    dist.destroy_process_group()
    model_ref = weakref.ref(model)
    del model, opt, loader, x, y, loss
    gc.collect()
    print(json.dumps({"rank": rank, "hook_calls": calls["n"], "steps": steps,
                      "warnings": [str(w.message) for w in caught if "traintime" in str(w.message)],
                      "model_freed": model_ref() is None, "pid": os.getpid()}))


if __name__ == "__main__":
    main()
