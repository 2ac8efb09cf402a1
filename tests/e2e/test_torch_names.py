"""Region names people recognise (pytest; CTest label e2e): `depth` counts the levels of the paths
instrument produces; a container that is never called (ModuleList, ModuleDict) spends no level but
keeps its name in its children's paths; the wrappers DDP, FSDP and activation checkpointing put
around a module spend neither; forward and backward name the same module alike. Debian's PyTorch
1.13 and PyPI's current one, under the preload."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from testlib import SOURCE_DIR, SYSTEM_PYTHON, Checks, clean_env, load_json, pyenv_python

GPT_LIKE = r'''
import json, os, sys
import torch
import torch.distributed as dist
import traintime.torch

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.Linear(8, 8)
        self.mlp = torch.nn.Linear(8, 8)
    def forward(self, x):
        return x + self.mlp(self.attn(x))

class Body(torch.nn.Module):  # GPT-2's shape: wte, h (a ModuleList of blocks), ln_f
    def __init__(self, wrap):
        super().__init__()
        self.wte = torch.nn.Embedding(16, 8)
        self.h = torch.nn.ModuleList([wrap(Block()), wrap(Block())])
        self.ln_f = torch.nn.LayerNorm(8)
    def forward(self, ids):
        x = self.wte(ids)
        for block in self.h:
            x = block(x)
        return self.ln_f(x)

class Model(torch.nn.Module):
    def __init__(self, wrap):
        super().__init__()
        self.transformer = Body(wrap)
        self.lm_head = torch.nn.Linear(8, 16)
    def forward(self, ids):
        return self.lm_head(self.transformer(ids))

mode = sys.argv[1]
wrap = lambda m: m
if mode == "checkpoint":
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    wrap = checkpoint_wrapper
model = Model(wrap)
if mode == "ddp":
    dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
    model = torch.nn.parallel.DistributedDataParallel(model)
layers = [(l.region, l.path, l.recompute_only) for l in traintime.torch._layers(model, 2, torch)]
opt = torch.optim.SGD(model.parameters(), lr=0.1)
traintime.torch.instrument(model, opt, depth=2)
for _ in range(3):
    ids = torch.randint(0, 16, (4, 5))
    model(ids).sum().backward()
    opt.step()
if mode == "ddp":
    dist.destroy_process_group()
print(json.dumps({"layers": layers, "torch": torch.__version__}))
'''

BLOCKS = ["transformer", "transformer/wte", "transformer/h/0", "transformer/h/1", "transformer/ln_f", "lm_head"]


def run(python: Path, build_dir: Path, tmp_path: Path, mode: str) -> tuple[dict, dict]:
    out = tmp_path / mode
    env = clean_env({"LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"), "TRAINTIME_OUTPUT": str(out),
                     "PYTHONPATH": str(SOURCE_DIR / "annotate" / "python")})
    p = subprocess.run([str(python), "-c", GPT_LIKE, mode, str(tmp_path / f"{mode}.store")], env=env,
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.splitlines()[-1]), load_json(out / "rank-00000.json")


def check_names(c: Checks, python: Path, build_dir: Path, tmp_path: Path) -> None:
    for mode in ("plain", "ddp", "checkpoint"):
        ran, doc = run(python, build_dir, tmp_path, mode)
        torch = ran["torch"]
        paths = [path for _, path, recompute_only in ran["layers"] if not recompute_only]
        c.check(paths == BLOCKS, f"{torch} {mode}: depth=2 layers {paths}")
        regions = {(r, p) for r, p, _ in ran["layers"]}
        # A block's region is named from its nearest region, the never-called h kept: h/0.
        c.check(("h/0", "transformer/h/0") in regions, f"{torch} {mode}: block regions {sorted(regions)}")
        rows = {r["path"] for r in doc["regions"]}
        for path in BLOCKS:
            c.check(f"forward/{path}" in rows, f"{torch} {mode}: no forward/{path} in {sorted(rows)}")
        # Backward ranges (PyTorch 2) carry the same paths as forward, never the wrapper's names.
        # (recompute's paths and reentrant checkpointing's inner backward are not module ranges)
        backward = {p for p in rows if p.startswith("backward/")
                    and not p.startswith(("backward/recompute", "backward/backward"))}
        c.check(torch.startswith("1.") or backward == {"backward/" + p for p in BLOCKS if p != "transformer/h"},
                f"{torch} {mode}: backward ranges {sorted(backward)}")
        c.check(all(p.replace("backward/", "forward/", 1) in rows for p in backward),
                f"{torch} {mode}: backward paths not named as forward's: {sorted(backward)}")
        c.check(not any(w in p for p in rows for w in ("module", "_checkpoint_wrapped_module")),
                f"{torch} {mode}: a wrapper's name in {sorted(rows)}")
        if mode == "checkpoint":
            # The wrapper's inner module opens its region only when checkpointing re-runs it.
            inner = [(r, p) for r, p, only in ran["layers"] if only]
            c.check(inner == [("h/0", "transformer/h/0"), ("h/1", "transformer/h/1")], f"{torch}: {inner}")


def test_depth_counts_path_levels_on_debian_torch(build_dir: Path, tmp_path: Path) -> None:
    c = Checks()
    check_names(c, SYSTEM_PYTHON, build_dir, tmp_path)
    c.done()


def test_depth_counts_path_levels_on_pypi_torch(build_dir: Path, tmp_path: Path) -> None:
    c = Checks()
    check_names(c, pyenv_python(build_dir), build_dir, tmp_path)
    c.done()
