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


def own_allocated_peak(k: int) -> int:
    """The fake allocator's own peak of step k: not monotonic, so that a running peak and a
    step's own differ."""
    return 1000 * (k + 1) if k % 2 == 0 else 500


def fake_cuda_memory() -> dict:
    """This CPU-only torch with the seven torch.cuda calls traintime.torch reads faked (no cleaner
    way to have allocator figures without a GPU). Step k (from 0; the loop below moves state
    "step" on after each optimizer step) allocates at most own_allocated_peak(k) bytes and
    reserves 4096 (k + 1), and ends with 100 (k + 1) allocated and 2048 (k + 1) reserved; the peaks
    cover the steps since the last reset_peak_memory_stats()."""
    state = {"resets": 0, "devices": [], "step": 0, "since": 0}
    torch.cuda.is_initialized = lambda: True
    torch.cuda.current_device = lambda: 0
    torch.cuda.max_memory_allocated = lambda device=None: max(
        own_allocated_peak(j) for j in range(state["since"], state["step"] + 1))
    torch.cuda.max_memory_reserved = lambda device=None: 4096 * (state["step"] + 1)
    torch.cuda.memory_allocated = lambda device=None: 100 * (state["step"] + 1)
    torch.cuda.memory_reserved = lambda device=None: 2048 * (state["step"] + 1)

    def reset(device=None) -> None:
        state["devices"].append(device)
        state["resets"] += 1
        state["since"] = state["step"] + 1
    torch.cuda.reset_peak_memory_stats = reset
    return state


def main(steps: int, accum: int, compile_model: bool, twice: bool, half_tokens: bool, checkpoint: str,
         fake_memory: bool = False, reset_peak_memory: bool = False) -> None:
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
    handle = traintime.torch.instrument(model, opt, depth=2, dataloader=loader, tokens_per_batch=tokens,
                                        reset_peak_memory=reset_peak_memory)
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
        if fake_memory:
            memory["step"] += 1
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
    ap.add_argument("--reset-peak-memory", action="store_true", help="instrument(reset_peak_memory=True)")
    a = ap.parse_args()
    main(a.steps, a.accum, a.compile, a.twice, a.half_tokens, a.checkpoint, a.fake_cuda_memory,
         a.reset_peak_memory)
