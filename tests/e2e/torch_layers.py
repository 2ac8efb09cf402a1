"""A small PyTorch model with named layers two levels deep, trained on the CPU from a DataLoader
and instrumented with one line: `traintime.torch.instrument(model, opt, depth=2,
dataloader=loader)`. Run by test_torch.py under LD_PRELOAD with Debian's PyTorch 1.13 and with
PyPI's current one; prints one JSON line saying what it ran. With --checkpoint the blocks run
under activation checkpointing (torch.utils.checkpoint, reentrant or not)."""
from __future__ import annotations

import argparse
import json

import torch

import traintime
import traintime.torch

BATCH, SEQ, VOCAB, DIM = 4, 8, 50, 16


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = torch.nn.Linear(DIM, DIM)
        self.mlp = torch.nn.Linear(DIM, DIM)
        self.act = torch.nn.ReLU(inplace=True)  # no parameters: no backward hooks

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.act(self.attn(x)))


class Net(torch.nn.Module):
    def __init__(self, checkpoint: str = "") -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.blocks = torch.nn.Sequential(Block(), Block())
        self.head = torch.nn.Linear(DIM, VOCAB)
        self.checkpoint = checkpoint

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        if self.checkpoint:
            import torch.utils.checkpoint
            x = torch.utils.checkpoint.checkpoint(self.blocks, x, use_reentrant=self.checkpoint == "reentrant")
        else:
            x = self.blocks(x)
        return self.head(x)


def fake_cuda_memory() -> dict:
    """This CPU-only torch with the five torch.cuda calls traintime.torch reads faked (no cleaner
    way to have allocator peaks without a GPU): step k (from 0) peaks at 1000 (k + 1) bytes
    allocated and 4096 (k + 1) reserved; each reset_peak_memory_stats() moves to the next step."""
    state = {"resets": 0, "devices": []}
    torch.cuda.is_initialized = lambda: True
    torch.cuda.current_device = lambda: 0
    torch.cuda.max_memory_allocated = lambda device=None: 1000 * (state["resets"] + 1)
    torch.cuda.max_memory_reserved = lambda device=None: 4096 * (state["resets"] + 1)

    def reset(device=None) -> None:
        state["devices"].append(device)
        state["resets"] += 1
    torch.cuda.reset_peak_memory_stats = reset
    return state


def main(steps: int, accum: int, compile_model: bool, twice: bool, half_tokens: bool, checkpoint: str,
         fake_memory: bool = False) -> None:
    torch.manual_seed(0)
    memory = fake_cuda_memory() if fake_memory else {"resets": 0, "devices": []}
    data = torch.randint(0, VOCAB, (steps * accum * BATCH, SEQ))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data), batch_size=BATCH)
    model: torch.nn.Module = Net(checkpoint)
    if compile_model:
        model = torch.compile(model, backend="eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    # --half-tokens: a tokens_per_batch callable (as for padded batches: count half the ids).
    tokens = (lambda ids: ids.numel() // 2) if half_tokens else None
    handle = traintime.torch.instrument(model, opt, depth=2, dataloader=loader, tokens_per_batch=tokens)
    if twice:
        handle = traintime.torch.instrument(model, opt, depth=2, dataloader=loader)
    forwards = nexts = 0
    it = iter(loader)
    for _ in range(steps):
        for _ in range(accum):
            (ids,) = next(it)
            nexts += 1
            logits = model(ids)
            forwards += 1
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids.reshape(-1)) / accum
            loss.backward()
        opt.step()
        opt.zero_grad()
    graph_breaks = 0
    if compile_model:
        from torch._dynamo.utils import counters
        graph_breaks = sum(counters["graph_break"].values())
    print(json.dumps({"enabled": traintime.enabled(), "steps": steps, "forwards": forwards, "nexts": nexts,
                      "graph_breaks": graph_breaks,
                      "torch": torch.__version__, "backward_modules": handle.backward_modules,
                      "loader_class": type(loader).__name__, "memory_resets": memory["resets"],
                      "memory_reset_devices": memory["devices"]}))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--accum", type=int, default=2)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (backend eager), then instrument it")
    ap.add_argument("--twice", action="store_true", help="call instrument twice")
    ap.add_argument("--half-tokens", action="store_true", help="tokens_per_batch= counts half the ids")
    ap.add_argument("--checkpoint", choices=["reentrant", "non-reentrant"], default="",
                    help="run the blocks under torch.utils.checkpoint")
    ap.add_argument("--fake-cuda-memory", action="store_true",
                    help="fake torch.cuda's allocator peaks (see fake_cuda_memory) on this CPU-only run")
    a = ap.parse_args()
    main(a.steps, a.accum, a.compile, a.twice, a.half_tokens, a.checkpoint, a.fake_cuda_memory)
