"""A tiny model trained by 2 processes under the real torchrun on the CPU (gloo), wrapped in DDP or
FSDP2 (fully_shard; fsdp-checkpoint: its middle layer under FSDP's checkpoint_wrapper) and
instrumented with one line (test_frameworks.py runs it under the preload).
STEPS optimizer steps of ACCUM micro-batches of BATCH sequences of SEQ tokens per rank; rank 0
prints one JSON line saying what ran."""
from __future__ import annotations

import argparse
import json

import torch
import torch.distributed as dist

import traintime
import traintime.torch

STEPS, ACCUM, BATCH, SEQ, VOCAB, DIM = 3, 2, 4, 8, 64, 16


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.body = torch.nn.Linear(DIM, DIM)
        self.head = torch.nn.Linear(DIM, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(self.embed(ids))))


def main(wrap: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model: torch.nn.Module = Net()
    if wrap == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        if wrap == "fsdp-checkpoint":  # FSDP's activation checkpointing (non-reentrant by default)
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
            model.body = checkpoint_wrapper(model.body)
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        fully_shard(model.body, mesh=mesh)
        fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    # DDP's module and the checkpoint wrapper's inner module are wrappers: they spend no level, so
    # depth=1 gives the same layers whatever wraps them.
    traintime.torch.instrument(model, opt, depth=1)
    torch.manual_seed(1 + rank)
    for _ in range(STEPS):
        for _ in range(ACCUM):
            ids = torch.randint(0, VOCAB, (BATCH, SEQ))
            loss = torch.nn.functional.cross_entropy(model(ids).reshape(-1, VOCAB), ids.reshape(-1)) / ACCUM
            loss.backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps({"wrap": wrap, "enabled": traintime.enabled(), "torch": torch.__version__,
                          "recompute_category": traintime.torch.recompute_category()}))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wrap", choices=["ddp", "fsdp", "fsdp-checkpoint"])
    main(ap.parse_args().wrap)
